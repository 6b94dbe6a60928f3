/* The persistent decode-GEMM for small m (at most 16 rows): the whole layer,
 * y = Hblk(Hblk(x * s_in) . W_hat) * s_out + bias, in one launch that needs
 * no workspace and no per-plan state.
 *
 *  - Grid: clusters of C CTAs. Each cluster walks the 128-column strips
 *    cluster_id, cluster_id + clusters, ...; CTA rank r of a cluster always
 *    takes k-chunk r (chunk_blocks 128-k blocks), so its part of the input
 *    is rotated once, into shared memory, and reused for every strip.
 *  - Warp roles: one producer warp streams the weight payload into a ring
 *    of stages (one stage = 8 tile rows x the strip's 8 tile columns) with
 *    bulk copies that complete on mbarriers; eight consumer warps (two
 *    warpgroups) decode a tile column each and multiply with wgmma, the
 *    decoded tile as the A operand in registers, the resident activations
 *    as B in shared memory. Stages are released per warp after its last
 *    shared-memory read of the stage, so the ring runs ahead across strips.
 *  - Halves: for 3INST and MCG the codebook value is the sum of two fp16
 *    halves; with Halves the tensor core adds them: each decoded register
 *    (lo, hi) is a k-pair of A, and B holds every activation twice. The
 *    product then uses the unrounded W_hat (closer to the exact value than
 *    the fp16 W_hat). Without Halves (and always for MUL1) the decode forms
 *    the fp16 W_hat exactly as the format defines it.
 *  - Reduction: each row of a strip has an owner CTA in the cluster (it
 *    moves from strip to strip). Every CTA pushes its partial sums of the
 *    row into the owner's inbox with remote asynchronous stores that
 *    complete on the owner's mbarrier; the owner adds them in rank order
 *    (deterministic), rotates (H128), scales by s_out, adds the bias and
 *    stores y, one strip later, so nobody waits for it. Inboxes are double
 *    buffered; owners hand a buffer back with a remote arrive on every
 *    CTA's "free" barrier. There is no cluster-wide barrier after the
 *    start: its wait also synchronises the CTA, producer included.
 *
 * Only sm_90a has the body (wgmma, bulk copies); elsewhere it is empty and
 * the plan never selects it. */
#ifndef TRL_CUDA_STREAM_GEMM_CUH
#define TRL_CUDA_STREAM_GEMM_CUH

#include "common.cuh"
#include "dispatch.cuh"
#include "kernels.h"
#include "mbarrier.cuh"
#include "tile_decode.cuh"
#include "wgmma.cuh"

#include <cooperative_groups.h>
#include <cuda_runtime.h>

namespace trl {
namespace stream {

namespace cg = cooperative_groups;

constexpr int kConsumerWarps = 8;
constexpr int kThreads = (kConsumerWarps + 1) * 32;
constexpr int kProducerWarp = kConsumerWarps;
constexpr int kMaxCluster = 16;

/* Weight bytes of one stage: 8 tile rows x 8 tile columns. */
template <int K> __host__ __device__ constexpr int stage_bytes() {
  return 8 * 8 * 32 * K;
}
/* Stages in the ring: about 36 KiB of payload in flight per CTA (three
 * CTAs per SM), at least three stages. */
template <int K> __host__ __device__ constexpr int ring_stages() {
  return (36 * 1024) / stage_bytes<K>() < 3    ? 3
         : (36 * 1024) / stage_bytes<K>() > 12 ? 12
                                               : (36 * 1024) / stage_bytes<K>();
}
/* The activation layout: B of wgmma, K-major without swizzle. A core matrix
 * is 8 tokens x 16 bytes (128 contiguous bytes); core matrices adjacent in
 * k are LBO = NTOK / 8 * 128 bytes apart, those adjacent in tokens 128.
 * Dup (halves): every k of a tile row becomes two expanded k (32 per tile
 * row, two wgmma k16 steps s = 0, 1); step s, slot t = 0..7 holds the
 * activation of k = 2 t + s (t < 4) or 2 (t - 4) + 8 + s, twice. That is
 * the order in which a lane's decoded weights fill the A fragments. */
template <int NTOK> __host__ __device__ constexpr int act_lbo() {
  return NTOK / 8 * 128;
}
template <int NTOK, bool Dup> __host__ __device__ constexpr int kc_per_block() {
  return Dup ? 32 : 16; /* core matrices along k per 128-k block */
}
template <int NTOK, bool Dup>
__host__ __device__ constexpr int act_block_bytes() {
  return kc_per_block<NTOK, Dup>() * act_lbo<NTOK>();
}
/* Rows of a strip one CTA owns at most: row t belongs to rank
 * (t + round) % C. */
__host__ __device__ constexpr int owned_rows(int ntok, int cluster) {
  return (ntok + cluster - 1) / cluster;
}
/* Inbox: two buffers (strips alternate) of [owned row][sender rank][128]
 * fp32 partial sums. */
__host__ __device__ constexpr int inbox_buf_bytes(int ntok, int cluster) {
  return owned_rows(ntok, cluster) * cluster * 128 * 4;
}
/* Dynamic shared memory: activations of chunk_blocks blocks, the ring, the
 * inbox and the mbarriers (1 KiB aligned sections). */
template <int K, int NTOK, bool Dup>
__host__ __device__ constexpr size_t smem_bytes(int chunk_blocks, int cluster) {
  return (size_t)chunk_blocks * act_block_bytes<NTOK, Dup>() +
         (size_t)ring_stages<K>() * stage_bytes<K>() +
         2 * (size_t)inbox_buf_bytes(NTOK, cluster) + 1024 + 1024;
}

struct Params {
  const int16_t *trellis;
  const void *x;         /* [m][k], in_dtype */
  const uint16_t *s_in;  /* fp16 [k] */
  const uint16_t *s_out; /* fp16 [n] */
  const uint16_t *bias;  /* fp16 [n] or NULL */
  void *y;               /* [m][n], out_dtype */
  int64_t m, k, n;
  int chunk_blocks; /* 128-k blocks per CTA (its k-chunk) */
  int clusters;     /* clusters in the grid */
  trellis_dtype in_dtype, out_dtype;
  HotShifts shifts;
};

/* ---- bulk copies, remote mbarriers (sm_90; the rest: mbarrier.cuh) --- */
#if TRL_WGMMA

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
               : "=l"(pol));
  return pol;
}
/* bytes from global to this CTA's shared memory, completing on bar. */
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src,
                                          uint32_t bytes, uint32_t bar,
                                          uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar), "l"(policy)
               : "memory");
}
/* A 32-bit word of shared memory (no volatile: the ring's barrier waits
 * and arrivals, which are, order it). */
