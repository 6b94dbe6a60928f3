/* GPU: the persistent small-m decode-GEMM (cuda/stream_gemm.cuh). Through
 * its launcher: every bitrate, codebook, token width and halves mode, with
 * forced cluster sizes and fewer clusters than strips (several strips per
 * cluster: the inbox buffers alternate and the row owners move), against
 * the CPU reference, NaN-poisoned output, repeatable bit for bit. Through a
 * plan: the generic path taking it needs no workspace and captures into a
 * CUDA graph without one. Exits 77 (skipped) without a GPU. */
#include "gpu_util.h"

/* The tolerances of FORMAT.md §7.2 are rel L2 and max|d|/max|y| of
 * 2e-3. The fp16 W_hat (exact) lands near 1e-6 of the CPU reference; the
 * halves added by the tensor core near 2e-4. */
#define EXACT_REL 1e-4
#define EXACT_MAX 1e-3
#define HALVES_REL 6e-4
#define HALVES_MAX 2e-3

typedef struct dev_layer {
  trellis_device_weight *h;
  trellis_weight w; /* device pointers */
} dev_layer;

static void dev_open(dev_layer *d, const trellis_weight *host) {
  OK(trellis_weight_upload(host, &d->h));
  d->w = *trellis_device_weight_view(d->h);
}

/* One launch of `cfg` (its cluster count overridden by `clusters` when > 0)
 * on m rows; returns y as floats (poisoned with NaN before). */
static float *launch(const dev_layer *d, trl_stream_config cfg, int clusters,
                     const void *dx, trellis_dtype xdt, int64_t m, void *dy,
                     trellis_dtype ydt) {
  if (clusters > 0)
    cfg.clusters = clusters;
  const size_t yb = (size_t)(m * d->w.n) * trellis_dtype_size(ydt);
  CK(cudaMemset(dy, 0xFF, yb));
  trl_stream_args a;
  memset(&a, 0, sizeof a);
  a.trellis = d->w.trellis;
  a.x = dx;
  a.in_dtype = xdt;
  a.s_in = d->w.suh;
  a.s_out = d->w.svh;
  a.bias = d->w.bias;
  a.y = dy;
  a.out_dtype = ydt;
  a.m = m;
  a.k = d->w.k;
  a.n = d->w.n;
  a.pdl = 1;
  assert_int_equal(trl_launch_stream(&cfg, &a, NULL), 0);
  CK(cudaDeviceSynchronize());
  void *h = malloc(yb);
  CK(cudaMemcpy(h, dy, yb, cudaMemcpyDeviceToHost));
  float *f = to_float(h, (size_t)(m * d->w.n), ydt);
  free(h);
  return f;
}

/* Every variant on a 640 x 384 layer (5 k-blocks, 3 strips): the chosen
 * cluster size, clusters of 1, 2, 3 and 5 CTAs (chunks of 5, 3, 2 and 1
 * k-blocks, the last one shorter), each with one cluster for all three
 * strips and with as many as the plan launches. */
