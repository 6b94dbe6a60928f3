/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor-parallel shards (trellis_weight_shard): for every codebook and K,
 * both axes and 2, 3 and 4 ranks (even and uneven splits, explicit split
 * points), a shard decodes bit-exact to the slice of the full W_hat, the
 * column shards' outputs are the full output's columns bit for bit, and the
 * row shards' partials sum to the full output (§7.2's 2e-3 relative L2,
 * and 1e-5, what fp32 reassociation leaves); bias on rank 0 only; legacy
 * signs and pairs; the lane layout cuts alike; a shard and its forward
 * touch only the rank's pages of the payload (the others are made
 * inaccessible), also in a model's mapping; the split rule and bad
 * arguments. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS: payloads with inaccessible pages */
#include "testutil.h"

#include "tools/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define M 3 /* rows of x */

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  return p;
}

static trellis_shard_desc make_desc(trellis_split split, int ranks, int rank,
                                    const int64_t *points) {
  trellis_shard_desc d;
  trellis_shard_desc_init(&d);
  d.split = split;
  d.ranks = ranks;
  d.rank = rank;
  d.points = points;
  return d;
}

/* The shard of `d`, its copied payload (if any) in *memory (free it). */
static void take_shard(const trellis_weight *w, const trellis_shard_desc *d,
                       trellis_weight *out, void **memory) {
  size_t bytes = 1;
  tu_assert_status(trellis_weight_shard_bytes(w, d, &bytes), TRELLIS_OK);
  *memory = NULL;
  if (bytes > 0) {
    *memory = aligned_alloc(16, (bytes + 15) / 16 * 16);
    assert_non_null(*memory);
  }
  trellis_weight_init(out);
  tu_assert_status(trellis_weight_shard(w, d, *memory, bytes, out), TRELLIS_OK);
  tu_assert_status(trellis_weight_validate(out), TRELLIS_OK);
}

static uint16_t *decode(const trellis_weight *w) {
  uint16_t *w_hat = checked_malloc((size_t)w->k * (size_t)w->n * 2);
  tu_assert_status(trellis_decode_weight(w, w_hat), TRELLIS_OK);
  return w_hat;
}

/* fp32 y of fp16 x [M][w->k] (the CPU forward, two threads). */
static float *forward(const trellis_weight *w, const uint16_t *x) {
  return tu_cpu_forward_f32(w, x, M, TRELLIS_F16, TRELLIS_F32, 2);
}

/* The layer and what every split of it is checked against. */
typedef struct full_ref {
  const trellis_weight *w;
  uint16_t *w_hat; /* [k][n] */
  uint16_t *x;     /* fp16 [M][k] */
  float *y;        /* [M][n] */
} full_ref;

static void ref_open(const trellis_weight *w, uint64_t seed, full_ref *r) {
  synth_rng rng;
  synth_seed(&rng, seed);
  r->w = w;
  r->w_hat = decode(w);
  r->x = checked_malloc((size_t)M * (size_t)w->k * 2);
  synth_fill_uniform(&rng, r->x, TRELLIS_F16, (size_t)M * (size_t)w->k, -1.0f,
                     1.0f);
  r->y = forward(w, r->x);
}

static void ref_close(full_ref *r) {
  free(r->w_hat);
  free(r->x);
  free(r->y);
}

/* The worst relative L2 of a row split's summed partials, over the run. */
static double worst_row_sum = 0.0;

/* Every rank of one split of r->w: decode, forward, bias, and the
 * reassembled output. */
