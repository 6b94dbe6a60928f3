/* SPDX-License-Identifier: Apache-2.0 */
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
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

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
  assert_int_equal(o.with_generic, 0);

  /* --with-generic: forced-generic times beside the rows (which must not
   * be forced generic themselves). */
  const char *with_generic[] = {"--with-generic", "--force", "legacy", NULL};
  assert_int_equal(parse(&o, with_generic), CLI_PARSED);
  assert_int_equal(o.with_generic, 1);
  assert_int_equal(o.flags, TRELLIS_PLAN_LEGACY_KERNELS);
  const char *generic_twice[] = {"--with-generic", "--force", "generic", NULL};
  assert_int_equal(parse(&o, generic_twice), CLI_USAGE);

  const char *quick_sweep[] = {"--quick", "--sweep", NULL};
  assert_int_equal(parse(&o, quick_sweep), CLI_PARSED);
  assert_int_equal(o.nshapes, 1);
  assert_int_equal(o.shapes[0].k, 8192);
  assert_int_equal(o.nbits, 5); /* 2, 2.5, 4, 6, 8 */
  assert_int_equal(o.bits[1], 2);
  assert_int_equal(o.half[1], 1);
  assert_int_equal(o.ncbs, 3);
  assert_int_equal(o.nms, 1);

  /* --sweep: K 1..8 and mul1's 1.5, 2.5, 3.5, in order */
  const char *sweep[] = {"--sweep", NULL};
  assert_int_equal(parse(&o, sweep), CLI_PARSED);
  assert_int_equal(o.nbits, 11);
  static const int sweep_h[11] = {2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16};
  for (int i = 0; i < 11; i++)
    assert_int_equal(2 * o.bits[i] + o.half[i], sweep_h[i]);
  const char *rates[] = {"--bits", "2.5,3,3.5", "--codebook", "mul1", NULL};
  assert_int_equal(parse(&o, rates), CLI_PARSED);
  assert_int_equal(o.nbits, 3);
  assert_int_equal(o.bits[0], 2);
  assert_int_equal(o.half[0], 1);
  assert_int_equal(o.half[1], 0);
  const char *bad_rate[] = {"--bits", "2.7", NULL};
  assert_int_equal(parse(&o, bad_rate), CLI_USAGE);
  const char *top_rate[] = {"--bits", "8.5", NULL};
  assert_int_equal(parse(&o, top_rate), CLI_USAGE);
  const char *half_model[] = {
      "--model", "preset:glm-tp4", "--bits", "3.36", "--codebook",
      "mul1",    "--head-bits",    "2.5",    NULL};
  assert_int_equal(parse(&o, half_model), CLI_PARSED);
  assert_int_equal(o.head_bits, 2);
  assert_int_equal(o.head_half, 1);
  assert_int_equal(o.cbs[0], TRELLIS_CB_MUL1);

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
  const char *every_flag[] = {
      "--force", "generic,decode,dense,legacy,exact,nopdl,kmajor", NULL};
  assert_int_equal(parse(&o, every_flag), CLI_PARSED);
  uint32_t all = 0;
  for (int i = 0; i < bench_nflags; i++)
    all |= bench_flags[i].bit;
  assert_int_equal(o.flags, all);
  assert_int_equal(bench_nflags, 7);
  /* kmajor is the benchmark's own: the upload's layout, not a plan flag */
  assert_int_equal(bench_plan_flags(o.flags), all & ~BENCH_FLAG_KMAJOR);
  assert_int_equal(bench_layout(o.flags), TRELLIS_LAYOUT_KMAJOR);
  assert_int_equal(bench_layout(TRELLIS_PLAN_FORCE_DENSE),
                   TRELLIS_LAYOUT_LANES);
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

