/* SPDX-License-Identifier: Apache-2.0 */
/* Register-direct decode-GEMM unit 2: the variants of the rate at position
 * 2 of TRL_DIRECT_RATES, see direct_gemm.cuh and dispatch.cuh. */
#include "direct_gemm.cuh"
#include "dispatch_unit.cuh"

TRL_DISPATCH_UNIT(trl::direct::Direct, 2)
