/* SPDX-License-Identifier: Apache-2.0 */
/* Decodes W_hat (or a column slice of it) to a dense fp16/bf16 row-major
 * matrix, for the large-M path that hands the GEMM to cuBLASLt. The payload
 * is in the lane layout (format/lanes.h): every kernel stages whole groups
 * (8 tiles of a tile row, n0 and n_cols being multiples of 128) in shared
 * memory, word-major (GroupCopy), and decodes a tile from its group
 * (LaneTile, lanes.cuh). Every kernel writes
 * rows of ldd elements (a pair's record lands in its sub-block of the
 * slice) and stages the SQG tables first (sqg_stage). */
#include "common.cuh"
#include "dispatch.cuh"
#include "kernels.h"
#include "lanes.cuh"
#include "tile_decode.cuh"

#include <cuda_runtime.h>

using namespace trl;

namespace {

constexpr int kWarps = 8;

/* The lane-layout bytes of the group of tile row kt, tile columns nt0 ..
 * nt0 + 7 (nt0 a multiple of 8), from this lane's first word on
 * (GroupCopy's source). */
template <int K>
__device__ __forceinline__ const char *
group_src(const int16_t *__restrict__ trellis, int64_t n, int64_t kt,
          int64_t nt0, int lane) {
  return reinterpret_cast<const char *>(trellis +
                                        (kt * (n / 16) + nt0) * 16 * K) +
         4 * lane;
}

/* The warp stages that group in `words` (shared, 64 K words; lanes.cuh). */
template <int K>
__device__ __forceinline__ void stage_group(const int16_t *__restrict__ trellis,
                                            int64_t n, int64_t kt, int64_t nt0,
                                            uint32_t *words, int lane) {
  GroupCopy<K>(lane).issue((uint32_t)__cvta_generic_to_shared(words),
                           group_src<K>(trellis, n, kt, nt0, lane));
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
}

/* One warp per group: its 8 tiles decoded one after the other, each
 * through shared memory so every lane stores 16 bytes. */
template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kWarps)
    reconstruct_kernel(const int16_t *__restrict__ trellis, int64_t k,
                       int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                       const trl_sqg_tables *sqg, uint16_t *__restrict__ dst) {
  __shared__ __align__(16) uint16_t tile_s[kWarps][16 * 16];
  __shared__ __align__(16) uint32_t group_s[kWarps][64 * K];
  if constexpr (is_sqg(CB)) {
    sqg_stage<CB, BF16>(sqg);
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t groups_c = n_cols / 128;
  const int64_t g = (int64_t)blockIdx.x * kWarps + warp;
  if (g >= (k / 16) * groups_c)
    return;
  const int64_t kt = g / groups_c, gc = g % groups_c;
  stage_group<K>(trellis, n, kt, n0 / 16 + 8 * gc, group_s[warp], lane);
  const char *group = reinterpret_cast<const char *>(group_s[warp]);
  const int q = lane & 3, c = lane >> 2, r = lane >> 1, half = lane & 1;
  uint16_t *ts = tile_s[warp];
  uint16_t *out = dst + (kt * 16 + r) * ldd + gc * 128 + half * 8;
#pragma unroll 1
  for (int u = 0; u < 8; ++u) {
    uint32_t b[4];
    decode_lane_tile<K, CB, BF16>(LaneTile<K>(lane, u), group, b);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      int col = c + 8 * h;
      ts[(2 * q) * 16 + col] = (uint16_t)(b[2 * h] & 0xFFFF);
      ts[(2 * q + 1) * 16 + col] = (uint16_t)(b[2 * h] >> 16);
      ts[(2 * q + 8) * 16 + col] = (uint16_t)(b[2 * h + 1] & 0xFFFF);
      ts[(2 * q + 9) * 16 + col] = (uint16_t)(b[2 * h + 1] >> 16);
    }
    __syncwarp();
    *reinterpret_cast<uint4 *>(out + 16 * u) =
        *reinterpret_cast<const uint4 *>(ts + r * 16 + half * 8);
    __syncwarp(); /* read before the next tile overwrites it */
  }
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

/* fwht over the first index of z (8 tiles), for every (i, j). */
__device__ __forceinline__ void fwht_outer(float (&z)[8][2][4]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float v[8];
#pragma unroll
      for (int t = 0; t < 8; ++t)
        v[t] = z[t][i][j];
      fwht(v);
#pragma unroll
      for (int t = 0; t < 8; ++t)
        z[t][i][j] = v[t];
    }
}

/* The 8x8 matrix of 16-bit values a warp holds one word per lane (row L/4,
 * columns 2(L%4) and +1, the lower column in the low half: the mma fragment
 * layout), transposed in the same layout. */