__device__ __forceinline__ uint32_t lds_u32(uint32_t addr) {
  uint32_t v;
  asm("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void lds_u32x4(uint32_t addr, uint32_t (&v)[4]) {
  asm("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
      : "r"(addr)
      : "memory");
}
__device__ __forceinline__ void lds_u32x2(uint32_t addr, uint32_t (&v)[4]) {
  asm("ld.shared.v2.b32 {%0, %1}, [%2];"
      : "=r"(v[0]), "=r"(v[1])
      : "r"(addr)
      : "memory");
  v[2] = v[3] = 0u;
}
/* This CTA's shared address `a` in the cluster CTA `rank`. */
__device__ __forceinline__ uint32_t mapa(uint32_t a, int rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(r)
               : "r"(a), "r"(rank));
  return r;
}
/* One fp32 into a peer's shared memory (cluster address), completing
 * 4 bytes of the transaction of the peer's mbarrier `bar`. */
__device__ __forceinline__ void st_async_f32(uint32_t addr, float v,
                                             uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 "
               "[%0], %1, [%2];" ::"r"(addr),
               "f"(v), "r"(bar)
               : "memory");
}
/* Arrive on a (possibly remote) mbarrier given by its cluster address,
 * releasing at cluster scope: the peer that waits on it then sees this
 * CTA's registration of the next round's bytes (and its reads of the
 * buffer it hands back are complete). */
