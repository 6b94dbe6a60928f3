/* SPDX-License-Identifier: Apache-2.0 */
/* GPU generic path: every test vector, random layers against the CPU
 * reference, dtypes, the external rotation, CUDA-graph capture, concurrent
 * plans and misuse. Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

static void run_vectors(uint32_t flags, trellis_dtype out, double max_tol) {
  tv_case *cases = NULL;
  size_t count = tv_load_manifest(&cases);
  for (size_t i = 0; i < count; ++i) {
    tv_loaded t;
    tv_open(&cases[i], &t);
    trellis_plan_desc d = gu_desc(cases[i].m, TRELLIS_F16, out, flags);
    grun g;
    grun_open(&g, &t.layer.weight, &d);
    float *y = grun_forward(&g, t.x.data, cases[i].m, 0);
    char what[160];
    snprintf(what, sizeof what, "%s (%s, out %s)", cases[i].name,
             trellis_path_name(
                 (trellis_path)(flags & TRELLIS_PLAN_FORCE_GENERIC ? 2 : 0)),
             trellis_dtype_name(out));
    check_close(y, (const float *)t.y.data, (size_t)(cases[i].m * cases[i].n),
                2e-3, max_tol, what);
    free(y);
    grun_close(&g);
    tv_close(&t);
  }
  free(cases);
}

static void test_vectors_generic_f32(void **state) {
  (void)state;
  run_vectors(TRELLIS_PLAN_FORCE_GENERIC, TRELLIS_F32, 2e-3);
}

static void test_vectors_generic_f16(void **state) {
  (void)state;
  run_vectors(TRELLIS_PLAN_FORCE_GENERIC, TRELLIS_F16, 2e-3);
}

static void test_vectors_default(void **state) {
  (void)state;
  run_vectors(0, TRELLIS_F32, 2e-3);
}

typedef struct shape {
  int64_t k, n, m;
  int bits;
  trellis_codebook cb;
  int legacy, bias;
} shape;

/* Every K and codebook at least once; k, n up to 8192; m 1..300. */
static const shape kShapes[] = {
    {8192, 8192, 1, 6, TRELLIS_CB_MCG, 0, 0},
    {4096, 1024, 7, 1, TRELLIS_CB_3INST, 0, 1},
    {1024, 4096, 16, 2, TRELLIS_CB_MCG, 0, 0},
    {2048, 384, 17, 3, TRELLIS_CB_MUL1, 1, 0},
    {512, 8192, 33, 4, TRELLIS_CB_3INST, 0, 1},
    {8192, 256, 64, 5, TRELLIS_CB_MCG, 0, 0},
    {1280, 640, 65, 6, TRELLIS_CB_MUL1, 0, 1},
    {384, 2048, 128, 7, TRELLIS_CB_MCG, 1, 1},
    {256, 1152, 129, 8, TRELLIS_CB_3INST, 0, 0},
    {640, 896, 300, 8, TRELLIS_CB_MUL1, 0, 1},
    {128, 128, 255, 1, TRELLIS_CB_MCG, 0, 0},
    {896, 128, 2, 2, TRELLIS_CB_3INST, 0, 0},
    {128, 2944, 5, 3, TRELLIS_CB_MCG, 0, 1},
    {1152, 512, 9, 4, TRELLIS_CB_MUL1, 0, 0},
    {3072, 768, 3, 5, TRELLIS_CB_3INST, 1, 1},
    {2048, 4096, 40, 6, TRELLIS_CB_3INST, 0, 0},
    {6144, 1024, 7, 6, TRELLIS_CB_MCG, 0, 0},
    {512, 6144, 32, 6, TRELLIS_CB_MCG, 0, 1},
    {1536, 1536, 100, 7, TRELLIS_CB_MUL1, 0, 0},
    {7168, 128, 1, 1, TRELLIS_CB_MUL1, 0, 0},
};

/* Bounds of the dense (prefill) path against the exact reference: it
 * rounds the weight with the rotations folded in (W' = W_hat . Hblk .
 * diag(svh), and diag(suh) . Hblk . W') once to fp16, ~2e-4 rms relative
 * per weight, where the decode paths keep the reference's rounding. */
