/* SPDX-License-Identifier: Apache-2.0 */
/* The b12x formats (FORMAT.md §9) without files: the SQG tables and
 * their hashes, the graph, both SQG decoders (worked examples, full-table
 * hashes, statistics), known-answer tiles and pairs, the staircase
 * regenerated from the normal quantile, and the validation of
 * (codebook, K) and of malformed pairs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include <cmocka.h>

#include "format/codebook.h"
#include "format/pair.h"
#include "format/sqg.h"
#include "format/weight.h"
#include "core/sha256.h"
#include "testutil.h"
#include "trellis.h"

#define STATES 65536

static void expect_hash(const void *data, size_t len, const char *want) {
  char hex[65];
  trl_sha256_hex(data, len, hex);
  assert_string_equal(hex, want);
}

static void expect_hash_u16(const uint16_t *v, size_t count, const char *want) {
  char hex[65];
  tu_sha256_u16_hex(v, count, hex);
  assert_string_equal(hex, want);
}

/* ------------------------------------------------------------ tables -- */

static void test_table_hashes(void **state) {
  (void)state;
  assert_int_equal(trl_sqg_tables_status(), TRELLIS_OK);
  const uint8_t *t12 = trl_sqg_t12();
  assert_non_null(t12);
  expect_hash(
      t12, 4096,
      "cca11fe5744c9c93a34f4217f342fbc0f74ecc8a007c076582424a505fc9da5e");
  expect_hash(t12, 4096, TRL_SQG_T12_SHA256);
  const uint16_t *d3l = trl_sqg_d3l();
  assert_non_null(d3l);
  expect_hash_u16(d3l, 208,
                  "17cf4ca9ef1e3a07c3354c12f7ac887b4e081b1668bea61eb37d8f2b410"
                  "bb968");
  static const uint8_t first[16] = {0xCB, 0xCA, 0xCA, 0xC9, 0xC9, 0xC9,
                                    0xC9, 0xC9, 0xC9, 0xC8, 0xC8, 0xC8,
                                    0xC8, 0xC8, 0xC8, 0xC8};
  static const uint8_t last[16] = {0x48, 0x48, 0x48, 0x48, 0x48, 0x48,
                                   0x48, 0x49, 0x49, 0x49, 0x49, 0x49,
                                   0x49, 0x4A, 0x4A, 0x4B};
  assert_memory_equal(t12, first, 16);
  assert_memory_equal(t12 + 4080, last, 16);
  /* fp16 form: exact conversions; no -0, no NaN code, largest 5.5 */
  const uint16_t *t12h = trl_sqg_t12_f16();
  assert_non_null(t12h);
  for (int t = 0; t < 4096; t++) {
    assert_int_not_equal(t12[t], 0x80);
    assert_int_not_equal(t12[t] & 0x7F, 0x7F);
    assert_int_equal(t12h[t], trl_e4m3_to_f16(t12[t]));
    assert_true(fabsf(trellis_f16_to_f32(t12h[t])) <= 5.5f);
  }
  /* D3L spot checks against b12x's published table (FORMAT.md §9.4) */
  assert_int_equal(d3l[0], 0x467D);
  assert_int_equal(d3l[2 * 16 + 1], 0x2600);
  assert_int_equal(d3l[2 * 103], 0x004C);
  assert_int_equal(d3l[2 * 103 + 1], 0x03C3);
}

static void test_e4m3(void **state) {
  (void)state;
  static const struct {
    uint8_t code;
    float value;
  } ex[] = {{0x01, 1.0f / 512.0f}, {0x08, 1.0f / 64.0f}, {0x11, 0.03515625f},
            {0x38, 1.0f},          {0x48, 4.0f},         {0x4A, 5.0f},
            {0x4D, 6.5f},          {0xCD, -6.5f},        {0x00, 0.0f},
            {0x7E, 448.0f}};
  for (size_t i = 0; i < sizeof ex / sizeof *ex; i++)
    assert_true(trellis_f16_to_f32(trl_e4m3_to_f16(ex[i].code)) == ex[i].value);
}

/* ------------------------------------------------------------- graph -- */

typedef struct graph_example {
  int bits;
  uint32_t state, rank;
  uint16_t value;
} graph_example;

static const graph_example graph_examples[] = {
    /* §9.2, §9.3 (sqg_e4m3) */
    {2, 0x0000, 0xFD8E, 0x4300},
    {2, 0xFFFF, 0x3446, 0xBD00},
    {3, 0x1234, 0xC0C4, 0x3C00},
    {3, 0x8001, 0xCFE0, 0x3D80},
    {4, 0xBEEF, 0xD5D5, 0x3E00},
    /* §9.2, §9.4 (sqg_fp16) */
    {5, 0x0000, 0xCD8E, 0x3D1D},
    {5, 0xFFFF, 0x3465, 0xBCF3},
    {6, 0x1234, 0x9D16, 0x36EF},
    {6, 0xBEEF, 0x76C1, 0xB059},
};

