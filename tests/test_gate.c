/* SPDX-License-Identifier: Apache-2.0 */
/* The gate between the fused and generic paths, and the buffer layout:
 * pure functions, tested on the CPU. */
#include "testutil.h"

#include "rules/gate.h"
#include "rules/layout.h"
#include "rules/path.h"

#include <string.h>

static trl_gate_input open_gate(void) {
  trl_gate_input g = {0};
  g.m = 1;
  g.bits = 6;
  g.codebook = TRELLIS_CB_MCG;
  g.compute_dtype = TRELLIS_F16;
  g.fused_image_present = 1;
  return g;
}

static void test_gate_open(void **state) {
  (void)state;
  trl_gate_input g = open_gate();
  assert_int_equal(trl_gate(&g), TRL_GATE_OPEN);
  g.m = 128;
  assert_int_equal(trl_gate(&g), TRL_GATE_OPEN);
}

/* Each condition flipped alone closes the gate with its own reason. */
static void test_gate_each_condition(void **state) {
  (void)state;
  trl_gate_input g;
  g = open_gate(), g.m = 129;
  assert_int_equal(trl_gate(&g), TRL_GATE_M_TOO_LARGE);
  g = open_gate(), g.m = 0;
  assert_int_equal(trl_gate(&g), TRL_GATE_M_TOO_LARGE);
  for (int bits = 1; bits <= 8; ++bits) {
    g = open_gate(), g.bits = bits;
    assert_int_equal(trl_gate(&g), bits == 6 ? TRL_GATE_OPEN : TRL_GATE_BITS);
    g.half = 1; /* K = bits + 1/2 (1.6's MUL1 half rates): never K6 */
    assert_int_equal(trl_gate(&g), TRL_GATE_BITS);
  }
  g = open_gate(), g.codebook = TRELLIS_CB_3INST;
  assert_int_equal(trl_gate(&g), TRL_GATE_CODEBOOK);
  g = open_gate(), g.codebook = TRELLIS_CB_MUL1;
  assert_int_equal(trl_gate(&g), TRL_GATE_CODEBOOK);
  g = open_gate(), g.paired = 1;
  assert_int_equal(trl_gate(&g), TRL_GATE_PAIRED);
  g = open_gate(), g.compute_dtype = TRELLIS_BF16;
  assert_int_equal(trl_gate(&g), TRL_GATE_COMPUTE_DTYPE);
  g = open_gate(), g.has_external_h128 = 1;
  assert_int_equal(trl_gate(&g), TRL_GATE_EXTERNAL_H128);
  g = open_gate(), g.fused_image_present = 0;
  assert_int_equal(trl_gate(&g), TRL_GATE_NO_IMAGE);
  g = open_gate(), g.forced = 1;
  assert_int_equal(trl_gate(&g), TRL_GATE_FORCED);
  g = open_gate(), g.kmajor = 1;
  assert_int_equal(trl_gate(&g), TRL_GATE_LAYOUT);
  for (int r = TRL_GATE_OPEN; r <= TRL_GATE_LAYOUT; ++r)
    assert_true(trl_gate_reason_text((trl_gate_reason)r)[0] != '\0');
}

/* The b12x formats never take the fused path: the SQG codebooks at the
 * fused K, and every pair kind at its record Ks (and at K 6, where only the
 * pair condition closes the gate). */
static void test_gate_b12x_formats(void **state) {
  (void)state;
  trl_gate_input g;
  for (int m = 1; m <= 128; m *= 2) {
    g = open_gate(), g.m = m, g.codebook = TRELLIS_CB_SQG_E4M3;
    assert_int_equal(trl_gate(&g), TRL_GATE_CODEBOOK);
    g = open_gate(), g.m = m, g.codebook = TRELLIS_CB_SQG_FP16;
    assert_int_equal(trl_gate(&g), TRL_GATE_CODEBOOK);
  }
  for (int bits = 2; bits <= 6; ++bits) {
    g = open_gate(), g.bits = bits, g.codebook = TRELLIS_CB_SQG_E4M3;
    assert_int_not_equal(trl_gate(&g), TRL_GATE_OPEN);
  }
  static const trellis_pair_kind kinds[] = {TRELLIS_PAIR_P22, TRELLIS_PAIR_P24,
                                            TRELLIS_PAIR_P33, TRELLIS_PAIR_P43,
                                            TRELLIS_PAIR_P44};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; ++i) {
    const trellis_codebook cbs[2] = {TRELLIS_CB_MCG, TRELLIS_CB_SQG_E4M3};
    for (int c = 0; c < 2; ++c) {
      g = open_gate(), g.paired = 1, g.codebook = cbs[c];
      g.bits = ((unsigned)kinds[i] >> 4) & 15u; /* record0's K */
      assert_int_not_equal(trl_gate(&g), TRL_GATE_OPEN);
    }
  }
  g = open_gate(), g.paired = 1; /* K6 MCG otherwise open */
  assert_int_equal(trl_gate(&g), TRL_GATE_PAIRED);
}

static trl_layout_params params(int64_t k, int64_t n) {
  trl_layout_params p = {0};
  p.k = k;
  p.n = n;
  p.sm_count = 132;
  return p;
}

static void test_layout_fused_needs_no_workspace(void **state) {
  (void)state;
  trl_layout_params p = params(8192, 28672);
  trl_layout l;
  for (int64_t m = 1; m <= 128; ++m) {
    assert_true(trl_layout_compute(&p, TRELLIS_PATH_FUSED, m, &l));
    assert_int_equal(l.workspace_bytes, 0);
    assert_int_equal(l.rotated_bytes, (size_t)(m * 8192 * 2));
  }
}

/* Where the register-direct kernel runs (plan with it available): up to
 * 8 rows, at every rate, on the fused and the generic path, never on
 * the dense one. It needs no workspace; the rotated buffer stays part of
 * the contract.
 * Unavailable (LEGACY_KERNELS, EXACT_WEIGHTS, bf16 compute, external
 * rotation, SQG codebooks, pairs, no sm_90 image): never. */
