/* SPDX-License-Identifier: Apache-2.0 */
/* Device helpers shared by every kernel: the codebooks, fp16 packing, MMA. */
#ifndef TRL_CUDA_COMMON_CUH
#define TRL_CUDA_COMMON_CUH

#include "cuda/kernels.h"
#include "format/codebooks.h"
#include "format/constants.h"
#include "format/sqg.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <utility>

namespace trl {

/* r_scale = 1/sqrt(128) as fp32, the constant of the format. */
__device__ __forceinline__ float r_scale() {
  return __uint_as_float(TRL_R_SCALE_BITS);
}

__device__ __forceinline__ uint32_t lop3_mask_xor(uint32_t x) {
  uint32_t y;
  /* (x & mask) ^ xor as one LOP3 (truth table 0x6a). */
  asm("lop3.b32 %0, %1, %2, %3, 0x6a;"
      : "=r"(y)
      : "r"(x), "n"(TRL_LOP3_MASK), "n"(TRL_LOP3_XOR));
  return y;
}

/* 3INST / MCG: the codebook's two fp16 halves of one state (low 16 bits of
 * `state`, upper bits zero), before they are summed. */
template <int CB>
__device__ __forceinline__ uint32_t codebook_halves(uint32_t state) {
  static_assert(CB == 0 || CB == 1, "3INST and MCG only");
  const uint32_t x =
      (CB == 0) ? state * TRL_MUL_3INST + TRL_ADD_3INST : state * TRL_MUL_MCG;
  return lop3_mask_xor(x);
}

/* Decodes one 16-bit state (low 16 bits of `state`, upper bits zero) to a
 * 32-bit register whose LOW half holds the fp16 weight. The high half holds
 * a finite value the MMA multiplies by zero. Bit-exact with the format. */
template <int CB>
__device__ __forceinline__ uint32_t decode_state(uint32_t state) {
  if constexpr (CB == 2) {
    uint32_t x = state * TRL_MUL_MUL1;
    /* h = fp16 bits ACC + bytesum(x) = 1024 + S exactly. */
    uint32_t h = __dp4a(x, 0x01010101u, TRL_MUL1_ACC); /* unsigned bytes */
    const __half2 k_inv = __halves2half2(__ushort_as_half(TRL_MUL1_K_INV),
                                         __ushort_as_half(TRL_MUL1_K_INV));
    const __half2 bias = __halves2half2(__ushort_as_half(TRL_MUL1_BIAS),
                                        __ushort_as_half(TRL_MUL1_BIAS));
    __half2 w = __hfma2(*reinterpret_cast<__half2 *>(&h), k_inv, bias);
    return *reinterpret_cast<uint32_t *>(&w);
  } else {
    uint32_t y = codebook_halves<CB>(state);
    __half2 y2 = *reinterpret_cast<__half2 *>(&y);
    /* (lo + hi) in both halves: one correctly rounded fp16 add. */
    __half2 s = __hadd2(__low2half2(y2), __high2half2(y2));
    return *reinterpret_cast<uint32_t *>(&s);
  }
}

/* fp16 bits -> bf16 bits (for BF16 compute), RNE. */
__device__ __forceinline__ uint32_t f16lo_to_bf16lo(uint32_t v) {
  __nv_bfloat16 b = __float2bfloat16_rn(
      __half2float(__ushort_as_half((unsigned short)(v & 0xFFFF))));
  return (uint32_t)__bfloat16_as_ushort(b);
}

/* ------------------------------------------------- SQG codebooks -- */
/* Whether the kernels decode codebook CB at K bits: the codebook's
 * integer K range (format/codebooks.h, the one table). */
template <int CB, int K> constexpr bool codebook_has_bits() {
  return trl_codebook_rate_valid(CB, K, 0) != 0;
}
constexpr bool is_sqg(int cb) { return trl_codebook_is_sqg(cb) != 0; }

/* The SQG tables in shared memory, one copy per CTA (sqg_stage): T12 as
 * fp16 bits (bf16 bits for BF16 compute: E4M3 values are exact in both)
 * and the D3L segments as fp32 (base, slope). Indices differ across a
 * warp, which shared memory serves in a few wavefronts. */
__device__ __forceinline__ uint16_t *sqg_t12_smem() {
  __shared__ __align__(16) uint16_t t12[TRL_SQG_T12_SIZE];
  return t12;
}
__device__ __forceinline__ float2 *sqg_d3l_smem() {
  __shared__ __align__(16) float2 d3l[TRL_SQG_D3L_SLOTS];
  return d3l;
}

/* fp16x2 bits -> bf16x2 bits, each rounded to nearest even (exact for
 * values bf16 holds, as every E4M3 value). */
__device__ __forceinline__ uint32_t f16x2_to_bf16x2(uint32_t v) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2 *>(&v));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
  return *reinterpret_cast<const uint32_t *>(&b);
}

