/* SPDX-License-Identifier: Apache-2.0 */
/* GPU: the register-direct decode-GEMM (cuda/direct_gemm.cuh), through
 * plans: every rate and codebook at m = 1..16 against the CPU reference
 * with NaN-poisoned outputs, every cluster size (forced by the test hook),
 * several rounds per cluster, every dtype pair, and the graph contract:
 * a capture without workspace whose replays equal the eager run bit for
 * bit; the parked form (small layers) and the streaming one (the test
 * hook) alike. Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

#include "plan/plan_internal.h"
#include "plan/test_hooks.h"

/* The numerics contract (SYSTEM.md): rel L2 and max|d|/max|y| of 2e-3
 * against the fp16-W_hat reference. The halves summed by the tensor core
 * land near 2e-4 relative, MUL1's unrounded affine and the int8 limbs
 * likewise. */
#define DIRECT_REL 2e-3
#define DIRECT_MAX 2e-3

static const int64_t kRows[] = {1, 2, 3, 4, 5, 8, 9, 16};
#define ROW_COUNT (sizeof kRows / sizeof kRows[0])

/* One plan of `w` at m rows of f16 x to f32 y against the CPU reference:
 * on the direct kernel (the fused path for K6 MCG, else the generic one,
 * with no workspace), or, where no launch of it fits (a forced cluster
 * size too large for the layer's share of k), the kernels it falls back
 * to. */
static void check_layer(const gw *w, int64_t m, uint64_t seed,
                        const char *what) {
  trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F32, 0);
  float *ref;
  trellis_buffer_sizes sz;
  float *y = gu_forward_vs_ref(&w->w, &d, m, seed, TRELLIS_F32, &ref, &sz);
  assert_true(sz.path == TRELLIS_PATH_FUSED || sz.path == TRELLIS_PATH_GENERIC);
  char text[160];
  snprintf(text, sizeof text, "%s m %lld", what, (long long)m);
  check_close(y, ref, (size_t)(m * w->w.n), DIRECT_REL, DIRECT_MAX, text);
  free(y);
  free(ref);
}

/* How plan g runs m rows (from the decision record run executes): 0 not
 * on the register-direct kernel, 1 its streaming form, 2 its parked one. */
static int direct_form(const grun *g, int64_t m) {
  trl_decision d;
  assert_true(trl_decide(&g->plan->pp, &g->plan->lp, m, &d));
  if (d.family != TRL_FAMILY_DIRECT)
    return 0;
  return d.layout.direct_grid.park ? 2 : 1;
}

static int parked_at(const grun *g, int64_t m) {
  return direct_form(g, m) == 2;
}

/* Every integer rate of the three EXL3 codebooks, with legacy signs and
 * bias on some, on two small layers (5 and 2 k-blocks), in the parked form
 * (where it fits: every one of these) and the streaming one (the hook). */
static void every_variant(int park) {
  const trellis_codebook cbs[3] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                   TRELLIS_CB_MUL1};
  double worst[3] = {0, 0, 0};
  int parked = 0, runs = 0;
  trl_direct_test_park(park);
  for (int c = 0; c < 3; ++c)
    for (int bits = 1; bits <= 8; ++bits) {
      gw w;
      const int64_t k = bits % 2 ? 640 : 256, n = bits % 2 ? 384 : 1024;
      gw_random(&w, k, n, bits, cbs[c], bits == 3, bits % 3 == 0,
                1000 + 10 * (uint64_t)bits + (uint64_t)c);
      for (size_t i = 0; i < ROW_COUNT; ++i) {
        const int64_t m = kRows[i];
        char what[96];
        snprintf(what, sizeof what, "%lldx%lld K%d %s", (long long)k,
                 (long long)n, bits, trellis_codebook_name(cbs[c]));
        void *x = rand_input(m, k, TRELLIS_F16, 77 + (uint64_t)i);
        float *ref = cpu_ref(&w.w, x, TRELLIS_F16, m, TRELLIS_F32);
        trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F32, 0);
        grun g;
        grun_open(&g, &w.w, &d);
        float *y = grun_forward(&g, x, m, 0);
        const int form = direct_form(&g, m);
        parked += form == 2;
        runs += form != 0;
        /* a second run gives the same bits */
        float *y2 = grun_forward(&g, x, m, 0);
        assert_memory_equal(y, y2, (size_t)(m * n) * sizeof(float));
        char text[128];
        snprintf(text, sizeof text, "%s m %lld", what, (long long)m);
        check_close(y, ref, (size_t)(m * n), DIRECT_REL, DIRECT_MAX, text);
        const double rel = tu_rel_l2(y, ref, (size_t)(m * n));
        if (rel > worst[c])
          worst[c] = rel;
        grun_close(&g);
        free(y);
        free(y2);
        free(ref);
        free(x);
      }
      gw_free(&w);
    }
  trl_direct_test_park(-1);
  printf("  %s form: worst rel L2: 3inst %.2e, mcg %.2e, mul1 %.2e (%d of %d "
         "runs parked)\n",
         park ? "parked" : "streaming", worst[0], worst[1], worst[2], parked,
         runs);
  assert_int_equal(parked, park ? runs : 0);
  assert_true(runs >= 3 * 8 * 6); /* 1..8 rows of every rate and codebook */
}