static void test_layout_direct(void **state) {
  (void)state;
  const trellis_path paths[] = {TRELLIS_PATH_FUSED, TRELLIS_PATH_GENERIC};
  for (size_t i = 0; i < 4; ++i) {
    trl_layout_params p = params(8192, 28672);
    p.rate = i < 2 ? 12 : 5; /* K6, K2.5 */
    p.codebook = TRELLIS_CB_MUL1;
    for (int on = 0; on <= 1; ++on) {
      p.direct = on;
      for (int64_t m = 1; m <= 128; ++m) {
        /* up to 8 rows, a half rate like an integer one */
        const int want = on && m <= 8;
        assert_int_equal(trl_layout_direct(&p, paths[i % 2], m), want);
        trl_layout l;
        assert_true(trl_layout_compute(&p, paths[i % 2], m, &l));
        assert_int_equal(l.rotated_bytes, (size_t)(m * 8192 * 2));
        if (want || paths[i % 2] == TRELLIS_PATH_FUSED)
          assert_int_equal(l.workspace_bytes, 0);
        else
          assert_true(l.workspace_bytes > 0);
      }
    }
    p.direct = 1;
    assert_false(trl_layout_direct(&p, TRELLIS_PATH_DENSE, 1));
    (void)paths;
  }
}

/* Its variants: half rates only with MUL1; the halves for 3INST/MCG; the
 * affine and int8 forms for MUL1, int8 up to 4 rows. */
static void test_direct_variants(void **state) {
  (void)state;
  for (int h = 2; h <= 16; ++h)
    for (int cb = 0; cb <= 2; ++cb) {
      /* half rates: MUL1 at K 1.5 .. 3.5 (format/codebooks.h) */
      const int rate_ok = h % 2 == 0 || (cb == TRELLIS_CB_MUL1 && h <= 7);
      assert_int_equal(trl_direct_variant_exists(h, cb, TRL_DIRECT_HALVES),
                       rate_ok && cb != TRELLIS_CB_MUL1);
      assert_int_equal(trl_direct_variant_exists(h, cb, TRL_DIRECT_AFFINE),
                       rate_ok && cb == TRELLIS_CB_MUL1);
      assert_int_equal(trl_direct_variant_exists(h, cb, TRL_DIRECT_INT8),
                       rate_ok && cb == TRELLIS_CB_MUL1);
    }
  assert_int_equal(trl_direct_var(TRELLIS_CB_MCG, 1), TRL_DIRECT_HALVES);
  assert_int_equal(trl_direct_var(TRELLIS_CB_MUL1, 4), TRL_DIRECT_INT8);
  assert_int_equal(trl_direct_var(TRELLIS_CB_MUL1, 5), TRL_DIRECT_AFFINE);
}

/* Its launch shapes (132 SMs, two CTAs each, no cluster limit known): the
 * whole k of a 128-column group in one cluster, as few k-tiles per warp as
 * the GPU allows, one wave of clusters. */
