/* SPDX-License-Identifier: Apache-2.0 */
/* Groups of the lane layout in shared memory (FORMAT.md, "The lane
 * layout"; the bit math is format/lanes_window.h, tested on the host).
 * GroupCopy stages a group (8 tiles of one tile row, 256 K bytes) from the
 * payload word-major, the arrangement whose loads meet no bank conflict;
 * LaneTile's fetch() then gives the words that the decode of
 * tile_decode.cuh takes with offset o = 0 (E most significant bit first:
 * the prefix from the lanes below, then the lane's own span), so
 * states_from_words, sqg_windows and decode_*_frags give the states the
 * checkpoint layout gave.
 *
 * The offsets and shifts depend on (lane, tau) only and are computed once
 * per kernel. Per tile, against the checkpoint layout's fetch (kNW = kNV +
 * 1 loads, kNV funnel shifts by the lane's bit offset):
 *  - K = 4, 8: K / 4 + 1 loads (2, 3: one fewer), kNV funnel shifts by a
 *    constant;
 *  - K = 3, 5, 6, 7: kNW loads of its own and 1 (even K) or 2 (odd K) of
 *    lane L-1, kNV funnel shifts, one shift (funnel for odd K) and one LOP3;
 *  - K = 2: 2 loads, a byte permute and a shift (one op more);
 *  - K = 1: 3 loads (lanes L, L-1, L-2), two byte permutes and a shift
 *    (one load and two ops more).
 * The decode's own funnel shifts by o = 0 fold away. Every load is one
 * shared-memory wavefront (the checkpoint layout's were 1 or 2: lanes met
 * 2 to a bank at K 5..8); in the lane layout as stored they would be 4. */
#ifndef TRL_CUDA_LANES_CUH
#define TRL_CUDA_LANES_CUH

#include "format/lanes_window.h"
#include "tile_decode.cuh"

namespace trl {

/* `v` as a value the compiler cannot see through: the offsets and shifts
 * below are computed once and kept, where the compiler would otherwise
 * rebuild them from the lane index inside the ring to save their registers
 * (sm_90a, one m-block: ~40 instructions a stage for a K3 copy's offsets,
 * ~28 for the window's). */
__device__ __forceinline__ uint32_t kept(uint32_t v) {
  asm("" : "+r"(v));
  return v;
}

/* A warp's copy of one group into its staged arrangement: lane copies the
 * words lane + 32 i (i < H, H = 2K + HF half-bits a weight: HF 1 for the
 * half-integer rate K + 1/2) of the lane layout, 128 consecutive bytes per
 * warp and copy, with 4-byte cp.async (a 16-byte copy cannot spread a
 * lane's 4 words over 4 banks). A quad word's staged place repeats every
 * 4 i, 512 bytes on: 4 offsets, 2 for the pair words and 1 for the single
 * word of an odd H. */
template <int K, int HF = 0> struct GroupCopy {
  static constexpr int kH = 2 * K + HF, kQuads = kH / 4;
  static constexpr bool kPair = kH % 4 >= 2, kSingle = kH % 2 != 0;
  uint32_t dst[4];    /* staged places of quad words i % 4 (bytes) */
  uint32_t dst_pr[2]; /* of the pair words */
  uint32_t dst_one;   /* of the single word */

  GroupCopy() = default;
  __device__ __forceinline__ explicit GroupCopy(int lane) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      dst[i] = kept(4u * (uint32_t)trl_lanes_staged_of_layout(
                             kH, kQuads ? lane + 32 * i : 0));
#pragma unroll
    for (int i = 0; i < 2; ++i)
      dst_pr[i] = kept(4u * (uint32_t)trl_lanes_staged_of_layout(
                                kH, kPair ? 128 * kQuads + lane + 32 * i : 0));
    dst_one =
        kept(4u * (uint32_t)trl_lanes_staged_of_layout(
                      kH, kSingle ? 128 * kQuads + 64 * kPair + lane : 0));
  }
  /* The group whose lane-layout bytes start at src - 4 lane (global) into
   * the staged group at shared address `group`. */
  __device__ __forceinline__ void issue(uint32_t group, const char *src) const {
#pragma unroll
    for (int i = 0; i < 4 * kQuads; ++i)
      cp_async4_raw(group + dst[i % 4] + 512 * (i / 4), src + 128 * i);
    if constexpr (kPair) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
        cp_async4_raw(group + dst_pr[i], src + 128 * (4 * kQuads + i));
    }
    if constexpr (kSingle)
      cp_async4_raw(group + dst_one, src + 128 * (4 * kQuads + 2 * kPair));
  }
};