/* --model and the options that go with it. */
static void test_model_options(void **state) {
  (void)state;
  bench_options o;
  const char *dflt[] = {"--model", "preset:llama-3.1-8b", NULL};
  assert_int_equal(parse(&o, dflt), CLI_PARSED);
  assert_string_equal(o.model, "preset:llama-3.1-8b");
  assert_int_equal(o.nms, 4);
  assert_int_equal(o.ms[0], 1);
  assert_int_equal(o.ms[3], 128);
  assert_true(o.model_bits == 4.0);
  assert_int_equal(o.blocks, 0);
  assert_int_equal(o.head_bits, 6);
  assert_int_equal(o.cbs[0], TRELLIS_CB_MCG);
  assert_int_equal(o.reps, 20);
  assert_int_equal(o.no_peers, 0);

  const char *full[] = {"--model",    "preset:glm-tp4", "--bits",
                        "3.36",       "--blocks",       "4",
                        "--m",        "1,16",           "--head-bits",
                        "16",         "--codebook",     "mul1",
                        "--no-peers", "--reps",         "5",
                        "--force",    "generic",        NULL};
  assert_int_equal(parse(&o, full), CLI_PARSED);
  assert_true(o.model_bits == 3.36);
  assert_int_equal(o.blocks, 4);
  assert_int_equal(o.nms, 2);
  assert_int_equal(o.ms[1], 16);
  assert_int_equal(o.head_bits, 16);
  assert_int_equal(o.cbs[0], TRELLIS_CB_MUL1);
  assert_int_equal(o.no_peers, 1);
  assert_int_equal(o.reps, 5);
  assert_int_equal(o.flags, TRELLIS_PLAN_FORCE_GENERIC);

  const char *dir[] = {"--model", "/some/dir", "--m", "8", NULL};
  assert_int_equal(parse(&o, dir), CLI_PARSED);
  assert_string_equal(o.model, "/some/dir");

  static const char *const bad[][8] = {
      {"--model", "/some/dir", "--bits", "4", NULL}, /* a preset's option */
      {"--model", "preset:glm-tp4", "--bits", "9", NULL},
      {"--model", "preset:glm-tp4", "--bits", "4x", NULL},
      {"--model", "preset:glm-tp4", "--head-bits", "9", NULL},
      {"--model", "preset:glm-tp4", "--codebook", "mcg,mul1", NULL},
      {"--model", "preset:glm-tp4", "4096", "4096", NULL},
      {"--model", "preset:glm-tp4", "--sweep", NULL},
      {"--blocks", "2", NULL}, /* without --model */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    if (parse(&o, bad[i]) != CLI_USAGE)
      fail_msg("case %zu (%s %s) was accepted", i, bad[i][0], bad[i][1]);
}

/* The b12x rows: SQG codebooks and pairs beside MCG. */
static void test_b12x_options(void **state) {
  (void)state;
  bench_options o;
  const char *sqg[] = {"--codebook", "mcg,sqg_e4m3,sqg_fp16", NULL};
  assert_int_equal(parse(&o, sqg), CLI_PARSED);
  assert_int_equal(o.ncbs, 3);
  assert_int_equal(o.cbs[1], TRELLIS_CB_SQG_E4M3);
  assert_int_equal(o.cbs[2], TRELLIS_CB_SQG_FP16);
  assert_int_equal(o.npairs, 0);
  assert_true(o.b12x);
  assert_int_equal(o.nshapes, 9); /* the default shapes */

  const char *pairs[] = {"--pair", "p24,P33",   "--rate-axis", "k",
                         "--orth", "3584,7168", NULL};
  assert_int_equal(parse(&o, pairs), CLI_PARSED);
  assert_int_equal(o.npairs, 2);
  assert_int_equal(o.pairs[0], TRELLIS_PAIR_P24);
  assert_int_equal(o.pairs[1], TRELLIS_PAIR_P33);
  assert_int_equal(o.rate_axis, TRELLIS_RATE_AXIS_K);
  assert_int_equal(o.norths, 2);
  assert_int_equal(o.orths[0], 3584);
  assert_int_equal(o.nshapes, 0); /* --pair alone: the pair layers only */
  assert_int_equal(o.ncbs, 2);    /* the codebooks that pair */
  assert_int_equal(o.cbs[0], TRELLIS_CB_MCG);
  assert_int_equal(o.cbs[1], TRELLIS_CB_SQG_E4M3);
  assert_true(o.b12x);
  const char *one[] = {"--pair", "p44", NULL};
  assert_int_equal(parse(&o, one), CLI_PARSED);
  assert_int_equal(o.rate_axis, TRELLIS_RATE_AXIS_N);
  assert_int_equal(o.norths, 1);
  assert_int_equal(o.orths[0], 7168);

  const char *bad_pair[] = {"--pair", "p25", NULL};
  assert_int_equal(parse(&o, bad_pair), CLI_USAGE);
  const char *bad_axis[] = {"--pair", "p24", "--rate-axis", "m", NULL};
  assert_int_equal(parse(&o, bad_axis), CLI_USAGE);
  const char *no_pair[] = {"--orth", "4096", NULL};
  assert_int_equal(parse(&o, no_pair), CLI_USAGE);
  const char *bad_orth[] = {"--pair", "p24", "--orth", "200", NULL};
  assert_int_equal(parse(&o, bad_orth), CLI_USAGE);
  const char *plain[] = {"--codebook", "mcg,3inst", NULL};
  assert_int_equal(parse(&o, plain), CLI_PARSED);
  assert_false(o.b12x);

  /* the rows' format names and the vs MCG ratio; b12x rows count for no
   * target */
  bench_row r = {.k = 7168,
                 .n = 256,
                 .m = 1,
                 .bits = 2,
                 .cb = TRELLIS_CB_SQG_E4M3,
                 .graph_us = 4.0,
                 .pair = TRELLIS_PAIR_P24,
                 .rate_axis = TRELLIS_RATE_AXIS_N,
                 .mcg_us = 3.0};
  char buf[48];
  assert_string_equal(bench_row_format(&r, buf, sizeof buf), "sqg_e4m3/P24n");
  assert_true(fabs(bench_row_vs_mcg(&r) - 0.75) < 1e-12);
  assert_true(bench_row_b12x(&r));
  r.pair = TRELLIS_PAIR_NONE;
  assert_string_equal(bench_row_format(&r, buf, sizeof buf), "sqg_e4m3");
  assert_true(bench_row_b12x(&r));
  r.cb = TRELLIS_CB_MCG;
  assert_false(bench_row_b12x(&r));
}

/* ---- targets --------------------------------------------------------------
 */

static void test_shipped_targets(void **state) {
  (void)state;
  bench_targets t;
  assert_int_equal(bench_targets_load(TRELLIS_BENCH_TARGETS_FILE, &t), CLI_OK);
  assert_int_equal(t.count, 10);
  static const struct {
    int id, stretch;
    bench_rule rule;
  } want[10] = {
      {1, 0, BENCH_RULE_FP8_RATIO},    {1, 1, BENCH_RULE_READ_PEAK},
      {2, 0, BENCH_RULE_DECODE_RATE},  {3, 0, BENCH_RULE_FASTER_CUBLAS},
      {3, 1, BENCH_RULE_FP8_RATIO},    {4, 0, BENCH_RULE_FASTER_CUBLAS},
      {4, 0, BENCH_RULE_GROWTH},       {5, 0, BENCH_RULE_GENERIC_RATIO},
      {6, 0, BENCH_RULE_CUBLAS_RATIO}, {7, 0, BENCH_RULE_LAUNCH_OVERHEAD}};
  for (int i = 0; i < 10; i++) {
    assert_int_equal(t.def[i].id, want[i].id);
    assert_int_equal(t.def[i].stretch, want[i].stretch);
    assert_int_equal(t.def[i].rule, want[i].rule);
  }
  /* 1: the two large layers, K6/MCG, M = 1..16, as fast as FP8. */
  assert_int_equal(t.def[0].bits, 6);
  assert_int_equal(t.def[0].cb, TRELLIS_CB_MCG);
  assert_int_equal(t.def[0].m_min, 1);
  assert_int_equal(t.def[0].m_max, 16);
  assert_int_equal(t.def[0].nshapes, 2);
  assert_int_equal(t.def[0].shapes[0].k, 8192);
  assert_int_equal(t.def[0].shapes[0].n, 28672);
  assert_int_equal(t.def[0].shapes[1].k, 28672);
  assert_true(t.def[0].ratio == 1.0);
  assert_true(t.def[1].pct == 85.0);
  assert_int_equal(t.def[1].nshapes, 2);
  /* 2: K1..K5, every codebook, M = 1 on 8192x28672: the cap alone. */
  assert_int_equal(t.def[2].bits_min, 1);
  assert_int_equal(t.def[2].bits_max, 5);
  assert_int_equal(t.def[2].cb, -1);
  assert_int_equal(t.def[2].m_max, 1);
  assert_int_equal(t.def[2].nshapes, 1);
  assert_true(isinf(t.def[2].pct));
  assert_true(t.def[2].cap_tweights == 4.5);
  assert_int_equal(t.def[2].monotonic, 1);
  /* 3: four small layers. */
  assert_int_equal(t.def[3].nshapes, 4);
  assert_int_equal(t.def[3].shapes[2].k, 512);
  assert_int_equal(t.def[3].shapes[2].n, 6144);
  assert_int_equal(t.def[4].nshapes, 4);
  /* 4: M = 128; growth from M = 16 at most 2.5x on every layer. */
  assert_int_equal(t.def[5].m_min, 128);
  assert_int_equal(t.def[5].nshapes, 2);
  assert_int_equal(t.def[6].nshapes, 0);
  assert_int_equal(t.def[6].from_m, 16);
  assert_true(t.def[6].ratio == 2.5);
  /* 5: M <= 128, 3%. */
  assert_int_equal(t.def[7].m_max, 128);
  assert_true(t.def[7].ratio == 1.03);
  assert_int_equal(t.def[8].m_min, 4096);
  assert_true(t.def[8].ratio == 1.25);
  assert_string_equal(t.source, "the performance targets (bench/README.md)");
  /* With no --targets the default file is found (the source tree's here). */
  bench_targets d;
  assert_int_equal(bench_targets_load(NULL, &d), CLI_OK);
  assert_int_equal(d.count, 10);
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
      /* the rules and filters of the current targets */
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\"}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"generic_ratio\", \"limit\": {\"ratio\": \"1.03\"}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"growth\", \"limit\": {\"ratio\": 2.5}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"growth\", \"limit\": {\"from_m\": 0, \"ratio\": 2.5}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"decode_rate\", \"limit\": {\"pct\": 85}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"decode_rate\", \"limit\": {\"cap_tweights\": 4.5, \"monotonic\": "
      "1}}]}",
      "{\"targets\": [{\"id\": 1, \"stretch\": \"yes\", \"target\": "
      "\"x\", \"rule\": \"fp8_ratio\", \"limit\": {\"ratio\": 1}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"shapes\": "
      "\"8192x28672\"}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"shapes\": "
      "[\"8192x\"]}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"shapes\": "
      "[\"8192x28672 \"]}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"shapes\": "
      "[]}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"shapes\": "
      "[1, 2]}}]}",
      "{\"targets\": [{\"id\": 1, \"target\": \"x\", \"rule\": "
      "\"fp8_ratio\", \"limit\": {\"ratio\": 1}, \"rows\": {\"bits_max\": "
      "\"5\"}}]}",
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
                 .fp8 = {.us = NAN,
                         .m = (m + 15) / 16 * 16,
                         .out = TRELLIS_F16,
                         .rel_l2 = NAN},
                 .rel_l2 = 3e-4,
                 .check_rows = 16,
                 .check_ok = 1,
                 .generic_us = NAN,
                 .generic_rel_l2 = NAN};
  return r;
}