static const double kDenseRel = 6e-4, kDenseMax = 3e-3;

/* Random layers on the generic path against the CPU reference, with the
 * fp16 W_hat the reference multiplies by (EXACT_WEIGHTS: 1e-4; the codebook
 * halves added in the tensor core are checked in gpu_direct). */
static void test_random_layers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; ++i) {
    const shape *s = &kShapes[i];
    gw w;
    gw_random(&w, s->k, s->n, s->bits, s->cb, s->legacy, s->bias, 100 + i);
    trellis_plan_desc d =
        gu_desc(s->m, TRELLIS_F16, TRELLIS_F32,
                TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_EXACT_WEIGHTS);
    float *ref;
    trellis_buffer_sizes sz;
    float *y =
        gu_forward_vs_ref(&w.w, &d, s->m, 200 + i, TRELLIS_F32, &ref, &sz);
    char what[160];
    snprintf(what, sizeof what, "k%lld n%lld m%lld K%d %s legacy%d bias%d (%s)",
             (long long)s->k, (long long)s->n, (long long)s->m, s->bits,
             trellis_codebook_name(s->cb), s->legacy, s->bias,
             trellis_path_name(sz.path));
    const int dense = sz.path == TRELLIS_PATH_DENSE;
    check_close(y, ref, (size_t)(s->m * s->n), dense ? kDenseRel : 1e-4,
                dense ? kDenseMax : 1e-3, what);
    printf("  ok %s rel %.2e\n", what,
           tu_rel_l2(y, ref, (size_t)(s->m * s->n)));
    free(y);
    free(ref);
    gw_free(&w);
  }
}

static void test_dtypes(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1024, 768, 4, TRELLIS_CB_MCG, 0, 1, 7);
  gu_check_dtype_grid(&w, 19, 300, -1);
  /* dense path: cuBLASLt writes y (fp16 out, + bias) or fp32 + a pass */
  gu_check_dtype_grid(&w, 260, 310, TRELLIS_PATH_DENSE);
  gw_free(&w);
  /* no bias, and narrow enough that fp16 x is not rotated but folded */
  gw_random(&w, 1024, 384, 4, TRELLIS_CB_MCG, 0, 0, 17);
  gu_check_dtype_grid(&w, 260, 320, TRELLIS_PATH_DENSE);
  gw_free(&w);
}

static void test_bf16_compute(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 2048, 1024, 5, TRELLIS_CB_3INST, 0, 0, 8);
  const int64_t ms[3] = {3, 70, 300};
  for (int i = 0; i < 3; ++i) {
    trellis_plan_desc d = gu_desc(ms[i], TRELLIS_BF16, TRELLIS_F32, 0);
    d.compute_dtype = TRELLIS_BF16;
    float *ref;
    float *y =
        gu_forward_vs_ref(&w.w, &d, ms[i], 400 + i, TRELLIS_F32, &ref, NULL);
    /* bf16 operands: ~2^-9 relative per product */
    check_close(y, ref, (size_t)(ms[i] * w.w.n), 1e-2, 2e-2, "bf16 compute");
    free(y);
    free(ref);
  }
  gw_free(&w);
}

static int callback_calls;

static trellis_status counting_h128(const void *in, trellis_dtype in_dtype,
                                    void *out, trellis_dtype out_dtype,
                                    const uint16_t *pre, const uint16_t *post,
                                    int64_t rows, int64_t cols, void *stream,
                                    void *user) {
  callback_calls++;
  assert_ptr_equal(user, &callback_calls);
  return trellis_cuda_h128(in, in_dtype, out, out_dtype, pre, post, rows, cols,
                           stream, NULL);
}

