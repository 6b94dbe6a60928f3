/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the GPU tests (header-only: every gpu_*.c is one program).
 * Random EXL3 layers (tools/synth.h), device buffers, running a plan, CPU
 * reference. */
#ifndef GPU_UTIL_H
#define GPU_UTIL_H

#include "cuda/kernels.h"
#include "plan/test_hooks.h"
#include "testutil.h"
#include "tools/synth.h"
#include "tools/synth_model.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every GPU test starts here: exits 77 without a GPU, and applies
 * TRELLIS_TEST_MAX_CLUSTER (a bound on the register-direct kernel's
 * clusters for the sanitizer runs: trl_direct_test_clusters). */
static inline void gu_require_gpu(void) {
  tu_require_gpu();
  const char *c = getenv("TRELLIS_TEST_MAX_CLUSTER");
  if (c && *c)
    trl_direct_test_clusters(atoi(c), 0);
}
#undef TU_REQUIRE_GPU
#define TU_REQUIRE_GPU() gu_require_gpu()

#define CK(call)                                                               \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess)                                                     \
      fail_msg("%s:%d %s: %s", __FILE__, __LINE__, #call,                      \
               cudaGetErrorString(e_));                                        \
  } while (0)

#define OK(call) tu_assert_status((call), TRELLIS_OK)

/* A plan description with the given limits, dtypes and flags. */
static inline trellis_plan_desc gu_desc(int64_t max_m, trellis_dtype in,
                                        trellis_dtype out, uint32_t flags) {
  trellis_plan_desc d;
  trellis_plan_desc_init(&d);
  d.max_m = max_m;
  d.input_dtype = in;
  d.output_dtype = out;
  d.flags = flags;
  return d;
}

/* A host weight and the arrays it owns. */
typedef synth_layer gw;

/* Random layer like a real checkpoint (synth_layer_init): random payload,
 * suh/svh with random signs (or legacy packed signs), optional bias. */
static inline void gw_random(gw *g, int64_t k, int64_t n, int bits,
                             trellis_codebook cb, int legacy, int bias,
                             uint64_t seed) {
  unsigned flags =
      (legacy ? SYNTH_LEGACY_SIGNS : 0u) | (bias ? SYNTH_BIAS : 0u);
  OK(synth_layer_init(g, k, n, bits, cb, flags, seed));
}

static inline void gw_free(gw *g) { synth_layer_free(g); }

/* Random input rows in [-1, 1) in dtype dt; malloc'd. */
static inline void *rand_input(int64_t m, int64_t k, trellis_dtype dt,
                               uint64_t seed) {
  synth_rng r;
  synth_seed(&r, seed);
  size_t count = (size_t)(m * k);
  void *x = malloc(count * trellis_dtype_size(dt));
  assert_non_null(x);
  synth_fill_uniform(&r, x, dt, count, -1.0f, 1.0f);
  return x;
}

/* Any dtype array -> malloc'd float array. */
static inline float *to_float(const void *v, size_t count, trellis_dtype dt) {
  float *out = malloc(count * sizeof(float));
  for (size_t i = 0; i < count; ++i) {
    if (dt == TRELLIS_F16)
      out[i] = trellis_f16_to_f32(((const uint16_t *)v)[i]);
    else if (dt == TRELLIS_BF16)
      out[i] = trellis_bf16_to_f32(((const uint16_t *)v)[i]);
    else
      out[i] = ((const float *)v)[i];
  }
  return out;
}

/* CPU reference forward, all cores, output as float. */
static inline float *cpu_ref(const trellis_weight *w, const void *x,
                             trellis_dtype xdt, int64_t m, trellis_dtype ydt) {
  size_t ws_bytes = trellis_cpu_workspace_size(w, m, 0);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  void *y = malloc((size_t)(m * w->n) * trellis_dtype_size(ydt));
  OK(trellis_cpu_forward(w, x, xdt, m, y, ydt, ws, ws_bytes, 0));
  float *f = to_float(y, (size_t)(m * w->n), ydt);
  free(ws);
  free(y);
  return f;
}

/* A device copy of `host`, complete when it returns: a copy from pageable
 * memory may still be in flight after cudaMemcpy returns, and work on a
 * non-blocking stream is not ordered after the legacy stream's. */
static inline void *dev_copy(const void *host, size_t bytes) {
  void *d = NULL;
  CK(cudaMalloc(&d, bytes ? bytes : 16));
  if (bytes) {
    CK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    CK(cudaDeviceSynchronize());
  }
  return d;
}

