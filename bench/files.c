/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's files: the rows as CSV (--csv) and everything as JSON
 * (--json: the machine, the method, the rows, the launch overhead and the
 * targets). Plain C (both builds). */
#include "bench.h"
#include "tools/out_file.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- output files ---------------------------------------------------------
 */

int bench_out_open(bench_out *out, const char *option, const char *path) {
  out->buf = NULL;
  out->len = 0;
  out->failed = 0;
  out->option = option;
  out->path = path;
  out->f = open_memstream(&out->buf, &out->len);
  if (out->f == NULL) {
    cli_error("%s %s: out of host memory", option, path);
    return CLI_FAIL;
  }
  return CLI_OK;
}

int bench_out_close(bench_out *out) {
  const int bad = ferror(out->f) || out->failed;
  int r = fclose(out->f) != 0 || bad ? CLI_FAIL : CLI_OK;
  if (r != CLI_OK)
    cli_error("%s %s: out of host memory", out->option, out->path);
  else {
    trellis_clear_error();
    if (out_file_write(out->path, out->buf, out->len, NULL, 0) != TRELLIS_OK) {
      cli_error("%s: %s", out->option, trellis_last_error());
      r = CLI_FAIL;
    }
  }
  free(out->buf);
  out->f = NULL;
  out->buf = NULL;
  return r;
}

/* ---- CSV ------------------------------------------------------------------
 */

void bench_csv_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

void bench_csv_num(FILE *f, const char *fmt, double v) {
  if (isfinite(v))
    fprintf(f, fmt, v);
}