static void check_split(const full_ref *r, trellis_split split, int ranks,
                        const int64_t *points, const char *label) {
  const trellis_weight *w = r->w;
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  double *sum = calloc((size_t)M * n, sizeof *sum);
  assert_non_null(sum);
  int64_t expect_begin = 0;
  for (int rank = 0; rank < ranks; rank++) {
    const trellis_shard_desc d = make_desc(split, ranks, rank, points);
    int64_t b, e;
    tu_assert_status(
        trellis_shard_range(split == TRELLIS_SPLIT_K ? w->k : w->n, &d, &b, &e),
        TRELLIS_OK);
    assert_int_equal(b, expect_begin); /* the ranks tile the axis */
    expect_begin = e;
    trellis_weight s;
    void *memory;
    take_shard(w, &d, &s, &memory);
    const size_t width = (size_t)(e - b);
    uint16_t *w_hat = decode(&s);
    if (split == TRELLIS_SPLIT_N) {
      assert_int_equal(s.k, w->k);
      assert_int_equal(s.n, e - b);
      for (size_t row = 0; row < k; row++)
        if (memcmp(w_hat + row * width, r->w_hat + row * n + (size_t)b,
                   width * 2) != 0)
          fail_msg("%s: rank %d of %d (n %lld..%lld): W_hat row %zu differs "
                   "from the full decode's",
                   label, rank, ranks, (long long)b, (long long)e, row);
      assert_true(s.bias == (w->bias ? w->bias + b : NULL));
      float *y = forward(&s, r->x);
      for (size_t row = 0; row < M; row++)
        if (memcmp(y + row * width, r->y + row * n + (size_t)b, width * 4) != 0)
          fail_msg("%s: rank %d of %d: y row %zu is not the full output's "
                   "columns %lld..%lld bit for bit",
                   label, rank, ranks, row, (long long)b, (long long)e);
      free(y);
    } else {
      assert_int_equal(s.k, e - b);
      assert_int_equal(s.n, w->n);
      if (memcmp(w_hat, r->w_hat + (size_t)b * n, width * n * 2) != 0)
        fail_msg("%s: rank %d of %d (k %lld..%lld): W_hat differs from the "
                 "full decode's rows",
                 label, rank, ranks, (long long)b, (long long)e);
      assert_true(s.bias == (rank == 0 ? w->bias : NULL));
      /* a row split needs no memory: the shard is a view */
      assert_null(memory);
      uint16_t *x = checked_malloc((size_t)M * width * 2);
      for (size_t row = 0; row < M; row++)
        memcpy(x + row * width, r->x + row * k + (size_t)b, width * 2);
      float *y = forward(&s, x);
      for (size_t i = 0; i < (size_t)M * n; i++)
        sum[i] += y[i];
      free(y);
      free(x);
    }
    free(w_hat);
    free(memory);
  }
  assert_int_equal(expect_begin, split == TRELLIS_SPLIT_K ? w->k : w->n);
  if (split == TRELLIS_SPLIT_K) {
    float *total = checked_malloc((size_t)M * n * sizeof *total);
    for (size_t i = 0; i < (size_t)M * n; i++)
      total[i] = (float)sum[i];
    char what[64];
    snprintf(what, sizeof what, "row partials of %d ranks", ranks);
    tu_assert_close(label, what, total, r->y, (size_t)M * n, 2e-3);
    const double rel = tu_rel_l2(total, r->y, (size_t)M * n);
    worst_row_sum = rel > worst_row_sum ? rel : worst_row_sum;
    if (rel > 1e-5)
      fail_msg("%s: %s sum to %.3g (relative L2) from the full output; "
               "fp32 reassociation leaves less than 1e-5",
               label, what, rel);
    free(total);
  }
  free(sum);
}

/* Both axes at 2, 3 and 4 ranks (the splits the axes allow). */
static void check_every_split(const trellis_weight *w, uint64_t seed,
                              const char *label) {
  full_ref r;
  ref_open(w, seed, &r);
  for (int split = 0; split < 2; split++)
    for (int ranks = 2; ranks <= 4; ranks++) {
      const int64_t length = split == TRELLIS_SPLIT_K ? w->k : w->n;
      if (length / TRELLIS_HBLOCK >= ranks)
        check_split(&r, (trellis_split)split, ranks, NULL, label);
    }
  ref_close(&r);
}

/* ---------------------------------------------------------------- tests -- */

/* k = 640 and n = 768: 5 and 6 blocks, so the splits are uneven at 2, 3 or 4
 * ranks on one axis or both. */
static void test_every_codebook_and_k(void **state) {
  (void)state;
  const trellis_codebook cbs[] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                  TRELLIS_CB_MUL1, TRELLIS_CB_SQG_E4M3,
                                  TRELLIS_CB_SQG_FP16};
  int cases = 0;
  for (size_t c = 0; c < sizeof cbs / sizeof cbs[0]; c++)
    for (int bits = TRELLIS_MIN_BITS; bits <= TRELLIS_MAX_BITS; bits++) {
      if (!trellis_codebook_bits_valid(cbs[c], bits))
        continue;
      synth_layer l;
      tu_assert_status(synth_layer_init(&l, 640, 768, bits, cbs[c], SYNTH_BIAS,
                                        0x5A4Du + 16u * c + (unsigned)bits),
                       TRELLIS_OK);
      char label[64];
      snprintf(label, sizeof label, "%s K%d", trellis_codebook_name(cbs[c]),
               bits);
      check_every_split(&l.w, 77u + (unsigned)bits, label);
      synth_layer_free(&l);
      cases++;
    }
  assert_int_equal(cases, 3 * 8 + 5 + 2);
  printf("row partials: worst relative L2 %.3g from the full output\n",
         worst_row_sum);
}