static void test_every_variant(void **state) {
  (void)state;
  every_variant(1);
  every_variant(0);
}

/* Every cluster size from 1 to 16 CTAs (more than the k-blocks: refused
 * by the shape, so the rule's own choice runs), rows the kernel takes and
 * rows above 8 (the other kernels), and a layer of many groups, where each
 * cluster runs several rounds. */
static void cluster_sizes(void) {
  gw w;
  gw_random(&w, 2048, 1024, 6, TRELLIS_CB_MCG, 0, 1, 2000);
  gw mul1;
  gw_random(&mul1, 2048, 1024, 4, TRELLIS_CB_MUL1, 0, 0, 2001);
  for (int c = 1; c <= 16; ++c) {
    trl_direct_test_clusters(0, c);
    char what[64];
    snprintf(what, sizeof what, "2048x1024 K6 mcg cluster %d", c);
    check_layer(&w, 1, 3000 + (uint64_t)c, what);
    check_layer(&w, 13, 3100 + (uint64_t)c, what);
    snprintf(what, sizeof what, "2048x1024 K4 mul1 cluster %d", c);
    check_layer(&mul1, 3, 3200 + (uint64_t)c, what);
    check_layer(&mul1, 6, 3300 + (uint64_t)c, what);
  }
  trl_direct_test_clusters(0, 0);
  gw_free(&w);
  gw_free(&mul1);
  /* 200 groups: more than the clusters that fit, so rounds > 1 */
  gw_random(&w, 1024, 200 * 128, 2, TRELLIS_CB_MCG, 0, 1, 2002);
  for (int c = 1; c <= 8; c *= 2) {
    trl_direct_test_clusters(0, c);
    check_layer(&w, 1, 3400 + (uint64_t)c, "1024x25600 K2 mcg rounds");
    check_layer(&w, 16, 3500 + (uint64_t)c, "1024x25600 K2 mcg rounds");
  }
  trl_direct_test_clusters(0, 0);
  gw_free(&w);
}

/* ... in both forms (1024x25600 never parks), and 128x32768 (256 groups
 * of one k-block: two rounds a CTA), whose parked tiles hold both rounds. */
static void test_cluster_sizes(void **state) {
  (void)state;
  trl_direct_test_park(1);
  cluster_sizes();
  trl_direct_test_park(0);
  cluster_sizes();
  trl_direct_test_park(1);
  const trellis_codebook cbs[2] = {TRELLIS_CB_MCG, TRELLIS_CB_MUL1};
  for (int c = 0; c < 2; ++c) {
    gw w;
    gw_random(&w, 128, 32768, 3, cbs[c], 0, 1, 2010 + (uint64_t)c);
    trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F32, 0);
    grun g;
    grun_open(&g, &w.w, &d);
    const int64_t ms[3] = {1, 4, 8};
    for (int j = 0; j < 3; ++j) {
      trl_decision dec;
      assert_true(trl_decide(&g.plan->pp, &g.plan->lp, ms[j], &dec));
      printf("  128x32768 K3 %s m %lld: %s, rounds %d\n",
             trellis_codebook_name(cbs[c]), (long long)ms[j],
             dec.layout.direct_grid.park ? "parked" : "streaming",
             dec.layout.direct_grid.rounds);
      assert_true(dec.layout.direct_grid.park);
      assert_true(dec.layout.direct_grid.rounds > 1);
      check_layer(&w, ms[j], 2020 + (uint64_t)(10 * c + j),
                  "128x32768 K3 rounds");
    }
    grun_close(&g);
    gw_free(&w);
  }
  trl_direct_test_park(-1);
}

/* Every input x output dtype on the direct kernel: K6 MCG (fused path),
 * MUL1 at 2 rows (int8, or affine where parked) and 7 (affine), in both
 * forms. */
