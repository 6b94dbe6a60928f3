/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct decode-GEMM for small m (1..16 rows): input
 * rotation, decode-GEMM, split-k reduction and output rotation in one
 * launch that needs no workspace (the fused path's contract).
 *
 *  - Payload in the lane layout (format/lanes.h): a warp reads a group (one
 *    tile row's 8 tiles, 16 k x 128 n) with coalesced 16/8/4-byte
 *    evict-first loads straight into registers, several groups in flight
 *    per warp; no shared-memory ring. The bits before a lane's span come
 *    from the lanes below it by shuffle. Every window sits at a bit offset
 *    known at compile time.
 *  - Tensor cores: the decoded weights are the A operand of mma.sync
 *    (16 n x 16 k), the rotated activations the B operand (tokens as
 *    columns) read from shared memory once per group. Three ways:
 *    kHalves (3INST, MCG): a weight's two fp16 halves side by side in k
 *      with the activation duplicated, so the tensor core adds them
 *      (SYSTEM.md "Numerics": closer to the unrounded value than W_hat);
 *    kAffine (MUL1): fp16 1024 + S (S the byte sum, exact), the affine
 *      map applied to the sums: y = a sum (1024+S) x + c sum x;
 *    kInt8 (MUL1, m <= 4): the 32-bit product state * MUL1 is four u8
 *      k-elements of an int8 MMA; activations enter as two s8 limbs per
 *      token (14 bits per 128-k slice), int32 sums converted every slice.
 *  - Grid: clusters of `cluster` CTAs; cluster q takes the 128-column
 *    groups q, q + clusters, ... one per round; CTA rank c takes the c-th
 *    share of k (whole 128-k blocks), each of its 8 warps a contiguous
 *    range of it. Per round, the 8 warps' sums meet in shared memory,
 *    where the round's owner warp adds them (named barriers: only it waits,
 *    the others stream on) and they stay; after the last round the cluster
 *    meets once and each round's owner CTA adds the CTAs' sums through
 *    distributed shared memory, rotates, scales, adds bias and stores y.
 *    On the generic path k may also be split across clusters (splits > 1):
 *    each cluster's sums go to fp32 partials in the workspace and
 *    direct_finish_kernel (direct_gemm.cu) adds them in split order,
 *    rotates, scales, biases and stores y.
 *    Fixed orders throughout: a replay is bit-identical to the eager run.
 *    No atomics.
 *  - Programmatic dependent launch: the first groups are loaded before
 *    griddepcontrol.wait; x is read after it. */
#ifndef TRL_CUDA_DIRECT_GEMM_CUH
#define TRL_CUDA_DIRECT_GEMM_CUH

#include "common.cuh"
#include "direct_timeline.h"
#include "direct_windows.cuh"
#include "dispatch.cuh"
#include "format/lanes.h"
#include "format/lanes_prefix.h"
#include "kernels.h"
#include "plan/direct_rules.h"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

/* Measurement builds only (scripts/device-check.sh DIRECT_VARIANTS, never
 * a release): TRL_DIRECT_PROBE 1 streams the payload without decoding it
 * (its words folded into one register), 2 reads no payload (the prologue,
 * the rounds' barriers and the epilogue alone). Their results are wrong
 * by design. */
#ifndef TRL_DIRECT_PROBE
#define TRL_DIRECT_PROBE 0
#endif
/* TRL_DIRECT_TIMELINE 1 (measurement builds only, results exact): thread 0
 * of every CTA appends one record of %globaltimer stamps to the buffer of
 * trl_direct_timeline_ptr() (direct_timeline.h has the record's words);
 * `trellis bench` writes them out (bench/README.md, "Timeline"). */
#ifndef TRL_DIRECT_TIMELINE
#define TRL_DIRECT_TIMELINE 0
#endif

namespace trl {
namespace direct {

namespace cg = cooperative_groups;

constexpr int kWarps = TRL_DIRECT_WARPS, kThreads = 32 * kWarps;
static_assert((kWarps & (kWarps - 1)) == 0, "round owners: r & (kWarps - 1)");
enum Var {
  kHalves = TRL_DIRECT_HALVES,
  kAffine = TRL_DIRECT_AFFINE,
  kInt8 = TRL_DIRECT_INT8
};

/* MUL1's value of a state as the unrounded affine map of its byte sum S:
 * a (1024 + S) + c, with the format's fp16 constants (exact in fp32). */
constexpr float kMul1A = 887.0f / 131072.0f;
constexpr float kMul1C = -1329.0f / 128.0f;
constexpr float kLimbQ = 16319.0f; /* |q| <= 128 * 127 + 63 */

struct Params {
  const int16_t *payload; /* lane layout */
  const void *x;
  const uint16_t *s_in, *s_out, *bias;
  void *y;
  int64_t m, k, n;
  int in_dtype, out_dtype;
  int cluster;    /* CTAs per cluster */
  int clusters;   /* clusters in the grid: splits per group of them */
  int splits;     /* k-splits across clusters (1: none) */
  float *partial; /* splits > 1: [splits][m][n], the clusters' sums */
  int kt_cta;     /* k-tiles of the largest CTA share (shared memory) */
  int rounds;     /* of the busiest cluster (shared memory) */
#if TRL_DIRECT_TIMELINE
  unsigned long long *timeline; /* trl_direct_timeline_ptr() */
#endif
};

#if TRL_DIRECT_TIMELINE
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#define TRL_TL(i)                                                              \
  do {                                                                         \
    if (threadIdx.x == 0)                                                      \
      tl[i] = global_ns();                                                     \
  } while (0)
#else
#define TRL_TL(i) ((void)0)
#endif

/* The values of the lanes below this one (lane_sends there), by shuffle:
 * as many as the rate needs. */
template <int H>
__device__ __forceinline__ void lower_bits(const uint32_t (&w)[H], int lane,
                                           uint32_t (&prev)[2 * H]) {
  const int below = (lane + 31) & 31, below2 = (lane + 30) & 31;
  const LaneSends<H> mine = lane_sends<H>(w);
  LaneSends<H> b1, b2;
  if constexpr (H == 3) { /* words from L-1, span ends from L-2 */
#pragma unroll
    for (int i = 0; i < 3; ++i)
      b1.v[i] = __shfl_sync(0xFFFFFFFFu, mine.v[i], below);
    b2.v[3] = __shfl_sync(0xFFFFFFFFu, mine.v[3], below2);
  } else {
#pragma unroll
    for (int i = 0; i < (H == 2 ? 2 : 4); ++i) {
      b1.v[i] = __shfl_sync(0xFFFFFFFFu, mine.v[i], below);
      if constexpr (H == 2)
        b2.v[i] = __shfl_sync(0xFFFFFFFFu, mine.v[i], below2);
    }
  }
  lane_receive<H>(b1, b2, prev);
}

/* ------------------------------------------------------- loads -- */

__device__ __forceinline__ uint4 ld_stream4(const void *p) {
  uint4 v;
  asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 ld_stream2(const void *p) {
  uint2 v;
  asm volatile("ld.global.cs.v2.u32 {%0,%1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint32_t ld_stream1(const void *p) {
  uint32_t v;
  asm volatile("ld.global.cs.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

/* The lane's H words of a group (format/lanes.h's offsets) from a lane's
 * cursor: one pointer per load width, each already at the lane's bytes,
 * so on the stream a group costs its loads and one 64-bit add per pointer. */
template <int H> struct LaneCursor {
  static constexpr int Q = H / 4, kPair = (H % 4) >= 2, kOdd = H & 1;
  const char *p4, *p2, *p1;
  __device__ __forceinline__ void at(const char *g, int lane) {
    p4 = g + 16 * lane;
    p2 = g + 512 * Q + 8 * lane;
    p1 = g + 512 * Q + (kPair ? 256 : 0) + 4 * lane;
  }
  __device__ __forceinline__ void load(uint32_t (&w)[H]) const {
#pragma unroll
    for (int q = 0; q < Q; ++q) {
      const uint4 v = ld_stream4(p4 + 512 * q);
      w[4 * q] = v.x, w[4 * q + 1] = v.y, w[4 * q + 2] = v.z,
            w[4 * q + 3] = v.w;
    }
    if constexpr (kPair) {
      const uint2 v = ld_stream2(p2);
      w[4 * Q] = v.x, w[4 * Q + 1] = v.y;
    }
    if constexpr (kOdd)
      w[H - 1] = ld_stream1(p1);
  }
  __device__ __forceinline__ void advance(int64_t bytes) {
    if constexpr (Q > 0)
      p4 += bytes;
    if constexpr (kPair)
      p2 += bytes;
    if constexpr (kOdd)
      p1 += bytes;
  }
};

/* The lane's H words of the group at `g`. */
template <int H>
__device__ __forceinline__ void load_group(const char *g, int lane,
                                           uint32_t (&w)[H]) {
  LaneCursor<H> c;
  c.at(g, lane);
  c.load(w);
}

/* -------------------------------------------------------- MMAs -- */

__device__ __forceinline__ void hmma(float (&c)[4], uint32_t a0, uint32_t a1,
                                     uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void imma(int (&c)[4], uint32_t a0, uint32_t a1,
                                     uint32_t a2, uint32_t a3, uint32_t b0,
                                     uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* ------------------------------------------------ shared memory -- */

/* The CTA's shared memory (plan/direct_rules.h sizes it):
 *   xs    rotated activations of the CTA's k share: fp16 [rows][pitch]
 *         (kHalves, kAffine: a row per token) or s8 (kInt8: rows 2 t and
 *         2 t + 1 are token t's high and low limb);
 *   sumx  fp32 [k-tile][tokens]: sum of the rotated x over each 16 k
 *         (kAffine, kInt8: the affine map's constant term);
 *   scale fp32 [128-k block][tokens]: kInt8's limb scale times a;
 *   wpart fp32 [buffer][warp][token][kRowPitch]: each warp's sums of a
 *         round, round r in buffer r % wbufs;
 *   cbuf  fp32 [round][token][kRowPitch]: the CTA's sums of every
 *         round, read by the round's owner CTA at the end. */
struct Smem {
  char *base;
  int xs_pitch; /* bytes per xs row */
  int m;        /* tokens: the stride of sumx, scale, wpart and cbuf */
  int wbufs;    /* wpart buffers (trl_direct_wbufs) */
  uint32_t off_sumx, off_scale, off_wpart, off_cbuf, off_park;
};

constexpr int kRowPitch = TRL_DIRECT_ROW_PITCH; /* floats, 128 + 4 */

template <int VAR>
__device__ __forceinline__ Smem smem_layout(char *base, int m, int kt_cta,
                                            int rounds, int park) {
  trl_direct_smem s = trl_direct_smem_layout(VAR, m, kt_cta, rounds,
                                             park); /* the host's rule */
  return Smem{base,
              s.xs_pitch,
              m,
              s.wbufs,
              (uint32_t)s.off_sumx,
              (uint32_t)s.off_scale,
              (uint32_t)s.off_wpart,
              (uint32_t)s.off_cbuf,
              (uint32_t)s.off_park};
}

/* -------------------------------------------------- prologue -- */

/* One (token, block) unit of stage_x: x and suh of the lane's 4 columns
 * in h and s. */
template <int VAR>
__device__ __forceinline__ void stage_unit(const Smem &sm, int m, int tok,
                                           int b, int lane, float (&h)[4],
                                           const float (&s)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e)
    h[e] = __half2float(__float2half_rn(__fmul_rn(h[e], s[e])));
  h128_warp(h, lane);
  float r[4];
#pragma unroll
  for (int e = 0; e < 4; ++e)
    r[e] = __half2float(__float2half_rn(h[e])); /* the fp16 rotated x */
  const int kcol = b * 128 + 4 * lane;          /* in the CTA's share */
  if constexpr (VAR != kInt8) {
    __half2 lo = __floats2half2_rn(r[0], r[1]);
    __half2 hi = __floats2half2_rn(r[2], r[3]);
    *reinterpret_cast<uint2 *>(sm.base + tok * sm.xs_pitch + 2 * kcol) =
        make_uint2(*reinterpret_cast<uint32_t *>(&lo),
                   *reinterpret_cast<uint32_t *>(&hi));
  } else {
    float amax =
        fmaxf(fmaxf(fabsf(r[0]), fabsf(r[1])), fmaxf(fabsf(r[2]), fabsf(r[3])));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
    const float inv = amax > 0.f ? kLimbQ / amax : 0.f;
    uint32_t hi = 0, lo = 0;
    int qsum = 0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int q = __float2int_rn(r[e] * inv);
      const int l0 = ((q + 64) & 127) - 64, l1 = (q - l0) >> 7;
      hi |= (uint32_t)(l1 & 0xFF) << (8 * e);
      lo |= (uint32_t)(l0 & 0xFF) << (8 * e);
      qsum += q;
    }
    /* the constant term sums the quantised x: then it cancels the
     * common part of the byte sums' error exactly (MUL1's values are
     * far from centred: 887 S / 2^17 averages ~3.45) */
    const float dq = (float)qsum * (amax / kLimbQ);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      r[e] = e == 0 ? dq : 0.f;
    *reinterpret_cast<uint32_t *>(sm.base + (2 * tok) * sm.xs_pitch + kcol) =
        hi;
    *reinterpret_cast<uint32_t *>(sm.base + (2 * tok + 1) * sm.xs_pitch +
                                  kcol) = lo;
    if (lane == 0)
      reinterpret_cast<float *>(sm.base + sm.off_scale)[b * m + tok] =
          amax / kLimbQ * kMul1A;
  }
  if constexpr (VAR != kHalves) {
    /* the sum over each 16 k: four lanes */
    float sum = (r[0] + r[1]) + (r[2] + r[3]);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
    sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
    if ((lane & 3) == 0)
      reinterpret_cast<float *>(
          sm.base + sm.off_sumx)[(b * 8 + lane / 4) * m + tok] = sum;
  }
}

/* Rotates x over the CTA's 128-k blocks [b0, b1) into xs (and sumx,
 * scale): a warp per (token, block), the same arithmetic as the input
 * rotation kernel (x * suh rounded to fp16, H128 in fp32, RNE fp16). */
template <int VAR>
__device__ void stage_x(const Params &p, const Smem &sm, int64_t b0,
                        int64_t b1) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m = (int)p.m;
  const int nb = (int)(b1 - b0);
  /* xs holds the m tokens only: the B operands of missing ones are zero
   * in registers (load_x). A warp takes the (token, block) units warp,
   * warp + 8, ..., kBatch at a time, their loads issued together: the
   * prologue waits about one load latency, not one per unit. */
  constexpr int kBatch = TRL_DIRECT_STAGE_BATCH(VAR);
  const int units = m * nb;
  for (int u0 = warp; u0 < units; u0 += kWarps * kBatch) {
    float hb[kBatch][4], sb[kBatch][4];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int u = u0 + j * kWarps;
      if (u < units) {
        const int64_t col = (b0 + u % nb) * 128 + 4 * lane;
        load4_as_float((trellis_dtype)p.in_dtype, p.x,
                       (int64_t)(u / nb) * p.k + col, hb[j]);
        load4_f16(p.s_in, col, sb[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int u = u0 + j * kWarps;
      if (u < units)
        stage_unit<VAR>(sm, m, u / nb, u % nb, lane, hb[j], sb[j]);
    }
  }
}

/* -------------------------------------------------- the kernel -- */

/* Accumulators of a warp for one group (8 n-tiles). */
template <int VAR> struct Acc {
  float f[8][4];
  int i[VAR == kInt8 ? 8 : 1][4];
  __device__ __forceinline__ void zero_f() {
#pragma unroll
    for (int t = 0; t < 8; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        f[t][e] = 0.f;
  }
  __device__ __forceinline__ void zero_i() {
#pragma unroll
    for (int t = 0; t < (VAR == kInt8 ? 8 : 1); ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        i[t][e] = 0;
  }
};

/* The B operands of one k-tile: the activations (or limbs) each MMA of a
 * tile multiplies (see consume). */
struct BFrags {
  uint32_t b0, b1, b2, b3;
};

/* MUL1's (1024 + S) of a lane's weights 2e and 2e + 1, e = 0..3, as fp16
 * pairs (S exact): the kAffine form's A operand words. */
__device__ __forceinline__ void affine_pairs(const uint32_t (&s)[8],
                                             uint32_t (&u)[4]) {
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const uint32_t odd =
        __dp4a(s[2 * e + 1] * TRL_MUL_MUL1, 0x01010101u, TRL_MUL1_ACC);
    u[e] = __dp4a(s[2 * e] * TRL_MUL_MUL1, 0x01010101u,
                  (odd << 16) + TRL_MUL1_ACC);
  }
}

/* Tile T of a group, decoded: the A operand words of its MMAs (kHalves:
 * 8 fp16 pairs; kAffine: 4 pairs of (1024 + S); kInt8: the 8 u8x4
 * products). */
template <int H, int CB, int VAR, int T>
__device__ __forceinline__ void tile_operands(const uint32_t (&w)[H],
                                              const uint32_t (&prev)[2 * H],
                                              uint32_t (&a)[8]) {
  uint32_t s[8];
  tile_states<H, T, VAR == kHalves>(w, prev, s);
  if constexpr (VAR == kHalves) {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      a[j] = codebook_halves<CB>(s[j]);
  } else if constexpr (VAR == kAffine) {
    uint32_t u[4];
    affine_pairs(s, u);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      a[j] = u[j], a[j + 4] = 0u;
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j)
      a[j] = s[j] * TRL_MUL_MUL1;
  }
}

/* A decoded tile's MMAs against B operands x, accumulating into f (fp32)
 * or, kInt8, i (int32). */
template <int VAR>
__device__ __forceinline__ void tile_apply(const uint32_t (&a)[8],
                                           const BFrags &x, float (&f)[4],
                                           int (&i)[4]) {
  if constexpr (VAR == kHalves) {
    hmma(f, a[0], a[4], a[2], a[6], x.b0, x.b1);
    hmma(f, a[1], a[5], a[3], a[7], x.b2, x.b3);
  } else if constexpr (VAR == kAffine) {
    hmma(f, a[0], a[2], a[1], a[3], x.b0, x.b1);
  } else {
    imma(i, a[0], a[4], a[2], a[6], x.b0, x.b1);
    imma(i, a[1], a[5], a[3], a[7], x.b2, x.b3);
  }
}

/* Tile T of a group: its 8 states, decoded, into the MMAs with B operands
 * x. */
template <int H, int CB, int VAR, int T>
__device__ __forceinline__ void
tile_mma(const uint32_t (&w)[H], const uint32_t (&prev)[2 * H], const BFrags &x,
         float (&f)[4], int (&i)[4]) {
  uint32_t a[8];
  tile_operands<H, CB, VAR, T>(w, prev, a);
  tile_apply<VAR>(a, x, f, i);
}

/* A group's 8 tiles against one k-tile's B operands: tile T into its own
 * accumulators. */
template <int H, int CB, int VAR, int T>
__device__ __forceinline__ void consume_tile(const uint32_t (&w)[H],
                                             const uint32_t (&prev)[2 * H],
                                             const BFrags &x, Acc<VAR> &acc) {
  if constexpr (T < 8) {
    tile_mma<H, CB, VAR, T>(w, prev, x, acc.f[T], acc.i[VAR == kInt8 ? T : 0]);
    consume_tile<H, CB, VAR, T + 1>(w, prev, x, acc);
  }
}

/* The raw B-operand words of one k-tile (loaded a group ahead, so the
 * shared-memory latency hides behind the decode of the group before). */
struct XRaw {
  uint32_t a, b;
};

/* The lane's base in xs: row g, the word at k 2t of k-tile 0. */
template <int VAR>
__device__ __forceinline__ uint32_t x_lane_base(uint32_t xs, int pitch,
                                                int lane) {
  const int g = lane >> 2, t = lane & 3;
  return xs + (uint32_t)(g * pitch) + (VAR == kInt8 ? 2 : 4) * t;
}

/* Bytes of one k-tile in an xs row. */
template <int VAR> __device__ constexpr int x_tile_bytes() {
  return VAR == kInt8 ? 16 : 32;
}

/* Whether the lane's B-operand row is in xs (a token there is): rows past
 * it are zero. */
template <int VAR>
__device__ __forceinline__ bool x_row_valid(int lane, int m) {
  const int row = lane >> 2;
  return row < (VAR == kInt8 ? 2 * m : m);
}

/* The words at k 2t and 2t + 8 (two fp16, or two s8 limbs) of row g of
 * the k-tile at `at` (x_lane_base plus the k-tile's bytes: a shared
 * address); zero where the row is not there (valid: x_row_valid). */
template <int VAR>
__device__ __forceinline__ XRaw load_x(uint32_t at, bool valid) {
  XRaw r;
  r.a = 0u, r.b = 0u;
  if (valid) {
    if constexpr (VAR == kInt8) {
      asm volatile("ld.shared.u16 %0, [%1];" : "=r"(r.a) : "r"(at));
      asm volatile("ld.shared.u16 %0, [%1];" : "=r"(r.b) : "r"(at + 8));
    } else {
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(r.a) : "r"(at));
      asm volatile("ld.shared.u32 %0, [%1];" : "=r"(r.b) : "r"(at + 16));
    }
  }
  return r;
}

/* The B operands of a k-tile from its raw words: kHalves duplicates each
 * activation for its weight's two halves, the first MMA of a tile taking
 * the even k, the second the odd; kInt8 repeats a limb in the 4 bytes of
 * its weight's product; kAffine takes the pairs as they are. */
template <int VAR> __device__ __forceinline__ BFrags b_frags(const XRaw &xr) {
  BFrags x;
  if constexpr (VAR == kInt8) {
    x.b0 = __byte_perm(xr.a, 0, 0x0000), x.b1 = __byte_perm(xr.b, 0, 0);
    x.b2 = __byte_perm(xr.a, 0, 0x1111);
    x.b3 = __byte_perm(xr.b, 0, 0x1111);
  } else if constexpr (VAR == kHalves) {
    x.b0 = __byte_perm(xr.a, 0, 0x1010);
    x.b1 = __byte_perm(xr.b, 0, 0x1010);
    x.b2 = __byte_perm(xr.a, 0, 0x3232);
    x.b3 = __byte_perm(xr.b, 0, 0x3232);
  } else {
    x.b0 = xr.a, x.b1 = xr.b, x.b2 = 0, x.b3 = 0;
  }
  return x;
}

/* Decodes and multiplies one group: the lane's words `w`, the k-tile's
 * activations `xr`. */
template <int H, int CB, int VAR>
__device__ __forceinline__ void consume(const uint32_t (&w)[H], int lane,
                                        const XRaw &xr, Acc<VAR> &acc) {
#if TRL_DIRECT_PROBE == 1
  uint32_t v = xr.a;
#pragma unroll
  for (int i = 0; i < H; ++i)
    v ^= w[i];
  acc.f[0][0] += (float)(v & 1u);
#else
  uint32_t prev[2 * H];
  lower_bits<H>(w, lane, prev);
  consume_tile<H, CB, VAR, 0>(w, prev, b_frags<VAR>(xr), acc);
#endif
}

/* kInt8: the int32 sums of one 128-k slice into the fp32 accumulators
 * (token t of this lane: its scale; both limbs). The limbs' sums meet in
 * int32 first, 128 hi + lo: exact, since |128 hi + lo| <= 128 * 4 * 255 *
 * (128 * 127 + 64) = 2130739200 < 2^31 (docs/FORMAT.md 7.3), so a pair
 * costs one conversion, not two. */
template <int VAR>
__device__ __forceinline__ void convert_slice(Acc<VAR> &acc, float sc) {
  if constexpr (VAR == kInt8) {
#pragma unroll
    for (int tile = 0; tile < 8; ++tile)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int q = (int)((uint32_t)acc.i[tile][e] * 128u +
                            (uint32_t)acc.i[tile][e + 1]);
        acc.f[tile][e] = fmaf(sc, (float)q, acc.f[tile][e]);
      }
    acc.zero_i();
  }
}

/* wpart[buf][warp]: a warp's sums of a round, [token][column]. */
__device__ __forceinline__ float *wpart_at(const Smem &sm, int buf, int warp) {
  return reinterpret_cast<float *>(sm.base + sm.off_wpart) +
         (buf * kWarps + warp) * sm.m * kRowPitch;
}

/* A warp's sums of one round into wpart[buf][warp] ([token][column]), the
 * m tokens there are only (round_end and reduce_out read no others). */
template <int VAR>
__device__ __forceinline__ void flush(Acc<VAR> &acc, const Smem &sm, int warp,
                                      int lane, const float *xsum, int m,
                                      int buf) {
  float *wp = wpart_at(sm, buf, warp);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int tile = 0; tile < 8; ++tile) {
    const int c = 16 * tile + g;
    if constexpr (VAR == kInt8) {
      /* f[.][0]: row g, f[.][2]: row g + 8, token t */
      const float bx = (kMul1C + 1024.f * kMul1A) * xsum[0];
      if (t < m) {
        wp[t * kRowPitch + c] = acc.f[tile][0] + bx;
        wp[t * kRowPitch + c + 8] = acc.f[tile][2] + bx;
      }
    } else {
      const int t0 = 2 * t;
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = acc.f[tile][e];
        if constexpr (VAR == kAffine)
          v[e] = fmaf(kMul1A, v[e], kMul1C * xsum[e & 1]);
      }
      if (t0 < m) {
        wp[t0 * kRowPitch + c] = v[0];
        wp[t0 * kRowPitch + c + 8] = v[2];
      }
      if (t0 + 1 < m) {
        wp[(t0 + 1) * kRowPitch + c] = v[1];
        wp[(t0 + 1) * kRowPitch + c + 8] = v[3];
      }
    }
  }
  acc.zero_f();
}

/* Barriers by id (not __syncthreads): the round's end runs from several
 * places of the unrolled stream loop, and warps of different k-share
 * lengths reach it from different ones. Ids 2 + b: buffer b of wpart is
 * full (the round's owner waits, the others arrive); 4 + b: it is read (the
 * owner arrives, the others wait before their next flush into it). */
__device__ __forceinline__ void bar_sync(int id) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(kThreads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(kThreads) : "memory");
}
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

/* y's four columns col .. col + 3 of token tok (y: [m][n] of out_dtype)
 * from their sums h (the group's 128 across the warp): rotated, scaled by
 * svh (sc), biased (bs, where `bias`), stored. */
__device__ __forceinline__ void store_cols(void *y, int out_dtype, int64_t n,
                                           bool bias, float (&h)[4],
                                           const float (&sc)[4],
                                           const float (&bs)[4], int64_t tok,
                                           int64_t col, int lane) {
  h128_warp(h, lane);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    h[e] = __fmul_rn(h[e], sc[e]);
    if (bias)
      h[e] = __fadd_rn(h[e], bs[e]);
  }
  store4_from_float((trellis_dtype)out_dtype, y, tok * n + col, h);
}
__device__ __forceinline__ void store_out(const Params &p, float (&h)[4],
                                          const float (&sc)[4],
                                          const float (&bs)[4], int tok,
                                          int64_t col, int lane) {
  store_cols(p.y, p.out_dtype, p.n, p.bias != nullptr, h, sc, bs, tok, col,
             lane);
}

/* The cluster's sums of round r (group ng): every CTA's cbuf[r], added in
 * rank order, rotated, scaled, biased and stored by the round's owner CTA
 * (r % cluster). The peers' loads are issued before any is added. Where k
 * is split across clusters the sums go to the partials (direct_finish_kernel
 * adds them). */
__device__ inline void reduce_out(const Params &p, const Smem &sm, int r,
                                  int64_t ng, int split) {
  /* not a template, so compiled for every architecture of a fat binary:
   * the cluster API exists from sm_90 on (the kernel's own guard) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
  cg::cluster_group cluster = cg::this_cluster();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m = (int)p.m;
  const float *mine = reinterpret_cast<const float *>(sm.base + sm.off_cbuf) +
                      r * m * kRowPitch;
  const int64_t col = ng * 128 + 4 * lane;
  float sc[4], bs[4] = {0.f, 0.f, 0.f, 0.f};
  load4_f16(p.s_out, col, sc);
  if (p.bias)
    load4_f16(p.bias, col, bs);
  for (int tok = warp; tok < m; tok += kWarps) {
    float h[4] = {0.f, 0.f, 0.f, 0.f};
    /* the peers' sums four at a time: their loads overlap, the adds keep
     * rank order */
    for (int c0 = 0; c0 < p.cluster; c0 += 4) {
      float4 v[4];
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (c0 + c < p.cluster)
          v[c] = *reinterpret_cast<const float4 *>(
              cluster.map_shared_rank(mine, c0 + c) + tok * kRowPitch +
              4 * lane);
#pragma unroll
      for (int c = 0; c < 4; ++c)
        if (c0 + c < p.cluster)
          h[0] += v[c].x, h[1] += v[c].y, h[2] += v[c].z, h[3] += v[c].w;
    }
    if (p.splits > 1) { /* one k-split's sums */
      const int64_t i = ((int64_t)split * p.m + tok) * p.n + col;
      *reinterpret_cast<float4 *>(p.partial + i) =
          make_float4(h[0], h[1], h[2], h[3]);
    } else {
      store_out(p, h, sc, bs, tok, col, lane);
    }
  }
#else
  (void)p, (void)sm, (void)r, (void)ng, (void)split;
#endif
}

/* The end of round r for one warp: its sums into wpart[r % wbufs]; the
 * round's owner warp (r % kWarps) waits for the others' and adds the 8 in
 * warp order into cbuf[r], for the m tokens there are, while the others go
 * on streaming. Before a flush a warp waits only for the owner of the
 * buffer's previous round to have read it (wbufs rounds back). The cluster
 * meets once, after the last round. */
template <int VAR>
__device__ __forceinline__ void round_end(Acc<VAR> &acc, const Smem &sm, int r,
                                          int rounds, int warp, int lane,
                                          const float *xsum, int m) {
  const int nb = sm.wbufs, buf = nb == 2 ? r & 1 : 0; /* r % nb */
  if (r >= nb && warp != ((r - nb) & (kWarps - 1)))
    bar_sync(4 + buf); /* round r - nb's owner has read the buffer */
  flush<VAR>(acc, sm, warp, lane, xsum, m, buf);
  if (warp != (r & (kWarps - 1))) {
    bar_arrive(2 + buf);
    return;
  }
  bar_sync(2 + buf); /* every warp's sums of round r */
  const float *wp = wpart_at(sm, buf, 0);
  float *cb =
      reinterpret_cast<float *>(sm.base + sm.off_cbuf) + r * m * kRowPitch;
  for (int tok = 0; tok < m; ++tok) {
    float4 v[kWarps];
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      v[w] = *reinterpret_cast<const float4 *>(wp + (w * m + tok) * kRowPitch +
                                               4 * lane);
    float4 t = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      t.x += v[w].x, t.y += v[w].y, t.z += v[w].z, t.w += v[w].w;
    *reinterpret_cast<float4 *>(cb + tok * kRowPitch + 4 * lane) = t;
  }
  if (r + nb < rounds)
    bar_arrive(4 + buf); /* the buffer is free again */
}

/* Where a CTA and one of its warps stand in the grid: cluster split +
 * splits * q takes k-split `split` of the groups q, q + clusters /
 * splits, ... (`rounds` of them); the CTA the 128-k blocks [b0, b1) of
 * the group's k (part split * cluster + rank), its warp the k-tiles
 * [w0, w1) of the CTA's kts. */
struct Place {
  int64_t q, vclusters, ngroups, b0, b1;
  int split, rounds, kts, w0, w1, wlen;
};
__device__ __forceinline__ Place place(const Params &p, int rank, int warp) {
  Place l;
  const int64_t qs = blockIdx.x / p.cluster;
  l.vclusters = p.clusters / p.splits;
  l.q = qs / p.splits;
  l.split = (int)(qs % p.splits);
  l.ngroups = p.n / 128;
  const int64_t kblocks = p.k / 128;
  l.rounds = (int)((l.ngroups - l.q + l.vclusters - 1) / l.vclusters);
  const int64_t part = (int64_t)l.split * p.cluster + rank,
                parts = (int64_t)p.splits * p.cluster;
  l.b0 = kblocks * part / parts, l.b1 = kblocks * (part + 1) / parts;
  l.kts = (int)(8 * (l.b1 - l.b0));
  l.w0 = l.kts * warp / kWarps, l.w1 = l.kts * (warp + 1) / kWarps;
  l.wlen = l.w1 - l.w0;
  return l;
}

/* A warp's walk through its groups: the k-tiles of one round (a k-tile
 * row apart), then a jump to the first of the next round's group. */
template <int H> struct WarpStream {
  static constexpr int kGroupBytes = 128 * H;
  LaneCursor<H> cur;
  int64_t kstride, rjump;
  int lleft, wlen; /* loads left in the round being loaded */
  __device__ __forceinline__ void start(const Params &p, const Place &pl,
                                        int lane) {
    const char *pay = reinterpret_cast<const char *>(p.payload);
    kstride = pl.ngroups * kGroupBytes;
    rjump = pl.vclusters * kGroupBytes - (int64_t)(pl.wlen - 1) * kstride;
    cur.at(pay + ((8 * pl.b0 + pl.w0) * pl.ngroups + pl.q) * kGroupBytes, lane);
    lleft = wlen = pl.wlen;
  }
  __device__ __forceinline__ void next(uint32_t (&dst)[H]) {
    cur.load(dst);
    const bool end = --lleft == 0;
    cur.advance(end ? rjump : kstride);
    if (end)
      lleft = wlen;
  }
};

#if TRL_DIRECT_TIMELINE
/* Thread 0's record of the CTA's stamps. */
__device__ inline void
timeline_write(const Params &p,
               const unsigned long long (&tl)[TRL_TIMELINE_STAMPS]) {
  if (threadIdx.x == 0 && p.timeline) {
    const unsigned slot =
        atomicAdd(reinterpret_cast<unsigned *>(p.timeline), 1u);
    if (slot < TRL_TIMELINE_CAP) {
      unsigned long long *rec = p.timeline + TRL_TIMELINE_WORDS * (1 + slot);
      unsigned smid;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
      rec[0] = (unsigned long long)p.payload;
      rec[1] = ((unsigned long long)p.k << 32) | (unsigned long long)p.n;
      rec[2] = ((unsigned long long)p.m << 48) |
               ((unsigned long long)smid << 32) | blockIdx.x;
      for (int i = 0; i < TRL_TIMELINE_STAMPS; ++i)
        rec[3 + i] = tl[i];
    }
  }
}
#endif

/* The end of both kernels: the cluster meets, each CTA adds, rotates and
 * stores the rounds r with r % cluster equal to its rank (reduce_out), then
 * stays until every peer has read its sums. tl: the CTA's stamps, written
 * out where TRL_DIRECT_TIMELINE records them. */
__device__ __forceinline__ void
cluster_out(const Params &p, const Smem &sm, const Place &pl, int rank,
            unsigned long long (&tl)[TRL_TIMELINE_STAMPS]) {
  TRL_TL(4);
  cluster_arrive();
  cluster_wait();
  TRL_TL(5);
  for (int r = rank; r < pl.rounds; r += p.cluster)
    reduce_out(p, sm, r, pl.q + (int64_t)r * pl.vclusters, pl.split);
  cluster_arrive();
  cluster_wait();
  TRL_TL(6);
#if TRL_DIRECT_TIMELINE
  timeline_write(p, tl);
#else
  (void)tl;
#endif
}

template <int H, int CB, int VAR>
__global__ void __launch_bounds__(kThreads, TRL_DIRECT_CTAS_PER_SM)
    direct_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
  extern __shared__ __align__(16) char smem_raw[];
  unsigned long long tl[TRL_TIMELINE_STAMPS] = {}; /* TRL_DIRECT_TIMELINE */
  TRL_TL(0);
  constexpr int kStages = trl_direct_stages(H);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const Place pl = place(p, rank, warp);
  const int64_t b0 = pl.b0, b1 = pl.b1;
  const int rounds = pl.rounds, w0 = pl.w0, w1 = pl.w1, wlen = pl.wlen;
  const Smem sm = smem_layout<VAR>(smem_raw, (int)p.m, p.kt_cta, p.rounds, 0);
  const int total = TRL_DIRECT_PROBE == 2 ? 0 : rounds * wlen;
  WarpStream<H> ws;
  ws.start(p, pl, lane);

  /* 1. Weights first: they depend on nothing the previous kernel writes.
   * (An L2 bulk prefetch of the groups after the ring measured slower:
   * docs/TUNING.md.) */
  uint32_t ring[kStages][H];
#pragma unroll
  for (int s = 0; s < kStages; ++s)
    if (s < total)
      ws.next(ring[s]);

  /* 2. x, once the previous kernel is done with it. */
  griddep_wait();
  TRL_TL(1);
  stage_x<VAR>(p, sm, b0, b1);
  griddep_launch_dependents();
  __syncthreads();
  TRL_TL(2);
#if TRL_DIRECT_TIMELINE
  if (threadIdx.x == 0 && total > 0) { /* the first group's words are in */
    uint32_t d;
    asm volatile("mov.b32 %0, %1;" : "=r"(d) : "r"(ring[0][0]));
    tl[3] = global_ns() | (d & 0u);
  }
#endif

  /* the constant term of the affine map: this warp's sum of x per token */
  float xsum[2] = {};
  if constexpr (VAR != kHalves) {
    const float *sx = reinterpret_cast<const float *>(sm.base + sm.off_sumx);
    const int t = lane & 3;
#pragma unroll
    for (int e = 0; e < (VAR == kInt8 ? 1 : 2); ++e) {
      const int tok = VAR == kInt8 ? t : 2 * t + e;
      float s = 0.f;
      for (int kt = w0; tok < sm.m && kt < w1; ++kt)
        s += sx[kt * sm.m + tok];
      xsum[e] = s;
    }
  }

  Acc<VAR> acc;
  acc.zero_f();
  acc.zero_i();
  if (wlen == 0 || total == 0) { /* a share under 8 k-tiles: idle warps */
    for (int r = 0; r < rounds; ++r)
      round_end<VAR>(acc, sm, r, rounds, warp, lane, xsum, (int)p.m);
  } else {
    /* 3. Stream: consume a stage, refill it kStages groups ahead. */
    constexpr int kXt = x_tile_bytes<VAR>();
    const uint32_t xl = x_lane_base<VAR>(
        (uint32_t)__cvta_generic_to_shared(sm.base), sm.xs_pitch, lane);
    const uint32_t x_first = xl + kXt * w0;
    int kl = w0; /* the k-tile consumed, inside the CTA's share */
    int cr = 0;  /* the round */
    const bool xv = x_row_valid<VAR>(lane, (int)p.m);
    XRaw xr = load_x<VAR>(x_first, xv);
    for (int base = 0; base < total; base += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int i = base + s;
        if (i < total) {
          const bool last = kl == w1 - 1;
          /* the next group's activations, loaded while this one decodes */
          const XRaw xn = load_x<VAR>(last ? x_first : xl + kXt * (kl + 1), xv);
          consume<H, CB, VAR>(ring[s], lane, xr, acc);
          xr = xn;
          if (i + kStages < total)
            ws.next(ring[s]);
          if constexpr (VAR == kInt8) {
            if ((kl & 7) == 7 || last)
              convert_slice<VAR>(
                  acc, (lane & 3) < sm.m
                           ? reinterpret_cast<const float *>(
                                 sm.base +
                                 sm.off_scale)[(kl >> 3) * sm.m + (lane & 3)]
                           : 0.f);
          }
          if (last) {
            round_end<VAR>(acc, sm, cr, rounds, warp, lane, xsum, (int)p.m);
            kl = w0, ++cr;
          } else {
            ++kl;
          }
        }
      }
    }
  }
  /* 4. The cluster's sums. */
  cluster_out(p, sm, pl, rank, tl);