__device__ __forceinline__ uint32_t transpose8x8(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;"
               : "=r"(y)
               : "r"(x));
  return y;
}

/* H16[i][j] and H16[i][j + 1] (natural Sylvester order, +-1) as fp16. */
__device__ __forceinline__ uint32_t h16_pair(int i, int j) {
  const uint32_t lo = (__popc(i & j) & 1) ? 0xBC00u : 0x3C00u;
  const uint32_t hi = (__popc(i & (j + 1)) & 1) ? 0xBC00u : 0x3C00u;
  return lo | hi << 16;
}

/* The lane's mma fragments of H16 (symmetric) as the A operand, and as the
 * B operand for output columns 0..7 (b[0]) and 8..15 (b[1]). Built where
 * they are used, so that neither stays live across a kernel's phases. */
struct H16A {
  uint32_t a[4];
  __device__ __forceinline__ explicit H16A(int lane) {
    const int g = lane >> 2, q = lane & 3;
    a[0] = h16_pair(g, 2 * q);
    a[1] = h16_pair(g + 8, 2 * q);
    a[2] = h16_pair(g, 2 * q + 8);
    a[3] = h16_pair(g + 8, 2 * q + 8);
  }
};
struct H16B {
  uint32_t b[2][2];
  __device__ __forceinline__ explicit H16B(int lane) {
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      b[h][0] = h16_pair(8 * h + g, 2 * q);
      b[h][1] = h16_pair(8 * h + g, 2 * q + 8);
    }
  }
};

/* D = A(16x16) * B(16x8), fp16 operands, fp32 result (no accumulator). */
__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4],
                                        uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1),
                 "f"(0.f));
}

/* One warp: Z = W_hat[tile row kt][columns c0, c0 + 128) . H128,
 * unnormalised, in the mma C layout: z[u][h][e] is row g + 8 (e >> 1),
 * column 16u + 8h + 2q + (e & 1) of the 16 x 128 block (g = L / 4,
 * q = L % 4). A decoded tile is the B operand of W_hat (rows = k); moved
 * to the A operand (movmatrix), one mma per 8 output columns multiplies it
 * by H16 (column bits 0..3, exact: +-1 products summed in fp32), and the
 * butterflies over the tiles u (column bits 4..6) run in registers.
 * `words` (shared, 64 K words) receives the block's group. */
template <int K, int CB>
__device__ __forceinline__ void
right_h128(const int16_t *__restrict__ trellis, int64_t n, int64_t kt,
           int64_t c0, uint32_t *words, int lane, float (&z)[8][2][4]) {
  stage_group<K>(trellis, n, kt, c0 / 16, words, lane);
  const H16B hf(lane);
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    uint32_t b[4];
    decode_lane_tile<K, CB, false>(LaneTile<K>(lane, u),
                                   reinterpret_cast<const char *>(words), b);
    const uint32_t a[4] = {transpose8x8(b[0]), transpose8x8(b[1]),
                           transpose8x8(b[2]), transpose8x8(b[3])};
#pragma unroll
    for (int h = 0; h < 2; ++h)
      mma_f16(z[u][h], a, hf.b[h][0], hf.b[h][1]);
  }
  fwht_outer(z);
}

constexpr int kHadWarps = 4;
constexpr int kHadPitch = 128 + 8; /* halves per staged row */

/* W' = W_hat . Hblk . diag(post): the output rotation folded into the
 * weight (FORMAT.md §6.3: y = x~ . W_hat . Hblk . diag(svh)), for the
 * dense path when the input rotation stays a pass of its own. One warp per
 * 16 x 128 block, staged in shared memory (fp16) so each row leaves as 256
 * contiguous bytes; dst is [k][n_cols] for columns [n0, n0 + n_cols). */