static void test_graph_examples(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof graph_examples / sizeof *graph_examples; i++) {
    const graph_example *e = &graph_examples[i];
    const trellis_codebook cb =
        e->bits <= 4 ? TRELLIS_CB_SQG_E4M3 : TRELLIS_CB_SQG_FP16;
    assert_int_equal(trl_sqg_rank(e->state, e->bits), e->rank);
    assert_int_equal(trellis_codebook_value_bits(cb, e->bits, e->state),
                     e->value);
    assert_int_equal(trellis_codebook_table_bits(cb, e->bits)[e->state],
                     e->value);
  }
  /* T12 at the ranks above (§9.3) */
  assert_int_equal(trl_sqg_t12()[0xFD8], 0x46);
  assert_int_equal(trl_sqg_t12()[0x344], 0xBA);
  assert_int_equal(trl_sqg_t12()[0xC0C], 0x38);
  assert_int_equal(trl_sqg_t12()[0xCFE], 0x3B);
  assert_int_equal(trl_sqg_t12()[0xD5D], 0x3C);
}

static void test_graph_is_bijection(void **state) {
  (void)state;
  static uint8_t seen[STATES];
  for (int bits = 2; bits <= 6; bits++) {
    memset(seen, 0, sizeof seen);
    for (uint32_t s = 0; s < STATES; s++) {
      const uint32_t r = trl_sqg_rank(s, bits);
      assert_true(r < STATES);
      assert_int_equal(seen[r], 0);
      seen[r] = 1;
    }
  }
}

/* §9.4: descriptor index and offset of the worked examples. */
static void test_d3l_index(void **state) {
  (void)state;
  static const struct {
    uint32_t rank, idx, x, neg;
    uint16_t value;
  } ex[] = {{0x0000, 0, 0, 1, 0xC67D},    {0x0001, 1, 0, 1, 0xC61D},
            {0x7FFF, 103, 0, 1, 0x804C},  {0x8000, 103, 0, 0, 0x004C},
            {0x8001, 103, 1, 0, 0x040F},  {0xC000, 95, 0, 0, 0x3C0C},
            {0xFFFF, 0, 0, 0, 0x467D},    {0xCD8E, 92, 398, 0, 0x3D1D},
            {0x3465, 93, 922, 1, 0xBCF3}, {0x9D16, 100, 1302, 0, 0x36EF},
            {0x76C1, 102, 318, 1, 0xB059}};
  /* rank -> value through the fp16 tables: state = rank's preimage */
  static uint16_t by_rank[STATES];
  const uint16_t *k5 = trellis_codebook_table_bits(TRELLIS_CB_SQG_FP16, 5);
  for (uint32_t s = 0; s < STATES; s++)
    by_rank[trl_sqg_rank(s, 5)] = k5[s];
  for (size_t i = 0; i < sizeof ex / sizeof *ex; i++) {
    uint32_t x = 99, neg = 99;
    assert_int_equal(trl_sqg_d3l_index(ex[i].rank, &x, &neg), ex[i].idx);
    assert_int_equal(x, ex[i].x);
    assert_int_equal(neg, ex[i].neg);
    assert_int_equal(by_rank[ex[i].rank], ex[i].value);
  }
  expect_hash_u16(
      by_rank, STATES,
      "1b02d0d7e72557bd4101f7440488ab6844bc206313b2237cdbef3db9d7e3825b");
  /* every index in range, x exact in fp16 */
  for (uint32_t r = 0; r < STATES; r++) {
    uint32_t x, neg;
    assert_true(trl_sqg_d3l_index(r, &x, &neg) < TRL_SQG_D3L_COUNT);
    assert_true(x <= 2047);
  }
}

