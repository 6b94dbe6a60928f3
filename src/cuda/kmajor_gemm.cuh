/* SPDX-License-Identifier: Apache-2.0 */
/* The k-major decode-GEMM: the generic path's kernel for a payload in the
 * k-major layout (TRELLIS_LAYOUT_KMAJOR, FORMAT.md "The k-major lane
 * layout"), m rows in blocks of up to 8, 16 or 32 (4 for int8) that one
 * decode serves; its launch shape is trl_kmajor_shape
 * (plan/direct_rules.h).
 *
 *  - Group (kg, nt) is the 8 k-tiles 8 kg .. 8 kg + 7 of n-tile nt,
 *    lane-packed, at index kg * (n / 16) + nt: the groups a warp walks
 *    along n are one contiguous stream.
 *  - Warp w of a CTA of k-split `split` owns the 128-k slice kg = 8 split
 *    + w (a layer of 1, 2 or 4 slices: w mod slices, the CTA's n-tiles
 *    shared among 8 / slices groups of warps, Share): it rotates its slice
 *    of x itself (x * suh, H128, fp16: the input rotation kernel's
 *    arithmetic) and keeps the first 8 rows' B operands of all 8 k-tiles
 *    in registers; it walks the n-tiles of its CTA column (a contiguous
 *    range), one group each. A tile is decoded once (the register-direct
 *    kernel's tile_operands, direct_gemm.cuh: every rate and multiply) and
 *    multiplied by each 8-row sub-block of the CTA's rows: sub-block 0's B
 *    operands from registers, the others' read from shared memory before
 *    the tile's decode, whose instructions hide the read.
 *  - Per round (8 / NB n-tiles, NB the sub-blocks) the warps' sums meet in
 *    shared memory and are added in warp order into the fp32 partials
 *    [split][m][n] (workspace); direct_finish_kernel adds the splits in
 *    order, rotates, scales, biases and stores y. Fixed orders: replays
 *    are bit-identical.
 *  - CTA b is row block b % m_blocks of column (b / m_blocks) % cols of
 *    split b / (m_blocks cols): a weight range's row blocks run together
 *    and share its reads in L2. */
#ifndef TRL_CUDA_KMAJOR_GEMM_CUH
#define TRL_CUDA_KMAJOR_GEMM_CUH

#include "direct_gemm.cuh"

