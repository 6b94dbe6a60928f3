/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-model decode steps captured into CUDA graphs, through the
 * benchmark's step engine (bench/step.h):
 *   - synthetic models written by synth (a GLM-style shard with K5 and K6
 *     MCG layers, fused and generic side by side, a block of MUL1 and a K4
 *     head; Llama blocks of MUL1 and 3INST at K3 and K4): FULL and
 *     PIECEWISE capture at several m, outputs poisoned with NaN before
 *     each replay, 100 replays (two weight copies) bit-equal to the eager
 *     step, every layer's output and the final output; the first layer
 *     against the CPU reference;
 *   - the preset synthesised on the device gives the directory's step bit
 *     for bit;
 *   - an all-K6/MCG model needs no workspace to m = 128 on sm_90: with
 *     workspace NULL it captures and replays bit-equal;
 *   - a missing or undersized workspace fails the capture with
 *     TRELLIS_ERR_WORKSPACE: the capture is ended, the stream is usable,
 *     and the same engine captures once the buffers are right. */
#include "gpu_util.h"
#include "step.h"
#include "tools/cli.h"
#include "tools/synth_model.h"

#define REPLAYS 100

/* TRELLIS_TEST_SMALL: the compute-sanitizer runs, where every access is
 * checked: 3 replays per check and the GLM-style models only. */
static int small_run(void) {
  const char *small = getenv("TRELLIS_TEST_SMALL");
  return small && small[0] && strcmp(small, "0") != 0;
}

static int replays(int full) { return small_run() ? 3 : full; }

static void open_step(const char *spec, const step_preset_options *po,
                      int copies, const int64_t *ms, int nms, cudaStream_t s,
                      step_model *m, step_engine *e) {
  assert_int_equal(step_model_open(spec, po, m), CLI_OK);
  assert_int_equal(step_engine_open(e, m, copies, ms, nms, 0, s), CLI_OK);
  assert_int_equal(e->copies, copies);
  assert_true(e->nops > m->count); /* the stand-ins */
  assert_int_equal(e->npieces, m->blocks + 1);
}

static void close_step(step_model *m, step_engine *e) {
  step_engine_close(e);
  step_model_close(m);
}

/* Captures `mode` at m and checks `replays` replays of every copy. */
static void check_mode(step_engine *e, step_mode mode, int64_t m, int replays,
                       cudaStream_t s) {
  assert_int_equal(step_capture(e, mode, m, s), CLI_OK);
  int ok = 0;
  char detail[256];
  assert_int_equal(
      step_check(e, mode, m, replays, s, &ok, detail, sizeof detail), CLI_OK);
  if (!ok)
    fail_msg("%s at m = %lld: %s", step_mode_name(mode), (long long)m, detail);
}

/* The first layer's output (it reads the step input) against the CPU. */
static void check_first_layer(step_engine *e, const step_model *m, int64_t rows,
                              cudaStream_t s) {
  const step_layer *l = &m->layers[0];
  assert_int_equal(l->src, STEP_SRC_BLOCK_INPUT);
  trellis_layer hl;
  OK(trellis_model_layer(m->model, l->index, &hl));
  uint16_t *x = malloc((size_t)(rows * l->k) * 2);
  uint16_t *y = malloc((size_t)(rows * l->n) * 2);
  assert_true(x && y);
  assert_int_equal(step_poison(e, s), CLI_OK);
  assert_int_equal(step_enqueue(e, 0, rows, s), CLI_OK);
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(x, e->x0, (size_t)(rows * l->k) * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y, e->y[0], (size_t)(rows * l->n) * 2, cudaMemcpyDeviceToHost));
  float *ref = cpu_ref(&hl.weight, x, TRELLIS_F16, rows, TRELLIS_F32);
  float *got = to_float(y, (size_t)(rows * l->n), TRELLIS_F16);
  check_close(got, ref, (size_t)(rows * l->n), 2e-3, 2e-3, l->name);
  free(ref);
  free(got);
  free(x);
  free(y);
}