static void test_legacy_signs(void **state) {
  (void)state;
  const trellis_codebook cbs[] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                  TRELLIS_CB_MUL1};
  for (size_t c = 0; c < 3; c++) {
    synth_layer l;
    tu_assert_status(synth_layer_init(&l, 640, 768, 3 + (int)c, cbs[c],
                                      SYNTH_BIAS | SYNTH_LEGACY_SIGNS,
                                      0x1E6Au + c),
                     TRELLIS_OK);
    /* the signs are views too, one word per 16 features */
    const trellis_shard_desc dk = make_desc(TRELLIS_SPLIT_K, 3, 1, NULL);
    const trellis_shard_desc dn = make_desc(TRELLIS_SPLIT_N, 3, 2, NULL);
    trellis_weight s;
    void *memory;
    take_shard(&l.w, &dk, &s, &memory);
    assert_ptr_equal(s.su, l.w.su + 256 / 16);
    assert_ptr_equal(s.sv, l.w.sv);
    assert_null(s.suh);
    free(memory);
    take_shard(&l.w, &dn, &s, &memory);
    assert_ptr_equal(s.su, l.w.su);
    assert_ptr_equal(s.sv, l.w.sv + 512 / 16);
    free(memory);
    char label[64];
    snprintf(label, sizeof label, "%s K%d legacy signs",
             trellis_codebook_name(cbs[c]), 3 + (int)c);
    check_every_split(&l.w, 91u + c, label);
    synth_layer_free(&l);
  }
}

/* The even rule: floor(B / N) blocks each, one more to the first B mod N. */
static void test_even_rule(void **state) {
  (void)state;
  static const struct {
    int64_t length;
    int ranks;
    int64_t blocks[4];
  } cases[] = {
      {640, 2, {3, 2}},       {640, 3, {2, 2, 1}},    {640, 4, {2, 1, 1, 1}},
      {768, 4, {2, 2, 1, 1}}, {512, 4, {1, 1, 1, 1}}, {8192, 3, {22, 21, 21}},
      {128, 1, {1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t at = 0;
    for (int r = 0; r < cases[i].ranks; r++) {
      const trellis_shard_desc d =
          make_desc(TRELLIS_SPLIT_N, cases[i].ranks, r, NULL);
      int64_t b, e;
      tu_assert_status(trellis_shard_range(cases[i].length, &d, &b, &e),
                       TRELLIS_OK);
      assert_int_equal(b, at);
      assert_int_equal(e - b, 128 * cases[i].blocks[r]);
      at = e;
    }
    assert_int_equal(at, cases[i].length);
  }
}

static void test_explicit_points(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 640, 768, 4, TRELLIS_CB_MCG, SYNTH_BIAS, 0x901u),
      TRELLIS_OK);
  full_ref r;
  ref_open(&l.w, 5, &r);
  const int64_t k_points[] = {128, 512};      /* 1, 3, 1 blocks */
  const int64_t n_points[] = {384, 512, 640}; /* 3, 1, 1, 1 blocks */
  check_split(&r, TRELLIS_SPLIT_K, 3, k_points, "MCG K4, k at 128, 512");
  check_split(&r, TRELLIS_SPLIT_N, 4, n_points, "MCG K4, n at 384, 512, 640");
  const trellis_shard_desc d = make_desc(TRELLIS_SPLIT_K, 3, 1, k_points);
  int64_t b, e;
  tu_assert_status(trellis_shard_range(640, &d, &b, &e), TRELLIS_OK);
  assert_int_equal(b, 128);
  assert_int_equal(e, 512);
  ref_close(&r);

  /* bad points, named by index, for every rank alike */
  const int64_t unaligned[] = {128, 500}, backwards[] = {384, 256},
                edge[] = {0, 256}, past[] = {256, 640};
  const int64_t *bad[] = {unaligned, backwards, edge, past};
  for (size_t i = 0; i < 4; i++)
    for (int rank = 0; rank < 3; rank++) {
      const trellis_shard_desc db = make_desc(TRELLIS_SPLIT_K, 3, rank, bad[i]);
      tu_assert_status(trellis_shard_range(640, &db, &b, &e),
                       TRELLIS_ERR_SHAPE);
      tu_assert_error_has("shard desc.points[");
      size_t bytes;
      tu_assert_status(trellis_weight_shard_bytes(&l.w, &db, &bytes),
                       TRELLIS_ERR_SHAPE);
      tu_assert_error_has("640 x 768 layer along k");
    }
  synth_layer_free(&l);
}

/* A random pair: the words of a uniform layer at the larger K hold both
 * records. */