/* §9.3 and §9.4: SHA-256 of every state table. */
static void test_state_table_hashes(void **state) {
  (void)state;
  static const char *const e4m3_f16[3] = {
      "2a2048a369826d29791f45fa5def4a7b7234717e45c2680e6c1722cb1e1a3b2c",
      "25a71242eccaccd8e813b07e05db94fb4d81b0767a1bc56f1b3b010a8b0157db",
      "21c0ee72360825bb8bbb1d17c77e210ab3007c73c628053e8f425518ed073b1f"};
  static const char *const e4m3_bytes[5] = {
      "62027916386245a84c86156a0a08b6cf07e41548871af0e56fb40780558f6293",
      "afe7b3633e7d243b00b379b18ec4dca573722b3727cafef47fcb6470d7e7e6c9",
      "5a9620f0c4d8f0a60d0b6fbea921dcecbd193e6febf31043aaa6403c20389c2f",
      "a1caf5572c67d4face423478f423e1ed6149a8c920be5c28d4702946c93cae2f",
      "8e0edc92e20eb92f5287dbdadc8e870fc500fc03c5eed996cae0781d197ebcb0"};
  static const char *const fp16[2] = {
      "828f212de9a30e3ea5b321e2ab8637e7c633df2ce416fcabb747f094b654ee0a",
      "2ec7ed71fd5658c9acbf1fa4587b6351898e8c0faa5dd5cc9a2b0a16371b1b54"};
  static uint8_t bytes[STATES];
  for (int bits = 2; bits <= 6; bits++) {
    const uint16_t *table =
        trellis_codebook_table_bits(TRELLIS_CB_SQG_E4M3, bits);
    assert_non_null(table);
    if (bits <= 4)
      expect_hash_u16(table, STATES, e4m3_f16[bits - 2]);
    for (uint32_t s = 0; s < STATES; s++) {
      bytes[s] = trl_sqg_t12()[trl_sqg_rank(s, bits) >> 4];
      assert_int_equal(table[s], trl_e4m3_to_f16(bytes[s]));
    }
    expect_hash(bytes, STATES, e4m3_bytes[bits - 2]);
  }
  for (int bits = 5; bits <= 6; bits++)
    expect_hash_u16(trellis_codebook_table_bits(TRELLIS_CB_SQG_FP16, bits),
                    STATES, fp16[bits - 5]);
}

/* The decode-GEMM's tables (trl_sqg_kernel_table): for sqg_e4m3 the state
 * -> E4M3 code tables whose SHA-256 the spec gives (§3.4, §3.6), each code
 * the fp16 value of the state; for sqg_fp16 the fp16 state tables; nothing
 * (size 0, no write) for any other codebook or K. */
static void test_kernel_tables(void **state) {
  (void)state;
  static uint8_t buf[2 * STATES + 1];
  for (int bits = 2; bits <= 6; bits++) {
    memset(buf, 0xA5, sizeof buf);
    assert_int_equal(trl_sqg_kernel_table(TRELLIS_CB_SQG_E4M3, bits, NULL),
                     STATES);
    assert_int_equal(trl_sqg_kernel_table(TRELLIS_CB_SQG_E4M3, bits, buf),
                     STATES);
    assert_int_equal(buf[STATES], 0xA5); /* nothing past the table */
    const uint16_t *values =
        trellis_codebook_table_bits(TRELLIS_CB_SQG_E4M3, bits);
    for (uint32_t s = 0; s < STATES; s++)
      assert_int_equal(trl_e4m3_to_f16(buf[s]), values[s]);
  }
  expect_hash(
      buf, STATES, /* K6, the last one written */
      "8e0edc92e20eb92f5287dbdadc8e870fc500fc03c5eed996cae0781d197ebcb0");
  for (int bits = 5; bits <= 6; bits++) {
    assert_int_equal(trl_sqg_kernel_table(TRELLIS_CB_SQG_FP16, bits, buf),
                     2 * STATES);
    assert_memory_equal(buf,
                        trellis_codebook_table_bits(TRELLIS_CB_SQG_FP16, bits),
                        2 * STATES);
  }
  const struct {
    trellis_codebook cb;
    int bits;
  } none[] = {{TRELLIS_CB_SQG_E4M3, 1}, {TRELLIS_CB_SQG_E4M3, 7},
              {TRELLIS_CB_SQG_FP16, 4}, {TRELLIS_CB_SQG_FP16, 7},
              {TRELLIS_CB_MCG, 6},      {TRELLIS_CB_3INST, 2},
              {(trellis_codebook)9, 3}};
  for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
    memset(buf, 0x5A, 4);
    assert_int_equal(trl_sqg_kernel_table(none[i].cb, none[i].bits, buf), 0);
    assert_int_equal(buf[0], 0x5A);
  }
}

/* The fp32 tables hold the fp16 values; the scalar path agrees. */
static void test_tables_agree(void **state) {
  (void)state;
  const trellis_codebook cbs[2] = {TRELLIS_CB_SQG_E4M3, TRELLIS_CB_SQG_FP16};
  for (int c = 0; c < 2; c++)
    for (int bits = 1; bits <= 8; bits++) {
      const uint16_t *t16 = trellis_codebook_table_bits(cbs[c], bits);
      const float *t32 = trl_codebook_table_f32_bits(cbs[c], bits);
      if (!trellis_codebook_bits_valid(cbs[c], bits)) {
        assert_null(t16);
        assert_null(t32);
        assert_int_equal(trellis_codebook_value_bits(cbs[c], bits, 0) & 0x7C00,
                         0x7C00);
        continue;
      }
      assert_ptr_equal(t16, trellis_codebook_table_bits(cbs[c], bits));
      for (uint32_t s = 0; s < STATES; s += 7) {
        assert_int_equal(trellis_codebook_value_bits(cbs[c], bits, s), t16[s]);
        assert_true(t32[s] == trellis_f16_to_f32(t16[s]));
      }
    }
  /* K-independent codebooks give their usual table at any valid K */
  assert_ptr_equal(trellis_codebook_table_bits(TRELLIS_CB_MCG, 3),
                   trellis_codebook_table(TRELLIS_CB_MCG));
  assert_null(trellis_codebook_table_bits(TRELLIS_CB_MCG, 9));
  assert_null(trellis_codebook_table_bits((trellis_codebook)5, 3));
  /* the K-less entry points have no SQG value */
  assert_int_equal(trellis_codebook_value(TRELLIS_CB_SQG_E4M3, 0) & 0x7C00,
                   0x7C00);
}