/* The payload of device weight `dev` (the view of an upload of `host`)
 * equals the host's repacked into the lane layout, record1 (a pair's)
 * where the upload put it, after record0. */
static inline void gu_expect_lanes_payload(const trellis_weight *host,
                                           const trellis_weight *dev) {
  assert_int_equal(dev->layout, TRELLIS_LAYOUT_LANES);
  const size_t bytes = trellis_weight_payload_bytes(host);
  int16_t *want = malloc(bytes), *got = malloc(bytes);
  assert_true(want && got);
  int16_t *want1 = host->pair == TRELLIS_PAIR_NONE
                       ? NULL
                       : want + (dev->trellis1 - dev->trellis);
  OK(trellis_weight_repack_host(host, want, want1));
  CK(cudaMemcpy(got, dev->trellis, bytes, cudaMemcpyDeviceToHost));
  assert_memory_equal(got, want, bytes);
  free(want);
  free(got);
}

/* A prepared plan with device buffers sized for max_m. */
typedef struct grun {
  trellis_device_weight *dwh;
  trellis_weight dw; /* its view */
  trellis_plan *plan;
  trellis_plan_desc desc;
  trellis_buffers b;
  void *dx, *dy;
  int64_t max_m;
} grun;

static inline void grun_buffers(grun *g, int64_t m) {
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(g->plan, m, &sz));
  trellis_buffers_init(&g->b);
  g->b.rotated_bytes = sz.rotated_bytes;
  g->b.workspace_bytes = sz.workspace_bytes;
  CK(cudaMalloc(&g->b.rotated, sz.rotated_bytes));
  if (sz.workspace_bytes)
    CK(cudaMalloc(&g->b.workspace, sz.workspace_bytes));
}

/* A plan of `host` uploaded in `layout` (LANES or KMAJOR). */
static inline void grun_open_layout(grun *g, const trellis_weight *host,
                                    const trellis_plan_desc *desc,
                                    trellis_layout layout) {
  memset(g, 0, sizeof *g);
  OK(trellis_weight_upload_layout(host, layout, &g->dwh));
  g->dw = *trellis_device_weight_view(g->dwh);
  g->desc = *desc;
  g->max_m = desc->max_m;
  OK(trellis_plan_create(&g->dw, desc, &g->plan));
  OK(trellis_plan_prepare(g->plan));
  /* Buffers sized for the largest need over m = 1..max_m. */
  trellis_buffer_sizes sz;
  size_t rot = 0, ws = 0;
  for (int64_t m = 1; m <= desc->max_m; m = m < 8 ? m + 1 : m * 2) {
    OK(trellis_plan_query(g->plan, m, &sz));
    rot = sz.rotated_bytes > rot ? sz.rotated_bytes : rot;
    ws = sz.workspace_bytes > ws ? sz.workspace_bytes : ws;
  }
  OK(trellis_plan_query(g->plan, desc->max_m, &sz));
  rot = sz.rotated_bytes > rot ? sz.rotated_bytes : rot;
  ws = sz.workspace_bytes > ws ? sz.workspace_bytes : ws;
  trellis_buffers_init(&g->b);
  g->b.rotated_bytes = rot;
  g->b.workspace_bytes = ws;
  CK(cudaMalloc(&g->b.rotated, rot));
  if (ws)
    CK(cudaMalloc(&g->b.workspace, ws));
  CK(cudaMalloc(&g->dx, (size_t)(desc->max_m * host->k) * 4));
  CK(cudaMalloc(&g->dy, (size_t)(desc->max_m * host->n) * 4));
}

static inline void grun_open(grun *g, const trellis_weight *host,
                             const trellis_plan_desc *desc) {
  grun_open_layout(g, host, desc, TRELLIS_LAYOUT_LANES);
}

static inline void grun_close(grun *g) {
  trellis_plan_destroy(g->plan);
  trellis_device_weight_destroy(g->dwh);
  cudaFree(g->b.rotated);
  cudaFree(g->b.workspace);
  cudaFree(g->dx);
  cudaFree(g->dy);
  memset(g, 0, sizeof *g);
}

/* Uploads x, poisons y with NaN, runs on `stream`, returns y as float.
 * The upload and the poison go on `stream` too: a non-blocking stream is
 * not ordered after the legacy stream's copies and memsets. */