/* Copies the plan's device tables to shared memory (all threads of the
 * CTA; the caller synchronises before the first decode). Nothing for the
 * other codebooks. The tables are written once at prepare, so a dependent
 * launch may read them before griddep_wait. */
template <int CB, bool BF16>
__device__ __forceinline__ void sqg_stage(const trl_sqg_tables *g) {
  if constexpr (CB == TRELLIS_CB_SQG_E4M3) {
    const uint4 *src = reinterpret_cast<const uint4 *>(g->t12);
    uint4 *dst = reinterpret_cast<uint4 *>(sqg_t12_smem());
    for (int i = threadIdx.x; i < TRL_SQG_T12_SIZE / 8; i += blockDim.x) {
      uint4 v = src[i];
      if constexpr (BF16) {
        uint32_t *w = reinterpret_cast<uint32_t *>(&v);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          w[j] = f16x2_to_bf16x2(w[j]);
      }
      dst[i] = v;
    }
  } else if constexpr (CB == TRELLIS_CB_SQG_FP16) {
    const float4 *src = reinterpret_cast<const float4 *>(g->d3l);
    float4 *dst = reinterpret_cast<float4 *>(sqg_d3l_smem());
    for (int i = threadIdx.x; i < TRL_SQG_D3L_SLOTS / 2; i += blockDim.x)
      dst[i] = src[i];
  }
}

/* The SQG graph's product (FORMAT.md §9.2) of a state at K bits, given as
 * x = the state in the top 16 bits of a word: A * mixed + C, whose low
 * 16 - K bits are the rank's phase and whose top K bits, XORed with the
 * bit-reversed newest symbol, are its stratum. The two xorshifts are
 * identities for K >= 5 (history < 2^11). */
template <int K> __device__ __forceinline__ uint32_t sqg_product(uint32_t x) {
  constexpr uint32_t kHmask = (1u << (16 - K)) - 1u;
  uint32_t h = x >> (16 + K);
  if constexpr (K < 5) {
    h ^= h >> 11;
    h ^= (h << 11) & kHmask;
  }
  return h * TRL_SQG_A + TRL_SQG_C;
}

/* The sqg_fp16 weight of a state before its rounding to fp16 (FORMAT.md
 * §9.4), signed; p = sqg_product, q = p ^ the bit-reversed newest symbol
 * (top K bits; the lower bits are not read). trl_sqg_d3l_index
 * in closed form, mostly on the FMA pipe:
 *  - r2 = 2 rank + 1 = (stratum : phase : 1), one funnel shift;
 *  - v = 65535 - 2m is r2 for a negative rank, else r2 ^ 0x1FFFE;
 *  - F = fp32(v) exactly; its exponent is e = floor(log2 v) and its top
 *    three mantissa bits the segment in the octave, so (bits >> 20) - 1016
 *    is the slot of the remapped table (trl_sqg_tables.d3l: descriptor
 *    i >= 8 at slot i + 24, the single-value descriptors v / 2 of v < 16 at
 *    the slots their own F gives);
 *  - x = (2^(e-3) - 1 - (v mod 2^(e-3))) / 2 from F minus F cut to those
 *    bits, exact (the single-value descriptors have slope 0);
 *  - slope * x + base rounded once to fp32 (slope * x is exact), as the
 *    reference (format/sqg.c); the caller rounds to fp16 (RNE, symmetric,
 *    so the sign may come first). */
template <int K>
__device__ __forceinline__ float sqg_fp16_value(uint32_t q, uint32_t p) {
  constexpr int kWidth = 16 - K;
  const uint32_t lo = (p << (16 + K)) | (1u << (15 + K)); /* phase : 1 */
  const uint32_t r2 = __funnelshift_l(lo, q >> (32 - K), kWidth + 1);
  /* all ones for a positive rank (bit 15 of the rank, 16 of r2) */
  const uint32_t pos = (uint32_t)((int32_t)(r2 << 15) >> 31);
  const uint32_t v = r2 ^ (pos & 0x1FFFEu); /* odd, < 2^16 */
  const float f = __uint_as_float(0x4B000000u | v) - 8388608.0f;
  const uint32_t bits = __float_as_uint(f);
  const float2 bs = sqg_d3l_smem()[(bits >> 20) - 1016u]; /* base, slope */
  const float low = f - __uint_as_float(bits & 0xFFF00000u);
  const float half = __uint_as_float((bits & 0x7F800000u) - (4u << 23));
  const float x = __fmaf_rn(-0.5f, low, half - 0.5f);
  const float mag = __fmaf_rn(bs.y, x, bs.x);
  return __uint_as_float(__float_as_uint(mag) | (~pos & 0x80000000u));
}

