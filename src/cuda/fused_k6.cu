/* SPDX-License-Identifier: Apache-2.0 */
/* The fused K6/MCG small-M path: input rotation, decode-GEMM and output
 * rotation in one launch that needs no workspace.
 *
 *  - Grid: one thread-block cluster per 128-column strip; the cluster's CTAs
 *    split k. The weight is streamed once for any m <= 128.
 *  - Input rotation, three forms (the plan picks, trl_fused_rotation): each
 *    CTA rotates the rows of its own stages (few rows, LocalRotation); or
 *    the input-rotation kernel launched before this one has filled the
 *    caller's `rotated` buffer (PRE: this kernel is its dependent launch);
 *    or (LEGACY_KERNELS) each 128-k block is rotated exactly once into
 *    `rotated` by whichever CTA claims it first (per-plan flag 0 -> 1
 *    claimed -> 2 ready). A CTA that needs a block claims it itself if
 *    nobody has, so no CTA ever waits on one that has not started: no
 *    co-residency is assumed and no grid-wide barrier is taken.
 *  - Split-k partial sums are reduced over the cluster through distributed
 *    shared memory, then each row's 128 sums are rotated, scaled by svh,
 *    biased and written in the output dtype.
 *  - The last CTA to be done with the flags resets them, so every launch
 *    (and every graph replay) starts from zero. The other two forms do not
 *    touch them. */
#include "decode_gemm.cuh"

#include <cooperative_groups.h>
#include <stdint.h>

namespace cg = cooperative_groups;

namespace trl {
namespace fused {

using namespace trl::gemm;

constexpr int K = TRL_FUSED_BITS;
/* Largest cluster prepare picks (rules/kernel_config.h), every m-block
 * variant: with the claims, 16-CTA clusters cost m = 128; without them
 * (TRL_FUSED_PRE) the model picks 16 only where strips are few, and there
 * it gains (docs/TUNING.md, "Fused kernel: clusters up to 16, the
 * cluster-size model's ramp"). */
constexpr int kMaxCluster = TRL_FUSED_MAX_CLUSTER;
/* Peers whose DSMEM loads the cluster reduce issues before adding. */
[[maybe_unused]] constexpr int kReduceBatch = 8; /* unused like CB */
[[maybe_unused]] constexpr int CB =
    TRL_FUSED_CODEBOOK; /* unused where the body is compiled out */

struct FusedParams {
  const int16_t *trellis;
  const void *x;
  const uint16_t *s_in, *s_out, *bias;
  uint16_t *rotated;
  void *y;
  unsigned *flags; /* [k/128] block states, then the done counter */
  int64_t m, k, n;
  int in_dtype, out_dtype; /* trellis_dtype */
  int local;               /* rotate x locally (see LocalRotation) */
  int pre; /* the rotated buffer is filled before the launch (no claims) */
  HotShifts shifts; /* see tile_decode.cuh */
};

__device__ __forceinline__ unsigned load_acquire(const unsigned *p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];"
               : "=r"(v)
               : "l"(p)
               : "memory");
  return v;
}

/* x and y in the dtype the plan gives at run time (a trellis_dtype) */
__device__ __forceinline__ float load_x(const void *x, int dt, int64_t i) {
  if (dt == TRELLIS_F16)
    return load_as_float<TRELLIS_F16>(x, i);
  if (dt == TRELLIS_BF16)
    return load_as_float<TRELLIS_BF16>(x, i);
  return load_as_float<TRELLIS_F32>(x, i);
}

__device__ __forceinline__ void store_y(void *y, int dt, int64_t i, float v) {
  if (dt == TRELLIS_F16)
    store_from_float<TRELLIS_F16>(y, i, v);
  else if (dt == TRELLIS_BF16)
    store_from_float<TRELLIS_BF16>(y, i, v);
  else
    store_from_float<TRELLIS_F32>(y, i, v);
}

/* One row of a 128-k block, 4 elements per lane (x and s_in in h): rounds
 * x * s_in to fp16, rotates (H128 times r_scale) and packs the result to
 * fp16. Every rotation of the input goes through here (same bits). */