static void test_direct_shape(void **state) {
  (void)state;
  struct {
    int64_t k, n;
    int cluster, clusters, rounds;
  } cases[] = {
      {8192, 28672, 8, 33, 7}, /* 64 k-blocks, 224 groups */
      {28672, 8192, 8, 33, 2}, /* m = 1: shares of 224 k-tiles, two rounds */
      {2048, 4096, 8, 32, 1},  {4096, 4096, 8, 32, 1}, {8192, 8192, 4, 64, 1},
      {6144, 1024, 16, 8, 1},  {512, 6144, 4, 48, 1},  {4096, 14336, 2, 112, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    trl_direct_grid g;
    assert_true(trl_direct_shape(cases[i].k, cases[i].n, 1, TRELLIS_CB_MCG, 132,
                                 0, 16, 0, NULL, 1, &g));
    assert_int_equal(g.cluster, cases[i].cluster);
    assert_int_equal(g.clusters, cases[i].clusters);
    assert_int_equal(g.rounds, cases[i].rounds);
    assert_true(g.smem_bytes <= TRL_DIRECT_MAX_SMEM);
    assert_int_equal(g.kt_cta % 8, 0);
    assert_true((int64_t)g.kt_cta * 16 * g.cluster >= cases[i].k);
    assert_true((int64_t)g.clusters * g.cluster <= 132 * g.ctas_per_sm);
  }
  /* a limit on clusters that fit at once, a size that does not fit, a
   * forced size */
  int active[TRL_DIRECT_MAX_CLUSTER + 1] = {0};
  active[8] = 20;
  trl_direct_grid g;
  assert_true(trl_direct_shape(8192, 28672, 1, TRELLIS_CB_MCG, 132, 0, 16, 0,
                               active, 1, &g));
  assert_true(g.cluster != 8 || g.clusters <= 20);
  for (int c = 1; c <= TRL_DIRECT_MAX_CLUSTER; ++c)
    active[c] = c == 3 ? 0 : -1;
  assert_true(trl_direct_shape(8192, 28672, 1, TRELLIS_CB_MCG, 132, 0, 16, 0,
                               active, 1, &g));
  assert_int_equal(g.cluster, 3);
  for (int c = 1; c <= 16; ++c) {
    assert_true(trl_direct_shape(4096, 4096, 8, TRELLIS_CB_MUL1, 132, 0, 16, c,
                                 NULL, 1, &g));
    assert_int_equal(g.cluster, c);
    assert_int_equal(g.var, TRL_DIRECT_AFFINE);
  }
  /* one block of at most 8 tokens */
  assert_false(trl_direct_shape(4096, 4096, 9, TRELLIS_CB_MUL1, 132, 0, 16, 0,
                                NULL, 1, &g));
  assert_int_equal(g.cluster, 0);
  assert_false(trl_direct_shape(4096, 4096, 0, TRELLIS_CB_MCG, 132, 0, 16, 0,
                                NULL, 1, &g));
  /* no more CTAs per cluster than 128-k blocks */
  assert_true(trl_direct_shape(128, 1024, 1, TRELLIS_CB_MCG, 132, 0, 16, 0,
                               NULL, 1, &g));
  assert_int_equal(g.cluster, 1);
  assert_false(trl_direct_shape(128, 1024, 1, TRELLIS_CB_MCG, 132, 0, 16, 2,
                                NULL, 1, &g));
}

/* k split across clusters (generic path only: its partials live in the
 * workspace): taken where it evens the busiest CTA's share out, with the
 * clusters that fit an H200 at once (cudaOccupancyMaxActiveClusters at m =
 * 1, 2026-12); the grid stays one wave, every part non-empty, the
 * workspace sized for the partials, the fused path never split. */
static void test_direct_splits(void **state) {
  (void)state;
  int act[TRL_DIRECT_MAX_CLUSTER + 1] = {0,  132, 132, 79, 62, 47, 39, 32, 30,
                                         23, 21,  16,  16, 14, 14, 14, 14};
  const struct {
    int64_t k, n;
    trellis_codebook cb;
  } shapes[] = {{28672, 8192, TRELLIS_CB_MUL1}, {8192, 8192, TRELLIS_CB_MUL1},
                {28672, 8192, TRELLIS_CB_MCG},  {8192, 28672, TRELLIS_CB_MCG},
                {4096, 4096, TRELLIS_CB_MCG},   {512, 6144, TRELLIS_CB_MUL1}};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i) {
    const int64_t k = shapes[i].k, n = shapes[i].n;
    for (int64_t m = 1; m <= 8; ++m) {
      trl_direct_grid one, g;
      assert_true(
          trl_direct_shape(k, n, m, shapes[i].cb, 132, 0, 16, 0, act, 1, &one));
      assert_int_equal(one.splits, 1);
      assert_true(trl_direct_shape(k, n, m, shapes[i].cb, 132, 0, 16, 0, act,
                                   TRL_DIRECT_MAX_SPLITS, &g));
      assert_true(g.splits >= 1 && g.splits <= TRL_DIRECT_MAX_SPLITS);
      assert_int_equal(g.clusters % g.splits, 0);
      assert_true(g.clusters <= act[g.cluster]);
      assert_true((int64_t)g.clusters * g.cluster <= 132 * g.ctas_per_sm);
      assert_true((int64_t)g.splits * g.cluster <= k / 128); /* no empty part */
      assert_true((int64_t)g.kt_cta * 16 * g.cluster * g.splits >= k);
      assert_true(g.rounds * (g.clusters / g.splits) >= n / 128);
      /* splitting is taken only where the model says it pays */
      assert_true(trl_direct_cost(g.var, m, g.cluster, g.rounds, g.kt_cta / 8,
                                  g.splits) <=
                  trl_direct_cost(one.var, m, one.cluster, one.rounds,
                                  one.kt_cta / 8, 1));
    }
  }
  /* 28672x8192 (224 k-blocks, 64 groups): split, busiest CTA 56 k-blocks
   * instead of 64 */
  trl_direct_grid g;
  assert_true(trl_direct_shape(28672, 8192, 1, TRELLIS_CB_MUL1, 132, 0, 16, 0,
                               act, TRL_DIRECT_MAX_SPLITS, &g));
  assert_true(g.splits > 1);
  assert_int_equal(g.rounds * g.kt_cta / 8, 56);

  /* the layout: partials in the workspace on the generic path only */
  trl_layout_params p = params(28672, 8192);
  p.direct = 1;
  p.rate = 8;
  p.codebook = TRELLIS_CB_MUL1;
  p.direct_max_splits = TRL_DIRECT_MAX_SPLITS;
  memcpy(p.direct_active[TRL_DIRECT_INT8], act, sizeof act);
  memcpy(p.direct_active[TRL_DIRECT_AFFINE], act, sizeof act);
  int split_seen = 0;
  for (int64_t m = 1; m <= 8; ++m) {
    trl_layout l;
    assert_true(trl_layout_compute(&p, TRELLIS_PATH_FUSED, m, &l));
    assert_true(l.direct);
    assert_int_equal(l.direct_grid.splits, 1);
    assert_int_equal(l.workspace_bytes, 0);
    assert_true(trl_layout_compute(&p, TRELLIS_PATH_GENERIC, m, &l));
    assert_true(l.direct);
    const size_t want =
        l.direct_grid.splits > 1
            ? (size_t)l.direct_grid.splits * m * 8192 * sizeof(float)
            : 0;
    assert_int_equal(l.partial_bytes, want);
    assert_true(l.workspace_bytes >= want);
    assert_int_equal(l.workspace_bytes % TRL_WS_ALIGN, 0);
    split_seen |= l.direct_grid.splits > 1;
  }
  assert_true(split_seen);
}

/* The parked form's shape (trl_direct_park_shape): one CTA of the layer
 * per SM at most and at most half an SM's shared memory a CTA, so the next
 * launch's CTAs find room; it fits the small layers of a tensor-parallel
 * rank (512x6144, 6144x1024, 1024x4096: their decoded fp16 tiles spread
 * over 132 SMs take under half of each), not 2048x4096 (127 KB an SM) nor
 * the large ones; 3INST/MCG park W_hat, MUL1 (whose int8 form parks as the
 * affine one) 1024 + S, at 1..8 rows; the park area holds 512 bytes per
 * n-tile of every k-tile and round, no warps' sums; the layout parks only
 * where its parameters say so (off by default) and otherwise takes the
 * streaming shape. */
