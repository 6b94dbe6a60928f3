/* SPDX-License-Identifier: Apache-2.0 */
/* W_hat of the half-integer rates (K 1.5, 2.5, 3.5: MUL1) from the lane
 * layout, for the dense path: dst[k][n_cols] = W_hat[:, n0 .. n0 + n_cols)
 * (the plain form, fp16 or bf16). One warp per group: the lane's words as
 * the register-direct kernel reads them (direct_gemm.cuh), its 64 weights
 * decoded to the format's fp16 values, stored where the tile permutation
 * puts them. The dense path of these rates (from the crossover, or
 * FORCE_DENSE); below it they run the register-direct kernel or the
 * split-K decode-GEMM. */
#include "direct_gemm.cuh"

namespace {

constexpr int kWarps = 4;

template <int H, int T>
__device__ __forceinline__ void
store_tile(const uint32_t (&w)[H], const uint32_t (&prev)[2 * H], int lane,
           uint16_t *dst, int64_t ldd, int64_t kt, int64_t col0, int bf16) {
  if constexpr (T < 8) {
    uint32_t s[8];
    trl::direct::tile_states<H, T>(w, prev, s);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t v = trl::decode_state<TRELLIS_CB_MUL1>(s[j]) & 0xFFFFu;
      if (bf16)
        v = trl::f16lo_to_bf16lo(v);
      const int64_t row = 16 * kt + 2 * t + (j & 1) + 8 * ((j >> 1) & 1);
      const int64_t col = col0 + 16 * T + g + 8 * (j >> 2);
      dst[row * ldd + col] = (uint16_t)v;
    }
    store_tile<H, T + 1>(w, prev, lane, dst, ldd, kt, col0, bf16);
  }
}

template <int H>
__global__ void __launch_bounds__(32 * kWarps)
    reconstruct_rate_kernel(const int16_t *__restrict__ payload, int64_t k,
                            int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                            uint16_t *__restrict__ dst, int bf16) {
  const int lane = threadIdx.x & 31;
  const int64_t groups_c = n_cols / 128;
  const int64_t u = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (u >= (k / 16) * groups_c)
    return;
  const int64_t kt = u / groups_c, gl = u % groups_c, ng = n0 / 128 + gl;
  const char *g = reinterpret_cast<const char *>(payload) +
                  (kt * (n / 128) + ng) * (int64_t)(128 * H);
  uint32_t w[H];
  trl::direct::load_group<H>(g, lane, w);
  uint32_t prev[2 * H];
  trl::direct::lower_bits<H>(w, lane, prev);
  store_tile<H, 0>(w, prev, lane, dst, ldd, kt, gl * 128, bf16);
}

template <int H> int launch(const trl_reconstruct_args *a, cudaStream_t s) {
  const int64_t units = (a->k / 16) * (a->n_cols / 128);
  const int64_t blocks = (units + kWarps - 1) / kWarps;
  reconstruct_rate_kernel<H><<<(unsigned)blocks, 32 * kWarps, 0, s>>>(
      a->trellis, a->k, a->n, a->n0, a->n_cols, a->ldd, a->dst,
      a->dst_dtype == TRELLIS_BF16);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int trl_launch_reconstruct_rate(const trl_reconstruct_args *a,
                                           void *stream) {
  if (a->codebook != TRELLIS_CB_MUL1 || a->n0 % 128 || a->n_cols % 128) {
    trl_fail(TRELLIS_ERR_UNSUPPORTED,
             "half-rate reconstruct: MUL1 on 128-column slices only");
    return TRL_KERNEL_UNSUPPORTED;
  }
  cudaStream_t s = (cudaStream_t)stream;
  switch (trl_lanes_rate(a->bits, 1)) {
  case 3:
    return launch<3>(a, s);
  case 5:
    return launch<5>(a, s);
  case 7:
    return launch<7>(a, s);
  }
  trl_fail(TRELLIS_ERR_UNSUPPORTED,
           "half-rate reconstruct: no kernel for K = %d.5", a->bits);
  return TRL_KERNEL_UNSUPPORTED;
}