namespace trl {
namespace kmajor {

using namespace trl::direct;

struct KParams {
  const int16_t *payload; /* k-major lane layout */
  const void *x;
  const uint16_t *s_in;
  float *partial; /* [splits][m][n] */
  int64_t m, k, n;
  int in_dtype;
  int rows;     /* rows a block */
  int m_blocks; /* row blocks */
  int splits;   /* CTA rows: 8 slices of 128 k each */
  int cols;     /* CTA columns: contiguous ranges of n-tiles */
};

/* n-tiles a round at one 8-row sub-block: the CTA's sums meet once a round
 * (docs/TUNING.md, "The k-major kernel"); NB sub-blocks meet every 8 / NB
 * n-tiles, so the round's buffer stays the same size. */
constexpr int kRound = 8;
template <int NB> __host__ __device__ constexpr int round_tiles() {
  return kRound / NB;
}
template <int NB> __host__ __device__ constexpr int red_pitch() {
  return 16 * round_tiles<NB>() + 4; /* floats */
}

template <int VAR> __host__ __device__ constexpr int xs_pitch() {
  return VAR == kInt8 ? 144 : 272;
}
/* rows a block: the launch's m of each variant */
template <int VAR, int NB> __host__ __device__ constexpr int block_rows() {
  return VAR == kInt8 ? TRL_DIRECT_INT8_MAX_M : NB * TRL_DIRECT_MAX_M;
}
template <int VAR> __host__ __device__ constexpr int warp_bytes(int m) {
  return ((VAR == kInt8 ? 2 : 1) * m * xs_pitch<VAR>() + 9 * m * 4 + 15) / 16 *
         16;
}
/* a CTA's shared memory: every warp's region for the block's rows, and
 * the round's two buffers of sums */
template <int VAR, int NB> __host__ __device__ constexpr int smem_bytes() {
  return kWarps * warp_bytes<VAR>(block_rows<VAR, NB>()) +
         2 * kWarps * block_rows<VAR, NB>() * red_pitch<NB>() * 4;
}

/* The group's 8 tiles. Tile tau is decoded once; sub-block 0 multiplies it
 * by its B operands bf[tau] (two accumulator chains at NB 1: even and odd
 * tiles; one a sub-block otherwise), sub-block b > 0 by the words it reads
 * from xq (the lane's row g and k 2t of sub-block 0, tile 0; rows past m
 * are zero): plain loads without a branch, which the scheduler may issue
 * ahead of the decode. */
template <int H, int CB, int VAR, int NB, int T>
__device__ __forceinline__ void
km_tiles(const uint32_t (&w)[H], const uint32_t (&prev)[2 * H],
         const BFrags (&bf)[8], const uint32_t *xq,
         float (&cf)[NB][NB == 1 ? 2 : 1][4], int (&ci)[2][4]) {
  if constexpr (T < 8) {
    constexpr int kSub = 8 * xs_pitch<VAR>() / 4, kTile = 32 / 4; /* words */
    XRaw xr[NB > 1 ? NB - 1 : 1];
#pragma unroll
    for (int b = 1; b < NB; ++b) {
      xr[b - 1].a = xq[b * kSub + kTile * T];
      xr[b - 1].b = xq[b * kSub + kTile * T + 4];
    }
    uint32_t a[8];
    tile_operands<H, CB, VAR, T>(w, prev, a);
    tile_apply<VAR>(a, bf[T], cf[0][NB == 1 ? T & 1 : 0], ci[T & 1]);
#pragma unroll
    for (int b = 1; b < NB; ++b)
      tile_apply<VAR>(a, b_frags<VAR>(xr[b - 1]), cf[b][0], ci[0]);
    km_tiles<H, CB, VAR, NB, T + 1>(w, prev, bf, xq, cf, ci);
  }
}

/* A CTA's work: `per` slices of k (8, or all of them where k has fewer,
 * k < 1024), `nw` of them in k (the last split's may be fewer), taken by
 * `groups` = 1 << lg groups of `per` warps (8 / per: a layer of 1, 2 or 4
 * slices puts the warps its slices leave over to work on the CTA's n-tiles
 * instead of idling). Group i walks the n-tiles [first(i), first(i) +
 * tiles(i)) of the CTA's [nt0, nt0 + count) (trl_kmajor_group_*, the
 * host's rules). */
struct Share {
  int per, groups, lg, nw;
  int64_t nt0, count;
  __device__ __forceinline__ int64_t first(int i) const {
    return nt0 + trl_kmajor_group_first(count, i, lg);
  }
  __device__ __forceinline__ int64_t tiles(int i) const {
    return trl_kmajor_group_tiles(count, i, lg);
  }
};

/* The end of round r (up to RT n-tiles a group): every warp's sums are in
 * red[buf]; the CTA adds each group's in warp order into the partials.
 * What depends on the group is worked out once a group and round, not per
 * element (no division in the element loop). */
template <int RT>
__device__ __forceinline__ void km_round_end(const KParams &p, const float *red,
                                             const Share &sh, int split, int m,
                                             int64_t row0, int r) {
  constexpr int kPitch = 16 * RT + 4, kCols = 16 * RT;
  asm volatile("barrier.sync 1, %0;" ::"r"(kThreads) : "memory");
  for (int gi = 0; gi < sh.groups; ++gi) {
    const int64_t left = sh.tiles(gi) - (int64_t)RT * r; /* may be < 1 */
    if (left <= 0)
      continue;
    const int cols = left < RT ? 16 * (int)left : kCols;
    float *out = p.partial + ((int64_t)split * p.m + row0) * p.n +
                 (sh.first(gi) + (int64_t)RT * r) * 16;
    const float *in = red + gi * sh.per * m * kPitch;
    for (int o = threadIdx.x; o < m * kCols; o += kThreads) {
      const int tok = o / kCols, c = o % kCols;
      if (c >= cols)
        continue;
      float s = 0.f;
      for (int w = 0; w < sh.nw; ++w)
        s += in[(w * m + tok) * kPitch + c];
      out[(int64_t)tok * p.n + c] = s;
    }
  }
}

template <int H, int CB, int VAR, int NB>
__global__ void __launch_bounds__(kThreads, trl_kmajor_ctas_per_sm(NB))
    kmajor_kernel(const KParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) char smem_raw[];
  constexpr int kStages = trl_direct_stages(H);
  constexpr int64_t kGB = 128 * H;
  constexpr int RT = round_tiles<NB>(), kPitch = red_pitch<NB>();
  constexpr int kChains = NB == 1 ? 2 : 1;
  static_assert(VAR != kInt8 || NB == 1, "int8: m <= 4, one block");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int mb = (int)(blockIdx.x % p.m_blocks);
  const int col = (int)(blockIdx.x / p.m_blocks % p.cols),
            split = (int)(blockIdx.x / p.m_blocks / p.cols);
  const int64_t row0 = (int64_t)mb * p.rows;
  const int m = (int)(p.m - row0 < p.rows ? p.m - row0 : p.rows);
  const int64_t kslices = p.k / 128, ntiles = p.n / 16;
  Share sh;
  sh.per = trl_kmajor_group_warps(kslices);
  sh.lg = trl_kmajor_group_log2(sh.per);
  sh.groups = 1 << sh.lg;
  sh.nw = (int)(kslices - (int64_t)split * kWarps < sh.per
                    ? kslices - (int64_t)split * kWarps
                    : sh.per);
  sh.nt0 = ntiles * col / p.cols;
  sh.count = ntiles * (col + 1) / p.cols - sh.nt0; /* n-tiles */
  const int gi = warp / sh.per;
  const int64_t kg = (int64_t)split * kWarps + warp % sh.per;
  const bool active = gi < sh.groups && kg < kslices;
  /* every group meets the CTA at the rounds of the largest share */
  const int rounds =
      (int)(((sh.count + sh.groups - 1) / sh.groups + RT - 1) / RT);
  const int total = active ? (int)sh.tiles(gi) : 0;