__device__ __forceinline__ uint2 rotate_row_warp(float (&h)[4],
                                                 const float (&s)[4],
                                                 int lane) {
#pragma unroll
  for (int e = 0; e < 4; ++e)
    h[e] = __half2float(__float2half_rn(__fmul_rn(h[e], s[e])));
  h128_warp(h, lane); /* warp-uniform: every lane runs it */
  __half2 lo = __floats2half2_rn(h[0], h[1]);
  __half2 hi = __floats2half2_rn(h[2], h[3]);
  return make_uint2(*reinterpret_cast<uint32_t *>(&lo),
                    *reinterpret_cast<uint32_t *>(&hi));
}

/* The CTA rotates k-block b of every row into p.rotated: rows are spread
 * over the warps, four at a time per warp so their loads overlap. */
__device__ void rotate_block_cta(const FusedParams &p, int64_t b) {
  constexpr int kWarps = kThreads / 32, kUnroll = 4;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col0 = b * 128 + 4 * lane;
  float s[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    s[e] = __half2float(__ushort_as_half(p.s_in[col0 + e]));
  for (int64_t r0 = warp; r0 < p.m; r0 += kWarps * kUnroll) {
    float h[kUnroll][4];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t row = r0 + u * kWarps;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        h[u][e] =
            row < p.m ? load_x(p.x, p.in_dtype, row * p.k + col0 + e) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t row = r0 + u * kWarps;
      const uint2 packed = rotate_row_warp(h[u], s, lane);
      if (row < p.m)
        *reinterpret_cast<uint2 *>(p.rotated + row * p.k + col0) = packed;
    }
  }
}

__device__ __forceinline__ void publish(unsigned *flag) {
  __threadfence();
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(2u)
               : "memory");
}

/* Makes blocks [b_begin, b_end) of the rotated input ready (CTA-collective,
 * at most kThreads blocks per call). Rounds: every thread looks at one
 * block; the CTA claims at most ONE free block per round (0 -> 1), starting
 * at an offset that differs between strips so CTAs spread over the blocks,
 * rotates it with all its warps and publishes it (-> 2). It stops when all
 * its blocks are ready. A CTA only ever waits on a block another CTA has
 * claimed, and a claimer rotates and publishes without waiting on anyone, so
 * no co-residency is needed. One block per round keeps the rotation work
 * spread over many CTAs (it is m rows per block). */
__device__ void make_ready(const FusedParams &p, int64_t b_begin, int64_t b_end,
                           int offset) {
  __shared__ int64_t chosen;
  __shared__ unsigned free_mask[kThreads / 32];
  const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
  const int count = (int)(b_end - b_begin);
  for (;;) {
    const unsigned f = t < count ? load_acquire(p.flags + b_begin + t) : 2u;
    const unsigned ballot = __ballot_sync(0xFFFFFFFFu, f == 0);
    if (lane == 0)
      free_mask[warp] = ballot;
    const int all_ready = __syncthreads_and(f == 2);
    if (all_ready)
      return;
    if (t == 0) {
      /* One claim attempt per round: the mask is a snapshot, and each
       * failed CAS is a round trip to L2. Trying every free-looking block
       * in turn cost a losing CTA up to `count` of them before its ring
       * could start; the next round re-reads all flags at once. */
      chosen = -1;
      for (int i = 0; i < count; ++i) {
        const int j = (offset + i) % count;
        if ((free_mask[j >> 5] >> (j & 31)) & 1u) {
          if (atomicCAS(p.flags + b_begin + j, 0u, 1u) == 0u)
            chosen = b_begin + j;
          break;
        }
      }
    }
    __syncthreads();
    const int64_t mine = chosen;
    if (mine >= 0) {
      rotate_block_cta(p, mine);
      __syncthreads();
      if (t == 0)
        publish(p.flags + mine);
    } else if (t == 0) {
      __nanosleep(64); /* others are rotating what we need */
    }
    __syncthreads();
  }
}