static void test_direct_park(void **state) {
  (void)state;
  const struct {
    int64_t k, n;
    int parks;
  } shapes[] = {{2048, 4096, 0}, {6144, 1024, 1},  {512, 6144, 1},
                {1024, 4096, 1}, {4096, 4096, 0},  {8192, 1024, 0},
                {8192, 8192, 0}, {8192, 28672, 0}, {28672, 8192, 0}};
  const trellis_codebook cbs[3] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                   TRELLIS_CB_MUL1};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
    for (int c = 0; c < 3; ++c)
      for (int64_t m = 1; m <= 8; ++m) {
        const int64_t k = shapes[i].k, n = shapes[i].n;
        trl_direct_grid g, streaming;
        assert_true(trl_direct_shape(k, n, m, cbs[c], 132, 0, 16, 0, NULL, 1,
                                     &streaming));
        assert_int_equal(streaming.park, 0); /* the shape alone never parks */
        const int parks =
            trl_direct_park_shape(k, n, m, cbs[c], 132, 16, 0, NULL, 1, &g);
        assert_int_equal(parks, shapes[i].parks);
        assert_int_equal(g.park, parks);
        if (!parks)
          continue;
        assert_int_equal(g.var, cbs[c] == TRELLIS_CB_MUL1 ? TRL_DIRECT_AFFINE
                                                          : TRL_DIRECT_HALVES);
        assert_int_equal(g.ctas_per_sm, 1);
        assert_true((int64_t)g.cluster * g.clusters <= 132);
        assert_int_equal(g.splits, 1);
        assert_true((int64_t)g.kt_cta * 16 * g.cluster >= k);
        assert_true((int64_t)g.rounds * g.clusters >= n / 128);
        const trl_direct_smem s =
            trl_direct_smem_layout(g.var, (int)m, g.kt_cta, g.rounds, 1);
        assert_int_equal(s.wbufs, 0);
        assert_int_equal(s.bytes - s.off_park,
                         (size_t)g.rounds * g.kt_cta * 8 * 512);
        assert_true(s.off_park >= s.off_cbuf);
        assert_int_equal(g.smem_bytes, s.bytes);
        assert_true(2 * (g.smem_bytes + 1024) <= 228 * 1024);
      }
  /* 512x6144 at one row: clusters of 2 CTAs, 16 k-tiles each, one round:
   * 64 KiB of tiles */
  trl_direct_grid g;
  assert_true(trl_direct_park_shape(512, 6144, 1, TRELLIS_CB_MCG, 132, 16, 0,
                                    NULL, 1, &g));
  assert_int_equal(g.cluster, 2);
  assert_int_equal(g.clusters, 48);
  assert_int_equal(g.kt_cta, 16);
  assert_true(g.smem_bytes > 64 * 1024 && g.smem_bytes < 70 * 1024);
  /* the clusters that fit: at most half of those active at two CTAs per
   * SM; a size that does not fit is skipped; a forced size is kept */
  int act[TRL_DIRECT_MAX_CLUSTER + 1];
  for (int c = 0; c <= TRL_DIRECT_MAX_CLUSTER; ++c)
    act[c] = 40;
  act[2] = -1;
  assert_true(trl_direct_park_shape(512, 6144, 1, TRELLIS_CB_MCG, 132, 16, 0,
                                    act, 1, &g));
  assert_int_equal(g.cluster, 4); /* clusters of 4 in 3 rounds */
  assert_int_equal(g.clusters, 20);
  assert_int_equal(g.rounds, 3);
  assert_false(trl_direct_park_shape(512, 6144, 1, TRELLIS_CB_MCG, 132, 16, 2,
                                     act, 1, &g));
  /* 6144x1024 on the generic path may split k across clusters */
  for (int c = 0; c <= TRL_DIRECT_MAX_CLUSTER; ++c)
    act[c] = c >= 8 ? 8 : 66; /* large clusters scarce */
  assert_false(trl_direct_park_shape(6144, 1024, 1, TRELLIS_CB_MCG, 132, 16, 0,
                                     act, 1, &g));
  assert_true(trl_direct_park_shape(6144, 1024, 1, TRELLIS_CB_MCG, 132, 16, 0,
                                    act, TRL_DIRECT_MAX_SPLITS, &g));
  assert_true(g.splits > 1);
  assert_true((int64_t)g.cluster * g.clusters <= 132);

  /* through the layout, and the hook's off switch */
  trl_layout_params p = params(512, 6144);
  p.direct = 1;
  p.rate = 12;
  p.codebook = TRELLIS_CB_MCG;
  trl_direct_grid streaming;
  assert_true(trl_layout_direct_grid(&p, TRELLIS_PATH_FUSED, 1, &streaming));
  assert_int_equal(streaming.park, 0);
  p.direct_park = 1;
  assert_true(trl_layout_direct_grid(&p, TRELLIS_PATH_FUSED, 1, &g));
  assert_int_equal(g.park, 1);
  p.codebook = TRELLIS_CB_MUL1;
  assert_true(trl_layout_direct_grid(&p, TRELLIS_PATH_GENERIC, 1, &g));
  assert_int_equal(g.park, 1);
  assert_int_equal(g.var, TRL_DIRECT_AFFINE);
  /* where it does not fit, the streaming shape */
  p = params(2048, 4096);
  p.direct = 1;
  p.rate = 12;
  p.codebook = TRELLIS_CB_MCG;
  assert_true(trl_layout_direct_grid(&p, TRELLIS_PATH_FUSED, 1, &streaming));
  p.direct_park = 1;
  assert_true(trl_layout_direct_grid(&p, TRELLIS_PATH_FUSED, 1, &g));
  assert_int_equal(g.park, 0);
  assert_memory_equal(&g, &streaming, sizeof g);
}

/* How many rounds of warp sums the register-direct kernel keeps: two
 * where there is a next round and at most 4 rows, and shared memory for
 * them. */
static void test_direct_sum_buffers(void **state) {
  (void)state;
  assert_int_equal(trl_direct_wbufs(1, 2), 2);
  assert_int_equal(trl_direct_wbufs(4, 7), 2);
  assert_int_equal(trl_direct_wbufs(5, 7), 1);
  assert_int_equal(trl_direct_wbufs(1, 1), 1);
  const trl_direct_smem one =
      trl_direct_smem_layout(TRL_DIRECT_HALVES, 4, 64, 1, 0);
  const trl_direct_smem two =
      trl_direct_smem_layout(TRL_DIRECT_HALVES, 4, 64, 2, 0);
  assert_int_equal(one.wbufs, 1);
  assert_int_equal(two.wbufs, 2);
  assert_int_equal(two.off_cbuf - two.off_wpart,
                   2 * (one.off_cbuf - one.off_wpart));
}

/* The fused kernel's input rotation: local for short CTAs, one-wave grids
 * or an idle-SM grid and m <= 8, shared claims otherwise (cluster sizes as
 * prepare picks them on the H200). */
static void test_fused_local_rotation(void **state) {
  (void)state;
  /* 8192x28672, 3-CTA clusters: 22 k-blocks per CTA, 672 CTAs (2 waves) */
  assert_false(trl_layout_fused_local(1, 8192, 28672, 3, 132));
  /* 4096x4096, 8-CTA clusters: 4 k-blocks per CTA */
  assert_true(trl_layout_fused_local(1, 4096, 4096, 8, 132));
  assert_true(trl_layout_fused_local(4, 4096, 4096, 8, 132));
  /* 256 CTAs are one wave (3 per SM): up to 32 rows x k-blocks */
  assert_true(trl_layout_fused_local(8, 4096, 4096, 8, 132));
  assert_false(trl_layout_fused_local(8, 4096, 4096, 8, 64));
  /* 14336x4096, 9-CTA clusters: 13 k-blocks per CTA, m = 1 and 2 */
  assert_true(trl_layout_fused_local(1, 14336, 4096, 9, 132));
  assert_true(trl_layout_fused_local(2, 14336, 4096, 9, 132));
  assert_false(trl_layout_fused_local(3, 14336, 4096, 9, 132));
  /* 4096x14336, 3-CTA clusters: 11 k-blocks, 336 CTAs */
  assert_true(trl_layout_fused_local(2, 4096, 14336, 3, 132));
  assert_false(trl_layout_fused_local(4, 4096, 14336, 3, 132));
  /* 6144x1024: 64 CTAs leave SMs idle, local up to m = 8 */
  assert_true(trl_layout_fused_local(8, 6144, 1024, 8, 132));
  assert_false(trl_layout_fused_local(9, 6144, 1024, 8, 132));
  /* more SMs than the grid needs, a bad cluster size */
  assert_true(trl_layout_fused_local(8, 28672, 8192, 6, 512));
  assert_false(trl_layout_fused_local(1, 4096, 4096, 0, 132));
}