/* §9.3 and §9.4: statistics over the 65536 states. */
static void test_statistics(void **state) {
  (void)state;
  static const struct {
    trellis_codebook cb;
    int bits;
    double std, max;
    int distinct;
  } want[] = {{TRELLIS_CB_SQG_E4M3, 2, 1.498585, 5.5, 151},
              {TRELLIS_CB_SQG_E4M3, 4, 1.498585, 5.5, 151},
              {TRELLIS_CB_SQG_FP16, 5, 1.499982, 6.48828125, 14888}};
  static uint8_t seen[STATES];
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    const uint16_t *t = trellis_codebook_table_bits(want[i].cb, want[i].bits);
    double sum = 0.0, sq = 0.0, lo = 0.0, hi = 0.0;
    int distinct = 0;
    memset(seen, 0, sizeof seen);
    for (uint32_t s = 0; s < STATES; s++) {
      assert_int_not_equal(t[s], 0x8000); /* never -0 */
      assert_int_not_equal(t[s] & 0x7C00, 0x7C00);
      const double v = trellis_f16_to_f32(t[s]);
      sum += v;
      sq += v * v;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
      distinct += !seen[t[s]];
      seen[t[s]] = 1;
    }
    const double mean = sum / STATES;
    assert_true(fabs(mean) < 1e-9);
    assert_true(fabs(sqrt(sq / STATES - mean * mean) - want[i].std) < 5e-7);
    assert_true(hi == want[i].max && lo == -want[i].max);
    assert_int_equal(distinct, want[i].distinct);
  }
}

/* §9.3: the staircase regenerated from 1.5 * Phi^-1 in float64 gives the
 * labels whose hash the format pins, and their modal compression is T12. */