static void dtypes(void) {
  gw w;
  gw_random(&w, 1024, 512, 6, TRELLIS_CB_MCG, 0, 1, 4000);
  gu_check_dtype_grid(&w, 3, 4100, TRELLIS_PATH_FUSED);
  gw_free(&w);
  gw_random(&w, 1024, 512, 4, TRELLIS_CB_MUL1, 0, 1, 4001);
  gu_check_dtype_grid(&w, 2, 4200, TRELLIS_PATH_GENERIC);
  gu_check_dtype_grid(&w, 7, 4300, TRELLIS_PATH_GENERIC);
  gw_free(&w);
}

static void test_dtypes(void **state) {
  (void)state;
  trl_direct_test_park(1);
  dtypes();
  trl_direct_test_park(0);
  dtypes();
  trl_direct_test_park(-1);
}

/* The graph contract: captured with no workspace at all, the output
 * poisoned with NaN before every replay, 100 replays equal the eager run
 * bit for bit. */
static void capture_replay_form(const gw *w, int64_t m, uint64_t seed,
                                int park) {
  trl_direct_test_park(park);
  trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F16, 0);
  grun g;
  grun_open(&g, &w->w, &d);
  if (!park)
    assert_false(parked_at(&g, m));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *x = rand_input(m, w->w.k, TRELLIS_F16, seed);
  float *eager = grun_forward(&g, x, m, s);
  trellis_buffers b = g.b;
  b.workspace = NULL;
  b.workspace_bytes = 0;
  grun_capture_replay(&g, m, &b, s, eager, 100, 1, 1);
  CK(cudaStreamDestroy(s));
  free(eager);
  free(x);
  grun_close(&g);
  trl_direct_test_park(-1);
}

/* The graph contract in the streaming form and, where the parked one fits,
 * in that too; whether it fit. */
static int capture_replay(const gw *w, int64_t m, uint64_t seed) {
  trl_direct_test_park(1);
  trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F16, 0);
  grun g;
  grun_open(&g, &w->w, &d);
  const int parked = parked_at(&g, m);
  grun_close(&g);
  capture_replay_form(w, m, seed, 0);
  if (parked)
    capture_replay_form(w, m, seed, 1);
  return parked;
}

static void test_capture_without_workspace(void **state) {
  (void)state;
  trl_direct_test_splits(1); /* the generic path's split needs a workspace */
  gw w;
  gw_random(&w, 4096, 4096, 6, TRELLIS_CB_MCG, 0, 1, 5000);
  capture_replay(&w, 1, 5100);
  capture_replay(&w, 4, 5101);
  capture_replay(&w, 8, 5102);
  capture_replay(&w, 16, 5105); /* the fused cluster kernel */
  gw_free(&w);
  gw_random(&w, 4096, 2048, 4, TRELLIS_CB_MUL1, 0, 1, 5001);
  capture_replay(&w, 2, 5103);
  capture_replay(&w, 7, 5104);
  gw_free(&w);
  /* small layers of a tensor-parallel rank: the parked form fits 512x6144
   * (clusters of 2), and 6144x1024 where clusters of 16 fit this GPU at
   * one CTA per SM; 2048x4096 never (127 KB of tiles an SM) */
  gw_random(&w, 512, 6144, 6, TRELLIS_CB_MCG, 0, 1, 5002);
  assert_true(capture_replay(&w, 1, 5106));
  assert_true(capture_replay(&w, 4, 5107));
  assert_true(capture_replay(&w, 8, 5108));
  gw_free(&w);
  gw_random(&w, 512, 6144, 4, TRELLIS_CB_MUL1, 0, 1, 5003);
  assert_true(capture_replay(&w, 2, 5109));
  assert_true(capture_replay(&w, 7, 5110));
  gw_free(&w);
  gw_random(&w, 6144, 1024, 4, TRELLIS_CB_MUL1, 0, 1, 5004);
  capture_replay(&w, 2, 5111);
  gw_free(&w);
  gw_random(&w, 2048, 4096, 6, TRELLIS_CB_MCG, 0, 1, 5005);
  assert_false(capture_replay(&w, 1, 5112));
  gw_free(&w);
  trl_direct_test_splits(0);
}

/* The splits m rows of plan g's layer take on the direct kernel (0: it
 * does not run m), from the decision record run executes. */
static int splits_at(const grun *g, int64_t m, size_t *ws) {
  trl_decision d;
  trellis_buffer_sizes sz = {.struct_size = sizeof sz};
  OK(trellis_plan_query(g->plan, m, &sz));
  assert_true(trl_decide(&g->plan->pp, &g->plan->lp, m, &d));
  assert_int_equal(d.layout.workspace_bytes, sz.workspace_bytes);
  *ws = sz.workspace_bytes;
  return d.family == TRL_FAMILY_DIRECT ? d.layout.direct_grid.splits : 0;
}

