/* SPDX-License-Identifier: Apache-2.0 */
/* Codebooks (FORMAT.md §4): worked examples, full-table checksums,
 * statistics, and the table against the scalar decode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/codebook.h"
#include "core/sha256.h"
#include "testutil.h"
#include "trellis.h"

typedef struct example {
  trellis_codebook cb;
  uint32_t idx;
  uint16_t out;
} example;

static const example worked_examples[] = {
    {TRELLIS_CB_3INST, 0x0000, 0x3A25}, {TRELLIS_CB_3INST, 0x0001, 0xBB5B},
    {TRELLIS_CB_3INST, 0x1234, 0xC066}, {TRELLIS_CB_3INST, 0xFFFF, 0xB110},
    {TRELLIS_CB_MCG, 0x0000, 0x3F60},   {TRELLIS_CB_MCG, 0x0001, 0x304E},
    {TRELLIS_CB_MCG, 0x1234, 0x3E0F},   {TRELLIS_CB_MCG, 0xFFFF, 0x3ACD},
    {TRELLIS_CB_MUL1, 0x0000, 0xC2E8},  {TRELLIS_CB_MUL1, 0x0001, 0x3921},
    {TRELLIS_CB_MUL1, 0x1234, 0xB89E},  {TRELLIS_CB_MUL1, 0xFFFF, 0xB936},
};

static void test_worked_examples(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof worked_examples / sizeof *worked_examples;
       i++) {
    const example *e = &worked_examples[i];
    assert_int_equal(trellis_codebook_value(e->cb, e->idx), e->out);
    assert_int_equal(trellis_codebook_table(e->cb)[e->idx], e->out);
  }
  /* MCG idx 3 needs the final rounding: 0.839599609375 -> 0.83984375. */
  assert_true(trellis_f16_to_f32(trellis_codebook_value(TRELLIS_CB_MCG, 3)) ==
              0.83984375f);
}

static void test_full_table_checksums(void **state) {
  (void)state;
  static const char *const expected[3] = {
      "ad88de2dcff5bb05fff2faec37cceceb43aa1c2e8203f9d81a6fbd6dd3393eea",
      "95383563929baa9d1ae5de0be22490284382673620bdd85929feea7bdbef04a9",
      "bc48d02cb1c14939dc47b90f870dd689d63e3b1ab69a157e65538db68677a6c8"};
  for (int cb = 0; cb < 3; cb++) {
    const uint16_t *table = trellis_codebook_table((trellis_codebook)cb);
    assert_non_null(table);
    char hex[65];
    tu_sha256_u16_hex(table, 65536, hex);
    assert_string_equal(hex, expected[cb]);
  }
}

