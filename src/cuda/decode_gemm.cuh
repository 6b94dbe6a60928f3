/* SPDX-License-Identifier: Apache-2.0 */
/* Decode-GEMM of the generic path: partial[s][m][n] = rotated[m][k_s] .
 * W_hat[k_s][n] for the k-split s, fp32 accumulation on the tensor cores.
 *
 * CTA = 8 warps over a 128-column strip (8 tile columns) and a contiguous
 * range of k. Weights and activations stream through a cp.async ring of
 * stages, each 8 tile rows deep (128 k): a stage's weights are 8 groups of
 * the lane layout (one tile row of the strip each, format/lanes.h), staged
 * word-major (lanes.cuh). Warps split the strip along n (WN) and the stage's
 * tile rows along k (WK); k-partners are summed in shared memory at the end, so
 * results are deterministic. */
#ifndef TRL_CUDA_DECODE_GEMM_CUH
#define TRL_CUDA_DECODE_GEMM_CUH

#include "common.cuh"
#include "dispatch.cuh"
#include "kernels.h"
#include "lanes.cuh"
#include "tile_decode.cuh"
#include "wgmma.cuh"

#include <cuda_runtime.h>
#include <type_traits>

namespace trl {
namespace gemm {

constexpr int kThreads = 256;
constexpr int kNT = 8; /* tile columns per CTA (128 outputs) */
constexpr int kSK = 8; /* tile rows per stage (128 k) */
constexpr int kApitch =
    128 + 8; /* fp16 per A row in smem: +16 B vs bank conflicts */

template <int MB> struct Layout {
  static constexpr int WN = MB == 1 ? 2 : (MB == 2 ? 4 : 8);
  static constexpr int WK = 8 / WN;
  static constexpr int NTW = kNT / WN; /* tile columns per warp */
};

/* On sm_90a every m-block variant multiplies with wgmma: each warp owns one
 * tile column and its decoded tile is the A operand (the weight transposed:
 * 16 n x 16 k in the mma A layout), the activations are B in shared memory,
 * 16*MB tokens wide; a warpgroup covers 64 columns. Elsewhere mma.sync with
 * the warps split over n (WN) and k (WK) as Layout says. */
constexpr bool kWgmma = TRL_WGMMA != 0;

/* HF 1: the half-integer rate K + 1/2 (MUL1; 2K + 1 half-bits a weight). */
template <int K, int HF = 0> __host__ __device__ constexpr int stage_w_bytes() {
  return kSK * kNT * 16 * (2 * K + HF);
}
template <int MB> __host__ __device__ constexpr int stage_a_bytes() {
  return 16 * MB * kApitch * 2;
}
/* Every stage's activations stay 1024-byte aligned for wgmma (the 128-byte
 * swizzle repeats every 8 rows of 128 B): stages are rounded up to 1 KiB
 * and the ring starts at the first aligned byte of the dynamic shared
 * memory, which gets 1 KiB of slack. The same layout serves mma.sync. */
constexpr int kRingAlign = 1024;
template <int K, int MB, int HF = 0>
__host__ __device__ constexpr int stage_bytes() {
  return (stage_w_bytes<K, HF>() + stage_a_bytes<MB>() + kRingAlign - 1) /
         kRingAlign * kRingAlign;
}

/* An SQG codebook decodes through a state -> value table of the layer's K
 * in shared memory (one lookup a weight instead of the graph and T12:
 * docs/TUNING.md, "Decode-GEMM: an SQG codebook through a state table"):
 * 65536 E4M3 codes (sqg_e4m3) or fp16 values (sqg_fp16), after the ring. */
template <int CB> __host__ __device__ constexpr int sqg_table_bytes() {
  return CB == TRELLIS_CB_SQG_E4M3   ? 65536
         : CB == TRELLIS_CB_SQG_FP16 ? 131072
                                     : 0;
}

/* Ring depth: 2 CTAs/SM still fit with the large A stages of MB 4 and 8;
 * MB 1 and 2 keep 3 CTAs/SM, with one stage less for K >= 7 since the
 * stages are 1 KiB-aligned. For MB 1 the deeper ring beats a fourth CTA
 * per SM (docs/TUNING.md, "Decode-GEMM: ring depth and CTAs per SM"). With
 * an SQG table, as many stages (at least
 * two) as leave room for two CTAs per SM (sqg_e4m3) or one (sqg_fp16) in
 * the H100/H200's 228 KiB (1 KiB of it reserved per CTA). */
template <int K, int MB, int CB = TRELLIS_CB_MCG, int HF = 0>
__host__ __device__ constexpr int ring_stages() {
  constexpr int base = MB == 8 ? 2 : (MB == 4 || K >= 7 ? 3 : 4);
  constexpr int table = sqg_table_bytes<CB>();
  constexpr int ctas = CB == TRELLIS_CB_SQG_E4M3 ? 2 : 1;
  constexpr int room = 228 * 1024 / ctas - 1024 - table - kRingAlign;
  constexpr int fit = room / stage_bytes<K, MB, HF>();
  return table == 0 ? base : fit < 2 ? 2 : fit > base ? base : fit;
}
/* The ring (or, after it, the CTA's reduction) of one K. */
template <int K, int MB, int CB, int HF = 0>
__host__ __device__ constexpr int region_bytes() {
  constexpr int ring = ring_stages<K, MB, CB, HF>() * stage_bytes<K, MB, HF>();
  constexpr int red = Layout<MB>::WK * 16 * MB * 128 * 4;
  return ring > red ? ring : red;
}
template <int K, int MB, int CB = TRELLIS_CB_MCG>
__host__ __device__ constexpr int smem_bytes() {
  return region_bytes<K, MB, CB>() + kRingAlign;
}
/* Where an SQG table starts (from the ring's base): after the larger
 * region of a pair's two records (K1 = 0: a uniform layer). */
template <int K, int K1, int MB, int CB, int HF = 0>
__host__ __device__ constexpr int table_offset() {
  return K1 == 0 || region_bytes<K, MB, CB, HF>() >= region_bytes<K1, MB, CB>()
             ? region_bytes<K, MB, CB, HF>()
             : region_bytes<K1, MB, CB>();
}
/* A kernel's dynamic shared memory: a pair's CTAs run either record's K. */
template <int K, int K1, int MB, int CB, int HF = 0>
__host__ __device__ constexpr int kernel_smem_bytes() {
  return table_offset<K, K1, MB, CB, HF>() + sqg_table_bytes<CB>() + kRingAlign;
}
/* The ring's base inside the dynamic shared memory. */
__device__ __forceinline__ char *ring_base(char *smem) {
  const uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  return smem + ((kRingAlign - (s & (kRingAlign - 1))) & (kRingAlign - 1));
}

struct Params {
  const int16_t *trellis;
  const int16_t *trellis1; /* a pair's record1 */
  const uint16_t *rotated;
  float *partial;
  const void *sqg_state[2]; /* SQG: state tables of record0's K, record1's */
  int64_t m, k, n;
  int rate_axis;    /* a pair's (trellis_rate_axis) */
  int kt_per_split; /* tile rows per split, multiple of kSK */
  HotShifts shifts; /* see tile_decode.cuh */
  int pdl;          /* launch as a dependent (host side only) */
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&a)[4],
                                            const void *smem) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
               : "r"(s));
}

