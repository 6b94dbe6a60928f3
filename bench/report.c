/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's stdout: derived numbers of a row, the headline, one table
 * row per (shape, M, bits, codebook) as it is measured; the run's date and
 * commit. Plain C (both builds). */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void bench_sfmt(char *out, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(out, size, fmt, ap);
  va_end(ap);
}

/* ---- derived numbers ----------------------------------------------------- */

double bench_row_gbs(const bench_row *r) {
  return r->weight_bytes / (r->graph_us * 1e-6) / 1e9;
}

double bench_row_pct(const bench_row *r, double peak_gbs) {
  return 100.0 * bench_row_gbs(r) / peak_gbs;
}

double bench_row_tws(const bench_row *r) {
  return (double)r->k * (double)r->n / (r->graph_us * 1e-6) / 1e12;
}

double bench_row_cublas(const bench_row *r) {
  double a = r->cublas_kn_us, b = r->cublas_nk_us;
  if (isnan(a))
    return b;
  if (isnan(b))
    return a;
  return a < b ? a : b;
}

const char *bench_row_cublas_layout(const bench_row *r) {
  double best = bench_row_cublas(r);
  if (isnan(best))
    return "";
  return best == r->cublas_kn_us ? "kn" : "nk";
}

double bench_row_speedup(const bench_row *r) {
  return bench_row_cublas(r) / r->graph_us;
}

double bench_row_vs_fp8(const bench_row *r) { return r->fp8.us / r->graph_us; }

double bench_row_vs_generic(const bench_row *r) {
  return r->generic_us / r->graph_us;
}

double bench_row_vs_mcg(const bench_row *r) { return r->mcg_us / r->graph_us; }

int bench_row_b12x(const bench_row *r) {
  return r->pair != TRELLIS_PAIR_NONE || cli_codebook_is_sqg(r->cb);
}

const char *bench_row_rate(const bench_row *r, char *buf, size_t size) {
  return cli_rate_text(r->bits, r->half, buf, size);
}

const char *bench_row_format(const bench_row *r, char *buf, size_t size) {
  if (r->pair == TRELLIS_PAIR_NONE)
    bench_sfmt(buf, size, "%s", trellis_codebook_name(r->cb));
  else
    bench_sfmt(buf, size, "%s/%s%s", trellis_codebook_name(r->cb),
               trellis_pair_kind_name(r->pair),
               trellis_rate_axis_name(r->rate_axis));
  return buf;
}

const bench_flag bench_flags[] = {
    {TRELLIS_PLAN_FORCE_GENERIC, "generic"},
    {TRELLIS_PLAN_FORCE_DECODE, "decode"},
    {TRELLIS_PLAN_FORCE_DENSE, "dense"},
    {TRELLIS_PLAN_LEGACY_KERNELS, "legacy"},
    {TRELLIS_PLAN_EXACT_WEIGHTS, "exact"},
    {TRELLIS_PLAN_NO_DEPENDENT_LAUNCH, "nopdl"},
    {BENCH_FLAG_KMAJOR, "kmajor"},
};
const int bench_nflags = (int)(sizeof bench_flags / sizeof bench_flags[0]);

const char *bench_flags_name(uint32_t flags, char *buf, size_t size) {
  if (flags == 0)
    return "default";
  buf[0] = '\0';
  for (int i = 0; i < bench_nflags; i++)
    if (flags & bench_flags[i].bit) {
      size_t len = strlen(buf);
      bench_sfmt(buf + len, size - len, "%s%s", len ? "+" : "",
                 bench_flags[i].name);
    }
  return buf;
}

/* ---- results ------------------------------------------------------------- */

int bench_results_add(bench_results *res, const bench_row *row) {
  if (res->count == res->cap) {
    size_t cap = res->cap ? 2 * res->cap : 64;
    bench_row *rows = realloc(res->rows, cap * sizeof *rows);
    if (rows == NULL) {
      cli_error("bench: out of host memory (result rows)");
      return CLI_FAIL;
    }
    res->rows = rows;
    res->cap = cap;
  }
  res->rows[res->count++] = *row;
  return CLI_OK;
}