/* A local rotation is done before the ring where every CTA's rows x
 * k-blocks fit the kernel's area (TRL_FUSED_PRE_ROWS = 20). */
static void test_fused_rotation_ahead(void **state) {
  (void)state;
  assert_int_equal(TRL_FUSED_PRE_ROWS, 20);
  /* 14336x4096, 9-CTA clusters: 13 k-blocks per CTA */
  assert_true(trl_layout_fused_ahead(1, 14336, 9));
  assert_false(trl_layout_fused_ahead(2, 14336, 9));
  /* 4096x4096, 8-CTA clusters: 4 k-blocks; 20 and 32 rows x k-blocks */
  assert_true(trl_layout_fused_ahead(5, 4096, 8));
  assert_false(trl_layout_fused_ahead(8, 4096, 8));
  /* 6144x1024, 16-CTA clusters: 3 k-blocks */
  assert_true(trl_layout_fused_ahead(2, 6144, 16));
  assert_false(trl_layout_fused_ahead(8, 6144, 16));
  /* 8192x28672, 3-CTA clusters: 22 k-blocks; a bad cluster size */
  assert_false(trl_layout_fused_ahead(1, 8192, 3));
  assert_false(trl_layout_fused_ahead(1, 4096, 0));
}

/* The rotation form the fused cluster kernel runs: local (ahead or per
 * stage) where the two rules above say so, else x rotated before it, or
 * the claims under LEGACY_KERNELS. */
static void test_fused_rotation_form(void **state) {
  (void)state;
  /* 14336x4096, 9-CTA clusters: 13 k-blocks per CTA */
  assert_int_equal(trl_layout_fused_rotation(1, 14336, 4096, 9, 132, 0),
                   TRL_FUSED_LOCAL_AHEAD);
  assert_int_equal(trl_layout_fused_rotation(2, 14336, 4096, 9, 132, 0),
                   TRL_FUSED_LOCAL);
  assert_int_equal(trl_layout_fused_rotation(2, 14336, 4096, 9, 132, 1),
                   TRL_FUSED_LOCAL);
  assert_int_equal(trl_layout_fused_rotation(6, 14336, 4096, 9, 132, 0),
                   TRL_FUSED_PRE);
  assert_int_equal(trl_layout_fused_rotation(6, 14336, 4096, 9, 132, 1),
                   TRL_FUSED_CLAIMS);
  /* above the locally rotated rows: always before the kernel or claims */
  for (int64_t m = TRL_FUSED_LOCAL_ROWS + 1; m <= TRL_FUSED_MAX_M; ++m) {
    assert_int_equal(trl_layout_fused_rotation(m, 4096, 4096, 7, 132, 0),
                     TRL_FUSED_PRE);
    assert_int_equal(trl_layout_fused_rotation(m, 4096, 4096, 7, 132, 1),
                     TRL_FUSED_CLAIMS);
  }
  /* a bad cluster size never rotates locally */
  assert_int_equal(trl_layout_fused_rotation(1, 4096, 4096, 0, 132, 0),
                   TRL_FUSED_PRE);
}

/* Programmatic dependent launch where each CTA runs two or more k-blocks. */
static void test_fused_dependent_launch(void **state) {
  (void)state;
  /* 512x6144, 4-CTA clusters: one k-block per CTA */
  assert_false(trl_layout_fused_pdl(512, 4));
  assert_false(trl_layout_fused_pdl(1024, 8));
  /* 2048x4096, 8-CTA clusters: two; 8192x28672, 3-CTA clusters: 22 */
  assert_true(trl_layout_fused_pdl(2048, 8));
  assert_true(trl_layout_fused_pdl(1152, 8));
  assert_true(trl_layout_fused_pdl(8192, 3));
  /* no clusters: one CTA runs all of k */
  assert_true(trl_layout_fused_pdl(256, 1));
  assert_false(trl_layout_fused_pdl(128, 1));
  assert_false(trl_layout_fused_pdl(4096, 0));
}

static void test_layout_generic(void **state) {
  (void)state;
  const int64_t shapes[][2] = {
      {128, 128}, {6144, 1024}, {8192, 28672}, {512, 6144}};
  for (size_t i = 0; i < 4; ++i) {
    trl_layout_params p = params(shapes[i][0], shapes[i][1]);
    for (int64_t m = 1; m <= 300; m += 7) {
      trl_layout l;
      assert_true(trl_layout_compute(&p, TRELLIS_PATH_GENERIC, m, &l));
      /* splits cover k exactly, in whole 128-k stages */
      assert_true(l.splits >= 1);
      assert_int_equal(l.kt_per_split % 8, 0);
      assert_true((int64_t)l.splits * l.kt_per_split >= p.k / 16);
      assert_true((int64_t)(l.splits - 1) * l.kt_per_split < p.k / 16);
      assert_int_equal(l.partial_bytes,
                       (size_t)l.splits * (size_t)(m * p.n) * 4);
      assert_true(l.workspace_bytes >= l.partial_off + l.partial_bytes);
      assert_int_equal(l.workspace_bytes % TRL_WS_ALIGN, 0);
    }
  }
}

/* A pair on the k axis (k = 256) runs one k-split per record, whatever
 * split_k asks: the output stage's split sum adds the records' products. */
static void test_layout_pair_k(void **state) {
  (void)state;
  for (int split_k = 0; split_k <= 4; ++split_k) {
    trl_layout_params p = params(256, 4096);
    p.pair_k = 1;
    p.split_k = split_k;
    for (int64_t m = 1; m <= 300; m += 37) {
      trl_layout l;
      assert_true(trl_layout_compute(&p, TRELLIS_PATH_GENERIC, m, &l));
      assert_int_equal(l.splits, 2);
      assert_int_equal(l.kt_per_split, 8);
      assert_int_equal(l.partial_bytes, (size_t)2 * (size_t)(m * p.n) * 4);
    }
  }
}