/* A row with its FP8 peer (us, NAN: none) and forced-generic time. */
static bench_row make_peer_row(int64_t k, int64_t n, int64_t m, double graph_us,
                               double cublas, double fp8, double generic) {
  bench_row r = make_row(k, n, m, graph_us, cublas, NAN);
  r.fp8.us = fp8;
  r.fp8.algos = isnan(fp8) ? 0 : 4;
  r.generic_us = generic;
  r.generic_rel_l2 = 3.1e-4;
  r.generic_ok = 1;
  return r;
}

/* A --sweep row: 8192x28672, M = 1. */
static bench_row make_sweep_row(int bits, trellis_codebook cb,
                                double graph_us) {
  bench_row r = make_row(8192, 28672, 1, graph_us, 108.0, NAN);
  r.bits = bits;
  r.cb = cb;
  r.sweep = 1;
  r.weight_bytes = 8192.0 * 28672.0 * bits / 8;
  return r;
}

typedef struct fixture {
  bench_env env;
  bench_options o;
  bench_results res;
  bench_targets defs;
  bench_target t[BENCH_MAX_TARGETS];
} fixture;

/* The targets the benchmark shipped before the FP8 peer, evaluated on the
 * legacy fixture: the rules keep their verdicts and details. */
static const char legacy_targets[] =
    "{\"source\": \"the earlier targets\", \"targets\": [{\"id\": 1, "
    "\"target\": \"K6/MCG, M = 1..16, layers >= 32 MB: >= 85% of read "
    "peak\", \"rows\": {\"bits\": 6, \"codebook\": \"mcg\", \"m_min\": 1, "
    "\"m_max\": 16, \"min_weight_bytes\": 32000000.0}, \"rule\": "
    "\"read_peak\", \"limit\": {\"pct\": 85}}, {\"id\": 2, \"target\": "
    "\"K6/MCG, M = 1..16, layers < 32 MB: <= max(floor / 0.85, floor + 2.5 "
    "us)\", \"rows\": {\"bits\": 6, \"codebook\": \"mcg\", \"m_min\": 1, "
    "\"m_max\": 16, \"max_weight_bytes\": 32000000.0}, \"rule\": "
    "\"floor\", \"limit\": {\"fraction\": 0.85, \"slack_us\": 2.5}}, "
    "{\"id\": 3, \"target\": \"M = 128: faster than FP16 cuBLAS (weight "
    "streamed once)\", \"rows\": {\"m_min\": 128, \"m_max\": 128}, "
    "\"rule\": \"faster_than_cublas\", \"limit\": {\"growth_from_m\": "
    "16}}, {\"id\": 4, \"target\": \"every K and codebook, M = 1, layers "
    ">= 32 MB: >= min(85% of read peak, 4.5 T weights/s)\", \"rows\": "
    "{\"m_min\": 1, \"m_max\": 1, \"min_weight_bytes\": 32000000.0}, "
    "\"rule\": \"decode_rate\", \"limit\": {\"pct\": 85, \"cap_tweights\": "
    "4.5}}, {\"id\": 5, \"target\": \"prefill M = 4096: within 1.25x of "
    "FP16 cuBLAS\", \"rows\": {\"m_min\": 4096, \"m_max\": 4096}, "
    "\"rule\": \"cublas_ratio\", \"limit\": {\"ratio\": 1.25}}, {\"id\": "
    "6, \"target\": \"100 M = 1 launches in one graph replay, no "
    "per-launch host work\", \"rule\": \"launch_overhead\", \"limit\": "
    "{\"ratio\": 1.1, \"slack_us\": 0.5}}]}";