/* Byte offset of activation (row r, k column col; col % 4 == 0) in a
 * stage's activation area. wgmma: 128-byte swizzle, K-major: two 64-k
 * halves of 16*MB rows of 128 B; the 16-byte chunk j of row r sits at
 * chunk j ^ (r % 8). mma.sync: rows of kApitch halves. Either way 16 rows
 * further down is a constant step (a_step16). */
template <int MB>
__host__ __device__ constexpr uint32_t a_offset(int r, int col) {
  if constexpr (kWgmma) {
    const int c16 = col >> 3;
    return (uint32_t)((c16 >> 3) * 16 * MB * 128 + r * 128 +
                      (((c16 & 7) ^ (r & 7)) * 16) + (col & 7) * 2);
  } else {
    return (uint32_t)((r * kApitch + col) * 2);
  }
}
template <int MB> constexpr uint32_t a_step16 = a_offset<MB>(16, 0);

/* Per-thread cp.async streams of one CTA: the addresses of this thread's
 * copies of a stage are computed once; each issued stage only adds a
 * constant stride (tile rows are n/16 tiles apart; A advances 128 k).
 *
 * Weights: warp w copies the group of the stage's tile row w (kSK = 8
 * warps) into the staged arrangement (GroupCopy, lanes.cuh), in which the
 * decode's loads meet no bank conflict: in the lane layout as stored, 32
 * lanes loading one word each meet 4 to a bank. The copies are 4 bytes
 * each, 2K per thread and stage (16-byte copies of the stored layout took
 * K / 2). */