/* One SQG weight from its window (sqg_windows: x = the state in the top 16
 * bits, bhi = the bit-reversed newest symbol in the top K bits): the fp16
 * (BF16: bf16) bits in the low half, zero in the high half. The same value
 * as trl_sqg_value, with one IMAD for the graph. */
template <int K, int CB, bool BF16>
__device__ __forceinline__ uint32_t decode_sqg(uint32_t x, uint32_t bhi) {
  static_assert(codebook_has_bits<CB, K>(), "an SQG codebook at its K");
  const uint32_t p = sqg_product<K>(x);
  const uint32_t q = bhi ^ p; /* top K bits: the stratum */
  if constexpr (CB == TRELLIS_CB_SQG_E4M3) {
    /* rank >> 4 = stratum << (12 - K) | phase >> 4: one funnel shift of
     * (stratum : phase at the top of a word) */
    const uint32_t idx = __funnelshift_l(p << (16 + K), q >> (32 - K), 12 - K);
    return sqg_t12_smem()[idx];
  } else {
    const uint32_t bits =
        (uint32_t)__half_as_ushort(__float2half_rn(sqg_fp16_value<K>(q, p)));
    if constexpr (BF16)
      return f16lo_to_bf16lo(bits);
    else
      return bits;
  }
}

/* Two sqg_fp16 weights (windows as decode_sqg's) as fp16 (BF16: bf16)
 * bits, the first in the low half: one packing conversion for both. */
template <int K, bool BF16>
__device__ __forceinline__ uint32_t
decode_sqg_fp16_pair(uint32_t x0, uint32_t bhi0, uint32_t x1, uint32_t bhi1) {
  const uint32_t p0 = sqg_product<K>(x0), p1 = sqg_product<K>(x1);
  const __half2 h = __floats2half2_rn(sqg_fp16_value<K>(bhi0 ^ p0, p0),
                                      sqg_fp16_value<K>(bhi1 ^ p1, p1));
  const uint32_t bits = *reinterpret_cast<const uint32_t *>(&h);
  return BF16 ? f16x2_to_bf16x2(bits) : bits;
}

/* D += A(16x16) * B(16x8), fp32 accumulate. */
template <bool BF16>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4],
                                         uint32_t b0, uint32_t b1) {
  if constexpr (BF16) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  }
}

__device__ __forceinline__ void cp_async16(void *smem, const void *gmem,
                                           bool valid) {
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  int src_size = valid ? 16 : 0; /* 0 -> zero-fill */
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s),
               "l"(gmem), "r"(src_size));
}
/* cp.async of 16 bytes to a shared address; src_size 0 zero-fills. */
__device__ __forceinline__ void cp_async16_raw(uint32_t smem, const void *gmem,
                                               uint32_t src_size) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem),
               "l"(gmem), "r"(src_size));
}
/* cp.async of 4 bytes (through L1: the 16-byte form is the only one that
 * bypasses it). */
__device__ __forceinline__ void cp_async4_raw(uint32_t smem, const void *gmem) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem),
               "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;");
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

/* Programmatic dependent launch (sm_90): wait until the grids this one
 * depends on have completed and their writes are visible (a no-op when it
 * was launched without programmatic serialisation); allow the grids that
 * depend on this one to be scheduled. */
__device__ __forceinline__ void griddep_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void griddep_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* kern<<<grid, block, smem, s>>>(args...) with programmatic stream
 * serialisation when `pdl` is set; returns the launch error. The generic
 * path's kernels (input rotation, decode-GEMM, output stage) launch this
 * way: each waits (griddep_wait) before it touches what an earlier kernel
 * writes, so its launch and prologue overlap the kernel before it. */
/* The launch attribute that makes a launch a programmatic dependent one. */
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a = {};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

template <typename... Params, typename... Args>
inline cudaError_t launch_dependent(void (*kern)(Params...), dim3 grid,
                                    dim3 block, size_t smem, cudaStream_t s,
                                    bool pdl, Args &&...args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1] = {pdl_attribute()};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kern, std::forward<Args>(args)...);
}

/* Load element i of a row in dtype DT (a trellis_dtype) as float. */
template <int DT>
__device__ __forceinline__ float load_as_float(const void *p, int64_t i) {
  if constexpr (DT == TRELLIS_F16)
    return __half2float(reinterpret_cast<const __half *>(p)[i]);
  else if constexpr (DT == TRELLIS_BF16)
    return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(p)[i]);
  else
    return reinterpret_cast<const float *>(p)[i];
}