static void test_mixed_models(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 8, 128};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct {
    const char *name, *preset;
    int blocks;
    double bits;
    int head_bits;
    trellis_codebook cb;
    int odd_cb;
  } models[] = {
      /* K5 and K6 MCG (generic and fused) in blocks 0 and 2, K5 and K6
       * MUL1 in block 1, a K4 MCG head */
      {"cap-glm", "glm-tp4", 3, 5.5, 4, TRELLIS_CB_MCG, TRELLIS_CB_MUL1},
      /* Llama blocks of MUL1 and 3INST, K3 and K4 */
      {"cap-llama", "llama-3.1-8b", 2, 3.5, 4, TRELLIS_CB_MUL1,
       TRELLIS_CB_3INST},
  };
  const size_t count = small_run() ? 1 : sizeof models / sizeof models[0];
  for (size_t d = 0; d < count; d++) {
    char *dir = tu_write_synth(
        models[d].name, models[d].preset, models[d].blocks, models[d].bits,
        models[d].head_bits, models[d].cb, models[d].odd_cb);
    step_model m;
    step_engine e;
    open_step(dir, NULL, d == 0 ? 2 : 1, ms, 3, s, &m, &e);
    if (d == 0 && gu_is_hopper()) { /* fused and generic in one step */
      trellis_buffer_sizes sz;
      OK(trellis_plans_buffer_sizes((const trellis_plan *const *)e.plans,
                                    e.nplans, 1, &sz));
      assert_int_equal(sz.path, TRELLIS_PATH_NONE);
    }
    assert_true(e.need.workspace_bytes > 0);
    int cbs[3] = {0, 0, 0}; /* the codebooks really mix */
    for (size_t i = 0; i < m.count; i++)
      cbs[m.layers[i].codebook]++;
    assert_true(cbs[models[d].cb] > 0 && cbs[models[d].odd_cb] > 0);
    check_first_layer(&e, &m, 8, s);
    for (size_t j = 0; j < 3; j++) {
      check_mode(&e, STEP_FULL, ms[j], replays(d == 0 ? REPLAYS : 10), s);
      check_mode(&e, STEP_PIECEWISE, ms[j], replays(d == 0 ? REPLAYS : 10), s);
    }
    close_step(&m, &e);
    free(dir);
  }
  CK(cudaStreamDestroy(s));
}

/* preset:glm-tp4 built on the device equals the directory synth writes. */
static void test_preset_equals_directory(void **state) {
  (void)state;
  static const int64_t ms[] = {8};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *dir =
      tu_write_synth("cap-same", "glm-tp4", 2, 4.5, 4, TRELLIS_CB_MCG, -1);
  step_preset_options po;
  step_preset_options_init(&po);
  po.bits = 4.5;
  po.blocks = 2;
  po.head_bits = 4;
  po.vocab = 256;
  step_model ma, mb;
  step_engine ea, eb;
  open_step(dir, NULL, 1, ms, 1, s, &ma, &ea);
  open_step("preset:glm-tp4", &po, 1, ms, 1, s, &mb, &eb);
  assert_int_equal(ma.count, mb.count);
  step_digest *da = calloc(ma.count, sizeof *da);
  step_digest *db = calloc(mb.count, sizeof *db);
  assert_true(da && db);
  assert_int_equal(step_poison(&ea, s), CLI_OK);
  assert_int_equal(step_enqueue(&ea, 0, 8, s), CLI_OK);
  assert_int_equal(step_digest_all(&ea, 8, s, da), CLI_OK);
  assert_int_equal(step_poison(&eb, s), CLI_OK);
  assert_int_equal(step_enqueue(&eb, 0, 8, s), CLI_OK);
  assert_int_equal(step_digest_all(&eb, 8, s, db), CLI_OK);
  for (size_t i = 0; i < ma.count; i++) {
    assert_true(da[i].nonfinite == 0 && da[i].poison == 0);
    if (da[i].hash != db[i].hash)
      fail_msg("%s: the preset's output differs from the directory's",
               ma.layers[i].name);
  }
  free(da);
  free(db);
  close_step(&ma, &ea);
  close_step(&mb, &eb);
  free(dir);
  CK(cudaStreamDestroy(s));
}