/* k split across clusters on the generic path (the rule's choice on this
 * GPU): the clusters' sums in the workspace, added in split order by the
 * finishing launch. Against the CPU reference with NaN-poisoned outputs
 * (bias on, int8 and affine MUL1, MCG), every dtype pair, 100 graph
 * replays and eager runs over a workspace filled with 0x00, 0xFF, 0x01 and
 * 0x7F bytes equal to the eager run bit for bit, a run without the
 * workspace refused with TRELLIS_ERR_WORKSPACE and nothing launched, and
 * the same layer unsplit (the test hook) within the same bounds. */
static void test_splits(void **state) {
  (void)state;
  const struct {
    int64_t k, n;
    int bits;
    trellis_codebook cb;
  } layers[] = {{8192, 1024, 4, TRELLIS_CB_MUL1},
                {8192, 2048, 3, TRELLIS_CB_MCG},
                {4096, 8192, 2, TRELLIS_CB_MUL1},
                {2048, 2048, 5, TRELLIS_CB_3INST}};
  static const int64_t ms[] = {1, 3, 4, 7, 8};
  int seen = 0;
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; ++i) {
    gw w;
    gw_random(&w, layers[i].k, layers[i].n, layers[i].bits, layers[i].cb, 0, 1,
              7100 + i);
    trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F16, 0);
    grun g;
    grun_open(&g, &w.w, &d);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (size_t j = 0; j < sizeof ms / sizeof ms[0]; ++j) {
      const int64_t m = ms[j];
      size_t ws;
      const int sp = splits_at(&g, m, &ws);
      char what[128];
      snprintf(what, sizeof what, "%lldx%lld K%d %s m %lld splits %d",
               (long long)w.w.k, (long long)w.w.n, layers[i].bits,
               trellis_codebook_name(layers[i].cb), (long long)m, sp);
      printf("  %s (workspace %zu bytes)\n", what, ws);
      if (sp <= 1)
        continue;
      ++seen;
      assert_true(ws >= (size_t)sp * (size_t)m * (size_t)w.w.n * sizeof(float));
      check_layer(&w, m, 7200 + (uint64_t)(10 * i + j), what);
      void *x = rand_input(m, w.w.k, TRELLIS_F16, 7300 + (uint64_t)j);
      float *eager = grun_forward(&g, x, m, s);
      grun_capture_replay(&g, m, &g.b, s, eager, 100, 1, 9);
      /* the workspace's contents at entry do not matter (the finishing
       * launch reads only what this one wrote): four fills */
      static const int fills[] = {0x00, 0xFF, 0x01, 0x7F};
      for (size_t f = 0; f < sizeof fills / sizeof fills[0]; ++f) {
        CK(cudaMemsetAsync(g.b.workspace, fills[f], g.b.workspace_bytes, s));
        float *again = grun_forward(&g, x, m, s);
        assert_memory_equal(again, eager, (size_t)(m * w.w.n) * sizeof(float));
        free(again);
      }
      /* no workspace: refused before anything is launched */
      trellis_buffers nows = g.b;
      nows.workspace = NULL;
      nows.workspace_bytes = 0;
      CK(cudaMemset(g.dy, 0x7F, (size_t)(m * w.w.n) * 2));
      tu_assert_status(trellis_run(g.plan, g.dx, m, g.dy, &nows, s),
                       TRELLIS_ERR_WORKSPACE);
      CK(cudaStreamSynchronize(s));
      uint16_t probe;
      CK(cudaMemcpy(&probe, g.dy, 2, cudaMemcpyDeviceToHost));
      assert_int_equal(probe, 0x7F7F);
      free(eager);
      free(x);
    }
    CK(cudaStreamDestroy(s));
    grun_close(&g);
    /* the same layer unsplit */
    trl_direct_test_splits(1);
    grun_open(&g, &w.w, &d);
    size_t ws;
    assert_true(splits_at(&g, 1, &ws) <= 1);
    assert_int_equal(ws, 0);
    grun_close(&g);
    check_layer(&w, 4, 7400 + i, "unsplit m 4");
    trl_direct_test_splits(0);
    if (i == 0) {
      gu_check_dtype_grid(&w, 3, 7500, TRELLIS_PATH_GENERIC);
      gu_check_dtype_grid(&w, 6, 7501, TRELLIS_PATH_GENERIC);
    }
    gw_free(&w);
  }
  assert_true(seen > 0); /* the rule split some of them on this GPU */
}