template <int K, int MB, int HF = 0> struct Loader {
  static constexpr int kTileBytes = 16 * (2 * K + HF);
  static constexpr int kRowBytes = kNT * kTileBytes; /* one tile row's run */
  static_assert(kThreads == 32 * kSK, "one warp per tile row of a stage");
  static constexpr int kAChunks = 16 * MB * 16; /* 16*MB rows x 128 k */
  static constexpr int kAPer = kAChunks / kThreads;
  static_assert(kAChunks % kThreads == 0, "whole activation chunks");

  const char *wsrc; /* this lane's first word of its group */
  uint32_t wgroup;  /* its staged group in a stage */
  GroupCopy<K, HF> wcopy;
  /* Activation chunk i of this thread is row 16 i + threadIdx.x / 16 of
   * the stage, so its shared-memory offset is adst + i * a_step16: kept
   * as one base, or the compiler rematerialises each chunk's swizzled
   * offset every stage (~8 instructions a chunk: 64 a stage at eight
   * m-blocks, where the registers are capped). */
  const char *asrc[kAPer];
  uint32_t adst;
  uint32_t asize[kAPer]; /* 16, or 0 to zero-fill rows past m */
  int64_t wstride;       /* bytes between stages in the payload */

  /* The payload is a tile array [.][n/16][16K] read from tile row kt0,
   * tile column nt0; the activations from column 16 * akt0 (the same as
   * kt0 but for a pair's record1 on the k axis). */
  __device__ __forceinline__ void init(const int16_t *trellis, int64_t n,
                                       const uint16_t *rotated, int64_t m,
                                       int64_t k, int64_t kt0, int64_t akt0,
                                       int nt0, int64_t row0) {
    const int64_t row_stride = (n / 16) * (int64_t)kTileBytes;
    wstride = kSK * row_stride;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    wsrc = reinterpret_cast<const char *>(trellis) + (kt0 + warp) * row_stride +
           (int64_t)nt0 * kTileBytes + 4 * lane;
    wgroup = (uint32_t)(warp * kRowBytes);
    wcopy = GroupCopy<K, HF>(lane);
    const int r0 = threadIdx.x >> 4, col = (threadIdx.x & 15) * 8;
    adst = (uint32_t)stage_w_bytes<K, HF>() + a_offset<MB>(r0, col);
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int r = r0 + 16 * i;
      const bool valid = row0 + r < m;
      asrc[i] = reinterpret_cast<const char *>(
          rotated + (valid ? row0 + r : 0) * k + akt0 * 16 + col);
      asize[i] = valid ? 16u : 0u;
    }
  }
  /* The next stage of each stream into the buffer at `stage`; stages are
   * issued in order, so each source only advances by a constant. */
  __device__ __forceinline__ void issue_w(uint32_t stage) {
    wcopy.issue(stage + wgroup, wsrc);
    wsrc += wstride;
  }
  __device__ __forceinline__ void issue_a(uint32_t stage) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      cp_async16_raw(stage + adst + i * a_step16<MB>, asrc[i], asize[i]);
      asrc[i] += 256;
    }
  }
};

template <int MB> struct Acc {
  float v[Layout<MB>::NTW][2][MB][4];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int a = 0; a < Layout<MB>::NTW; ++a)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int mb = 0; mb < MB; ++mb)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            v[a][h][mb][e] = 0.f;
  }
};

/* The wgmma accumulators: D[64 columns x 16*MB tokens] of the warp's
 * warpgroup, this thread's 8*MB values in the wgmma D layout. */
