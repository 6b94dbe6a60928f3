/* SPDX-License-Identifier: Apache-2.0 */
/* GPU: ExLlamaV3 1.6's half-integer rates (testvectors/half: MUL1 at K
 * 1.5, 2.5, 3.5) and the six layers ExLlamaV3 1.6.5's own quantizer wrote
 * (testvectors/exl3-real, against y_exact) through a plan on every path:
 * the register-direct small-m kernel (the default and FORCE_GENERIC at
 * m <= 16 with fp16 compute), the split-K decode-GEMM (LEGACY_KERNELS), the
 * dense reconstruct (FORCE_DENSE); fp16 and bf16 compute; at each case's
 * own m, at m = 1 and at m = 160 (> 128). Random half-rate layers against the
 * CPU reference with the exact fp16 W_hat, and a CUDA-graph capture replayed
 * over NaN-poisoned outputs. Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

typedef struct path_case {
  const char *name;
  uint32_t flags;
  int path; /* the path every m must take (-1: the plan's choice) */
} path_case;

static const path_case kPaths[] = {
    {"default", 0, -1},
    {"generic (register-direct at small m)",
     TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DECODE,
     TRELLIS_PATH_GENERIC},
    {"split-K decode-GEMM",
     TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DECODE |
         TRELLIS_PLAN_LEGACY_KERNELS,
     TRELLIS_PATH_GENERIC},
    /* FORCE_DENSE acts on the generic side: an exl3-real K6/MCG layer
     * would take the fused path without FORCE_GENERIC */
    {"dense", TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DENSE,
     TRELLIS_PATH_DENSE},
};
#define NPATHS (sizeof kPaths / sizeof kPaths[0])

/* The path a plan must take: the path case's, for half-integer rates as
 * for integer ones (the split-K decode-GEMM takes them where the
 * register-direct kernel does not: bf16 compute, LEGACY_KERNELS, more than
 * 16 rows). */
static void check_path(const tv_case *c, const path_case *p, trellis_path got) {
  (void)c;
  if (p->path < 0)
    return;
  assert_int_equal(got, p->path);
}

/* Tolerances against the float64 references (testutil's 2e-3 for the
 * decode paths, the dense path's fold rounding as in gpu_generic) and, for
 * bf16 operands, ~2^-9 relative per product. */
static double rel_tol(trellis_dtype compute) {
  return compute == TRELLIS_BF16 ? 1e-2 : 2e-3;
}
static double max_tol(int dense, trellis_dtype compute) {
  return compute == TRELLIS_BF16 ? 2e-2 : dense ? 3e-3 : 2e-3;
}

/* The half and exl3-real cases. */
static size_t load_cases(tv_case **out) {
  tv_case *half = NULL, *real = NULL;
  const size_t nh = tv_load_manifest_set(TU_TV_HALF, &half);
  const size_t nr = tv_load_manifest_set(TU_TV_REAL, &real);
  tv_case *all = malloc((nh + nr) * sizeof *all);
  assert_non_null(all);
  memcpy(all, half, nh * sizeof *all);
  memcpy(all + nh, real, nr * sizeof *all);
  free(half);
  free(real);
  *out = all;
  return nh + nr;
}

/* Every case at its own m against its reference y (y_exact for
 * exl3-real), every path, fp16 and bf16 compute, fp32 out. */
static void test_vectors_every_path(void **state) {
  (void)state;
  tv_case *cases = NULL;
  const size_t count = load_cases(&cases);
  for (size_t i = 0; i < count; ++i) {
    tv_loaded t;
    tv_open(&cases[i], &t);
    for (size_t p = 0; p < NPATHS; ++p)
      for (int c = 0; c < 2; ++c) {
        const trellis_dtype compute = c ? TRELLIS_BF16 : TRELLIS_F16;
        trellis_plan_desc d =
            gu_desc(cases[i].m, TRELLIS_F16, TRELLIS_F32, kPaths[p].flags);
        d.compute_dtype = compute;
        grun g;
        grun_open(&g, &t.layer.weight, &d);
        trellis_buffer_sizes sz;
        OK(trellis_plan_query(g.plan, cases[i].m, &sz));
        check_path(&cases[i], &kPaths[p], sz.path);
        float *y = grun_forward(&g, t.x.data, cases[i].m, 0);
        char what[256];
        snprintf(what, sizeof what, "%s/%s m%lld %s (%s, %s compute)",
                 cases[i].set, cases[i].name, (long long)cases[i].m,
                 kPaths[p].name, trellis_path_name(sz.path),
                 trellis_dtype_name(compute));
        const int dense = sz.path == TRELLIS_PATH_DENSE;
        check_close(y, (const float *)t.y.data,
                    (size_t)(cases[i].m * cases[i].n), rel_tol(compute),
                    max_tol(dense, compute), what);
        printf("  ok %s rel %.2e\n", what,
               tu_rel_l2(y, (const float *)t.y.data,
                         (size_t)(cases[i].m * cases[i].n)));
        free(y);
        grun_close(&g);
      }
    tv_close(&t);
  }
  free(cases);
}

/* Every case at m = 1 and m = 160 (random x), every path, fp16 and bf16
 * compute, fp16 and fp32 out, against the CPU reference (which
 * test_vectors holds to the references bit for bit in W_hat). */