static void test_k6_mcg_without_workspace(void **state) {
  (void)state;
  if (!gu_is_hopper()) {
    print_message("not sm_90: the fused path (and its zero workspace) is "
                  "not available; skipped\n");
    return;
  }
  static const int64_t ms[] = {1, 8, 64, 128};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *dir =
      tu_write_synth("cap-k6", "glm-tp4", 2, 6.0, 6, TRELLIS_CB_MCG, -1);
  step_model m;
  step_engine e;
  open_step(dir, NULL, 1, ms, 4, s, &m, &e);
  assert_true(e.need.workspace_bytes == 0);
  assert_null(e.b.workspace);
  e.b.workspace_bytes = 0;
  for (size_t j = 0; j < 4; j++) {
    check_mode(&e, STEP_FULL, ms[j], replays(REPLAYS), s);
    check_mode(&e, STEP_PIECEWISE, ms[j], replays(REPLAYS), s);
  }
  close_step(&m, &e);
  free(dir);
  CK(cudaStreamDestroy(s));
}

/* A capture that fails: the error status, the capture ended, the stream
 * usable. */
static void expect_capture_error(step_engine *e, step_mode mode, int64_t m,
                                 cudaStream_t s) {
  e->last_status = TRELLIS_OK;
  assert_int_equal(step_capture(e, mode, m, s), CLI_FAIL);
  assert_int_equal(e->last_status, TRELLIS_ERR_WORKSPACE);
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusActive;
  CK(cudaStreamIsCapturing(s, &cs));
  assert_int_equal(cs, cudaStreamCaptureStatusNone);
  CK(cudaGetLastError());
  CK(cudaStreamSynchronize(s));
  /* no graphs of a failed capture are left to launch */
  assert_int_equal(step_launch(e, mode, 0, m, s), CLI_FAIL);
}

static void test_underprovisioned_workspace(void **state) {
  (void)state;
  static const int64_t ms[] = {1, 8, 128};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *dir =
      tu_write_synth("cap-ws", "glm-tp4", 2, 5.5, 4, TRELLIS_CB_MCG, -1);
  step_model m;
  step_engine e;
  open_step(dir, NULL, 1, ms, 3, s, &m, &e);
  assert_true(e.need.workspace_bytes > 0);
  int tested = 0;
  for (size_t j = 0; j < 3; j++) {
    trellis_buffer_sizes sz;
    OK(trellis_plans_buffer_sizes((const trellis_plan *const *)e.plans,
                                  e.nplans, ms[j], &sz));
    if (sz.workspace_bytes == 0) { /* nothing to under-provision at m */
      check_mode(&e, STEP_FULL, ms[j], 3, s);
      continue;
    }
    tested++;
    /* missing */
    e.b.workspace = NULL;
    e.b.workspace_bytes = 0;
    expect_capture_error(&e, STEP_FULL, ms[j], s);
    expect_capture_error(&e, STEP_PIECEWISE, ms[j], s);
    /* undersized */
    e.b = e.owned;
    e.b.workspace_bytes = sz.workspace_bytes < 16 ? sz.workspace_bytes - 1 : 16;
    expect_capture_error(&e, STEP_FULL, ms[j], s);
    expect_capture_error(&e, STEP_PIECEWISE, ms[j], s);
    /* eagerly the same error, and nothing left pending */
    assert_int_equal(step_enqueue(&e, 0, ms[j], s), CLI_FAIL);
    assert_int_equal(e.last_status, TRELLIS_ERR_WORKSPACE);
    CK(cudaStreamSynchronize(s));
    /* provisioned again: the same engine and stream capture and replay */
    e.b = e.owned;
    check_mode(&e, STEP_FULL, ms[j], 3, s);
    check_mode(&e, STEP_PIECEWISE, ms[j], 3, s);
  }
  assert_true(tested > 0);
  close_step(&m, &e);
  free(dir);
  CK(cudaStreamDestroy(s));
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mixed_models),
      cmocka_unit_test(test_preset_equals_directory),
      cmocka_unit_test(test_k6_mcg_without_workspace),
      cmocka_unit_test(test_underprovisioned_workspace),
  };
  return TU_RUN_TESTS("gpu_model_capture", tests);
}
