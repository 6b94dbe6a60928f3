/* `trellis bench` output: the headline, one table row per (shape, M, bits,
 * codebook), CSV and JSON with the same fields, and the targets block of
 * PERFORMANCE.md evaluated from the measured rows. Plain C (both builds). */
#include "bench.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* snprintf that truncates quietly (paths, details): the caller's buffers are
 * sized for normal use and a cut line is harmless. */
static void sfmt(char *out, size_t size, const char *fmt, ...) CLI_PRINTF(3, 4);
static void sfmt(char *out, size_t size, const char *fmt, ...) {
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

/* "default", "generic", "generic+dense", ... */
static const char *flags_name(uint32_t flags, char *buf, size_t size) {
  static const struct {
    uint32_t bit;
    const char *name;
  } names[] = {{TRELLIS_PLAN_FORCE_GENERIC, "generic"},
               {TRELLIS_PLAN_FORCE_DECODE, "decode"},
               {TRELLIS_PLAN_FORCE_DENSE, "dense"}};
  if (flags == 0)
    return "default";
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (flags & names[i].bit) {
      size_t len = strlen(buf);
      sfmt(buf + len, size - len, "%s%s", len ? "+" : "", names[i].name);
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

static int read_first_line(const char *path, char *out, size_t size) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  int ok = fgets(out, (int)size, f) != NULL;
  fclose(f);
  if (ok)
    out[strcspn(out, "\r\n")] = '\0';
  return ok;
}

static int is_hash(const char *s) {
  size_t i = 0;
  for (; s[i]; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return i >= 7;
}

/* Looks `ref` up as a loose ref or in packed-refs under `dir`. */
static int lookup_ref(const char *dir, const char *ref, char *out,
                      size_t size) {
  char path[4096], line[1024];
  sfmt(path, sizeof path, "%s/%s", dir, ref);
  if (read_first_line(path, out, size) && is_hash(out))
    return 1;
  sfmt(path, sizeof path, "%s/packed-refs", dir);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    char *sp = strchr(line, ' ');
    if (sp && strcmp(sp + 1, ref) == 0) {
      *sp = '\0';
      if (is_hash(line)) {
        sfmt(out, size, "%s", line);
        found = 1;
      }
    }
  }
  fclose(f);
  return found;
}

/* HEAD of a git directory (also a worktree's, via its commondir). */
static int git_head(const char *gitdir, char *out, size_t size) {
  char head[1024], path[4096], common[4096];
  sfmt(path, sizeof path, "%s/HEAD", gitdir);
  if (!read_first_line(path, head, sizeof head))
    return 0;
  if (strncmp(head, "ref: ", 5) != 0) {
    sfmt(out, size, "%s", head);
    return is_hash(out);
  }
  if (lookup_ref(gitdir, head + 5, out, size))
    return 1;
  sfmt(path, sizeof path, "%s/commondir", gitdir);
  if (!read_first_line(path, common, sizeof common))
    return 0;
  if (common[0] != '/') {
    char rel[4096];
    sfmt(rel, sizeof rel, "%s", common);
    sfmt(common, sizeof common, "%s/%s", gitdir, rel);
  }
  return lookup_ref(common, head + 5, out, size);
}

/* Walks up from `dir` looking for .git (a directory, or a file naming one). */
static int git_commit_from(const char *start, char *out, size_t size) {
  char dir[4096], path[4200], line[4096];
  sfmt(dir, sizeof dir, "%s", start);
  for (int depth = 0; depth < 12 && dir[0]; depth++) {
    struct stat st;
    sfmt(path, sizeof path, "%s/.git", dir);
    if (stat(path, &st) == 0) {
      if (S_ISDIR(st.st_mode))
        return git_head(path, out, size);
      if (read_first_line(path, line, sizeof line) &&
          strncmp(line, "gitdir: ", 8) == 0) {
        if (line[8] == '/')
          sfmt(path, sizeof path, "%s", line + 8);
        else
          sfmt(path, sizeof path, "%s/%s", dir, line + 8);
        return git_head(path, out, size);
      }
      return 0;
    }
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
      return 0;
    if (slash == dir) {
      if (dir[1] == '\0')
        return 0;
      dir[1] = '\0'; /* try "/" last */
    } else {
      *slash = '\0';
    }
  }
  return 0;
}

void bench_stamp(bench_env *env) {
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm) == NULL ||
      strftime(env->date, sizeof env->date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    sfmt(env->date, sizeof env->date, "unknown");

  const char *c = getenv("TRELLIS_COMMIT");
  char hash[128] = "";
  if (c && c[0]) {
    sfmt(env->commit, sizeof env->commit, "%s", c);
    return;
  }
  char dir[4096];
  int found =
      getcwd(dir, sizeof dir) && git_commit_from(dir, hash, sizeof hash);
  if (!found) {
    ssize_t len = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (len > 0) {
      dir[len] = '\0';
      char *slash = strrchr(dir, '/');
      if (slash && slash != dir)
        *slash = '\0';
      found = git_commit_from(dir, hash, sizeof hash);
    }
  }
  if (found)
    sfmt(env->commit, sizeof env->commit, "%.7s", hash);
  else
    sfmt(env->commit, sizeof env->commit, "unknown");
}

/* ---- stdout ---------------------------------------------------------------
 */

void bench_print_headline(const bench_env *env, const bench_options *o) {
  char fl[64];
  printf("trellis bench (libtrellis %s), commit %s, %s\n",
         trellis_version_string(), env->commit, env->date);
  printf("GPU: %s, %d SMs, L2 %.1f MiB, memory %.1f GiB\n", env->gpu,
         env->sm_count, (double)env->l2_bytes / (1 << 20),
         (double)env->mem_bytes / (1 << 30));
  printf("HBM read peak: %.1f GB/s (16-byte loads, grid-stride, %.0f GiB "
         "buffer, median of %d)\n",
         env->read_peak_gbs, (double)BENCH_READ_BYTES / (1 << 30),
         BENCH_READ_REPS);
  printf("method: weights cold (C >= 2 distinct copies, C x payload >= %.0f "
         "MiB = max(256 MiB, 4 x L2)); CUDA-graph replay of L = max(C, %d) "
         "launches cycling the copies, >= %d and >= %.0f ms of warm-up + %d "
         "timed replays, median "
         "per launch; eager = the same L launches without a graph; fp16 x/y, "
         "plan max_m %lld, flags %s; random inputs; first min(M, %d) rows "
         "checked against the CPU reference (rel L2 <= %.0e) before timing\n",
         (double)env->cold_bytes / (1 << 20), BENCH_MIN_LAUNCHES, BENCH_WARMUP,
         o->warmup_ms, o->reps, (long long)env->max_m,
         flags_name(o->flags, fl, sizeof fl), BENCH_CHECK_ROWS,
         BENCH_CHECK_TOL);
  printf("cuBLAS: cuBLASLt fp16 GEMM y[M,n] = x[M,k] W, fp32 compute, fp16 "
         "out, heuristic algorithm, %d MiB workspace, cold fp16 copies, same "
         "graph method; best of W[k,n] (kn) and W[n,k] (nk) row-major\n",
         (int)(BENCH_LT_WORKSPACE >> 20));
  printf("weight bytes = k*n*K/8 (the trellis payload; the fp16 suh/svh "
         "scales, 2(k+n) bytes, are < 0.1%% and not counted); GB/s = 1e9 "
         "B/s; speedup = cuBLAS us / ours (graph) us\n\n");
  fflush(stdout);
}

void bench_print_table_header(const bench_options *o) {
  printf("| %-11s | %2s | %-5s | %4s | %-7s | %9s | %9s | %8s | %6s |%s "
         "%12s | %7s | %-12s |\n",
         "k x n", "K", "cb", "M", "path", "graph us", "eager us", "wt GB/s",
         "%peak", o->sweep ? "  T w/s |" : "", "cuBLAS us", "speedup", "check");
  printf("|-------------|----|-------|------|---------|-----------|---------"
         "--|----------|--------|%s--------------|---------|--------------|\n",
         o->sweep ? "--------|" : "");
  fflush(stdout);
}

void bench_print_row(const bench_env *env, const bench_options *o,
                     const bench_row *r) {
  char shape[32], tws[32] = "", cub[32];
  sfmt(shape, sizeof shape, "%lldx%lld", (long long)r->k, (long long)r->n);
  if (o->sweep)
    sfmt(tws, sizeof tws, " %6.3f |", bench_row_tws(r));
  double c = bench_row_cublas(r);
  if (isnan(c))
    sfmt(cub, sizeof cub, "-");
  else
    sfmt(cub, sizeof cub, "%.2f %s", c, bench_row_cublas_layout(r));
  printf("| %-11s | %2d | %-5s | %4lld | %-7s | %9.2f | %9.2f | %8.1f | "
         "%5.1f%% |%s %12s | %6.2fx | %s %.1e |\n",
         shape, r->bits, trellis_codebook_name(r->cb), (long long)r->m,
         trellis_path_name(r->path), r->graph_us, r->eager_us, bench_row_gbs(r),
         bench_row_pct(r, env->read_peak_gbs), tws, cub, bench_row_speedup(r),
         r->check_ok ? "PASS" : "FAIL", r->rel_l2);
  fflush(stdout);
}

/* ---- targets --------------------------------------------------------------
 */

static void row_name(const bench_row *r, char *buf, size_t size) {
  sfmt(buf, size, "%lldx%lld K%d %s M=%lld", (long long)r->k, (long long)r->n,
       r->bits, trellis_codebook_name(r->cb), (long long)r->m);
}

/* A target over rows: each row gets a score, <= 1 meets it (bigger = worse);
 * failed checks always miss. */
typedef struct tally {
  int rows, missed;
  const bench_row *worst;
  double worst_score;
} tally;

static void tally_add(tally *t, const bench_row *r, double score) {
  if (!r->check_ok || isnan(score))
    score = INFINITY;
  t->rows++;
  if (!(score <= 1.0))
    t->missed++;
  if (t->worst == NULL || score > t->worst_score) {
    t->worst = r;
    t->worst_score = score;
  }
}

static void tally_status(bench_target *t, const tally *y) {
  if (y->rows == 0) {
    t->status = BENCH_NA;
    sfmt(t->detail, sizeof t->detail, "no rows of this kind were run");
  } else {
    t->status = y->missed ? BENCH_MISSED : BENCH_MET;
  }
}

/* Target 4's rate in T decoded weights/s at K bits: min(85% of the read
 * peak, 4.5 T/s). */
static double target4_need(double peak_gbs, int bits) {
  return fmin(0.85 * peak_gbs * 1e9 * 8.0 / bits / 1e12, 4.5);
}

static int is_small_m_k6(const bench_row *r) {
  return r->flags == 0 && r->bits == 6 && r->cb == TRELLIS_CB_MCG &&
         r->m >= 1 && r->m <= 16;
}

void bench_eval_targets(const bench_env *env, const bench_options *o,
                        const bench_results *res,
                        bench_target out[BENCH_TARGETS]) {
  const double peak = env->read_peak_gbs;
  char name[96];
  memset(out, 0, BENCH_TARGETS * sizeof *out);
  for (int i = 0; i < BENCH_TARGETS; i++)
    out[i].id = i + 1;

  /* 1: K6/MCG, M = 1..16, layers >= 32 MB: >= 85% of read peak. */
  tally y = {0};
  bench_target *t = &out[0];
  sfmt(t->what, sizeof t->what,
       "K6/MCG, M = 1..16, layers >= 32 MB: >= 85%% of read peak");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (is_small_m_k6(r) && r->weight_bytes >= BENCH_BIG_LAYER)
      tally_add(&y, r, 85.0 / bench_row_pct(r, peak));
  }
  tally_status(t, &y);
  if (y.rows) {
    const bench_row *w = y.worst;
    row_name(w, name, sizeof name);
    sfmt(t->detail, sizeof t->detail,
         "%d of %d rows below; worst %s: %.1f%% of peak (%.2f us; 85%% "
         "is %.2f us)%s",
         y.missed, y.rows, name, bench_row_pct(w, peak), w->graph_us,
         w->weight_bytes / (0.85 * peak * 1e9) * 1e6,
         w->check_ok ? "" : ", check FAIL");
  }

  /* 2: layers < 32 MB: <= max(floor / 0.85, floor + 2.5 us). */
  memset(&y, 0, sizeof y);
  t = &out[1];
  sfmt(t->what, sizeof t->what,
       "K6/MCG, M = 1..16, layers < 32 MB: <= max(floor / 0.85, floor + "
       "2.5 us)");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (is_small_m_k6(r) && r->weight_bytes < BENCH_BIG_LAYER) {
      double floor_us = r->weight_bytes / (peak * 1e9) * 1e6;
      double lim = fmax(floor_us / 0.85, floor_us + 2.5);
      tally_add(&y, r, r->graph_us / lim);
    }
  }
  tally_status(t, &y);
  if (y.rows) {
    const bench_row *w = y.worst;
    double floor_us = w->weight_bytes / (peak * 1e9) * 1e6;
    row_name(w, name, sizeof name);
    sfmt(t->detail, sizeof t->detail,
         "%d of %d rows over; worst %s: %.2f us vs limit %.2f us (floor "
         "%.2f us)%s",
         y.missed, y.rows, name, w->graph_us,
         fmax(floor_us / 0.85, floor_us + 2.5), floor_us,
         w->check_ok ? "" : ", check FAIL");
  }

  /* 3: M = 128 faster than FP16 cuBLAS (and the weight streamed once). */
  memset(&y, 0, sizeof y);
  t = &out[2];
  sfmt(t->what, sizeof t->what,
       "M = 128: faster than FP16 cuBLAS (weight streamed once)");
  double worst_growth = 0.0;
  const bench_row *growth_row = NULL;
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (r->flags || r->m != 128)
      continue;
    tally_add(&y, r, r->graph_us / bench_row_cublas(r) * (1.0 + 1e-12));
    for (size_t j = 0; j < res->count; j++) {
      const bench_row *s = &res->rows[j];
      if (s->m == 16 && s->k == r->k && s->n == r->n && s->bits == r->bits &&
          s->cb == r->cb && s->flags == r->flags &&
          r->graph_us / s->graph_us > worst_growth) {
        worst_growth = r->graph_us / s->graph_us;
        growth_row = r;
      }
    }
  }
  tally_status(t, &y);
  if (y.rows) {
    const bench_row *w = y.worst;
    char growth[256] = "";
    row_name(w, name, sizeof name);
    if (growth_row) {
      char gname[96];
      row_name(growth_row, gname, sizeof gname);
      sfmt(growth, sizeof growth,
           "; time(M=128)/time(M=16) at most %.2f (%s; ~8 would mean "
           "one weight pass per 16 rows)",
           worst_growth, gname);
    }
    sfmt(t->detail, sizeof t->detail,
         "%d of %d rows not faster; worst %s: %.2f us vs cuBLAS %.2f us "
         "(%.2fx)%s%s",
         y.missed, y.rows, name, w->graph_us, bench_row_cublas(w),
         bench_row_speedup(w), w->check_ok ? "" : ", check FAIL", growth);
  }

  /* 4: every K and codebook at M = 1, layers >= 32 MB: at least
   * min(85% of read peak, 4.5 T decoded weights/s). */
  memset(&y, 0, sizeof y);
  t = &out[3];
  sfmt(t->what, sizeof t->what,
       "every K and codebook, M = 1, layers >= 32 MB: >= min(85%% of read "
       "peak, 4.5 T weights/s)");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (r->flags || r->m != 1 || r->weight_bytes < BENCH_BIG_LAYER)
      continue;
    tally_add(&y, r, target4_need(peak, r->bits) / bench_row_tws(r));
  }
  tally_status(t, &y);
  if (y.rows) {
    const bench_row *w = y.worst;
    row_name(w, name, sizeof name);
    sfmt(t->detail, sizeof t->detail,
         "%d of %d rows below; worst %s: %.2f T weights/s (%.1f%% of "
         "peak) vs %.2f T/s needed%s%s",
         y.missed, y.rows, name, bench_row_tws(w), bench_row_pct(w, peak),
         target4_need(peak, w->bits), w->check_ok ? "" : ", check FAIL",
         o->sweep ? "" : " (partial: run --sweep for every K/codebook)");
  }

  /* 5: prefill M = 4096 within 1.25x of FP16 cuBLAS. */
  memset(&y, 0, sizeof y);
  t = &out[4];
  sfmt(t->what, sizeof t->what,
       "prefill M = 4096: within 1.25x of FP16 cuBLAS");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (!r->flags && r->m == 4096)
      tally_add(&y, r, r->graph_us / bench_row_cublas(r) / 1.25);
  }
  tally_status(t, &y);
  if (y.rows) {
    const bench_row *w = y.worst;
    row_name(w, name, sizeof name);
    sfmt(t->detail, sizeof t->detail,
         "%d of %d rows over; worst %s: %.1f us vs cuBLAS %.1f us "
         "(%.2fx of cuBLAS time)%s",
         y.missed, y.rows, name, w->graph_us, bench_row_cublas(w),
         w->graph_us / bench_row_cublas(w), w->check_ok ? "" : ", check FAIL");
  }

  /* 6: 100 small-M launches in one graph, no per-launch host work. */
  t = &out[5];
  sfmt(t->what, sizeof t->what,
       "%d M = 1 launches in one graph replay, no per-launch host work",
       BENCH_OVERHEAD_LAUNCHES);
  const bench_overhead *ov = &res->overhead;
  if (!ov->measured) {
    t->status = BENCH_NA;
    sfmt(t->detail, sizeof t->detail, "not measured");
  } else {
    double lim = fmax(1.10 * ov->lrun_us, ov->lrun_us + 0.5);
    t->status = ov->cycled_us <= lim ? BENCH_MET : BENCH_MISSED;
    sfmt(t->detail, sizeof t->detail,
         "%lldx%lld K%d %s: %.2f us/launch cycling %d cold copies (L=%d "
         "run: %.2f us; limit %.2f us); same plan %dx (L2-warm when it "
         "fits): %.2f us/launch; eager: %.2f us/launch",
         (long long)ov->k, (long long)ov->n, ov->bits,
         trellis_codebook_name(ov->cb), ov->cycled_us, ov->copies,
         ov->lrun_launches, ov->lrun_us, lim, BENCH_OVERHEAD_LAUNCHES,
         ov->single_us, ov->eager_us);
  }
}