__device__ __forceinline__ void mbar_arrive_remote(uint32_t bar) {
  asm volatile(
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar)
      : "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}

#endif /* TRL_WGMMA */

/* ---- the input: x * s_in, rotated, into the resident activations -------- */

/* Lane's 4 elements of row t, 128-k block b, of x (as floats) and s_in. */
__device__ __forceinline__ void load_slice(const Params &p, int64_t b, int t,
                                           int lane, float (&h)[4],
                                           float (&s)[4]) {
  const int64_t col0 = b * 128 + 4 * lane, at = (int64_t)t * p.k + col0;
  load4_as_float(p.in_dtype, p.x, at, h);
  load4_f16(p.s_in, col0, s);
}

/* RNE_fp16(x * s_in), H128 in fp32 times r_scale, RNE to fp16, packed
 * (v0, v1 | v2, v3): the arithmetic of every input rotation of the
 * library. Warp-collective. */
__device__ __forceinline__ uint2 rotate_slice(float (&h)[4],
                                              const float (&s)[4], int lane) {
#pragma unroll
  for (int e = 0; e < 4; ++e)
    h[e] = __half2float(__float2half_rn(__fmul_rn(h[e], s[e])));
  h128_warp(h, lane);
  return make_uint2(pack2_from_float<0>(h[0], h[1]),
                    pack2_from_float<0>(h[2], h[3]));
}

/* Writes lane's 4 rotated values (k = 4 lane .. 4 lane + 3 of block b,
 * token t) where the activation layout wants them. Sync (mma.sync): the B
 * fragments themselves, [block][tile row][token group][lane][words], so a
 * lane loads a tile row's fragments with one 16-byte (Dup) or 8-byte load;
 * Dup words are (step 0: k 2q, k 2q + 8; step 1: k 2q + 1, k 2q + 9), each
 * activation twice; otherwise (k 2q, 2q + 1 | 2q + 8, 2q + 9). */
template <int NTOK, bool Dup, bool Sync>
__device__ __forceinline__ void store_slice(char *act, int b, int t, int lane,
                                            uint2 v) {
  if constexpr (Sync) {
    constexpr int kWords = Dup ? 4 : 2;
    const int kr = lane >> 2, hi = (lane & 3) >> 1;
    char *grp = act + ((b * 8 + kr) * (NTOK / 8) + (t >> 3)) * 32 * kWords * 4;
    const int q0 = 2 * (lane & 1), base = 4 * (t & 7);
    if constexpr (Dup) {
      const uint32_t e[4] = {
          __byte_perm(v.x, v.x, 0x1010), __byte_perm(v.x, v.x, 0x3232),
          __byte_perm(v.y, v.y, 0x1010), __byte_perm(v.y, v.y, 0x3232)};
#pragma unroll
      for (int i = 0; i < 4; ++i) /* k = 4 (lane & 3) + i: q, step */
        *reinterpret_cast<uint32_t *>(
            grp + ((base + q0 + (i >> 1)) * 4 + 2 * (i & 1) + hi) * 4) = e[i];
    } else {
      *reinterpret_cast<uint32_t *>(grp + ((base + q0) * 2 + hi) * 4) = v.x;
      *reinterpret_cast<uint32_t *>(grp + ((base + q0 + 1) * 2 + hi) * 4) = v.y;
    }
    return;
  }
  constexpr int LBO = act_lbo<NTOK>();
  const int kr = lane >> 2, j = (lane & 3) >> 1, off = (lane & 1) * 8;
  char *row = act + (t >> 3) * 128 + (t & 7) * 16 + off;
  if constexpr (Dup) {
    /* slot p = 2 (lane & 1) + e / 2, step s = e % 2 */
    const uint2 s0 = make_uint2(__byte_perm(v.x, v.x, 0x1010),
                                __byte_perm(v.y, v.y, 0x1010));
    const uint2 s1 = make_uint2(__byte_perm(v.x, v.x, 0x3232),
                                __byte_perm(v.y, v.y, 0x3232));
    const int kc0 = b * 32 + (kr * 2) * 2 + j;
    *reinterpret_cast<uint2 *>(row + kc0 * LBO) = s0;
    *reinterpret_cast<uint2 *>(row + (kc0 + 2) * LBO) = s1;
  } else {
    const int kc = b * 16 + kr * 2 + j;
    *reinterpret_cast<uint2 *>(row + kc * LBO) = v;
  }
}

/* ---- decode into A fragments -------------------------------------------- */

/* The lane's A fragments of one tile: wgmma k16 steps a[s][0..3]. Dup: the
 * codebook halves unsummed, step s takes weights j = s, s + 4, s + 2, s + 6
 * (rows 2q + s, 2q + 8 + s at columns g, g + 8). Otherwise the fp16 W_hat
 * of rows 2q, 2q + 1 | 2q + 8, 2q + 9 in one step. */
template <int K, int CB, bool Dup>
__device__ __forceinline__ void
decode_tile(const uint32_t (&w)[TileGeom<K>::kNW], int o,
            uint32_t (&a)[Dup ? 2 : 1][4], const HotShifts &sh) {
  uint32_t st[8];
  states_from_words<K>(w, o, st, sh);
  if constexpr (Dup) {
    uint32_t y[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      y[j] = codebook_halves<CB>(st[j]);
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      a[s][0] = y[s];
      a[s][1] = y[s + 4];
      a[s][2] = y[s + 2];
      a[s][3] = y[s + 6];
    }
  } else if constexpr (CB == TRELLIS_CB_MUL1) {
    /* MUL1: h = fp16 bits ACC + bytesum(state * MUL), two weights per
     * HFMA2 (one rounding each: bit-exact). */
    uint32_t h[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      h[j] = __dp4a(st[j] * TRL_MUL_MUL1, 0x01010101u, TRL_MUL1_ACC);
    const __half2 k_inv = __halves2half2(__ushort_as_half(TRL_MUL1_K_INV),
                                         __ushort_as_half(TRL_MUL1_K_INV));
    const __half2 bias = __halves2half2(__ushort_as_half(TRL_MUL1_BIAS),
                                        __ushort_as_half(TRL_MUL1_BIAS));
    uint32_t b[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t pair = __byte_perm(h[2 * i], h[2 * i + 1], 0x5410);
      __half2 v = __hfma2(*reinterpret_cast<__half2 *>(&pair), k_inv, bias);
      b[i] = *reinterpret_cast<uint32_t *>(&v);
    }
    a[0][0] = b[0], a[0][1] = b[2], a[0][2] = b[1], a[0][3] = b[3];
  } else {
    uint32_t b[4];
    decode_frags<K, CB, false>(w, o, b, sh);
    a[0][0] = b[0], a[0][1] = b[2], a[0][2] = b[1], a[0][3] = b[3];
  }
}

/* ---- the cluster's sums of one strip -> y ---------------------------------
 */

#if TRL_WGMMA
/* The mbarriers of one CTA: the ring's, and per inbox buffer "full" (the
 * owner's own expect_tx plus the peers' pushed bytes) and "free" (one
 * arrival from every CTA of the cluster once it has read its inbox). */
struct Bars {
  uint32_t full, empty; /* ring: full[s] = full + 8 s, empty likewise */
  uint32_t inbox;       /* in_full(b) = inbox + 8 b, in_free(b) + 16 */
  __device__ __forceinline__ uint32_t in_full(int b) const {
    return inbox + 8 * b;
  }
  __device__ __forceinline__ uint32_t in_free(int b) const {
    return inbox + 16 + 8 * b;
  }
};

/* Rows this CTA owns in round r: t = t0 + C j < m, t0 = (rank - r) mod C. */
__device__ __forceinline__ int first_owned(int rank, int round, int C) {
  return ((rank - round) % C + C) % C;
}

/* The bytes the peers push into this CTA's inbox in round r: every row it
 * owns, 128 fp32 from each of the C CTAs. A cluster of one CTA stores
 * into its own inbox with plain stores (st.async needs a peer), counted
 * by arrivals instead (in_full_count). */
__device__ __forceinline__ uint32_t inbox_round_bytes(int rank, int round,
                                                      int C, int m) {
  const int t0 = first_owned(rank, round, C);
  const int rows = t0 < m ? (m - 1 - t0) / C + 1 : 0;
  return C > 1 ? (uint32_t)(rows * C * 128 * 4) : 0u;
}

/* Arrivals that complete an inbox buffer's "full" phase: the owner's
 * registration, and with one CTA each consumer warp's after its stores. */
__device__ __forceinline__ unsigned in_full_count(int C) {
  return C > 1 ? 1u : 1u + kConsumerWarps;
}

/* This thread's partial sums of strip round `round` (D fragments of tile
 * column `warp`, tokens 2q, 2q + 1 (+ 8 i)) pushed to the row owners. */
template <int NTOK>
__device__ __forceinline__ void
push_partials(const float (&d)[NTOK / 2], uint32_t inbox, const Bars &bb, int m,
              int round, int rank, int C, int warp, int lane) {
  const int g = lane >> 2, q = lane & 3, col = 16 * warp + g;
  const int buf = round & 1;
  const uint32_t base = inbox + buf * inbox_buf_bytes(NTOK, C);
  if (C == 1) { /* every row is ours (warp-uniform branch) */
#pragma unroll
    for (int i = 0; i < NTOK / 8; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = 8 * i + 2 * q + h;
        if (t < m) {
          const uint32_t row = base + (t * 128) * 4;
          asm volatile("st.shared.f32 [%0], %1;\n"
                       "st.shared.f32 [%2], %3;" ::"r"(row + col * 4),
                       "f"(d[4 * i + h]), "r"(row + (col + 8) * 4),
                       "f"(d[4 * i + 2 + h])
                       : "memory");
        }
      }
    __syncwarp();
    if (lane == 0)
      mbar_arrive(bb.in_full(buf)); /* releases the warp's stores */
    return;
  }
#pragma unroll
  for (int i = 0; i < NTOK / 8; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = 8 * i + 2 * q + h;
      if (t < m) {
        const int owner = (t + round) % C, j = t / C;
        const uint32_t row = mapa(base + ((j * C + rank) * 128) * 4, owner);
        const uint32_t bar = mapa(bb.in_full(buf), owner);
        st_async_f32(row + col * 4, d[4 * i + h], bar);
        st_async_f32(row + (col + 8) * 4, d[4 * i + 2 + h], bar);
      }
    }
}

/* The owner's side of strip round `round`: waits for the peers' sums and
 * adds them in rank order; then (all consumer warps synchronised) registers
 * the bytes of round + 2 on the buffer's "full" barrier and only then hands
 * the buffer back to every CTA of the cluster, so no peer's bytes can
 * precede the registration; then rotates (H128), scales by s_out, adds the
 * bias and stores y. The hand-back releases at cluster scope, so it comes
 * before the y stores, which it would otherwise wait for. `rounds`: the
 * strips this cluster runs. */
template <int NTOK>
__device__ __forceinline__ void
finish_strip(const Params &p, uint32_t inbox, const Bars &bb, int64_t strip,
             int round, int rounds, int rank, int C, int warp, int lane) {
  const int m = (int)p.m, buf = round & 1;
  const uint32_t parity = (uint32_t)(round >> 1) & 1u;
  const int t0 = first_owned(rank, round, C);
  const uint32_t base = inbox + buf * inbox_buf_bytes(NTOK, C);
  const int64_t col0 = strip * 128 + 4 * lane;
  /* every consumer warp waits on the phase, not only the row owners: a
   * thread that arrives on it (warp 0's registration; in a one-CTA cluster
   * every warp's stores) also waits for it */
  mbar_wait(bb.in_full(buf), parity);
  /* Owned row j (token t0 + C j) belongs to warp (j + round) % warps: this
   * warp's are j = j0 + warps r, at most R of them. */
  constexpr int R = (NTOK + kConsumerWarps - 1) / kConsumerWarps;
  const int j0 =
      ((warp - round) % kConsumerWarps + kConsumerWarps) % kConsumerWarps;
  float h[R][4];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int j = j0 + kConsumerWarps * r;
    h[r][0] = h[r][1] = h[r][2] = h[r][3] = 0.f;
    if (t0 + C * j >= m) /* warp-uniform */
      continue;
    for (int c = 0; c < C; ++c) {
      float4 v;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "r"(base + ((j * C + c) * 128 + 4 * lane) * 4)
                   : "memory");
      h[r][0] += v.x, h[r][1] += v.y, h[r][2] += v.z, h[r][3] += v.w;
    }
  }
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory");
  if (warp == 0) {
    /* this round's phase is complete: a warp waited on it, or it expected
     * no bytes */
    if (lane == 0 && round + 2 < rounds)
      mbar_arrive_tx(bb.in_full(buf), inbox_round_bytes(rank, round + 2, C, m));
    __syncwarp();
    if (C == 1 && lane == 0)
      mbar_arrive(bb.in_free(buf));
    else if (C > 1 && lane < C)
      mbar_arrive_remote(mapa(bb.in_free(buf), lane));
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int t = t0 + C * (j0 + kConsumerWarps * r);
    if (t >= m) /* warp-uniform */
      continue;
    h128_warp(h[r], lane);
    float sc[4], bs[4] = {0.f, 0.f, 0.f, 0.f};
    load4_f16(p.s_out, col0, sc);
    if (p.bias)
      load4_f16(p.bias, col0, bs);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      /* _rn: no contraction, as in the other output stages */
      h[r][e] = __fmul_rn(h[r][e], sc[e]);
      if (p.bias)
        h[r][e] = __fadd_rn(h[r][e], bs[e]);
    }
    store4_from_float(p.out_dtype, p.y, (int64_t)t * p.n + col0, h[r]);
  }
}
#endif

