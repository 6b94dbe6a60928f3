/* SPDX-License-Identifier: Apache-2.0 */
/* GPU: the k-major layout (TRELLIS_LAYOUT_KMAJOR) and its kernel
 * (cuda/kmajor_gemm.cuh) through plans: the upload and the device repack
 * equal the host's k-major repack bit for bit; every rate and EXL3
 * codebook at m = 1..32 on the k-major kernel against the CPU reference
 * with NaN-poisoned outputs (row blocks, a last split with idle warps,
 * rounds shorter than 8 n-tiles); the plain dense path past 32 rows and
 * under FORCE_DENSE; every dtype pair; the graph contract (a capture whose
 * 100 replays, y poisoned before each, equal the eager run bit for bit);
 * a too small workspace; the plans and weights it refuses, by name.
 * Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

#include "plan/plan_internal.h"

/* The numerics contract (SYSTEM.md), as for the register-direct kernel
 * whose tile decode and MMAs it shares: rel L2 and max|d|/max|y| of 2e-3
 * against the fp16-W_hat reference. */
#define KM_REL 2e-3
#define KM_MAX 2e-3

static const int64_t kRows[] = {1, 3, 4, 5, 8, 9, 16, 17, 24, 32};
#define ROW_COUNT (sizeof kRows / sizeof kRows[0])

/* The family run executes for m rows of plan g. */
static trl_family family_at(const grun *g, int64_t m) {
  trl_decision d;
  assert_true(trl_decide(&g->plan->pp, &g->plan->lp, m, &d));
  return d.family;
}

/* m rows of random x through g against the CPU reference. */
static void check_rows(grun *g, const trellis_weight *w, int64_t m,
                       uint64_t seed, const char *what) {
  void *x = rand_input(m, w->k, g->desc.input_dtype, seed);
  float *ref = cpu_ref(w, x, g->desc.input_dtype, m, g->desc.output_dtype);
  float *y = grun_forward(g, x, m, 0);
  char text[160];
  snprintf(text, sizeof text, "%s m %lld", what, (long long)m);
  check_close(y, ref, (size_t)(m * w->n), KM_REL,
              g->desc.output_dtype == TRELLIS_BF16 ? 8e-3 : KM_MAX, text);
  free(x);
  free(ref);
  free(y);
}

/* The upload's payload equals the host's k-major repack. */
static void expect_kmajor_payload(const trellis_weight *host,
                                  const trellis_weight *dev) {
  assert_int_equal(dev->layout, TRELLIS_LAYOUT_KMAJOR);
  const size_t bytes = trellis_weight_payload_bytes(host);
  int16_t *want = malloc(bytes), *got = malloc(bytes);
  assert_true(want && got);
  OK(trellis_weight_repack_host_layout(host, TRELLIS_LAYOUT_KMAJOR, want,
                                       NULL));
  CK(cudaMemcpy(got, dev->trellis, bytes, cudaMemcpyDeviceToHost));
  assert_memory_equal(got, want, bytes);
  free(want);
  free(got);
}

/* Every rate of the three EXL3 codebooks (MUL1's half rates too), legacy
 * signs and bias on some: k = 1280 (two splits, the second with two busy
 * warps of eight), n = 400 / 16 = 25 n-tiles split over many CTA columns
 * (rounds of one to eight n-tiles). */
static void test_every_rate(void **state) {
  (void)state;
  const trellis_codebook cbs[3] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                   TRELLIS_CB_MUL1};
  int i = 0;
  for (int c = 0; c < 3; ++c)
    for (int bits = 1; bits <= 8; ++bits)
      for (int half = 0; half <= (cbs[c] == TRELLIS_CB_MUL1 && bits <= 3);
           ++half, ++i) {
        gw w;
        OK(synth_layer_init(&w, 1280, 512, bits, cbs[c],
                            (half ? SYNTH_HALF : 0u) |
                                (i % 3 == 1 ? SYNTH_LEGACY_SIGNS : 0u) |
                                (i % 2 ? SYNTH_BIAS : 0u),
                            500 + (uint64_t)i));
        trellis_plan_desc d = gu_desc(32, TRELLIS_F16, TRELLIS_F32, 0);
        grun g;
        grun_open_layout(&g, &w.w, &d, TRELLIS_LAYOUT_KMAJOR);
        expect_kmajor_payload(&w.w, &g.dw);
        char what[96];
        snprintf(what, sizeof what, "%s K %d%s", trellis_codebook_name(cbs[c]),
                 bits, half ? ".5" : "");
        for (size_t r = 0; r < ROW_COUNT; ++r) {
          assert_int_equal(family_at(&g, kRows[r]), TRL_FAMILY_KMAJOR);
          check_rows(&g, &w.w, kRows[r], 900 + (uint64_t)(i * 16 + (int)r),
                     what);
        }
        grun_close(&g);
        gw_free(&w);
      }
}