template <int DT>
__device__ __forceinline__ void store_from_float(void *p, int64_t i, float v) {
  if constexpr (DT == TRELLIS_F16)
    reinterpret_cast<__half *>(p)[i] = __float2half_rn(v);
  else if constexpr (DT == TRELLIS_BF16)
    reinterpret_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    reinterpret_cast<float *>(p)[i] = v;
}

/* Elements i..i+3 (i % 4 == 0, 16-byte aligned row) in dtype DT as floats
 * with one vector load, and the reverse with one vector store. */
template <int DT>
__device__ __forceinline__ void load4_as_float(const void *p, int64_t i,
                                               float (&v)[4]) {
  if constexpr (DT == TRELLIS_F32) {
    const float4 f = *reinterpret_cast<const float4 *>(
        reinterpret_cast<const float *>(p) + i);
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
    const uint2 u = *reinterpret_cast<const uint2 *>(
        reinterpret_cast<const uint16_t *>(p) + i);
    const uint32_t w[2] = {u.x, u.y};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if constexpr (DT == TRELLIS_F16) {
        const __half2 x = *reinterpret_cast<const __half2 *>(&w[h]);
        v[2 * h] = __low2float(x), v[2 * h + 1] = __high2float(x);
      } else {
        const __nv_bfloat162 x =
            *reinterpret_cast<const __nv_bfloat162 *>(&w[h]);
        v[2 * h] = __low2float(x), v[2 * h + 1] = __high2float(x);
      }
    }
  }
}

/* Two floats as one word of fp16 or bf16 (DT), RNE, a in the low
 * half. */
template <int DT>
__device__ __forceinline__ uint32_t pack2_from_float(float a, float b) {
  static_assert(DT == TRELLIS_F16 || DT == TRELLIS_BF16, "16-bit dtypes only");
  if constexpr (DT == TRELLIS_F16) {
    const __half2 x = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&x);
  } else {
    const __nv_bfloat162 x = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t *>(&x);
  }
}

template <int DT>
__device__ __forceinline__ void store4_from_float(void *p, int64_t i,
                                                  const float (&v)[4]) {
  if constexpr (DT == TRELLIS_F32)
    *reinterpret_cast<float4 *>(reinterpret_cast<float *>(p) + i) =
        make_float4(v[0], v[1], v[2], v[3]);
  else
    *reinterpret_cast<uint2 *>(reinterpret_cast<uint16_t *>(p) + i) =
        make_uint2(pack2_from_float<DT>(v[0], v[1]),
                   pack2_from_float<DT>(v[2], v[3]));
}

/* The same with the dtype known at run time (not on a hot path). */
__device__ __forceinline__ void load4_as_float(trellis_dtype dt, const void *p,
                                               int64_t i, float (&v)[4]) {
  if (dt == TRELLIS_F16)
    load4_as_float<TRELLIS_F16>(p, i, v);
  else if (dt == TRELLIS_BF16)
    load4_as_float<TRELLIS_BF16>(p, i, v);
  else
    load4_as_float<TRELLIS_F32>(p, i, v);
}
__device__ __forceinline__ void
store4_from_float(trellis_dtype dt, void *p, int64_t i, const float (&v)[4]) {
  if (dt == TRELLIS_F16)
    store4_from_float<TRELLIS_F16>(p, i, v);
  else if (dt == TRELLIS_BF16)
    store4_from_float<TRELLIS_BF16>(p, i, v);
  else
    store4_from_float<TRELLIS_F32>(p, i, v);
}

/* Four fp16 values (a scale vector) as floats. */
__device__ __forceinline__ void load4_f16(const uint16_t *p, int64_t i,
                                          float (&v)[4]) {
  load4_as_float<TRELLIS_F16>(p, i, v);
}

/* H128 of one 128-element block held 4 per lane (elements 4t..4t+3) in a
 * full warp, in the format's butterfly order, fp32, times r_scale. */
__device__ __forceinline__ void h128_warp(float (&h)[4], int lane) {
  float s0 = h[0] + h[1], d0 = h[0] - h[1];
  float s1 = h[2] + h[3], d1 = h[2] - h[3];
  h[0] = s0 + s1;
  h[1] = d0 + d1;
  h[2] = s0 - s1;
  h[3] = d0 - d1;
#pragma unroll
  for (int m = 1; m < 32; m <<= 1) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float partner = __shfl_xor_sync(0xFFFFFFFFu, h[e], m);
      h[e] = ((lane & m) ? -h[e] : h[e]) + partner;
    }
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    h[e] *= r_scale();
}

} // namespace trl

#endif