static void make_pair(synth_layer *l, trellis_pair_kind kind,
                      trellis_rate_axis axis, int64_t orth, trellis_codebook cb,
                      uint64_t seed) {
  const int k0 = ((unsigned)kind >> 4) & 15u, k1 = (unsigned)kind & 15u;
  const int64_t k = axis == TRELLIS_RATE_AXIS_K ? 256 : orth;
  const int64_t n = axis == TRELLIS_RATE_AXIS_N ? 256 : orth;
  tu_assert_status(synth_layer_init(l, k, n, k0 > k1 ? k0 : k1, TRELLIS_CB_MCG,
                                    SYNTH_BIAS, seed),
                   TRELLIS_OK);
  l->w.codebook = cb;
  l->w.bits = k0;
  l->w.pair = kind;
  l->w.rate_axis = axis;
  l->w.bits1 = k1;
  l->w.trellis1 = l->trellis + orth / 16 * 8 * 16 * k0;
  tu_assert_status(trellis_weight_validate(&l->w), TRELLIS_OK);
}

static void test_pairs(void **state) {
  (void)state;
  const trellis_codebook cbs[] = {TRELLIS_CB_MCG, TRELLIS_CB_SQG_E4M3};
  const trellis_pair_kind kinds[] = {TRELLIS_PAIR_P24, TRELLIS_PAIR_P33,
                                     TRELLIS_PAIR_P43};
  for (size_t c = 0; c < 2; c++)
    for (size_t i = 0; i < 3; i++)
      for (int axis = 0; axis < 2; axis++) {
        synth_layer l;
        make_pair(&l, kinds[i], (trellis_rate_axis)axis, 640, cbs[c],
                  0xFA17u + 8u * i + (unsigned)axis);
        char label[64];
        snprintf(label, sizeof label, "%s %s/%s", trellis_codebook_name(cbs[c]),
                 trellis_pair_kind_name(kinds[i]),
                 trellis_rate_axis_name((trellis_rate_axis)axis));
        /* the orthogonal axis at 2..4 ranks, the rate axis at 2 */
        check_every_split(&l.w, 33u + i, label);

        /* on its rate axis a rank holds one record, a uniform view */
        const trellis_split rate =
            axis == TRELLIS_RATE_AXIS_N ? TRELLIS_SPLIT_N : TRELLIS_SPLIT_K;
        for (int rank = 0; rank < 2; rank++) {
          const trellis_shard_desc d = make_desc(rate, 2, rank, NULL);
          trellis_weight s;
          void *memory;
          take_shard(&l.w, &d, &s, &memory);
          assert_null(memory);
          assert_int_equal(s.pair, TRELLIS_PAIR_NONE);
          assert_int_equal(s.bits, rank == 0 ? l.w.bits : l.w.bits1);
          assert_ptr_equal(s.trellis, rank == 0 ? l.w.trellis : l.w.trellis1);
          assert_null(s.trellis1);
          /* a uniform shard fits a weight of the first version */
          trellis_weight v1;
          trellis_weight_init(&v1);
          v1.struct_size = TRELLIS_WEIGHT_SIZE_V1;
          tu_assert_status(trellis_weight_shard(&l.w, &d, NULL, 0, &v1),
                           TRELLIS_OK);
          assert_int_equal(v1.struct_size, TRELLIS_WEIGHT_SIZE_V1);
          assert_ptr_equal(v1.trellis, s.trellis);
        }
        const trellis_shard_desc three = make_desc(rate, 3, 0, NULL);
        size_t bytes;
        tu_assert_status(trellis_weight_shard_bytes(&l.w, &three, &bytes),
                         TRELLIS_ERR_SHAPE);
        tu_assert_error_has("fewer than the 3 ranks");

        /* on the other axis it stays a pair, which a V1 weight cannot
         * hold */
        const trellis_split orth =
            rate == TRELLIS_SPLIT_N ? TRELLIS_SPLIT_K : TRELLIS_SPLIT_N;
        const trellis_shard_desc d = make_desc(orth, 2, 1, NULL);
        trellis_weight s;
        void *memory;
        take_shard(&l.w, &d, &s, &memory);
        assert_int_equal(s.pair, l.w.pair);
        assert_int_equal(s.rate_axis, l.w.rate_axis);
        assert_int_equal(trellis_weight_payload_bytes(&s),
                         trellis_weight_payload_bytes(&l.w) * 2 / 5);
        trellis_weight v1;
        trellis_weight_init(&v1);
        v1.struct_size = TRELLIS_WEIGHT_SIZE_V1;
        tu_assert_status(trellis_weight_shard_bytes(&l.w, &d, &bytes),
                         TRELLIS_OK);
        tu_assert_status(trellis_weight_shard(&l.w, &d, memory, bytes, &v1),
                         TRELLIS_ERR_INVALID_ARGUMENT);
        tu_assert_error_has("cannot hold");
        free(memory);
        synth_layer_free(&l);
      }
}