/* Layers of fewer than 8 slices of k (512: two groups of four warps share
 * a CTA's n-tiles; 128: eight groups of one, one n-tile per CTA column;
 * 256: four groups of two; 384: two groups of three and two idle warps),
 * and the large shapes' grids on their own layers at m = 1, 4, 8, 16 and
 * 32 (one, two and four 8-row sub-blocks a CTA). */
static void test_shapes(void **state) {
  (void)state;
  static const struct {
    int64_t k, n;
    int bits;
    trellis_codebook cb;
  } s[] = {{512, 6144, 6, TRELLIS_CB_MCG},   {128, 128, 4, TRELLIS_CB_MUL1},
           {256, 1024, 2, TRELLIS_CB_3INST}, {384, 2048, 5, TRELLIS_CB_MUL1},
           {6144, 1024, 6, TRELLIS_CB_MCG},  {2048, 4096, 4, TRELLIS_CB_MUL1},
           {8192, 2048, 3, TRELLIS_CB_3INST}};
  for (size_t i = 0; i < sizeof s / sizeof s[0]; ++i) {
    gw w;
    gw_random(&w, s[i].k, s[i].n, s[i].bits, s[i].cb, 0, 1, 40 + i);
    trellis_plan_desc d = gu_desc(32, TRELLIS_F16, TRELLIS_F16, 0);
    grun g;
    grun_open_layout(&g, &w.w, &d, TRELLIS_LAYOUT_KMAJOR);
    char what[96];
    snprintf(what, sizeof what, "%lldx%lld", (long long)s[i].k,
             (long long)s[i].n);
    for (int64_t m = 1; m <= 32; m = m == 1 ? 4 : m * 2)
      check_rows(&g, &w.w, m, 60 + (uint64_t)m, what);
    grun_close(&g);
    gw_free(&w);
  }
}

/* Past 32 rows and under FORCE_DENSE the dense path's plain k-major W_hat
 * (and its output rotation); FORCE_DECODE keeps the k-major kernel at
 * every m (blocks of 32 rows: 33 is a full block and one of a row). */
static void test_dense_and_forced(void **state) {
  (void)state;
  static const struct {
    int bits, half;
    trellis_codebook cb;
  } v[] = {{6, 0, TRELLIS_CB_MCG},
           {2, 1, TRELLIS_CB_MUL1},
           {3, 0, TRELLIS_CB_3INST},
           {8, 0, TRELLIS_CB_MUL1}};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) {
    gw w;
    OK(synth_layer_init(&w, 1024, 640, v[i].bits, v[i].cb,
                        (v[i].half ? SYNTH_HALF : 0u) | SYNTH_BIAS,
                        70 + (uint64_t)i));
    const uint32_t flags[3] = {0, TRELLIS_PLAN_FORCE_DENSE,
                               TRELLIS_PLAN_FORCE_DECODE};
    for (int f = 0; f < 3; ++f) {
      trellis_plan_desc d = gu_desc(64, TRELLIS_F16, TRELLIS_F32, flags[f]);
      grun g;
      grun_open_layout(&g, &w.w, &d, TRELLIS_LAYOUT_KMAJOR);
      const int64_t ms[3] = {1, 33, 64};
      for (int j = 0; j < 3; ++j) {
        const trl_family fam = family_at(&g, ms[j]);
        const trl_family want =
            flags[f] == TRELLIS_PLAN_FORCE_DECODE ? TRL_FAMILY_KMAJOR
            : flags[f] == TRELLIS_PLAN_FORCE_DENSE || ms[j] > 32
                ? TRL_FAMILY_DENSE
                : TRL_FAMILY_KMAJOR;
        assert_int_equal(fam, want);
        char what[96];
        snprintf(what, sizeof what, "K %d%s flags 0x%x", v[i].bits,
                 v[i].half ? ".5" : "", (unsigned)flags[f]);
        check_rows(&g, &w.w, ms[j], 80 + (uint64_t)(j + 3 * f), what);
      }
      grun_close(&g);
    }
    gw_free(&w);
  }
}