static void test_external_h128(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1536, 1024, 6, TRELLIS_CB_MCG, 0, 1, 9);
  const int64_t ms[3] = {1, 40, 290};
  for (int i = 0; i < 3; ++i) {
    const int64_t m = ms[i];
    void *x = rand_input(m, w.w.k, TRELLIS_F16, 500 + i);
    /* both generic on the split-K scheduler: the fused path and the
     * register-direct kernel never take a callback, so the plan with the
     * library's own rotation must use the same kernels to compare bits */
    trellis_plan_desc d =
        gu_desc(m, TRELLIS_F16, TRELLIS_F32,
                TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_LEGACY_KERNELS);
    grun gi;
    grun_open(&gi, &w.w, &d);
    float *yi = grun_forward(&gi, x, m, 0);
    d.flags = 0;
    d.h128 = counting_h128;
    d.h128_user_data = &callback_calls;
    grun ge;
    grun_open(&ge, &w.w, &d);
    trellis_buffer_sizes sz;
    OK(trellis_plan_query(ge.plan, m, &sz));
    assert_int_not_equal(sz.path, TRELLIS_PATH_FUSED);
    callback_calls = 0;
    float *ye = grun_forward(&ge, x, m, 0);
    assert_int_equal(callback_calls, 2);
    if (sz.path == TRELLIS_PATH_DENSE) /* the plan's own folds svh into W' */
      check_close(ye, yi, (size_t)(m * w.w.n), kDenseRel, kDenseMax,
                  "dense callback");
    else
      assert_memory_equal(yi, ye, (size_t)(m * w.w.n) * sizeof(float));
    free(yi);
    free(ye);
    free(x);
    grun_close(&gi);
    grun_close(&ge);
  }
  gw_free(&w);
}

static void test_graph_capture(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 2048, 2048, 4, TRELLIS_CB_MUL1, 0, 1, 10);
  /* above the register-direct kernel's 16 rows: the split-K decode-GEMM,
   * which needs the workspace */
  const int64_t m = 19;
  void *x = rand_input(m, w.w.k, TRELLIS_F16, 600);
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F16, 0);
  grun g;
  grun_open(&g, &w.w, &d);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *eager = grun_forward(&g, x, m, s);
  grun_capture_replay(&g, m, &g.b, s, eager, 100, 1, 33);

  /* Capture with no workspace: the capture status and message, and the
   * stream stays usable. */
  trellis_buffers nows = g.b;
  nows.workspace = NULL;
  nows.workspace_bytes = 0;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  trellis_status st = trellis_run(g.plan, g.dx, m, g.dy, &nows, s);
  cudaGraph_t broken = NULL;
  cudaError_t end = cudaStreamEndCapture(s, &broken);
  tu_assert_status(st, TRELLIS_ERR_WORKSPACE);
  tu_assert_error_has("generic GEMM scratch is not initialized for CUDA graph "
                      "capture");
  assert_int_equal(end, cudaSuccess);
  if (broken)
    CK(cudaGraphDestroy(broken));
  /* Eager with no workspace: same status, plain words. */
  st = trellis_run(g.plan, g.dx, m, g.dy, &nows, s);
  tu_assert_status(st, TRELLIS_ERR_WORKSPACE);
  tu_assert_error_has("workspace missing");
  float *again = grun_forward(&g, x, m, s);
  assert_memory_equal(again, eager, (size_t)(m * w.w.n) * sizeof(float));
  free(again);
  free(eager);
  free(x);
  CK(cudaStreamDestroy(s));
  grun_close(&g);
  gw_free(&w);
}