/* Views and copies: where the shard's pointers go and what memory it
 * needs. */
static void test_views_and_copies(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 512, 768, 5, TRELLIS_CB_MUL1, SYNTH_BIAS, 0xB1A5u),
      TRELLIS_OK);
  const size_t row_words = 768 / 16 * 16 * 5; /* one tile row */
  const trellis_shard_desc dk = make_desc(TRELLIS_SPLIT_K, 4, 2, NULL);
  size_t bytes = 1;
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &dk, &bytes), TRELLIS_OK);
  assert_int_equal(bytes, 0);
  trellis_weight s;
  trellis_weight_init(&s);
  tu_assert_status(trellis_weight_shard(&l.w, &dk, NULL, 0, &s), TRELLIS_OK);
  assert_ptr_equal(s.trellis, l.w.trellis + 256 / 16 * row_words);
  assert_ptr_equal(s.suh, l.w.suh + 256);
  assert_ptr_equal(s.svh, l.w.svh);
  assert_null(s.bias);

  const trellis_shard_desc dn = make_desc(TRELLIS_SPLIT_N, 3, 1, NULL);
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &dn, &bytes), TRELLIS_OK);
  assert_int_equal(bytes, (size_t)512 * 256 * 5 / 8); /* the shard's payload */
  void *memory = aligned_alloc(16, bytes);
  assert_non_null(memory);
  trellis_weight_init(&s);
  tu_assert_status(trellis_weight_shard(&l.w, &dn, memory, bytes, &s),
                   TRELLIS_OK);
  assert_ptr_equal(s.trellis, memory);
  assert_int_equal(trellis_weight_payload_bytes(&s), bytes);
  assert_ptr_equal(s.suh, l.w.suh);
  assert_ptr_equal(s.svh, l.w.svh + 256);
  assert_ptr_equal(s.bias, l.w.bias + 256);
  /* tile row 3 of the shard is row 3's tiles 16..31 */
  assert_memory_equal(s.trellis + 3 * (256 / 16 * 16 * 5),
                      l.w.trellis + 3 * row_words + 16 * 16 * 5,
                      256 / 16 * 16 * 5 * 2);

  /* one rank: the layer itself, a view */
  const trellis_shard_desc one = make_desc(TRELLIS_SPLIT_N, 1, 0, NULL);
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &one, &bytes), TRELLIS_OK);
  assert_int_equal(bytes, 0);
  tu_assert_status(trellis_weight_shard(&l.w, &one, NULL, 0, &s), TRELLIS_OK);
  assert_memory_equal(&s, &l.w, sizeof s);
  free(memory);
  synth_layer_free(&l);
}

/* The lane layout cuts alike: the shard of the repacked layer is the
 * repacked shard, byte for byte, and keeps the layout. */
static void test_lane_layout(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 640, 768, 5, TRELLIS_CB_MCG, SYNTH_BIAS, 0x1A5Eu),
      TRELLIS_OK);
  const size_t bytes = trellis_weight_payload_bytes(&l.w);
  int16_t *lanes = checked_malloc(bytes);
  tu_assert_status(trellis_weight_repack_host(&l.w, lanes, NULL), TRELLIS_OK);
  trellis_weight wl = l.w;
  wl.trellis = lanes;
  wl.layout = TRELLIS_LAYOUT_LANES;
  for (int split = 0; split < 2; split++)
    for (int ranks = 2; ranks <= 4; ranks++)
      for (int rank = 0; rank < ranks; rank++) {
        const trellis_shard_desc d =
            make_desc((trellis_split)split, ranks, rank, NULL);
        trellis_weight s, sl;
        void *ms, *msl;
        take_shard(&l.w, &d, &s, &ms);
        take_shard(&wl, &d, &sl, &msl);
        assert_int_equal(sl.layout, TRELLIS_LAYOUT_LANES);
        const size_t sb = trellis_weight_payload_bytes(&s);
        int16_t *want = checked_malloc(sb);
        tu_assert_status(trellis_weight_repack_host(&s, want, NULL),
                         TRELLIS_OK);
        if (memcmp(want, sl.trellis, sb) != 0)
          fail_msg("split %s, rank %d of %d: the lane layout's shard is not "
                   "the shard repacked",
                   trellis_split_name((trellis_split)split), rank, ranks);
        /* a weight without the layout field cannot hold it */
        trellis_weight v2;
        trellis_weight_init(&v2);
        v2.struct_size = TRELLIS_WEIGHT_SIZE_V2;
        size_t need;
        tu_assert_status(trellis_weight_shard_bytes(&wl, &d, &need),
                         TRELLIS_OK);
        tu_assert_status(trellis_weight_shard(&wl, &d, msl, need, &v2),
                         TRELLIS_ERR_INVALID_ARGUMENT);
        tu_assert_error_has("lane layout");
        free(want);
        free(ms);
        free(msl);
      }
  free(lanes);
  synth_layer_free(&l);
}

