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

/* In-place unnormalised Walsh-Hadamard butterflies over all index bits of
 * v[0..N) (natural Sylvester order, so the stages commute). */
template <int N> __device__ __forceinline__ void fwht(float (&v)[N]) {
#pragma unroll
  for (int h = 1; h < N; h <<= 1)
#pragma unroll
    for (int i = 0; i < N; ++i)
      if (!(i & h)) {
        const float a = v[i], b = v[i + h];
        v[i] = a + b;
        v[i + h] = a - b;
      }
}

constexpr int kHadWarps = 4;
constexpr int kHadPitch = 128 + 4; /* floats per row: conflict-free writes */

/* One warp: the 16 x 128 block of W_hat at tile row kt, columns
 * [c0, c0 + 128), times Hblk from the right, times r_scale * post[col], into
 * rs[16][kHadPitch] (fp32, shared). `words` (shared, 8 * 8K words) receives
 * the block's 8 tiles, which are contiguous in the payload.
 *  - Decoding the 8 tiles leaves lane L holding columns c + 8i (c = L / 4,
 *    i = 0..15) of rows 2q, 2q+1, 2q+8, 2q+9 (q = L % 4): the butterflies
 *    over column bits 3..6 run in registers;
 *  - rs regroups each row into 8-column runs for the butterflies over bits
 *    0..2 (lane: columns 8g..8g+7, g = L % 16, of rows 2u + L / 16). */
template <int K, int CB>
__device__ __forceinline__ void
had_right_block(const int16_t *__restrict__ trellis, int64_t n, int64_t kt,
                int64_t c0, const uint16_t *__restrict__ post, uint32_t *words,
                float *rs, int lane) {
  const uint4 *src = reinterpret_cast<const uint4 *>(
      trellis + (kt * (n / 16) + c0 / 16) * (16 * K));
  uint4 *ws = reinterpret_cast<uint4 *>(words);
  for (int i = lane; i < 16 * K; i += 32)
    ws[i] = src[i];
  __syncwarp();

  float v[4][16]; /* [row 2q, 2q+1, 2q+8, 2q+9][column c + 8i] */
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    uint32_t b[4];
    decode_tile_frags<K, CB, false>(words + t * 8 * K, lane, b);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __half2 lo = *reinterpret_cast<const __half2 *>(&b[2 * h]);
      const __half2 hi = *reinterpret_cast<const __half2 *>(&b[2 * h + 1]);
      v[0][2 * t + h] = __low2float(lo);
      v[1][2 * t + h] = __high2float(lo);
      v[2][2 * t + h] = __low2float(hi);
      v[3][2 * t + h] = __high2float(hi);
    }
  }
#pragma unroll
  for (int r = 0; r < 4; ++r)
    fwht(v[r]);
  __syncwarp(); /* `words` may alias `rs` */

  const int q = lane & 3, c = lane >> 2;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int row = 2 * q + (r & 1) + 8 * (r >> 1);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      rs[row * kHadPitch + c + 8 * i] = v[r][i];
  }
  __syncwarp();

  const int g = lane & 15;
  float sv[2][4], scale[8];
  load4_f16(post, c0 + 8 * g, sv[0]);
  load4_f16(post, c0 + 8 * g + 4, sv[1]);
#pragma unroll
  for (int e = 0; e < 8; ++e)
    scale[e] = __fmul_rn(r_scale(), sv[e / 4][e % 4]);
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    float *p = rs + (2 * u + (lane >> 4)) * kHadPitch + 8 * g;
    float w[8];
    const float4 a = *reinterpret_cast<const float4 *>(p);
    const float4 b = *reinterpret_cast<const float4 *>(p + 4);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
    w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
    fwht(w);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      w[e] = __fmul_rn(w[e], scale[e]);
    *reinterpret_cast<float4 *>(p) = make_float4(w[0], w[1], w[2], w[3]);
    *reinterpret_cast<float4 *>(p + 4) = make_float4(w[4], w[5], w[6], w[7]);
  }
  __syncwarp();
}

/* Eight floats as fp16 / bf16, packed for one 16-byte store. */
template <bool BF16>
__device__ __forceinline__ uint4 pack8(const float4 a, const float4 b) {
  constexpr int DT = BF16 ? 1 : 0;
  return make_uint4(
      pack2_from_float<DT>(a.x, a.y), pack2_from_float<DT>(a.z, a.w),
      pack2_from_float<DT>(b.x, b.y), pack2_from_float<DT>(b.z, b.w));
}