static double normal_quantile(double p) {
  /* Acklam's rational approximation, then one Halley step on erfc */
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  double x;
  if (p < 0.02425) {
    const double q = sqrt(-2 * log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - 0.02425) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) *
        q / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = sqrt(-2 * log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  for (int it = 0; it < 2; it++) {
    const double e = 0.5 * erfc(-x / sqrt(2.0)) - p;
    const double u = e * 2.5066282746310002 * exp(x * x / 2); /* sqrt(2 pi) */
    x = x - u / (1 + x * u / 2);
  }
  return x;
}

/* The E4M3 magnitude code nearest to v >= 0, ties to the even code. */
static int e4m3_round(double v) {
  int best = 0;
  double best_d = INFINITY;
  for (int code = 0; code <= 0x7E; code++) {
    const double d =
        fabs(trellis_f16_to_f32(trl_e4m3_to_f16((uint8_t)code)) - v);
    if (d < best_d || (d == best_d && (code & 1) == 0)) {
      best = code;
      best_d = d;
    }
  }
  return best;
}

static void test_staircase_from_quantiles(void **state) {
  (void)state;
  static uint8_t mag[32768], labels[STATES], t12[4096];
  for (int off = 0; off < 32768; off++)
    mag[off] = (uint8_t)e4m3_round(
        1.5 * normal_quantile((32768.0 + off + 0.5) / 65536.0));
  for (uint32_t r = 0; r < STATES; r++) {
    const int neg = r < 0x8000;
    const uint32_t off = neg ? (r & 0x7FFF) ^ 0x7FFF : r & 0x7FFF;
    labels[r] = (uint8_t)(mag[off] | (neg && mag[off] ? 0x80 : 0));
  }
  assert_int_equal(labels[0x0000], 0xCD);
  assert_int_equal(labels[0x7FEE], 0x81);
  for (uint32_t r = 0x7FEF; r <= 0x8010; r++)
    assert_int_equal(labels[r], 0x00);
  assert_int_equal(labels[0x8011], 0x01);
  assert_int_equal(labels[0xFFFE], 0x4C);
  assert_int_equal(labels[0xFFFF], 0x4D);
  expect_hash(labels, STATES, TRL_SQG_LABELS_SHA256);
  int changed = 0;
  for (int t = 0; t < 4096; t++) {
    int best_count = 0, best = 0;
    for (int i = 0; i < 16; i++) {
      int count = 0;
      for (int j = 0; j < 16; j++)
        count += labels[16 * t + j] == labels[16 * t + i];
      const int v = labels[16 * t + i];
      if (count > best_count || (count == best_count && v < best)) {
        best_count = count;
        best = v;
      }
    }
    t12[t] = (uint8_t)best;
    for (int i = 0; i < 16; i++)
      changed += labels[16 * t + i] != best;
  }
  assert_int_equal(changed, 590);
  assert_memory_equal(t12, trl_sqg_t12(), 4096);
}

/* ------------------------------------------------- tiles and pairs -- */

static void pattern(int16_t *w, size_t count) {
  for (size_t j = 0; j < count; j++)
    w[j] = (int16_t)(uint16_t)(0x0123u + 0x1111u * (uint32_t)j);
}

/* First 16 hex digits of the SHA-256 of 256 fp16 values. */
static void short_hash(const uint16_t *v, char out[17]) {
  char hex[65];
  tu_sha256_u16_hex(v, 256, hex);
  memcpy(out, hex, 16);
  out[16] = '\0';
}

static void test_known_answer_tiles(void **state) {
  (void)state;
  static const struct {
    trellis_codebook cb;
    int bits;
    uint16_t zero, ones, first[4];
    const char *digest;
  } ka[] = {
      {TRELLIS_CB_SQG_E4M3,
       2,
       0x4300,
       0xBD00,
       {0x4080, 0x2B80, 0x3C00, 0xBB00},
       "0183800c042de0e7"},
      {TRELLIS_CB_SQG_E4M3,
       3,
       0x3E80,
       0xBC80,
       {0xBF80, 0x3800, 0x3D00, 0xB900},
       "7eebf46c2b91f71a"},
      {TRELLIS_CB_SQG_E4M3,
       4,
       0x3D00,
       0xBC80,
       {0x3880, 0xBC80, 0xC380, 0x2D80},
       "2d42155d22598fbe"},
      {TRELLIS_CB_SQG_FP16,
       5,
       0x3D1D,
       0xBCF3,
       {0x3D48, 0xBF43, 0x3B8B, 0xB6D1},
       "237194fa623ae4fa"},
      {TRELLIS_CB_SQG_FP16,
       6,
       0x3CC8,
       0x3DB8,
       {0x39BF, 0xB908, 0x29C1, 0x418C},
       "a7acf1f8f96bffb6"},
  };
  int16_t tile[16 * 8];
  uint16_t out[256];
  char digest[17];
  for (size_t i = 0; i < sizeof ka / sizeof *ka; i++) {
    const int words = 16 * ka[i].bits;
    memset(tile, 0, sizeof tile);
    assert_int_equal(trellis_decode_tile(tile, ka[i].bits, ka[i].cb, out),
                     TRELLIS_OK);
    for (int j = 0; j < 256; j++)
      assert_int_equal(out[j], ka[i].zero);
    memset(tile, 0xFF, (size_t)words * 2);
    assert_int_equal(trellis_decode_tile(tile, ka[i].bits, ka[i].cb, out),
                     TRELLIS_OK);
    for (int j = 0; j < 256; j++)
      assert_int_equal(out[j], ka[i].ones);
    pattern(tile, (size_t)words);
    assert_int_equal(trellis_decode_tile(tile, ka[i].bits, ka[i].cb, out),
                     TRELLIS_OK);
    assert_memory_equal(out, ka[i].first, sizeof ka[i].first);
    short_hash(out, digest);
    assert_string_equal(digest, ka[i].digest);
  }
  /* the MCG reference row of the same table */
  pattern(tile, 48);
  assert_int_equal(trellis_decode_tile(tile, 3, TRELLIS_CB_MCG, out),
                   TRELLIS_OK);
  short_hash(out, digest);
  assert_string_equal(digest, "07bf733651b61959");
}

static void test_decode_tile_bad_bits(void **state) {
  (void)state;
  int16_t tile[16 * 8] = {0};
  uint16_t out[256];
  static const struct {
    trellis_codebook cb;
    int bits;
  } bad[] = {{TRELLIS_CB_SQG_E4M3, 1}, {TRELLIS_CB_SQG_E4M3, 7},
             {TRELLIS_CB_SQG_E4M3, 8}, {TRELLIS_CB_SQG_FP16, 4},
             {TRELLIS_CB_SQG_FP16, 2}, {TRELLIS_CB_SQG_FP16, 7}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    trellis_clear_error();
    assert_int_equal(trellis_decode_tile(tile, bad[i].bits, bad[i].cb, out),
                     TRELLIS_ERR_SHAPE);
    assert_non_null(
        strstr(trellis_last_error(), trellis_codebook_name(bad[i].cb)));
    assert_int_equal(trellis_codebook_bits_valid(bad[i].cb, bad[i].bits), 0);
  }
  for (int bits = 2; bits <= 6; bits++)
    assert_int_equal(trellis_codebook_bits_valid(TRELLIS_CB_SQG_E4M3, bits), 1);
  assert_int_equal(trellis_codebook_bits_valid(TRELLIS_CB_SQG_FP16, 5), 1);
  assert_int_equal(trellis_codebook_bits_valid(TRELLIS_CB_SQG_FP16, 6), 1);
  assert_int_equal(trellis_codebook_bits_valid(TRELLIS_CB_MCG, 1), 1);
  assert_int_equal(trellis_codebook_bits_valid((trellis_codebook)5, 3), 0);
}

static uint16_t unit_scales[512];

static void fill_unit_scales(void) {
  for (int i = 0; i < 512; i++)
    unit_scales[i] = 0x3C00;
}

/* A pair weight over `payload` (record0 || record1). */
static trellis_weight pair_weight(trellis_pair_kind kind,
                                  trellis_rate_axis axis, int64_t orth,
                                  trellis_codebook cb, const int16_t *payload) {
  trellis_weight w;
  trellis_weight_init(&w);
  w.pair = kind;
  w.rate_axis = axis;
  w.k = axis == TRELLIS_RATE_AXIS_N ? orth : 256;
  w.n = axis == TRELLIS_RATE_AXIS_N ? 256 : orth;
  w.codebook = cb;
  w.bits = trl_pair_bits0(kind);
  w.bits1 = trl_pair_bits1(kind);
  w.trellis = payload;
  w.trellis1 = payload + trl_pair_record_words(orth, w.bits);
  fill_unit_scales();
  w.suh = unit_scales;
  w.svh = unit_scales;
  return w;
}

/* §9.8: pattern payloads of pairs, W_hat row-major. */
static void test_pair_known_answers(void **state) {
  (void)state;
  static const struct {
    trellis_pair_kind kind;
    trellis_rate_axis axis;
    trellis_codebook cb;
    uint16_t first[4], second[4];
    const char *sha;
  } ka[] = {
      {TRELLIS_PAIR_P24,
       TRELLIS_RATE_AXIS_N,
       TRELLIS_CB_SQG_E4M3,
       {0x4080, 0x2B80, 0x3C00, 0xBB00},
       {0xAD00, 0xBD00, 0xB900, 0x3F00},
       "9b644594febd80777bbc176a4e842c3e3fd1b8386a6e7eb3f142468d5e98d4e2"},
      {TRELLIS_PAIR_P33,
       TRELLIS_RATE_AXIS_K,
       TRELLIS_CB_SQG_E4M3,
       {0xBF80, 0x3800, 0x3D00, 0xB900},
       {0xC200, 0xC100, 0x3B80, 0xB700},
       "88212b74e75313c3bc378fe402ec443498aed73ba489d91486d74b40e4792207"},
      {TRELLIS_PAIR_P24,
       TRELLIS_RATE_AXIS_K,
       TRELLIS_CB_MCG,
       {0xBD76, 0x349C, 0x3E48, 0xB269},
       {0xBA8D, 0xBE0A, 0x23F0, 0x3A37},
       "69911adaafda7e53cc381a29b7f327df72f84ad865be1eb8e96add3317a1e2bd"},
      {TRELLIS_PAIR_P43,
       TRELLIS_RATE_AXIS_N,
       TRELLIS_CB_SQG_E4M3,
       {0x3880, 0xBC80, 0xC380, 0x2D80},
       {0xC180, 0x3D80, 0x3F00, 0x3D00},
       "c19363755a6cf03777bd591edadef86938a0c5818373ee3e26cf364f86ceb136"},
  };
  static int16_t payload[128 / 16 * 128 * 8];
  static uint16_t w_hat[256 * 128];
  for (size_t i = 0; i < sizeof ka / sizeof *ka; i++) {
    const int k0 = trl_pair_bits0(ka[i].kind);
    const int k1 = trl_pair_bits1(ka[i].kind);
    const size_t words =
        trl_pair_record_words(128, k0) + trl_pair_record_words(128, k1);
    pattern(payload, words);
    trellis_weight w =
        pair_weight(ka[i].kind, ka[i].axis, 128, ka[i].cb, payload);
    assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
    assert_int_equal(trellis_weight_payload_bytes(&w), words * 2);
    memset(w_hat, 0xFF, sizeof w_hat);
    assert_int_equal(trellis_decode_weight(&w, w_hat), TRELLIS_OK);
    assert_memory_equal(w_hat, ka[i].first, sizeof ka[i].first);
    const size_t second =
        ka[i].axis == TRELLIS_RATE_AXIS_N ? 128 : (size_t)128 * 128;
    assert_memory_equal(w_hat + second, ka[i].second, sizeof ka[i].second);
    expect_hash_u16(w_hat, 256 * 128, ka[i].sha);
  }
  /* all zero: every record is constant at value(0) of its K */
  memset(payload, 0, sizeof payload);
  trellis_weight w = pair_weight(TRELLIS_PAIR_P24, TRELLIS_RATE_AXIS_N, 128,
                                 TRELLIS_CB_SQG_E4M3, payload);
  assert_int_equal(trellis_decode_weight(&w, w_hat), TRELLIS_OK);
  for (int r = 0; r < 128; r++)
    for (int c = 0; c < 256; c++)
      assert_int_equal(w_hat[256 * r + c], c < 128 ? 0x4300 : 0x3D00);
}

/* ------------------------------------------------------- validation -- */

static void expect_invalid(const trellis_weight *w, trellis_status status,
                           const char *needle) {
  trellis_clear_error();
  assert_int_equal(trellis_weight_validate(w), status);
  if (strstr(trellis_last_error(), needle) == NULL)
    fail_msg("message \"%s\" lacks \"%s\"", trellis_last_error(), needle);
}

static void test_bad_codebook_bits(void **state) {
  (void)state;
  static int16_t payload[128 / 16 * 128 / 16 * 16 * 8];
  fill_unit_scales();
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = w.n = 128;
  w.trellis = payload;
  w.suh = w.svh = unit_scales;
  static const struct {
    trellis_codebook cb;
    int bits;
  } bad[] = {{TRELLIS_CB_SQG_E4M3, 1}, {TRELLIS_CB_SQG_E4M3, 7},
             {TRELLIS_CB_SQG_E4M3, 8}, {TRELLIS_CB_SQG_FP16, 2},
             {TRELLIS_CB_SQG_FP16, 4}, {TRELLIS_CB_SQG_FP16, 8}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    w.codebook = bad[i].cb;
    w.bits = bad[i].bits;
    expect_invalid(&w, TRELLIS_ERR_SHAPE, trellis_codebook_name(bad[i].cb));
    uint16_t out[1];
    assert_int_equal(trellis_decode_weight(&w, out), TRELLIS_ERR_SHAPE);
  }
  w.codebook = TRELLIS_CB_SQG_E4M3;
  w.bits = 7;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "K 2..6, got 7");
  w.codebook = TRELLIS_CB_SQG_FP16;
  w.bits = 4;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "K 5..6, got 4");
  for (int bits = 2; bits <= 6; bits++) {
    w.codebook = TRELLIS_CB_SQG_E4M3;
    w.bits = bits;
    assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  }
}