/* Called by every CTA of a claiming launch once make_ready has returned
 * for all its blocks: it reads and writes no flag after this. The last CTA
 * to get here resets the flags (and the counter) for the next launch; no
 * CTA of this launch reads them any more. A launch that rotates locally
 * touches no flag and skips this fence and atomic. */
__device__ void release_flags(const FusedParams &p, int64_t kblocks) {
  if (threadIdx.x != 0)
    return;
  __threadfence(); /* our publishes before our count */
  unsigned *done = p.flags + kblocks;
  if (atomicAdd(done, 1u) == gridDim.x - 1) {
    __threadfence(); /* everyone's publishes before the reset */
    for (int64_t b = 0; b < kblocks; ++b)
      p.flags[b] = 0;
    *done = 0;
  }
}

/* Local input rotation (one m-block of at most kLocalRows rows; the plan
 * decides when, trl_layout_fused_local): each CTA rotates the rows of
 * its own stages as they enter the ring, instead of claiming blocks of the
 * shared `rotated` buffer and waiting for the CTAs that rotate them. That
 * wait is a fixed cost per CTA (flag reads, CAS, publish: several L2 round
 * trips); re-rotating x in every strip costs a small share of the stage's
 * decode per row, so short CTAs gain and long ones lose (docs/TUNING.md,
 * "Fused kernel: local input rotation"). Row r of stage s is rotated by warp
 * (r + s) % 8: its 8-byte loads are issued before the stage in flight is
 * computed, the result is written to the stage's activation rows after it.
 * Rows m..15 are zeroed once: nothing else writes the activation area. */
constexpr int kLocalRows = TRL_FUSED_LOCAL_ROWS;
static_assert(kLocalRows <= kThreads / 32, "one row per warp and stage");

/* This lane's 4 elements of row r, k-block b, of x (TRELLIS_F16 or
 * TRELLIS_BF16) and of s_in, packed as loaded. */
struct RowSlice {
  uint2 xv, sv;
};
__device__ __forceinline__ RowSlice load_slice(const uint16_t *x,
                                               const uint16_t *s_in, int64_t k,
                                               int r, int64_t b, int lane) {
  const int64_t col0 = b * 128 + 4 * lane;
  return RowSlice{*reinterpret_cast<const uint2 *>(x + r * k + col0),
                  *reinterpret_cast<const uint2 *>(s_in + col0)};
}
/* The slice rotated (rotate_row_warp) and packed to fp16; warp-collective. */
__device__ __forceinline__ uint2 rotate_slice(const RowSlice &v, int dt,
                                              int lane) {
  const uint32_t xw[2] = {v.xv.x, v.xv.y}, sw[2] = {v.sv.x, v.sv.y};
  float h[4], sc[4];
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t xb = (xw[e >> 1] >> (16 * (e & 1))) & 0xFFFFu;
    h[e] = dt == TRELLIS_F16
               ? __half2float(__ushort_as_half((unsigned short)xb))
               : __uint_as_float(xb << 16); /* bf16 -> fp32 exact */
    sc[e] = __half2float(
        __ushort_as_half((unsigned short)(sw[e >> 1] >> (16 * (e & 1)))));
  }
  return rotate_row_warp(h, sc, lane);
}

struct LocalRotation {
  const uint16_t *x; /* TRELLIS_F16 or TRELLIS_BF16 (dt), 8-byte aligned */
  const uint16_t *s_in;
  int64_t k, b_begin;
  int m, dt;
  RowSlice v; /* this lane's slice of the row in flight */

  __device__ __forceinline__ int row_of(int stage) const {
    const int r = ((int)(threadIdx.x >> 5) - stage) & 7;
    return r < m ? r : -1;
  }
  /* the ring's activation source (CopiedActivations' interface) */
  template <class Ld>
  __device__ __forceinline__ void issue(Ld &, uint32_t, int nxt) {
    const int r = row_of(nxt);
    if (r >= 0)
      v = load_slice(x, s_in, k, r, b_begin + nxt, threadIdx.x & 31);
  }
  __device__ __forceinline__ void finish(char *stage, int nxt) {
    const int r = row_of(nxt), lane = threadIdx.x & 31;
    if (r >= 0)
      *reinterpret_cast<uint2 *>(stage + stage_w_bytes<K>() +
                                 a_offset<1>(r, 4 * lane)) =
          rotate_slice(v, dt, lane);
  }