#endif
}

/* ------------------------------------------------ the parked form -- */

/* W_hat of two weights (their halves in ya and yb) as an fp16 pair: each
 * weight's halves added with one RNE, the format's reconstruct. */
__device__ __forceinline__ uint32_t hat_pair(uint32_t ya, uint32_t yb) {
  uint32_t lo = __byte_perm(ya, yb, 0x5410), hi = __byte_perm(ya, yb, 0x7632);
  __half2 w = __hadd2(*reinterpret_cast<__half2 *>(&lo),
                      *reinterpret_cast<__half2 *>(&hi));
  return *reinterpret_cast<uint32_t *>(&w);
}

/* Tile T of a group decoded into its parked A operand: the lane's four
 * words at dst + 512 T (dst: the group's tiles plus 16 lane). kHalves
 * parks W_hat pairs, kAffine MUL1's (1024 + S) pairs, both in the order of
 * consume_tile's operands (a weight's k: 2t, 2t + 1, 2t + 8, 2t + 9 of
 * rows g and g + 8). */
template <int H, int CB, int VAR, int T>
__device__ __forceinline__ void
park_tile(const uint32_t (&w)[H], const uint32_t (&prev)[2 * H], uint32_t dst) {
  if constexpr (T < 8) {
    static_assert(VAR != kInt8, "the int8 form parks as the affine one");
    uint32_t s[8], a[4];
    tile_states<H, T, VAR == kHalves>(w, prev, s);
    if constexpr (VAR == kHalves) {
      uint32_t y[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        y[j] = codebook_halves<CB>(s[j]);
      a[0] = hat_pair(y[0], y[1]), a[1] = hat_pair(y[4], y[5]);
      a[2] = hat_pair(y[2], y[3]), a[3] = hat_pair(y[6], y[7]);
    } else {
      uint32_t u[4];
      affine_pairs(s, u);
      a[0] = u[0], a[1] = u[2], a[2] = u[1], a[3] = u[3];
    }
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(
                     dst + TRL_DIRECT_PARK_TILE_BYTES * T),
                 "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3])
                 : "memory");
    park_tile<H, CB, VAR, T + 1>(w, prev, dst);
  }
}

