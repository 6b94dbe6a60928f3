/* SPDX-License-Identifier: Apache-2.0 */
/* trellis_weight validation: every failure has its status and a message
 * naming the field, what was expected and what was given. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "format/weight.h"
#include "trellis.h"

static int16_t payload[16];
static uint16_t suh[256], svh[256];
static int16_t su[16], sv[16];

static trellis_weight valid_weight(void) {
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 256;
  w.n = 128;
  w.bits = 4;
  w.codebook = TRELLIS_CB_MCG;
  w.trellis = payload;
  w.suh = suh;
  w.svh = svh;
  return w;
}

/* Validation fails with `status` and a message containing every needle. */
static void expect_failure(const trellis_weight *w, trellis_status status,
                           const char *needle1, const char *needle2) {
  trellis_clear_error();
  assert_int_equal(trellis_weight_validate(w), status);
  const char *message = trellis_last_error();
  if (strstr(message, needle1) == NULL ||
      (needle2 && strstr(message, needle2) == NULL))
    fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", message, needle1,
             needle2 ? needle2 : "");
}

static void test_init_and_valid(void **state) {
  (void)state;
  trellis_weight w;
  memset(&w, 0xAB, sizeof w);
  trellis_weight_init(&w);
  assert_int_equal(w.struct_size, sizeof w);
  assert_int_equal(w.k, 0);
  assert_int_equal(w.bits, 0);
  assert_null(w.trellis);
  assert_null(w.suh);
  assert_null(w.bias);
  trellis_weight_init(NULL); /* no crash */

  w = valid_weight();
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  for (int bits = 1; bits <= 8; bits++) {
    w.bits = bits;
    assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
    assert_int_equal(trellis_weight_payload_bytes(&w),
                     (size_t)(256 * 128 * bits / 8));
  }
  w.suh = NULL; /* legacy signs on both sides */
  w.svh = NULL;
  w.su = su;
  w.sv = sv;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  w = valid_weight(); /* mixed forms are allowed */
  w.svh = NULL;
  w.sv = sv;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  w.struct_size = sizeof w + 16; /* a newer, larger struct is accepted */
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
}

static void test_null_and_struct_size(void **state) {
  (void)state;
  expect_failure(NULL, TRELLIS_ERR_INVALID_ARGUMENT, "weight", "NULL");
  trellis_weight w = valid_weight();
  w.struct_size = 0;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "struct_size", "0");
  w.struct_size = sizeof w - 4;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "struct_size", "init");
  /* the second version (before half and layout) reads them as zero */
  w = valid_weight();
  w.layout = (trellis_layout)7;
  w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V2;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
}

static void test_layout(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.layout = (trellis_layout)3;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.layout", "got 3");
  w.layout = (trellis_layout)-1;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.layout", "got -1");
  /* the k-major layout: uniform layers of the EXL3 codebooks */
  w.layout = TRELLIS_LAYOUT_KMAJOR;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  w.codebook = TRELLIS_CB_SQG_E4M3;
  expect_failure(&w, TRELLIS_ERR_UNSUPPORTED, "k-major", "SQG codebook");
  w.codebook = TRELLIS_CB_MCG;
  static uint16_t k_hat[256 * 128];
  trellis_clear_error();
  assert_int_equal(trellis_decode_weight(&w, k_hat), TRELLIS_ERR_LAYOUT);
  assert_non_null(strstr(trellis_last_error(), "k-major layout"));
  w.layout = TRELLIS_LAYOUT_LANES;
  assert_int_equal(trellis_weight_validate(&w), TRELLIS_OK);
  /* the CPU functions read the checkpoint layout only */
  static uint16_t w_hat[256 * 128];
  trellis_clear_error();
  assert_int_equal(trellis_decode_weight(&w, w_hat), TRELLIS_ERR_LAYOUT);
  assert_non_null(strstr(trellis_last_error(), "lanes layout"));
  assert_string_equal(trellis_status_name(TRELLIS_ERR_LAYOUT),
                      "TRELLIS_ERR_LAYOUT");
}

