/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel dispatch layer: a variant this build does not compile is an
 * error that names the family, the key and what the build has, never a
 * default variant. The launchers reject such a key before any CUDA call,
 * so this test needs no GPU (it runs in every CUDA build). */
#include "testutil.h"

#include "cuda/kernels.h"
#include "plan/cuda_status.h"

#include <string.h>

#define UNSUPPORTED(call)                                                      \
  do {                                                                         \
    trellis_clear_error();                                                     \
    assert_int_equal((call), TRL_KERNEL_UNSUPPORTED);                          \
  } while (0)

static void test_gemm(void **state) {
  (void)state;
  UNSUPPORTED(trl_gemm_prepare(9, 0, 0, TRELLIS_CB_MCG, TRELLIS_F16));
  tu_assert_error_has("decode-GEMM: no kernel variant for bits 9");
  tu_assert_error_has("this build has bits 1, 2, 3, 4, 5, 6, 7, 8");
  UNSUPPORTED(trl_gemm_prepare(0, 0, 0, TRELLIS_CB_MCG, TRELLIS_F16));
  tu_assert_error_has("bits 0");
  UNSUPPORTED(trl_gemm_prepare(4, 0, 0, (trellis_codebook)7, TRELLIS_F16));
  tu_assert_error_has("codebook 7");
  UNSUPPORTED(trl_gemm_prepare(4, 0, 0, TRELLIS_CB_MUL1, TRELLIS_F32));
  tu_assert_error_has("compute dtype 2");
  tu_assert_error_has("this build has compute dtype 0, 1");

  trl_gemm_args a;
  memset(&a, 0, sizeof a);
  a.m = 40;
  a.k = a.n = 256;
  a.bits = 6;
  a.codebook = TRELLIS_CB_3INST;
  a.compute = TRELLIS_F16;
  a.splits = 1;
  a.kt_per_split = 16;
  a.m_blocks = 3;
  UNSUPPORTED(trl_launch_gemm(&a, NULL));
  tu_assert_error_has("m_blocks 3");
  tu_assert_error_has("this build has m_blocks 1, 2, 4, 8");
  a.m_blocks = 0;
  UNSUPPORTED(trl_launch_gemm(&a, NULL));
  assert_int_equal(
      trl_gemm_ctas_per_sm(9, 0, 0, TRELLIS_CB_MCG, TRELLIS_F16, 1), 0);
  /* SQG codebooks at their K only; pairs are the kinds of format/pair.h
   * on MCG and SQG_E4M3 */
  UNSUPPORTED(trl_gemm_prepare(4, 0, 0, TRELLIS_CB_SQG_FP16, TRELLIS_F16));
  tu_assert_error_has("decode-GEMM: no kernel variant for the combination");
  UNSUPPORTED(trl_gemm_prepare(7, 0, 0, TRELLIS_CB_SQG_E4M3, TRELLIS_F16));
  UNSUPPORTED(trl_gemm_prepare(3, 0, 4, TRELLIS_CB_MCG, TRELLIS_F16));
  tu_assert_error_has("record1 bits 4");
  UNSUPPORTED(trl_gemm_prepare(2, 0, 4, TRELLIS_CB_3INST, TRELLIS_F16));
  UNSUPPORTED(trl_gemm_prepare(2, 0, 4, TRELLIS_CB_SQG_FP16, TRELLIS_BF16));
  UNSUPPORTED(trl_gemm_prepare(2, 0, 5, TRELLIS_CB_MCG, TRELLIS_F16));
  tu_assert_error_has("this build has record1 bits 0, 2, 3, 4");
  /* half-integer rates: MUL1 at K 1.5 .. 3.5, never a pair */
  UNSUPPORTED(trl_gemm_prepare(4, 1, 0, TRELLIS_CB_MUL1, TRELLIS_F16));
  tu_assert_error_has("decode-GEMM: no kernel variant for the combination");
  tu_assert_error_has("half 1");
  UNSUPPORTED(trl_gemm_prepare(2, 1, 0, TRELLIS_CB_MCG, TRELLIS_F16));
  UNSUPPORTED(trl_gemm_prepare(2, 1, 2, TRELLIS_CB_MUL1, TRELLIS_BF16));
  UNSUPPORTED(trl_gemm_prepare(2, 2, 0, TRELLIS_CB_MUL1, TRELLIS_F16));
  tu_assert_error_has("this build has half 0, 1");
}

