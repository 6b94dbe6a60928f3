/* SPDX-License-Identifier: Apache-2.0 */
/* Ownership on the GPU side: prepare is idempotent and a failed prepare
 * leaves nothing behind (a retry starts clean; run under compute-sanitizer
 * --leak-check full this also shows nothing leaks), and an uploaded weight
 * is a handle with its own destroy whose view plans borrow. Exits 77
 * (skipped) without a GPU. */
#include "gpu_util.h"

/* the fp16 W_hat the CPU reference multiplies by: run_checked's 1e-4 */
static const uint32_t kFlags = TRELLIS_PLAN_EXACT_WEIGHTS;

#include "plan/prepare_fault.h"

#include <stdatomic.h>
#include <time.h>

/* x and y of runs that must fail before touching them */
static _Alignas(16) char dummy[64];

/* Runs `plan` at m rows from x (fp16) into fp32 and checks it against the
 * CPU reference of the host weight `w`; returns the path it took. */
static trellis_path run_checked(trellis_plan *plan, const trellis_weight *w,
                                int64_t m, uint64_t seed) {
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(plan, m, &sz));
  trellis_buffers b;
  trellis_buffers_init(&b);
  b.rotated_bytes = sz.rotated_bytes;
  b.workspace_bytes = sz.workspace_bytes;
  CK(cudaMalloc(&b.rotated, sz.rotated_bytes ? sz.rotated_bytes : 16));
  if (sz.workspace_bytes)
    CK(cudaMalloc(&b.workspace, sz.workspace_bytes));
  void *x = rand_input(m, w->k, TRELLIS_F16, seed);
  float *ref = cpu_ref(w, x, TRELLIS_F16, m, TRELLIS_F32);
  void *dx = dev_copy(x, (size_t)(m * w->k) * 2);
  const size_t yb = (size_t)(m * w->n) * 4;
  void *dy;
  CK(cudaMalloc(&dy, yb));
  CK(cudaMemset(dy, 0xFF, yb));
  OK(trellis_run(plan, dx, m, dy, &b, NULL));
  CK(cudaStreamSynchronize(NULL));
  float *y = malloc(yb);
  CK(cudaMemcpy(y, dy, yb, cudaMemcpyDeviceToHost));
  const int dense = sz.path == TRELLIS_PATH_DENSE;
  check_close(y, ref, (size_t)(m * w->n), dense ? 6e-4 : 1e-4,
              dense ? 3e-3 : 1e-3, trellis_path_name(sz.path));
  free(y);
  free(ref);
  free(x);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(b.rotated);
  cudaFree(b.workspace);
  return sz.path;
}

/* A K6/MCG layer with legacy signs: prepare allocates plan memory (the
 * expanded signs, the fused path's flags) and, with max_m in the dense
 * range, a cuBLASLt handle. Every path is run after prepare. */
static const int64_t kK = 1024, kN = 1536, kMaxM = 320;

static void check_every_path(trellis_plan *plan, const gw *w) {
  int dev = 0, major = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  const trellis_path small = run_checked(plan, &w->w, 1, 301);
  if (major >= 9) /* the fused kernel exists from sm_90 */
    assert_int_equal(small, TRELLIS_PATH_FUSED);
  assert_int_equal(run_checked(plan, &w->w, 140, 302), TRELLIS_PATH_GENERIC);
  assert_int_equal(run_checked(plan, &w->w, kMaxM, 303), TRELLIS_PATH_DENSE);
}