static void test_layout_callback_and_dense(void **state) {
  (void)state;
  trl_layout_params p = params(4096, 4096);
  p.has_h128 = 1;
  trl_layout l;
  assert_true(trl_layout_compute(&p, TRELLIS_PATH_GENERIC, 3, &l));
  assert_int_equal(l.rotout_bytes, (size_t)(3 * 4096 * 4));
  assert_true(l.rotout_off >= l.partial_off + l.partial_bytes);
  assert_true(trl_layout_compute(&p, TRELLIS_PATH_DENSE, 512, &l));
  assert_int_equal(l.splits, 1);
  assert_true(l.slice_n >= 128 && l.slice_n % 128 == 0 && l.slice_n <= 4096);
  assert_int_equal(l.what_bytes, (size_t)(4096 * l.slice_n * 2));
  assert_int_equal(l.cublas_bytes, TRL_CUBLAS_WS_BYTES);
  assert_true(l.workspace_bytes >= l.cublas_off + l.cublas_bytes);
  /* slices are equal and as wide as the cap allows */
  trl_layout_params big = params(8192, 28672);
  assert_true(trl_layout_compute(&big, TRELLIS_PATH_DENSE, 4096, &l));
  assert_int_equal(l.slice_n, 7168);
  /* a direct dense plan (cuBLASLt writes y) needs no fp32 partials */
  p.has_h128 = 0;
  p.dense_direct = 1;
  assert_true(trl_layout_compute(&p, TRELLIS_PATH_DENSE, 512, &l));
  assert_int_equal(l.partial_bytes, 0);
  assert_true(l.workspace_bytes >= l.what_bytes + l.cublas_bytes);
  /* overflow is reported, not wrapped */
  trl_layout_params huge = params((int64_t)1 << 40, (int64_t)1 << 40);
  assert_false(
      trl_layout_compute(&huge, TRELLIS_PATH_GENERIC, (int64_t)1 << 40, &l));
}

/* A K6/MCG plan of the default desc on an H200-like device. */
static trl_path_plan open_plan(void) {
  trl_path_plan p = {0};
  p.k = 4096;
  p.bits = 6;
  p.codebook = TRELLIS_CB_MCG;
  p.input_dtype = p.output_dtype = p.compute_dtype = TRELLIS_F16;
  p.cc_major = 9;
  p.fused_image = 1;
  return p;
}

/* The dense crossover: 257 on Hopper with k >= 1024, else 192. */
static void test_path_dense_crossover(void **state) {
  (void)state;
  trl_path_plan p = open_plan();
  assert_int_equal(trl_path_dense_min_m(&p), 257);
  p.k = 512;
  assert_int_equal(trl_path_dense_min_m(&p), 192);
  p = open_plan(), p.cc_major = 8;
  assert_int_equal(trl_path_dense_min_m(&p), 192);
  p.cc_major = 10;
  assert_int_equal(trl_path_dense_min_m(&p), 192);
  /* a k-major payload: its kernel up to 4 blocks of 8 rows */
  p = open_plan(), p.kmajor = 1;
  assert_int_equal(trl_path_dense_min_m(&p), 33);
  assert_int_equal(TRL_KMAJOR_DENSE_MIN_M, 4 * TRL_DIRECT_MAX_M + 1);
}

/* A k-major payload: the gate stays shut (its kernel needs a workspace),
 * the generic path up to 32 rows, then the plain dense path; the
 * register-direct kernel never; plans it cannot serve are named. */
static void test_path_kmajor(void **state) {
  (void)state;
  trl_path_plan p = open_plan();
  p.kmajor = 1;
  trl_gate_reason why = TRL_GATE_OPEN;
  assert_int_equal(trl_path_for(&p, 1, &why), TRELLIS_PATH_GENERIC);
  assert_int_equal(why, TRL_GATE_LAYOUT);
  assert_int_equal(trl_path_for(&p, 32, NULL), TRELLIS_PATH_GENERIC);
  assert_int_equal(trl_path_for(&p, 33, NULL), TRELLIS_PATH_DENSE);
  p.flags = TRELLIS_PLAN_FORCE_DECODE;
  assert_int_equal(trl_path_for(&p, 4096, NULL), TRELLIS_PATH_GENERIC);
  p.flags = TRELLIS_PLAN_FORCE_DENSE;
  assert_int_equal(trl_path_for(&p, 1, NULL), TRELLIS_PATH_DENSE);
  p.flags = 0;
  assert_false(trl_path_direct_eligible(&p));
  assert_false(trl_path_dense_direct(&p));
  assert_false(trl_path_dense_fold_input(&p));
  assert_null(trl_path_kmajor_refusal(&p));
  p.flags = TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_NO_DEPENDENT_LAUNCH;
  assert_null(trl_path_kmajor_refusal(&p));
  p.codebook = TRELLIS_CB_MUL1, p.bits = 2, p.half = 1;
  assert_null(trl_path_kmajor_refusal(&p));
  const char *r;
  p = open_plan(), p.kmajor = 1, p.fused_image = 0;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "sm_90"));
  p = open_plan(), p.kmajor = 1, p.compute_dtype = TRELLIS_BF16;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "fp16"));
  p = open_plan(), p.kmajor = 1, p.has_h128 = 1;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "H128"));
  p = open_plan(), p.kmajor = 1, p.split_k = 2;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "split_k"));
  p = open_plan(), p.kmajor = 1, p.flags = TRELLIS_PLAN_LEGACY_KERNELS;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "LEGACY_KERNELS"));
  p = open_plan(), p.kmajor = 1, p.flags = TRELLIS_PLAN_EXACT_WEIGHTS;
  assert_non_null(r = trl_path_kmajor_refusal(&p));
  assert_non_null(strstr(r, "EXACT_WEIGHTS"));
}

/* The k-major kernel's launch (trl_kmajor_shape): blocks of the fewest
 * 8-row sub-blocks (1, 2, 4) that hold m (4 rows for MUL1's int8 form at
 * m <= 4), one split per 1024 of k, CTA columns for about the CTAs the SMs
 * hold (two an SM, one at four sub-blocks), never fewer than one nor more
 * than the n-tiles. */