  /* Rotates every row of every stage into pre[stage][row] (256 bytes
   * each): job j = stage * m + row goes to warp j % 8, which issues all its
   * loads before its first rotation. Ends with __syncthreads(). */
  __device__ __forceinline__ void rotate_ahead(char *pre, int nstages) const;
};

/* Up-front local rotation: where rows x stages of every CTA are at most
 * kPreRows (the plan decides, trl_layout_fused_ahead), they are
 * rotated once before the ring by all warps
 * (LocalRotation::rotate_ahead) and each stage only copies its rows from
 * there: rotating a stage's rows as it enters the ring keeps one warp per
 * row longer than the others, and the stage barrier waits for it. 20 rows
 * of 256 bytes after the ring keep 3 CTAs per SM. It is a kernel of its
 * own (Ahead), since compiled into one kernel with the other two forms it
 * slows the claiming form (docs/TUNING.md, "Fused kernel: the local
 * rotation up front, its own kernel"). */
constexpr int kPreRows = TRL_FUSED_PRE_ROWS;
constexpr int kPreBytes = kPreRows * 256;
constexpr int kPrePerWarp = (kPreRows + kThreads / 32 - 1) / (kThreads / 32);

__device__ __forceinline__ void LocalRotation::rotate_ahead(char *pre,
                                                            int nstages) const {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int jobs = m * nstages;
  RowSlice v[kPrePerWarp];
#pragma unroll
  for (int u = 0; u < kPrePerWarp; ++u) {
    const int j = warp + u * (kThreads / 32);
    if (j < jobs)
      v[u] = load_slice(x, s_in, k, j % m, b_begin + j / m, lane);
  }
#pragma unroll
  for (int u = 0; u < kPrePerWarp; ++u) {
    const int j = warp + u * (kThreads / 32);
    if (j < jobs) /* warp-uniform */
      *reinterpret_cast<uint2 *>(pre + j * 256 + 8 * lane) =
          rotate_slice(v[u], dt, lane);
  }
  __syncthreads();
}

/* The ring's activation source for rows rotated up front: warp r < m
 * copies row r of a stage (16 lanes x 16 bytes) into its activation area. */
struct PreRotated {
  const char *pre;
  int m;
  template <class Ld>
  __device__ __forceinline__ void issue(Ld &, uint32_t, int) {}
  __device__ __forceinline__ void finish(char *stage, int nxt) {
    const int r = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (r < m && lane < 16)
      *reinterpret_cast<uint4 *>(stage + stage_w_bytes<K>() +
                                 a_offset<1>(r, 8 * lane)) =
          *reinterpret_cast<const uint4 *>(pre + (nxt * m + r) * 256 +
                                           16 * lane);
  }
};

/* Zeroes activation rows m..15 of every stage of the one-m-block ring. */
__device__ __forceinline__ void zero_rows(char *smem, int m) {
  constexpr int kStages = ring_stages<K, 1>(), SB = stage_bytes<K, 1>();
  const int chunks = (16 - m) * 16; /* 16-byte chunks per stage */
  for (int i = threadIdx.x; i < kStages * chunks; i += kThreads) {
    const int st = i / chunks, c = i % chunks;
    const int r = m + c / 16, col = (c % 16) * 8;
    *reinterpret_cast<uint4 *>(smem + st * SB + stage_w_bytes<K>() +
                               a_offset<1>(r, col)) = make_uint4(0, 0, 0, 0);
  }
}

