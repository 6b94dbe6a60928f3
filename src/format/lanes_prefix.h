/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct kernel's windows at the half-integer rates
 * (cuda/direct_gemm.cuh): what a lane takes from the lanes below it and how
 * it puts a tile's 32-bit cross word together. Plain C for the host test
 * (tests/test_lanes_prefix.c) and CUDA for the kernel, so both run the same
 * code. Bit p of a word is its bit 31 - p (most significant first), as in
 * format/lanes.h.
 *
 * The cross word of tile tau is the 16 ring bits before the lane's span (P)
 * followed by the span's first 16 bits; states whose window starts in P
 * are read from it. P is one half of a word the lanes below provide, two
 * tiles to a word; a byte permute puts that half on top and the span's
 * bits below it, after at most one shift (none where the span starts on a
 * byte of a word, at bit 0, 8 or 16).
 *
 * K = 1.5 (H = 3, spans of 12 bits): P is the last 4 bits of lane L-2's
 * span, then lane L-1's. Lane L takes lane L-1's three words and one word
 * of lane L-2 holding the last 4 bits of its 8 spans (trl_lanes_k15_ends),
 * four shuffles as at the integer rates, and builds the four prefix words
 * (trl_lanes_k15_prefix). The spans' ends sit in the word where each
 * prefix word's construction finds them. Integer-rate and K 2.5, 3.5
 * prefixes (the tails of lane L-1's spans, 16 bits each) are built by the
 * kernel itself. */
#ifndef TRL_FORMAT_LANES_PREFIX_H
#define TRL_FORMAT_LANES_PREFIX_H

#include "format/lanes.h"
#include "format/lanes_window.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bits [a, b) of a word (0 the most significant), 0 <= a < b <= 32. */
#define TRL_LANES_BITS(a, b)                                                   \
  ((0xFFFFFFFFu >> (a)) & ((b) == 32 ? 0xFFFFFFFFu : ~(0xFFFFFFFFu >> (b))))

/* Bits of `a` where `mask` is 0, of `b` where it is 1: one LOP3
 * (trl_lanes_select; the compiler's own form of two chained picks took
 * three). */
TRL_LANES_WFN uint32_t trl_lanes_pick(uint32_t a, uint32_t b, uint32_t mask) {
  return trl_lanes_select(a, b, mask);
}

/* x rotated right by r (1..31): bit p moves to bit p + r mod 32. */
TRL_LANES_WFN uint32_t trl_lanes_rotr(uint32_t x, int r) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(x, x, (unsigned)r);
#else
  return x >> r | x << (32 - r);
#endif
}

/* K 1.5: which prefix word holds tile tau's P (tiles tau and tau + 4 share
 * one) and whether in its top half (bits 0..15). */
TRL_LANES_CFN int trl_lanes_k15_word(int tau) { return tau & 3; }
TRL_LANES_CFN int trl_lanes_k15_top(int tau) {
  return tau == 0 || tau == 1 || tau == 3 || tau == 6;
}

/* K 1.5: the last 4 bits of the lane's 8 spans in one word, for lane L+2.
 * Span tau ends with bits [12 tau + 8, 12 tau + 12) of the lane's string,
 * at bit (12 tau + 8) mod 32 of word w0, w1 or w2: three disjoint sets of
 * places, taken together, then rotated so that tau's 4 bits lie at bit
 * (12 tau + 28) mod 32, where trl_lanes_k15_prefix wants them. */
TRL_LANES_WFN uint32_t trl_lanes_k15_ends(uint32_t w0, uint32_t w1,
                                          uint32_t w2) {
  /* tau 0, 1 in w0; 5, 6, 7 in w2; 2, 3, 4 in w1 */
  const uint32_t in_w0 = TRL_LANES_BITS(8, 12) | TRL_LANES_BITS(20, 24);
  const uint32_t in_w2 =
      TRL_LANES_BITS(4, 8) | TRL_LANES_BITS(16, 20) | TRL_LANES_BITS(28, 32);
  const uint32_t c = trl_lanes_pick(trl_lanes_pick(w1, w0, in_w0), w2, in_w2);
  return trl_lanes_rotr(c, 20);
}

/* K 1.5: the four prefix words of a lane from lane L-1's words v and lane
 * L-2's ends (trl_lanes_k15_ends). Tile tau's P is its 4 bits of `ends`,
 * then lane L-1's span tau (bits [12 tau, 12 tau + 12) of v), in the half
 * trl_lanes_k15_word / _top name:
 *   p[0] = P(0) | P(4): spans at v0 [0, 12) and v1 [16, 28), rotated by 4;
 *   p[1] = P(1) | P(5): v0 [12, 24), v1 [28, 32) v2 [0, 8), shifted by 8;
 *   p[2] = P(6) | P(2): v2 [8, 20), v0 [24, 32) v1 [0, 4), shifted by 4;
 *   p[3] = P(3) | P(7): v1 [4, 16) and v2 [20, 32) where they are.
 * Each takes the ends' bits at the places that its shift moves to the
 * halves' first 4 bits. */
TRL_LANES_WFN void trl_lanes_k15_prefix(uint32_t v0, uint32_t v1, uint32_t v2,
                                        uint32_t ends, uint32_t p[4]) {
  uint32_t b = trl_lanes_pick(v0, v1, TRL_LANES_BITS(16, 32));
  b = trl_lanes_pick(b, ends, TRL_LANES_BITS(12, 16) | TRL_LANES_BITS(28, 32));
  p[0] = trl_lanes_rotr(b, 4);
  b = trl_lanes_pick(v0, v1, TRL_LANES_BITS(28, 32));
  b = trl_lanes_pick(b, ends, TRL_LANES_BITS(8, 12) | TRL_LANES_BITS(24, 28));
  p[1] = trl_lanes_funnel(b, v2, 8);
  b = trl_lanes_pick(v0, v2, TRL_LANES_BITS(8, 20));
  b = trl_lanes_pick(b, ends, TRL_LANES_BITS(4, 8) | TRL_LANES_BITS(20, 24));
  p[2] = trl_lanes_funnel(b, v1, 4);
  b = trl_lanes_pick(v1, v2, TRL_LANES_BITS(20, 32));
  p[3] = trl_lanes_pick(b, ends, TRL_LANES_BITS(0, 4) | TRL_LANES_BITS(16, 20));
}

/* The cross word of tile tau at an odd rate h: P (half `top` of pk) on
 * top, the span's first bits below it (16 of them; at h = 3 the span's 12
 * and 4 that no state reads). w: the lane's h words. */
TRL_LANES_WFN uint32_t trl_lanes_cross(int h, int tau, const uint32_t *w,
                                       uint32_t pk, int top) {
  const int a = 4 * h * tau, i = a / 32, r = a % 32;
  const uint32_t sel_p = top ? 0x7600u : 0x5400u;
  if (r == 0)
    return trl_lanes_prmt(w[i], pk, 0x0032u | sel_p);
  if (r == 8)
    return trl_lanes_prmt(w[i], pk, 0x0021u | sel_p);
  if (r == 16)
    return trl_lanes_prmt(w[i], pk, 0x0010u | sel_p);
  uint32_t own; /* the span's first bit at bit 16 */
  if (r < 16)
    own = w[i] >> (16 - r);
  else if (i + 1 < h)
    own = trl_lanes_funnel(w[i], w[i + 1], (uint32_t)(r - 16));
  else /* the span ends with w[i] (h = 3, tau = 7) */
    own = w[i] << (r - 16);
  return trl_lanes_prmt(own, pk, 0x0010u | sel_p);
}

#ifdef __cplusplus
}
#endif

#endif
