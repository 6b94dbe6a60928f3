/* SPDX-License-Identifier: Apache-2.0 */
/* Where a lane finds its states in a group of the lane layout (FORMAT.md,
 * "The lane layout") staged in shared memory: the staged arrangement, the
 * few words a lane loads for one tile, the shifts that put its window
 * together, and the assembly itself. Plain C for the host test
 * (tests/test_lanes_window.c) and CUDA for the kernels (cuda/lanes.cuh), so
 * both run the same code. Integer rates K = 1..8.
 *
 * Staged: a group is copied to shared memory word-major, word w of every
 * lane together (32 w + lane, the lane XOR-swizzled by the word's place in
 * the lane layout). In the lane layout itself lane L's words are 16 bytes
 * apart, so 32 lanes loading one word each would meet 4 to a bank; staged,
 * a warp's load of one word of every lane (its own, or its lower
 * neighbour's) and its copy of 32 consecutive words of the lane layout each
 * touch 32 distinct banks. The copies are 4 bytes each.
 *
 * Lane L's window of tile tau is E = p = 16 - K prefix bits, the end of the
 * span of lane L-1 (K = 1: the last 7 bits of lane L-2's span, then lane
 * L-1's 8 bits; lane 0 reads lanes 31 and 30: the ring is tail-biting),
 * then its own span, 8K bits: 16 + 7K bits, state j at bit jK. The decode
 * takes E most significant bit first in nv = (7K + 16 + 31) / 32 words
 * (states_from_words and sqg_windows with offset 0). With a = 8K tau the
 * span's first bit in the lane's own string of 2K words, the prefix ends at
 * bit a + 8K of lane L-1's string, so the two are 8K mod 32 bits out of
 * step within their words, whatever tau:
 *  - K = 4, 8 (in step): the prefix is the low p bits of a word of lane
 *    L-1 and the span starts a word of the lane's own, so E is one funnel
 *    shift by the constant 16 + K per word of the prefix word followed by
 *    the span's K / 4 words (fewer loads than the checkpoint layout's);
 *  - K = 1, 2: spans are bytes / half-words of one word (the same word of
 *    every lane): byte permutes put the prefix's lane(s) and the own byte
 *    (half) in order, a shift by K drops the bits before the prefix;
 *  - K = 3, 5, 6, 7: own words j0 .. j0 + nv (j0 = floor((a - p) / 32))
 *    give e[i] = funnel(own[i], own[i + 1], (a - p) mod 32), E's bits from
 *    p on; lane L-1's bits [a + 8K - p, a + 8K) are shifted to the top of a
 *    word (one shift; a funnel of two words for odd K, where they may
 *    straddle two) and replace e[0]'s top p bits (one LOP3).
 * Word indices before the string's first word or past its last are
 * clamped: the bits they bring are replaced by the prefix or lie past E. */
#ifndef TRL_FORMAT_LANES_WINDOW_H
#define TRL_FORMAT_LANES_WINDOW_H

#include "format/lanes.h"

#include <stdint.h>

#if defined(__CUDA_ARCH__)
#define TRL_LANES_UNROLL _Pragma("unroll")
#else
#define TRL_LANES_UNROLL
#endif

/* Not constexpr (lanes.h's TRL_LANES_FN is): these use the device's
 * intrinsics and inline assembly. */
#if defined(__CUDACC__)
#define TRL_LANES_WFN __host__ __device__ __forceinline__
#else
#define TRL_LANES_WFN static inline
#endif

/* The word counts are constants of the kernels' register arrays. */
#if defined(__CUDACC__)
#define TRL_LANES_CFN __host__ __device__ constexpr inline
#elif defined(__cplusplus)
#define TRL_LANES_CFN constexpr inline
#else
#define TRL_LANES_CFN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TRL_LANES_MAX_OWN = 4,   /* own words a lane loads per tile, at most */
  TRL_LANES_MAX_PREFIX = 2 /* words of the lanes below it */
};