static void test_two_plans_two_streams(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 4096, 2048, 6, TRELLIS_CB_MCG, 0, 0, 11);
  const int64_t m = 5;
  void *x1 = rand_input(m, w.w.k, TRELLIS_F16, 700);
  void *x2 = rand_input(m, w.w.k, TRELLIS_F16, 701);
  float *r1 = cpu_ref(&w.w, x1, TRELLIS_F16, m, TRELLIS_F32);
  float *r2 = cpu_ref(&w.w, x2, TRELLIS_F16, m, TRELLIS_F32);
  trellis_device_weight *dwh;
  OK(trellis_weight_upload(&w.w, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  /* the fp16 W_hat the reference multiplies by: its 1e-4 bound below */
  trellis_plan_desc d =
      gu_desc(m, TRELLIS_F16, TRELLIS_F32, TRELLIS_PLAN_EXACT_WEIGHTS);
  trellis_plan *p[2];
  trellis_buffers b[2];
  void *dx[2], *dy[2];
  cudaStream_t s[2];
  const void *xs[2] = {x1, x2};
  for (int i = 0; i < 2; ++i) {
    OK(trellis_plan_create(dw, &d, &p[i]));
    OK(trellis_plan_prepare(p[i]));
    trellis_buffer_sizes sz;
    OK(trellis_plan_query(p[i], m, &sz));
    trellis_buffers_init(&b[i]);
    b[i].rotated_bytes = sz.rotated_bytes;
    b[i].workspace_bytes = sz.workspace_bytes;
    CK(cudaMalloc(&b[i].rotated, sz.rotated_bytes));
    if (sz.workspace_bytes)
      CK(cudaMalloc(&b[i].workspace, sz.workspace_bytes));
    dx[i] = dev_copy(xs[i], (size_t)(m * w.w.k) * 2);
    CK(cudaMalloc(&dy[i], (size_t)(m * w.w.n) * 4));
    CK(cudaMemset(dy[i], 0xFF, (size_t)(m * w.w.n) * 4));
    CK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
  }
  CK(cudaDeviceSynchronize());
  for (int rep = 0; rep < 50; ++rep)
    for (int i = 0; i < 2; ++i)
      OK(trellis_run(p[i], dx[i], m, dy[i], &b[i], s[i]));
  CK(cudaDeviceSynchronize());
  const float *refs[2] = {r1, r2};
  for (int i = 0; i < 2; ++i) {
    float *y = malloc((size_t)(m * w.w.n) * 4);
    CK(cudaMemcpy(y, dy[i], (size_t)(m * w.w.n) * 4, cudaMemcpyDeviceToHost));
    check_close(y, refs[i], (size_t)(m * w.w.n), 1e-4, 1e-3, "two streams");
    free(y);
    trellis_plan_destroy(p[i]);
    cudaFree(b[i].rotated);
    cudaFree(b[i].workspace);
    cudaFree(dx[i]);
    cudaFree(dy[i]);
    CK(cudaStreamDestroy(s[i]));
  }
  trellis_device_weight_destroy(dwh);
  free(r1);
  free(r2);
  free(x1);
  free(x2);
  gw_free(&w);
}

/* Narrow layers at m >= 2n/3: both rotations folded into the weight, the
 * GEMM reads x itself (fp16 and bf16 compute), no rotated buffer. */
static void test_dense_full_fold(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1536, 384, 5, TRELLIS_CB_MCG, 1, 1, 14);
  const int64_t ms[2] = {260, 300};
  for (int bf = 0; bf < 2; ++bf)
    for (int i = 0; i < 2; ++i) {
      const trellis_dtype dt = bf ? TRELLIS_BF16 : TRELLIS_F16;
      trellis_plan_desc d = gu_desc(ms[i], dt, TRELLIS_F32, 0);
      d.compute_dtype = dt;
      float *ref;
      trellis_buffer_sizes sz;
      float *y =
          gu_forward_vs_ref(&w.w, &d, ms[i], 820 + i, TRELLIS_F32, &ref, &sz);
      assert_int_equal(sz.path, TRELLIS_PATH_DENSE);
      assert_int_equal(sz.rotated_bytes, 0);
      /* bf16: the weight rounded to bf16, 8x the fp16 bound's cause */
      check_close(y, ref, (size_t)(ms[i] * w.w.n), bf ? 1e-2 : kDenseRel,
                  bf ? 2e-2 : kDenseMax, bf ? "full fold bf16" : "full fold");
      free(y);
      free(ref);
    }
  gw_free(&w);
}

/* Every bitrate and codebook through both folded reconstructs (their
 * decode, payload staging and H16 mma are specialised per K and codebook):
 * m = 256 on a 256 x 384 layer folds both rotations, m = 16 (forced dense)
 * on 256 x 512 only the output one (FORCE_GENERIC keeps K6/MCG off the
 * fused path). */
