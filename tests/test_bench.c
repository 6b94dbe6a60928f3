/* The benchmark's host side (no GPU needed): the command line, the targets
 * of bench/targets.json and their verdicts on hand-made rows, the CSV and
 * JSON files. */
#include "testutil.h"

#include "bench.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- command line ------------------------------------------------------ */

static int parse(bench_options *o, const char *const *args) {
  char *argv[32] = {"bench"};
  int argc = 1;
  for (; args[argc - 1]; argc++)
    argv[argc] = (char *)args[argc - 1];
  return bench_parse_options(argc, argv, o);
}

static void test_options(void **state) {
  (void)state;
  bench_options o;
  const char *none[] = {NULL};
  assert_int_equal(parse(&o, none), CLI_PARSED);
  assert_int_equal(o.nshapes, 9);
  assert_int_equal(o.nms, 9);
  assert_int_equal(o.ms[8], 4096);
  assert_int_equal(o.nbits, 1);
  assert_int_equal(o.bits[0], 6);
  assert_int_equal(o.ncbs, 1);
  assert_int_equal(o.cbs[0], TRELLIS_CB_MCG);
  assert_int_equal(o.reps, 20);
  assert_true(o.warmup_ms == 50.0);
  assert_null(o.targets_path);

  const char *quick_sweep[] = {"--quick", "--sweep", NULL};
  assert_int_equal(parse(&o, quick_sweep), CLI_PARSED);
  assert_int_equal(o.nshapes, 1);
  assert_int_equal(o.shapes[0].k, 8192);
  assert_int_equal(o.nbits, 4); /* 2, 4, 6, 8 */
  assert_int_equal(o.ncbs, 3);
  assert_int_equal(o.nms, 1);

  const char *explicit[] = {
      "4096",      "14336",      "512x6144", "--shapes", "256,128",
      "--m=1,16",  "--codebook", "3inst",    "--force",  "generic,dense",
      "--targets", "t.json",     NULL};
  assert_int_equal(parse(&o, explicit), CLI_PARSED);
  assert_int_equal(o.nshapes, 3);
  assert_int_equal(o.shapes[0].n, 14336);
  assert_int_equal(o.shapes[1].k, 512);
  assert_int_equal(o.shapes[2].n, 128);
  assert_int_equal(o.nms, 2);
  assert_int_equal(o.ms[1], 16);
  assert_int_equal(o.cbs[0], TRELLIS_CB_3INST);
  assert_int_equal(o.flags,
                   TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DENSE);
  assert_string_equal(o.targets_path, "t.json");

  /* --force names the plan flags of one table, which also names them in
   * the reports. */
  const char *every_flag[] = {"--force", "generic,decode,dense,legacy,exact",
                              NULL};
  assert_int_equal(parse(&o, every_flag), CLI_PARSED);
  uint32_t all = 0;
  for (int i = 0; i < bench_nflags; i++)
    all |= bench_flags[i].bit;
  assert_int_equal(o.flags, all);
  assert_int_equal(bench_nflags, 5);
  const char *legacy_exact[] = {"--force", "exact,legacy", NULL};
  assert_int_equal(parse(&o, legacy_exact), CLI_PARSED);
  assert_int_equal(o.flags,
                   TRELLIS_PLAN_LEGACY_KERNELS | TRELLIS_PLAN_EXACT_WEIGHTS);
  char fl[64];
  assert_string_equal(bench_flags_name(o.flags, fl, sizeof fl), "legacy+exact");
  assert_string_equal(bench_flags_name(0, fl, sizeof fl), "default");
  assert_string_equal(
      bench_flags_name(TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DENSE,
                       fl, sizeof fl),
      "generic+dense");
  const char *bad_force[] = {"--force", "generic,legacyy", NULL};
  assert_int_equal(parse(&o, bad_force), CLI_USAGE);
  const char *empty_force[] = {"--force", "", NULL};
  assert_int_equal(parse(&o, empty_force), CLI_USAGE);

  const char *odd_shape[] = {"4096", NULL};
  assert_int_equal(parse(&o, odd_shape), CLI_USAGE);
  const char *not_128[] = {"4096x100", NULL};
  assert_int_equal(parse(&o, not_128), CLI_USAGE);
  const char *flag_value[] = {"--quick=1", NULL};
  assert_int_equal(parse(&o, flag_value), CLI_USAGE);
  const char *bad_cb[] = {"--codebook", "mcg,nope", NULL};
  assert_int_equal(parse(&o, bad_cb), CLI_USAGE);
  const char *unknown[] = {"--frobnicate", NULL};
  assert_int_equal(parse(&o, unknown), CLI_USAGE);
}