static void test_reconstruct(void **state) {
  (void)state;
  UNSUPPORTED(trl_reconstruct_prepare(6, (trellis_codebook)5));
  tu_assert_error_has("reconstruct: no kernel variant");
  tu_assert_error_has("codebook 5");
  /* SQG codebooks exist at their K range only */
  UNSUPPORTED(trl_reconstruct_prepare(4, TRELLIS_CB_SQG_FP16));
  tu_assert_error_has("reconstruct: no kernel variant for the combination");
  UNSUPPORTED(trl_reconstruct_prepare(7, TRELLIS_CB_SQG_E4M3));
  uint16_t dst[8];
  trl_reconstruct_args r;
  memset(&r, 0, sizeof r);
  r.bits = 6;
  r.codebook = TRELLIS_CB_MCG;
  r.k = r.n = r.n_cols = r.ldd = 128;
  r.dst = dst;
  r.dst_dtype = TRELLIS_F32;
  UNSUPPORTED(trl_launch_reconstruct(TRL_RECON_PLAIN, &r, NULL));
  tu_assert_error_has("compute dtype 2");
  r.bits = 9;
  r.dst_dtype = TRELLIS_F16;
  UNSUPPORTED(trl_launch_reconstruct(TRL_RECON_HAD, &r, NULL));
  r.bits = 2;
  r.codebook = (trellis_codebook)-1;
  r.dst_dtype = TRELLIS_BF16;
  UNSUPPORTED(trl_launch_reconstruct(TRL_RECON_FULL, &r, NULL));
}

static void test_rotations(void **state) {
  (void)state;
  float buf[128];
  UNSUPPORTED(trl_launch_h128(buf, (trellis_dtype)3, buf, TRELLIS_F32, NULL,
                              NULL, 1, 128, 0, NULL));
  tu_assert_error_has("H128 rotation: no kernel variant for input dtype 3");
  UNSUPPORTED(trl_launch_h128(buf, TRELLIS_F32, buf, (trellis_dtype)9, NULL,
                              NULL, 1, 128, 0, NULL));
  tu_assert_error_has("output dtype 9");
  UNSUPPORTED(trl_launch_rot_out(buf, 1, NULL, NULL, buf, (trellis_dtype)4, 1,
                                 128, 0, NULL));
  UNSUPPORTED(
      trl_launch_bias_convert(buf, NULL, buf, (trellis_dtype)4, 1, 128, NULL));
  tu_assert_error_has("bias and conversion");
}

static void test_fused(void **state) {
  (void)state;
  uint16_t buf[8];
  UNSUPPORTED(trl_launch_fused(NULL, buf, TRELLIS_F16, NULL, NULL, NULL, buf,
                               buf, TRELLIS_F16, NULL, 40, 128, 128, 3, 1,
                               TRL_FUSED_CLAIMS, 0, NULL));
  tu_assert_error_has("fused kernel: no kernel variant for m_blocks 3");
}

/* The plan side turns the launcher's answer into TRELLIS_ERR_UNSUPPORTED
 * and keeps the launcher's detail. */
static void test_status(void **state) {
  (void)state;
  UNSUPPORTED(trl_gemm_prepare(9, 0, 0, TRELLIS_CB_MCG, TRELLIS_F16));
  tu_assert_status(trl_cuda_fail(TRL_KERNEL_UNSUPPORTED, "plan"),
                   TRELLIS_ERR_UNSUPPORTED);
  tu_assert_error_has("plan: decode-GEMM: no kernel variant for bits 9");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm),      cmocka_unit_test(test_reconstruct),
      cmocka_unit_test(test_rotations), cmocka_unit_test(test_fused),
      cmocka_unit_test(test_status),
  };
  return TU_RUN_TESTS("gpu_dispatch", tests);
}