template <int MB, bool Ahead>
__global__ void __launch_bounds__(kThreads, MB <= 2 ? TRL_FUSED_CTAS_PER_SM : 2)
    fused_k6_kernel(FusedParams p) {
  static_assert(!Ahead || MB == 1, "up-front rotation: one m-block");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using L = Layout<MB>;
  extern __shared__ __align__(16) char smem_raw[];
  char *smem = ring_base(smem_raw);
  cg::cluster_group cluster = cg::this_cluster();
  const int cs = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wn = warp % L::WN, wk = warp / L::WN;
  const int nt0 = (int)(blockIdx.x / cs) * kNT;
  const int64_t kblocks = p.k / 128;
  const int64_t per = (kblocks + cs - 1) / cs; /* k-blocks (stages) per CTA */
  const int64_t b_begin = min((int64_t)rank * per, kblocks);
  const int64_t b_end = min(b_begin + per, kblocks);
  const int nstages = (int)(b_end - b_begin);
  constexpr int SB = stage_bytes<K, MB>();

  /* 1. Start streaming weights; they do not depend on x. */
  Loader<K, MB> ld;
  ld.init(p.trellis, p.n, p.rotated, p.m, p.k, b_begin * kSK, b_begin * kSK,
          nt0, 0);
  const uint32_t ring = (uint32_t)__cvta_generic_to_shared(smem);
#pragma unroll
  for (int s = 0; s < ring_stages<K, MB>() - 1; ++s)
    if (s < nstages)
      ld.issue_w(ring + s * SB);
  cp_async_commit();
  /* Programmatic dependent launch (where the plan asks for it,
   * trl_layout_fused_pdl): the weights are immutable, so their first
   * stages stream in while the previous kernel of the stream finishes.
   * Everything else that kernel may write (x, the rotated buffer, the
   * flags) or read (y) is touched only after its grid has completed and
   * flushed. Our dependents may be scheduled once every CTA is past the
   * wait (the fastest point: docs/TUNING.md, "Fused kernel: a dependent
   * launch where its CTAs run two k-blocks"); they too wait for our
   * completion. */
  griddep_wait();
  griddep_launch_dependents();
  AccFor<MB> acc;
  acc.zero();
  const StageTiles<K, MB> lt(lane, warp);
  if (MB == 1 && p.local) {
    /* 2'. Rotate our stages' rows here (see LocalRotation), all of them
     * before the ring (Ahead) or each stage's as it enters the ring. */
    LocalRotation loc{static_cast<const uint16_t *>(p.x),
                      p.s_in,
                      p.k,
                      b_begin,
                      (int)p.m,
                      p.in_dtype};
    zero_rows(smem, (int)p.m);
    if constexpr (Ahead) {
      char *pre = smem + ring_stages<K, MB>() * SB;
      loc.rotate_ahead(pre, nstages);
      PreRotated ahead{pre, (int)p.m};
      prime_activations(ld, smem, nstages, ahead);
      run_ring<K, CB, MB, false>(ld, smem, nstages, acc, lt, lane, wn, wk,
                                 p.shifts, ahead);
    } else {
      prime_activations(ld, smem, nstages, loc);
      run_ring<K, CB, MB, false>(ld, smem, nstages, acc, lt, lane, wn, wk,
                                 p.shifts, loc);
    }
  } else if constexpr (!Ahead) {
    /* 2. Rotate the free blocks of our k-range, wait for the others
     * (unless a rotation kernel before us has filled the buffer). */
    if (!p.pre) {
      for (int64_t b0 = b_begin; b0 < b_end; b0 += kThreads)
        make_ready(p, b0, min(b0 + kThreads, b_end), (int)(blockIdx.x / cs));
      release_flags(p, kblocks);
    }
    /* 3. Activations of the first stages, then the ring as in the generic
     * path. */
    CopiedActivations copied;
    prime_activations(ld, smem, nstages, copied);
    run_ring<K, CB, MB, false>(ld, smem, nstages, acc, lt, lane, wn, wk,
                               p.shifts);
  }

  /* 4. CTA sums in shared memory, then the cluster's sum per row. */
  float *red = reinterpret_cast<float *>(smem);
  reduce_cta<MB>(acc, red, lane, wn, wk);
  cluster.sync();
  const int64_t col0 = (int64_t)nt0 * 16 + 4 * lane;
  for (int64_t row = rank * (kThreads / 32) + warp; row < p.m;
       row += cs * (kThreads / 32)) {
    /* Up to kReduceBatch peers' loads are issued before the first add:
     * one DSMEM round trip per row and batch, not per peer. Summed in rank
     * order, so the result is deterministic. */
    float h[4] = {0.f, 0.f, 0.f, 0.f};
    for (int c0 = 0; c0 < cs; c0 += kReduceBatch) {
      float4 v[kReduceBatch];
#pragma unroll
      for (int c = 0; c < kReduceBatch; ++c)
        if (c0 + c < cs)
          v[c] = *reinterpret_cast<const float4 *>(
              cluster.map_shared_rank(red, c0 + c) + row * 128 + 4 * lane);
#pragma unroll
      for (int c = 0; c < kReduceBatch; ++c)
        if (c0 + c < cs)
          h[0] += v[c].x, h[1] += v[c].y, h[2] += v[c].z, h[3] += v[c].w;
    }
    h128_warp(h, lane);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float o =
          __fmul_rn(h[e], __half2float(__ushort_as_half(p.s_out[col0 + e])));
      if (p.bias)
        o = __fadd_rn(o, __half2float(__ushort_as_half(p.bias[col0 + e])));
      store_y(p.y, p.out_dtype, row * p.n + col0 + e, o);
    }
  }
  cluster.sync(); /* peers may still read our shared memory until here */