/* The k-major layout is not cut (a group spans 128 rows of k and its
 * columns interleave): both calls refuse it by name, and nothing is
 * written. */
static void test_kmajor_refused(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 1024, 256, 4, TRELLIS_CB_MCG, 0, 0x1A5Fu),
      TRELLIS_OK);
  const size_t bytes = trellis_weight_payload_bytes(&l.w);
  int16_t *km = checked_malloc(bytes);
  tu_assert_status(
      trellis_weight_repack_host_layout(&l.w, TRELLIS_LAYOUT_KMAJOR, km, NULL),
      TRELLIS_OK);
  trellis_weight wk = l.w;
  wk.trellis = km;
  wk.layout = TRELLIS_LAYOUT_KMAJOR;
  for (int split = 0; split < 2; split++) {
    const trellis_shard_desc d = make_desc((trellis_split)split, 2, 1, NULL);
    size_t need = 12345;
    tu_assert_status(trellis_weight_shard_bytes(&wk, &d, &need),
                     TRELLIS_ERR_LAYOUT);
    tu_assert_error_has("k-major");
    assert_int_equal(need, 12345);
    static uint8_t memory[4096];
    memset(memory, 0xA5, sizeof memory);
    trellis_weight out;
    trellis_weight_init(&out);
    tu_assert_status(trellis_weight_shard(&wk, &d, memory, sizeof memory, &out),
                     TRELLIS_ERR_LAYOUT);
    for (size_t i = 0; i < sizeof memory; i++)
      assert_int_equal(memory[i], 0xA5);
  }
  free(km);
  synth_layer_free(&l);
}

/* ------------------------------------------------------ rank's pages -- */

/* Makes every page of [base, base + size) that holds none of the rank's
 * payload bytes inaccessible (prot PROT_NONE), or restores it. The rank's
 * bytes: tile rows [kt0, kt1) and columns tiles [nt0, nt1) of a layer of
 * `tiles_n` tile columns and `tile` bytes per tile. Returns the pages
 * protected. */
static size_t protect_others(const uint8_t *payload, size_t size,
                             int64_t tiles_n, size_t tile, int64_t kt0,
                             int64_t kt1, int64_t nt0, int64_t nt1, int prot) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  const uintptr_t start = ((uintptr_t)payload + page - 1) / page * page;
  const uintptr_t stop = ((uintptr_t)payload + size) / page * page;
  size_t count = 0;
  for (uintptr_t p = start; p < stop; p += page) {
    int used = 0;
    for (int64_t kt = kt0; kt < kt1 && !used; kt++) {
      const uintptr_t a = (uintptr_t)payload +
                          ((size_t)kt * (size_t)tiles_n + (size_t)nt0) * tile;
      const uintptr_t b = a + (size_t)(nt1 - nt0) * tile;
      used = a < p + page && b > p;
    }
    if (!used) {
      assert_int_equal(mprotect((void *)p, page, prot), 0);
      count++;
    }
  }
  return count;
}

/* A shard of a layer whose other ranks' pages are inaccessible: its copy,
 * its decode and its forward read nothing else (a stray read would fault).
 * `layer` is the layer, read before its pages were protected. */