  /* 1. The first groups: they depend on nothing the previous kernel
   * writes. The warp's groups are contiguous. */
  LaneCursor<H> cur;
  cur.at(reinterpret_cast<const char *>(p.payload) +
             (kg * ntiles + (active ? sh.first(gi) : 0)) * kGB,
         lane);
  uint32_t ring[kStages][H];
#pragma unroll
  for (int s = 0; s < kStages; ++s)
    if (s < total) {
      cur.load(ring[s]);
      cur.advance(kGB);
    }

  /* 2. x, once the previous kernel is done with it: the warp's slice,
   * rotated (the loads of kBatch tokens issued together: the prologue waits
   * about a load latency per batch, not per token), sub-block 0's B
   * operands into registers. */
  griddep_wait();
  /* a warp's region holds the block's R rows (sub-blocks b > 0 read rows
   * past m: zero); sumx and scale are m tokens wide */
  constexpr int R = block_rows<VAR, NB>();
  constexpr int kWarpBytes = warp_bytes<VAR>(R);
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem_raw);
  char *wbase = smem_raw + warp * kWarpBytes;
  Smem sm;
  sm.base = wbase;
  sm.xs_pitch = xs_pitch<VAR>();
  sm.m = m;
  sm.wbufs = 0;
  sm.off_sumx = (uint32_t)((VAR == kInt8 ? 2 : 1) * R * xs_pitch<VAR>());
  sm.off_scale = sm.off_sumx + 8 * m * 4;
  sm.off_wpart = sm.off_cbuf = sm.off_park = 0;
  if constexpr (NB > 1)
    for (int row = m; row < R; ++row)
      *reinterpret_cast<uint2 *>(wbase + row * xs_pitch<VAR>() + 8 * lane) =
          make_uint2(0u, 0u);
  if (active) {
    constexpr int kBatch = NB == 1 ? 4 : 8;
    const int64_t c = kg * 128 + 4 * lane;
    float s[4];
    load4_f16(p.s_in, c, s);
    for (int t0 = 0; t0 < m; t0 += kBatch) {
      float h[kBatch][4];
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        if (t0 + j < m)
          load4_as_float((trellis_dtype)p.in_dtype, p.x,
                         (row0 + t0 + j) * p.k + c, h[j]);
#pragma unroll
      for (int j = 0; j < kBatch; ++j)
        if (t0 + j < m)
          stage_unit<VAR>(sm, m, t0 + j, 0, lane, h[j], s);
    }
  }
  griddep_launch_dependents();
  __syncwarp();
  BFrags bf[8];
  float sc = 0.f, bx = 0.f; /* int8: token t's limb scale, constant term */
  float xsum[NB][2] = {};   /* affine: tokens 8 b + 2t, + 1's sums of x */
  const uint32_t xl = x_lane_base<VAR>(base + (uint32_t)(warp * kWarpBytes),
                                       xs_pitch<VAR>(), lane);
  const uint32_t *xq = reinterpret_cast<const uint32_t *>(
      wbase + (lane >> 2) * xs_pitch<VAR>() + 4 * (lane & 3));
  {
    const bool xv = active && x_row_valid<VAR>(lane, m);
#pragma unroll
    for (int tau = 0; tau < 8; ++tau)
      bf[tau] = b_frags<VAR>(load_x<VAR>(xl + x_tile_bytes<VAR>() * tau, xv));
    if constexpr (VAR == kInt8) {
      const int t = lane & 3;
      if (active && t < m) {
        const float *sx = reinterpret_cast<const float *>(wbase + sm.off_sumx);
        float xsum = 0.f;
        for (int kt = 0; kt < 8; ++kt)
          xsum += sx[kt * m + t];
        sc = reinterpret_cast<const float *>(wbase + sm.off_scale)[t];
        bx = (kMul1C + 1024.f * kMul1A) * xsum;
      }
    } else if constexpr (VAR == kAffine) {
      const float *sx = reinterpret_cast<const float *>(wbase + sm.off_sumx);
#pragma unroll
      for (int b = 0; b < NB; ++b)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int tok = 8 * b + 2 * (lane & 3) + e;
          if (active && tok < m)
            for (int kt = 0; kt < 8; ++kt)
              xsum[b][e] += sx[kt * m + tok];
        }
    }
  }
  float *red0 = reinterpret_cast<float *>(smem_raw + kWarps * kWarpBytes);
  const int g = lane >> 2, t = lane & 3;

  /* 3. Stream: one n-tile a group; a round is up to RT of them. */
  int r = 0;
  if (active) {
    int j = 0;
    for (int b = 0; b < total; b += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int i = b + s;
        if (i < total) {
          uint32_t prev[2 * H];
          lower_bits<H>(ring[s], lane, prev);
          float cf[NB][kChains][4] = {};
          int ci[2][4] = {};
          km_tiles<H, CB, VAR, NB, 0>(ring[s], prev, bf, xq, cf, ci);
          if (i + kStages < total) {
            cur.load(ring[s]);
            cur.advance(kGB);
          }
          float *red = red0 + ((r & 1) * kWarps + warp) * m * kPitch;
          const int c0 = 16 * j + g;
          if constexpr (VAR == kInt8) {
            /* cols 2t, 2t + 1: token t's high and low limb */
            if (t < m) {
              const int q0 = (int)((uint32_t)(ci[0][0] + ci[1][0]) * 128u +
                                   (uint32_t)(ci[0][1] + ci[1][1]));
              const int q2 = (int)((uint32_t)(ci[0][2] + ci[1][2]) * 128u +
                                   (uint32_t)(ci[0][3] + ci[1][3]));
              red[t * kPitch + c0] = fmaf(sc, (float)q0, 0.f) + bx;
              red[t * kPitch + c0 + 8] = fmaf(sc, (float)q2, 0.f) + bx;
            }
          } else {
#pragma unroll
            for (int bk = 0; bk < NB; ++bk) {
              float v[4];
#pragma unroll
              for (int e = 0; e < 4; ++e) {
                v[e] = kChains == 2 ? cf[bk][0][e] + cf[bk][kChains - 1][e]
                                    : cf[bk][0][e];
                if constexpr (VAR == kAffine)
                  v[e] = fmaf(kMul1A, v[e], kMul1C * xsum[bk][e & 1]);
              }
              const int t0 = 8 * bk + 2 * t;
              if (t0 < m) {
                red[t0 * kPitch + c0] = v[0];
                red[t0 * kPitch + c0 + 8] = v[2];
              }
              if (t0 + 1 < m) {
                red[(t0 + 1) * kPitch + c0] = v[1];
                red[(t0 + 1) * kPitch + c0 + 8] = v[3];
              }
            }
          }
          if (++j == RT || i + 1 == total) {
            km_round_end<RT>(p, red0 + (r & 1) * kWarps * m * kPitch, sh, split,
                             m, row0, r);
            j = 0, ++r;
          }
        }
      }
    }
  }
  /* an idle warp, or a group with fewer rounds, still meets the CTA */
  for (; r < rounds; ++r)
    km_round_end<RT>(p, red0 + (r & 1) * kWarps * m * kPitch, sh, split, m,
                     row0, r);