template <int MB> struct WAcc {
  float d[8 * MB];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < 8 * MB; ++i)
      d[i] = 0.f;
  }
};
template <int MB> using AccFor = std::conditional_t<kWgmma, WAcc<MB>, Acc<MB>>;

/* Where this lane's tiles of a group are (lanes.cuh), fixed once per
 * kernel: the tiles a warp decodes sit at the same places in every group
 * of every stage. wgmma: warp w decodes tile w of each group; mma.sync:
 * warp (wn, wk) tiles wn * NTW + a (a = 0 .. NTW-1). */
template <int K, int HF> struct TileOf { using type = LaneTile<K>; };
template <int K> struct TileOf<K, 1> { using type = HalfTile<K>; };
template <int K, int MB, int HF = 0> struct StageTiles {
  static constexpr int kTiles = kWgmma ? 1 : Layout<MB>::NTW;
  using Tile = typename TileOf<K, HF>::type;
  Tile t[kTiles];
  __device__ __forceinline__ StageTiles(int lane, int warp) {
#pragma unroll
    for (int a = 0; a < kTiles; ++a)
      t[a] = Tile(lane, kWgmma ? warp : (warp % Layout<MB>::WN) * kTiles + a);
  }
};

/* The B fragments of a lane's tile of the staged group at `group`. */
template <int K, int CB, bool BF16>
__device__ __forceinline__ void tile_frags(const LaneTile<K> &t,
                                           const char *group, uint32_t (&b)[4],
                                           const HotShifts &sh, uint32_t tab) {
  uint32_t w[TileGeom<K>::kNW];
  t.fetch(group, w);
  decode_stage_frags<K, CB, BF16>(w, 0, b, sh, tab);
}
template <int K, int CB, bool BF16>
__device__ __forceinline__ void tile_frags(const HalfTile<K> &t,
                                           const char *group, uint32_t (&b)[4],
                                           const HotShifts &, uint32_t) {
  decode_half_tile<K, CB, BF16>(t, group, b);
}

/* Decodes this warp's tiles of one resident stage and accumulates. The
 * tile words are read at per-lane offsets computed once per kernel (`lt`).
 * The weights are the B operand here: as the A operand (no B-fragment
 * pack) they were slower or rounded W_hat differently (docs/TUNING.md,
 * "Decode-GEMM: the weights as the B operand, wgmma groups of two tiles"). */
template <int K, int CB, int MB, bool BF16, int HF>
__device__ __forceinline__ void
compute_stage(const char *stage, Acc<MB> &acc, const StageTiles<K, MB, HF> &lt,
              int lane, int, int wk, const HotShifts &sh, uint32_t tab) {
  using L = Layout<MB>;
  constexpr int kGroupBytes = Loader<K, MB, HF>::kRowBytes;
  const char *wbase = stage + wk * kGroupBytes;
  const uint16_t *as =
      reinterpret_cast<const uint16_t *>(stage + stage_w_bytes<K, HF>());
#pragma unroll
  for (int ii = 0; ii < kSK / L::WK; ++ii) {
    const int kr = wk + ii * L::WK;
    uint32_t afrag[MB][4];
#pragma unroll
    for (int mb = 0; mb < MB; ++mb) {
      int mat = lane >> 3;
      int r = mb * 16 + (mat & 1) * 8 + (lane & 7);
      int c = kr * 16 + (mat >> 1) * 8;
      ldmatrix_x4(afrag[mb], as + r * kApitch + c);
    }
#pragma unroll
    for (int a = 0; a < L::NTW; ++a) {
      uint32_t b[4];
      tile_frags<K, CB, BF16>(lt.t[a], wbase + ii * L::WK * kGroupBytes, b, sh,
                              tab);
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        mma16816<BF16>(acc.v[a][0][mb], afrag[mb], b[0], b[1]);
        mma16816<BF16>(acc.v[a][1][mb], afrag[mb], b[2], b[3]);
      }
    }
  }
}

#if TRL_WGMMA
/* The same with wgmma: warp w decodes tile column w of every tile row of
 * the stage; per tile row its warpgroup issues one m64n(16*MB)k16, two
 * tile rows to a wgmma group (kGroup). One group stays in flight while the
 * next decodes; all are complete when this returns (the stage's buffer is
 * refilled after the next barrier). */