#endif
}

/* Launch configuration of `strips` clusters of `cs` CTAs, and with `pdl`
 * programmatic stream serialisation (attr[2] must outlive cfg). */
void cluster_config(cudaLaunchConfig_t &cfg, cudaLaunchAttribute *attr, int cs,
                    int64_t strips, size_t smem, int pdl, cudaStream_t stream) {
  cfg = cudaLaunchConfig_t{};
  attr[0] = cudaLaunchAttribute{};
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)cs;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1] = trl::pdl_attribute();
  cfg.gridDim = dim3((unsigned)(strips * cs));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 2 : 1;
}

/* Per-CTA fixed cost in units of one k-block's stage: pipeline fill, the
 * rotation claims and the cluster reduce. 5 makes the model rank cluster
 * sizes as the timings do (docs/TUNING.md, "Fused kernel: clusters up to
 * 16, the cluster-size model's ramp"). */
constexpr int kRampStages = 5;

/* Whether the kernel rotates x up front (the Ahead form, see kPreRows). */
struct AheadAxis : dispatch::Axis<0, 1> {
  static constexpr const char *kName = "ahead";
};

/* The fused kernel family (see dispatch.cuh). The up-front-rotation form
 * exists for one m-block only. */
struct Fused {
  static constexpr const char *kName = "fused kernel";
  using Axes = dispatch::Axes<dispatch::MBlocksAxis, AheadAxis>;
  struct Args {
    int64_t k, n;  /* prepare: the layer */
    int cluster;   /* prepare: the size picked (not Ahead); launch */
    int waves;     /* prepare: waves of clusters that size makes */
    FusedParams p; /* launch */
    int pdl;
    cudaStream_t stream;
  };
  template <int MB, int AHEAD> static constexpr bool exists() {
    return !AHEAD || MB == 1;
  }
  template <int MB, int AHEAD> static const void *kernel() {
    return (const void *)&fused_k6_kernel<MB, AHEAD != 0>;
  }
  template <int MB, int AHEAD> static constexpr size_t smem() {
    return smem_bytes<K, MB>() + (AHEAD ? kPreBytes : 0);
  }
  /* Sets the attributes; for the ring-rotating forms picks the cluster
   * size cs in 1..max_cluster minimising waves x (k-blocks per CTA +
   * ramp), where a wave is what cudaOccupancyMaxActiveClusters says fits
   * at once. Large clusters split k finely but pack into GPCs less well;
   * sizes that are not powers of two (5, 6) often fit the wave count
   * better. */
  template <int MB, int AHEAD> static int prepare(Args &a) {
    const void *kern = kernel<MB, AHEAD>();
    constexpr size_t kSmem = smem<MB, AHEAD>();
    cudaError_t e;
    if ((e = cudaFuncSetAttribute(
             kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmem)) ||
        (e = cudaFuncSetAttribute(
             kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1)))
      return (int)e;
    if constexpr (AHEAD)
      return 0;
    const int64_t strips = a.n / 128, kblocks = a.k / 128;
    int best = 1;
    int64_t best_cost = INT64_MAX;
    for (int cs = 1; cs <= kMaxCluster && (cs == 1 || cs <= kblocks); ++cs) {
      cudaLaunchConfig_t cfg;
      cudaLaunchAttribute attr[2];
      cluster_config(cfg, attr, cs, strips, kSmem, 0, 0);
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kern, &cfg) !=
              cudaSuccess ||
          clusters < 1) {
        (void)cudaGetLastError();
        break;
      }
      const int64_t waves = (strips + clusters - 1) / clusters;
      const int64_t cost = waves * ((kblocks + cs - 1) / cs + kRampStages);
      if (cost < best_cost) {
        best_cost = cost;
        best = cs;
        a.waves = (int)waves;
      }
    }
    a.cluster = best;
    return 0;
  }
  template <int MB, int AHEAD> static int launch(Args &a) {
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute attr[2];
    cluster_config(cfg, attr, a.cluster, a.p.n / 128, smem<MB, AHEAD>(), a.pdl,
                   a.stream);
    void *args[] = {&a.p};
    return (int)cudaLaunchKernelExC(&cfg, kernel<MB, AHEAD>(), args);
  }
};

