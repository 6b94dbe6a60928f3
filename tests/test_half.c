/* SPDX-License-Identifier: Apache-2.0 */
/* fp16 / bf16 round-to-nearest-even conversions against slow references:
 * exhaustive over fp16, tie/overflow/subnormal sweeps, random floats. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tools/synth.h"
#include "trellis.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static synth_rng rng = {0x9E3779B9u}; /* a synth_rng is its seed */

/* Value of a finite positive fp16 pattern (0..0x7BFF) in double. */
static double f16_value(uint16_t h) {
  int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e ? (1024 + m) : m;
  int scale = e ? e - 25 : -24;
  while (scale > 0) {
    v *= 2;
    scale--;
  }
  while (scale < 0) {
    v /= 2;
    scale++;
  }
  return v;
}

/* Slow RNE: binary search for the largest fp16 <= |v|, then compare 2|v|
 * with the sum of the two neighbours (all exact in double). */
static uint16_t slow_f32_to_f16(float f) {
  const uint32_t u = to_bits(f);
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  if ((u & 0x7F800000u) == 0x7F800000u)
    return (u & 0x7FFFFFu) ? 0 /* NaN: checked separately */
                           : (uint16_t)(sign | 0x7C00u);
  const double v = f < 0 ? -(double)f : (double)f;
  if (v >= 65520.0) /* halfway between 65504 and 2^16 rounds to even: inf */
    return (uint16_t)(sign | 0x7C00u);
  uint16_t lo = 0, hi = 0x7BFF;
  while (lo < hi) { /* largest pattern with value <= v */
    uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
    if (f16_value(mid) <= v)
      lo = mid;
    else
      hi = (uint16_t)(mid - 1);
  }
  uint16_t result = lo;
  if (f16_value(lo) != v) {
    const double up = lo == 0x7BFF ? 65536.0 : f16_value((uint16_t)(lo + 1));
    const double twice = 2 * v, mid = f16_value(lo) + up;
    if (twice > mid || (twice == mid && (lo & 1)))
      result = (uint16_t)(lo + 1);
  }
  return (uint16_t)(sign | result);
}

/* Slow bf16 RNE: neighbours are the truncated pattern and the next one. */
static uint16_t slow_f32_to_bf16(float f) {
  const uint32_t u = to_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u)
    return (uint16_t)(u >> 16); /* inf (NaN is checked separately) */
  const uint32_t magnitude = u & 0x7FFFFFFFu;
  const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  const uint16_t lo = (uint16_t)(magnitude >> 16);
  const double v = (double)from_bits(magnitude);
  const double lo_v = (double)from_bits((uint32_t)lo << 16);
  const double hi_v =
      lo == 0x7F7F ? 0x1p128 : (double)from_bits((uint32_t)(lo + 1) << 16);
  uint16_t result = lo;
  if (lo_v != v) {
    const double twice = 2 * v, mid = lo_v + hi_v;
    if (twice > mid || (twice == mid && (lo & 1)))
      result = (uint16_t)(lo + 1);
  }
  return (uint16_t)(sign | result);
}

static int is_nan_f16(uint16_t h) {
  return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
}

static void check_f16(float f) {
  const uint16_t got = trellis_f32_to_f16(f);
  if (f != f) {
    assert_true(is_nan_f16(got));
    assert_int_equal(got & 0x8000, (to_bits(f) >> 16) & 0x8000);
  } else if (got != slow_f32_to_f16(f)) {
    fail_msg("f32 0x%08x -> f16 0x%04x, expected 0x%04x", to_bits(f), got,
             slow_f32_to_f16(f));
  }
}

static void check_bf16(float f) {
  const uint16_t got = trellis_f32_to_bf16(f);
  if (f != f) {
    assert_true((got & 0x7F80) == 0x7F80 && (got & 0x7F));
    assert_int_equal(got & 0x8000, (to_bits(f) >> 16) & 0x8000);
  } else if (got != slow_f32_to_bf16(f)) {
    fail_msg("f32 0x%08x -> bf16 0x%04x, expected 0x%04x", to_bits(f), got,
             slow_f32_to_bf16(f));
  }
}