static void test_dense_all_bitrates(void **state) {
  (void)state;
  const trellis_codebook cbs[3] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                   TRELLIS_CB_MUL1};
  for (int bits = 1; bits <= 8; ++bits)
    for (int c = 0; c < 3; ++c)
      for (int full = 0; full < 2; ++full) {
        const int64_t m = full ? 256 : 16, n = full ? 384 : 512;
        gw w;
        gw_random(&w, 256, n, bits, cbs[c], bits & 1, c == 1,
                  900 + 6 * bits + 2 * c + full);
        trellis_plan_desc d =
            gu_desc(m, TRELLIS_F16, TRELLIS_F16,
                    TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DENSE);
        float *ref;
        trellis_buffer_sizes sz;
        float *y =
            gu_forward_vs_ref(&w.w, &d, m, 950 + bits, TRELLIS_F32, &ref, &sz);
        assert_int_equal(sz.path, TRELLIS_PATH_DENSE);
        assert_int_equal(sz.rotated_bytes == 0, full);
        char what[96];
        snprintf(what, sizeof what, "dense K%d %s %s", bits,
                 trellis_codebook_name(cbs[c]), full ? "full fold" : "had");
        /* + the fp16 output's own rounding (2^-11 relative) */
        check_close(y, ref, (size_t)(m * n), kDenseRel, kDenseMax, what);
        free(y);
        free(ref);
        gw_free(&w);
      }
}

static void test_dense_path(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1024, 1536, 3, TRELLIS_CB_MCG, 0, 1, 12);
  const int64_t ms[3] = {5, 260, 333};
  for (int i = 0; i < 3; ++i) {
    trellis_plan_desc d = gu_desc(ms[i], TRELLIS_F16, TRELLIS_F32,
                                  i == 0 ? TRELLIS_PLAN_FORCE_DENSE : 0);
    float *ref;
    trellis_buffer_sizes sz;
    float *y =
        gu_forward_vs_ref(&w.w, &d, ms[i], 800 + i, TRELLIS_F32, &ref, &sz);
    assert_int_equal(sz.path, TRELLIS_PATH_DENSE);
    /* m < 2n/3: the input rotation stays a pass (into `rotated`) */
    assert_int_equal(sz.rotated_bytes, (size_t)(ms[i] * w.w.k * 2));
    check_close(y, ref, (size_t)(ms[i] * w.w.n), kDenseRel, kDenseMax,
                "dense path");
    free(y);
    free(ref);
  }
  gw_free(&w);
}

/* Programmatic dependent launches of the generic path's kernels in a chain
 * of layers (gpu_util.h): claims-free input rotation, decode-GEMM with and
 * without k-splits, output stage; K2, K4 and K6. */
static void test_dependent_launches(void **state) {
  (void)state;
  const int64_t ms[3] = {1, 5, 40};
  const int bits[3] = {2, 4, 6};
  for (int t = 0; t < 3; ++t)
    gu_dependent_chain(2048, bits[t], TRELLIS_CB_3INST, ms[t],
                       TRELLIS_PLAN_FORCE_GENERIC, TRELLIS_PATH_GENERIC);
  gu_dependent_chain(1024, 6, TRELLIS_CB_MCG, 3, TRELLIS_PLAN_FORCE_GENERIC,
                     TRELLIS_PATH_GENERIC);
}