int run(dispatch::Op op, int m_blocks, int ahead, Fused::Args &a) {
  return dispatch::run<Fused>(op, {m_blocks, ahead}, a);
}

} // namespace fused
} // namespace trl

using namespace trl::fused;

extern "C" int trl_fused_prepare_kernels(int64_t k, int64_t n,
                                         int cluster_out[TRL_M_BLOCK_COUNT],
                                         int waves_out[TRL_M_BLOCK_COUNT]) {
  Fused::Args a = {};
  a.k = k;
  a.n = n;
  int err = run(trl::dispatch::Op::kPrepare, 1, 1, a);
  for (int i = 0; !err && i < TRL_M_BLOCK_COUNT; ++i) {
    a.cluster = 1;
    a.waves = 0;
    err = run(trl::dispatch::Op::kPrepare, trl_m_block_at(i), 0, a);
    cluster_out[i] = a.cluster;
    waves_out[i] = a.waves;
  }
  return err;
}

extern "C" int trl_launch_fused(const int16_t *trellis, const void *x,
                                trellis_dtype in_dtype, const uint16_t *s_in,
                                const uint16_t *s_out, const uint16_t *bias,
                                uint16_t *rotated, void *y,
                                trellis_dtype out_dtype, unsigned *flags,
                                int64_t m, int64_t k, int64_t n, int m_blocks,
                                int cluster, trl_fused_rotation rotation,
                                int pdl, void *stream) {
  Fused::Args a = {};
  FusedParams &p = a.p;
  p.trellis = trellis;
  p.x = x;
  p.s_in = s_in;
  p.s_out = s_out;
  p.bias = bias;
  p.rotated = rotated;
  p.y = y;
  p.flags = flags;
  p.m = m;
  p.k = k;
  p.n = n;
  p.in_dtype = (int)in_dtype;
  p.out_dtype = (int)out_dtype;
  /* local where the plan asks for it and the kernel can: one m-block of
   * few rows, 16-bit x on 8-byte boundaries */
  const bool can_local = m_blocks == 1 && m <= kLocalRows &&
                         in_dtype != TRELLIS_F32 && ((uintptr_t)x & 7) == 0;
  const trl_fused_rotation mode = rotation == TRL_FUSED_PRE ? TRL_FUSED_PRE
                                  : can_local               ? rotation
                                                            : TRL_FUSED_CLAIMS;
  p.local = mode == TRL_FUSED_LOCAL || mode == TRL_FUSED_LOCAL_AHEAD;
  p.pre = mode == TRL_FUSED_PRE;
  init_shifts(p.shifts);
  a.cluster = cluster;
  a.pdl = pdl;
  a.stream = (cudaStream_t)stream;
  return run(trl::dispatch::Op::kLaunch, m_blocks,
             mode == TRL_FUSED_LOCAL_AHEAD, a);
}