static inline float *grun_forward(grun *g, const void *x, int64_t m,
                                  cudaStream_t stream) {
  size_t xb = (size_t)(m * g->dw.k) * trellis_dtype_size(g->desc.input_dtype);
  size_t yb = (size_t)(m * g->dw.n) * trellis_dtype_size(g->desc.output_dtype);
  CK(cudaMemcpyAsync(g->dx, x, xb, cudaMemcpyHostToDevice, stream));
  CK(cudaMemsetAsync(g->dy, 0xFF, yb, stream)); /* NaN in every dtype */
  OK(trellis_run(g->plan, g->dx, m, g->dy, &g->b, stream));
  CK(cudaStreamSynchronize(stream));
  void *h = malloc(yb);
  CK(cudaMemcpy(h, g->dy, yb, cudaMemcpyDeviceToHost));
  float *f = to_float(h, (size_t)(m * g->dw.n), g->desc.output_dtype);
  free(h);
  return f;
}

/* The CUDA-graph contract's check: one trellis_run of g's plan on m rows
 * (x already in g->dx) with the buffers `b`, captured on `s` and replayed
 * `replays` times; y is poisoned with NaN before every `poison_every`-th
 * replay, and after every `check_every`-th replay and the last it must equal
 * `eager` (y as float, from grun_forward) bit for bit. */
static inline void grun_capture_replay(grun *g, int64_t m,
                                       const trellis_buffers *b, cudaStream_t s,
                                       const float *eager, int replays,
                                       int poison_every, int check_every) {
  const size_t count = (size_t)(m * g->dw.n);
  const size_t yb = count * trellis_dtype_size(g->desc.output_dtype);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  OK(trellis_run(g->plan, g->dx, m, g->dy, b, s));
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  void *h = malloc(yb);
  assert_non_null(h);
  for (int r = 0; r < replays; ++r) {
    if (r % poison_every == 0)
      CK(cudaMemsetAsync(g->dy, 0xFF, yb, s)); /* NaN in every dtype */
    CK(cudaGraphLaunch(exec, s));
    if (r % check_every == 0 || r == replays - 1) {
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpy(h, g->dy, yb, cudaMemcpyDeviceToHost));
      float *f = to_float(h, count, g->desc.output_dtype);
      assert_memory_equal(f, eager, count * sizeof(float));
      free(f);
    }
  }
  free(h);
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
}

/* Layers in a row, each reading the previous one's output (k = n), through
 * one shared set of buffers: the fused kernel and the generic path's
 * kernels are programmatic dependent launches, so a launch starts while the
 * one before it still runs and must wait for it before touching x, y, the
 * rotated buffer, the workspace or the flags. Six launches back to back
 * (eager, then a graph replayed 20 times) must equal the same chain with the
 * stream synchronised after every launch, bit for bit. */
static inline void gu_chain(grun *const *layer, trellis_buffers *b, void *p,
                            void *q, int64_t m, int steps, int sync,
                            cudaStream_t s) {
  for (int i = 0; i < steps; ++i) {
    void *in = i % 2 ? q : p, *out = i % 2 ? p : q;
    OK(trellis_run(layer[i % 2]->plan, in, m, out, b, s));
    if (sync)
      CK(cudaStreamSynchronize(s));
  }
}