template <int K, int CB, int MB, bool BF16, int HF>
__device__ __forceinline__ void
compute_stage(const char *stage, WAcc<MB> &acc, const StageTiles<K, MB, HF> &lt,
              int, int, int, const HotShifts &sh, uint32_t tab) {
  constexpr int kGroupBytes = Loader<K, MB, HF>::kRowBytes, N = 16 * MB;
  /* the stage's activations; k-steps advance 32 B inside a 64-k half,
   * 8-row groups are 1 KiB */
  const uint64_t desc = wgmma_desc_sw128(
      (uint32_t)__cvta_generic_to_shared(stage + stage_w_bytes<K, HF>()), 1024);
  auto desc_of = [&](int kr) {
    return wgmma_desc_advance(desc, (kr >> 2) * N * 128 + (kr & 3) * 32);
  };
  auto decode_a = [&](int kr, uint32_t(&a)[4]) {
    uint32_t b[4];
    tile_frags<K, CB, BF16>(lt.t[0], stage + kr * kGroupBytes, b, sh, tab);
    /* B fragment (k rows 2q.., column g) = A fragment of the transpose */
    a[0] = b[0], a[1] = b[2], a[2] = b[1], a[3] = b[3];
  };
  /* Tiles per wgmma group: one fence, commit and wait per two tiles (one
   * group in flight while the next two decode), which beats single tiles
   * and groups of four (docs/TUNING.md, "Decode-GEMM: the weights as the B
   * operand, wgmma groups of two tiles"). Single tiles for the
   * 8-m-block variant and for K <= 2, where pairs cost enough registers to
   * lose a CTA per SM (not with an SQG table: its shared memory already
   * allows only two, and the lookups need the pair's independent loads). */
  constexpr int kGroup = MB <= 4 && (K >= 3 || is_sqg(CB)) ? 2 : 1;
#pragma unroll
  for (int kr = 0; kr < kSK; kr += kGroup) {
    uint32_t a[kGroup][4];
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
      decode_a(kr + g, a[g]);
    wgmma_fence();
#pragma unroll
    for (int g = 0; g < kGroup; ++g)
      Wgmma<N, BF16>::run(acc.d, a[g], desc_of(kr + g));
    wgmma_commit();
    wgmma_wait<1>();
  }
  wgmma_wait<0>();
#pragma unroll
  for (int i = 0; i < 8 * MB; ++i)
    wgmma_pin(acc.d[i]);
}

/* red[token][column] from the wgmma accumulators (no k-warps to sum). */
template <int MB>
__device__ __forceinline__ void reduce_cta(const WAcc<MB> &acc, float *red,
                                           int lane, int, int) {
  const int g = lane >> 2, q = lane & 3;
  const int col = 16 * (threadIdx.x >> 5) + g;
#pragma unroll
  for (int j = 0; j < 2 * MB; ++j) {
    const int tok = 8 * j + 2 * q;
    red[tok * 128 + col] = acc.d[4 * j];
    red[(tok + 1) * 128 + col] = acc.d[4 * j + 1];
    red[tok * 128 + col + 8] = acc.d[4 * j + 2];
    red[(tok + 1) * 128 + col + 8] = acc.d[4 * j + 3];
  }
  __syncthreads();
}
#endif

/* Sums the CTA's accumulators over its k-warps into red[16*MB][128] (fp32,
 * shared). Ends with __syncthreads(); the ring must be drained before. */
template <int MB>
__device__ __forceinline__ void reduce_cta(const Acc<MB> &acc, float *red,
                                           int lane, int wn, int wk) {
  using L = Layout<MB>;
  const int g = lane >> 2, q = lane & 3;
  float *base = red + (wk * 16 * MB) * 128;
  /* k-warp w writes its slice red[w]; slice 0 then holds the sum. */
#pragma unroll
  for (int a = 0; a < L::NTW; ++a)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int mb = 0; mb < MB; ++mb) {
        int col = (wn * L::NTW + a) * 16 + h * 8 + 2 * q;
        int r = mb * 16 + g;
        *reinterpret_cast<float2 *>(base + r * 128 + col) =
            make_float2(acc.v[a][h][mb][0], acc.v[a][h][mb][1]);
        *reinterpret_cast<float2 *>(base + (r + 8) * 128 + col) =
            make_float2(acc.v[a][h][mb][2], acc.v[a][h][mb][3]);
      }
  __syncthreads();
  if constexpr (L::WK > 1) {
    for (int i = threadIdx.x; i < 16 * MB * 128; i += kThreads) {
      float s = red[i];
#pragma unroll
      for (int w = 1; w < L::WK; ++w)
        s += red[w * 16 * MB * 128 + i];
      red[i] = s;
    }
    __syncthreads();
  }
}

