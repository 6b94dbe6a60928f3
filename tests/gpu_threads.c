/* SPDX-License-Identifier: Apache-2.0 */
/* Plans from several host threads, as trellis.h's threading rules allow:
 * plans of one uploaded weight created, prepared and run by eight threads
 * at once, each on its own stream (the fused path's small m, the generic
 * path, the dense path); one plan queried and run by eight threads on one
 * stream; weights uploaded and destroyed by several threads at once. Every
 * output must equal the one-thread run bit for bit. Exits 77 (skipped)
 * without a GPU. */
#include "gpu_util.h"

#include <pthread.h>

#define THREADS 8
#define REPS 10

static const int64_t kK = 1024, kN = 1536;

typedef struct outcome {
  int failures;
  char first[512];
} outcome;

static void record(outcome *o, const char *what, const char *detail) {
  if (o->failures++ == 0)
    snprintf(o->first, sizeof o->first, "%s: %s", what, detail);
}

#define T_OK(o, call)                                                          \
  do {                                                                         \
    trellis_status st_ = (call);                                               \
    if (st_ != TRELLIS_OK) {                                                   \
      record((o), #call, trellis_last_error());                                \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define T_CK(o, call)                                                          \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      record((o), #call, cudaGetErrorString(e_));                              \
      goto done;                                                               \
    }                                                                          \
  } while (0)

static void assert_no_failures(const outcome *o, int count) {
  for (int i = 0; i < count; i++)
    if (o[i].failures)
      fail_msg("thread %d: %d failure(s), the first: %s", i, o[i].failures,
               o[i].first);
}

/* y (fp32, m x n) of one eager run of a fresh plan of `dw` at m. */
static float *one_run(const trellis_weight *dw, const trellis_plan_desc *d,
                      const void *x, int64_t m) {
  trellis_plan *plan;
  OK(trellis_plan_create(dw, d, &plan));
  OK(trellis_plan_prepare(plan));
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(plan, m, &sz));
  trellis_buffers b;
  trellis_buffers_init(&b);
  b.rotated_bytes = sz.rotated_bytes;
  b.workspace_bytes = sz.workspace_bytes;
  CK(cudaMalloc(&b.rotated, sz.rotated_bytes ? sz.rotated_bytes : 16));
  if (sz.workspace_bytes)
    CK(cudaMalloc(&b.workspace, sz.workspace_bytes));
  void *dx = dev_copy(x, (size_t)(m * dw->k) * 2);
  const size_t yb = (size_t)(m * dw->n) * 4;
  void *dy;
  CK(cudaMalloc(&dy, yb));
  OK(trellis_run(plan, dx, m, dy, &b, NULL));
  CK(cudaDeviceSynchronize());
  float *y = malloc(yb);
  assert_non_null(y);
  CK(cudaMemcpy(y, dy, yb, cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(b.rotated);
  cudaFree(b.workspace);
  trellis_plan_destroy(plan);
  return y;
}

/* ------------------------------- a plan per thread, a stream per plan -- */

typedef struct plan_job {
  int device;
  const trellis_weight *dw;
  trellis_plan_desc desc;
  int64_t m;
  const void *x;     /* host fp16 [m][k] */
  const float *want; /* fp32 [m][n] */
  int exact;         /* bit for bit; else (cuBLASLt's dense path) within 1e-5 */
  outcome out;
} plan_job;

/* y against want: equal, or within a relative L2 of 1e-5. */
static int same_result(const float *y, const float *want, size_t count,
                       int exact) {
  if (exact)
    return memcmp(y, want, count * sizeof *y) == 0;
  return tu_all_finite(y, count) && tu_rel_l2(y, want, count) <= 1e-5;
}

static void *plan_worker(void *arg) {
  plan_job *j = arg;
  trellis_plan *plan = NULL;
  cudaStream_t s = NULL;
  trellis_buffers b;
  trellis_buffers_init(&b);
  void *dx = NULL, *dy = NULL;
  float *y = NULL;
  const size_t yb = (size_t)(j->m * j->dw->n) * 4;
  trellis_buffer_sizes sz;
  T_CK(&j->out, cudaSetDevice(j->device));
  T_OK(&j->out, trellis_plan_create(j->dw, &j->desc, &plan));
  T_OK(&j->out, trellis_plan_prepare(plan));
  T_OK(&j->out, trellis_plan_query(plan, j->m, &sz));
  b.rotated_bytes = sz.rotated_bytes;
  b.workspace_bytes = sz.workspace_bytes;
  T_CK(&j->out,
       cudaMalloc(&b.rotated, sz.rotated_bytes ? sz.rotated_bytes : 16));
  if (sz.workspace_bytes)
    T_CK(&j->out, cudaMalloc(&b.workspace, sz.workspace_bytes));
  T_CK(&j->out, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  T_CK(&j->out, cudaMalloc(&dx, (size_t)(j->m * j->dw->k) * 2));
  T_CK(&j->out, cudaMalloc(&dy, yb));
  T_CK(&j->out, cudaMemcpyAsync(dx, j->x, (size_t)(j->m * j->dw->k) * 2,
                                cudaMemcpyHostToDevice, s));
  y = malloc(yb);
  if (!y) {
    record(&j->out, "malloc", "out of memory");
    goto done;
  }
  for (int r = 0; r < REPS; r++) {
    T_CK(&j->out, cudaMemsetAsync(dy, 0xFF, yb, s));
    T_OK(&j->out, trellis_run(plan, dx, j->m, dy, &b, s));
    T_CK(&j->out, cudaMemcpyAsync(y, dy, yb, cudaMemcpyDeviceToHost, s));
    T_CK(&j->out, cudaStreamSynchronize(s));
    if (!same_result(y, j->want, yb / 4, j->exact))
      record(&j->out, "a run", "differs from the one-thread run");
  }
done:
  free(y);
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(b.rotated);
  cudaFree(b.workspace);
  if (s)
    cudaStreamDestroy(s);
  trellis_plan_destroy(plan);
  return NULL;
}

static void plans_of_one_weight(int64_t m, trellis_path want_path) {
  int device = 0, major = 0;
  CK(cudaGetDevice(&device));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  gw w;
  gw_random(&w, kK, kN, 6, TRELLIS_CB_MCG, 0, 1, 500 + (uint64_t)m);
  trellis_device_weight *dwh;
  OK(trellis_weight_upload(&w.w, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F32, 0);
  {
    trellis_plan *probe;
    OK(trellis_plan_create(dw, &d, &probe));
    OK(trellis_plan_prepare(probe));
    trellis_buffer_sizes sz;
    OK(trellis_plan_query(probe, m, &sz));
    if (want_path != TRELLIS_PATH_FUSED || major >= 9)
      assert_int_equal(sz.path, want_path);
    print_message("m = %lld: the %s path from %d threads\n", (long long)m,
                  trellis_path_name(sz.path), THREADS);
    trellis_plan_destroy(probe);
  }
  plan_job jobs[THREADS];
  void *xs[THREADS];
  float *want[THREADS];
  for (int i = 0; i < THREADS; i++) {
    xs[i] = rand_input(m, kK, TRELLIS_F16, 600 + (uint64_t)i);
    want[i] = one_run(dw, &d, xs[i], m);
    jobs[i] = (plan_job){
        device, dw, d, m, xs[i], want[i], want_path != TRELLIS_PATH_DENSE,
        {0, ""}};
  }
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, plan_worker, &jobs[i]), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    outs[i] = jobs[i].out;
    free(xs[i]);
    free(want[i]);
  }
  assert_no_failures(outs, THREADS);
  trellis_device_weight_destroy(dwh);
  gw_free(&w);
}

static void test_plans_from_host_threads_small_m(void **state) {
  (void)state;
  plans_of_one_weight(4, TRELLIS_PATH_FUSED);
}

static void test_plans_from_host_threads_generic(void **state) {
  (void)state;
  plans_of_one_weight(140, TRELLIS_PATH_GENERIC);
}

static void test_plans_from_host_threads_dense(void **state) {
  (void)state;
  plans_of_one_weight(320, TRELLIS_PATH_DENSE);
}

/* ------------------------- one plan, many threads, one stream -- */

typedef struct shared_job {
  int device;
  const trellis_plan *plan;
  const trellis_buffers *b;
  cudaStream_t s;
  int64_t m, k, n;
  const void *x;
  const float *want;
  float *got; /* REPS results, copied back on the shared stream */
  outcome out;
} shared_job;

/* Runs on one stream are ordered, so threads may share the plan and its
 * buffers there; each has its own x and y. */
static void *shared_worker(void *arg) {
  shared_job *j = arg;
  void *dx = NULL, *dy = NULL;
  const size_t yb = (size_t)(j->m * j->n) * 4;
  trellis_buffer_sizes sz;
  T_CK(&j->out, cudaSetDevice(j->device));
  T_CK(&j->out, cudaMalloc(&dx, (size_t)(j->m * j->k) * 2));
  T_CK(&j->out, cudaMalloc(&dy, yb));
  T_CK(&j->out, cudaMemcpyAsync(dx, j->x, (size_t)(j->m * j->k) * 2,
                                cudaMemcpyHostToDevice, j->s));
  for (int r = 0; r < REPS; r++) {
    T_OK(&j->out, trellis_plan_query(j->plan, j->m, &sz));
    T_CK(&j->out, cudaMemsetAsync(dy, 0xFF, yb, j->s));
    T_OK(&j->out, trellis_run(j->plan, dx, j->m, dy, j->b, j->s));
    T_CK(&j->out, cudaMemcpyAsync(j->got + (size_t)r * (yb / 4), dy, yb,
                                  cudaMemcpyDeviceToHost, j->s));
  }
  T_CK(&j->out, cudaStreamSynchronize(j->s));
  for (int r = 0; r < REPS; r++)
    if (memcmp(j->got + (size_t)r * (yb / 4), j->want, yb) != 0)
      record(&j->out, "a run", "differs from the one-thread run");
done:
  cudaStreamSynchronize(j->s);
  cudaFree(dx);
  cudaFree(dy);
  return NULL;
}

static void test_one_plan_many_threads_one_stream(void **state) {
  (void)state;
  int device = 0;
  CK(cudaGetDevice(&device));
  const int64_t m = 8;
  gw w;
  gw_random(&w, kK, kN, 4, TRELLIS_CB_MCG, 0, 0, 700);
  grun g;
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F32, 0);
  grun_open(&g, &w.w, &d);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  shared_job jobs[THREADS];
  void *xs[THREADS];
  float *want[THREADS];
  for (int i = 0; i < THREADS; i++) {
    xs[i] = rand_input(m, kK, TRELLIS_F16, 710 + (uint64_t)i);
    want[i] = one_run(&g.dw, &d, xs[i], m);
    float *got = NULL;
    CK(cudaMallocHost((void **)&got, (size_t)(REPS * m * kN) * 4));
    jobs[i] = (shared_job){device, g.plan, &g.b,    s,   m,      kK,
                           kN,     xs[i],  want[i], got, {0, ""}};
  }
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_create(&t[i], NULL, shared_worker, &jobs[i]), 0);
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++) {
    outs[i] = jobs[i].out;
    cudaFreeHost(jobs[i].got);
    free(xs[i]);
    free(want[i]);
  }
  assert_no_failures(outs, THREADS);
  CK(cudaStreamDestroy(s));
  grun_close(&g);
  gw_free(&w);
}

