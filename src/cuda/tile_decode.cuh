/* SPDX-License-Identifier: Apache-2.0 */
/* Per-lane decode of one 16x16 trellis tile into mma.m16n8k16 B fragments.
 * Lane L decodes weights i = 8L + j (j = 0..7) of the tile, which the in-tile
 * permutation of the format places exactly at this lane's B-fragment slots:
 *   j = 0,1 -> rows 2q, 2q+1   (q = L % 4), column L/4
 *   j = 2,3 -> rows 2q+8, 2q+9, column L/4
 *   j = 4..7 -> the same rows, column L/4 + 8.
 * The decode takes the words holding the lane's 7K + 16 window bits and
 * the window's bit offset in the first; lanes.cuh fetches them from a
 * group of the lane layout (with offset 0). */
#ifndef TRL_CUDA_TILE_DECODE_CUH
#define TRL_CUDA_TILE_DECODE_CUH

#include "common.cuh"

#include <cuda_fp8.h>

namespace trl {

/* Shifted words needed to hold the lane's 7K + 16 bits, and raw words. */
template <int K> struct TileGeom {
  static constexpr int kWords = 8 * K; /* 32-bit words per tile */
  static constexpr int kNV = (7 * K + 16 + 31) / 32;
  static constexpr int kNW = kNV + 1;
};

/* Left shifts by a constant, two ways. LiteralShifts: the compiler sees the
 * amount and emits a shift (integer ALU pipe). Pow2Table: the kernel gets
 * the powers of two as a parameter, so v * pow2[r] stays an IMAD on the
 * FMA pipe with its operand read from the constant bank. The decode is
 * bound by the ALU pipe (window shifts, codebook LOP3), so the hot kernels
 * (HotShifts) move these shifts to the lightly used FMA pipe (faster:
 * docs/TUNING.md, "Tile decode: shifts on the FMA pipe, no multiply-high"). */
struct LiteralShifts {
  __device__ __forceinline__ uint32_t shl(uint32_t v, int r) const {
    return v << r;
  }
};
struct Pow2Table {
  uint32_t pow2[17]; /* pow2[r] = 1 << r for r = 0..16, filled by the host */
  __device__ __forceinline__ uint32_t shl(uint32_t v, int r) const {
    return v * pow2[r];
  }
};
using HotShifts = Pow2Table;

/* Fills a kernel's shift table (host side; empty for LiteralShifts). */
inline void init_shifts(LiteralShifts &) {}
inline void init_shifts(Pow2Table &t) {
  for (int r = 0; r <= 16; ++r)
    t.pow2[r] = 1u << r;
}

/* The lane's 8 trellis states from its words: s[j] = state of weight 8L + j,
 * zero-extended.
 *  - v[i]: the lane's bits aligned to the top of a word (one funnel shift
 *    per word, by the lane's runtime bit offset);
 *  - h[i]: v[i] and v[i+1] funnel-shifted by 16 (one byte permute), so a
 *    window that straddles two v words lies inside one h word;
 *  - each window then costs one op where it is byte-aligned in its word
 *    (r = 0: shift down; 8: byte permute; 16: mask) and otherwise a left
 *    shift (`sh`, see above) plus the shift down by 16, which stays on the
 *    ALU pipe (a multiply-high by 2^16 was slower: docs/TUNING.md, "Tile
 *    decode: shifts on the FMA pipe, no multiply-high"). */
template <int K, class Shifts>
__device__ __forceinline__ void
states_from_words(const uint32_t (&w)[TileGeom<K>::kNW], int o,
                  uint32_t (&s)[8], const Shifts &sh) {
  using G = TileGeom<K>;
  uint32_t v[G::kNV];
#pragma unroll
  for (int i = 0; i < G::kNV; ++i)
    v[i] = __funnelshift_l(w[i + 1], w[i], o); /* stream is MSB-first */
  uint32_t h[G::kNV > 1 ? G::kNV - 1 : 1] = {};
#pragma unroll
  for (int i = 0; i + 1 < G::kNV; ++i)
    h[i] = __byte_perm(v[i + 1], v[i], 0x5432); /* bits 16..47 of v[i].. */
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = K * j; /* compile-time after unrolling */
    const int bi = q >> 5, r0 = q & 31;
    /* the word holding the window, and the window's offset in it */
    const uint32_t word = r0 <= 16 ? v[bi] : h[bi];
    const int r = r0 <= 16 ? r0 : r0 - 16;
    if (r == 0)
      s[j] = word >> 16;
    else if (r == 8)
      s[j] = __byte_perm(word, 0u, 0x4421); /* bytes 2,1 of it; zeros */
    else if (r == 16)
      s[j] = word & 0xFFFFu;
    else
      s[j] = sh.shl(word, r) >> 16;
  }
}

/* The lane's 8 windows for an SQG codebook: x[j] holds the state of weight
 * 8L + j in its top 16 bits (x >> 16 is states_from_words' s[j]), and the
 * top K bits of bhi[j] are those of brev(s[j]) (the newest symbol bit-
 * reversed, the rank's stratum before the XOR). The brev is taken once per
 * aligned word (v, h as in states_from_words): brev(word << r) << 16 =
 * brev(word) << (16 - r). */
