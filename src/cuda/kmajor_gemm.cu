/* SPDX-License-Identifier: Apache-2.0 */
/* Measurement build only (TRL_KMAJOR 1, never a release): the k-major
 * streaming decode-GEMM, the orientation of the standalone sketch
 * (bench/RESULTS.md, "What would close it") with what the product needs.
 *
 *  - Payload: a plan-owned copy in the k-major lane layout, made once at
 *    prepare (kmajor_repack_kernel): group (kg, nt) is the 8 k-tiles
 *    8 kg .. 8 kg + 7 of n-tile nt, lane-packed as format/lanes.h packs a
 *    group, stored at index kg * (n / 16) + nt. A warp's groups are then
 *    contiguous.
 *  - Warp w of CTA row `split` owns the 128-k slice kg = 8 split + w: it
 *    rotates its slice of x itself (x * suh, H128, fp16: the input rotation
 *    kernel's arithmetic) and keeps the slice's B operands of all 8 k-tiles
 *    in registers; it walks the n-tiles of its CTA column (a contiguous
 *    range: its groups are one stream), one group each, and its
 *    accumulators are one n-tile's (two chains).
 *  - Per 8 n-tiles the 8 warps' sums meet in shared memory and are added
 *    in warp order into fp32 partials [split][m][n] (plan-owned in this
 *    build); direct_finish_kernel adds the splits in order, rotates,
 *    scales, biases and stores y. Fixed orders: replays are bit-identical.
 *  - Variants: halves (3INST, MCG) up to 8 rows, int8 (MUL1) up to 4. */
#include "direct_gemm.cuh"

#if TRL_KMAJOR

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
  int splits; /* CTA rows: 8 slices of 128 k each */
  int cols;   /* CTA columns: contiguous ranges of n-tiles */
};

/* Measurement knobs: n-tiles a round (the CTA's sums meet once a round)
 * and groups in flight per warp (0: the register-direct kernel's rule). */
#ifndef TRL_KM_ROUND
#define TRL_KM_ROUND 8
#endif
#ifndef TRL_KM_STAGES
#define TRL_KM_STAGES 0
#endif
constexpr int kRound = TRL_KM_ROUND;
constexpr int kRedPitch = 16 * kRound + 4; /* floats */

/* ----------------------------------------------------- repack -- */

/* `len` (1..32) bits at string bit `pos` of a lane's words (bit p is bit
 * 31 - p % 32 of word p / 32), right-aligned. */
__device__ __forceinline__ uint32_t get_bits(const uint32_t *w, int pos,
                                             int len) {
  const int i = pos >> 5, o = pos & 31;
  uint32_t v = w[i] << o;
  if (o > 0 && o + len > 32)
    v |= w[i + 1] >> (32 - o);
  return v >> (32 - len);
}
__device__ __forceinline__ void put_bits(uint32_t *w, int pos, int len,
                                         uint32_t v) {
  const int i = pos >> 5, o = pos & 31;
  const uint32_t top = v << (32 - len); /* left-aligned */
  w[i] |= top >> o;
  if (o > 0 && o + len > 32)
    w[i + 1] |= top << (32 - o);
}

/* One thread per (k-major group, lane): its span of each of the 8 tiles,
 * taken from the lane layout's group (8 kg + tau, nt / 8), slot nt % 8. */
__global__ void kmajor_repack_kernel(const char *src, char *dst, int64_t k,
                                     int64_t n, int h) {
  const int64_t ntiles = n / 16, groups = (k / 128) * ntiles;
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= groups * 32)
    return;
  const int lane = (int)(i & 31);
  const int64_t gi = i >> 5, kg = gi / ntiles, nt = gi % ntiles;
  const int gbytes = trl_lanes_group_bytes(h), span = 4 * h;
  uint32_t out[16] = {};
  for (int tau = 0; tau < 8; ++tau) {
    const char *og = src + ((8 * kg + tau) * (n / 128) + nt / 8) * gbytes;
    uint32_t in[17];
    for (int w = 0; w < h; ++w)
      in[w] = *reinterpret_cast<const uint32_t *>(
          og + trl_lanes_word_offset(h, lane, w));
    in[h] = 0;
    for (int b = 0; b < span; b += 32) {
      const int len = span - b < 32 ? span - b : 32;
      put_bits(out, span * tau + b, len,
               get_bits(in, span * (int)(nt % 8) + b, len));
    }
  }
  char *ng = dst + gi * gbytes;
  for (int w = 0; w < h; ++w)
    *reinterpret_cast<uint32_t *>(ng + trl_lanes_word_offset(h, lane, w)) =
        out[w];
}