/* ---- targets --------------------------------------------------------------
 */

static void test_shipped_targets(void **state) {
  (void)state;
  bench_targets t;
  assert_int_equal(bench_targets_load(TRELLIS_BENCH_TARGETS_FILE, &t), CLI_OK);
  assert_int_equal(t.count, 6);
  static const bench_rule rules[6] = {
      BENCH_RULE_READ_PEAK,     BENCH_RULE_FLOOR,
      BENCH_RULE_FASTER_CUBLAS, BENCH_RULE_DECODE_RATE,
      BENCH_RULE_CUBLAS_RATIO,  BENCH_RULE_LAUNCH_OVERHEAD};
  for (int i = 0; i < 6; i++) {
    assert_int_equal(t.def[i].id, i + 1);
    assert_int_equal(t.def[i].rule, rules[i]);
  }
  assert_int_equal(t.def[0].bits, 6);
  assert_int_equal(t.def[0].cb, TRELLIS_CB_MCG);
  assert_true(t.def[0].min_bytes == 32e6);
  assert_true(t.def[1].max_bytes == 32e6);
  assert_int_equal(t.def[2].growth_from_m, 16);
  assert_int_equal(t.def[3].cb, -1);
  assert_string_equal(t.source, "PERFORMANCE.md");
  /* With no --targets the default file is found (the source tree's here). */
  bench_targets d;
  assert_int_equal(bench_targets_load(NULL, &d), CLI_OK);
  assert_int_equal(d.count, 6);
}

