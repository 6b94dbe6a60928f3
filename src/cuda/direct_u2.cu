/* SPDX-License-Identifier: Apache-2.0 */
/* Register-direct and k-major decode-GEMM unit 2: the variants of the rate
 * at position 2 of TRL_DIRECT_RATES, see direct_gemm.cuh, kmajor_gemm.cuh
 * and dispatch.cuh. */
#include "direct_gemm.cuh"
#include "dispatch_unit.cuh"
#include "kmajor_gemm.cuh"

TRL_DISPATCH_UNIT(trl::direct::Direct, 2)
TRL_DISPATCH_UNIT(trl::kmajor::KMajor, 2)