/* The parked form (trl_direct_park_shape shapes it: the CTA's whole share
 * fits in half an SM's shared memory, one CTA of the layer per SM). Before
 * griddepcontrol.wait, while the previous kernel finishes, every warp decodes
 * its groups as direct_kernel would stream them and parks the tiles,
 * [round][k-tile][n-tile]; after it, x is staged and warp w multiplies n-tile w
 * over every k-tile of the CTA's share (one MMA a tile, four accumulators added
 * in a fixed order), so its sums are the CTA's: they go straight to cbuf, and
 * the cluster's reduction is direct_kernel's. */
template <int H, int CB, int VAR>
__global__ void __launch_bounds__(kThreads, TRL_DIRECT_CTAS_PER_SM)
    direct_park_kernel(const Params p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000
  extern __shared__ __align__(16) char smem_raw[];
  unsigned long long tl[TRL_TIMELINE_STAMPS] = {}; /* TRL_DIRECT_TIMELINE */
  TRL_TL(0);
  constexpr int kStages = trl_direct_stages(H);
  constexpr int kTileB = TRL_DIRECT_PARK_TILE_BYTES;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = (int)cluster.block_rank();
  const Place pl = place(p, rank, warp);
  const int m = (int)p.m;
  const Smem sm = smem_layout<VAR>(smem_raw, m, p.kt_cta, p.rounds, 1);
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(sm.base);
  const uint32_t park = base + sm.off_park;
  const int total = pl.rounds * pl.wlen;
  /* The next launch may start at once: its CTAs take the room this shape
   * leaves on every SM (trl_direct_park_shape) and decode before their
   * wait while this one finishes. */
  griddep_launch_dependents();

  /* 1. Decode the share before the wait: weights depend on nothing the
   * previous kernel writes. */
  {
    WarpStream<H> ws;
    ws.start(p, pl, lane);
    uint32_t ring[kStages][H];
#pragma unroll
    for (int s = 0; s < kStages; ++s)
      if (s < total)
        ws.next(ring[s]);
    int kl = pl.w0, cr = 0; /* the k-tile and round decoded */
    for (int b = 0; b < total; b += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int i = b + s;
        if (i < total) {
          uint32_t prev[2 * H];
          lower_bits<H>(ring[s], lane, prev);
          park_tile<H, CB, VAR, 0>(
              ring[s], prev,
              park + (uint32_t)((cr * p.kt_cta + kl) * 8 * kTileB + 16 * lane));
          if (i + kStages < total)
            ws.next(ring[s]);
          if (++kl == pl.w1)
            kl = pl.w0, ++cr;
        }
      }
    }
  }
  TRL_TL(3);

  /* 2. x, once the previous kernel is done with it. */
  griddep_wait();
  TRL_TL(1);
  stage_x<VAR>(p, sm, pl.b0, pl.b1);
  __syncthreads(); /* xs and every warp's parked tiles */
  TRL_TL(2);

  /* 3. n-tile `warp` of every k-tile of each round: the CTA's sums. */
  const int g = lane >> 2, t = lane & 3;
  float xsum[2] = {}; /* kAffine: the share's sum of x per token */
  if constexpr (VAR == kAffine) {
    const float *sx = reinterpret_cast<const float *>(sm.base + sm.off_sumx);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int tok = 2 * t + e;
      float sum = 0.f;
      for (int kt = 0; tok < m && kt < pl.kts; ++kt)
        sum += sx[kt * m + tok];
      xsum[e] = sum;
    }
  }
  const uint32_t xl = x_lane_base<VAR>(base, sm.xs_pitch, lane);
  const bool xv = x_row_valid<VAR>(lane, m);
  for (int r = 0; r < pl.rounds; ++r) {
    float c[4][4] = {};
    const uint32_t src =
        park + (uint32_t)((r * p.kt_cta * 8 + warp) * kTileB + 16 * lane);
    for (int kt = 0; kt < pl.kts; kt += 4) { /* kts: a multiple of 8 */
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a0, a1, a2, a3;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "r"(src + (uint32_t)((kt + j) * 8 * kTileB)));
        const XRaw xr = load_x<VAR>(xl + 32 * (kt + j), xv);
        hmma(c[j], a0, a1, a2, a3, xr.a, xr.b);
      }
    }
    float v[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      v[e] = (c[0][e] + c[1][e]) + (c[2][e] + c[3][e]);
      if constexpr (VAR == kAffine)
        v[e] = fmaf(kMul1A, v[e], kMul1C * xsum[e & 1]);
    }
    /* c[.][0]: row g, token 2t; [1]: token 2t + 1; [2], [3]: row g + 8 */
    float *cb = reinterpret_cast<float *>(sm.base + sm.off_cbuf) +
                r * m * kRowPitch + 16 * warp + g;
    if (2 * t < m)
      cb[2 * t * kRowPitch] = v[0], cb[2 * t * kRowPitch + 8] = v[2];
    if (2 * t + 1 < m)
      cb[(2 * t + 1) * kRowPitch] = v[1],
                       cb[(2 * t + 1) * kRowPitch + 8] = v[3];
  }

  /* 4. The cluster's sums, as direct_kernel's. */
  cluster_out(p, sm, pl, rank, tl);