static void test_malformed_pairs(void **state) {
  (void)state;
  static int16_t payload[128 / 16 * 128 * 8];
  trellis_weight w;
  const trellis_weight good = pair_weight(TRELLIS_PAIR_P24, TRELLIS_RATE_AXIS_N,
                                          128, TRELLIS_CB_SQG_E4M3, payload);
  assert_int_equal(trellis_weight_validate(&good), TRELLIS_OK);

  w = good, w.pair = (trellis_pair_kind)0x34;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.pair");
  w = good, w.pair = (trellis_pair_kind)0x55;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "0x55");
  w = good, w.rate_axis = (trellis_rate_axis)2;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.rate_axis");
  /* the rate axis is exactly 256 channels */
  w = good, w.n = 384;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "exactly 256");
  w = good, w.n = 128;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "got 128");
  w = good, w.rate_axis = TRELLIS_RATE_AXIS_K; /* k = 128 on the k axis */
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "weight.k");
  /* record Ks must be the kind's */
  w = good, w.bits = 3;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "bits = 2 and bits1 = 4");
  w = good, w.bits1 = 2;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "P24");
  /* codebooks: sqg_fp16 has no K <= 4; 3inst/mul1 pairs are not a format */
  w = good, w.codebook = TRELLIS_CB_SQG_FP16;
  expect_invalid(&w, TRELLIS_ERR_SHAPE, "sqg_fp16");
  w = good, w.codebook = TRELLIS_CB_MUL1;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "(mcg, sqg_e4m3)");
  w = good, w.codebook = TRELLIS_CB_3INST;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "(mcg, sqg_e4m3)");
  w = good, w.codebook = TRELLIS_CB_MCG;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  /* record1 and fp16 scales are required */
  w = good, w.trellis1 = NULL;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "trellis1");
  static int16_t packed[16];
  w = good, w.svh = NULL, w.sv = packed;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "legacy sv");

  /* non-finite suh / svh: the CPU functions that read them refuse */
  static uint16_t bad_suh[256];
  for (int i = 0; i < 256; i++)
    bad_suh[i] = 0x3C00;
  const uint16_t nonfinite[3] = {0x7C00, 0xFC00, 0x7E00};
  float s_in[256], s_out[256];
  static float dense[128 * 256];
  for (int i = 0; i < 3; i++) {
    bad_suh[77] = nonfinite[i];
    w = good, w.suh = bad_suh;
    assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
    trellis_clear_error();
    assert_int_equal(trl_weight_scales(&w, s_in, s_out),
                     TRELLIS_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(trellis_last_error(), "weight.suh[77]"));
    assert_int_equal(trellis_dense_weight(&w, dense),
                     TRELLIS_ERR_INVALID_ARGUMENT);
    w = good, w.svh = bad_suh; /* n = 256: index 77 of svh */
    assert_int_equal(trellis_dense_weight(&w, dense),
                     TRELLIS_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(trellis_last_error(), "weight.svh[77]"));
  }
  /* a uniform layer has its pair fields zero: garbage there is refused
   * (it could be a pair whose kind was lost) */
  trellis_weight uniform = good;
  uniform.pair = TRELLIS_PAIR_NONE;
  uniform.n = 128;
  uniform.bits = 3;
  uniform.bits1 = 0;
  uniform.trellis1 = NULL;
  assert_int_equal(trellis_weight_validate(&uniform), TRELLIS_OK);
  w = uniform, w.rate_axis = (trellis_rate_axis)7;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT,
                 "weight: a uniform layer (pair TRELLIS_PAIR_NONE) has "
                 "rate_axis, bits1 and trellis1 zero, got rate_axis = 7");
  w = uniform, w.rate_axis = TRELLIS_RATE_AXIS_K;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "rate_axis = 1");
  w = uniform, w.bits1 = 4;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "bits1 = 4");
  w = uniform, w.trellis1 = payload;
  expect_invalid(&w, TRELLIS_ERR_INVALID_ARGUMENT, "trellis1 set");
  /* a uniform layer keeps EXL3's rule: any fp16 scale is read as given */
  w = uniform;
  w.suh = bad_suh;
  assert_int_equal(trl_weight_scales(&w, s_in, s_out), TRELLIS_OK);
}