template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kHadWarps)
    reconstruct_had_kernel(const int16_t *__restrict__ trellis, int64_t k,
                           int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                           const trl_sqg_tables *sqg,
                           const uint16_t *__restrict__ post,
                           uint16_t *__restrict__ dst) {
  static_assert(8 * 8 * K <= 8 * kHadPitch, "words fit in the staging rows");
  __shared__ __align__(16) uint32_t stage_s[kHadWarps][8 * kHadPitch];
  if constexpr (is_sqg(CB)) {
    sqg_stage<CB, false>(sqg); /* decoded in fp16, rounded once to DT */
    __syncthreads();
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  /* 32-bit index math: the grid is < 2^31 units (a 64-bit division is
   * ~3x the instructions) */
  const int blocks_c = (int)(n_cols / 128);
  const int unit = (int)blockIdx.x * kHadWarps + warp;
  if (unit >= (int)(k / 16) * blocks_c)
    return;
  const int64_t kt = unit / blocks_c, jb = unit % blocks_c;
  float z[8][2][4];
  uint32_t *st = stage_s[warp];
  right_h128<K, CB>(trellis, n, kt, n0 + jb * 128, st, lane, z);
  __syncwarp(); /* the payload words alias the staging rows */
  const int g = lane >> 2, q = lane & 3;
  const uint16_t *sv = post + n0 + jb * 128 + 2 * q;
  uint32_t *st0 = st + g * (kHadPitch / 2) + q, *st1 = st0 + 4 * kHadPitch;
  constexpr int DT = BF16 ? TRELLIS_BF16 : TRELLIS_F16;
#pragma unroll
  for (int u = 0; u < 8; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = 16 * u + 8 * h;
      const float2 p =
          __half22float2(*reinterpret_cast<const __half2 *>(sv + col));
      const float s0 = __fmul_rn(r_scale(), p.x);
      const float s1 = __fmul_rn(r_scale(), p.y);
      const float *v = z[u][h];
      st0[col / 2] =
          pack2_from_float<DT>(__fmul_rn(v[0], s0), __fmul_rn(v[1], s1));
      st1[col / 2] =
          pack2_from_float<DT>(__fmul_rn(v[2], s0), __fmul_rn(v[3], s1));
    }
  __syncwarp();
  /* 16 rows x 16 chunks of 8 columns, 256 contiguous bytes per row */
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int chunk = lane + 32 * i, row = chunk >> 4, c16 = chunk & 15;
    *reinterpret_cast<uint4 *>(dst + (kt * 16 + row) * ldd + jb * 128 +
                               8 * c16) =
        *reinterpret_cast<const uint4 *>(st + row * (kHadPitch / 2) + 4 * c16);
  }
}

/* W = diag(pre) . Hblk . W_hat . Hblk . diag(post): both rotations folded
 * (exllamav3's reconstruct_had), so the dense GEMM multiplies x itself. One
 * CTA per 128 x 128 block (8 groups, staged by the CTA); warp w takes tile
 * column w (tile w of each group, 8 tiles down k):
 *  - H16 from the left (row bits 0..3): an mma with the decoded tile as
 *    the B operand, exact; the butterflies over the 8 tiles (row bits
 *    4..6) in registers;
 *  - H16 from the right (column bits 0..3): the fp32 result is already in
 *    the A operand's layout; as fp16 hi + lo halves (exact to ~2^-22: the
 *    values are bounded by 128 * max|W_hat| < 512, no overflow) two mmas
 *    per 8 columns; the result goes to shared memory (fp32);
 *  - a thread then takes one row and 8 columns of each tile column: the
 *    butterflies over the 8 tile columns (column bits 4..6), the scales,
 *    16-byte stores.
 * 69 KB of shared memory and at most 80 registers (a few spill on some
 * instantiations): 3 CTAs per SM, so that 6144x1024 runs in one wave. */
constexpr int kFullWarps = 8;
constexpr int kFullPitch = 128 + 8; /* floats: conflict-free float2 writes */

/* Column of (row, col) in the fp32 block: odd rows swap the two float4
 * halves of each 8-column group, so that the 16-byte reads of 4 rows x 2
 * groups by 8 lanes hit distinct banks (8 banks per row step otherwise). */
__device__ __forceinline__ int swizzle(int row, int col) {
  return col ^ ((row & 1) << 2);
}
constexpr size_t kFullSmemBytes = (size_t)(128 * kFullPitch + 128) * 4;

/* Issues the cp.async copies of the CTA's 8 groups (group i: tile row
 * kt0 + i, tile columns nt0 .. nt0 + 7, staged by warp i) to words +
 * i * pitch, one commit group per pair of groups, so the decode of the
 * first pair starts while the rest is in flight (every thread commits all
 * four, empty but for its warp's group). */
template <int K>
__device__ __forceinline__ void
issue_group_pairs(const int16_t *__restrict__ trellis, int64_t n, int64_t kt0,
                  int64_t nt0, uint32_t *words, int pitch) {
  static_assert(kFullWarps == 8, "a warp per group");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const GroupCopy<K> copy(lane);
  const uint32_t dst = (uint32_t)__cvta_generic_to_shared(words + warp * pitch);
  const char *src = group_src<K>(trellis, n, kt0 + warp, nt0, lane);
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    if (warp / 2 == g)
      copy.issue(dst, src);
    cp_async_commit();
  }
}