/* ---- the kernel -----------------------------------------------------------
 */

template <int K, int CB, int NTOK, bool Halves, bool Sync>
__global__ void __launch_bounds__(kThreads, 3)
    stream_kernel(const __grid_constant__ Params p) {
#if TRL_WGMMA
  constexpr bool Dup = Halves && CB != TRELLIS_CB_MUL1;
  constexpr int S = ring_stages<K>(), SB = stage_bytes<K>();
  constexpr int kRowBytes = 8 * 32 * K; /* one tile row of the strip */
  constexpr int kSteps = Dup ? 2 : 1;   /* wgmma k16 steps per tile */
  constexpr int LBO = act_lbo<NTOK>();
  extern __shared__ __align__(1024) char smem_raw[];
  char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  char *act = smem;
  char *ring = act + (size_t)p.chunk_blocks * act_block_bytes<NTOK, Dup>();

  cg::cluster_group cluster = cg::this_cluster();
  const int C = (int)cluster.num_blocks();
  const int rank = (int)cluster.block_rank();
  const int cluster_id = (int)(blockIdx.x / C);
  const uint32_t inbox = smem_u32(ring + S * SB);
  const uint32_t bar0 = inbox + 2 * inbox_buf_bytes(NTOK, C);
  Bars bb;
  bb.full = bar0;
  bb.empty = bar0 + 8 * S;
  bb.inbox = bar0 + 16 * S;
  /* warp-uniform as far as the compiler can tell (shuffled from lane 0):
   * keeps the role branches and their addresses on the uniform datapath */
  const int warp = __shfl_sync(0xFFFFFFFFu, threadIdx.x >> 5, 0);
  const int lane = threadIdx.x & 31;
  const int64_t kblocks = p.k / 128, strips = p.n / 128;
  const int64_t kb0 = min((int64_t)rank * p.chunk_blocks, kblocks);
  const int nblk = (int)(min(kb0 + p.chunk_blocks, kblocks) - kb0);
  const int rounds = cluster_id < strips
                         ? (int)((strips - 1 - cluster_id) / p.clusters) + 1
                         : 0;

  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_init(bb.full + 8 * s, 1);
      mbar_init(bb.empty + 8 * s, kConsumerWarps);
    }
    for (int b = 0; b < 2; ++b) {
      mbar_init(bb.in_full(b), in_full_count(C));
      mbar_init(bb.in_free(b), C); /* one per CTA of the cluster */
    }
    /* rounds 0 and 1 expect their bytes before any peer can push them
     * (later rounds: finish_strip) */
    for (int r = 0; r < 2 && r < rounds; ++r)
      mbar_arrive_tx(bb.in_full(r), inbox_round_bytes(rank, r, C, (int)p.m));
    mbar_init_fence();
  }
  /* every CTA's barriers exist before any peer pushes into them */
  cluster_sync_all();

  if (warp == kProducerWarp) {
    /* The payload is immutable: it streams before the previous kernel of
     * the stream has finished (programmatic dependent launch), as far
     * ahead as the ring allows, across strips. */
    const uint64_t policy = evict_first_policy();
    const int64_t row_stride = strips * 8 * 32 * K; /* bytes per tile row */
    const char *base = reinterpret_cast<const char *>(p.trellis);
    int slot = 0;
    uint32_t phase = 0;
    int it = 0;
    for (int64_t strip = cluster_id; strip < strips; strip += p.clusters) {
      for (int b = 0; b < nblk; ++b, ++it) {
        if (it >= S)
          mbar_wait(bb.empty + 8 * slot, phase ^ 1u);
        if (lane == 0) {
          const uint32_t dst = smem_u32(ring) + slot * SB;
          mbar_arrive_tx(bb.full + 8 * slot, SB);
          const char *src =
              base + (kb0 + b) * 8 * row_stride + strip * kRowBytes;
#pragma unroll
          for (int kr = 0; kr < 8; ++kr)
            bulk_copy(dst + kr * kRowBytes, src + kr * row_stride, kRowBytes,
                      bb.full + 8 * slot, policy);
        }
        __syncwarp();
        if (++slot == S) {
          slot = 0;
          phase ^= 1u;
        }
      }
    }
    griddep_launch_dependents();
    /* The tail: wait for the consumers' release of the last stages too, so
     * every phase of the "empty" barriers is waited on (as the next
     * iterations would have). */
    for (int j = 0; j < S; ++j, ++it) {
      if (it >= S)
        mbar_wait(bb.empty + 8 * slot, phase ^ 1u);
      if (++slot == S) {
        slot = 0;
        phase ^= 1u;
      }
    }
    /* done with every barrier (see the consumers' end) */
    asm volatile("bar.arrive 2, %0;" ::"n"(kThreads) : "memory");
    return;
  }

  /* Consumers. x, y and whatever the previous kernel writes are touched
   * only after it has completed. */
  griddep_wait();
  griddep_launch_dependents();
  const int m = (int)p.m;
  /* 1. Rotate our k-chunk of every row once (jobs = block x row, the
   * loads of kBatch jobs in flight per warp); zero the pad tokens. */
  constexpr int kBatch = 4;
  const int jobs = nblk * m;
  for (int j0 = warp; j0 < jobs; j0 += kConsumerWarps * kBatch) {
    float h[kBatch][4], s[kBatch][4];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int job = j0 + u * kConsumerWarps;
      if (job < jobs)
        load_slice(p, kb0 + job / m, job % m, lane, h[u], s[u]);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int job = j0 + u * kConsumerWarps;
      if (job < jobs) /* warp-uniform */
        store_slice<NTOK, Dup, Sync>(act, job / m, job % m, lane,
                                     rotate_slice(h[u], s[u], lane));
    }
  }
  if (Sync && m < NTOK) {
    /* pad tokens: their lanes' fragment words, every tile row */
    constexpr int kWords = Dup ? 4 : 2;
    const int rows = nblk * 8, lanes = 4 * (NTOK - m);
    for (int i = threadIdx.x; i < rows * lanes; i += kConsumerWarps * 32) {
      /* lane l = 4 t + q of the pad token t, tile row r */
      const int r = i / lanes, l = 4 * m + i % lanes;
      const int tg = l >> 5, ln = l & 31;
      char *grp = act + (r * (NTOK / 8) + tg) * 32 * kWords * 4;
      for (int wi = 0; wi < kWords; ++wi)
        *reinterpret_cast<uint32_t *>(grp + (ln * kWords + wi) * 4) = 0u;
    }
  } else if (m < NTOK) {
    const int kcs = nblk * kc_per_block<NTOK, Dup>(), pad = NTOK - m;
    for (int i = threadIdx.x; i < kcs * pad; i += kConsumerWarps * 32) {
      const int kc = i / pad, t = m + i % pad;
      *reinterpret_cast<uint4 *>(act + kc * LBO + (t >> 3) * 128 +
                                 (t & 7) * 16) = make_uint4(0, 0, 0, 0);
    }
  }
  fence_proxy_async_smem(); /* read by wgmma (the async proxy) */
  asm volatile("bar.sync 1, %0;" ::"n"(kConsumerWarps * 32) : "memory");

  /* 2. Strips. Shared addresses are 32-bit and computed once: the lane's
   * tile words (per stage only the slot's offset is added), the ring's
   * barriers and the wgmma descriptor of the chunk's first block. */
  const LaneWords<K> lt(lane);
  uint32_t wa[TileGeom<K>::kNW];