/* Every input x output dtype pair, on the kernel and on the dense path. */
static void test_dtypes(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 2048, 1024, 4, TRELLIS_CB_MUL1, 0, 1, 91);
  const trellis_dtype dts[3] = {TRELLIS_F16, TRELLIS_BF16, TRELLIS_F32};
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 3; ++o) {
      trellis_plan_desc d = gu_desc(40, dts[i], dts[o], 0);
      grun g;
      grun_open_layout(&g, &w.w, &d, TRELLIS_LAYOUT_KMAJOR);
      char what[64];
      snprintf(what, sizeof what, "in %s out %s", trellis_dtype_name(dts[i]),
               trellis_dtype_name(dts[o]));
      check_rows(&g, &w.w, 2, 95 + (uint64_t)(3 * i + o), what);
      check_rows(&g, &w.w, 7, 96 + (uint64_t)(3 * i + o), what);
      check_rows(&g, &w.w, 40, 97 + (uint64_t)(3 * i + o), what);
      grun_close(&g);
    }
  gw_free(&w);
}

/* The graph contract: captured with the queried workspace (and no rotated
 * buffer: the kernel rotates x itself), 100 replays with y poisoned
 * before each equal the eager run bit for bit; a too small or missing
 * workspace is refused before anything is launched. */
static void test_capture_and_workspace(void **state) {
  (void)state;
  static const struct {
    int bits;
    trellis_codebook cb;
    int64_t m;
  } v[] = {{4, TRELLIS_CB_MUL1, 1},
           {4, TRELLIS_CB_MUL1, 8},
           {6, TRELLIS_CB_MCG, 3},
           {5, TRELLIS_CB_MUL1, 12},
           {2, TRELLIS_CB_3INST, 17}};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) {
    gw w;
    gw_random(&w, 4096, 2048, v[i].bits, v[i].cb, 0, 1, 120 + i);
    trellis_plan_desc d = gu_desc(v[i].m, TRELLIS_F16, TRELLIS_F16, 0);
    grun g;
    grun_open_layout(&g, &w.w, &d, TRELLIS_LAYOUT_KMAJOR);
    trellis_buffer_sizes sz;
    OK(trellis_plan_query(g.plan, v[i].m, &sz));
    assert_int_equal(sz.path, TRELLIS_PATH_GENERIC);
    assert_int_equal(sz.rotated_bytes, 0);
    assert_true(sz.workspace_bytes >= (size_t)(v[i].m * 2048) * 4);
    void *x = rand_input(v[i].m, 4096, TRELLIS_F16, 130 + i);
    float *eager = grun_forward(&g, x, v[i].m, s);
    trellis_buffers b;
    trellis_buffers_init(&b);
    b.workspace = g.b.workspace;
    b.workspace_bytes = sz.workspace_bytes;
    grun_capture_replay(&g, v[i].m, &b, s, eager, 100, 1, 25);
    /* too small, then missing */
    b.workspace_bytes = sz.workspace_bytes - 256;
    trellis_clear_error();
    tu_assert_status(trellis_run(g.plan, g.dx, v[i].m, g.dy, &b, s),
                     TRELLIS_ERR_WORKSPACE);
    assert_non_null(strstr(trellis_last_error(), "workspace"));
    b.workspace = NULL;
    b.workspace_bytes = 0;
    tu_assert_status(trellis_run(g.plan, g.dx, v[i].m, g.dy, &b, s),
                     TRELLIS_ERR_WORKSPACE);
    free(x);
    free(eager);
    grun_close(&g);
    gw_free(&w);
  }
  CK(cudaStreamDestroy(s));
}

/* trellis_weight_repack_layout on device memory in the checkpoint layout
 * equals the host's k-major repack; it refuses to write in place. */
