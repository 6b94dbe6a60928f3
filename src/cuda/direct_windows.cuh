/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct kernel's window extraction (direct_gemm.cuh): a
 * lane's 8 states of each tile of a group from its lane words and what the
 * lanes below it send, every bit offset known at compile time. Plain C++
 * outside nvcc (the byte permute and funnel shift are format/lanes_window.h's
 * host stand-ins there), so the host test (tests/test_direct_windows.cc)
 * runs this very code against the format's states for every rate, tile
 * and lane. */
#ifndef TRL_CUDA_DIRECT_WINDOWS_CUH
#define TRL_CUDA_DIRECT_WINDOWS_CUH

#include "format/lanes.h"
#include "format/lanes_prefix.h"

#include <stdint.h>

#if defined(__CUDACC__)
#define TRL_DW_FN __device__ __forceinline__
#define TRL_DW_CONST static __constant__
#else
#define TRL_DW_FN inline
#define TRL_DW_CONST static const
#endif

namespace trl {
namespace direct {

/* A left shift the compiler cannot fold into the right shift after it
 * ((x << r) >> 16 would become a shift and a mask, two integer-ALU
 * instructions). A window off a byte boundary takes one such shift (shared
 * where it can be, window16) and one right shift or byte permute. F (the halves
 * form: its codebook's LOP3 keeps the integer ALU the busiest pipe) makes every
 * shift an IMAD by a power of two from the constant bank, which ptxas cannot
 * turn back into a shift: the FMA pipe takes them all. Without F ptxas picks
 * IMAD.SHL or SHF (docs/TUNING.md). TRL_DIRECT_SHL_IMAD 0 / 1 (measurement
 * builds) force either for every form. */
TRL_DW_CONST uint32_t kShlPow2[16] = {1u << 0,  1u << 1,  1u << 2,  1u << 3,
                                      1u << 4,  1u << 5,  1u << 6,  1u << 7,
                                      1u << 8,  1u << 9,  1u << 10, 1u << 11,
                                      1u << 12, 1u << 13, 1u << 14, 1u << 15};
template <int S, bool F = false> TRL_DW_FN uint32_t shl(uint32_t x) {
#ifdef TRL_DIRECT_SHL_IMAD
  constexpr bool kFma = TRL_DIRECT_SHL_IMAD;
#else
  constexpr bool kFma = F;
#endif
  if constexpr (S == 0) {
    return x;
  } else if constexpr (kFma && S < 16) {
    return x * kShlPow2[S];
  } else {
#if defined(__CUDA_ARCH__)
    uint32_t r;
    asm("shl.b32 %0, %1, %2;" : "=r"(r) : "r"(x), "n"(S));
    return r;
#else
    return x << S;
#endif
  }
}

/* The 16 bits at bit R (0..16, MSB first) of x, zero-extended. A window
 * off a byte boundary reads a copy of x shifted by R % 8, which the
 * windows of a tile at the same R % 8 of the same word share (the compiler
 * keeps one), then takes two whole bytes: one shift each plus one per
 * shared copy, where a shift and a right shift each would cost two. */
template <int R, bool F = false> TRL_DW_FN uint32_t window16(uint32_t x) {
  static_assert(R >= 0 && R <= 16, "a window inside one word");
  if constexpr (R == 16)
    return x & 0xFFFFu;
  else if constexpr ((R & 7) != 0)
    return window16<R & ~7, F>(shl<R & 7, F>(x));
  else if constexpr (R == 8)
    return trl_lanes_prmt(x, 0u, 0x4421);
  else
    return x >> 16;
}

/* 16 bits of a lane's string at bit B (MSB first), zero-extended. */
template <int H, int B, bool F = false>
TRL_DW_FN uint32_t field16(const uint32_t (&w)[H]) {
  constexpr int i = B >> 5, r = B & 31;
  if constexpr (r <= 16)
    return window16<r, F>(w[i]);
  else if constexpr ((H & 1) && r != 24) /* two instructions, not three */
    return trl_lanes_funnel(w[i], w[i + 1], r) >> 16;
  else /* bits 16..47 of w[i] : w[i + 1], then as above */
    return window16<r - 16, F>(trl_lanes_prmt(w[i + 1], w[i], 0x5432));
}

/* `len` (1..16) bits at B, right-aligned (the short spans of H = 2). */
template <int H, int B, int LEN>
TRL_DW_FN uint32_t field_bits(const uint32_t (&w)[H]) {
  constexpr int i = B >> 5, r = B & 31;
  if constexpr (r + LEN <= 32)
    return (w[i] << r) >> (32 - LEN);
  else
    return trl_lanes_funnel(w[i], w[i + 1], r) >> (32 - LEN);
}

/* (P << 16) | (span bits 0..15): the 32 bits a window that starts in the
 * lower lanes' bits P reads from. P is half `ph` (0 low, 1 high) of pk. */
template <int H, int B, bool F = false>
TRL_DW_FN uint32_t cross_word(const uint32_t (&w)[H], uint32_t pk, int ph) {
  constexpr int i = B >> 5, r = B & 31;
  const uint32_t sel_p = ph ? 0x7600 : 0x5400; /* pk's half to the top */
  if constexpr (4 * H < 16) { /* span shorter than 16: zeros follow */
    const uint32_t head = field_bits<H, B, 4 * H>(w) << (16 - 4 * H);
    return trl_lanes_prmt(head, pk, 0x0010 | sel_p);
  } else if constexpr (r == 0) {
    return trl_lanes_prmt(w[i], pk, 0x0032 | sel_p);
  } else if constexpr (r == 16) {
    return trl_lanes_prmt(w[i], pk, 0x0010 | sel_p);
  } else {
    return trl_lanes_prmt(field16<H, B, F>(w), pk, 0x0010 | sel_p);
  }
}

/* The lane's 8 states of tile T of the group in `w`. `prev` holds what the
 * lanes below sent (lower_bits): for H >= 4 the last 16 bits of lane L-1's
 * spans, two tiles to a word; for H = 3 the 16 bits before the span, two
 * tiles to a word (trl_lanes_k15_prefix); for H = 2 lane L-1's words, then
 * lane L-2's. At odd H the cross word is trl_lanes_cross. */
template <int H, int T, bool F, int J = 0>
TRL_DW_FN void window_states(const uint32_t (&w)[H], uint32_t cross,
                             uint32_t (&s)[8]) {
  if constexpr (J < 8) {
    constexpr int kSpan = 4 * H, kLead = H / 2;
    /* state J's window: bits [kLead + q, kLead + q + 16) of P ++ span */
    constexpr int o = kLead + trl_lanes_state_offset(H, J);
    if constexpr (o >= 16)
      s[J] = field16<H, kSpan * T + o - 16, F>(w);
    else
      s[J] = window16<o, F>(cross);
    window_states<H, T, F, J + 1>(w, cross, s);
  }
}

template <int H, int T, bool F = false>
TRL_DW_FN void tile_states(const uint32_t (&w)[H],
                           const uint32_t (&prev)[2 * H], uint32_t (&s)[8]) {
  constexpr int kSpan = 4 * H;
  if constexpr (H & 1) { /* the half rates: format/lanes_prefix.h */
    constexpr int top = H == 3 ? trl_lanes_k15_top(T) : T & 1;
    const uint32_t pk = prev[H == 3 ? trl_lanes_k15_word(T) : T >> 1];
    window_states<H, T, F>(w, trl_lanes_cross(H, T, w, pk, top), s);
  } else {
    uint32_t pk; /* the 16 bits before the span, in half `ph` */
    int ph;
    if constexpr (H >= 4) {
      pk = prev[T >> 1];
      ph = T & 1;
    } else {
      uint32_t w1[H], w2[H];
      TRL_LANES_UNROLL
      for (int i = 0; i < H; ++i)
        w1[i] = prev[i], w2[i] = prev[H + i];
      const uint32_t a = field_bits<H, kSpan * T, kSpan>(w2);
      const uint32_t b = field_bits<H, kSpan * T, kSpan>(w1);
      pk = ((a << kSpan) | b) & 0xFFFFu;
      ph = 0;
    }
    const uint32_t cross = cross_word<H, kSpan * T, F>(w, pk, ph);
    window_states<H, T, F>(w, cross, s);
  }
}

/* The last 16 bits of tiles T and T + 1's spans, one half each. */
template <int H, int T> TRL_DW_FN uint32_t tail_pair(const uint32_t (&w)[H]) {
  constexpr int b0 = 4 * H * (T + 1) - 16, b1 = 4 * H * (T + 2) - 16;
  constexpr int r0 = b0 & 31, r1 = b1 & 31;
  if constexpr ((r0 == 0 || r0 == 16) && (r1 == 0 || r1 == 16))
    return trl_lanes_prmt(w[b0 >> 5], w[b1 >> 5],
                          (r0 ? 0x0010 : 0x0032) | (r1 ? 0x5400 : 0x7600));
  else
    return trl_lanes_prmt(field16<H, b0>(w), field16<H, b1>(w), 0x5410);
}

/* What a lane needs from the lanes below it for all 8 tiles of a group:
 * the values lane_sends makes in lanes L-1 and L-2 (by shuffle on the GPU,
 * read directly by the host test), put together by lane_receive. H >= 4:
 * the last 16 bits of tiles 2i, 2i + 1 from lane L-1; H = 3: lane L-1's
 * words and lane L-2's span ends; H = 2: lane L-1's and L-2's words. */
template <int H> struct LaneSends { uint32_t v[H == 2 ? 2 : 4]; };

template <int H> TRL_DW_FN LaneSends<H> lane_sends(const uint32_t (&w)[H]) {
  LaneSends<H> s;
  if constexpr (H == 3) {
    s.v[0] = w[0], s.v[1] = w[1], s.v[2] = w[2];
    s.v[3] = trl_lanes_k15_ends(w[0], w[1], w[2]);
  } else if constexpr (H >= 4) {
    s.v[0] = tail_pair<H, 0>(w), s.v[1] = tail_pair<H, 2>(w);
    s.v[2] = tail_pair<H, 4>(w), s.v[3] = tail_pair<H, 6>(w);
  } else {
    s.v[0] = w[0], s.v[1] = w[1];
  }
  return s;
}

/* prev from lane L-1's sends (b1) and lane L-2's (b2; H = 2 and 3 only) */
template <int H>
TRL_DW_FN void lane_receive(const LaneSends<H> &b1, const LaneSends<H> &b2,
                            uint32_t (&prev)[2 * H]) {
  if constexpr (H == 3) {
    trl_lanes_k15_prefix(b1.v[0], b1.v[1], b1.v[2], b2.v[3], prev);
  } else if constexpr (H >= 4) {
    TRL_LANES_UNROLL
    for (int i = 0; i < 4; ++i)
      prev[i] = b1.v[i];
  } else {
    TRL_LANES_UNROLL
    for (int i = 0; i < H; ++i)
      prev[i] = b1.v[i], prev[H + i] = b2.v[i];
  }
}

} // namespace direct
} // namespace trl

#endif