static const char *status_name(int s) {
  return s == BENCH_MET ? "MET" : s == BENCH_MISSED ? "MISSED" : "n/a";
}

void bench_print_targets(const bench_env *env,
                         const bench_target t[BENCH_TARGETS]) {
  printf("\ntargets (PERFORMANCE.md; %s, read peak %.1f GB/s, commit %s):\n",
         env->gpu, env->read_peak_gbs, env->commit);
  for (int i = 0; i < BENCH_TARGETS; i++)
    printf("  %d. %-6s %s\n            %s\n", t[i].id, status_name(t[i].status),
           t[i].what, t[i].detail);
  fflush(stdout);
}

/* ---- CSV ------------------------------------------------------------------
 */

static void csv_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void csv_num(FILE *f, const char *fmt, double v) {
  if (isfinite(v))
    fprintf(f, fmt, v);
}

int bench_write_csv(const char *path, const bench_env *env,
                    const bench_results *res) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("--csv %s: cannot open for writing", path);
    return CLI_FAIL;
  }
  fprintf(f, "gpu,date,commit,read_peak_gbs,k,n,bits,codebook,m,path,flags,"
             "graph_us,eager_us,weight_bytes,weight_gbs,pct_read_peak,"
             "tweights_per_s,cublas_us,cublas_layout,cublas_kn_us,"
             "cublas_nk_us,speedup,check,rel_l2,check_rows,copies,launches,"
             "replays\n");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    char fl[64];
    csv_str(f, env->gpu);
    fputc(',', f);
    csv_str(f, env->date);
    fputc(',', f);
    csv_str(f, env->commit);
    fprintf(f, ",%.1f,%lld,%lld,%d,%s,%lld,%s,%s,", env->read_peak_gbs,
            (long long)r->k, (long long)r->n, r->bits,
            trellis_codebook_name(r->cb), (long long)r->m,
            trellis_path_name(r->path), flags_name(r->flags, fl, sizeof fl));
    csv_num(f, "%.3f", r->graph_us);
    fputc(',', f);
    csv_num(f, "%.3f", r->eager_us);
    fprintf(f, ",%.0f,", r->weight_bytes);
    csv_num(f, "%.1f", bench_row_gbs(r));
    fputc(',', f);
    csv_num(f, "%.2f", bench_row_pct(r, env->read_peak_gbs));
    fputc(',', f);
    csv_num(f, "%.4f", bench_row_tws(r));
    fputc(',', f);
    csv_num(f, "%.3f", bench_row_cublas(r));
    fprintf(f, ",%s,", bench_row_cublas_layout(r));
    csv_num(f, "%.3f", r->cublas_kn_us);
    fputc(',', f);
    csv_num(f, "%.3f", r->cublas_nk_us);
    fputc(',', f);
    csv_num(f, "%.3f", bench_row_speedup(r));
    fprintf(f, ",%s,", r->check_ok ? "PASS" : "FAIL");
    csv_num(f, "%.3e", r->rel_l2);
    fprintf(f, ",%d,%d,%d,%d\n", r->check_rows, r->copies, r->launches,
            r->replays);
  }
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    cli_error("--csv %s: write failed", path);
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* ---- JSON -----------------------------------------------------------------
 */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void json_num(FILE *f, const char *fmt, double v) {
  if (isfinite(v))
    fprintf(f, fmt, v);
  else
    fputs("null", f);
}