void bench_results_free(bench_results *res) {
  free(res->rows);
  memset(res, 0, sizeof *res);
}

/* ---- date and commit ------------------------------------------------------
 */

void bench_stamp(bench_env *env) {
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL ||
      strftime(env->date, sizeof env->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    bench_sfmt(env->date, sizeof env->date, "unknown");
  const char *c = getenv("TRELLIS_COMMIT");
  if (c == NULL || c[0] == '\0')
    c = bench_configured_commit[0] ? bench_configured_commit : "unknown";
  bench_sfmt(env->commit, sizeof env->commit, "%s", c);
}

/* ---- stdout ---------------------------------------------------------------
 */

void bench_print_env(const bench_env *env, const char *command) {
  printf("%s (libtrellis %s), commit %s, %s\n", command,
         trellis_version_string(), env->commit, env->date);
  printf("GPU: %s, %d SMs, L2 %.1f MiB, memory %.1f GiB\n", env->gpu,
         env->sm_count, (double)env->l2_bytes / (1 << 20),
         (double)env->mem_bytes / (1 << 30));
  printf("HBM read peak: %.1f GB/s (16-byte loads, grid-stride, %.0f GiB "
         "buffer, median of %d)\n",
         env->read_peak_gbs, (double)BENCH_READ_BYTES / (1 << 30),
         BENCH_READ_REPS);
}

void bench_print_headline(const bench_env *env, const bench_options *o) {
  char fl[64];
  bench_print_env(env, "trellis bench");
  printf("method: weights cold (C >= 2 distinct copies, C x payload >= %.0f "
         "MiB = max(256 MiB, 4 x L2)); CUDA-graph replay of L = max(C, %d) "
         "launches cycling the copies, >= %d and >= %.0f ms of warm-up + %d "
         "timed replays, median "
         "per launch; eager = the same L launches without a graph; fp16 x/y, "
         "plan max_m %lld, flags %s; random inputs; first min(M, %d) rows "
         "checked against the CPU reference (rel L2 <= %.0e) before timing\n",
         (double)env->cold_bytes / (1 << 20), BENCH_MIN_LAUNCHES, BENCH_WARMUP,
         o->warmup_ms, o->reps, (long long)env->max_m,
         bench_flags_name(o->flags, fl, sizeof fl), BENCH_CHECK_ROWS,
         BENCH_CHECK_TOL);
  printf("cuBLAS: cuBLASLt fp16 GEMM y[M,n] = x[M,k] W, fp32 compute, fp16 "
         "out, heuristic algorithm, %d MiB workspace, cold fp16 copies, same "
         "graph method; best of W[k,n] (kn) and W[n,k] (nk) row-major\n",
         (int)(BENCH_LT_WORKSPACE >> 20));
  printf("FP8: cuBLASLt W8A8 GEMM, E4M3 weight W[n,k] and activations x[M,k] "
         "(both K-major, the TN layout FP8 needs), per-tensor scales (A/B "
         "scale pointers, fp32 1.0), fp32 compute, fp16 out; M rounded up to "
         "a multiple of %d (m, n, k multiples of 16); activation quantisation "
         "NOT counted; fastest of up to %d heuristic algorithms, cold E4M3 "
         "copies, same graph method; checked once per shape against the CPU "
         "(first %d columns, rel L2 <= %.0e); n/a where cuBLASLt has no FP8 "
         "algorithm\n",
         BENCH_FP8_M_MULTIPLE, BENCH_FP8_ALGOS, BENCH_FP8_CHECK_COLS,
         BENCH_FP8_CHECK_TOL);
  if (o->b12x)
    printf("b12x formats (SQG codebooks, pairs; count for no target): vs MCG "
           "= MCG us / ours us, the MCG row of the same layer, M and flags "
           "at K = the row's bits per weight (a pair: (K0 + K1) / 2), i.e. "
           "the ratio of decoded weights/s; a pair's layer is 256 x orth, "
           "no cuBLAS/FP8 peers\n");
  if (o->with_generic)
    printf("generic: the same launches with TRELLIS_PLAN_FORCE_GENERIC added "
           "(graph time, checked like the row); rows not on the fused path "
           "run the generic launches already and repeat their own figures\n");
  printf("weight bytes = k*n*K/8 (the trellis payload; the fp16 suh/svh "
         "scales, 2(k+n) bytes, are < 0.1%% and not counted); GB/s = 1e9 "
         "B/s; speedup = cuBLAS us / ours (graph) us; vs FP8 = FP8 us / ours "
         "us%s\n\n",
         o->with_generic ? "; vs gen = generic us / ours us" : "");
  fflush(stdout);
}

void bench_print_table_header(const bench_options *o) {
  printf("| %-11s | %3s | %-5s | %4s | %-7s | %9s | %9s | %8s | %6s |%s "
         "%12s | %7s | %9s | %7s |%s%s %-12s |\n",
         "k x n", "K", "cb", "M", "path", "graph us", "eager us", "wt GB/s",
         "%peak", o->sweep || o->b12x ? "  T w/s |" : "", "cuBLAS us",
         "speedup", "FP8 us", "vs FP8",
         o->with_generic ? " generic us |  vs gen |" : "",
         o->b12x ? " vs MCG |" : "", "check");
  printf("|-------------|-----|-------|------|---------|-----------|--------"
         "---|----------|--------|%s--------------|---------|-----------|-----"
         "----|%s%s--------------|\n",
         o->sweep || o->b12x ? "--------|" : "",
         o->with_generic ? "------------|---------|" : "",
         o->b12x ? "--------|" : "");
  fflush(stdout);
}

/* "12.34", or "n/a" where not measured. */
static void us_cell(char *out, size_t size, double us) {
  if (isnan(us))
    bench_sfmt(out, size, "n/a");
  else
    bench_sfmt(out, size, "%.2f", us);
}

static void ratio_cell(char *out, size_t size, double ratio) {
  if (isnan(ratio))
    bench_sfmt(out, size, "n/a");
  else
    bench_sfmt(out, size, "%.2fx", ratio);
}

void bench_print_row(const bench_env *env, const bench_options *o,
                     const bench_row *r) {
  char shape[32], tws[32] = "", cub[32], f8[32], vf8[32], gen[64] = "";
  char vmcg[32] = "", fmt[48];
  bench_sfmt(shape, sizeof shape, "%lldx%lld", (long long)r->k,
             (long long)r->n);
  if (o->sweep || o->b12x)
    bench_sfmt(tws, sizeof tws, " %6.3f |", bench_row_tws(r));
  if (o->b12x) {
    char v[32];
    ratio_cell(v, sizeof v, bench_row_vs_mcg(r));
    bench_sfmt(vmcg, sizeof vmcg, " %6s |", v);
  }
  double c = bench_row_cublas(r);
  if (isnan(c))
    bench_sfmt(cub, sizeof cub, "-");
  else
    bench_sfmt(cub, sizeof cub, "%.2f %s", c, bench_row_cublas_layout(r));
  us_cell(f8, sizeof f8, r->fp8.us);
  ratio_cell(vf8, sizeof vf8, bench_row_vs_fp8(r));
  if (o->with_generic) {
    char g[32], vg[32];
    us_cell(g, sizeof g, r->generic_us);
    if (!isnan(r->generic_us) && !r->generic_ok) /* its check failed */
      bench_sfmt(g, sizeof g, "FAIL %.2f", r->generic_us);
    ratio_cell(vg, sizeof vg, bench_row_vs_generic(r));
    bench_sfmt(gen, sizeof gen, " %10s | %7s |", g, vg);
  }
  char rate[16];
  printf("| %-11s | %3s | %-5s | %4lld | %-7s | %9.2f | %9.2f | %8.1f | "
         "%5.1f%% |%s %12s | %6.2fx | %9s | %7s |%s%s %s %.1e |\n",
         shape, bench_row_rate(r, rate, sizeof rate),
         bench_row_format(r, fmt, sizeof fmt), (long long)r->m,
         trellis_path_name(r->path), r->graph_us, r->eager_us, bench_row_gbs(r),
         bench_row_pct(r, env->read_peak_gbs), tws, cub, bench_row_speedup(r),
         f8, vf8, gen, vmcg, r->check_ok ? "PASS" : "FAIL", r->rel_l2);
  fflush(stdout);
}
