/* The gate between the fused and generic paths, and the buffer layout:
 * pure functions, tested on the CPU. */
#include "testutil.h"

#include "plan/gate.h"
#include "plan/layout.h"

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
  for (int r = TRL_GATE_OPEN; r <= TRL_GATE_FORCED; ++r)
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

/* Where the persistent small-m kernel runs (plan with it available): every
 * fused m up to 8 (before prepare has sized the fused kernel's grid); the
 * generic path up to 2 rows, 4 on layers of at most 2^25 weights, 8 on
 * at most 2^23. It needs no workspace; the rotated buffer stays part of
 * the contract. Unavailable (LEGACY_KERNELS, bf16 compute, external
 * rotation, no sm_90 image): never. */
static void test_layout_stream(void **state) {
  (void)state;
  struct {
    int64_t k, n;
    trellis_path path;
    int64_t last; /* largest m it takes */
  } cases[] = {
      {8192, 28672, TRELLIS_PATH_FUSED, 8},
      {4096, 4096, TRELLIS_PATH_FUSED, 8},
      {8192, 4096, TRELLIS_PATH_FUSED, 8},
      {8192, 28672, TRELLIS_PATH_GENERIC, 2},
      {4096, 8192, TRELLIS_PATH_GENERIC, 4},
      {2048, 4096, TRELLIS_PATH_GENERIC, 8}, /* 2^23 weights */
      {512, 6144, TRELLIS_PATH_GENERIC, 8},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    trl_layout_params p = params(cases[i].k, cases[i].n);
    for (int on = 0; on <= 1; ++on) {
      p.stream = on;
      for (int64_t m = 1; m <= 128; ++m) {
        const int want = on && m <= cases[i].last;
        assert_int_equal(trl_layout_stream(&p, cases[i].path, m), want);
        trl_layout l;
        assert_true(trl_layout_compute(&p, cases[i].path, m, &l));
        assert_int_equal(l.rotated_bytes, (size_t)(m * cases[i].k * 2));
        if (want || cases[i].path == TRELLIS_PATH_FUSED)
          assert_int_equal(l.workspace_bytes, 0);
        else
          assert_true(l.workspace_bytes > 0);
      }
    }
    p.stream = 1;
    assert_false(trl_layout_stream(&p, TRELLIS_PATH_DENSE, 1));
  }
}

/* The fused path's m <= 8 rows on the cluster kernel instead of the
 * persistent one: from m = 4, on layers of at most 2^26 weights where its
 * grid is one wave of CTAs that run 8 or more k-blocks (cluster sizes and waves
 * as prepare picks them on the H200). */
static void test_fused_cluster_small_m(void **state) {
  (void)state;
  /* 14336x4096, 9-CTA clusters, one wave: 13 k-blocks per CTA */
  trl_layout_params p = params(14336, 4096);
  p.stream = 1;
  p.fused_cluster = 9;
  p.fused_waves = 1;
  for (int64_t m = 1; m <= 16; ++m)
    assert_int_equal(trl_layout_stream(&p, TRELLIS_PATH_FUSED, m), m <= 3);
  /* two waves (8192x28672, 3-CTA clusters) or 4 k-blocks per CTA
   * (4096x4096, 8-CTA clusters): the persistent kernel up to m = 8 */
  assert_true(trl_layout_fused_cluster_small_m(4, 14336, 4096, 9, 1));
  assert_false(trl_layout_fused_cluster_small_m(3, 14336, 4096, 9, 1));
  assert_false(trl_layout_fused_cluster_small_m(8, 8192, 28672, 3, 2));
  assert_false(trl_layout_fused_cluster_small_m(8, 4096, 4096, 8, 1));
  assert_true(trl_layout_fused_cluster_small_m(8, 8192, 8192, 5, 1));
  /* more than 2^26 weights (28672x8192, 5-CTA clusters, 45 k-blocks) */
  assert_false(trl_layout_fused_cluster_small_m(8, 28672, 8192, 5, 1));
  /* unknown before prepare */
  assert_false(trl_layout_fused_cluster_small_m(8, 14336, 4096, 0, 0));
  p.fused_cluster = 3;
  p.fused_waves = 2;
  assert_true(trl_layout_stream(&p, TRELLIS_PATH_FUSED, 8));
  assert_false(trl_layout_stream(&p, TRELLIS_PATH_FUSED, 9));
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gate_open),
      cmocka_unit_test(test_gate_each_condition),
      cmocka_unit_test(test_gate_b12x_formats),
      cmocka_unit_test(test_layout_fused_needs_no_workspace),
      cmocka_unit_test(test_layout_stream),
      cmocka_unit_test(test_fused_cluster_small_m),
      cmocka_unit_test(test_fused_local_rotation),
      cmocka_unit_test(test_fused_rotation_ahead),
      cmocka_unit_test(test_fused_rotation_form),
      cmocka_unit_test(test_fused_dependent_launch),
      cmocka_unit_test(test_layout_generic),
      cmocka_unit_test(test_layout_pair_k),
      cmocka_unit_test(test_layout_callback_and_dense),
  };
  return cmocka_run_group_tests_name("gate_layout", tests, NULL, NULL);
}