/* ---------------------------------------- uploads from many threads -- */

typedef struct upload_job {
  int device;
  const trellis_weight *host;
  outcome out;
} upload_job;

static void *upload_worker(void *arg) {
  upload_job *j = arg;
  T_CK(&j->out, cudaSetDevice(j->device));
  for (int r = 0; r < 4; r++) {
    trellis_device_weight *dwh = NULL;
    T_OK(&j->out, trellis_weight_upload(j->host, &dwh));
    const trellis_weight *v = trellis_device_weight_view(dwh);
    if (!v || v->k != j->host->k)
      record(&j->out, "trellis_device_weight_view", trellis_last_error());
    trellis_device_weight_destroy(dwh);
  }
done:
  return NULL;
}

static void test_uploads_from_host_threads(void **state) {
  (void)state;
  int device = 0;
  CK(cudaGetDevice(&device));
  gw w;
  gw_random(&w, kK, kN, 3, TRELLIS_CB_3INST, 1, 1, 800);
  upload_job jobs[THREADS];
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i] = (upload_job){device, &w.w, {0, ""}};
    assert_int_equal(pthread_create(&t[i], NULL, upload_worker, &jobs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++)
    outs[i] = jobs[i].out;
  assert_no_failures(outs, THREADS);
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plans_from_host_threads_small_m),
      cmocka_unit_test(test_plans_from_host_threads_generic),
      cmocka_unit_test(test_plans_from_host_threads_dense),
      cmocka_unit_test(test_one_plan_many_threads_one_stream),
      cmocka_unit_test(test_uploads_from_host_threads),
  };
  return TU_RUN_TESTS("gpu_threads", tests);
}