template <int K> struct LaneTile {
  using G = TileGeom<K>;
  static constexpr int kOwn = trl_lanes_own_words(K);
  static constexpr int kPrefix = trl_lanes_prefix_words(K);
  static_assert(kOwn <= TRL_LANES_MAX_OWN && kPrefix <= TRL_LANES_MAX_PREFIX &&
                    G::kNV == trl_lanes_window_words(K),
                "window words");

  uint32_t own[kOwn];       /* byte offsets in the group */
  uint32_t prefix[kPrefix]; /* of the lanes below */
  uint32_t own_shift, prefix_shift;

  LaneTile() = default;
  __device__ __forceinline__ LaneTile(int lane, int tau) {
#pragma unroll
    for (int i = 0; i < kOwn; ++i)
      own[i] = kept((uint32_t)trl_lanes_own_offset(K, lane, tau, i));
#pragma unroll
    for (int i = 0; i < kPrefix; ++i)
      prefix[i] = kept((uint32_t)trl_lanes_prefix_offset(K, lane, tau, i));
    own_shift = kept(trl_lanes_own_shift(K, tau));
    prefix_shift = kept(trl_lanes_prefix_shift(K, tau));
  }

  /* w[0 .. kNV-1] = E of this lane's tile in `group` (shared memory,
   * staged); w[kNV] is not read at offset 0. */
  __device__ __forceinline__ void fetch(const char *group,
                                        uint32_t (&w)[G::kNW]) const {
    uint32_t o[kOwn], p[kPrefix], e[G::kNV];
#pragma unroll
    for (int i = 0; i < kOwn; ++i)
      o[i] = *reinterpret_cast<const uint32_t *>(group + own[i]);
#pragma unroll
    for (int i = 0; i < kPrefix; ++i)
      p[i] = *reinterpret_cast<const uint32_t *>(group + prefix[i]);
    trl_lanes_window(K, o, p, own_shift, prefix_shift, e);
#pragma unroll
    for (int i = 0; i < G::kNV; ++i)
      w[i] = e[i];
    w[G::kNV] = 0u;
  }
};

/* The lane's B fragments of its tile (`lt`) of a group in shared memory
 * (the reconstruct kernels). */
template <int K, int CB, bool BF16>
__device__ __forceinline__ void
decode_lane_tile(const LaneTile<K> &lt, const char *group, uint32_t (&b)[4]) {
  uint32_t w[TileGeom<K>::kNW];
  lt.fetch(group, w);
  decode_frags<K, CB, BF16>(w, 0, b, LiteralShifts());
}

/* A lane's tile of a group at the half-integer rate KA + 1/2 (H = 2 KA +
 * 1, MUL1) in shared memory, staged: two words of its own span and two of
 * each lane below whose span its window reads (format/lanes_window.h,
 * trl_lanes_half_*, tested on the host), E in two words, the 8 states at
 * the rate's offsets. The places depend on (lane, tau) only. */
template <int KA> struct HalfTile {
  static constexpr int kH = 2 * KA + 1, kBelow = trl_lanes_half_lanes(kH);
  static constexpr int kW = TRL_LANES_HALF_WORDS;
  uint32_t off[kBelow + 1][kW]; /* byte offsets in the group */
  uint32_t shift;

  HalfTile() = default;
  __device__ __forceinline__ HalfTile(int lane, int tau) {
#pragma unroll
    for (int b = 0; b <= kBelow; ++b)
#pragma unroll
      for (int i = 0; i < kW; ++i)
        off[b][i] = kept((uint32_t)trl_lanes_half_offset(kH, lane, b, tau, i));
    shift = kept(trl_lanes_half_shift(kH, tau));
  }

  /* s[j] = the state of weight 8L + j of this lane's tile in `group`. */
  __device__ __forceinline__ void states(const char *group,
                                         uint32_t (&s)[8]) const {
    uint32_t w[3][kW] = {};
#pragma unroll
    for (int b = 0; b <= kBelow; ++b)
#pragma unroll
      for (int i = 0; i < kW; ++i)
        w[b][i] = *reinterpret_cast<const uint32_t *>(group + off[b][i]);
    uint32_t e[2];
    trl_lanes_half_window(kH, w[0], w[1], w[2], shift, e);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int o = trl_lanes_state_offset(kH, j); /* at most 25 */
      s[j] = o <= 16 ? (e[0] << o) >> 16 : __funnelshift_l(e[1], e[0], o) >> 16;
    }
  }
};

/* The lane's B fragments of its tile of a half-rate group (decode_frags'
 * packing: the tile permutation is the integer rates'). */
template <int KA, int CB, bool BF16>
__device__ __forceinline__ void
decode_half_tile(const HalfTile<KA> &t, const char *group, uint32_t (&b)[4]) {
  uint32_t s[8], u[8];
  t.states(group, s);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    u[j] = decode_state<CB>(s[j]);
    if constexpr (BF16)
      u[j] = f16lo_to_bf16lo(u[j]);
  }
  b[0] = __byte_perm(u[0], u[1], 0x5410);
  b[1] = __byte_perm(u[2], u[3], 0x5410);
  b[2] = __byte_perm(u[4], u[5], 0x5410);
  b[3] = __byte_perm(u[6], u[7], 0x5410);
}

} // namespace trl

#endif