static void test_device_repack(void **state) {
  (void)state;
  for (int i = 0; i < 3; ++i) {
    gw w;
    OK(synth_layer_init(&w, 1024, 384, i == 2 ? 3 : 5 - i, TRELLIS_CB_MUL1,
                        i == 2 ? SYNTH_HALF : 0u, 150 + (uint64_t)i));
    const size_t bytes = trellis_weight_payload_bytes(&w.w);
    trellis_weight dev = w.w;
    dev.trellis = dev_copy(w.w.trellis, bytes);
    dev.suh = dev_copy(w.w.suh, 1024 * 2);
    dev.svh = dev_copy(w.w.svh, 384 * 2);
    int16_t *out = NULL;
    CK(cudaMalloc((void **)&out, bytes));
    OK(trellis_weight_repack_layout(&dev, TRELLIS_LAYOUT_KMAJOR, out, NULL,
                                    NULL));
    CK(cudaDeviceSynchronize());
    trellis_weight view = dev;
    view.trellis = out;
    view.layout = TRELLIS_LAYOUT_KMAJOR;
    expect_kmajor_payload(&w.w, &view);
    /* the view runs: one plan from the framework's own memory */
    trellis_plan *plan = NULL;
    trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0);
    OK(trellis_plan_create(&view, &d, &plan));
    trellis_plan_destroy(plan);
    trellis_clear_error();
    tu_assert_status(trellis_weight_repack_layout(&dev, TRELLIS_LAYOUT_KMAJOR,
                                                  (int16_t *)dev.trellis, NULL,
                                                  NULL),
                     TRELLIS_ERR_BUFFER);
    assert_non_null(strstr(trellis_last_error(), "in place"));
    tu_assert_status(trellis_weight_repack_layout(
                         &dev, TRELLIS_LAYOUT_CHECKPOINT, out, NULL, NULL),
                     TRELLIS_ERR_INVALID_ARGUMENT);
    cudaFree((void *)dev.trellis);
    cudaFree((void *)dev.suh);
    cudaFree((void *)dev.svh);
    cudaFree(out);
    gw_free(&w);
  }
}

/* What the k-major layout and its plans refuse, each with its reason. */
static void test_refusals(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1024, 256, 4, TRELLIS_CB_MCG, 0, 0, 170);
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload_layout(&w.w, TRELLIS_LAYOUT_KMAJOR, &dwh));
  const trellis_weight *dv = trellis_device_weight_view(dwh);
  assert_int_equal(dv->layout, TRELLIS_LAYOUT_KMAJOR);
  static const struct {
    trellis_dtype compute;
    int split_k;
    uint32_t flags;
    const char *why;
  } p[] = {{TRELLIS_BF16, 0, 0, "fp16"},
           {TRELLIS_F16, 2, 0, "split_k"},
           {TRELLIS_F16, 0, TRELLIS_PLAN_LEGACY_KERNELS, "LEGACY_KERNELS"},
           {TRELLIS_F16, 0, TRELLIS_PLAN_EXACT_WEIGHTS, "EXACT_WEIGHTS"}};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; ++i) {
    trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F16, p[i].flags);
    d.compute_dtype = p[i].compute;
    d.split_k = p[i].split_k;
    trellis_plan *plan = (trellis_plan *)1;
    trellis_clear_error();
    tu_assert_status(trellis_plan_create(dv, &d, &plan), TRELLIS_ERR_LAYOUT);
    assert_null(plan);
    assert_non_null(strstr(trellis_last_error(), p[i].why));
    assert_non_null(strstr(trellis_last_error(), "lane layout"));
  }
  trellis_device_weight_destroy(dwh);
  gw_free(&w);
  /* an SQG codebook: the lane layout only */
  gw q;
  gw_random(&q, 1024, 256, 4, TRELLIS_CB_SQG_E4M3, 0, 0, 171);
  dwh = (trellis_device_weight *)1;
  trellis_clear_error();
  tu_assert_status(
      trellis_weight_upload_layout(&q.w, TRELLIS_LAYOUT_KMAJOR, &dwh),
      TRELLIS_ERR_UNSUPPORTED);
  assert_null(dwh);
  assert_non_null(strstr(trellis_last_error(), "SQG"));
  gw_free(&q);
}

int main(void) {
  if (trellis_cuda_device_count() == 0)
    return 77;
  if (!gu_is_hopper()) {
    printf("the k-major kernel runs on sm_90 only: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_rate),
      cmocka_unit_test(test_shapes),
      cmocka_unit_test(test_dense_and_forced),
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_capture_and_workspace),
      cmocka_unit_test(test_device_repack),
      cmocka_unit_test(test_refusals),
  };
  return TU_RUN_TESTS("gpu_kmajor", tests);
}