/* Words of E: TileGeom<K>::kNV. */
TRL_LANES_CFN int trl_lanes_window_words(int bits) {
  return (7 * bits + 16 + 31) / 32;
}

/* Own words a lane loads per tile: the byte's or half's word (K = 1, 2),
 * the span's words (K = 4, 8), else nv + 1. */
TRL_LANES_CFN int trl_lanes_own_words(int bits) {
  return bits <= 2       ? 1
         : bits % 4 == 0 ? bits / 4
                         : (7 * bits + 16 + 31) / 32 + 1;
}

/* Words of the lanes below it: two for K = 1 (lanes L-1, L-2) and for odd
 * K (two words of lane L-1, the prefix may straddle them), one for even K
 * (the prefix ends at bit 8K (tau + 1), a multiple of 16, and is at most
 * 14 bits long). */
TRL_LANES_CFN int trl_lanes_prefix_words(int bits) { return bits & 1 ? 2 : 1; }

/* Word index, in a staged group, of word w (0 .. h-1) of `lane`. */
TRL_LANES_WFN int trl_lanes_staged_word(int h, int lane, int w) {
  const int quads = h / 4;
  const int swz = w < 4 * quads ? 8 * (w % 4) : 16 * ((w - 4 * quads) & 1);
  return 32 * w + (lane ^ swz);
}

/* Word index, in a staged group, of word g (0 .. 32 h - 1) of the group in
 * the lane layout (trl_lanes_word_offset's inverse, then staged). */
TRL_LANES_WFN int trl_lanes_staged_of_layout(int h, int g) {
  const int quads = h / 4, pair = (h % 4) >= 2;
  int lane, w;
  if (g < 128 * quads) {
    lane = (g % 128) / 4;
    w = 4 * (g / 128) + g % 4;
  } else if (pair && g < 128 * quads + 64) {
    lane = (g - 128 * quads) / 2;
    w = 4 * quads + (g - 128 * quads) % 2;
  } else {
    lane = g - 128 * quads - 64 * pair;
    w = 4 * quads + 2 * pair;
  }
  return trl_lanes_staged_word(h, lane, w);
}

/* Byte offset in a staged group of word w of `lane`. */
TRL_LANES_WFN int trl_lanes_staged_offset(int h, int lane, int w) {
  return 4 * trl_lanes_staged_word(h, lane, w);
}

/* Word index j clamped to the lane's string of 2K words. */
TRL_LANES_WFN int trl_lanes_clamp_word(int bits, int j) {
  return j < 0 ? 0 : j >= 2 * bits ? 2 * bits - 1 : j;
}

/* Byte offset in the staged group of own word i (0 .. own_words - 1) of
 * `lane` for tile `tau`. */
TRL_LANES_WFN int trl_lanes_own_offset(int bits, int lane, int tau, int i) {
  const int h = 2 * bits;
  if (bits <= 2) /* 8 (K = 1) or 16 (K = 2) bits a tile */
    return trl_lanes_staged_offset(h, lane, tau * bits / 4);
  if (bits % 4 == 0) /* the span: words K tau / 4 .. */
    return trl_lanes_staged_offset(h, lane, bits * tau / 4 + i);
  const int start = 8 * bits * tau - (16 - bits); /* a - p, >= -15 */
  const int j0 = (start + 32) / 32 - 1;           /* floor(start / 32) */
  return trl_lanes_staged_offset(h, lane, trl_lanes_clamp_word(bits, j0 + i));
}

/* Byte offset in the staged group of prefix word i (0 .. prefix_words -
 * 1). */