static void test_prepare_twice(void **state) {
  (void)state;
  gw w;
  gw_random(&w, kK, kN, 6, TRELLIS_CB_MCG, 1, 1, 41);
  trellis_device_weight *dw;
  OK(trellis_weight_upload(&w.w, &dw));
  trellis_plan_desc d = gu_desc(kMaxM, TRELLIS_F16, TRELLIS_F32, kFlags);
  trellis_plan *plan;
  OK(trellis_plan_create(trellis_device_weight_view(dw), &d, &plan));
  /* run before prepare */
  trellis_buffers b;
  trellis_buffers_init(&b);
  tu_assert_status(trellis_run(plan, dummy, 1, dummy, &b, NULL),
                   TRELLIS_ERR_NOT_PREPARED);
  OK(trellis_plan_prepare(plan));
  OK(trellis_plan_prepare(plan)); /* a no-op: nothing allocated twice */
  check_every_path(plan, &w);
  OK(trellis_plan_prepare(plan)); /* and after runs */
  check_every_path(plan, &w);
  trellis_plan_destroy(plan);
  trellis_device_weight_destroy(dw);
  gw_free(&w);
}

/* A failure after each step of prepare: the call reports it, the plan is
 * not prepared, and a retry prepares it fully (flags zeroed, signs
 * expanded). A plan whose prepare failed may also just be destroyed. */
static void test_prepare_retry_after_failure(void **state) {
  (void)state;
  gw w;
  gw_random(&w, kK, kN, 6, TRELLIS_CB_MCG, 1, 1, 42);
  trellis_device_weight *dw;
  OK(trellis_weight_upload(&w.w, &dw));
  const trellis_weight *view = trellis_device_weight_view(dw);
  trellis_plan_desc d = gu_desc(kMaxM, TRELLIS_F16, TRELLIS_F32, kFlags);
  const trl_prepare_step steps[3] = {TRL_PREPARE_AFTER_MEMORY,
                                     TRL_PREPARE_AFTER_FUSED,
                                     TRL_PREPARE_AFTER_DENSE};
  for (int i = 0; i < 3; ++i) {
    trellis_plan *plan;
    OK(trellis_plan_create(view, &d, &plan));
    trl_plan_inject_prepare_failure(plan, steps[i]);
    tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INTERNAL);
    tu_assert_error_has("injected");
    trellis_buffers b;
    trellis_buffers_init(&b);
    tu_assert_status(trellis_run(plan, dummy, 1, dummy, &b, NULL),
                     TRELLIS_ERR_NOT_PREPARED);
    /* twice in a row, then the retry that succeeds */
    trl_plan_inject_prepare_failure(plan, steps[i]);
    tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INTERNAL);
    OK(trellis_plan_prepare(plan));
    OK(trellis_plan_prepare(plan));
    check_every_path(plan, &w);
    trellis_plan_destroy(plan);

    OK(trellis_plan_create(view, &d, &plan));
    trl_plan_inject_prepare_failure(plan, steps[i]);
    tu_assert_status(trellis_plan_prepare(plan), TRELLIS_ERR_INTERNAL);
    trellis_plan_destroy(plan); /* frees what the failed attempt took */
  }
  trellis_device_weight_destroy(dw);
  gw_free(&w);
}

/* Holds a stream until the test releases it, or for at most ~30 s. */
typedef struct stream_hold {
  atomic_int release, timed_out;
} stream_hold;

static void CUDART_CB hold_stream(void *p) {
  stream_hold *h = p;
  for (int i = 0; i < 30000 && !atomic_load(&h->release); ++i)
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  if (!atomic_load(&h->release))
    atomic_store(&h->timed_out, 1);
}

/* Prepare waits for its own work only: while another stream is held up,
 * prepare (with plan memory to zero and signs to expand) returns; one
 * that synchronised the device would wait until the hold timed out. */
