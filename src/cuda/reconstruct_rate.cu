/* SPDX-License-Identifier: Apache-2.0 */
/* W_hat of the half-integer rates (K 1.5, 2.5, 3.5: MUL1) from the lane
 * layout, for the dense path: dst[k][n_cols] = W_hat[:, n0 .. n0 + n_cols)
 * (the plain form, fp16 or bf16). One warp per group (reconstruct_rate_kernel).
 * The dense path of these rates (from the crossover, or
 * FORCE_DENSE); below it they run the register-direct kernel or the
 * split-K decode-GEMM. */
#include "direct_gemm.cuh"

namespace {

constexpr int kWarps = 4;
/* A warp's 16 x 128 tile of W_hat in shared memory: rows of 128 values and
 * 8 of padding (the lanes' 16-bit stores of one j spread over the banks). */
constexpr int kPitch = 136;

/* The lane's 8 values of tile T (its columns 16T..16T+15) into the warp's
 * staged tile, where the tile permutation puts them. */
template <int H, int T>
__device__ __forceinline__ void stage_tile(const uint32_t (&w)[H],
                                           const uint32_t (&prev)[2 * H],
                                           int lane, uint16_t *tile, int bf16) {
  if constexpr (T < 8) {
    uint32_t s[8];
    trl::direct::tile_states<H, T>(w, prev, s);
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      uint32_t v = trl::decode_state<TRELLIS_CB_MUL1>(s[j]) & 0xFFFFu;
      if (bf16)
        v = trl::f16lo_to_bf16lo(v);
      const int row = 2 * t + (j & 1) + 8 * ((j >> 1) & 1);
      const int col = 16 * T + g + 8 * (j >> 2);
      tile[row * kPitch + col] = (uint16_t)v;
    }
    stage_tile<H, T + 1>(w, prev, lane, tile, bf16);
  }
}

/* One warp per (16-row k-tile, 128-column group): the lane's words as the
 * register-direct kernel reads them (direct_gemm.cuh), decoded into shared
 * memory, then written out a row pair per 16-byte store (256 contiguous
 * bytes a row), not 64 scattered 2-byte stores a lane. */
template <int H>
__global__ void __launch_bounds__(32 * kWarps)
    reconstruct_rate_kernel(const int16_t *__restrict__ payload, int64_t k,
                            int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                            uint16_t *__restrict__ dst, int bf16) {
  __shared__ __align__(16) uint16_t tiles[kWarps][16 * kPitch];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t groups_c = n_cols / 128;
  const int64_t u = (int64_t)blockIdx.x * kWarps + warp;
  if (u >= (k / 16) * groups_c)
    return;
  const int64_t kt = u / groups_c, gl = u % groups_c, ng = n0 / 128 + gl;
  const char *g = reinterpret_cast<const char *>(payload) +
                  (kt * (n / 128) + ng) * (int64_t)(128 * H);
  uint32_t w[H];
  trl::direct::load_group<H>(g, lane, w);
  uint32_t prev[2 * H];
  trl::direct::lower_bits<H>(w, lane, prev);
  uint16_t *tile = tiles[warp];
  stage_tile<H, 0>(w, prev, lane, tile, bf16);
  __syncwarp();
  const int half = lane >> 4, c8 = 8 * (lane & 15);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int row = 2 * i + half;
    const uint4 v = *reinterpret_cast<const uint4 *>(tile + row * kPitch + c8);
    *reinterpret_cast<uint4 *>(dst + (16 * kt + row) * ldd + gl * 128 + c8) = v;
  }
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