#else
  (void)p;
#endif
}

/* ------------------------------------------------------ family -- */

/* 8-row sub-blocks one decode serves (trl_kmajor_grid.blocks) */
struct SubBlocksAxis : dispatch::Axis<1, 2, 4> {
  static constexpr const char *kName = "8-row sub-blocks";
};

struct KMajor {
  static constexpr const char *kName = "k-major decode-GEMM";
  using Axes =
      dispatch::Axes<RateAxis, DirectCodebookAxis, VarAxis, SubBlocksAxis>;
  static constexpr int kUnits = Direct::kUnits; /* the same unit files */
  struct Args {
    const trl_direct_launch *launch;
    const trl_kmajor_grid *grid;
    cudaStream_t stream;
  };
  template <int H, int CB, int VAR, int NB> static constexpr bool exists() {
    return trl_direct_variant_exists(H, CB, VAR) &&
           (VAR != TRL_DIRECT_INT8 || NB == 1);
  }
  template <int H, int CB, int VAR, int NB> static int prepare(Args &) {
    return (int)cudaFuncSetAttribute(
        kmajor_kernel<H, CB, VAR, NB>,
        cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes<VAR, NB>());
  }
  template <int H, int CB, int VAR, int NB> static int launch(Args &a) {
    const trl_direct_launch &l = *a.launch;
    const trl_kmajor_grid &g = *a.grid;
    KParams p;
    p.payload = l.payload;
    p.x = l.x;
    p.s_in = l.s_in;
    p.partial = l.partial;
    p.m = l.m;
    p.k = l.k;
    p.n = l.n;
    p.in_dtype = l.in_dtype;
    p.rows = g.rows;
    p.m_blocks = g.m_blocks;
    p.splits = g.splits;
    p.cols = g.cols;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1] = {pdl_attribute()};
    cfg.gridDim = dim3((unsigned)(g.splits * g.cols * g.m_blocks));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = (size_t)smem_bytes<VAR, NB>();
    cfg.stream = a.stream;
    cfg.attrs = attr;
    cfg.numAttrs = l.pdl ? 1 : 0;
    return (int)cudaLaunchKernelEx(&cfg, kmajor_kernel<H, CB, VAR, NB>, p);
  }
};

} // namespace kmajor
} // namespace trl

#endif