static void json_key_str(FILE *f, const char *key, const char *v) {
  fprintf(f, "\"%s\": ", key);
  json_str(f, v);
}

static void json_key_num(FILE *f, const char *key, const char *fmt, double v) {
  fprintf(f, "\"%s\": ", key);
  json_num(f, fmt, v);
}

int bench_write_json(const char *path, const bench_env *env,
                     const bench_options *o, const bench_results *res,
                     const bench_target t[BENCH_TARGETS]) {
  FILE *f = fopen(path, "w");
  char fl[64];
  if (f == NULL) {
    cli_error("--json %s: cannot open for writing", path);
    return CLI_FAIL;
  }
  fputs("{\n  ", f);
  json_key_str(f, "tool", "trellis bench");
  fputs(",\n  ", f);
  json_key_str(f, "version", trellis_version_string());
  fputs(",\n  ", f);
  json_key_str(f, "gpu", env->gpu);
  fprintf(f,
          ",\n  \"sm_count\": %d,\n  \"l2_bytes\": %zu,\n"
          "  \"memory_bytes\": %zu,\n  ",
          env->sm_count, env->l2_bytes, env->mem_bytes);
  json_key_num(f, "read_peak_gbs", "%.1f", env->read_peak_gbs);
  fputs(",\n  ", f);
  json_key_str(f, "date", env->date);
  fputs(",\n  ", f);
  json_key_str(f, "commit", env->commit);
  fprintf(f,
          ",\n  \"method\": {\"cold_bytes\": %zu, \"min_launches\": %d, "
          "\"warmup\": %d, \"warmup_ms\": %.0f, \"replays\": %d, "
          "\"max_m\": %lld, ",
          env->cold_bytes, BENCH_MIN_LAUNCHES, BENCH_WARMUP, o->warmup_ms,
          o->reps, (long long)env->max_m);
  json_key_str(f, "flags", flags_name(o->flags, fl, sizeof fl));
  fprintf(f,
          ", \"sweep\": %s, \"check_rows\": %d, \"check_tol\": %g, "
          "\"cublas_workspace_bytes\": %llu},\n  \"rows\": [",
          o->sweep ? "true" : "false", BENCH_CHECK_ROWS, BENCH_CHECK_TOL,
          (unsigned long long)BENCH_LT_WORKSPACE);
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    fprintf(f, "%s\n    {\"k\": %lld, \"n\": %lld, \"bits\": %d, ",
            i ? "," : "", (long long)r->k, (long long)r->n, r->bits);
    json_key_str(f, "codebook", trellis_codebook_name(r->cb));
    fprintf(f, ", \"m\": %lld, ", (long long)r->m);
    json_key_str(f, "path", trellis_path_name(r->path));
    fputs(", ", f);
    json_key_str(f, "flags", flags_name(r->flags, fl, sizeof fl));
    fputs(", ", f);
    json_key_num(f, "graph_us", "%.3f", r->graph_us);
    fputs(", ", f);
    json_key_num(f, "eager_us", "%.3f", r->eager_us);
    fputs(", ", f);
    json_key_num(f, "weight_bytes", "%.0f", r->weight_bytes);
    fputs(", ", f);
    json_key_num(f, "weight_gbs", "%.1f", bench_row_gbs(r));
    fputs(", ", f);
    json_key_num(f, "pct_read_peak", "%.2f",
                 bench_row_pct(r, env->read_peak_gbs));
    fputs(", ", f);
    json_key_num(f, "tweights_per_s", "%.4f", bench_row_tws(r));
    fputs(", ", f);
    json_key_num(f, "cublas_us", "%.3f", bench_row_cublas(r));
    fputs(", ", f);
    json_key_str(f, "cublas_layout", bench_row_cublas_layout(r));
    fputs(", ", f);
    json_key_num(f, "cublas_kn_us", "%.3f", r->cublas_kn_us);
    fputs(", ", f);
    json_key_num(f, "cublas_nk_us", "%.3f", r->cublas_nk_us);
    fputs(", ", f);
    json_key_num(f, "speedup", "%.3f", bench_row_speedup(r));
    fputs(", ", f);
    json_key_str(f, "check", r->check_ok ? "PASS" : "FAIL");
    fputs(", ", f);
    json_key_num(f, "rel_l2", "%.3e", r->rel_l2);
    fprintf(f,
            ", \"check_rows\": %d, \"copies\": %d, \"launches\": %d, "
            "\"replays\": %d}",
            r->check_rows, r->copies, r->launches, r->replays);
  }
  fputs("\n  ],\n  \"launch_overhead\": ", f);
  const bench_overhead *ov = &res->overhead;
  if (!ov->measured) {
    fputs("null", f);
  } else {
    fprintf(f, "{\"k\": %lld, \"n\": %lld, \"bits\": %d, ", (long long)ov->k,
            (long long)ov->n, ov->bits);
    json_key_str(f, "codebook", trellis_codebook_name(ov->cb));
    fprintf(f, ", \"m\": 1, \"launches\": %d, \"copies\": %d, ",
            BENCH_OVERHEAD_LAUNCHES, ov->copies);
    json_key_num(f, "cycled_us", "%.3f", ov->cycled_us);
    fputs(", ", f);
    json_key_num(f, "single_plan_us", "%.3f", ov->single_us);
    fputs(", ", f);
    json_key_num(f, "lrun_us", "%.3f", ov->lrun_us);
    fprintf(f, ", \"lrun_launches\": %d, ", ov->lrun_launches);
    json_key_num(f, "eager_us", "%.3f", ov->eager_us);
    fputc('}', f);
  }
  fputs(",\n  \"targets\": [", f);
  for (int i = 0; i < BENCH_TARGETS; i++) {
    fprintf(f, "%s\n    {\"id\": %d, ", i ? "," : "", t[i].id);
    json_key_str(f, "status", status_name(t[i].status));
    fputs(", ", f);
    json_key_str(f, "target", t[i].what);
    fputs(", ", f);
    json_key_str(f, "detail", t[i].detail);
    fputc('}', f);
  }
  fprintf(f, "\n  ],\n  \"failed_checks\": %d,\n  \"complete\": %s\n}\n",
          res->failed_checks, res->complete ? "true" : "false");
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    cli_error("--json %s: write failed", path);
    return CLI_FAIL;
  }
  return CLI_OK;
}