/* ------------------------------------------------------ kernel -- */

/* A warp's region of shared memory: its rotated slice (rows: a token, or
 * int8's two limbs of one), sums of x per k-tile and token, and limb
 * scales per token. */
struct WarpSmem {
  uint32_t xs, sumx, scale; /* shared addresses */
};

template <int VAR> __host__ __device__ constexpr int xs_pitch() {
  return VAR == kInt8 ? 144 : 272;
}
template <int VAR> __host__ __device__ constexpr int warp_bytes(int m) {
  return ((VAR == kInt8 ? 2 : 1) * m * xs_pitch<VAR>() + 9 * m * 4 + 15) / 16 *
         16;
}
template <int VAR> __host__ __device__ constexpr int smem_bytes(int m) {
  return kWarps * warp_bytes<VAR>(m) + 2 * kWarps * m * kRedPitch * 4;
}

/* The group's 8 tiles, tile tau against the B operands bf[tau], into two
 * accumulator chains (even and odd tiles). */
template <int H, int CB, int VAR, int T>
__device__ __forceinline__ void
km_tiles(const uint32_t (&w)[H], const uint32_t (&prev)[2 * H],
         const BFrags (&bf)[8], float (&cf)[2][4], int (&ci)[2][4]) {
  if constexpr (T < 8) {
    tile_mma<H, CB, VAR, T>(w, prev, bf[T], cf[T & 1], ci[T & 1]);
    km_tiles<H, CB, VAR, T + 1>(w, prev, bf, cf, ci);
  }
}

/* The end of a round of up to 8 n-tiles (`cols` columns from column c0):
 * every warp's sums are in red[buf]; the CTA adds them in warp order into
 * the partials. */
__device__ __forceinline__ void km_round_end(const KParams &p, const float *red,
                                             int nw, int split, int64_t c0,
                                             int cols) {
  asm volatile("barrier.sync 1, %0;" ::"r"(kThreads) : "memory");
  const int m = (int)p.m;
  for (int o = threadIdx.x; o < m * 16 * kRound; o += kThreads) {
    const int tok = o / (16 * kRound), c = o % (16 * kRound);
    if (c >= cols)
      continue;
    float s = 0.f;
    for (int w = 0; w < nw; ++w)
      s += red[(w * m + tok) * kRedPitch + c];
    p.partial[((int64_t)split * p.m + tok) * p.n + c0 + c] = s;
  }
}

template <int H, int CB, int VAR>
__global__ void __launch_bounds__(kThreads, 2) kmajor_kernel(const KParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) char smem_raw[];
  constexpr int kStages =
      TRL_KM_STAGES > 0 ? TRL_KM_STAGES : trl_direct_stages(H);
  constexpr int64_t kGB = 128 * H;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int m = (int)p.m;
  const int col = (int)(blockIdx.x % p.cols),
            split = (int)(blockIdx.x / p.cols);
  const int64_t kslices = p.k / 128, ntiles = p.n / 16;
  const int64_t kg = (int64_t)split * kWarps + warp;
  const bool active = kg < kslices;
  const int nw = (int)(kslices - (int64_t)split * kWarps < kWarps
                           ? kslices - (int64_t)split * kWarps
                           : kWarps);
  const int64_t nt0 = ntiles * col / p.cols,
                count = ntiles * (col + 1) / p.cols - nt0; /* n-tiles */
  const int rounds = (int)((count + kRound - 1) / kRound);
  const int total = active ? (int)count : 0;

  /* 1. The first groups: they depend on nothing the previous kernel
   * writes. The warp's groups are contiguous. */
  LaneCursor<H> cur;
  cur.at(reinterpret_cast<const char *>(p.payload) + (kg * ntiles + nt0) * kGB,
         lane);
  uint32_t ring[kStages][H];