template <int K, int CB, bool BF16>
__global__ void __launch_bounds__(32 * kFullWarps, 3)
    reconstruct_full_kernel(const int16_t *__restrict__ trellis, int64_t k,
                            int64_t n, int64_t n0, int64_t n_cols, int64_t ldd,
                            const trl_sqg_tables *sqg,
                            const uint16_t *__restrict__ pre,
                            const uint16_t *__restrict__ post,
                            uint16_t *__restrict__ dst) {
  extern __shared__ __align__(16) char smem[];
  if constexpr (is_sqg(CB)) {
    sqg_stage<CB, false>(sqg); /* decoded in fp16, rounded once to DT */
    __syncthreads();
  }
  float *f = reinterpret_cast<float *>(smem);
  float *col_scale = f + 128 * kFullPitch;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t blocks_c = n_cols / 128;
  const int64_t kb = blockIdx.x / blocks_c, jb = blockIdx.x % blocks_c;
  static_assert(64 * K <= 16 * kFullPitch, "a group fits in 16 rows");
  uint32_t *words = reinterpret_cast<uint32_t *>(f); /* group i at row 16 i */
  issue_group_pairs<K>(trellis, n, kb * 8, n0 / 16 + jb * 8, words,
                       16 * kFullPitch);
  if (threadIdx.x < 128)
    col_scale[threadIdx.x] = __fmul_rn(
        r_scale(),
        __half2float(__ushort_as_half(post[n0 + jb * 128 + threadIdx.x])));
  float z[8][2][4]; /* [tile t][column half h][C fragment] */
  const H16A ha(lane);
  const LaneTile<K> lt(lane, warp);
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    if (t % 2 == 0) { /* pair t / 2 landed (groups complete in order) */
      if (t == 0)
        cp_async_wait<3>();
      else if (t == 2)
        cp_async_wait<2>();
      else if (t == 4)
        cp_async_wait<1>();
      else
        cp_async_wait<0>();
      __syncthreads(); /* every thread's copies of the pair */
    }
    uint32_t b[4];
    decode_lane_tile<K, CB, false>(
        lt, reinterpret_cast<const char *>(words + t * 16 * kFullPitch), b);
    mma_f16(z[t][0], ha.a, b[0], b[1]);
    mma_f16(z[t][1], ha.a, b[2], b[3]);
  }
  fwht_outer(z);
  __syncthreads(); /* every warp's payload words are consumed */
  const int g = lane >> 2, q = lane & 3;
  const H16B hf(lane);
#pragma unroll
  for (int t = 0; t < 8; ++t) {
    /* A operand of the tile: rows g, g+8 x columns 2q.., 2q+8.. */
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float x0 = z[t][i >> 1][2 * (i & 1)];
      const float x1 = z[t][i >> 1][2 * (i & 1) + 1];
      hi[i] = pack2_from_float<TRELLIS_F16>(x0, x1);
      const float2 r =
          __half22float2(*reinterpret_cast<const __half2 *>(&hi[i]));
      lo[i] = pack2_from_float<TRELLIS_F16>(x0 - r.x, x1 - r.y);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float y[4];
      mma_f16(y, hi, hf.b[h][0], hf.b[h][1]);
      mma16816<false>(y, lo, hf.b[h][0], hf.b[h][1]);
      float *p =
          f + (16 * t + g) * kFullPitch + swizzle(g, 16 * warp + 8 * h + 2 * q);
      *reinterpret_cast<float2 *>(p) = make_float2(y[0], y[1]);
      *reinterpret_cast<float2 *>(p + 8 * kFullPitch) = make_float2(y[2], y[3]);
    }
  }
  __syncthreads();
  /* thread: row r, columns 16u + 8c .. 16u + 8c + 7 of every tile column u */
  const int r = threadIdx.x >> 1, c = threadIdx.x & 1;
  float v[8][2][4];
#pragma unroll
  for (int u = 0; u < 8; ++u)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float4 a = *reinterpret_cast<const float4 *>(
          f + r * kFullPitch + 16 * u + swizzle(r, 8 * c + 4 * i));
      v[u][i][0] = a.x, v[u][i][1] = a.y, v[u][i][2] = a.z, v[u][i][3] = a.w;
    }
  fwht_outer(v);
  const int64_t row = kb * 128 + r;
  const float rs =
      __fmul_rn(r_scale(), __half2float(__ushort_as_half(pre[row])));
  constexpr int DT = BF16 ? TRELLIS_BF16 : TRELLIS_F16;
  uint16_t *out = dst + row * ldd + jb * 128 + 8 * c;
