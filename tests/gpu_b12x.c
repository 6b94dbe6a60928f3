/* The b12x formats on the GPU side: trellis_weight_upload copies a pair's
 * two records into one allocation (record0 || record1, as in a checkpoint)
 * and reads no more than the caller's struct_size; trellis_plan_create
 * refuses SQG codebooks and pairs with TRELLIS_ERR_UNSUPPORTED (they run on
 * the CPU only in this version). */
#include "gpu_util.h"

#include "format/pair.h"

static void fill(int16_t *p, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i)
    p[i] = (int16_t)(uint16_t)(seed + 0x9E37u * (uint32_t)i);
}

static void expect_device_words(const int16_t *device, const int16_t *host,
                                size_t count) {
  int16_t *back = malloc(count * 2);
  assert_non_null(back);
  CK(cudaMemcpy(back, device, count * 2, cudaMemcpyDeviceToHost));
  assert_memory_equal(back, host, count * 2);
  free(back);
}

static void expect_refused(const trellis_weight *dw, const char *needle) {
  trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0);
  trellis_plan *plan = (trellis_plan *)1;
  trellis_clear_error();
  tu_assert_status(trellis_plan_create(dw, &d, &plan), TRELLIS_ERR_UNSUPPORTED);
  assert_null(plan);
  tu_assert_error_has(needle);
  tu_assert_error_has("CPU");
}

static void test_pair_upload_and_refusal(void **state) {
  (void)state;
  const int64_t orth = 256;
  const size_t w0 = trl_pair_record_words(orth, 2);
  const size_t w1 = trl_pair_record_words(orth, 4);
  int16_t *rec0 = malloc(w0 * 2), *rec1 = malloc(w1 * 2);
  uint16_t *suh = malloc((size_t)orth * 2), *svh = malloc(256 * 2);
  assert_true(rec0 && rec1 && suh && svh);
  fill(rec0, w0, 0x1234);
  fill(rec1, w1, 0xBEEF);
  for (int64_t i = 0; i < orth; ++i)
    suh[i] = 0x3C00;
  for (int i = 0; i < 256; ++i)
    svh[i] = 0x2C00;
  trellis_weight h;
  trellis_weight_init(&h);
  h.k = orth;
  h.n = 256;
  h.codebook = TRELLIS_CB_SQG_E4M3;
  h.pair = TRELLIS_PAIR_P24;
  h.rate_axis = TRELLIS_RATE_AXIS_N;
  h.bits = 2;
  h.bits1 = 4;
  h.trellis = rec0; /* two separate host arrays */
  h.trellis1 = rec1;
  h.suh = suh;
  h.svh = svh;
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&h, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  assert_non_null(dw);
  assert_int_equal(dw->pair, TRELLIS_PAIR_P24);
  assert_ptr_equal(dw->trellis1, dw->trellis + w0);
  expect_device_words(dw->trellis, rec0, w0);
  expect_device_words(dw->trellis1, rec1, w1);
  expect_refused(dw, "P24");
  trellis_device_weight_destroy(dwh);
  free(rec0);
  free(rec1);
  free(suh);
  free(svh);
}

static void test_sqg_refusal_and_v1_struct(void **state) {
  (void)state;
  gw g;
  gw_random(&g, 256, 256, 3, TRELLIS_CB_SQG_E4M3, 0, 0, 7);
  /* a caller of the first version: nothing past its struct is read (the
   * bytes after it would be an invalid pair kind), and the handle's view is
   * a full-size uniform weight */
  struct {
    trellis_weight w;
    unsigned char tail[64];
  } host;
  memset(&host, 0xA5, sizeof host);
  memcpy(&host.w, &g.w, TRELLIS_WEIGHT_SIZE_V1);
  host.w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1;
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&host.w, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  assert_non_null(dw);
  assert_int_equal(dw->struct_size, sizeof(trellis_weight));
  assert_int_equal(dw->pair, TRELLIS_PAIR_NONE);
  assert_null(dw->trellis1);
  expect_device_words(dw->trellis, g.trellis, 256 / 16 * 256 / 16 * 48);
  expect_refused(dw, "sqg_e4m3");
  trellis_device_weight_destroy(dwh);
  const unsigned char *bytes = (const unsigned char *)&host;
  for (size_t i = TRELLIS_WEIGHT_SIZE_V1; i < sizeof host; ++i)
    assert_int_equal(bytes[i], 0xA5);

  g.w.codebook = TRELLIS_CB_SQG_FP16;
  g.w.bits = 5;
  g.w.k = 128; /* 8 x 16 tiles of 80 words fit in the K3 payload */
  OK(trellis_weight_upload(&g.w, &dwh));
  expect_refused(trellis_device_weight_view(dwh), "sqg_fp16");
  trellis_device_weight_destroy(dwh);
  gw_free(&g);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pair_upload_and_refusal),
      cmocka_unit_test(test_sqg_refusal_and_v1_struct),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
