/* SPDX-License-Identifier: Apache-2.0 */
/* Misused plans are reported, not undefined: a plan used after destroy
 * (its memory kept, as builds without NDEBUG keep it, so the test itself
 * reads no freed memory), a pointer that is not a plan, a run with another
 * device current than the plan's (needs two GPUs: skipped with one), and
 * unknown plan flags; NO_DEPENDENT_LAUNCH computes what the default does.
 * Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

#include "plan/plan_check.h"

/* x and y of runs that must fail before touching them */
static _Alignas(16) char dummy[64];

static trellis_plan *make_plan(const trellis_weight *dw) {
  trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0);
  trellis_plan *plan = NULL;
  OK(trellis_plan_create(dw, &d, &plan));
  return plan;
}

static void test_use_after_destroy(void **state) {
  (void)state;
  const int was = trl_plan_keep_destroyed(1);
#ifndef NDEBUG
  assert_int_equal(was, 1); /* the default of builds without NDEBUG */
#endif
  gw w;
  gw_random(&w, 256, 256, 4, TRELLIS_CB_MCG, 0, 0, 71);
  trellis_device_weight *dw;
  OK(trellis_weight_upload(&w.w, &dw));
  trellis_plan *plan = make_plan(trellis_device_weight_view(dw));
  OK(trellis_plan_prepare(plan));
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(plan, 1, &sz));
  trellis_plan_destroy(plan);

  /* every entry point: INVALID_ARGUMENT, "destroyed" */
  tu_assert_status(trellis_plan_query(plan, 1, &sz),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("plan query: not a live plan (it was destroyed)");
  tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("plan prepare: not a live plan (it was destroyed)");
  trellis_buffers b;
  trellis_buffers_init(&b);
  tu_assert_status(trellis_run(plan, dummy, 1, dummy, &b, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("trellis_run: not a live plan (it was destroyed)");
  /* a second destroy is reported and does nothing */
  trellis_clear_error();
  trellis_plan_destroy(plan);
  tu_assert_error_has("plan destroy: not a live plan");

  /* a plan destroyed before any prepare, the same */
  plan = make_plan(trellis_device_weight_view(dw));
  trellis_plan_destroy(plan);
  tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INVALID_ARGUMENT);

  /* many destroys: the kept ring frees the oldest, the newest stay kept */
  trellis_plan *last = NULL;
  for (int i = 0; i < 2 * TRL_PLAN_KEPT; ++i) {
    last = make_plan(trellis_device_weight_view(dw));
    trellis_plan_destroy(last);
  }
  tu_assert_status(trellis_plan_query(last, 1, &sz),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("it was destroyed");

  trl_plan_keep_destroyed(was);
  trellis_device_weight_destroy(dw);
  gw_free(&w);
}

/* Memory that never held a plan. */
static void test_foreign_pointer(void **state) {
  (void)state;
  void *garbage = calloc(1, 1 << 16);
  assert_non_null(garbage);
  trellis_plan *plan = (trellis_plan *)garbage;
  trellis_buffer_sizes sz;
  tu_assert_status(trellis_plan_query(plan, 1, &sz),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("not from trellis_plan_create");
  tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_buffers b;
  trellis_buffers_init(&b);
  tu_assert_status(trellis_run(plan, dummy, 1, dummy, &b, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_clear_error();
  trellis_plan_destroy(plan); /* left alone: not freed */
  tu_assert_error_has("not a live plan");
  free(garbage);
}

/* A plan made on device 0, run with device 1 current. The check is the
 * first thing run does after the plan's own, so a wrong device never
 * reaches a launch; back on device 0 the same call runs. */
static void test_other_device(void **state) {
  (void)state;
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  if (count < 2) {
    print_message("one CUDA device: the device check needs two\n");
    skip();
  }
  CK(cudaSetDevice(0));
  gw w;
  gw_random(&w, 256, 256, 4, TRELLIS_CB_MCG, 0, 0, 72);
  trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0);
  grun g;
  grun_open(&g, &w.w, &d);
  void *x = rand_input(1, 256, TRELLIS_F16, 73);
  float *eager = grun_forward(&g, x, 1, NULL);

  CK(cudaSetDevice(1));
  tu_assert_status(trellis_run(g.plan, g.dx, 1, g.dy, &g.b, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("the current CUDA device is 1 but the plan was "
                      "created on device 0");
  /* prepare checks the same on a plan made on device 0 */
  trellis_plan *fresh = NULL;
  CK(cudaSetDevice(0));
  OK(trellis_plan_create(&g.dw, &d, &fresh));
  CK(cudaSetDevice(1));
  tu_assert_status(trellis_plan_prepare(fresh), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("current device 1 is not the plan's device 0");
  CK(cudaSetDevice(0));
  trellis_plan_destroy(fresh);

  float *again = grun_forward(&g, x, 1, NULL);
  assert_memory_equal(again, eager, 256 * sizeof(float));
  free(again);
  free(eager);
  free(x);
  grun_close(&g);
  gw_free(&w);
}

/* The plan flags: a bit the library does not know is refused and named;
 * NO_DEPENDENT_LAUNCH changes when launches start, never what they compute:
 * on the fused path (K6/MCG, m = 1 and 40), the register-direct kernel
 * (m = 4) and the split-K decode-GEMM (m = 40 with FORCE_GENERIC), its
 * output equals the default plan's bit for bit, eager and replayed. */
static void test_flags(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 4096, 1024, 6, TRELLIS_CB_MCG, 0, 1, 91);
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&w.w, &dwh));
  trellis_plan_desc bad = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0x40u);
  trellis_plan *plan = NULL;
  tu_assert_status(
      trellis_plan_create(trellis_device_weight_view(dwh), &bad, &plan),
      TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("unknown flags 0x40");
  assert_null(plan);
  trellis_device_weight_destroy(dwh);
  static const struct {
    int64_t m;
    uint32_t flags;
  } runs[] = {{1, 0},
              {40, 0},
              {4, TRELLIS_PLAN_FORCE_GENERIC},
              {40, TRELLIS_PLAN_FORCE_GENERIC}};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; ++r) {
    const int64_t m = runs[r].m;
    void *x = rand_input(m, w.w.k, TRELLIS_F16, 700 + r);
    grun a, b;
    trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F32, runs[r].flags);
    grun_open(&a, &w.w, &d);
    d.flags |= TRELLIS_PLAN_NO_DEPENDENT_LAUNCH;
    grun_open(&b, &w.w, &d);
    float *ya = grun_forward(&a, x, m, s);
    float *yb = grun_forward(&b, x, m, s);
    assert_memory_equal(ya, yb, (size_t)(m * w.w.n) * sizeof(float));
    grun_capture_replay(&b, m, &b.b, s, ya, 3, 1, 1);
    free(ya);
    free(yb);
    free(x);
    grun_close(&a);
    grun_close(&b);
  }
  CK(cudaStreamDestroy(s));
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_use_after_destroy),
      cmocka_unit_test(test_foreign_pointer),
      cmocka_unit_test(test_other_device),
      cmocka_unit_test(test_flags),
  };
  return TU_RUN_TESTS("gpu_plan_checks", tests);
}