/* W' = W_hat . Hblk . diag(post): the output rotation folded into the
 * weight (EXL3-FORMAT.md 4.2: y = x~ . W_hat . Hblk . diag(svh)), for the
 * dense path when the input rotation stays a pass of its own. One warp per
 * 16 x 128 block; dst is [k][n_cols] for columns [n0, n0 + n_cols). */
template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kHadWarps)
    reconstruct_had_kernel(const int16_t *__restrict__ trellis, int64_t k,
                           int64_t n, int64_t n0, int64_t n_cols,
                           const uint16_t *__restrict__ post,
                           uint16_t *__restrict__ dst) {
  __shared__ __align__(16) uint32_t words_s[kHadWarps][8 * 8 * K];
  __shared__ __align__(16) float rows_s[kHadWarps][16 * kHadPitch];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blocks_c = n_cols / 128;
  const int64_t unit = (int64_t)blockIdx.x * kHadWarps + warp;
  if (unit >= (k / 16) * blocks_c)
    return;
  const int64_t kt = unit / blocks_c, jb = unit % blocks_c;
  const float *rs = rows_s[warp];
  had_right_block<K, CB>(trellis, n, kt, n0 + jb * 128, post, words_s[warp],
                         rows_s[warp], lane);
  /* 16 rows x 16 chunks of 8 columns, coalesced 256 bytes per row */
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const int chunk = lane + 32 * u, row = chunk >> 4, g = chunk & 15;
    const float *p = rs + row * kHadPitch + 8 * g;
    *reinterpret_cast<uint4 *>(dst + (kt * 16 + row) * n_cols + jb * 128 +
                               8 * g) =
        pack8<BF16>(*reinterpret_cast<const float4 *>(p),
                    *reinterpret_cast<const float4 *>(p + 4));
  }
}

/* W = diag(pre) . Hblk . W_hat . Hblk . diag(post): both rotations folded
 * (exllamav3's reconstruct_had), so the dense GEMM multiplies x itself. One
 * CTA per 128 x 128 block: each warp transforms one 16-row tile row from
 * the right (had_right_block, its payload words staged in its own rows),
 * then the CTA runs the 128-point butterflies down each column in two
 * register passes (row bits 3..6, then 0..2). 66 KB of shared memory: 3
 * CTAs per SM. */
constexpr int kFullWarps = 8;
constexpr size_t kFullSmemBytes = (size_t)128 * kHadPitch * 4;

template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kFullWarps)
    reconstruct_full_kernel(const int16_t *__restrict__ trellis, int64_t k,
                            int64_t n, int64_t n0, int64_t n_cols,
                            const uint16_t *__restrict__ pre,
                            const uint16_t *__restrict__ post,
                            uint16_t *__restrict__ dst) {
  extern __shared__ __align__(16) char smem[];
  float *f = reinterpret_cast<float *>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int t = threadIdx.x;
  const int64_t blocks_c = n_cols / 128;
  const int64_t kb = blockIdx.x / blocks_c, jb = blockIdx.x % blocks_c;
  float *rows = f + warp * 16 * kHadPitch;
  static_assert(8 * 8 * K <= 16 * kHadPitch, "words fit in the warp's rows");
  had_right_block<K, CB>(trellis, n, kb * 8 + warp, n0 + jb * 128, post,
                         reinterpret_cast<uint32_t *>(rows), rows, lane);
  __syncthreads();
  const int col = t & 127;
  /* row bits 3..6: 8 tasks (r0 = 0..7) per column, two threads per column */
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int r0 = (t >> 7) + 2 * j;
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      v[i] = f[(r0 + 8 * i) * kHadPitch + col];
    fwht(v);
#pragma unroll
    for (int i = 0; i < 16; ++i)
      f[(r0 + 8 * i) * kHadPitch + col] = v[i];
  }
  __syncthreads();
  /* row bits 0..2, * r_scale * pre[row], to fp16 / bf16; a warp stores 32
   * consecutive columns (64 bytes) of a row at a time */
#pragma unroll 2
  for (int j = 0; j < 8; ++j) {
    const int r8 = 8 * ((t >> 7) + 2 * j);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      v[i] = f[(r8 + i) * kHadPitch + col];
    fwht(v);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t row = kb * 128 + r8 + i;
      const float x = __fmul_rn(__fmul_rn(v[i], r_scale()),
                                __half2float(__ushort_as_half(pre[row])));
      store_from_float<BF16 ? 1 : 0>(dst, row * n_cols + jb * 128 + col, x);
    }
  }
}