/* A chain of layers with dependent launches (gpu_util.h), in both forms. */
static void test_dependent_chain(void **state) {
  (void)state;
  for (int park = 1; park >= 0; --park) {
    trl_direct_test_park(park);
    gu_dependent_chain(2048, 3, TRELLIS_CB_MUL1, 3, 0, TRELLIS_PATH_GENERIC);
    gu_dependent_chain(2048, 6, TRELLIS_CB_MCG, 8, 0, TRELLIS_PATH_FUSED);
  }
  trl_direct_test_park(-1);
}

/* The launch shapes a plan's rules give on this GPU for the bench's
 * layers (printed: what the timings of bench/RESULTS.md ran). */
static void test_print_shapes(void **state) {
  (void)state;
  const int64_t shapes[][2] = {{8192, 28672}, {28672, 8192}, {4096, 4096},
                               {2048, 4096},  {6144, 1024},  {512, 6144}};
  const trellis_codebook cbs[2] = {TRELLIS_CB_MCG, TRELLIS_CB_MUL1};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    for (int c = 0; c < 2; ++c) {
      gw w;
      gw_random(&w, shapes[i][0], 128, 6, cbs[c], 0, 0, 7000);
      /* only the shape matters: plan a weight of that k and n */
      trellis_device_weight *dw;
      OK(trellis_weight_upload(&w.w, &dw));
      trellis_weight v = *trellis_device_weight_view(dw);
      v.n = shapes[i][1]; /* the plan reads no payload at create */
      trellis_plan_desc d = gu_desc(16, TRELLIS_F16, TRELLIS_F16, 0);
      trellis_plan *plan;
      OK(trellis_plan_create(&v, &d, &plan));
      const int64_t ms[3] = {1, 4, 16};
      for (int j = 0; j < 3; ++j) {
        trl_direct_grid g;
        if (!trl_layout_direct_grid(&plan->lp, TRELLIS_PATH_GENERIC, ms[j],
                                    &g)) {
          printf("  shape %lldx%lld %s m %lld: no launch fits (the other "
                 "kernels run it)\n",
                 (long long)shapes[i][0], (long long)shapes[i][1],
                 trellis_codebook_name(cbs[c]), (long long)ms[j]);
          continue;
        }
        printf("  shape %lldx%lld %s m %lld: %s var %d cluster %d x %d, "
               "splits %d, rounds %d, k-tiles/CTA %d, smem %zu, %d CTA/SM "
               "(regs %d, active %d)\n",
               (long long)shapes[i][0], (long long)shapes[i][1],
               trellis_codebook_name(cbs[c]), (long long)ms[j],
               g.park ? "parked" : "streaming", g.var, g.cluster, g.clusters,
               g.splits, g.rounds, g.kt_cta, g.smem_bytes, g.ctas_per_sm,
               plan->lp.direct_regs[g.var],
               plan->lp.direct_active[g.var][g.cluster]);
      }
      if (i == 0) /* what the cluster query said, every size */
        for (int var = 0; var < 3; ++var) {
          char line[256];
          int at = 0;
          for (int cl = 1; cl <= TRL_DIRECT_MAX_CLUSTER; ++cl)
            at += snprintf(line + at, sizeof line - (size_t)at, " %d",
                           plan->lp.direct_active[var][cl]);
          printf("  %s var %d: active clusters by size:%s\n",
                 trellis_codebook_name(cbs[c]), var, line);
        }
      trellis_plan_destroy(plan);
      trellis_device_weight_destroy(dw);
      gw_free(&w);
    }
}

/* Larger layers like a model's (the bench shapes), m = 1 and 16. */
static void test_model_shapes(void **state) {
  (void)state;
  const int64_t shapes[][2] = {
      {8192, 1024}, {1024, 8192}, {6144, 1024}, {512, 6144}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    gw w;
    gw_random(&w, shapes[i][0], shapes[i][1], 6, TRELLIS_CB_MCG, 0, 1,
              6000 + i);
    check_layer(&w, 1, 6100 + i, "model shape K6 mcg");
    check_layer(&w, 16, 6200 + i, "model shape K6 mcg");
    gw_free(&w);
  }
}

int main(void) {
  TU_REQUIRE_GPU();
  if (!gu_is_hopper()) {
    printf("the register-direct kernel runs on sm_90 only: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_print_shapes),
      cmocka_unit_test(test_every_variant),
      cmocka_unit_test(test_cluster_sizes),
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_capture_without_workspace),
      cmocka_unit_test(test_splits),
      cmocka_unit_test(test_dependent_chain),
      cmocka_unit_test(test_model_shapes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