static void test_every_variant(void **state) {
  (void)state;
  const trellis_codebook cbs[3] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                   TRELLIS_CB_MUL1};
  const int forced[5] = {0, 1, 2, 3, 5};
  /* TRELLIS_TEST_SMALL (the sanitizer runs): 1 = K 2 and 6, cluster
   * sizes chosen and 3, all strips on one cluster; 2 = one variant (K6,
   * MCG, 8 tokens, halves, the plan's MMA, 3-CTA clusters, one cluster for
   * three strips, m = 3) */
  const char *small_env = getenv("TRELLIS_TEST_SMALL");
  const int small = small_env ? atoi(small_env) : 0;
  int runs = 0;
  for (int bits = 1; bits <= 8; ++bits)
    for (int c = 0; c < 3; ++c) {
      if ((small == 1 && bits != 2 && bits != 6) ||
          (small >= 2 && (bits != 6 || cbs[c] != TRELLIS_CB_MCG)))
        continue;
      gw w;
      gw_random(&w, 640, 384, bits, cbs[c], 0, bits & 1, 500 + 10 * bits + c);
      dev_layer d;
      dev_open(&d, &w.w);
      void *x = rand_input(16, w.w.k, TRELLIS_F16, 600 + bits);
      float *ref = cpu_ref(&w.w, x, TRELLIS_F16, 16, TRELLIS_F32);
      void *dx = dev_copy(x, (size_t)(16 * w.w.k) * 2), *dy = NULL;
      CK(cudaMalloc(&dy, (size_t)(16 * w.w.n) * 4));
      for (int tok = 8; tok <= 16; tok += 8)
        for (int halves = 0; halves <= 1; ++halves)
          for (int sync = 0; sync <= 1; ++sync)
            for (int f = 0; f < 5; ++f) {
              if ((small && forced[f] != 0 && forced[f] != 3) ||
                  (small >= 2 && (tok != 8 || !halves ||
                                  sync != TRL_STREAM_SYNC || forced[f] != 3)))
                continue;
              trl_stream_config cfg;
              assert_int_equal(trl_stream_plan(bits, cbs[c], w.w.k, w.w.n, tok,
                                               halves, sync, forced[f], &cfg),
                               0);
              if (forced[f])
                assert_int_equal(cfg.cluster, forced[f]);
              const int exact = !cfg.halves;
              assert_int_equal(cfg.halves, halves && cbs[c] != TRELLIS_CB_MUL1);
              const int64_t ms[2] = {tok, tok - 5};
              for (int mi = small >= 2 ? 1 : 0; mi < 2; ++mi)
                for (int one = small ? 1 : 0; one <= 1; ++one) {
                  const int64_t m = ms[mi];
                  float *y = launch(&d, cfg, one ? 1 : 0, dx, TRELLIS_F16, m,
                                    dy, TRELLIS_F32);
                  char what[96];
                  snprintf(
                      what, sizeof what,
                      "K%d %s tokens %d halves %d sync %d cluster %d x%d m "
                      "%lld",
                      bits, trellis_codebook_name(cbs[c]), tok, cfg.halves,
                      cfg.sync, cfg.cluster, one ? 1 : cfg.clusters,
                      (long long)m);
                  check_close(y, ref, (size_t)(m * w.w.n),
                              exact ? EXACT_REL : HALVES_REL,
                              exact ? EXACT_MAX : HALVES_MAX, what);
                  /* the same launch again: the same bits */
                  float *again = launch(&d, cfg, one ? 1 : 0, dx, TRELLIS_F16,
                                        m, dy, TRELLIS_F32);
                  assert_memory_equal(again, y, (size_t)(m * w.w.n) * 4);
                  free(again);
                  free(y);
                  runs++;
                }
            }
      CK(cudaFree(dx));
      CK(cudaFree(dy));
      free(ref);
      free(x);
      trellis_device_weight_destroy(d.h);
      gw_free(&w);
    }
  printf("  %d launches checked\n", runs);
}

/* The shared-memory limit is an attribute of the kernel, process-wide: a
 * configuration planned after another with a larger chunk (one CTA for all
 * five k-blocks, then five CTAs of one) must leave the first launchable. */
static void test_later_plan_keeps_earlier_launchable(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 640, 384, 6, TRELLIS_CB_MCG, 0, 1, 777);
  dev_layer d;
  dev_open(&d, &w.w);
  void *x = rand_input(8, w.w.k, TRELLIS_F16, 778);
  float *ref = cpu_ref(&w.w, x, TRELLIS_F16, 8, TRELLIS_F32);
  void *dx = dev_copy(x, (size_t)(8 * w.w.k) * 2), *dy = NULL;
  CK(cudaMalloc(&dy, (size_t)(8 * w.w.n) * 4));
  trl_stream_config big, small;
  assert_int_equal(trl_stream_plan(6, TRELLIS_CB_MCG, w.w.k, w.w.n, 8, 1,
                                   TRL_STREAM_SYNC, 1, &big),
                   0);
  assert_int_equal(trl_stream_plan(6, TRELLIS_CB_MCG, w.w.k, w.w.n, 8, 1,
                                   TRL_STREAM_SYNC, 5, &small),
                   0);
  assert_true(big.smem > small.smem);
  for (int i = 0; i < 2; ++i) {
    float *y =
        launch(&d, i ? small : big, 0, dx, TRELLIS_F16, 8, dy, TRELLIS_F32);
    check_close(y, ref, (size_t)(8 * w.w.n), HALVES_REL, HALVES_MAX,
                i ? "the later plan" : "the earlier plan");
    free(y);
  }
  CK(cudaFree(dx));
  CK(cudaFree(dy));
  free(ref);
  free(x);
  trellis_device_weight_destroy(d.h);
  gw_free(&w);
}

/* A cluster size no rank can be given a k-block at (4 CTAs over 5 blocks in
 * chunks of 2) and a token width the kernel does not have are refused. */
static void test_refusals(void **state) {
  (void)state;
  trl_stream_config cfg;
  assert_int_not_equal(
      trl_stream_plan(6, TRELLIS_CB_MCG, 640, 384, 8, 1, 1, 4, &cfg), 0);
  (void)cudaGetLastError();
  assert_int_not_equal(
      trl_stream_plan(6, TRELLIS_CB_MCG, 640, 384, 12, 1, 1, 0, &cfg), 0);
  (void)cudaGetLastError();
  trellis_clear_error();
}