/* Where a stage's activations come from: cp.async copies of the rotated
 * input (the default), or a source that writes them itself after the
 * stage in flight has been computed (the fused kernel's local rotation). */
struct CopiedActivations {
  template <class Ld>
  __device__ __forceinline__ void issue(Ld &ld, uint32_t st, int) {
    ld.issue_a(st);
  }
  __device__ __forceinline__ void finish(char *, int) {}
};

/* The activations of the ring's first kStages - 1 stages, one commit group
 * per stage, from the source `act`. The caller has issued the weights of
 * those stages before, in one group of their own, so that they stream in
 * while a dependent launch waits for the previous kernel. */
template <int K, int MB, class Act, int CB = TRELLIS_CB_MCG, int HF = 0>
__device__ __forceinline__ void
prime_activations(Loader<K, MB, HF> &ld, char *smem, int nstages, Act &act) {
  constexpr int kStages = ring_stages<K, MB, CB, HF>();
  constexpr int SB = stage_bytes<K, MB, HF>();
  const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nstages) {
      act.issue(ld, ring + s * SB, s);
      act.finish(smem + s * SB, s);
    }
    cp_async_commit();
  }
}

/* The ring's steady state, shared by the generic and the fused kernel:
 * stage `it` is decoded while stage it + kStages - 1 streams in. The
 * caller has issued the first kStages - 1 stages in at most kStages - 1
 * commit groups. Returns with the ring drained and the CTA synchronised.
 * tab: an SQG codebook's state table in shared memory (sqg_table_bytes). */
template <int K, int CB, int MB, bool BF16, class Act = CopiedActivations,
          int HF = 0>
__device__ __forceinline__ void
run_ring(Loader<K, MB, HF> &ld, char *smem, int nstages, AccFor<MB> &acc,
         const StageTiles<K, MB, HF> &lt, int lane, int wn, int wk,
         const HotShifts &sh, Act act = Act(), uint32_t tab = 0) {
  constexpr int kStages = ring_stages<K, MB, CB, HF>();
  constexpr int SB = stage_bytes<K, MB, HF>();
  const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem);
  for (int it = 0; it < nstages; ++it) {
    cp_async_wait<kStages - 2>();
#if TRL_WGMMA
    fence_proxy_async_smem(); /* the stage is read by the async proxy */
#endif
    __syncthreads();
    const int nxt = it + kStages - 1;
    if (nxt < nstages) {
      const uint32_t st = ring + (nxt % kStages) * SB;
      ld.issue_w(st);
      act.issue(ld, st, nxt);
    }
    cp_async_commit();
    compute_stage<K, CB, MB, BF16, HF>(smem + (it % kStages) * SB, acc, lt,
                                       lane, wn, wk, sh, tab);
    if (nxt < nstages)
      act.finish(smem + (nxt % kStages) * SB, nxt);
  }
  cp_async_wait<0>();
  __syncthreads();
}

/* One CTA of the generic path's decode-GEMM: nstages stages of a tile
 * array [.][wn/16][16K] from tile row kt0 and tile column nt0 (activations
 * from k column 16 * akt0) into out[m][128] (row pitch p.n), the CTA's
 * columns of one k-split's partial slice. An SQG codebook's state table
 * (`table`, of this K) is copied to `tab` with the first stages. */