static void test_vectors_m1_and_large(void **state) {
  (void)state;
  tv_case *cases = NULL;
  const size_t count = load_cases(&cases);
  static const int64_t ms[2] = {1, 160};
  for (size_t i = 0; i < count; ++i) {
    tv_loaded t;
    tv_open(&cases[i], &t);
    const trellis_weight *w = &t.layer.weight;
    for (int mi = 0; mi < 2; ++mi)
      for (size_t p = 0; p < NPATHS; ++p)
        for (int c = 0; c < 2; ++c)
          for (int o = 0; o < 2; ++o) {
            const int64_t m = ms[mi];
            const trellis_dtype compute = c ? TRELLIS_BF16 : TRELLIS_F16;
            const trellis_dtype out = o ? TRELLIS_F16 : TRELLIS_F32;
            trellis_plan_desc d = gu_desc(m, TRELLIS_F16, out, kPaths[p].flags);
            d.compute_dtype = compute;
            float *ref;
            trellis_buffer_sizes sz;
            float *y = gu_forward_vs_ref(w, &d, m, 900 + i, out, &ref, &sz);
            check_path(&cases[i], &kPaths[p], sz.path);
            char what[256];
            snprintf(what, sizeof what, "%s/%s m%lld %s (%s, %s compute, %s)",
                     cases[i].set, cases[i].name, (long long)m, kPaths[p].name,
                     trellis_path_name(sz.path), trellis_dtype_name(compute),
                     trellis_dtype_name(out));
            const int dense = sz.path == TRELLIS_PATH_DENSE;
            check_close(y, ref, (size_t)(m * w->n), rel_tol(compute),
                        max_tol(dense, compute), what);
            free(y);
            free(ref);
          }
    tv_close(&t);
  }
  free(cases);
}

typedef struct half_shape {
  int64_t k, n, m;
  int bits; /* K = bits + 1/2 */
  int bias;
} half_shape;

/* Layer sizes of the sweep and the presets, m across the decode-GEMM's and
 * the dense path's ranges (with EXACT_WEIGHTS the register-direct kernel,
 * whose weights are not the fp16 W_hat, is not used; the vector tests
 * above run it). */
static const half_shape kShapes[] = {
    {8192, 8192, 1, 2, 0},   {4096, 1024, 7, 1, 1},  {2048, 384, 17, 3, 0},
    {512, 6144, 33, 2, 1},   {6144, 1024, 64, 3, 0}, {1280, 640, 129, 1, 0},
    {2048, 4096, 300, 2, 1}, {128, 128, 255, 3, 0},  {8192, 28672, 1, 2, 0},
};

/* Random half-rate layers on the decode paths against the CPU reference
 * with the fp16 W_hat it multiplies by (EXACT_WEIGHTS: 1e-4 as
 * gpu_generic's integer rates; dense: its fold bounds). */
static void test_random_half_layers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof kShapes / sizeof kShapes[0]; ++i) {
    const half_shape *s = &kShapes[i];
    gw w;
    OK(synth_layer_init(&w, s->k, s->n, s->bits, TRELLIS_CB_MUL1,
                        SYNTH_HALF | (s->bias ? SYNTH_BIAS : 0u), 300 + i));
    trellis_plan_desc d =
        gu_desc(s->m, TRELLIS_F16, TRELLIS_F32, TRELLIS_PLAN_EXACT_WEIGHTS);
    float *ref;
    trellis_buffer_sizes sz;
    float *y =
        gu_forward_vs_ref(&w.w, &d, s->m, 400 + i, TRELLIS_F32, &ref, &sz);
    char what[160];
    snprintf(what, sizeof what, "k%lld n%lld m%lld K%d.5 bias%d (%s)",
             (long long)s->k, (long long)s->n, (long long)s->m, s->bits,
             s->bias, trellis_path_name(sz.path));
    const int dense = sz.path == TRELLIS_PATH_DENSE;
    check_close(y, ref, (size_t)(s->m * s->n), dense ? 6e-4 : 1e-4,
                dense ? 3e-3 : 1e-3, what);
    printf("  ok %s rel %.2e\n", what,
           tu_rel_l2(y, ref, (size_t)(s->m * s->n)));
    free(y);
    free(ref);
    gw_free(&w);
  }
}

/* A captured run replays bit for bit over NaN-poisoned outputs, on the
 * register-direct kernel (m = 1), the split-K decode-GEMM (m = 40) and the
 * dense path (m = 300). */
static void test_graph_capture(void **state) {
  (void)state;
  gw w;
  OK(synth_layer_init(&w, 4096, 2048, 2, TRELLIS_CB_MUL1, SYNTH_HALF, 77));
  static const struct {
    int64_t m;
    uint32_t flags;
  } runs[] = {{1, 0},
              {40, TRELLIS_PLAN_LEGACY_KERNELS | TRELLIS_PLAN_FORCE_DECODE},
              {300, TRELLIS_PLAN_FORCE_DENSE}};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; ++r) {
    const int64_t m = runs[r].m;
    trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F16, runs[r].flags);
    grun g;
    grun_open(&g, &w.w, &d);
    void *x = rand_input(m, w.w.k, TRELLIS_F16, 500 + r);
    float *eager = grun_forward(&g, x, m, s);
    grun_capture_replay(&g, m, &g.b, s, eager, 5, 1, 1);
    free(eager);
    free(x);
    grun_close(&g);
  }
  CK(cudaStreamDestroy(s));
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_vectors_every_path),
      cmocka_unit_test(test_vectors_m1_and_large),
      cmocka_unit_test(test_random_half_layers),
      cmocka_unit_test(test_graph_capture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