static void test_kmajor_shape(void **state) {
  (void)state;
  assert_int_equal(TRL_KMAJOR_MAX_BLOCKS * TRL_DIRECT_MAX_M + 1,
                   TRL_KMAJOR_DENSE_MIN_M);
  trl_kmajor_grid g = trl_kmajor_shape(8192, 28672, 1, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.var, TRL_DIRECT_HALVES);
  assert_int_equal(g.blocks, 1);
  assert_int_equal(g.rows, 8);
  assert_int_equal(g.m_blocks, 1);
  assert_int_equal(g.splits, 8);
  assert_int_equal(g.cols, 33); /* 264 / 8 */
  g = trl_kmajor_shape(8192, 28672, 4, TRELLIS_CB_MUL1, 132);
  assert_int_equal(g.var, TRL_DIRECT_INT8);
  assert_int_equal(g.blocks, 1);
  assert_int_equal(g.rows, 4);
  assert_int_equal(g.m_blocks, 1);
  g = trl_kmajor_shape(8192, 28672, 5, TRELLIS_CB_MUL1, 132);
  assert_int_equal(g.var, TRL_DIRECT_AFFINE);
  assert_int_equal(g.blocks, 1);
  assert_int_equal(g.rows, 8);
  g = trl_kmajor_shape(8192, 28672, 9, TRELLIS_CB_MUL1, 132);
  assert_int_equal(g.var, TRL_DIRECT_AFFINE);
  assert_int_equal(g.blocks, 2);
  assert_int_equal(g.rows, 16);
  assert_int_equal(g.m_blocks, 1);
  assert_int_equal(g.cols, 33); /* still two CTAs an SM */
  g = trl_kmajor_shape(8192, 28672, 17, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.blocks, 4);
  assert_int_equal(g.rows, 32);
  assert_int_equal(g.m_blocks, 1);
  assert_int_equal(g.cols, 16); /* 132 / 8: one CTA an SM */
  g = trl_kmajor_shape(8192, 28672, 32, TRELLIS_CB_3INST, 132);
  assert_int_equal(g.blocks, 4);
  assert_int_equal(g.m_blocks, 1);
  /* FORCE_DECODE past 32 rows: more blocks of 32 */
  g = trl_kmajor_shape(8192, 28672, 65, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.rows, 32);
  assert_int_equal(g.m_blocks, 3);
  assert_int_equal(g.cols, 5); /* 132 / 24 */
  g = trl_kmajor_shape(28672, 8192, 1, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.splits, 28);
  assert_int_equal(g.cols, 9);
  g = trl_kmajor_shape(512, 6144, 1, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.splits, 1); /* 4 slices: two warp groups */
  assert_int_equal(g.cols, 264);
  g = trl_kmajor_shape(1024, 128, 1, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.cols, 8); /* one n-tile a column */
  g = trl_kmajor_shape((int64_t)1 << 20, 128, 32, TRELLIS_CB_MCG, 132);
  assert_int_equal(g.splits, 1024);
  assert_int_equal(g.cols, 1);
}

/* The warp groups of a k-major CTA (trl_kmajor_group_*): 8 / per groups of
 * per warps, a power of two; their ranges tile the CTA's n-tiles in order,
 * none longer than ceil(count / groups) (the kernel's rounds), each what
 * a division would give. */
static void test_kmajor_groups(void **state) {
  (void)state;
  for (int64_t kslices = 1; kslices <= 20; kslices++) {
    const int per = trl_kmajor_group_warps(kslices);
    assert_int_equal(per, kslices < 8 ? kslices : 8);
    const int lg = trl_kmajor_group_log2(per), groups = 1 << lg;
    assert_int_equal(groups, TRL_DIRECT_WARPS / per);
    assert_true(groups * per <= TRL_DIRECT_WARPS);
    for (int64_t count = 0; count <= 300; count++) {
      int64_t at = 0;
      for (int i = 0; i < groups; i++) {
        assert_int_equal(trl_kmajor_group_first(count, i, lg), at);
        assert_int_equal(trl_kmajor_group_first(count, i, lg),
                         count * i / groups);
        const int64_t t = trl_kmajor_group_tiles(count, i, lg);
        assert_true(t >= 0 && t <= (count + groups - 1) / groups);
        at += t;
      }
      assert_int_equal(at, count);
    }
  }
}

/* The path for m: fused through the gate, then the crossover and the
 * flags; a half rate like an integer one (the generic kernels take it). */
static void test_path_for(void **state) {
  (void)state;
  trl_path_plan p = open_plan();
  trl_gate_reason why = TRL_GATE_FORCED;
  assert_int_equal(trl_path_for(&p, 1, &why), TRELLIS_PATH_FUSED);
  assert_int_equal(why, TRL_GATE_OPEN);
  assert_int_equal(trl_path_for(&p, 129, &why), TRELLIS_PATH_GENERIC);
  assert_int_equal(why, TRL_GATE_M_TOO_LARGE);
  assert_int_equal(trl_path_for(&p, 256, NULL), TRELLIS_PATH_GENERIC);
  assert_int_equal(trl_path_for(&p, 257, NULL), TRELLIS_PATH_DENSE);
  p.flags = TRELLIS_PLAN_FORCE_DECODE;
  assert_int_equal(trl_path_for(&p, 4096, NULL), TRELLIS_PATH_GENERIC);
  p.flags = TRELLIS_PLAN_FORCE_DENSE;
  assert_int_equal(trl_path_for(&p, 1, NULL), TRELLIS_PATH_FUSED);
  p.flags |= TRELLIS_PLAN_FORCE_GENERIC;
  assert_int_equal(trl_path_for(&p, 1, &why), TRELLIS_PATH_DENSE);
  assert_int_equal(why, TRL_GATE_FORCED);
  p = open_plan(), p.split_k = 2;
  assert_int_equal(trl_path_for(&p, 1, &why), TRELLIS_PATH_GENERIC);
  assert_int_equal(why, TRL_GATE_FORCED);
  /* a half rate: the generic path (the register-direct kernel or the
   * split-K decode-GEMM) up to the crossover, then dense */
  p = open_plan(), p.bits = 2, p.half = 1, p.codebook = TRELLIS_CB_MUL1;
  assert_int_equal(trl_path_for(&p, 1, &why), TRELLIS_PATH_GENERIC);
  assert_int_equal(why, TRL_GATE_BITS);
  assert_int_equal(trl_path_for(&p, 256, NULL), TRELLIS_PATH_GENERIC);
  assert_int_equal(trl_path_for(&p, 257, NULL), TRELLIS_PATH_DENSE);
  p.compute_dtype = TRELLIS_BF16;
  assert_int_equal(trl_path_for(&p, 17, NULL), TRELLIS_PATH_GENERIC);
  p = open_plan(), p.bits = 4;
  assert_int_equal(trl_path_for(&p, 1, NULL), TRELLIS_PATH_GENERIC);
}