template <int K, int CB, int MB, bool BF16, int HF = 0>
__device__ __forceinline__ void
gemm_cta(const Params &p, char *smem, const int16_t *trellis, int64_t wn,
         int64_t kt0, int64_t akt0, int nt0, int nstages, float *out,
         const void *table, char *tab) {
  using L = Layout<MB>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn_ = warp % L::WN, wk = warp / L::WN;
  const int64_t row0 = (int64_t)blockIdx.z * 16 * MB;

  AccFor<MB> acc;
  acc.zero();
  const StageTiles<K, MB, HF> lt(lane, warp);
  constexpr int SB = stage_bytes<K, MB, HF>();
  Loader<K, MB, HF> ld;
  ld.init(trellis, wn, p.rotated, p.m, p.k, kt0, akt0, nt0, row0);
  const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem);
  const uint32_t tab_s = (uint32_t)__cvta_generic_to_shared(tab);
  if constexpr (is_sqg(CB)) {
    /* written once at prepare: readable before griddep_wait */
    const char *src = static_cast<const char *>(table);
    for (int i = threadIdx.x; i < sqg_table_bytes<CB>() / 16; i += kThreads)
      cp_async16_raw(tab_s + 16 * i, src + 16 * i, 16u);
  }
#pragma unroll
  for (int s = 0; s < ring_stages<K, MB, CB, HF>() - 1; ++s)
    if (s < nstages)
      ld.issue_w(ring + s * SB);
  cp_async_commit();
  /* As a dependent launch (launch_dependent), the weights stream in before
   * the input rotation has finished; the rotated rows and our partials wait
   * for it. */
  griddep_wait();
  griddep_launch_dependents();
  CopiedActivations copied;
  prime_activations<K, MB, CopiedActivations, CB, HF>(ld, smem, nstages,
                                                      copied);
  run_ring<K, CB, MB, BF16, CopiedActivations, HF>(
      ld, smem, nstages, acc, lt, lane, wn_, wk, p.shifts, copied, tab_s);

  float *red = reinterpret_cast<float *>(smem);
  reduce_cta<MB>(acc, red, lane, wn_, wk);
  for (int i = threadIdx.x; i < 16 * MB * 32; i += kThreads) {
    int r = i / 32, c4 = (i % 32) * 4;
    int64_t row = row0 + r;
    if (row < p.m)
      *reinterpret_cast<float4 *>(out + row * p.n + c4) =
          *reinterpret_cast<const float4 *>(red + r * 128 + c4);
  }
}

/* The generic path's decode-GEMM: one k-split of one 128-column strip.
 * K1 != 0: a pair, whose CTAs each run one record (a CTA-uniform branch):
 *  - rate axis n (n = 256): strip r is record r, [k/16][8][16 K_r];
 *  - rate axis k (k = 256, two splits of 8 tile rows): split r is record r,
 *    [8][n/16][16 K_r], over activation columns 128 r ..; the output
 *    stage sums the splits, so the records' products meet before the
 *    output rotation. */
template <int K, int CB, int MB, bool BF16, int K1, int HF>
__global__ void __launch_bounds__(kThreads) dq_gemm_kernel(Params p) {
  extern __shared__ __align__(16) char smem_raw[];
  char *smem = ring_base(smem_raw);
  char *tab = smem + table_offset<K, K1, MB, CB, HF>();
  const int nt0 = blockIdx.x * kNT;
  const int64_t kt_begin = (int64_t)blockIdx.y * p.kt_per_split;
  const int64_t kt_end = min(kt_begin + p.kt_per_split, p.k / 16);
  const int nstages = (int)((kt_end - kt_begin) / kSK);
  float *out = p.partial + (int64_t)blockIdx.y * p.m * p.n + (int64_t)nt0 * 16;
  if constexpr (K1 == 0) {
    gemm_cta<K, CB, MB, BF16, HF>(p, smem, p.trellis, p.n, kt_begin, kt_begin,
                                  nt0, nstages, out, p.sqg_state[0], tab);
  } else {
    const bool on_n = p.rate_axis == TRELLIS_RATE_AXIS_N;
    const int rec = on_n ? (int)blockIdx.x : (int)blockIdx.y;
    const int16_t *tr = rec ? p.trellis1 : p.trellis;
    /* the record's own tile array: 8 tile columns (axis n) or 8 tile
     * rows from its first (axis k) */
    const int64_t wn = on_n ? 128 : p.n;
    const int64_t kt0 = on_n ? kt_begin : 0;
    const int rnt0 = on_n ? 0 : nt0;
    const void *table = p.sqg_state[rec];
    if constexpr (K1 == K) {
      gemm_cta<K, CB, MB, BF16>(p, smem, tr, wn, kt0, kt_begin, rnt0, nstages,
                                out, table, tab);
    } else {
      if (rec == 0)
        gemm_cta<K, CB, MB, BF16>(p, smem, tr, wn, kt0, kt_begin, rnt0, nstages,
                                  out, table, tab);
      else
        gemm_cta<K1, CB, MB, BF16>(p, smem, tr, wn, kt0, kt_begin, rnt0,
                                   nstages, out, table, tab);
    }
  }
}