static void test_f16_exhaustive_roundtrip(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    const float f = trellis_f16_to_f32((uint16_t)h);
    const uint32_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
    if (e == 0x1F && m) {
      assert_true(f != f); /* NaN stays NaN, sign kept */
      assert_true(is_nan_f16(trellis_f32_to_f16(f)));
      assert_int_equal(trellis_f32_to_f16(f) & 0x8000, h & 0x8000);
      continue;
    }
    if (e == 0x1F)
      assert_true(f == (h & 0x8000 ? -INFINITY : INFINITY));
    else
      assert_true(f == (h & 0x8000 ? -1 : 1) * (float)f16_value(h & 0x7FFF));
    assert_int_equal(trellis_f32_to_f16(f), h); /* includes -0 and subnormals */
  }
}

static void test_bf16_exhaustive_roundtrip(void **state) {
  (void)state;
  for (uint32_t b = 0; b < 65536; b++) {
    const float f = trellis_bf16_to_f32((uint16_t)b);
    assert_int_equal(to_bits(f), b << 16);
    if ((b & 0x7F80) == 0x7F80 && (b & 0x7F))
      assert_true((trellis_f32_to_bf16(f) & 0x7F) != 0);
    else
      assert_int_equal(trellis_f32_to_bf16(f), b);
  }
}