/* x and y in every dtype through one configuration, bias on. */
static void test_dtypes(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1024, 512, 4, TRELLIS_CB_MCG, 0, 1, 700);
  dev_layer d;
  dev_open(&d, &w.w);
  const trellis_dtype dts[3] = {TRELLIS_F16, TRELLIS_BF16, TRELLIS_F32};
  trl_stream_config cfg;
  assert_int_equal(
      trl_stream_plan(4, TRELLIS_CB_MCG, w.w.k, w.w.n, 8, 1, 1, 0, &cfg), 0);
  void *dy = NULL;
  CK(cudaMalloc(&dy, (size_t)(8 * w.w.n) * 4));
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 3; ++o) {
      void *x = rand_input(7, w.w.k, dts[i], 710 + (uint64_t)i);
      float *ref = cpu_ref(&w.w, x, dts[i], 7, dts[o]);
      void *dx = dev_copy(x, (size_t)(7 * w.w.k) * trellis_dtype_size(dts[i]));
      float *y = launch(&d, cfg, 0, dx, dts[i], 7, dy, dts[o]);
      char what[48];
      snprintf(what, sizeof what, "in %s out %s", trellis_dtype_name(dts[i]),
               trellis_dtype_name(dts[o]));
      check_close(y, ref, (size_t)(7 * w.w.n), 2e-3,
                  dts[o] == TRELLIS_BF16 ? 8e-3 : HALVES_MAX, what);
      free(y);
      free(ref);
      free(x);
      CK(cudaFree(dx));
    }
  CK(cudaFree(dy));
  trellis_device_weight_destroy(d.h);
  gw_free(&w);
}

/* The generic path (K4/3INST) taking the persistent kernel: no workspace,
 * and a graph captured with none replays 100 times, output poisoned each
 * time, bit-equal to the eager run. */
static void test_generic_capture_without_workspace(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 2048, 1024, 4, TRELLIS_CB_3INST, 0, 1, 800);
  const int64_t m = 2;
  void *x = rand_input(m, w.w.k, TRELLIS_F16, 801);
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F16, 0);
  grun g;
  grun_open(&g, &w.w, &d);
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(g.plan, m, &sz));
  assert_int_equal(sz.path, TRELLIS_PATH_GENERIC);
  assert_int_equal(sz.workspace_bytes, 0);
  trellis_buffers only;
  trellis_buffers_init(&only);
  only.rotated = g.b.rotated;
  only.rotated_bytes = sz.rotated_bytes;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMemcpy(g.dx, x, (size_t)(m * w.w.k) * 2, cudaMemcpyHostToDevice));
  const size_t yb = (size_t)(m * w.w.n) * 2;
  CK(cudaMemset(g.dy, 0xFF, yb));
  OK(trellis_run(g.plan, g.dx, m, g.dy, &only, s));
  CK(cudaStreamSynchronize(s));
  uint16_t *eager = malloc(yb), *h = malloc(yb);
  CK(cudaMemcpy(eager, g.dy, yb, cudaMemcpyDeviceToHost));
  float *ef = to_float(eager, (size_t)(m * w.w.n), TRELLIS_F16);
  float *ref = cpu_ref(&w.w, x, TRELLIS_F16, m, TRELLIS_F16);
  check_close(ef, ref, (size_t)(m * w.w.n), 2e-3, HALVES_MAX, "eager");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  OK(trellis_run(g.plan, g.dx, m, g.dy, &only, s));
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  for (int r = 0; r < 100; ++r) {
    CK(cudaMemsetAsync(g.dy, 0xFF, yb, s));
    CK(cudaGraphLaunch(exec, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(h, g.dy, yb, cudaMemcpyDeviceToHost));
    assert_memory_equal(h, eager, yb);
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(s));
  free(ef);
  free(ref);
  free(eager);
  free(h);
  free(x);
  grun_close(&g);
  gw_free(&w);
}

/* LEGACY_KERNELS keeps the split-K scheduler (and its workspace) for the
 * same call; EXACT_WEIGHTS changes the arithmetic, not the sizes. */
static void test_flags(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 2048, 1024, 4, TRELLIS_CB_3INST, 0, 0, 900);
  dev_layer d;
  dev_open(&d, &w.w);
  const uint32_t flags[3] = {0, TRELLIS_PLAN_EXACT_WEIGHTS,
                             TRELLIS_PLAN_LEGACY_KERNELS};
  const int no_ws[3] = {1, 1, 0};
  for (int i = 0; i < 3; ++i) {
    trellis_plan_desc desc = gu_desc(2, TRELLIS_F16, TRELLIS_F16, flags[i]);
    trellis_plan *p = NULL;
    OK(trellis_plan_create(&d.w, &desc, &p));
    trellis_buffer_sizes sz;
    OK(trellis_plan_query(p, 2, &sz));
    assert_int_equal(sz.path, TRELLIS_PATH_GENERIC);
    assert_int_equal(sz.workspace_bytes == 0, no_ws[i]);
    trellis_plan_destroy(p);
  }
  trellis_device_weight_destroy(d.h);
  gw_free(&w);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_variant),
      cmocka_unit_test(test_later_plan_keeps_earlier_launchable),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_dtypes),
      cmocka_unit_test(test_generic_capture_without_workspace),
      cmocka_unit_test(test_flags),
  };
  return TU_RUN_TESTS("gpu_stream", tests);
}