/* A pair's (K0, K1): the kinds of format/pair.h. */
constexpr bool pair_bits(int k0, int k1) {
  return (k0 == 2 && (k1 == 2 || k1 == 4)) || (k0 == 3 && k1 == 3) ||
         (k0 == 4 && (k1 == 3 || k1 == 4));
}

/* The decode-GEMM family (see dispatch.cuh). Its variants are spread over
 * eight translation units by bitrate (gemm_k1.cu .. gemm_k8.cu, units 0..7)
 * so that they compile in parallel. The last axis is a pair's record1 K
 * (0: uniform); pairs exist for the codebooks that pair, every codebook at
 * its K range only (format/codebooks.h). */
struct Gemm {
  static constexpr const char *kName = "decode-GEMM";
  using Axes = dispatch::Axes<dispatch::BitsAxis, dispatch::CodebookAxis,
                              dispatch::ComputeAxis, dispatch::MBlocksAxis,
                              dispatch::Bits1Axis, dispatch::HalfAxis>;
  static constexpr int kUnits = 8;
  struct Args {
    const Params *p; /* launch */
    dim3 grid;
    cudaStream_t stream;
    int regs;    /* query: registers per thread */
    size_t smem; /* query: shared memory, dynamic and static */
  };
  template <int K, int CB, int DT, int MB, int K1, int HF>
  static constexpr bool exists() {
    if constexpr (HF)
      return K1 == 0 && trl_codebook_has_half(CB) && K >= TRL_HALF_MIN_BITS &&
             K <= TRL_HALF_MAX_BITS;
    else if constexpr (K1 == 0)
      return codebook_has_bits<CB, K>();
    else
      return trl_codebook_pairs(CB) && pair_bits(K, K1);
  }
  template <int K, int CB, int DT, int MB, int K1, int HF>
  static auto kernel() {
    return &dq_gemm_kernel<K, CB, MB, DT == TRELLIS_BF16, K1, HF>;
  }
  template <int K, int CB, int DT, int MB, int K1, int HF>
  static int prepare(Args &) {
    cudaFuncAttributes attr;
    cudaError_t e =
        cudaFuncGetAttributes(&attr, kernel<K, CB, DT, MB, K1, HF>());
    if (e != cudaSuccess)
      return (int)e;
    return (int)cudaFuncSetAttribute(
        kernel<K, CB, DT, MB, K1, HF>(),
        cudaFuncAttributeMaxDynamicSharedMemorySize,
        kernel_smem_bytes<K, K1, MB, CB, HF>());
  }
  template <int K, int CB, int DT, int MB, int K1, int HF>
  static int launch(Args &a) {
    return (int)launch_dependent(
        kernel<K, CB, DT, MB, K1, HF>(), a.grid, dim3(kThreads),
        kernel_smem_bytes<K, K1, MB, CB, HF>(), a.stream, a.p->pdl != 0, *a.p);
  }
  template <int K, int CB, int DT, int MB, int K1, int HF>
  static int query(Args &a) {
    cudaFuncAttributes attr;
    cudaError_t e =
        cudaFuncGetAttributes(&attr, kernel<K, CB, DT, MB, K1, HF>());
    a.regs = e == cudaSuccess ? attr.numRegs : -1;
    a.smem = kernel_smem_bytes<K, K1, MB, CB, HF>() +
             (e == cudaSuccess ? attr.sharedSizeBytes : 0);
    return (int)e;
  }
};

} // namespace gemm
} // namespace trl

#endif