/* The register-direct kernel's eligibility: each condition alone. */
static void test_path_direct_eligible(void **state) {
  (void)state;
  trl_path_plan p = open_plan();
  assert_true(trl_path_direct_eligible(&p));
  p.codebook = TRELLIS_CB_MUL1;
  assert_true(trl_path_direct_eligible(&p));
  p = open_plan(), p.fused_image = 0;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.compute_dtype = TRELLIS_BF16;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.has_h128 = 1;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.split_k = 1;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.flags = TRELLIS_PLAN_LEGACY_KERNELS;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.flags = TRELLIS_PLAN_EXACT_WEIGHTS;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.flags = TRELLIS_PLAN_FORCE_GENERIC;
  assert_true(trl_path_direct_eligible(&p));
  p = open_plan(), p.codebook = TRELLIS_CB_SQG_E4M3, p.bits = 4;
  assert_false(trl_path_direct_eligible(&p));
  p = open_plan(), p.paired = 1;
  assert_false(trl_path_direct_eligible(&p));
}

/* The dense path's folds by dtypes, bias, rotations and half rates. */
static void test_path_dense_folds(void **state) {
  (void)state;
  trl_path_plan p = open_plan();
  assert_true(trl_path_dense_direct(&p));
  assert_true(trl_path_dense_fold_input(&p));
  p.output_dtype = TRELLIS_F32;
  assert_true(trl_path_dense_direct(&p));
  p.has_bias = 1; /* an fp16 bias: fp16 output and compute only */
  assert_false(trl_path_dense_direct(&p));
  p.output_dtype = TRELLIS_F16;
  assert_true(trl_path_dense_direct(&p));
  p = open_plan(), p.output_dtype = TRELLIS_BF16;
  assert_false(trl_path_dense_direct(&p));
  p = open_plan(), p.input_dtype = TRELLIS_F32;
  assert_false(trl_path_dense_fold_input(&p));
  p = open_plan(), p.has_h128 = 1;
  assert_false(trl_path_dense_direct(&p));
  assert_false(trl_path_dense_fold_input(&p));
  p = open_plan(), p.half = 1;
  assert_false(trl_path_dense_direct(&p));
  assert_false(trl_path_dense_fold_input(&p));
}

/* The dense buckets: the first, then powers of two; the bucket of m is the
 * first that holds it. */
static void test_dense_buckets(void **state) {
  (void)state;
  assert_int_equal(trl_layout_dense_bucket_m(257, 0), 257);
  assert_int_equal(trl_layout_dense_bucket_m(257, 1), 512);
  assert_int_equal(trl_layout_dense_bucket_m(257, 2), 1024);
  assert_int_equal(trl_layout_dense_bucket_m(192, 1), 256);
  assert_int_equal(trl_layout_dense_bucket_m(1, 1), 2);
  assert_int_equal(trl_layout_dense_bucket_m(1, 3), 8);
  assert_int_equal(trl_layout_dense_bucket(257, 257), 0);
  assert_int_equal(trl_layout_dense_bucket(257, 258), 1);
  assert_int_equal(trl_layout_dense_bucket(257, 512), 1);
  assert_int_equal(trl_layout_dense_bucket(257, 513), 2);
  assert_int_equal(trl_layout_dense_bucket(1, 1), 0);
  assert_int_equal(trl_layout_dense_bucket(1, 3), 2);
  /* past the most buckets a plan keeps */
  assert_int_equal(trl_layout_dense_bucket(1, (int64_t)1 << 40),
                   TRL_DENSE_BUCKETS);
  /* the first bucket: 1 where every m may be dense, the crossover, none */
  trl_path_plan p;
  memset(&p, 0, sizeof p);
  p.k = 4096;
  p.cc_major = 9;
  assert_int_equal(trl_path_dense_first_bucket(&p), 257);
  p.flags = TRELLIS_PLAN_FORCE_DENSE;
  assert_int_equal(trl_path_dense_first_bucket(&p), 1);
  p.flags = TRELLIS_PLAN_FORCE_DECODE;
  assert_int_equal(trl_path_dense_first_bucket(&p), 0);
  p.half = 1; /* a half rate like an integer one */
  assert_int_equal(trl_path_dense_first_bucket(&p), 0);
  p.flags = 0;
  assert_int_equal(trl_path_dense_first_bucket(&p), 257);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gate_open),
      cmocka_unit_test(test_gate_each_condition),
      cmocka_unit_test(test_gate_b12x_formats),
      cmocka_unit_test(test_path_dense_crossover),
      cmocka_unit_test(test_path_for),
      cmocka_unit_test(test_path_direct_eligible),
      cmocka_unit_test(test_path_dense_folds),
      cmocka_unit_test(test_dense_buckets),
      cmocka_unit_test(test_layout_fused_needs_no_workspace),
      cmocka_unit_test(test_layout_direct),
      cmocka_unit_test(test_direct_variants),
      cmocka_unit_test(test_direct_shape),
      cmocka_unit_test(test_direct_splits),
      cmocka_unit_test(test_direct_park),
      cmocka_unit_test(test_direct_sum_buffers),
      cmocka_unit_test(test_fused_local_rotation),
      cmocka_unit_test(test_fused_rotation_ahead),
      cmocka_unit_test(test_fused_rotation_form),
      cmocka_unit_test(test_fused_dependent_launch),
      cmocka_unit_test(test_layout_generic),
      cmocka_unit_test(test_path_kmajor),
      cmocka_unit_test(test_kmajor_shape),
      cmocka_unit_test(test_kmajor_groups),
      cmocka_unit_test(test_layout_pair_k),
      cmocka_unit_test(test_layout_callback_and_dense),
  };
  return cmocka_run_group_tests_name("gate_layout", tests, NULL, NULL);
}