static void test_sha256_self_check(void **state) {
  (void)state;
  char hex[65];
  trl_sha256_hex("abc", 3, hex);
  assert_string_equal(
      hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  trl_sha256_hex("", 0, hex);
  assert_string_equal(
      hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const char *two_blocks =
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  trl_sha256_hex(two_blocks, strlen(two_blocks), hex);
  assert_string_equal(
      hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_table_matches_value(void **state) {
  (void)state;
  for (int cb = 0; cb < 3; cb++) {
    const uint16_t *table = trellis_codebook_table((trellis_codebook)cb);
    const float *table_f32 = trl_codebook_table_f32((trellis_codebook)cb);
    assert_non_null(table_f32);
    assert_ptr_equal(table, trellis_codebook_table((trellis_codebook)cb));
    for (uint32_t s = 0; s < 65536; s++) {
      assert_int_equal(table[s],
                       trellis_codebook_value((trellis_codebook)cb, s));
      assert_true(table_f32[s] == trellis_f16_to_f32(table[s]));
      /* Only the low 16 bits are the state. */
      assert_int_equal(table[s], trellis_codebook_value((trellis_codebook)cb,
                                                        s | 0xABCD0000u));
    }
  }
}

static int compare_u16(const void *a, const void *b) {
  return (int)*(const uint16_t *)a - (int)*(const uint16_t *)b;
}

static void test_statistics(void **state) {
  (void)state;
  static const struct {
    size_t distinct;
    double mean, std, min, max;
  } expected[3] = {{10598, 2.1e-4, 1.243711, -3.957, 3.973},
                   {10746, -3.7e-5, 1.244112, -3.949, 3.949},
                   {913, -1.9e-3, 1.000310, -3.453, 3.348}};
  static uint16_t sorted[65536];
  for (int cb = 0; cb < 3; cb++) {
    const uint16_t *table = trellis_codebook_table((trellis_codebook)cb);
    double sum = 0, sum2 = 0, lo = 1e9, hi = -1e9;
    for (int s = 0; s < 65536; s++) {
      double v = trellis_f16_to_f32(table[s]);
      sum += v;
      sum2 += v * v;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    double mean = sum / 65536, var = sum2 / 65536 - mean * mean;
    memcpy(sorted, table, sizeof sorted);
    qsort(sorted, 65536, sizeof *sorted, compare_u16);
    size_t distinct = 1;
    for (int s = 1; s < 65536; s++)
      distinct += sorted[s] != sorted[s - 1];
    assert_int_equal(distinct, expected[cb].distinct);
    assert_float_equal(mean, expected[cb].mean, 1e-4);
    assert_float_equal(var, expected[cb].std * expected[cb].std, 1e-5);
    assert_float_equal(lo, expected[cb].min, 1e-3);
    assert_float_equal(hi, expected[cb].max, 1e-3);
  }
}

/* MUL1 closed form: RNE((887*S - 452608) / 131072). */
static void test_mul1_closed_form(void **state) {
  (void)state;
  for (uint32_t s = 0; s < 65536; s++) {
    uint32_t x = s * 0x83DCD12Du;
    int32_t byte_sum = (int32_t)((x & 0xFF) + ((x >> 8) & 0xFF) +
                                 ((x >> 16) & 0xFF) + (x >> 24));
    double exact = (887.0 * byte_sum - 452608.0) / 131072.0;
    assert_int_equal(trellis_codebook_value(TRELLIS_CB_MUL1, s),
                     trellis_f32_to_f16((float)exact));
  }
}

static void test_names_and_invalid(void **state) {
  (void)state;
  assert_string_equal(trellis_codebook_name(TRELLIS_CB_3INST), "3inst");
  assert_string_equal(trellis_codebook_name(TRELLIS_CB_MCG), "mcg");
  assert_string_equal(trellis_codebook_name(TRELLIS_CB_MUL1), "mul1");
  assert_string_equal(trellis_codebook_name(TRELLIS_CB_SQG_E4M3), "sqg_e4m3");
  assert_string_equal(trellis_codebook_name(TRELLIS_CB_SQG_FP16), "sqg_fp16");
  assert_string_equal(trellis_codebook_name((trellis_codebook)5), "invalid");
  assert_string_equal(trellis_codebook_name((trellis_codebook)-1), "invalid");
  assert_null(trellis_codebook_table((trellis_codebook)5));
  /* the SQG codebooks' values depend on K: no K-less table */
  assert_null(trellis_codebook_table(TRELLIS_CB_SQG_E4M3));
  assert_null(trellis_codebook_table(TRELLIS_CB_SQG_FP16));
  assert_null(trellis_codebook_table((trellis_codebook)-1));
  assert_null(trl_codebook_table_f32((trellis_codebook)5));
  assert_null(trl_codebook_table_f32(TRELLIS_CB_SQG_E4M3));
  /* An invalid codebook decodes to NaN rather than a plausible weight. */
  uint16_t nan_bits = trellis_codebook_value((trellis_codebook)7, 0);
  assert_int_equal(nan_bits & 0x7C00, 0x7C00);
  assert_int_not_equal(nan_bits & 0x03FF, 0);
}

/* The one table (format/codebooks.h) against the facts it replaced: the
 * public names and K ranges, the markers' values (the multipliers of
 * FORMAT.md §4.1), SQG kinds, pairing, b12x names and the parser. */
static void test_table(void **state) {
  (void)state;
  static const struct {
    trellis_codebook cb;
    const char *name, *marker;
    unsigned value;
    int lo, hi, half, sqg, pairs, b12x;
  } rows[] = {
      {TRELLIS_CB_3INST, "3inst", "", 0, 1, 8, 0, 0, 0, 0},
      {TRELLIS_CB_MCG, "mcg", "mcg", 0xCBAC1FEDu, 1, 8, 0, 0, 1, 1},
      {TRELLIS_CB_MUL1, "mul1", "mul1", 0x83DCD12Du, 1, 8, 1, 0, 0, 0},
      {TRELLIS_CB_SQG_E4M3, "sqg_e4m3", "", 0, 2, 6, 0, 1, 1, 1},
      {TRELLIS_CB_SQG_FP16, "sqg_fp16", "", 0, 5, 6, 0, 1, 0, 1},
  };
  assert_int_equal(TRL_CB_COUNT, sizeof rows / sizeof *rows);
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    const int cb = (int)rows[i].cb;
    assert_int_equal(cb, (int)i);
    assert_string_equal(trellis_codebook_name(rows[i].cb), rows[i].name);
    assert_string_equal(trl_codebook_marker(cb), rows[i].marker);
    assert_int_equal(trl_codebook_marker_value(cb), rows[i].value);
    assert_int_equal(trl_codebook_min_bits(cb), rows[i].lo);
    assert_int_equal(trl_codebook_max_bits(cb), rows[i].hi);
    assert_int_equal(trl_codebook_has_half(cb), rows[i].half);
    assert_int_equal(trl_codebook_is_sqg(cb), rows[i].sqg);
    assert_int_equal(trl_codebook_pairs(cb), rows[i].pairs);
    assert_int_equal(trl_codebook_b12x(cb), rows[i].b12x);
    trellis_codebook parsed = (trellis_codebook)-1;
    assert_true(trl_codebook_parse(rows[i].name, &parsed));
    assert_int_equal(parsed, rows[i].cb);
  }
  trellis_codebook parsed;
  assert_true(trl_codebook_parse("SQG_XOR_CHEB_T12", &parsed));
  assert_int_equal(parsed, TRELLIS_CB_SQG_E4M3);
  assert_false(trl_codebook_parse("mcg2", &parsed));
  assert_false(trl_codebook_parse("", &parsed));
  assert_string_equal(trellis_codebook_name((trellis_codebook)TRL_CB_COUNT),
                      "invalid");
  const int axis[] = {TRL_CODEBOOK_ENUMS};
  assert_int_equal(sizeof axis / sizeof *axis, TRL_CB_COUNT);
  char text[96];
  assert_string_equal(trl_codebook_list(trl_codebook_pairs, text, sizeof text),
                      "mcg, sqg_e4m3");
  assert_string_equal(TRL_CODEBOOK_NAMES_TEXT,
                      " 3inst mcg mul1 sqg_e4m3 sqg_fp16");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sha256_self_check),
      cmocka_unit_test(test_worked_examples),
      cmocka_unit_test(test_full_table_checksums),
      cmocka_unit_test(test_table_matches_value),
      cmocka_unit_test(test_statistics),
      cmocka_unit_test(test_mul1_closed_form),
      cmocka_unit_test(test_names_and_invalid),
      cmocka_unit_test(test_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