#pragma unroll
  for (int i = 0; i < TileGeom<K>::kNW; ++i)
    wa[i] = smem_u32(ring) + warp * 32 * K + lt.off[i];
  /* descriptor: start address >> 4, LBO >> 4 (bits 16-29); the high word
   * holds SBO >> 4 = 8 and no swizzle */
  const uint32_t dlo0 = ((smem_u32(act) >> 4) & 0x3FFFu) | ((LBO >> 4) << 16);
  constexpr uint32_t kBlockStep = act_block_bytes<NTOK, Dup>();
  const uint32_t bfrag0 = smem_u32(act) + lane * (Dup ? 16 : 8);
  int slot = 0, round = 0;
  int64_t prev = 0; /* the strip whose rows this CTA finishes next */
  uint32_t phase = 0;
  for (int64_t strip = cluster_id; strip < strips;
       strip += p.clusters, ++round) {
    float d[NTOK / 2];
#pragma unroll
    for (int i = 0; i < NTOK / 2; ++i)
      d[i] = 0.f;
    /* mma.sync accumulators: one set per k16 step and token group, so the
     * tensor core's dependent adds form short chains */
    float dd[kSteps][NTOK / 8][4];
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int tg = 0; tg < NTOK / 8; ++tg)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          dd[s][tg][e] = 0.f;
    for (int b = 0; b < nblk; ++b) {
      const uint32_t dlo = dlo0 + b * (kBlockStep >> 4);
      mbar_wait(bb.full + 8 * slot, phase);
      const uint32_t so = slot * SB;
#pragma unroll
      for (int kr = 0; kr < 8; kr += 2) {
        uint32_t a[2][kSteps][4];
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          uint32_t w[TileGeom<K>::kNW];
#pragma unroll
          for (int i = 0; i < TileGeom<K>::kNW; ++i)
            w[i] = lds_u32(wa[i] + so + (kr + u) * kRowBytes);
          decode_tile<K, CB, Dup>(w, lt.o, a[u], p.shifts);
        }
        if (kr == 6) { /* the stage's last shared-memory reads are done */
          __syncwarp();
          if (lane == 0)
            mbar_arrive(bb.empty + 8 * slot);
        }
        if constexpr (Sync) {
          /* B fragments of the two tile rows, one load per token group */
#pragma unroll
          for (int u = 0; u < 2; ++u)
#pragma unroll
            for (int tg = 0; tg < NTOK / 8; ++tg) {
              const uint32_t at =
                  bfrag0 +
                  (((b * 8 + kr + u) * (NTOK / 8) + tg) * 32) * (Dup ? 16 : 8);
              uint32_t bf[4];
              if constexpr (Dup)
                lds_u32x4(at, bf);
              else
                lds_u32x2(at, bf);
#pragma unroll
              for (int s = 0; s < kSteps; ++s)
                mma16816<false>(dd[s][tg], a[u][s], bf[2 * s], bf[2 * s + 1]);
            }
        } else {
          wgmma_fence();
#pragma unroll
          for (int u = 0; u < 2; ++u)
#pragma unroll
            for (int s = 0; s < kSteps; ++s)
              Wgmma<NTOK, false>::run(
                  d, a[u][s],
                  (8ull << 32) |
                      (dlo + (((kr + u) * kSteps + s) * 2 * LBO >> 4)));
          wgmma_commit();
          wgmma_wait<1>();
        }
      }
      if (++slot == S) {
        slot = 0;
        phase ^= 1u;
      }
    }
    if constexpr (Sync) {
      /* the steps' sums into the wgmma D layout (token group tg: 4 tg ..) */
#pragma unroll
      for (int tg = 0; tg < NTOK / 8; ++tg)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float v = 0.f;
#pragma unroll
          for (int s = 0; s < kSteps; ++s)
            v += dd[s][tg][e];
          d[4 * tg + e] = v;
        }
    } else {
      wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < NTOK / 2; ++i)
        wgmma_pin(d[i]);
    }

    /* 3. This strip's partial sums to the row owners (once every owner
     * is done with the inbox buffer from two strips ago), then the
     * previous strip's rows this CTA owns: one strip late, so their
     * pushes have long arrived. */
    if (round >= 2)
      mbar_wait(bb.in_free(round & 1), ((round >> 1) - 1) & 1);
    push_partials<NTOK>(d, inbox, bb, m, round, rank, C, warp, lane);
    if (round > 0)
      finish_strip<NTOK>(p, inbox, bb, prev, round - 1, rounds, rank, C, warp,
                         lane);
    prev = strip;
  }
  if (round > 0)
    finish_strip<NTOK>(p, inbox, bb, prev, round - 1, rounds, rank, C, warp,
                       lane);
  /* No peer touches our shared memory once every CTA has handed back the
   * inbox buffers of the last two strips. */
  for (int r = round - 2 < 0 ? 0 : round - 2; r < round; ++r)
    mbar_wait(bb.in_free(r & 1), (r >> 1) & 1);
  /* Every thread of the CTA is done with the barriers (the producer has
   * arrived, no peer arrives any more): invalidate them, PTX's rule for
   * shared memory that is used again (by the next CTA on this SM). */
  asm volatile("bar.sync 2, %0;" ::"n"(kThreads) : "memory");
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) {
      mbar_inval(bb.full + 8 * s);
      mbar_inval(bb.empty + 8 * s);
    }
    for (int b = 0; b < 2; ++b) {
      mbar_inval(bb.in_full(b));
      mbar_inval(bb.in_free(b));
    }
  }