#pragma unroll
  for (int s = 0; s < kStages; ++s)
    if (s < total) {
      cur.load(ring[s]);
      cur.advance(kGB);
    }

  /* 2. x, once the previous kernel is done with it: the warp's slice,
   * rotated, its B operands into registers. */
  griddep_wait();
  const uint32_t base = (uint32_t)__cvta_generic_to_shared(smem_raw);
  char *wbase = smem_raw + warp * warp_bytes<VAR>(m);
  const int rows = (VAR == kInt8 ? 2 : 1) * m;
  Smem sm;
  sm.base = wbase;
  sm.xs_pitch = xs_pitch<VAR>();
  sm.m = m;
  sm.wbufs = 0;
  sm.off_sumx = (uint32_t)(rows * xs_pitch<VAR>());
  sm.off_scale = sm.off_sumx + 8 * m * 4;
  sm.off_wpart = sm.off_cbuf = sm.off_park = 0;
  if (active)
    for (int tok = 0; tok < m; ++tok) {
      float h[4], s[4];
      const int64_t c = kg * 128 + 4 * lane;
      load4_as_float((trellis_dtype)p.in_dtype, p.x, tok * p.k + c, h);
      load4_f16(p.s_in, c, s);
      stage_unit<VAR>(sm, m, tok, 0, lane, h, s);
    }
  griddep_launch_dependents();
  __syncwarp();
  BFrags bf[8];
  float sc = 0.f, bx = 0.f; /* int8: token t's limb scale, constant term */
  {
    const uint32_t xl = x_lane_base<VAR>(
        base + (uint32_t)(warp * warp_bytes<VAR>(m)), xs_pitch<VAR>(), lane);
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
    }
  }
  float *red0 =
      reinterpret_cast<float *>(smem_raw + kWarps * warp_bytes<VAR>(m));
  const int g = lane >> 2, t = lane & 3;

  /* 3. Stream: one n-tile a group; a round is up to 8 of them. */
  const auto round_cols = [&](int r) {
    return (int)(16 *
                 (count - kRound * r < kRound ? count - kRound * r : kRound));
  };
  if (!active) {
    for (int r = 0; r < rounds; ++r)
      km_round_end(p, red0 + (r & 1) * kWarps * m * kRedPitch, nw, split,
                   (nt0 + kRound * r) * 16, round_cols(r));
  } else {
    int j = 0, r = 0;
    for (int b = 0; b < total; b += kStages) {
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        const int i = b + s;
        if (i < total) {
          uint32_t prev[2 * H];
          lower_bits<H>(ring[s], lane, prev);
          float cf[2][4] = {};
          int ci[2][4] = {};
          km_tiles<H, CB, VAR, 0>(ring[s], prev, bf, cf, ci);
          if (i + kStages < total) {
            cur.load(ring[s]);
            cur.advance(kGB);
          }
          float *red = red0 + ((r & 1) * kWarps + warp) * m * kRedPitch;
          const int c0 = 16 * j + g;
          if constexpr (VAR == kInt8) {
            /* cols 2t, 2t + 1: token t's high and low limb */
            if (t < m) {
              const int q0 = (int)((uint32_t)(ci[0][0] + ci[1][0]) * 128u +
                                   (uint32_t)(ci[0][1] + ci[1][1]));
              const int q2 = (int)((uint32_t)(ci[0][2] + ci[1][2]) * 128u +
                                   (uint32_t)(ci[0][3] + ci[1][3]));
              red[t * kRedPitch + c0] = fmaf(sc, (float)q0, 0.f) + bx;
              red[t * kRedPitch + c0 + 8] = fmaf(sc, (float)q2, 0.f) + bx;
            }
          } else {
            float v[4];
#pragma unroll
            for (int e = 0; e < 4; ++e)
              v[e] = cf[0][e] + cf[1][e];
            if (2 * t < m)
              red[2 * t * kRedPitch + c0] = v[0],
                                      red[2 * t * kRedPitch + c0 + 8] = v[2];
            if (2 * t + 1 < m)
              red[(2 * t + 1) * kRedPitch + c0] = v[1],
                                            red[(2 * t + 1) * kRedPitch + c0 +
                                                8] = v[3];
          }
          if (++j == kRound || i + 1 == total) {
            km_round_end(p, red0 + (r & 1) * kWarps * m * kRedPitch, nw, split,
                         (nt0 + kRound * r) * 16, round_cols(r));
            j = 0, ++r;
          }
        }
      }
    }
  }
#else
  (void)p;
