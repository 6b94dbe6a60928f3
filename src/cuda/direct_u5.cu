/* SPDX-License-Identifier: Apache-2.0 */
/* Register-direct and k-major decode-GEMM unit 5: the variants of the rate
 * at position 5 of TRL_DIRECT_RATES, see direct_gemm.cuh, kmajor_gemm.cuh
 * and dispatch.cuh. */
#include "direct_gemm.cuh"
#include "dispatch_unit.cuh"
#include "kmajor_gemm.cuh"

TRL_DISPATCH_UNIT(trl::direct::Direct, 5)
TRL_DISPATCH_UNIT(trl::kmajor::KMajor, 5)