/* Environment (read peak 4000 GB/s), options from `args`, the targets of
 * `doc` (NULL: the shipped file). */
static void fixture_env(fixture *f, const char *const *args, const char *doc) {
  bench_results_free(&f->res); /* f: zeroed, or a fixture used before */
  memset(f, 0, sizeof *f);
  snprintf(f->env.gpu, sizeof f->env.gpu, "Test GPU (sm_90)");
  snprintf(f->env.date, sizeof f->env.date, "2026-01-01T00:00:00Z");
  snprintf(f->env.commit, sizeof f->env.commit, "abc1234");
  f->env.read_peak_gbs = 4000.0;
  f->env.cold_bytes = 256u << 20;
  f->env.max_m = 4096;
  assert_int_equal(parse(&f->o, args), CLI_PARSED);
  if (doc)
    assert_int_equal(bench_targets_parse(doc, "legacy.json", &f->defs), CLI_OK);
  else
    assert_int_equal(bench_targets_load(TRELLIS_BENCH_TARGETS_FILE, &f->defs),
                     CLI_OK);
}

static void add_rows(fixture *f, const bench_row *rows, size_t count) {
  for (size_t i = 0; i < count; i++)
    assert_int_equal(bench_results_add(&f->res, &rows[i]), CLI_OK);
}