/* A weight filled by the header before the pair fields is a uniform layer. */
static void test_struct_size_v1(void **state) {
  (void)state;
  static int16_t payload[128 / 16 * 128 / 16 * 16 * 3];
  fill_unit_scales();
  struct {
    trellis_weight w;
    unsigned char guard[8];
  } box;
  memset(&box, 0x5A, sizeof box); /* garbage past the v1 fields */
  trellis_weight *w = &box.w;
  w->struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1;
  w->k = w->n = 128;
  w->bits = 3;
  w->codebook = TRELLIS_CB_SQG_E4M3;
  w->trellis = payload;
  w->suh = w->svh = unit_scales;
  w->su = w->sv = NULL;
  w->bias = NULL;
  assert_int_equal(trellis_weight_validate(w), TRELLIS_OK);
  assert_int_equal(trellis_weight_payload_bytes(w), 128 * 128 * 3 / 8);
  static uint16_t w_hat[128 * 128];
  assert_int_equal(trellis_decode_weight(w, w_hat), TRELLIS_OK);
  assert_int_equal(w_hat[0], 0x3E80); /* zero payload, K3 */
  const size_t ws = trellis_cpu_workspace_size(w, 1, 1);
  assert_true(ws > 0);
  void *buf = malloc(ws);
  uint16_t x[128] = {0};
  float y[128];
  assert_int_equal(
      trellis_cpu_forward(w, x, TRELLIS_F16, 1, y, TRELLIS_F32, buf, ws, 1),
      TRELLIS_OK);
  free(buf);
  /* sizes between the two versions are not a struct of either */
  w->struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1 + 8;
  expect_invalid(w, TRELLIS_ERR_INVALID_ARGUMENT, "struct_size");
}