static void test_bad_dims(void **state) {
  (void)state;
  static const int64_t bad[] = {0, -128, 64, 16, 130, 200, 1000};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char given[32];
    snprintf(given, sizeof given, "got %lld", (long long)bad[i]);
    trellis_weight w = valid_weight();
    w.k = bad[i];
    expect_failure(&w, TRELLIS_ERR_SHAPE, "weight.k", given);
    assert_non_null(strstr(trellis_last_error(), "multiple of 128"));
    w = valid_weight();
    w.n = bad[i];
    expect_failure(&w, TRELLIS_ERR_SHAPE, "weight.n", given);
  }
  trellis_weight w = valid_weight();
  w.k = (int64_t)1 << 40; /* k * n * bits overflows */
  w.n = (int64_t)1 << 40;
  expect_failure(&w, TRELLIS_ERR_SHAPE, "overflow", NULL);
}

static void test_bad_bits(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.bits = 0;
  expect_failure(&w, TRELLIS_ERR_SHAPE, "weight.bits", "got 0");
  assert_non_null(strstr(trellis_last_error(), "1..8"));
  assert_int_equal(trellis_weight_payload_bytes(&w), 0);
  w.bits = 9;
  expect_failure(&w, TRELLIS_ERR_SHAPE, "weight.bits", "got 9");
  w.bits = -3;
  expect_failure(&w, TRELLIS_ERR_SHAPE, "weight.bits", "got -3");
}

static void test_bad_codebook(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.codebook = (trellis_codebook)5;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.codebook", "got 5");
  w.codebook = (trellis_codebook)-1;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.codebook", "got -1");
}

static void test_null_trellis(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.trellis = NULL;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "weight.trellis", "NULL");
}

static void test_sign_forms(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.su = su; /* both suh and su */
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "suh and su", "both");
  w.su = NULL;
  w.suh = NULL; /* neither */
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "suh and su", "neither");
  w = valid_weight();
  w.sv = sv;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "svh and sv", "both");
  w.sv = NULL;
  w.svh = NULL;
  expect_failure(&w, TRELLIS_ERR_INVALID_ARGUMENT, "svh and sv", "neither");
}

static void test_payload_bytes(void **state) {
  (void)state;
  assert_int_equal(trellis_weight_payload_bytes(NULL), 0);
  trellis_weight w = valid_weight();
  w.k = 4096;
  w.n = 11008;
  w.bits = 3;
  assert_int_equal(trellis_weight_payload_bytes(&w),
                   (size_t)4096 * 11008 * 3 / 8);
  w.struct_size = 4;
  assert_int_equal(trellis_weight_payload_bytes(&w), 0);
}

/* Entry points that take a weight validate it first. */
static void test_users_validate(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  w.bits = 9;
  uint16_t out[16];
  float f[16];
  assert_int_equal(trellis_decode_weight(&w, out), TRELLIS_ERR_SHAPE);
  assert_int_equal(trellis_dense_weight(&w, f), TRELLIS_ERR_SHAPE);
  assert_int_equal(trl_weight_scales(&w, f, f), TRELLIS_ERR_SHAPE);
  w = valid_weight();
  assert_int_equal(trellis_decode_weight(&w, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "w_hat"));
  assert_int_equal(trellis_dense_weight(&w, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "dense"));
  assert_int_equal(trl_weight_scales(&w, NULL, f),
                   TRELLIS_ERR_INVALID_ARGUMENT);
}

static void test_scales(void **state) {
  (void)state;
  trellis_weight w = valid_weight();
  for (int i = 0; i < 256; i++)
    suh[i] = trellis_f32_to_f16((float)(i - 100) / 32.0f);
  w.svh = NULL;
  w.sv = sv;
  for (int j = 0; j < 8; j++)
    sv[j] = (int16_t)(uint16_t)(0x1111u * (unsigned)j + 0x8001u);
  float s_in[256], s_out[128];
  assert_int_equal(trl_weight_scales(&w, s_in, s_out), TRELLIS_OK);
  for (int i = 0; i < 256; i++)
    assert_true(s_in[i] == (float)(i - 100) / 32.0f);
  for (int j = 0; j < 128; j++) {
    const int bit = ((uint16_t)sv[j / 16] >> (j % 16)) & 1;
    assert_true(s_out[j] == (bit ? -1.0f : 1.0f));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_and_valid),
      cmocka_unit_test(test_null_and_struct_size),
      cmocka_unit_test(test_layout),
      cmocka_unit_test(test_bad_dims),
      cmocka_unit_test(test_bad_bits),
      cmocka_unit_test(test_bad_codebook),
      cmocka_unit_test(test_null_trellis),
      cmocka_unit_test(test_sign_forms),
      cmocka_unit_test(test_payload_bytes),
      cmocka_unit_test(test_users_validate),
      cmocka_unit_test(test_scales),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