static void test_bad_targets(void **state) {
  (void)state;
  bench_targets t;
  static const char *const bad[] = {
      "not json",
      "{\"targets\": 3}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": \"fastest\"}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": \"floor\", "
      "\"limit\": {\"fraction\": 0.85}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"cublas_ratio\", \"limit\": {\"ratio\": 1.25, \"typo\": 1}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"cublas_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": "
      "{\"codebook\": \"nope\"}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"cublas_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"m\": 1}}]}",
      "{\"targets\": [{\"target\": \"x\", \"rule\": \"read_peak\", "
      "\"limit\": {\"pct\": 85}}]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(bench_targets_parse(bad[i], "bad.json", &t), CLI_FAIL);
  assert_int_equal(bench_targets_load("/nonexistent/targets.json", &t),
                   CLI_FAIL);
}

static bench_row make_row(int64_t k, int64_t n, int64_t m, double graph_us,
                          double cublas_kn, double cublas_nk) {
  bench_row r = {.k = k,
                 .n = n,
                 .m = m,
                 .bits = 6,
                 .cb = TRELLIS_CB_MCG,
                 .path = TRELLIS_PATH_FUSED,
                 .copies = 2,
                 .launches = 20,
                 .replays = 20,
                 .weight_bytes = (double)k * (double)n * 6 / 8,
                 .graph_us = graph_us,
                 .eager_us = graph_us + 2,
                 .cublas_kn_us = cublas_kn,
                 .cublas_nk_us = cublas_nk,
                 .rel_l2 = 3e-4,
                 .check_rows = 16,
                 .check_ok = 1};
  return r;
}

typedef struct fixture {
  bench_env env;
  bench_options o;
  bench_results res;
  bench_targets defs;
  bench_target t[BENCH_MAX_TARGETS];
} fixture;

/* Rows of both sizes at every M a target looks at, one forced row, the
 * launch overhead; read peak 4000 GB/s. */
static void fixture_init(fixture *f) {
  memset(f, 0, sizeof *f);
  snprintf(f->env.gpu, sizeof f->env.gpu, "Test GPU (sm_90)");
  snprintf(f->env.date, sizeof f->env.date, "2026-01-01T00:00:00Z");
  snprintf(f->env.commit, sizeof f->env.commit, "abc1234");
  f->env.read_peak_gbs = 4000.0;
  f->env.cold_bytes = 256u << 20;
  f->env.max_m = 4096;
  const char *none[] = {NULL};
  assert_int_equal(parse(&f->o, none), CLI_PARSED);
  assert_int_equal(bench_targets_load(TRELLIS_BENCH_TARGETS_FILE, &f->defs),
                   CLI_OK);
  const bench_row rows[] = {
      make_row(8192, 28672, 1, 50.0, 400.0, 380.0),
      make_row(8192, 28672, 16, 55.0, 420.0, 410.0),
      make_row(8192, 28672, 128, 120.0, 110.0, NAN),
      make_row(4096, 4096, 1, 5.0, 9.0, 8.0),
      make_row(4096, 4096, 16, 7.0, 9.0, 8.0),
      make_row(4096, 4096, 128, 20.0, 30.0, 31.0),
      make_row(8192, 28672, 4096, 1000.0, 900.0, 950.0),
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    assert_int_equal(bench_results_add(&f->res, &rows[i]), CLI_OK);
  bench_row forced = make_row(8192, 28672, 1, 1000.0, 400.0, 380.0);
  forced.flags = TRELLIS_PLAN_FORCE_GENERIC; /* never counted */
  assert_int_equal(bench_results_add(&f->res, &forced), CLI_OK);
  bench_overhead ov = {.measured = 1,
                       .k = 8192,
                       .n = 28672,
                       .bits = 6,
                       .cb = TRELLIS_CB_MCG,
                       .copies = 2,
                       .lrun_launches = 20,
                       .cycled_us = 21.0,
                       .single_us = 18.0,
                       .lrun_us = 20.0,
                       .eager_us = 25.0};
  f->res.overhead = ov;
  f->res.complete = 1;
}

static void eval(fixture *f) {
  bench_eval_targets(&f->env, &f->o, &f->res, &f->defs, f->t);
}

static void test_target_verdicts(void **state) {
  (void)state;
  fixture *f = malloc(sizeof *f);
  assert_non_null(f);
  fixture_init(f);
  eval(f);
  static const struct {
    int status;
    const char *detail;
  } want[6] = {
      {BENCH_MISSED, "1 of 2 rows below; worst 8192x28672 K6 mcg M=16: 80.1% "
                     "of peak (55.00 us; 85% is 51.81 us)"},
      {BENCH_MISSED, "1 of 2 rows over; worst 4096x4096 K6 mcg M=16: 7.00 us "
                     "vs limit 5.65 us (floor 3.15 us)"},
      {BENCH_MISSED,
       "1 of 2 rows not faster; worst 8192x28672 K6 mcg M=128: 120.00 us vs "
       "cuBLAS 110.00 us (0.92x); time(M=128)/time(M=16) at most 2.86 "
       "(4096x4096 K6 mcg M=128; ~8 would mean one weight pass per 16 rows)"},
      {BENCH_MET, "0 of 1 rows below; worst 8192x28672 K6 mcg M=1: 4.70 T "
                  "weights/s (88.1% of peak) vs 4.50 T/s needed (partial: run "
                  "--sweep for every K/codebook)"},
      {BENCH_MET, "0 of 1 rows over; worst 8192x28672 K6 mcg M=4096: 1000.0 "
                  "us vs cuBLAS 900.0 us (1.11x of cuBLAS time)"},
      {BENCH_MET, "8192x28672 K6 mcg: 21.00 us/launch cycling 2 cold copies "
                  "(L=20 run: 20.00 us; limit 22.00 us); same plan 100x "
                  "(L2-warm when it fits): 18.00 us/launch; eager: 25.00 "
                  "us/launch"},
  };
  for (int i = 0; i < 6; i++) {
    assert_int_equal(f->t[i].id, i + 1);
    assert_int_equal(f->t[i].status, want[i].status);
    assert_string_equal(f->t[i].detail, want[i].detail);
    assert_string_equal(f->t[i].what, f->defs.def[i].what);
  }

  /* A failed check misses every target its row counts for. */
  f->res.rows[0].check_ok = 0;
  f->res.rows[6].check_ok = 0;
  eval(f);
  assert_int_equal(f->t[3].status, BENCH_MISSED);
  assert_non_null(strstr(f->t[3].detail, "1 of 1 rows below"));
  assert_non_null(strstr(f->t[3].detail, "check FAIL"));
  assert_int_equal(f->t[4].status, BENCH_MISSED);

  /* No rows of a kind, no overhead: n/a. */
  f->res.count = 0;
  f->res.overhead.measured = 0;
  eval(f);
  for (int i = 0; i < 6; i++)
    assert_int_equal(f->t[i].status, BENCH_NA);
  assert_string_equal(f->t[0].detail, "no rows of this kind were run");
  assert_string_equal(f->t[5].detail, "not measured");
  bench_results_free(&f->res);
  free(f);
}

/* ---- files ----------------------------------------------------------------
 */

static void test_files(void **state) {
  (void)state;
  fixture *f = malloc(sizeof *f);
  assert_non_null(f);
  fixture_init(f);
  eval(f);
  char *json_path = tu_tmp_path("bench.json");
  char *csv_path = tu_tmp_path("bench.csv");
  assert_int_equal(
      bench_write_json(json_path, &f->env, &f->o, &f->res, &f->defs, f->t),
      CLI_OK);
  assert_int_equal(bench_write_csv(csv_path, &f->env, &f->res), CLI_OK);

  json_error_t e;
  json_t *doc = json_load_file(json_path, 0, &e);
  if (doc == NULL)
    fail_msg("%s: %s", json_path, e.text);
  assert_string_equal(json_string_value(json_object_get(doc, "tool")),
                      "trellis bench");
  assert_string_equal(json_string_value(json_object_get(doc, "commit")),
                      "abc1234");
  assert_true(json_real_value(json_object_get(doc, "read_peak_gbs")) == 4000.0);
  json_t *method = json_object_get(doc, "method");
  assert_int_equal(json_integer_value(json_object_get(method, "warmup_ms")),
                   50);
  assert_true(json_is_false(json_object_get(method, "sweep")));
  json_t *rows = json_object_get(doc, "rows");
  assert_int_equal(json_array_size(rows), f->res.count);
  json_t *r2 = json_array_get(rows, 2);
  assert_int_equal(json_integer_value(json_object_get(r2, "m")), 128);
  assert_string_equal(json_string_value(json_object_get(r2, "codebook")),
                      "mcg");
  assert_true(json_is_null(json_object_get(r2, "cublas_nk_us")));
  assert_true(json_real_value(json_object_get(r2, "cublas_us")) == 110.0);
  assert_string_equal(json_string_value(json_object_get(r2, "cublas_layout")),
                      "kn");
  assert_true(json_real_value(json_object_get(r2, "speedup")) == 0.917);
  assert_true(json_real_value(json_object_get(r2, "rel_l2")) == 3e-4);
  assert_int_equal(json_integer_value(json_object_get(r2, "weight_bytes")),
                   8192LL * 28672 * 6 / 8);
  json_t *forced = json_array_get(rows, 7);
  assert_string_equal(json_string_value(json_object_get(forced, "flags")),
                      "generic");
  json_t *ov = json_object_get(doc, "launch_overhead");
  assert_int_equal(json_integer_value(json_object_get(ov, "launches")), 100);
  assert_true(json_real_value(json_object_get(ov, "cycled_us")) == 21.0);
  json_t *targets = json_object_get(doc, "targets");
  assert_int_equal(json_array_size(targets), 6);
  assert_string_equal(
      json_string_value(json_object_get(json_array_get(targets, 0), "status")),
      "MISSED");
  assert_true(json_is_true(json_object_get(doc, "complete")));
  json_decref(doc);

  size_t size = 0;
  uint8_t *csv = tu_read_file(csv_path, &size);
  char *text = calloc(size + 1, 1);
  assert_non_null(text);
  memcpy(text, csv, size);
  assert_true(strncmp(text, "gpu,date,commit,read_peak_gbs,k,n,bits,", 39) ==
              0);
  assert_non_null(strstr(text,
                         "\n\"Test GPU (sm_90)\",\"2026-01-01T00:00:00Z\","
                         "\"abc1234\",4000.0,8192,28672,6,mcg,128,"
                         "fused,default,120.000,122.000,"));
  free(text);
  free(csv);
  free(json_path);
  free(csv_path);
  bench_results_free(&f->res);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_shipped_targets),
      cmocka_unit_test(test_bad_targets),
      cmocka_unit_test(test_target_verdicts),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