static void test_prepare_leaves_other_streams(void **state) {
  (void)state;
  gw w;
  gw_random(&w, kK, kN, 6, TRELLIS_CB_MCG, 1, 0, 43);
  trellis_device_weight *dw;
  OK(trellis_weight_upload(&w.w, &dw));
  trellis_plan_desc d = gu_desc(kMaxM, TRELLIS_F16, TRELLIS_F32, kFlags);
  trellis_plan *plan;
  OK(trellis_plan_create(trellis_device_weight_view(dw), &d, &plan));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_hold hold;
  atomic_init(&hold.release, 0);
  atomic_init(&hold.timed_out, 0);
  /* compute-sanitizer serialises the device's work, so there prepare
   * cannot pass a held stream: the run checks what it can (device-check.sh
   * sets TRELLIS_UNDER_SANITIZER) */
  const int serialised = getenv("TRELLIS_UNDER_SANITIZER") != NULL;
  if (!serialised)
    CK(cudaLaunchHostFunc(s, hold_stream, &hold));
  OK(trellis_plan_prepare(plan));
  atomic_store(&hold.release, 1);
  CK(cudaStreamSynchronize(s));
  assert_int_equal(atomic_load(&hold.timed_out), 0);
  check_every_path(plan, &w);
  trellis_plan_destroy(plan);
  CK(cudaStreamDestroy(s));
  trellis_device_weight_destroy(dw);
  gw_free(&w);
}

static int is_device_pointer(const void *p) {
  struct cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return attr.type == cudaMemoryTypeDevice;
}

/* The handle owns the device memory; its view is what plans borrow. The
 * order: upload, view, plan create, run, plan destroy, weight destroy. */
static void test_device_weight_handle(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 512, 768, 4, TRELLIS_CB_3INST, 0, 1, 44);
  trellis_device_weight *dw = NULL;
  OK(trellis_weight_upload(&w.w, &dw));
  assert_non_null(dw);
  const trellis_weight *v = trellis_device_weight_view(dw);
  assert_non_null(v);
  assert_true(v == trellis_device_weight_view(dw)); /* one view per handle */
  OK(trellis_weight_validate(v));
  assert_int_equal(v->k, w.w.k);
  assert_int_equal(v->n, w.w.n);
  assert_int_equal(v->bits, w.w.bits);
  assert_int_equal(v->codebook, w.w.codebook);
  assert_true(is_device_pointer(v->trellis));
  assert_true(is_device_pointer(v->suh));
  assert_true(is_device_pointer(v->svh));
  assert_true(is_device_pointer(v->bias));
  assert_null(v->su);
  assert_null(v->sv);
  /* the payload went up repacked into the lane layout */
  gu_expect_lanes_payload(&w.w, v);

  trellis_plan_desc d = gu_desc(40, TRELLIS_F16, TRELLIS_F32, kFlags);
  trellis_plan *plan;
  OK(trellis_plan_create(v, &d, &plan));
  OK(trellis_plan_prepare(plan));
  run_checked(plan, &w.w, 40, 401);
  trellis_plan_destroy(plan);
  trellis_device_weight_destroy(dw);

  /* NULL: destroy is a no-op (twice), view says why it has nothing */
  trellis_device_weight_destroy(NULL);
  trellis_device_weight_destroy(NULL);
  trellis_clear_error();
  assert_null(trellis_device_weight_view(NULL));
  tu_assert_error_has("NULL");
  /* a pointer that is not a handle: an error, not a crash */
  void *garbage = calloc(1, 4096);
  trellis_clear_error();
  assert_null(trellis_device_weight_view((trellis_device_weight *)garbage));
  tu_assert_error_has("not a device weight");
  trellis_clear_error();
  trellis_device_weight_destroy((trellis_device_weight *)garbage);
  tu_assert_error_has("not a device weight");
  free(garbage);

  /* bad uploads leave *out NULL */
  tu_assert_status(trellis_weight_upload(&w.w, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_weight bad = w.w;
  bad.k = 100;
  dw = (trellis_device_weight *)&bad; /* any non-NULL value */
  assert_int_not_equal(trellis_weight_upload(&bad, &dw), TRELLIS_OK);
  assert_null(dw);
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_prepare_twice),
      cmocka_unit_test(test_prepare_retry_after_failure),
      cmocka_unit_test(test_prepare_leaves_other_streams),
      cmocka_unit_test(test_device_weight_handle),
  };
  return TU_RUN_TESTS("gpu_ownership", tests);
}