static void check_rank_pages(const trellis_weight *layer, trellis_split split,
                             int ranks, int rank, int restore,
                             const char *label) {
  const trellis_shard_desc d = make_desc(split, ranks, rank, NULL);
  full_ref r;
  ref_open(layer, 9, &r);
  int64_t b, e;
  tu_assert_status(
      trellis_shard_range(split == TRELLIS_SPLIT_K ? layer->k : layer->n, &d,
                          &b, &e),
      TRELLIS_OK);
  const int64_t tiles_n = layer->n / 16;
  const size_t tile = 32u * (size_t)layer->bits;
  const size_t size = trellis_weight_payload_bytes(layer);
  const int along_k = split == TRELLIS_SPLIT_K;
  const int64_t kt0 = along_k ? b / 16 : 0,
                kt1 = along_k ? e / 16 : layer->k / 16;
  const int64_t nt0 = along_k ? 0 : b / 16, nt1 = along_k ? tiles_n : e / 16;
  const uint8_t *payload = (const uint8_t *)layer->trellis;
  const size_t hidden = protect_others(payload, size, tiles_n, tile, kt0, kt1,
                                       nt0, nt1, PROT_NONE);
  /* most of the payload is someone else's */
  assert_true(hidden * (size_t)sysconf(_SC_PAGESIZE) >= size / 2);

  trellis_weight s;
  void *memory;
  take_shard(layer, &d, &s, &memory);
  uint16_t *w_hat = decode(&s);
  uint16_t *x = r.x;
  uint16_t *x_rank = NULL;
  if (along_k) {
    const size_t width = (size_t)(e - b), k = (size_t)layer->k;
    x = x_rank = checked_malloc((size_t)M * width * 2);
    for (size_t row = 0; row < M; row++)
      memcpy(x_rank + row * width, r.x + row * k + (size_t)b, width * 2);
  }
  float *y = forward(&s, x);
  protect_others(payload, size, tiles_n, tile, kt0, kt1, nt0, nt1, restore);
  assert_true(tu_all_finite(y, (size_t)M * (size_t)s.n));
  /* and it is the right data */
  const size_t n = (size_t)layer->n;
  for (size_t row = 0; row < (size_t)s.k; row++)
    if (memcmp(w_hat + row * (size_t)s.n,
               r.w_hat + (row + (size_t)(along_k ? b : 0)) * n +
                   (size_t)(along_k ? 0 : b),
               (size_t)s.n * 2) != 0)
      fail_msg("%s: W_hat row %zu differs", label, row);
  free(y);
  free(x_rank);
  free(w_hat);
  free(memory);
  ref_close(&r);
}

/* k = 256, n = 4096, K8: a tile row is 64 KiB, so a column rank's runs are
 * 16 KiB with 48 KiB of other ranks' pages between them. */
static void test_rank_pages_only(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 256, 4096, 8, TRELLIS_CB_MCG, SYNTH_BIAS, 0xFA6Eu),
      TRELLIS_OK);
  const size_t size = trellis_weight_payload_bytes(&l.w);
  void *map = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(map != MAP_FAILED);
  memcpy(map, l.w.trellis, size);
  trellis_weight w = l.w;
  w.trellis = map;
  const int rw = PROT_READ | PROT_WRITE;
  check_rank_pages(&w, TRELLIS_SPLIT_N, 4, 2, rw, "column rank 2 of 4");
  check_rank_pages(&w, TRELLIS_SPLIT_N, 3, 0, rw, "column rank 0 of 3");
  check_rank_pages(&w, TRELLIS_SPLIT_K, 2, 1, rw, "row rank 1 of 2");
  munmap(map, size);
  synth_layer_free(&l);
}

/* The same inside a model's mapping: trellis_model_find_layer hands out
 * pointers into the mapped file and reads no payload, so a rank's shard
 * touches only its own pages of the file. */
static void test_rank_pages_of_a_model(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(
      synth_layer_init(&l, 512, 4096, 8, TRELLIS_CB_MCG, 0, 0x0DE1u),
      TRELLIS_OK);
  const uint32_t marker = 0xCBAC1FEDu;
  const tu_st_tensor t[] = {
      {"p.trellis",
       "I16",
       3,
       {32, 256, 128},
       l.trellis,
       trellis_weight_payload_bytes(&l.w)},
      {"p.suh", "F16", 1, {512}, l.suh, 512 * 2},
      {"p.svh", "F16", 1, {4096}, l.svh, 4096 * 2},
      {"p.mcg", "I32", 0, {0}, &marker, 4},
  };
  size_t size;
  uint8_t *image = tu_st_build(t, 4, &size);
  char *path = tu_tmp_path("shard-model.safetensors");
  tu_write_file(path, image, size);
  free(image);
  trellis_model *model = NULL;
  tu_assert_status(trellis_model_open(path, &model), TRELLIS_OK);
  trellis_layer layer;
  tu_assert_status(trellis_model_find_layer(model, "p", &layer), TRELLIS_OK);
  assert_memory_equal(layer.weight.trellis, l.trellis,
                      trellis_weight_payload_bytes(&l.w));
  /* the library maps its files read-only */
  check_rank_pages(&layer.weight, TRELLIS_SPLIT_N, 4, 1, PROT_READ,
                   "model column rank");
  check_rank_pages(&layer.weight, TRELLIS_SPLIT_K, 4, 3, PROT_READ,
                   "model row rank");
  trellis_model_close(model);
  free(path);
  synth_layer_free(&l);
}

/* --------------------------------------------------------- bad input -- */