TRL_LANES_WFN int trl_lanes_prefix_offset(int bits, int lane, int tau, int i) {
  const int h = 2 * bits;
  if (bits <= 2) /* i = 0: lane L-1, i = 1 (K = 1): lane L-2 */
    return trl_lanes_staged_offset(h, (lane + 31 - i) % 32, tau * bits / 4);
  if (bits % 4 == 0) /* the word that ends with the prefix */
    return trl_lanes_staged_offset(h, (lane + 31) % 32,
                                   bits * (tau + 1) / 4 - 1);
  const int start = 8 * bits * (tau + 1) - (16 - bits);
  return trl_lanes_staged_offset(h, (lane + 31) % 32,
                                 trl_lanes_clamp_word(bits, start / 32 + i));
}

/* The own words' shift, (a - p) mod 32; K = 1, 2: the byte permute that
 * puts the own byte (half) after the prefix's; K = 4, 8: 0 (not used). */
TRL_LANES_WFN uint32_t trl_lanes_own_shift(int bits, int tau) {
  if (bits == 1) {
    const uint32_t b = 3u - (uint32_t)(tau % 4);
    return 0x7600u | b << 4 | b;
  }
  if (bits == 2) /* bytes 3, 2 (even tau) or 1, 0 of lane L-1's, the own */
    return tau % 2 ? 0x5410u : 0x7632u;
  if (bits % 4 == 0)
    return 0u;
  return (uint32_t)((8 * bits * tau - (16 - bits) + 32) % 32);
}

/* The prefix's shift to the top of a word; K = 1: the byte permute that
 * puts lane L-2's byte above lane L-1's; K = 2, 4, 8: 0 (not used). */
TRL_LANES_WFN uint32_t trl_lanes_prefix_shift(int bits, int tau) {
  if (bits == 1) {
    const uint32_t b = 3u - (uint32_t)(tau % 4);
    return (4u + b) << 12 | b << 8;
  }
  if (bits == 2 || bits % 4 == 0)
    return 0u;
  return (uint32_t)((8 * bits * (tau + 1) - (16 - bits)) % 32);
}

/* The top 32 bits of hi:lo << r (r in 0..31): the funnel shift. */
TRL_LANES_WFN uint32_t trl_lanes_funnel(uint32_t hi, uint32_t lo, uint32_t r) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_l(lo, hi, r);
#else
  return r ? hi << r | lo >> (32u - r) : hi;
#endif
}

/* Byte i of the result is byte (sel >> 4i) & 7 of the 8 bytes lo, hi
 * (lo's byte 0 first): the byte permute (no sign replication). */
TRL_LANES_WFN uint32_t trl_lanes_prmt(uint32_t lo, uint32_t hi, uint32_t sel) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, sel);
#else
  const uint64_t v = (uint64_t)hi << 32 | lo;
  uint32_t r = 0;
  for (int i = 0; i < 4; i++)
    r |= (uint32_t)(v >> (8 * ((sel >> (4 * i)) & 7u)) & 0xFFu) << (8 * i);
  return r;
#endif
}

/* Bits of `a` where `mask` is 0, of `b` where it is 1: one LOP3 (the
 * compiler's own form of it took two). */
TRL_LANES_WFN uint32_t trl_lanes_select(uint32_t a, uint32_t b, uint32_t mask) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xD8;" : "=r"(r) : "r"(a), "r"(b), "r"(mask));
  return r;
#else
  return (a & ~mask) | (b & mask);
#endif
}