#endif
}

/* ------------------------------------------------------ family -- */

struct RateAxis : dispatch::Axis<TRL_DIRECT_RATES> {
  static constexpr const char *kName = "rate (half-bits per weight)";
};
struct DirectCodebookAxis
    : dispatch::Axis<TRELLIS_CB_3INST, TRELLIS_CB_MCG, TRELLIS_CB_MUL1> {
  static constexpr const char *kName = "codebook";
};
struct VarAxis
    : dispatch::Axis<TRL_DIRECT_HALVES, TRL_DIRECT_AFFINE, TRL_DIRECT_INT8> {
  static constexpr const char *kName = "multiply";
};

struct Direct {
  static constexpr const char *kName = "register-direct decode-GEMM";
  using Axes = dispatch::Axes<RateAxis, DirectCodebookAxis, VarAxis>;
  static constexpr int kUnits = 11;
  struct Args {
    const trl_direct_launch *launch;
    cudaStream_t stream;
    int regs;    /* query: registers per thread */
    int cluster; /* query with cluster > 0: clusters of this size */
    size_t smem; /* and this dynamic shared memory per CTA */
    int active;  /* fit the device at once (-2: the query failed) */
    int query_error;
  };
  template <int H, int CB, int VAR> static constexpr bool exists() {
    return trl_direct_variant_exists(H, CB, VAR);
  }
  /* The kernel of a launch: parked or streaming. */
  template <int H, int CB, int VAR>
  static constexpr auto kernel(bool park) -> void (*)(const Params) {
    if constexpr (VAR != kInt8)
      return park ? direct_park_kernel<H, CB, VAR> : direct_kernel<H, CB, VAR>;
    else
      return direct_kernel<H, CB, VAR>;
  }
  template <int H, int CB, int VAR> static int prepare(Args &) {
    cudaError_t e = cudaSuccess;
    for (int park = 0; park <= (VAR != kInt8) && e == cudaSuccess; ++park) {
      auto kern = kernel<H, CB, VAR>(park != 0);
      e = cudaFuncSetAttribute(kern,
                               cudaFuncAttributeMaxDynamicSharedMemorySize,
                               TRL_DIRECT_MAX_SMEM);
      if (e == cudaSuccess)
        e = cudaFuncSetAttribute(
            kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    }
    return (int)e;
  }
  template <int H, int CB, int VAR> static int query(Args &a) {
    auto kern = direct_kernel<H, CB, VAR>;
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, kern);
    a.regs = e == cudaSuccess ? attr.numRegs : 0;
    a.active = 0;
    if (e == cudaSuccess && a.cluster > 0) {
      cudaLaunchConfig_t cfg = {};
      cudaLaunchAttribute attr1[1];
      attr1[0].id = cudaLaunchAttributeClusterDimension;
      attr1[0].val.clusterDim.x = (unsigned)a.cluster;
      attr1[0].val.clusterDim.y = 1;
      attr1[0].val.clusterDim.z = 1;
      cfg.gridDim = dim3((unsigned)a.cluster);
      cfg.blockDim = dim3(kThreads);
      cfg.dynamicSmemBytes = a.smem;
      cfg.attrs = attr1;
      cfg.numAttrs = 1;
      e = cudaOccupancyMaxActiveClusters(&a.active, kern, &cfg);
      if (e != cudaSuccess) { /* the query failed: not known */
        (void)cudaGetLastError();
        a.active = -2;
        a.query_error = (int)e;
        e = cudaSuccess;
      }
    }
    return (int)e;
  }
  template <int H, int CB, int VAR> static int launch(Args &a) {
    const trl_direct_launch &l = *a.launch;
    Params p;
    p.payload = l.payload;
    p.x = l.x;
    p.s_in = l.s_in;
    p.s_out = l.s_out;
    p.bias = l.bias;
    p.y = l.y;
    p.m = l.m;
    p.k = l.k;
    p.n = l.n;
    p.in_dtype = l.in_dtype;
    p.out_dtype = l.out_dtype;
    p.cluster = l.grid.cluster;
    p.clusters = l.grid.clusters;
    p.splits = l.grid.splits;
    p.partial = l.partial;
    p.kt_cta = l.grid.kt_cta;
    p.rounds = l.grid.rounds;
#if TRL_DIRECT_TIMELINE
    p.timeline = (unsigned long long *)trl_direct_timeline_ptr();
#endif
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)l.grid.cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1] = pdl_attribute();
    cfg.gridDim = dim3((unsigned)(l.grid.cluster * l.grid.clusters));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = l.grid.smem_bytes;
    cfg.stream = a.stream;
    cfg.attrs = attr;
    cfg.numAttrs = l.pdl ? 2 : 1;
    return (int)cudaLaunchKernelEx(&cfg, kernel<H, CB, VAR>(l.grid.park != 0),
                                   p);
  }
};

} // namespace direct
} // namespace trl

#endif