static void test_bad_arguments(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(synth_layer_init(&l, 512, 512, 4, TRELLIS_CB_MCG, 0, 0xBADu),
                   TRELLIS_OK);
  int64_t b, e;
  size_t bytes;
  trellis_weight s;
  trellis_weight_init(&s);
  trellis_shard_desc d = make_desc(TRELLIS_SPLIT_N, 2, 0, NULL);

  tu_assert_status(trellis_shard_range(512, NULL, &b, &e),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("shard desc is NULL");
  tu_assert_status(trellis_shard_range(512, &d, NULL, &e),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_shard_range(500, &d, &b, &e), TRELLIS_ERR_SHAPE);
  tu_assert_error_has("positive multiple of 128, got 500");
  tu_assert_status(trellis_shard_range(0, &d, &b, &e), TRELLIS_ERR_SHAPE);

  trellis_shard_desc bad = d;
  bad.struct_size = 4;
  tu_assert_status(trellis_shard_range(512, &bad, &b, &e),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("struct_size 4");
  bad = d, bad.split = (trellis_split)2;
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &bad, &bytes),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("desc.split");
  bad = d, bad.ranks = 0;
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &bad, &bytes),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("desc.ranks: expected >= 1, got 0");
  bad = d, bad.rank = 2;
  tu_assert_status(trellis_weight_shard(&l.w, &bad, NULL, 0, &s),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("desc.rank: expected 0..1 (ranks = 2), got 2");
  bad = d, bad.rank = -1;
  tu_assert_status(trellis_weight_shard(&l.w, &bad, NULL, 0, &s),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  bad = d, bad.ranks = 5;
  tu_assert_status(trellis_weight_shard(&l.w, &bad, NULL, 0, &s),
                   TRELLIS_ERR_SHAPE);
  tu_assert_error_has("has 4 blocks of 128, fewer than the 5 ranks");

  tu_assert_status(trellis_weight_shard_bytes(&l.w, &d, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_weight_shard_bytes(NULL, &d, &bytes),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_weight broken = l.w;
  broken.k = 100;
  tu_assert_status(trellis_weight_shard_bytes(&broken, &d, &bytes),
                   TRELLIS_ERR_SHAPE);
  tu_assert_error_has("weight.k");
  tu_assert_status(trellis_weight_shard(&l.w, &d, NULL, 0, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);

  /* the column copy: no memory, too little, misaligned */
  tu_assert_status(trellis_weight_shard_bytes(&l.w, &d, &bytes), TRELLIS_OK);
  assert_int_equal(bytes, 512 * 256 * 4 / 8);
  tu_assert_status(trellis_weight_shard(&l.w, &d, NULL, 0, &s),
                   TRELLIS_ERR_BUFFER);
  tu_assert_error_has("copies 65536 payload bytes");
  uint8_t *memory = aligned_alloc(16, bytes + 16);
  assert_non_null(memory);
  tu_assert_status(trellis_weight_shard(&l.w, &d, memory, bytes - 1, &s),
                   TRELLIS_ERR_BUFFER);
  tu_assert_status(trellis_weight_shard(&l.w, &d, memory + 2, bytes, &s),
                   TRELLIS_ERR_BUFFER);
  tu_assert_error_has("16-byte aligned");
  /* an out weight without its struct_size */
  trellis_weight zero;
  memset(&zero, 0, sizeof zero);
  tu_assert_status(trellis_weight_shard(&l.w, &d, memory, bytes, &zero),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("out.struct_size 0");
  tu_assert_status(trellis_weight_shard(&l.w, &d, memory, bytes, &s),
                   TRELLIS_OK);

  assert_string_equal(trellis_split_name(TRELLIS_SPLIT_N), "n");
  assert_string_equal(trellis_split_name(TRELLIS_SPLIT_K), "k");
  assert_string_equal(trellis_split_name((trellis_split)7), "invalid");
  trellis_shard_desc_init(NULL);
  trellis_shard_desc init;
  memset(&init, 0x5A, sizeof init);
  trellis_shard_desc_init(&init);
  assert_int_equal(init.struct_size, sizeof init);
  assert_int_equal(init.split, TRELLIS_SPLIT_N);
  assert_int_equal(init.ranks, 1);
  assert_int_equal(init.rank, 0);
  assert_null(init.points);
  free(memory);
  synth_layer_free(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_codebook_and_k),
      cmocka_unit_test(test_legacy_signs),
      cmocka_unit_test(test_even_rule),
      cmocka_unit_test(test_explicit_points),
      cmocka_unit_test(test_pairs),
      cmocka_unit_test(test_views_and_copies),
      cmocka_unit_test(test_lane_layout),
      cmocka_unit_test(test_kmajor_refused),
      cmocka_unit_test(test_rank_pages_only),
      cmocka_unit_test(test_rank_pages_of_a_model),
      cmocka_unit_test(test_bad_arguments),
  };
  return TU_RUN_TESTS("shard", tests);
}