static void test_f16_edge_cases(void **state) {
  (void)state;
  static const struct {
    uint32_t f32;
    uint16_t f16;
  } cases[] = {
      {0x00000000, 0x0000},
      {0x80000000, 0x8000}, /* signed zeros */
      {0x3F800000, 0x3C00},
      {0xBF800000, 0xBC00},
      {0x3F801000, 0x3C00}, /* 1 + 2^-11: tie, to even (down) */
      {0x3F803000, 0x3C02}, /* 1 + 3*2^-11: tie, to even (up) */
      {0x3F801001, 0x3C01}, /* just above the tie */
      {0x3F800FFF, 0x3C00}, /* just below the tie */
      {0x477FE000, 0x7BFF}, /* 65504 = max */
      {0x477FEFFF, 0x7BFF}, /* just below 65520 */
      {0x477FF000, 0x7C00}, /* 65520: tie rounds to even = inf */
      {0x47800000, 0x7C00},
      {0xC7800000, 0xFC00}, /* 65536 */
      {0x7F7FFFFF, 0x7C00},
      {0x7F800000, 0x7C00},
      {0xFF800000, 0xFC00},
      {0x33800000, 0x0001}, /* 2^-24 = smallest subnormal */
      {0x33000000, 0x0000}, /* 2^-25: tie, to even (zero) */
      {0x33000001, 0x0001}, /* just above half the smallest subnormal */
      {0xB3000000, 0x8000}, /* -2^-25 -> -0 */
      {0x33C00000, 0x0002}, /* 3*2^-25: tie between 1 and 2 -> 2 */
      {0x34200000, 0x0002}, /* 5*2^-25: tie between 2 and 3 -> 2 */
      {0x387FC000, 0x03FF}, /* largest subnormal */
      {0x387FE000, 0x0400}, /* tie between 0x3FF and 0x400 -> 0x400 */
      {0x38800000, 0x0400}, /* smallest normal */
      {0x00000001, 0x0000}, /* f32 subnormal -> 0 */
      {0x80000001, 0x8000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const uint16_t got = trellis_f32_to_f16(from_bits(cases[i].f32));
    if (got != cases[i].f16)
      fail_msg("f32 0x%08x -> 0x%04x, expected 0x%04x", cases[i].f32, got,
               cases[i].f16);
    check_f16(from_bits(cases[i].f32));
  }
  /* NaNs of both signs and any payload stay NaN. */
  static const uint32_t nans[] = {0x7FC00000, 0xFFC00000, 0x7F800001,
                                  0xFF800001, 0x7FFFFFFF, 0x7F802000};
  for (size_t i = 0; i < sizeof nans / sizeof *nans; i++) {
    check_f16(from_bits(nans[i]));
    check_bf16(from_bits(nans[i]));
  }
}

static void test_bf16_edge_cases(void **state) {
  (void)state;
  static const struct {
    uint32_t f32;
    uint16_t bf16;
  } cases[] = {
      {0x3F808000, 0x3F80}, /* tie, to even (down) */
      {0x3F818000, 0x3F82}, /* tie, to even (up) */
      {0x3F808001, 0x3F81}, {0x3F807FFF, 0x3F80},
      {0x7F7F7FFF, 0x7F7F}, /* stays at max finite */
      {0x7F7F8000, 0x7F80}, /* tie above max: even is inf */
      {0x7F7FFFFF, 0x7F80}, {0xFF7FFFFF, 0xFF80},
      {0x00008000, 0x0000}, /* subnormal tie to even */
      {0x00018000, 0x0002}, {0x80000000, 0x8000},
      {0x7F800000, 0x7F80}, {0xFF800000, 0xFF80},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const uint16_t got = trellis_f32_to_bf16(from_bits(cases[i].f32));
    if (got != cases[i].bf16)
      fail_msg("f32 0x%08x -> 0x%04x, expected 0x%04x", cases[i].f32, got,
               cases[i].bf16);
    check_bf16(from_bits(cases[i].f32));
  }
}

/* Every float whose low 13 mantissa bits are at or next to the fp16 tie
 * point, for every exponent that maps to fp16 normals, subnormals or
 * overflow, both signs. */
static void test_f16_tie_sweep(void **state) {
  (void)state;
  static const uint32_t low_bits[] = {0x0000, 0x0001, 0x0FFF, 0x1000,
                                      0x1001, 0x1FFF, 0x0800, 0x17FF};
  for (uint32_t exp = 95; exp <= 145; exp++)
    for (uint32_t high = 0; high < 1024; high++)
      for (size_t l = 0; l < sizeof low_bits / sizeof *low_bits; l++)
        for (uint32_t sign = 0; sign < 2; sign++)
          check_f16(
              from_bits(sign << 31 | exp << 23 | high << 13 | low_bits[l]));
}

static void test_random_floats(void **state) {
  (void)state;
  for (int i = 0; i < 2000000; i++) { /* any bit pattern */
    const float f = from_bits((uint32_t)synth_next(&rng));
    check_f16(f);
    check_bf16(f);
  }
  for (int i = 0; i < 2000000; i++) { /* concentrated on the fp16 range */
    const uint32_t r = (uint32_t)synth_next(&rng);
    const uint32_t exp = 96 + (r >> 24) % 48;
    check_f16(from_bits((r & 0x80000000u) | exp << 23 | (r & 0x7FFFFFu)));
  }
}

static void test_dtype_helpers(void **state) {
  (void)state;
  assert_int_equal(trellis_dtype_size(TRELLIS_F16), 2);
  assert_int_equal(trellis_dtype_size(TRELLIS_BF16), 2);
  assert_int_equal(trellis_dtype_size(TRELLIS_F32), 4);
  assert_int_equal(trellis_dtype_size((trellis_dtype)3), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_f16_exhaustive_roundtrip),
      cmocka_unit_test(test_bf16_exhaustive_roundtrip),
      cmocka_unit_test(test_f16_edge_cases),
      cmocka_unit_test(test_bf16_edge_cases),
      cmocka_unit_test(test_f16_tie_sweep),
      cmocka_unit_test(test_random_floats),
      cmocka_unit_test(test_dtype_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