static void test_misuse(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 256, 256, 2, TRELLIS_CB_3INST, 0, 0, 13);
  /* the split-K scheduler: its workspace is what is misused below */
  trellis_plan_desc d =
      gu_desc(4, TRELLIS_F16, TRELLIS_F32, TRELLIS_PLAN_LEGACY_KERNELS);
  trellis_plan *bad = NULL;
  /* host pointers are not a device weight (in either layout) */
  tu_assert_status(trellis_plan_create(&w.w, &d, &bad), TRELLIS_ERR_LAYOUT);
  assert_null(bad);
  trellis_weight host = w.w;
  host.layout = TRELLIS_LAYOUT_LANES;
  tu_assert_status(trellis_plan_create(&host, &d, &bad),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_null(bad);
  grun g;
  grun_open(&g, &w.w, &d);
  trellis_weight mis = g.dw; /* scales are read four at a time */
  mis.svh = g.dw.svh + 1;
  tu_assert_status(trellis_plan_create(&mis, &d, &bad), TRELLIS_ERR_BUFFER);
  assert_null(bad);
  trellis_plan_desc bd = d;
  bd.max_m = 0;
  tu_assert_status(trellis_plan_create(&g.dw, &bd, &bad),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  bd = d;
  bd.output_dtype = (trellis_dtype)7;
  tu_assert_status(trellis_plan_create(&g.dw, &bd, &bad), TRELLIS_ERR_DTYPE);
  bd = d;
  bd.struct_size = 4;
  tu_assert_status(trellis_plan_create(&g.dw, &bd, &bad),
                   TRELLIS_ERR_INVALID_ARGUMENT);

  tu_assert_status(trellis_run(g.plan, g.dx, 0, g.dy, &g.b, 0),
                   TRELLIS_ERR_SHAPE);
  tu_assert_status(trellis_run(g.plan, g.dx, 5, g.dy, &g.b, 0),
                   TRELLIS_ERR_SHAPE);
  tu_assert_status(trellis_run(g.plan, NULL, 1, g.dy, &g.b, 0),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_run(g.plan, g.dx, 1, NULL, &g.b, 0),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_run(g.plan, (char *)g.dx + 2, 1, g.dy, &g.b, 0),
                   TRELLIS_ERR_BUFFER);
  tu_assert_status(trellis_run(g.plan, g.dx, 1, (char *)g.dy + 4, &g.b, 0),
                   TRELLIS_ERR_BUFFER);
  tu_assert_status(trellis_run(g.plan, g.dx, 1, g.dy, NULL, 0),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_run(NULL, g.dx, 1, g.dy, &g.b, 0),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  /* the public rotation's vector accesses need aligned rows and scales */
  tu_assert_status(trellis_cuda_h128((char *)g.dx + 8, TRELLIS_F16, g.b.rotated,
                                     TRELLIS_F16, NULL, NULL, 1, 128, 0, NULL),
                   TRELLIS_ERR_BUFFER);
  tu_assert_status(trellis_cuda_h128(g.dx, TRELLIS_F16, g.b.rotated,
                                     TRELLIS_F16, g.dw.suh + 1, NULL, 1, 128, 0,
                                     NULL),
                   TRELLIS_ERR_BUFFER);
  trellis_buffers b = g.b;
  b.rotated = NULL;
  tu_assert_status(trellis_run(g.plan, g.dx, 1, g.dy, &b, 0),
                   TRELLIS_ERR_BUFFER);
  b = g.b;
  b.rotated_bytes = 16;
  tu_assert_status(trellis_run(g.plan, g.dx, 1, g.dy, &b, 0),
                   TRELLIS_ERR_BUFFER);
  b = g.b;
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(g.plan, 4, &sz));
  b.workspace_bytes = sz.workspace_bytes - 1;
  tu_assert_status(trellis_run(g.plan, g.dx, 4, g.dy, &b, 0),
                   TRELLIS_ERR_WORKSPACE);
  tu_assert_error_has("too small");
  b = g.b;
  b.workspace = (char *)b.workspace + 16; /* size still claimed: alignment */
  tu_assert_status(trellis_run(g.plan, g.dx, 4, g.dy, &b, 0),
                   TRELLIS_ERR_BUFFER);
  tu_assert_status(trellis_plan_query(g.plan, 5, &sz), TRELLIS_ERR_SHAPE);

  /* run before prepare */
  trellis_plan *unprepared = NULL;
  OK(trellis_plan_create(&g.dw, &d, &unprepared));
  tu_assert_status(trellis_run(unprepared, g.dx, 1, g.dy, &g.b, 0),
                   TRELLIS_ERR_NOT_PREPARED);
  trellis_plan_destroy(unprepared);
  grun_close(&g);
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors_generic_f32),
      cmocka_unit_test(test_vectors_generic_f16),
      cmocka_unit_test(test_vectors_default),
      cmocka_unit_test(test_random_layers),
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_bf16_compute),
      cmocka_unit_test(test_external_h128),
      cmocka_unit_test(test_graph_capture),
      cmocka_unit_test(test_two_plans_two_streams),
      cmocka_unit_test(test_dense_path),
      cmocka_unit_test(test_dense_full_fold),
      cmocka_unit_test(test_dense_all_bitrates),
      cmocka_unit_test(test_dependent_launches),
      cmocka_unit_test(test_misuse),
  };
  return TU_RUN_TESTS("gpu_generic", tests);
}