static void test_names(void **state) {
  (void)state;
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_NONE), "none");
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_P22), "P22");
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_P24), "P24");
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_P33), "P33");
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_P43), "P43");
  assert_string_equal(trellis_pair_kind_name(TRELLIS_PAIR_P44), "P44");
  assert_string_equal(trellis_pair_kind_name((trellis_pair_kind)0x34),
                      "invalid");
  assert_string_equal(trellis_rate_axis_name(TRELLIS_RATE_AXIS_N), "n");
  assert_string_equal(trellis_rate_axis_name(TRELLIS_RATE_AXIS_K), "k");
  assert_string_equal(trellis_rate_axis_name((trellis_rate_axis)2), "invalid");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table_hashes),
      cmocka_unit_test(test_e4m3),
      cmocka_unit_test(test_graph_examples),
      cmocka_unit_test(test_graph_is_bijection),
      cmocka_unit_test(test_d3l_index),
      cmocka_unit_test(test_state_table_hashes),
      cmocka_unit_test(test_kernel_tables),
      cmocka_unit_test(test_tables_agree),
      cmocka_unit_test(test_statistics),
      cmocka_unit_test(test_staircase_from_quantiles),
      cmocka_unit_test(test_known_answer_tiles),
      cmocka_unit_test(test_decode_tile_bad_bits),
      cmocka_unit_test(test_pair_known_answers),
      cmocka_unit_test(test_bad_codebook_bits),
      cmocka_unit_test(test_malformed_pairs),
      cmocka_unit_test(test_struct_size_v1),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