static inline void gu_dependent_chain(int64_t k, int bits, trellis_codebook cb,
                                      int64_t m, uint32_t flags,
                                      trellis_path path) {
  const int steps = 6;
  /* on sm_90 and newer the kernels must really launch as dependents, or
   * this test would pass without exercising the waits */
  int dev = 0, major = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  assert_int_equal(trl_image_arch() >= 90, major >= 9);
  gw wa, wb;
  gw_random(&wa, k, k, bits, cb, 0, 1, 70);
  gw_random(&wb, k, k, bits, cb, 0, 0, 71);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F16, flags);
  grun a, b;
  grun_open(&a, &wa.w, &d);
  grun_open(&b, &wb.w, &d);
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(a.plan, m, &sz));
  assert_int_equal(sz.path, path);
  OK(trellis_plan_query(b.plan, m, &sz));
  assert_int_equal(sz.path, path);
  grun *const layer[2] = {&a, &b};
  const size_t bytes = (size_t)(m * k) * 2;
  void *x = rand_input(m, k, TRELLIS_F16, 72);
  uint16_t *want = malloc(2 * bytes), *got = malloc(2 * bytes);
  void *p = a.dx, *q = a.dy; /* ping-pong: p -> q -> p ... */

  CK(cudaMemcpyAsync(p, x, bytes, cudaMemcpyHostToDevice, s));
  gu_chain(layer, &a.b, p, q, m, steps, 1, s);
  CK(cudaMemcpy(want, p, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(want + m * k, q, bytes, cudaMemcpyDeviceToHost));
  float *f = to_float(want, (size_t)(2 * m * k), TRELLIS_F16);
  assert_true(tu_all_finite(f, (size_t)(2 * m * k)));
  free(f);

  CK(cudaMemcpyAsync(p, x, bytes, cudaMemcpyHostToDevice, s));
  CK(cudaMemsetAsync(q, 0xFF, bytes, s));
  gu_chain(layer, &a.b, p, q, m, steps, 0, s);
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(got, p, bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(got + m * k, q, bytes, cudaMemcpyDeviceToHost));
  assert_memory_equal(got, want, 2 * bytes);

  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  gu_chain(layer, &a.b, p, q, m, steps, 0, s);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 20; ++r) {
    CK(cudaMemcpyAsync(p, x, bytes, cudaMemcpyHostToDevice, s));
    CK(cudaMemsetAsync(q, 0xFF, bytes, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(got, p, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got + m * k, q, bytes, cudaMemcpyDeviceToHost));
    assert_memory_equal(got, want, 2 * bytes);
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  free(want);
  free(got);
  free(x);
  grun_close(&a);
  grun_close(&b);
  CK(cudaStreamDestroy(s));
  gw_free(&wa);
  gw_free(&wb);
}

/* One forward of a fresh plan `d` on `w` at m rows of random x (in d's
 * input dtype, from `seed`), beside the CPU reference in `ref_dtype`:
 * returns y as floats and *ref the reference; *sz receives the plan's
 * buffer sizes (and path) at m when sz is not NULL. */
static inline float *gu_forward_vs_ref(const trellis_weight *w,
                                       const trellis_plan_desc *d, int64_t m,
                                       uint64_t seed, trellis_dtype ref_dtype,
                                       float **ref, trellis_buffer_sizes *sz) {
  void *x = rand_input(m, w->k, d->input_dtype, seed);
  *ref = cpu_ref(w, x, d->input_dtype, m, ref_dtype);
  grun g;
  grun_open(&g, w, d);
  if (sz)
    OK(trellis_plan_query(g.plan, m, sz));
  float *y = grun_forward(&g, x, m, 0);
  grun_close(&g);
  free(x);
  return y;
}

/* Relative L2 and max-abs checks against a reference. */
static inline void check_close(const float *got, const float *ref, size_t n,
                               double rel_tol, double max_tol,
                               const char *what) {
  if (!tu_all_finite(got, n))
    fail_msg("%s: output has non-finite values (unwritten elements?)", what);
  double rel = tu_rel_l2(got, ref, n);
  double mx = tu_max_abs_diff(got, ref, n) / (tu_max_abs(ref, n) + 1e-30);
  if (rel > rel_tol || mx > max_tol)
    fail_msg("%s: rel L2 %.3g (tol %.3g), max|d|/max|y| %.3g (tol %.3g)", what,
             rel, rel_tol, mx, max_tol);
}

/* Every input x output dtype pair (f16, bf16, f32) on one layer at m rows,
 * against the CPU reference; each plan must take `path` (-1: any). One
 * output ulp where the CPU and GPU sums straddle a rounding point. */
static inline void gu_check_dtype_grid(const gw *w, int64_t m, uint64_t seed,
                                       int path) {
  const trellis_dtype dts[3] = {TRELLIS_F16, TRELLIS_BF16, TRELLIS_F32};
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 3; ++o) {
      trellis_plan_desc d = gu_desc(m, dts[i], dts[o], 0);
      float *ref;
      trellis_buffer_sizes sz;
      float *y = gu_forward_vs_ref(&w->w, &d, m, seed + (uint64_t)i, dts[o],
                                   &ref, &sz);
      if (path >= 0)
        assert_int_equal(sz.path, path);
      char what[64];
      snprintf(what, sizeof what, "in %s out %s", trellis_dtype_name(dts[i]),
               trellis_dtype_name(dts[o]));
      check_close(y, ref, (size_t)(m * w->w.n), 2e-3,
                  dts[o] == TRELLIS_BF16 ? 8e-3 : 2e-3, what);
      free(y);
      free(ref);
    }
}

/* Whether the current device is sm_90 (where the fused path exists). */
static inline int gu_is_hopper(void) {
  int dev = 0;
  struct cudaDeviceProp prop;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  return prop.major == 9;
}

#endif