template <int K, class Shifts>
__device__ __forceinline__ void
sqg_windows(const uint32_t (&w)[TileGeom<K>::kNW], int o, uint32_t (&x)[8],
            uint32_t (&bhi)[8], const Shifts &sh) {
  using G = TileGeom<K>;
  uint32_t v[G::kNV], bv[G::kNV];
#pragma unroll
  for (int i = 0; i < G::kNV; ++i) {
    v[i] = __funnelshift_l(w[i + 1], w[i], o); /* stream is MSB-first */
    bv[i] = __brev(v[i]);
  }
  uint32_t h[G::kNV > 1 ? G::kNV - 1 : 1] = {};
  uint32_t bh[G::kNV > 1 ? G::kNV - 1 : 1] = {};
#pragma unroll
  for (int i = 0; i + 1 < G::kNV; ++i) {
    h[i] = __byte_perm(v[i + 1], v[i], 0x5432); /* bits 16..47 of v[i].. */
    bh[i] = __brev(h[i]);
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = K * j; /* compile-time after unrolling */
    const int bi = q >> 5, r0 = q & 31;
    const uint32_t word = r0 <= 16 ? v[bi] : h[bi];
    const uint32_t bword = r0 <= 16 ? bv[bi] : bh[bi];
    const int r = r0 <= 16 ? r0 : r0 - 16;
    x[j] = r == 0 ? word : sh.shl(word, r);           /* r <= 16 */
    bhi[j] = r == 16 ? bword : sh.shl(bword, 16 - r); /* 16 - r <= 16 */
  }
}

/* The lane's 8 weights from its words: u[j] holds weight 8L + j in its LOW
 * half; the high half is finite (3INST/MCG: the weight again, MUL1: the
 * codebook bias, BF16 and SQG: zero). SQG codebooks read the tables staged
 * by sqg_stage. */
template <int K, int CB, bool BF16, class Shifts>
__device__ __forceinline__ void
decode_weights(const uint32_t (&w)[TileGeom<K>::kNW], int o, uint32_t (&u)[8],
               const Shifts &sh) {
  if constexpr (is_sqg(CB)) {
    uint32_t x[8], bhi[8];
    sqg_windows<K>(w, o, x, bhi, sh);
#pragma unroll
    for (int j = 0; j < 8; ++j)
      u[j] = decode_sqg<K, CB, BF16>(x[j], bhi[j]);
  } else {
    uint32_t s[8];
    states_from_words<K>(w, o, s, sh);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      u[j] = decode_state<CB>(s[j]);
      if constexpr (BF16)
        u[j] = f16lo_to_bf16lo(u[j]);
    }
  }
}

/* b[0], b[1]: B fragment (rows 2q..2q+9) of column L/4; b[2], b[3]: of
 * column L/4 + 8. Fragment halves: low = even row. */
template <int K, int CB, bool BF16, class Shifts>
__device__ __forceinline__ void
decode_frags(const uint32_t (&w)[TileGeom<K>::kNW], int o, uint32_t (&b)[4],
             const Shifts &sh) {
  if constexpr (CB == TRELLIS_CB_SQG_FP16) { /* packed in pairs */
    uint32_t x[8], bhi[8];
    sqg_windows<K>(w, o, x, bhi, sh);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      b[i] = decode_sqg_fp16_pair<K, BF16>(x[2 * i], bhi[2 * i], x[2 * i + 1],
                                           bhi[2 * i + 1]);
    return;
  }
  uint32_t u[8];
  decode_weights<K, CB, BF16>(w, o, u, sh);
  /* Pack the low halves pairwise: (row 2q, row 2q+1), (2q+8, 2q+9). */
  b[0] = __byte_perm(u[0], u[1], 0x5410);
  b[1] = __byte_perm(u[2], u[3], 0x5410);
  b[2] = __byte_perm(u[4], u[5], 0x5410);
  b[3] = __byte_perm(u[6], u[7], 0x5410);
}

/* decode_frags for the decode-GEMM, where an SQG codebook reads each weight
 * from the state -> value table of its K staged in shared memory at `tab`
 * (gemm::sqg_table_bytes): one lookup per weight replaces the graph's
 * IMAD, shifts and the T12 lookup. sqg_e4m3: E4M3 codes, two converted by
 * one cvt; sqg_fp16: fp16 bits. Other codebooks: decode_frags. */
template <int K, int CB, bool BF16, class Shifts>
__device__ __forceinline__ void
decode_stage_frags(const uint32_t (&w)[TileGeom<K>::kNW], int o,
                   uint32_t (&b)[4], const Shifts &sh, uint32_t tab) {
  if constexpr (is_sqg(CB)) {
    uint32_t s[8], c[8];
    states_from_words<K>(w, o, s, sh);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (CB == TRELLIS_CB_SQG_E4M3)
        asm("ld.shared.u8 %0, [%1];" : "=r"(c[j]) : "r"(tab + s[j]));
      else
        asm("ld.shared.u16 %0, [%1];" : "=r"(c[j]) : "r"(tab + 2 * s[j]));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t v;
      if constexpr (CB == TRELLIS_CB_SQG_E4M3) {
        /* code 2i in the low byte: the low half (the even row) */
        const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(
            (__nv_fp8x2_storage_t)__byte_perm(c[2 * i], c[2 * i + 1], 0x0040),
            __NV_E4M3);
        v = (uint32_t)h.x | ((uint32_t)h.y << 16);
      } else {
        v = __byte_perm(c[2 * i], c[2 * i + 1], 0x5410);
      }
      b[i] = BF16 ? f16x2_to_bf16x2(v) : v;
    }
  } else {
    decode_frags<K, CB, BF16>(w, o, b, sh);
  }
}

} // namespace trl

#endif
