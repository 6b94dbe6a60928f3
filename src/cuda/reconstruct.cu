/* Decodes W_hat (or a column slice of it) to a dense fp16/bf16 row-major
 * matrix, for the large-M path that hands the GEMM to cuBLASLt. One warp per
 * tile; the tile goes through shared memory so every lane stores 16 bytes. */
#include "common.cuh"
#include "kernels.h"
#include "tile_decode.cuh"

#include <cuda_runtime.h>

using namespace trellis;

namespace {

constexpr int kWarps = 8;

template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kWarps)
    reconstruct_kernel(const int16_t *__restrict__ trellis, int64_t k,
                       int64_t n, int64_t n0, int64_t n_cols,
                       uint16_t *__restrict__ dst) {
  __shared__ __align__(16) uint16_t tile_s[kWarps][16 * 16];
  __shared__ __align__(16) uint32_t words_s[kWarps][8 * K];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t tiles_c = n_cols / 16;
  const int64_t t = (int64_t)blockIdx.x * kWarps + warp;
  if (t >= (k / 16) * tiles_c)
    return;
  const int64_t kt = t / tiles_c, ntl = t % tiles_c, nt = n0 / 16 + ntl;
  const uint32_t *src = reinterpret_cast<const uint32_t *>(
      trellis + (kt * (n / 16) + nt) * (16 * K));
  for (int i = lane; i < 8 * K; i += 32)
    words_s[warp][i] = src[i];
  __syncwarp();
  uint32_t b[4];
  decode_tile_frags<K, CB, BF16>(words_s[warp], lane, b);
  const int q = lane & 3, c = lane >> 2;
  uint16_t *ts = tile_s[warp];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int col = c + 8 * h;
    ts[(2 * q) * 16 + col] = (uint16_t)(b[2 * h] & 0xFFFF);
    ts[(2 * q + 1) * 16 + col] = (uint16_t)(b[2 * h] >> 16);
    ts[(2 * q + 8) * 16 + col] = (uint16_t)(b[2 * h + 1] & 0xFFFF);
    ts[(2 * q + 9) * 16 + col] = (uint16_t)(b[2 * h + 1] >> 16);
  }
  __syncwarp();
  const int r = lane >> 1, half = lane & 1;
  const uint4 v = *reinterpret_cast<const uint4 *>(ts + r * 16 + half * 8);
  *reinterpret_cast<uint4 *>(dst + (kt * 16 + r) * n_cols + ntl * 16 +
                             half * 8) = v;
}

template <int K, int CB, bool BF16> auto rk() {
  return &reconstruct_kernel<K, CB, BF16>;
}

template <int K, typename F> int rk_cb(int cb, int bf, F &&f) {
  if (cb == 0)
    return bf ? f(rk<K, 0, true>()) : f(rk<K, 0, false>());
  if (cb == 1)
    return bf ? f(rk<K, 1, true>()) : f(rk<K, 1, false>());
  return bf ? f(rk<K, 2, true>()) : f(rk<K, 2, false>());
}

template <typename F> int rk_dispatch(int bits, int cb, int bf, F &&f) {
  switch (bits) {
  case 1:
    return rk_cb<1>(cb, bf, f);
  case 2:
    return rk_cb<2>(cb, bf, f);
  case 3:
    return rk_cb<3>(cb, bf, f);
  case 4:
    return rk_cb<4>(cb, bf, f);
  case 5:
    return rk_cb<5>(cb, bf, f);
  case 6:
    return rk_cb<6>(cb, bf, f);
  case 7:
    return rk_cb<7>(cb, bf, f);
  default:
    return rk_cb<8>(cb, bf, f);
  }
}

} // namespace

extern "C" int trellis_reconstruct_prepare(int bits, int codebook) {
  for (int bf = 0; bf < 2; ++bf) {
    int err = rk_dispatch(bits, codebook, bf, [](auto kern) {
      cudaFuncAttributes attr;
      return (int)cudaFuncGetAttributes(&attr, kern);
    });
    if (err)
      return err;
  }
  return 0;
}

extern "C" int trellis_launch_reconstruct(const int16_t *trellis, int bits,
                                          int codebook, int64_t k, int64_t n,
                                          int64_t n0, int64_t n_cols,
                                          uint16_t *dst, int to_bf16,
                                          void *stream) {
  const int64_t tiles = (k / 16) * (n_cols / 16);
  const unsigned grid = (unsigned)((tiles + kWarps - 1) / kWarps);
  return rk_dispatch(bits, codebook, to_bf16, [&](auto kern) {
    kern<<<grid, 32 * kWarps, 0, (cudaStream_t)stream>>>(trellis, k, n, n0,
                                                         n_cols, dst);
    return (int)cudaGetLastError();
  });
}