static void set_overhead(fixture *f) {
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

/* The legacy fixture: rows of both sizes at every M a legacy target looks
 * at, one forced row, the launch overhead; FP8 and generic figures on the
 * first rows (for the files). */
static void fixture_init(fixture *f) {
  const char *none[] = {NULL};
  fixture_env(f, none, legacy_targets);
  bench_row rows[] = {
      make_row(8192, 28672, 1, 50.0, 400.0, 380.0),
      make_row(8192, 28672, 16, 55.0, 420.0, 410.0),
      make_row(8192, 28672, 128, 120.0, 110.0, NAN),
      make_row(4096, 4096, 1, 5.0, 9.0, 8.0),
      make_row(4096, 4096, 16, 7.0, 9.0, 8.0),
      make_row(4096, 4096, 128, 20.0, 30.0, 31.0),
      make_row(8192, 28672, 4096, 1000.0, 900.0, 950.0),
  };
  rows[0].fp8.us = 58.7;
  rows[0].fp8.algos = 4;
  rows[0].fp8.rel_l2 = 2.5e-4;
  rows[0].generic_us = 48.0;
  rows[0].generic_rel_l2 = 3.1e-4;
  rows[0].generic_ok = 1;
  rows[2].fp8.us = 67.6;
  rows[2].fp8.algos = 3;
  rows[2].fp8.out = TRELLIS_BF16;
  add_rows(f, rows, sizeof rows / sizeof rows[0]);
  bench_row forced = make_row(8192, 28672, 1, 1000.0, 400.0, 380.0);
  forced.flags = TRELLIS_PLAN_FORCE_GENERIC; /* never counted */
  assert_int_equal(bench_results_add(&f->res, &forced), CLI_OK);
  set_overhead(f);
}

static void eval(fixture *f) {
  bench_eval_targets(&f->env, &f->o, &f->res, &f->defs, f->t);
}

static void test_target_verdicts(void **state) {
  (void)state;
  fixture *f = calloc(1, sizeof *f);
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
  assert_int_equal(f->defs.count, 6);
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

/* The shipped targets on a default run with --with-generic: K6/MCG rows of
 * the two large layers at M = 1, 16, 128, of 2048x4096 at 1, 16, 128, of
 * 512x6144 at M = 1 (no FP8 time), 4096x4096 at M = 4096 (dense), one
 * forced row, the launch overhead. */
enum {
  R_BIG1,
  R_BIG16,
  R_BIG128,
  R_TALL1,
  R_TALL16,
  R_TALL128,
  R_SMALL1,
  R_SMALL16,
  R_SMALL128,
  R_TINY1,
  R_PREFILL,
  R_FORCED,
  R_COUNT
};

static void fixture_default(fixture *f) {
  const char *args[] = {"--with-generic", NULL};
  fixture_env(f, args, NULL);
  bench_row rows[R_COUNT] = {
      [R_BIG1] = make_peer_row(8192, 28672, 1, 50.0, 108.0, 55.0, 52.0),
      [R_BIG16] = make_peer_row(8192, 28672, 16, 56.0, 117.0, 58.0, 57.0),
      [R_BIG128] = make_peer_row(8192, 28672, 128, 120.0, 130.0, 67.6, 121.0),
      [R_TALL1] = make_peer_row(28672, 8192, 1, 52.0, 116.0, 57.0, 53.0),
      [R_TALL16] = make_peer_row(28672, 8192, 16, 54.0, 117.0, 57.0, 55.0),
      [R_TALL128] = make_peer_row(28672, 8192, 128, 125.0, 131.0, 68.0, 126.0),
      [R_SMALL1] = make_peer_row(2048, 4096, 1, 5.0, 7.2, 5.4, 5.1),
      [R_SMALL16] = make_peer_row(2048, 4096, 16, 6.0, 7.3, 5.4, 6.1),
      [R_SMALL128] = make_peer_row(2048, 4096, 128, 14.0, 8.0, 6.0, 14.2),
      [R_TINY1] = make_peer_row(512, 6144, 1, 4.0, 4.4, NAN, 4.0),
      [R_PREFILL] = make_peer_row(4096, 4096, 4096, 240.0, 210.0, 150.0, 240.0),
      [R_FORCED] = make_peer_row(8192, 28672, 1, 1000.0, 108.0, 55.0, NAN),
  };
  rows[R_PREFILL].path = TRELLIS_PATH_DENSE;
  rows[R_FORCED].flags = TRELLIS_PLAN_FORCE_GENERIC; /* never counted */
  add_rows(f, rows, R_COUNT);
  set_overhead(f);
}

/* The verdicts of the shipped targets, in file order. */
enum { T1, T1_STRETCH, T2, T3, T3_STRETCH, T4, T4_GROWTH, T5, T6, T7, T_COUNT };

static void test_shipped_verdicts(void **state) {
  (void)state;
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  fixture_default(f);
  eval(f);
  static const struct {
    int status;
    const char *detail;
  } want[T_COUNT] = {
      [T1] = {BENCH_MET, "0 of 4 rows over; worst 8192x28672 K6 mcg M=16: "
                         "56.00 us vs FP8 58.00 us at M=16 (0.97x of FP8 "
                         "time, limit 1.00x)"},
      [T1_STRETCH] = {BENCH_MISSED,
                      "3 of 4 rows below; worst 8192x28672 K6 mcg M=16: "
                      "78.6% of peak (56.00 us; 85% is 51.81 us)"},
      [T2] = {BENCH_NA, "no rows of this kind were run"},
      [T3] = {BENCH_MET, "0 of 3 rows not faster; worst 512x6144 K6 mcg M=1: "
                         "4.00 us vs cuBLAS 4.40 us (1.10x)"},
      [T3_STRETCH] = {BENCH_MISSED,
                      "1 of 2 rows over; worst 2048x4096 K6 mcg M=16: 6.00 "
                      "us vs FP8 5.40 us at M=16 (1.11x of FP8 time, limit "
                      "1.00x); 1 row without an FP8 time left out"},
      [T4] = {BENCH_MET, "0 of 2 rows not faster; worst 28672x8192 K6 mcg "
                         "M=128: 125.00 us vs cuBLAS 131.00 us (1.05x)"},
      [T4_GROWTH] = {BENCH_MET,
                     "0 of 3 rows over; worst 2048x4096 K6 mcg M=128: 14.00 "
                     "us vs 6.00 us at M=16 (2.33x, limit 2.50x)"},
      [T5] = {BENCH_MET, "0 of 10 rows over; worst 512x6144 K6 mcg M=1: 4.00 "
                         "us vs forced generic 4.00 us (1.000x, limit 1.03x)"},
      [T6] = {BENCH_MET, "0 of 1 rows over; worst 4096x4096 K6 mcg M=4096: "
                         "240.0 us vs cuBLAS 210.0 us (1.14x of cuBLAS time)"},
      [T7] = {BENCH_MET, "8192x28672 K6 mcg: 21.00 us/launch cycling 2 cold "
                         "copies (L=20 run: 20.00 us; limit 22.00 us); same "
                         "plan 100x (L2-warm when it fits): 18.00 us/launch; "
                         "eager: 25.00 us/launch"},
  };
  assert_int_equal(f->defs.count, T_COUNT);
  for (int i = 0; i < T_COUNT; i++) {
    assert_int_equal(f->t[i].id, f->defs.def[i].id);
    assert_int_equal(f->t[i].stretch, f->defs.def[i].stretch);
    assert_int_equal(f->t[i].status, want[i].status);
    assert_string_equal(f->t[i].detail, want[i].detail);
  }
  bench_row *r = f->res.rows;

  /* 1: one large-layer row slower than its FP8 peer. */
  r[R_BIG16].graph_us = 60.0;
  eval(f);
  assert_int_equal(f->t[T1].status, BENCH_MISSED);
  assert_string_equal(f->t[T1].detail,
                      "1 of 4 rows over; worst 8192x28672 K6 mcg M=16: 60.00 "
                      "us vs FP8 58.00 us at M=16 (1.03x of FP8 time, limit "
                      "1.00x)");
  r[R_BIG16].graph_us = 56.0;
  /* ... a failed check misses it; no FP8 peer at all: n/a. */
  r[R_BIG1].check_ok = 0;
  eval(f);
  assert_int_equal(f->t[T1].status, BENCH_MISSED);
  assert_non_null(strstr(f->t[T1].detail, "1 of 4 rows over; worst 8192x28672 "
                                          "K6 mcg M=1: 50.00 us vs FP8"));
  assert_non_null(strstr(f->t[T1].detail, ", check FAIL"));
  r[R_BIG1].check_ok = 1;
  for (int i = R_BIG1; i <= R_TALL128; i++)
    r[i].fp8.us = NAN;
  eval(f);
  assert_int_equal(f->t[T1].status, BENCH_NA);
  assert_string_equal(f->t[T1].detail,
                      "no FP8 time for its 4 rows (cuBLASLt has no FP8 "
                      "algorithm on this GPU, or the FP8 check failed): "
                      "skipped");
  assert_int_equal(f->t[T1_STRETCH].status, BENCH_MISSED); /* no FP8 needed */
  fixture_default(f);
  r = f->res.rows;

  /* 1 stretch: every row at 85% of the read peak. */
  r[R_BIG16].graph_us = r[R_TALL1].graph_us = r[R_TALL16].graph_us = 51.0;
  eval(f);
  assert_int_equal(f->t[T1_STRETCH].status, BENCH_MET);
  assert_int_equal(f->t[T1].status, BENCH_MET);

  /* 3: a small layer not faster than FP16 (a tie is not faster). */
  r[R_TINY1].graph_us = 4.5;
  eval(f);
  assert_int_equal(f->t[T3].status, BENCH_MISSED);
  assert_string_equal(f->t[T3].detail,
                      "1 of 3 rows not faster; worst 512x6144 K6 mcg M=1: 4.50 "
                      "us vs cuBLAS 4.40 us (0.98x)");
  r[R_TINY1].graph_us = 4.4;
  eval(f);
  assert_int_equal(f->t[T3].status, BENCH_MISSED);
  r[R_TINY1].graph_us = 4.0;
  /* 3 stretch: as fast as FP8 on every row that has it. */
  r[R_SMALL16].graph_us = 5.4;
  eval(f);
  assert_int_equal(f->t[T3_STRETCH].status, BENCH_MET);
  assert_int_equal(f->t[T3].status, BENCH_MET);
  fixture_default(f);
  r = f->res.rows;

  /* 4: a large layer at M = 128 slower than FP16, and 2.59x its M = 16. */
  r[R_TALL128].graph_us = 140.0;
  eval(f);
  assert_int_equal(f->t[T4].status, BENCH_MISSED);
  assert_string_equal(f->t[T4].detail,
                      "1 of 2 rows not faster; worst 28672x8192 K6 mcg M=128: "
                      "140.00 us vs cuBLAS 131.00 us (0.94x)");
  assert_int_equal(f->t[T4_GROWTH].status, BENCH_MISSED);
  assert_string_equal(f->t[T4_GROWTH].detail,
                      "1 of 3 rows over; worst 28672x8192 K6 mcg M=128: "
                      "140.00 us vs 54.00 us at M=16 (2.59x, limit 2.50x)");
  r[R_TALL128].graph_us = 125.0;
  /* ... a small layer's growth alone (it need not beat FP16 at M = 128). */
  r[R_SMALL128].graph_us = 16.0;
  eval(f);
  assert_int_equal(f->t[T4].status, BENCH_MET);
  assert_int_equal(f->t[T4_GROWTH].status, BENCH_MISSED);
  assert_string_equal(f->t[T4_GROWTH].detail,
                      "1 of 3 rows over; worst 2048x4096 K6 mcg M=128: 16.00 "
                      "us vs 6.00 us at M=16 (2.67x, limit 2.50x)");
  /* ... a failed check at M = 16 misses its M = 128 row. */
  r[R_SMALL128].graph_us = 14.0;
  r[R_SMALL16].check_ok = 0;
  eval(f);
  assert_int_equal(f->t[T4_GROWTH].status, BENCH_MISSED);
  assert_non_null(strstr(f->t[T4_GROWTH].detail, ", check FAIL at that M"));
  r[R_SMALL16].check_ok = 1;
  /* ... no M = 16 rows: n/a; one missing: left out. */
  r[R_SMALL16].m = 8;
  eval(f);
  assert_int_equal(f->t[T4_GROWTH].status, BENCH_MET);
  assert_string_equal(f->t[T4_GROWTH].detail,
                      "0 of 2 rows over; worst 28672x8192 K6 mcg M=128: "
                      "125.00 us vs 54.00 us at M=16 (2.31x, limit 2.50x); 1 "
                      "row without a row of the same layer at the M compared "
                      "with left out");
  r[R_BIG16].m = r[R_TALL16].m = 8;
  eval(f);
  assert_int_equal(f->t[T4_GROWTH].status, BENCH_NA);
  assert_string_equal(f->t[T4_GROWTH].detail,
                      "its 3 rows have no M=16 row of the same layer to "
                      "compare with");
  fixture_default(f);
  r = f->res.rows;

  /* 5: the default path 4.2% slower than forced generic on one row. */
  r[R_BIG1].generic_us = 48.0;
  eval(f);
  assert_int_equal(f->t[T5].status, BENCH_MISSED);
  assert_string_equal(f->t[T5].detail,
                      "1 of 10 rows over; worst 8192x28672 K6 mcg M=1: 50.00 "
                      "us vs forced generic 48.00 us (1.042x, limit 1.03x)");
  /* ... 3% slower is within the limit. */
  r[R_BIG1].generic_us = 50.0 / 1.03 + 1e-9;
  eval(f);
  assert_int_equal(f->t[T5].status, BENCH_MET);
  r[R_BIG1].generic_us = 52.0;
  /* ... a failed check of the generic run misses it. */
  r[R_SMALL1].generic_ok = 0;
  eval(f);
  assert_int_equal(f->t[T5].status, BENCH_MISSED);
  assert_string_equal(f->t[T5].detail,
                      "1 of 10 rows over; worst 2048x4096 K6 mcg M=1: 5.00 us "
                      "vs forced generic 5.10 us (0.980x, limit 1.03x), "
                      "generic check FAIL");
  /* ... not measured (no --with-generic): n/a. */
  for (int i = 0; i < R_COUNT; i++)
    r[i].generic_us = NAN;
  eval(f);
  assert_int_equal(f->t[T5].status, BENCH_NA);
  assert_string_equal(f->t[T5].detail,
                      "forced-generic times not measured for its 10 rows (run "
                      "with --with-generic)");
  fixture_default(f);
  r = f->res.rows;

  /* 6: prefill 1.29x FP16; 7: a launch-overhead graph over its limit. */
  r[R_PREFILL].graph_us = 270.0;
  f->res.overhead.cycled_us = 23.0;
  eval(f);
  assert_int_equal(f->t[T6].status, BENCH_MISSED);
  assert_string_equal(f->t[T6].detail,
                      "1 of 1 rows over; worst 4096x4096 K6 mcg M=4096: 270.0 "
                      "us vs cuBLAS 210.0 us (1.29x of cuBLAS time)");
  assert_int_equal(f->t[T7].status, BENCH_MISSED);

  /* Rows run with --force count for no target. */
  f->res.count = 0;
  bench_row forced = make_peer_row(8192, 28672, 1, 10.0, 108.0, 55.0, 52.0);
  forced.flags = TRELLIS_PLAN_LEGACY_KERNELS;
  add_rows(f, &forced, 1);
  eval(f);
  for (int i = T1; i < T7; i++)
    assert_int_equal(f->t[i].status, BENCH_NA);
  bench_results_free(&f->res);
  free(f);
}

/* Target 2 on a --sweep run of 8192x28672 at M = 1: MCG at K1..K6, 3INST
 * at K2 and K3. */
static void fixture_sweep(fixture *f) {
  const char *args[] = {"--sweep", NULL};
  fixture_env(f, args, NULL);
  const bench_row rows[] = {
      make_sweep_row(1, TRELLIS_CB_MCG, 25.0),
      make_sweep_row(2, TRELLIS_CB_MCG, 25.0), /* a tie is not slower */
      make_sweep_row(3, TRELLIS_CB_MCG, 30.0),
      make_sweep_row(4, TRELLIS_CB_MCG, 35.0),
      make_sweep_row(5, TRELLIS_CB_MCG, 40.0),
      make_sweep_row(6, TRELLIS_CB_MCG, 50.0),
      make_sweep_row(2, TRELLIS_CB_3INST, 30.0),
      make_sweep_row(3, TRELLIS_CB_3INST, 32.0),
  };
  add_rows(f, rows, sizeof rows / sizeof rows[0]);
}

static void test_sweep_verdicts(void **state) {
  (void)state;
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  fixture_sweep(f);
  eval(f);
  assert_int_equal(f->t[T2].status, BENCH_MET);
  assert_string_equal(f->t[T2].detail,
                      "0 of 7 rows below; worst 8192x28672 K5 mcg M=1: 5.87 T "
                      "weights/s (91.8% of peak) vs 4.50 T/s needed; 0 of 6 "
                      "slower than the next bitrate");
  assert_int_equal(f->t[T5].status, BENCH_NA);
  assert_string_equal(f->t[T5].detail,
                      "forced-generic times not measured for its 8 rows (run "
                      "with --with-generic)");
  assert_int_equal(f->t[T3].status, BENCH_NA);
  bench_row *r = f->res.rows;

  /* K5 below 4.5 T/s, and slower than K6. */
  r[4].graph_us = 60.0;
  eval(f);
  assert_int_equal(f->t[T2].status, BENCH_MISSED);
  assert_string_equal(f->t[T2].detail,
                      "1 of 7 rows below; worst 8192x28672 K5 mcg M=1: 3.91 T "
                      "weights/s (61.2% of peak) vs 4.50 T/s needed; 1 of 6 "
                      "slower than the next bitrate, worst 8192x28672 K5 mcg "
                      "M=1: 3.91 T/s vs K6 4.70 T/s");
  r[4].graph_us = 40.0;
  /* 3INST K2 slower than 3INST K3, every rate above 4.5 T/s. */
  r[6].graph_us = 33.0;
  eval(f);
  assert_int_equal(f->t[T2].status, BENCH_MISSED);
  assert_string_equal(f->t[T2].detail,
                      "0 of 7 rows below; worst 8192x28672 K5 mcg M=1: 5.87 T "
                      "weights/s (91.8% of peak) vs 4.50 T/s needed; 1 of 6 "
                      "slower than the next bitrate, worst 8192x28672 K2 3inst "
                      "M=1: 7.12 T/s vs K3 7.34 T/s");
  /* Without --sweep the line says it may be partial. */
  r[6].graph_us = 30.0;
  f->o.sweep = 0;
  eval(f);
  assert_int_equal(f->t[T2].status, BENCH_MET);
  assert_non_null(strstr(f->t[T2].detail,
                         "slower than the next bitrate (partial: run --sweep "
                         "for every K/codebook)"));
  bench_results_free(&f->res);
  free(f);
}

/* ---- files ----------------------------------------------------------------
 */

static void test_files(void **state) {
  (void)state;
  fixture *f = calloc(1, sizeof *f);
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
  /* The FP8 peer and the forced-generic time, NULL where not measured. */
  json_t *r0 = json_array_get(rows, 0);
  assert_true(json_real_value(json_object_get(r0, "fp8_us")) == 58.7);
  assert_true(json_real_value(json_object_get(r0, "vs_fp8")) == 1.174);
  assert_int_equal(json_integer_value(json_object_get(r0, "fp8_m")), 16);
  assert_string_equal(json_string_value(json_object_get(r0, "fp8_out")), "f16");
  assert_int_equal(json_integer_value(json_object_get(r0, "fp8_algos")), 4);
  assert_true(json_real_value(json_object_get(r0, "fp8_rel_l2")) == 2.5e-4);
  assert_true(json_real_value(json_object_get(r0, "generic_us")) == 48.0);
  assert_true(json_real_value(json_object_get(r0, "vs_generic")) == 0.96);
  assert_string_equal(json_string_value(json_object_get(r0, "generic_check")),
                      "PASS");
  assert_true(json_real_value(json_object_get(r0, "generic_rel_l2")) == 3.1e-4);
  assert_int_equal(json_integer_value(json_object_get(r2, "fp8_m")), 128);
  assert_string_equal(json_string_value(json_object_get(r2, "fp8_out")),
                      "bf16");
  assert_true(json_real_value(json_object_get(r2, "vs_fp8")) == 0.563);
  assert_true(json_is_null(json_object_get(r2, "fp8_rel_l2")));
  assert_true(json_is_null(json_object_get(r2, "generic_us")));
  assert_true(json_is_null(json_object_get(r2, "vs_generic")));
  assert_true(json_is_null(json_object_get(r2, "generic_check")));
  json_t *r3 = json_array_get(rows, 3);
  assert_true(json_is_null(json_object_get(r3, "fp8_us")));
  assert_true(json_is_null(json_object_get(r3, "vs_fp8")));
  assert_int_equal(json_integer_value(json_object_get(r3, "fp8_algos")), 0);
  json_t *fp8 = json_object_get(method, "fp8");
  assert_int_equal(json_integer_value(json_object_get(fp8, "m_multiple")), 16);
  assert_int_equal(json_integer_value(json_object_get(fp8, "max_algorithms")),
                   BENCH_FP8_ALGOS);
  assert_true(
      json_is_false(json_object_get(fp8, "activation_quantisation_counted")));
  assert_true(json_is_false(json_object_get(method, "with_generic")));
  assert_int_equal(
      json_integer_value(json_object_get(doc, "fp8_failed_checks")), 0);
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
  assert_true(
      json_is_false(json_object_get(json_array_get(targets, 0), "stretch")));
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
  assert_non_null(strstr(text, ",replays,fp8_us,vs_fp8,fp8_m,fp8_out,"
                               "fp8_algos,fp8_rel_l2,generic_us,vs_generic,"
                               "generic_check,generic_rel_l2\n"));
  assert_non_null(strstr(text, ",16,2,20,20,58.700,1.174,16,f16,4,2.500e-04,"
                               "48.000,0.960,PASS,3.100e-04\n"));
  assert_non_null(strstr(text, ",16,2,20,20,67.600,0.563,128,bf16,3,,,,,\n"));
  free(text);
  free(csv);

  /* Report files are replaced only whole: a longer old file leaves no tail,
   * a refused path (a directory, a missing directory) fails and writes
   * nothing, and no temporary file stays behind. */
  FILE *old = fopen(csv_path, "w");
  assert_non_null(old);
  for (int i = 0; i < 20000; i++)
    fputs("old contents\n", old);
  assert_int_equal(fclose(old), 0);
  assert_int_equal(bench_write_csv(csv_path, &f->env, &f->res), CLI_OK);
  size_t again = 0;
  uint8_t *csv2 = tu_read_file(csv_path, &again);
  assert_int_equal(again, size);
  free(csv2);
  char *dir = tu_tmp_path("bench-dir");
  assert_int_equal(mkdir(dir, 0755), 0);
  assert_int_equal(bench_write_csv(dir, &f->env, &f->res), CLI_FAIL);
  assert_int_equal(
      bench_write_json(dir, &f->env, &f->o, &f->res, &f->defs, f->t), CLI_FAIL);
  char missing[4096];
  snprintf(missing, sizeof missing, "%s/none/bench.csv", dir);
  assert_int_equal(bench_write_csv(missing, &f->env, &f->res), CLI_FAIL);
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *de; (de = readdir(d)) != NULL;)
    if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
      fail_msg("left in the directory: %s", de->d_name);
  closedir(d);
  rmdir(dir);
  free(dir);

  /* The shipped targets in the JSON: stretch goals marked. */
  fixture_default(f);
  eval(f);
  assert_int_equal(
      bench_write_json(json_path, &f->env, &f->o, &f->res, &f->defs, f->t),
      CLI_OK);
  doc = json_load_file(json_path, 0, &e);
  if (doc == NULL)
    fail_msg("%s: %s", json_path, e.text);
  targets = json_object_get(doc, "targets");
  assert_int_equal(json_array_size(targets), T_COUNT);
  json_t *stretch = json_array_get(targets, T1_STRETCH);
  assert_int_equal(json_integer_value(json_object_get(stretch, "id")), 1);
  assert_true(json_is_true(json_object_get(stretch, "stretch")));
  assert_string_equal(json_string_value(json_object_get(stretch, "status")),
                      "MISSED");
  assert_true(json_is_true(
      json_object_get(json_object_get(doc, "method"), "with_generic")));
  json_decref(doc);
  free(json_path);
  free(csv_path);
  bench_results_free(&f->res);
  free(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_b12x_options),
      cmocka_unit_test(test_model_options),
      cmocka_unit_test(test_shipped_targets),
      cmocka_unit_test(test_bad_targets),
      cmocka_unit_test(test_target_verdicts),
      cmocka_unit_test(test_shipped_verdicts),
      cmocka_unit_test(test_sweep_verdicts),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