#pragma unroll
  for (int u = 0; u < 8; ++u) {
    const float *cs = col_scale + 16 * u + 8 * c;
    const float4 s0 = *reinterpret_cast<const float4 *>(cs);
    const float4 s1 = *reinterpret_cast<const float4 *>(cs + 4);
    const float sc[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    float o[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      o[e] = __fmul_rn(__fmul_rn(v[u][e / 4][e % 4], sc[e]), rs);
    *reinterpret_cast<uint4 *>(out + 16 * u) = make_uint4(
        pack2_from_float<DT>(o[0], o[1]), pack2_from_float<DT>(o[2], o[3]),
        pack2_from_float<DT>(o[4], o[5]), pack2_from_float<DT>(o[6], o[7]));
  }
}

/* The reconstruct family (see dispatch.cuh): form 0 decodes W_hat
 * (reconstruct_kernel), 1 folds the output rotation in
 * (reconstruct_had_kernel), 2 both rotations (reconstruct_full_kernel). */
struct FormAxis : dispatch::Axis<0, 1, 2> {
  static constexpr const char *kName = "form";
};

struct Reconstruct {
  static constexpr const char *kName = "reconstruct";
  using Axes = dispatch::Axes<FormAxis, dispatch::BitsAxis,
                              dispatch::CodebookAxis, dispatch::ComputeAxis>;
  struct Args {
    const trl_reconstruct_args *r; /* launch */
    cudaStream_t stream;
  };
  template <int FORM, int K, int CB, int DT> static constexpr bool exists() {
    return codebook_has_bits<CB, K>();
  }
  template <int FORM, int K, int CB, int DT> static auto kernel() {
    constexpr bool kBf16 = DT == TRELLIS_BF16;
    if constexpr (FORM == 2)
      return &reconstruct_full_kernel<K, CB, kBf16>;
    else if constexpr (FORM == 1)
      return &reconstruct_had_kernel<K, CB, kBf16>;
    else
      return &reconstruct_kernel<K, CB, kBf16>;
  }
  /* the image check; the full form also needs its shared memory */
  template <int FORM, int K, int CB, int DT> static int prepare(Args &) {
    if constexpr (FORM == 2) {
      return (int)cudaFuncSetAttribute(
          kernel<FORM, K, CB, DT>(),
          cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kFullSmemBytes);
    } else {
      cudaFuncAttributes attr;
      return (int)cudaFuncGetAttributes(&attr, kernel<FORM, K, CB, DT>());
    }
  }
  template <int FORM, int K, int CB, int DT> static int launch(Args &a) {
    const auto kern = kernel<FORM, K, CB, DT>();
    const trl_reconstruct_args &r = *a.r;
    if constexpr (FORM == 2) {
      const unsigned grid = (unsigned)((r.k / 128) * (r.n_cols / 128));
      kern<<<grid, 32 * kFullWarps, kFullSmemBytes, a.stream>>>(
          r.trellis, r.k, r.n, r.n0, r.n_cols, r.ldd, r.sqg, r.pre, r.post,
          r.dst);
    } else if constexpr (FORM == 1) {
      const int64_t units = (r.k / 16) * (r.n_cols / 128);
      const unsigned grid = (unsigned)((units + kHadWarps - 1) / kHadWarps);
      kern<<<grid, 32 * kHadWarps, 0, a.stream>>>(
          r.trellis, r.k, r.n, r.n0, r.n_cols, r.ldd, r.sqg, r.post, r.dst);
    } else {
      const int64_t groups = (r.k / 16) * (r.n_cols / 128);
      const unsigned grid = (unsigned)((groups + kWarps - 1) / kWarps);
      kern<<<grid, 32 * kWarps, 0, a.stream>>>(r.trellis, r.k, r.n, r.n0,
                                               r.n_cols, r.ldd, r.sqg, r.dst);
    }
    return (int)cudaGetLastError();
  }
};

} // namespace

extern "C" int trl_reconstruct_prepare(int bits, trellis_codebook codebook) {
  Reconstruct::Args a = {};
  return dispatch::for_each_value<dispatch::ComputeAxis>([&](auto dt) {
    return dispatch::for_each_value<FormAxis>([&](auto form) {
      return dispatch::run<Reconstruct>(
          dispatch::Op::kPrepare,
          {form.value, bits, (int)codebook, (int)dt.value}, a);
    });
  });
}

extern "C" int trl_launch_reconstruct(trl_recon_form form,
                                      const trl_reconstruct_args *r,
                                      void *stream) {
  Reconstruct::Args a = {r, (cudaStream_t)stream};
  return dispatch::run<Reconstruct>(
      dispatch::Op::kLaunch,
      {(int)form, r->bits, (int)r->codebook, (int)r->dst_dtype}, a);
}