#endif
}

/* The variants this build has: K4 and K6, halves (3INST, MCG), int8
 * (MUL1). */
template <int H, int CB, int VAR> void *kernel_of() {
  return reinterpret_cast<void *>(kmajor_kernel<H, CB, VAR>);
}
void *pick(int rate, int cb, int var) {
#define TRL_KM_CASE(H, CB, VAR)                                                \
  if (rate == H && cb == CB && var == VAR)                                     \
    return kernel_of<H, CB, VAR>();
  TRL_KM_CASE(8, TRELLIS_CB_MCG, kHalves)
  TRL_KM_CASE(12, TRELLIS_CB_MCG, kHalves)
  TRL_KM_CASE(8, TRELLIS_CB_3INST, kHalves)
  TRL_KM_CASE(12, TRELLIS_CB_3INST, kHalves)
  TRL_KM_CASE(8, TRELLIS_CB_MUL1, kInt8)
  TRL_KM_CASE(12, TRELLIS_CB_MUL1, kInt8)
#undef TRL_KM_CASE
  return nullptr;
}

} // namespace kmajor
} // namespace trl

using namespace trl::kmajor;

extern "C" int trl_kmajor_var(int rate, trellis_codebook cb, int64_t m) {
  const int var =
      cb == TRELLIS_CB_MUL1 ? (m <= 4 ? (int)kInt8 : -1) : (int)kHalves;
  if (var < 0 || m < 1 || m > 8 || !pick(rate, cb, var))
    return -1;
  return var;
}

extern "C" void trl_kmajor_grid(int64_t k, int64_t n, int sm_count, int *splits,
                                int *cols) {
  *splits = (int)((k / 128 + kWarps - 1) / kWarps);
  int c = 2 * sm_count / *splits;
  if (c < 1)
    c = 1;
  if (c > n / 16)
    c = (int)(n / 16);
  *cols = c;
}

extern "C" int trl_kmajor_prepare(int rate, trellis_codebook cb) {
  for (int var = 0; var <= 2; ++var) {
    void *f = pick(rate, cb, var);
    if (!f)
      continue;
    cudaError_t e = cudaFuncSetAttribute(
        f, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024);
    if (e != cudaSuccess)
      return (int)e;
  }
  return 0;
}

extern "C" int trl_kmajor_repack(const int16_t *lanes, int16_t *kmajor,
                                 int64_t k, int64_t n, int rate, void *stream) {
  const int64_t threads = (k / 128) * (n / 16) * 32;
  kmajor_repack_kernel<<<(unsigned)((threads + 255) / 256), 256, 0,
                         (cudaStream_t)stream>>>(
      reinterpret_cast<const char *>(lanes), reinterpret_cast<char *>(kmajor),
      k, n, rate);
  return (int)cudaGetLastError();
}

extern "C" int trl_kmajor_launch(const trl_direct_launch *l, int sm_count,
                                 void *stream) {
  const int var = trl_kmajor_var(l->rate, l->codebook, l->m);
  void *f = var >= 0 ? pick(l->rate, l->codebook, var) : nullptr;
  if (!f)
    return TRL_KERNEL_UNSUPPORTED;
  KParams p;
  p.payload = l->payload;
  p.x = l->x;
  p.s_in = l->s_in;
  p.partial = l->partial;
  p.m = l->m;
  p.k = l->k;
  p.n = l->n;
  p.in_dtype = l->in_dtype;
  trl_kmajor_grid(l->k, l->n, sm_count, &p.splits, &p.cols);
  const size_t smem = var == kInt8 ? (size_t)smem_bytes<kInt8>((int)l->m)
                                   : (size_t)smem_bytes<kHalves>((int)l->m);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1] = {trl::pdl_attribute()};
  cfg.gridDim = dim3((unsigned)(p.splits * p.cols));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = (cudaStream_t)stream;
  cfg.attrs = attr;
  cfg.numAttrs = l->pdl ? 1 : 0;
  void *args[] = {&p};
  cudaError_t e = cudaLaunchKernelExC(&cfg, f, args);
  if (e != cudaSuccess)
    return (int)e;
  return trl_launch_direct_finish(l->partial, p.splits, l->s_out, l->bias, l->y,
                                  l->out_dtype, l->m, l->n, l->pdl, stream);
}

#endif
