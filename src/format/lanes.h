/* SPDX-License-Identifier: Apache-2.0 */
/* The lane layout: the GPU's arrangement of a trellis payload (FORMAT.md,
 * "The lane layout").
 *
 * A group is one tile row's run of 8 tiles, [kt][8g .. 8g+7]: 8 * 16 * H
 * bytes for a rate of H half-bits per weight (H = 2K: 2..16, odd for the
 * half-integer rates). The group keeps its checkpoint offset; only its bytes
 * are permuted. In a tile, weight i's state ends at ring bit S(i), and lane
 * L of a warp decodes weights 8L..8L+7: its "span" is ring bits
 * [4HL, 4H(L+1)) (the bits of its own 8 symbols), and the 16 - K (integer
 * K) or 16 - floor(K) bits before them belong to the lanes below it.
 *
 * In the lane layout lane L owns H 32-bit words of the group: its spans of
 * tiles 0..7 in order, 4H bits each, most significant bit first (string bit
 * p is bit 31 - p % 32 of word p / 32, as the ring's bits are in a tile).
 * Its words are stored so that a warp reads every lane's share with
 * coalesced 16-, 8- or 4-byte loads:
 *   - words 0 .. 4Q-1 (Q = H / 4 quads): quad q of lane L at byte
 *     16 (32 q + L), word w % 4 inside it;
 *   - then, if H % 4 >= 2, a pair: byte 512 Q + 8 L;
 *   - then, if H is odd, a single word: byte 512 Q + 256 [pair] + 4 L.
 * The header is plain C (the CPU repack and tests) and CUDA (the kernels).
 */
#ifndef TRL_FORMAT_LANES_H
#define TRL_FORMAT_LANES_H

#include "trellis.h"

#include <stdint.h>

#if defined(__CUDACC__)
#define TRL_LANES_FN __host__ __device__ __forceinline__ constexpr
#elif defined(__cplusplus) /* tests/test_direct_windows.cc */
#define TRL_LANES_FN static inline constexpr
#else
#define TRL_LANES_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

enum {
  TRL_LANES_TILES = 8, /* tiles of a group (one 128-column block) */
  TRL_LANES_LANES = 32
};

/* Half-bits per weight of a record: 2 K, plus one for a half rate. */
TRL_LANES_FN int trl_lanes_rate(int bits, int half) {
  return 2 * bits + (half ? 1 : 0);
}

/* Bytes of one group at rate H: 8 tiles of 16 H bytes. */
TRL_LANES_FN int trl_lanes_group_bytes(int h) { return 128 * h; }

/* Byte offset, inside a group, of word `w` (0..H-1) of lane `lane`. */
TRL_LANES_FN int trl_lanes_word_offset(int h, int lane, int w) {
  const int quads = h / 4, pair = (h % 4) >= 2;
  if (w < 4 * quads)
    return 16 * (32 * (w / 4) + lane) + 4 * (w % 4);
  w -= 4 * quads;
  if (pair && w < 2)
    return 512 * quads + 8 * lane + 4 * w;
  return 512 * quads + (pair ? 256 : 0) + 4 * lane;
}

/* Bits of the window before a lane's span that its first state reads:
 * 16 - floor(K) = 16 - H / 2. */
TRL_LANES_FN int trl_lanes_prefix_bits(int h) { return 16 - h / 2; }

/* Offset, from the start of the lane's window (16 - H/2 bits before its
 * span), of the state of its weight j (0..7): j K for an integer rate,
 * j floor(K) + ceil(j / 2) for a half rate (odd positions take one bit
 * more, EXL3-1.6 §1.3). */
TRL_LANES_FN int trl_lanes_state_offset(int h, int j) {
  return (h & 1) ? j * (h / 2) + (j + 1) / 2 : j * (h / 2);
}

/* One record's tile array [k/16][n/16][16 H/2] between the layouts, group
 * by group: checkpoint -> lanes (to_lanes) or back. src may equal dst. */
trellis_status trl_lanes_convert(const int16_t *src, int16_t *dst, int64_t k,
                                 int64_t n, int h, int to_lanes);

/* The k-major lane layout (FORMAT.md, "The k-major lane layout";
 * TRELLIS_LAYOUT_KMAJOR, cuda/lanes.cu is the device repack): group
 * (kg, nt) is the 8 tiles [8 kg + t][nt], t = 0..7,
 * of one n-tile over one 128-k slice, lane-packed as a lane-layout group
 * packs its 8 tiles, at group index kg * (n / 16) + nt. From a checkpoint
 * tile array [k/16][n/16][16 H/2]; k a multiple of 128, dst not src. */
trellis_status trl_lanes_kmajor(const int16_t *src, int16_t *dst, int64_t k,
                                int64_t n, int h);

/* TRELLIS_OK when `layout` is a device layout (LANES, KMAJOR) that can
 * hold `w`; else the error, naming `who`. */
trellis_status trl_check_target_layout(const trellis_weight *w,
                                       trellis_layout layout, const char *who);

/* TRELLIS_OK when `out` does not overlap w's payload (the k-major repack
 * is never in place); else TRELLIS_ERR_BUFFER naming `who`. */
trellis_status trl_check_kmajor_out(const trellis_weight *w, const void *out,
                                    const char *who);

#ifdef __cplusplus
}
#endif

#endif