#endif
}

/* ---- the dispatch family --------------------------------------------------
 */

struct TokensAxis : dispatch::Axis<TRL_GPU_STREAM_TOKENS> {
  static constexpr const char *kName = "tokens";
};
struct HalvesAxis : dispatch::Axis<0, 1> {
  static constexpr const char *kName = "halves";
};
/* 0: wgmma with B in shared memory; 1: mma.sync with B fragments loaded
 * from shared memory into registers */
struct MmaAxis : dispatch::Axis<0, 1> {
  static constexpr const char *kName = "mma.sync";
};

struct Stream {
  static constexpr const char *kName = "persistent decode-GEMM";
  using Axes = dispatch::Axes<dispatch::BitsAxis, dispatch::CodebookAxis,
                              TokensAxis, HalvesAxis, MmaAxis>;
  static constexpr int kUnits = 8;
  struct Args {
    const Params *p;     /* launch */
    int cluster;         /* launch; query: the cluster size asked about */
    int chunk_blocks;    /* query: the k-chunk asked about */
    size_t smem;         /* launch; query: its dynamic shared memory */
    cudaStream_t stream; /* launch */
    int pdl;             /* launch */
    const void *kernel;  /* query: the kernel */
  };
  /* MUL1 has no halves: one variant serves it; the SQG codebooks run on
   * the split-K decode-GEMM only */
  template <int K, int CB, int NT, int H, int Y>
  static constexpr bool exists() {
    return !(H && CB == TRELLIS_CB_MUL1) && !is_sqg(CB);
  }
  template <int K, int CB, int NT, int H, int Y> static const void *kernel() {
    return (const void *)&stream_kernel<K, CB, NT, H != 0, Y != 0>;
  }
  template <int K, int CB, int NT, int H, int Y> static int prepare(Args &) {
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, kernel<K, CB, NT, H, Y>());
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(kernel<K, CB, NT, H, Y>(),
                               cudaFuncAttributeNonPortableClusterSizeAllowed,
                               1);
    return (int)e;
  }
  template <int K, int CB, int NT, int H, int Y> static int query(Args &a) {
    a.kernel = kernel<K, CB, NT, H, Y>();
    a.smem = smem_bytes < K, NT,
    H && CB != TRELLIS_CB_MUL1 > (a.chunk_blocks, a.cluster);
    return 0;
  }
  template <int K, int CB, int NT, int H, int Y> static int launch(Args &a) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[2];
    attr[0] = cudaLaunchAttribute{};
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = (unsigned)a.cluster;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    attr[1] = pdl_attribute();
    cfg.gridDim = dim3((unsigned)(a.cluster * a.p->clusters));
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = a.smem;
    cfg.stream = a.stream;
    cfg.attrs = attr;
    cfg.numAttrs = a.pdl ? 2 : 1;
    return (int)cudaLaunchKernelEx(
        &cfg, &stream_kernel<K, CB, NT, H != 0, Y != 0>, *a.p);
  }
};

} // namespace stream
} // namespace trl

#endif