/* E (nv words) from the loaded own and prefix words and the two shifts. */
TRL_LANES_WFN void trl_lanes_window(int bits, const uint32_t *own,
                                    const uint32_t *prefix, uint32_t own_shift,
                                    uint32_t prefix_shift, uint32_t *e) {
  const int nv = trl_lanes_window_words(bits);
  if (bits == 1) {
    const uint32_t t = trl_lanes_prmt(prefix[0], prefix[1], prefix_shift);
    e[0] = trl_lanes_prmt(own[0], t, own_shift) << 1;
  } else if (bits == 2) {
    e[0] = trl_lanes_prmt(own[0], prefix[0], own_shift) << 2;
  } else if (bits % 4 == 0) {
    const int n_own = bits / 4, r = 16 + bits; /* nv = n_own + 1 */
    e[0] = trl_lanes_funnel(prefix[0], own[0], (uint32_t)r);
    TRL_LANES_UNROLL
    for (int i = 1; i < nv; i++)
      e[i] = trl_lanes_funnel(own[i - 1], i < n_own ? own[i] : 0u, (uint32_t)r);
  } else {
    TRL_LANES_UNROLL
    for (int i = 0; i < nv; i++)
      e[i] = trl_lanes_funnel(own[i], own[i + 1], own_shift);
    const uint32_t top =
        bits & 1 ? trl_lanes_funnel(prefix[0], prefix[1], prefix_shift)
                 : prefix[0] << prefix_shift;
    const uint32_t keep = 0xFFFFFFFFu >> (16 - bits); /* E's bits from p on */
    e[0] = trl_lanes_select(top, e[0], keep);
  }
}

/* ---------------------------------------------- half-integer rates -- */
/* H = 2 KA + 1 (KA 1..3, EXL3-1.6 §1.3). Lane L's span of tile tau is 4H
 * bits (12, 20, 28) from bit a = 4 H tau of its string: inside words
 * a / 32 and a / 32 + 1, which every lane loads at the same places. Its
 * window E is the p = 16 - KA ring bits before the span, then the span:
 * p + 4H = 7 KA + 20 bits in two words, state j at trl_lanes_state_offset.
 * The prefix is the end of lane L-1's span of the same tile (KA 2, 3: p <
 * 4H), or all of it after the last 3 bits of lane L-2's (KA 1: p = 15,
 * spans of 12). Lane 0 reads lanes 31 and 30: the ring is tail-biting. */
enum { TRL_LANES_HALF_WORDS = 2 /* words a lane loads of one string */ };

/* Lanes below a lane whose span a half-rate window reads: 2 for KA 1. */
TRL_LANES_CFN int trl_lanes_half_lanes(int h) { return h == 3 ? 2 : 1; }

/* Byte offset, in the staged group, of word i (0, 1) of the tile-tau span
 * of lane `lane` - `below` (below 0: the lane's own). */
TRL_LANES_WFN int trl_lanes_half_offset(int h, int lane, int below, int tau,
                                        int i) {
  const int w = 4 * h * tau / 32 + i;
  return trl_lanes_staged_offset(h, (lane + 32 - below) % 32,
                                 w < h ? w : h - 1);
}

/* The spans' shift inside their first word, (4 H tau) mod 32. */
TRL_LANES_WFN uint32_t trl_lanes_half_shift(int h, int tau) {
  return (uint32_t)(4 * h * tau % 32);
}

/* E (two words, most significant bit first) from the two words of the
 * lane's own span (own), of lane L-1's (m1) and, KA 1, of lane L-2's (m2),
 * and the shift. Bits of E past p + 4H are not defined. */
TRL_LANES_WFN void trl_lanes_half_window(int h, const uint32_t *own,
                                         const uint32_t *m1, const uint32_t *m2,
                                         uint32_t shift, uint32_t *e) {
  const int p = 16 - h / 2, span = 4 * h;
  const uint32_t s0 = trl_lanes_funnel(own[0], own[1], shift);
  const uint32_t s1 = trl_lanes_funnel(m1[0], m1[1], shift);
  uint32_t pre; /* the prefix's p bits at the top */
  if (h == 3) {
    const uint32_t s2 = trl_lanes_funnel(m2[0], m2[1], shift);
    pre = trl_lanes_select(s2 << 9, s1 >> 3, 0x1FFFFFFFu);
  } else {
    pre = s1 << (span - p);
  }
  e[0] = trl_lanes_select(pre, s0 >> p, 0xFFFFFFFFu >> p);
  e[1] = s0 << (32 - p);
}

#ifdef __cplusplus
}
#endif

#endif