/* Kernel families: 0 reconstruct_kernel (W_hat), 1 reconstruct_had_kernel
 * (output rotation folded), 2 reconstruct_full_kernel (both folded). */
template <int FAM, int K, int CB, bool BF16> auto kernel_of() {
  if constexpr (FAM == 2)
    return &reconstruct_full_kernel<K, CB, BF16>;
  else if constexpr (FAM == 1)
    return &reconstruct_had_kernel<K, CB, BF16>;
  else
    return &reconstruct_kernel<K, CB, BF16>;
}

template <int FAM, int K, typename F> int rk_cb(int cb, int bf, F &&f) {
  if (cb == 0)
    return bf ? f(kernel_of<FAM, K, 0, true>())
              : f(kernel_of<FAM, K, 0, false>());
  if (cb == 1)
    return bf ? f(kernel_of<FAM, K, 1, true>())
              : f(kernel_of<FAM, K, 1, false>());
  return bf ? f(kernel_of<FAM, K, 2, true>())
            : f(kernel_of<FAM, K, 2, false>());
}

template <int FAM, typename F>
int rk_dispatch(int bits, int cb, int bf, F &&f) {
  switch (bits) {
  case 1:
    return rk_cb<FAM, 1>(cb, bf, f);
  case 2:
    return rk_cb<FAM, 2>(cb, bf, f);
  case 3:
    return rk_cb<FAM, 3>(cb, bf, f);
  case 4:
    return rk_cb<FAM, 4>(cb, bf, f);
  case 5:
    return rk_cb<FAM, 5>(cb, bf, f);
  case 6:
    return rk_cb<FAM, 6>(cb, bf, f);
  case 7:
    return rk_cb<FAM, 7>(cb, bf, f);
  default:
    return rk_cb<FAM, 8>(cb, bf, f);
  }
}

} // namespace

extern "C" int trellis_reconstruct_prepare(int bits, int codebook) {
  auto check = [](auto kern) {
    cudaFuncAttributes attr;
    return (int)cudaFuncGetAttributes(&attr, kern);
  };
  auto allow_smem = [](auto kern) {
    return (int)cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kFullSmemBytes);
  };
  for (int bf = 0; bf < 2; ++bf) {
    int err = rk_dispatch<0>(bits, codebook, bf, check);
    if (!err)
      err = rk_dispatch<1>(bits, codebook, bf, check);
    if (!err)
      err = rk_dispatch<2>(bits, codebook, bf, allow_smem);
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
  return rk_dispatch<0>(bits, codebook, to_bf16, [&](auto kern) {
    kern<<<grid, 32 * kWarps, 0, (cudaStream_t)stream>>>(trellis, k, n, n0,
                                                         n_cols, dst);
    return (int)cudaGetLastError();
  });
}

extern "C" int
trellis_launch_reconstruct_had(const int16_t *trellis, int bits, int codebook,
                               int64_t k, int64_t n, int64_t n0, int64_t n_cols,
                               const uint16_t *post, uint16_t *dst, int to_bf16,
                               void *stream) {
  const int64_t units = (k / 16) * (n_cols / 128);
  const unsigned grid = (unsigned)((units + kHadWarps - 1) / kHadWarps);
  return rk_dispatch<1>(bits, codebook, to_bf16, [&](auto kern) {
    kern<<<grid, 32 * kHadWarps, 0, (cudaStream_t)stream>>>(trellis, k, n, n0,
                                                            n_cols, post, dst);
    return (int)cudaGetLastError();
  });
}

extern "C" int trellis_launch_reconstruct_full(
    const int16_t *trellis, int bits, int codebook, int64_t k, int64_t n,
    int64_t n0, int64_t n_cols, const uint16_t *pre, const uint16_t *post,
    uint16_t *dst, int to_bf16, void *stream) {
  const unsigned grid = (unsigned)((k / 128) * (n_cols / 128));
  return rk_dispatch<2>(bits, codebook, to_bf16, [&](auto kern) {
    kern<<<grid, 32 * kFullWarps, kFullSmemBytes, (cudaStream_t)stream>>>(
        trellis, k, n, n0, n_cols, pre, post, dst);
    return (int)cudaGetLastError();
  });
}