int bench_write_csv(const char *path, const bench_env *env,
                    const bench_results *res) {
  bench_out out;
  if (bench_out_open(&out, "--csv", path) != CLI_OK)
    return CLI_FAIL;
  FILE *f = out.f;
  fprintf(f, "gpu,date,commit,read_peak_gbs,k,n,bits,codebook,m,path,flags,"
             "graph_us,eager_us,weight_bytes,weight_gbs,pct_read_peak,"
             "tweights_per_s,cublas_us,cublas_layout,cublas_kn_us,"
             "cublas_nk_us,speedup,check,rel_l2,check_rows,copies,launches,"
             "replays,fp8_us,vs_fp8,fp8_m,fp8_out,fp8_algos,fp8_rel_l2,"
             "generic_us,vs_generic,generic_check,generic_rel_l2\n");
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    char fl[64], fmt[48];
    bench_csv_str(f, env->gpu);
    fputc(',', f);
    bench_csv_str(f, env->date);
    fputc(',', f);
    bench_csv_str(f, env->commit);
    char rate[16];
    fprintf(
        f, ",%.1f,%lld,%lld,%s,%s,%lld,%s,%s,", env->read_peak_gbs,
        (long long)r->k, (long long)r->n, bench_row_rate(r, rate, sizeof rate),
        bench_row_format(r, fmt, sizeof fmt), (long long)r->m,
        trellis_path_name(r->path), bench_flags_name(r->flags, fl, sizeof fl));
    bench_csv_num(f, "%.3f", r->graph_us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", r->eager_us);
    fprintf(f, ",%.0f,", r->weight_bytes);
    bench_csv_num(f, "%.1f", bench_row_gbs(r));
    fputc(',', f);
    bench_csv_num(f, "%.2f", bench_row_pct(r, env->read_peak_gbs));
    fputc(',', f);
    bench_csv_num(f, "%.4f", bench_row_tws(r));
    fputc(',', f);
    bench_csv_num(f, "%.3f", bench_row_cublas(r));
    fprintf(f, ",%s,", bench_row_cublas_layout(r));
    bench_csv_num(f, "%.3f", r->cublas_kn_us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", r->cublas_nk_us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", bench_row_speedup(r));
    fprintf(f, ",%s,", r->check_ok ? "PASS" : "FAIL");
    bench_csv_num(f, "%.3e", r->rel_l2);
    fprintf(f, ",%d,%d,%d,%d,", r->check_rows, r->copies, r->launches,
            r->replays);
    bench_csv_num(f, "%.3f", r->fp8.us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", bench_row_vs_fp8(r));
    fprintf(f, ",%lld,%s,%d,", (long long)r->fp8.m,
            trellis_dtype_name(r->fp8.out), r->fp8.algos);
    bench_csv_num(f, "%.3e", r->fp8.rel_l2);
    fputc(',', f);
    bench_csv_num(f, "%.3f", r->generic_us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", bench_row_vs_generic(r));
    fprintf(f, ",%s,",
            isnan(r->generic_us) ? ""
            : r->generic_ok      ? "PASS"
                                 : "FAIL");
    bench_csv_num(f, "%.3e", r->generic_rel_l2);
    fputc('\n', f);
  }
  return bench_out_close(&out);
}

/* ---- JSON -----------------------------------------------------------------
 */

/* A measured number rounded as `fmt` prints it (the figures carry no more
 * digits than were measured); null when not finite (not measured). */
static json_t *num(const char *fmt, double v) {
  char text[64];
  if (!isfinite(v))
    return json_null();
  snprintf(text, sizeof text, fmt, v);
  return json_real(strtod(text, NULL));
}

static json_t *json_row(const bench_env *env, const bench_row *r) {
  char fl[64], fmt[48];
  json_t *row = json_pack(
      "{s:I, s:I, s:o, s:s, s:I, s:s, s:s, s:o, s:o, s:I, s:o, s:o, s:o, "
      "s:o, s:s, s:o, s:o, s:o, s:s, s:o, s:i, s:i, s:i, s:i}",
      "k", (json_int_t)r->k, "n", (json_int_t)r->n, "bits",
      r->half ? json_real(r->bits + 0.5) : json_integer(r->bits), "codebook",
      bench_row_format(r, fmt, sizeof fmt), "m", (json_int_t)r->m, "path",
      trellis_path_name(r->path), "flags",
      bench_flags_name(r->flags, fl, sizeof fl), "graph_us",
      num("%.3f", r->graph_us), "eager_us", num("%.3f", r->eager_us),
      "weight_bytes", (json_int_t)r->weight_bytes, "weight_gbs",
      num("%.1f", bench_row_gbs(r)), "pct_read_peak",
      num("%.2f", bench_row_pct(r, env->read_peak_gbs)), "tweights_per_s",
      num("%.4f", bench_row_tws(r)), "cublas_us",
      num("%.3f", bench_row_cublas(r)), "cublas_layout",
      bench_row_cublas_layout(r), "cublas_kn_us", num("%.3f", r->cublas_kn_us),
      "cublas_nk_us", num("%.3f", r->cublas_nk_us), "speedup",
      num("%.3f", bench_row_speedup(r)), "check", r->check_ok ? "PASS" : "FAIL",
      "rel_l2", num("%.3e", r->rel_l2), "check_rows", r->check_rows, "copies",
      r->copies, "launches", r->launches, "replays", r->replays);
  json_t *more = json_pack(
      "{s:o, s:o, s:I, s:s, s:i, s:o, s:o, s:o, s:o, s:o}", "fp8_us",
      num("%.3f", r->fp8.us), "vs_fp8", num("%.3f", bench_row_vs_fp8(r)),
      "fp8_m", (json_int_t)r->fp8.m, "fp8_out", trellis_dtype_name(r->fp8.out),
      "fp8_algos", r->fp8.algos, "fp8_rel_l2", num("%.3e", r->fp8.rel_l2),
      "generic_us", num("%.3f", r->generic_us), "vs_generic",
      num("%.3f", bench_row_vs_generic(r)), "generic_check",
      isnan(r->generic_us) ? json_null()
                           : json_string(r->generic_ok ? "PASS" : "FAIL"),
      "generic_rel_l2", num("%.3e", r->generic_rel_l2));
  if (row && more && json_object_update(row, more) == 0) {
    json_decref(more);
    return row;
  }
  json_decref(row);
  json_decref(more);
  return NULL;
}

static json_t *json_overhead(const bench_overhead *ov) {
  if (!ov->measured)
    return json_null();
  return json_pack(
      "{s:I, s:I, s:i, s:s, s:i, s:i, s:i, s:o, s:o, s:o, s:i, s:o}", "k",
      (json_int_t)ov->k, "n", (json_int_t)ov->n, "bits", ov->bits, "codebook",
      trellis_codebook_name(ov->cb), "m", 1, "launches",
      BENCH_OVERHEAD_LAUNCHES, "copies", ov->copies, "cycled_us",
      num("%.3f", ov->cycled_us), "single_plan_us", num("%.3f", ov->single_us),
      "lrun_us", num("%.3f", ov->lrun_us), "lrun_launches", ov->lrun_launches,
      "eager_us", num("%.3f", ov->eager_us));
}

static json_t *json_report(const bench_env *env, const bench_options *o,
                           const bench_results *res, const bench_targets *defs,
                           const bench_target *t) {
  char fl[64];
  json_t *rows = json_array(), *targets = json_array();
  for (size_t i = 0; rows && i < res->count; i++)
    json_array_append_new(rows, json_row(env, &res->rows[i]));
  for (int i = 0; targets && i < defs->count; i++)
    json_array_append_new(
        targets, json_pack("{s:i, s:s, s:s, s:s, s:b}", "id", t[i].id, "status",
                           bench_status_name(t[i].status), "target", t[i].what,
                           "detail", t[i].detail, "stretch", t[i].stretch));
  json_t *method = json_pack(
      "{s:I, s:i, s:i, s:I, s:i, s:I, s:s, s:b, s:i, s:f, s:I, s:b, s:o}",
      "cold_bytes", (json_int_t)env->cold_bytes, "min_launches",
      BENCH_MIN_LAUNCHES, "warmup", BENCH_WARMUP, "warmup_ms",
      (json_int_t)o->warmup_ms, "replays", o->reps, "max_m",
      (json_int_t)env->max_m, "flags",
      bench_flags_name(o->flags, fl, sizeof fl), "sweep", o->sweep,
      "check_rows", BENCH_CHECK_ROWS, "check_tol", BENCH_CHECK_TOL,
      "cublas_workspace_bytes", (json_int_t)BENCH_LT_WORKSPACE, "with_generic",
      o->with_generic, "fp8",
      json_pack("{s:s, s:s, s:s, s:i, s:i, s:b, s:i, s:f}", "gemm",
                "cuBLASLt y[M,n] = x[M,k] W^T, W[n,k] and x[M,k] E4M3 "
                "(K-major, TN), fp32 compute",
                "scales", "per-tensor A/B scale pointers, fp32 1.0", "values",
                "random finite E4M3 with |v| <= 1.875", "m_multiple",
                BENCH_FP8_M_MULTIPLE, "max_algorithms", BENCH_FP8_ALGOS,
                "activation_quantisation_counted", 0, "check_cols",
                BENCH_FP8_CHECK_COLS, "check_tol", BENCH_FP8_CHECK_TOL));
  return json_pack(
      "{s:s, s:s, s:s, s:i, s:I, s:I, s:o, s:s, s:s, s:o, s:o, "
      "s:o, s:s, s:o, s:i, s:i, s:b}",
      "tool", "trellis bench", "version", trellis_version_string(), "gpu",
      env->gpu, "sm_count", env->sm_count, "l2_bytes",
      (json_int_t)env->l2_bytes, "memory_bytes", (json_int_t)env->mem_bytes,
      "read_peak_gbs", num("%.1f", env->read_peak_gbs), "date", env->date,
      "commit", env->commit, "method", method, "rows", rows, "launch_overhead",
      json_overhead(&res->overhead), "targets_file", defs->path, "targets",
      targets, "failed_checks", res->failed_checks, "fp8_failed_checks",
      res->fp8_failed_checks, "complete", res->complete);
}

int bench_write_json(const char *path, const bench_env *env,
                     const bench_options *o, const bench_results *res,
                     const bench_targets *defs, const bench_target *t) {
  json_t *doc = json_report(env, o, res, defs, t);
  if (doc == NULL) {
    cli_error("--json %s: out of host memory", path);
    return CLI_FAIL;
  }
  bench_out out;
  if (bench_out_open(&out, "--json", path) != CLI_OK) {
    json_decref(doc);
    return CLI_FAIL;
  }
  out.failed =
      json_dumpf(doc, out.f, JSON_INDENT(2) | JSON_REAL_PRECISION(15)) != 0 ||
      fputc('\n', out.f) == EOF;
  json_decref(doc);
  return bench_out_close(&out);
}
