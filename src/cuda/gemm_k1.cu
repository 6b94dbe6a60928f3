/* SPDX-License-Identifier: Apache-2.0 */
/* Decode-GEMM unit 0: the variants of the bitrate at position 0 of
 * TRL_GPU_BITS (K = 1), see decode_gemm.cuh and dispatch.cuh. */
#include "decode_gemm.cuh"
#include "dispatch_unit.cuh"

TRL_DISPATCH_UNIT(trl::gemm::Gemm, 0)
