/* SPDX-License-Identifier: Apache-2.0 */
/* Tile decoding: tail-biting trellis windows and the in-tile permutation. */
#include "format/tile.h"

#include "core/internal.h"
#include "format/codebook.h"
#include "format/sqg.h"

#define MAX_W32 (8 * TRELLIS_MAX_BITS)

/* Rates are in half-bits h = 2K (format/codebooks.h): a tile has 4h 32-bit
 * words (8h int16) and state i ends at ring bit S(i) = floor((i + 1) h / 2),
 * which is K (i + 1) for an integer K and the window ends of EXL3-1.6 §1.3
 * for K = KA + 1/2 (steps of KA and KA + 1 bits, alternating). */

/* The tile's 32-bit words (w32[j] = u16[2j] | u16[2j+1] << 16), with one
 * wrapped word on each side so that every window is inside two adjacent
 * words: ext[0] = w32[last], ext[1 + j] = w32[j], ext[4h + 1] = w32[0]. */
static void load_extended_words(const int16_t *tile, int h,
                                uint32_t ext[MAX_W32 + 2]) {
  const int words = 4 * h;
  for (int j = 0; j < words; j++) {
    uint32_t lo = (uint16_t)tile[2 * j];
    uint32_t hi = (uint16_t)tile[2 * j + 1];
    ext[1 + j] = lo | (hi << 16);
  }
  ext[0] = ext[words];
  ext[words + 1] = ext[1];
}

/* State i = the 16 ring bits ending (exclusive) at bit S(i), read
 * MSB-first within 32-bit words and cyclic over the tile. In `ext`, ring
 * bit p sits at extended bit p + 32, so the window starts at S(i) + 16. */
static inline uint32_t window_state(const uint32_t *ext, int h, int i) {
  const unsigned start = (unsigned)(h * (i + 1) / 2 + 16);
  const unsigned word = start >> 5;
  const unsigned offset = start & 31u;
  const uint64_t pair = ((uint64_t)ext[word] << 32) | ext[word + 1];
  return (uint32_t)(pair >> (48u - offset)) & 0xFFFFu;
}

void trl_tile_states_rate(const int16_t *tile, int h, uint16_t states[256]) {
  uint32_t ext[MAX_W32 + 2] = {
      0}; /* zeroed: keeps gcc 13 -Wmaybe-uninitialized quiet */
  load_extended_words(tile, h, ext);
  for (int i = 0; i < 256; i++)
    states[i] = (uint16_t)window_state(ext, h, i);
}

void trl_tile_states(const int16_t *tile, int bits, uint16_t states[256]) {
  trl_tile_states_rate(tile, 2 * bits, states);
}

/* i = 8*lane + j; rows 2q, 2q+1, 2q+8, 2q+9 (q = lane % 4) at column
 * lane / 4, then the same rows at column lane / 4 + 8. */
static inline int tile_offset(int i) {
  const int lane = i >> 3, j = i & 7;
  const int row = 2 * (lane & 3) + (j & 1) + 8 * ((j >> 1) & 1);
  const int col = (lane >> 2) + 8 * (j >> 2);
  return 16 * row + col;
}

void trl_tile_position(int i, int *row, int *col) {
  const int offset = tile_offset(i & 255);
  *row = offset >> 4;
  *col = offset & 15;
}

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* The hot decode of the CPU forward. Writing i = 64g + u, the window of
 * state i starts at extended bit 32*h*g + floor((u+1) h / 2) + 16, i.e.
 * word h*g plus a constant that depends on u only, and its position is
 * tile_offset(u) + 2g (64 positions are two columns). With h a constant
 * and u unrolled every shift and offset is an immediate. */
static ALWAYS_INLINE void decode_f32_fixed(const uint32_t *ext, const int h,
                                           const float *table, float out[256]) {
  for (int g = 0; g < 4; g++) {
    const uint32_t *words = ext + h * g;
#if defined(__GNUC__)
#pragma GCC unroll 64
#endif
    for (int u = 0; u < 64; u++) {
      const int start = h * (u + 1) / 2 + 16;
      const uint64_t pair =
          ((uint64_t)words[start >> 5] << 32) | words[(start >> 5) + 1];
      const uint32_t state = (uint32_t)(pair >> (48 - (start & 31))) & 0xFFFFu;
      out[tile_offset(u) + 2 * g] = table[state];
    }
  }
}

void trl_tile_decode_f32_rate(const int16_t *tile, int h, const float *table,
                              float out[256]) {
  uint32_t ext[MAX_W32 + 2] = {
      0}; /* zeroed: keeps gcc 13 -Wmaybe-uninitialized quiet */
  load_extended_words(tile, h, ext);
  switch (h) {
#define RATE_CASE(H)                                                           \
  case H:                                                                      \
    decode_f32_fixed(ext, H, table, out);                                      \
    break;
    RATE_CASE(2)
    RATE_CASE(3)
    RATE_CASE(4)
    RATE_CASE(5)
    RATE_CASE(6)
    RATE_CASE(7)
    RATE_CASE(8)
    RATE_CASE(9)
    RATE_CASE(10)
    RATE_CASE(11)
    RATE_CASE(12)
    RATE_CASE(13)
    RATE_CASE(14)
    RATE_CASE(15)
#undef RATE_CASE
  default: /* 16; every h of 2..16 has its case, whatever the table allows */
    decode_f32_fixed(ext, 16, table, out);
    break;
  }
}

void trl_tile_decode_f32(const int16_t *tile, int bits, const float *table,
                         float out[256]) {
  trl_tile_decode_f32_rate(tile, 2 * bits, table, out);
}

static trellis_status check_bits(int bits) {
  if (bits < TRELLIS_MIN_BITS || bits > TRELLIS_MAX_BITS)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "bits: expected %d..%d bits per weight, got %d",
                    TRELLIS_MIN_BITS, TRELLIS_MAX_BITS, bits);
  return TRELLIS_OK;
}

trellis_status trellis_decode_tile_rate(const int16_t *tile, int bits, int half,
                                        trellis_codebook cb,
                                        uint16_t out[256]) {
  if (tile == NULL || out == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "decode_tile: %s is NULL",
                    tile ? "out" : "tile");
  trellis_status st = check_bits(bits);
  if (st != TRELLIS_OK)
    return st;
  if (half != 0 && half != 1)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "decode_tile: half: expected 0 or 1, got %d", half);
  if (!trl_codebook_known((int)cb))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "codebook: expected 0..%d (in order:%s), got %d",
                    TRL_CB_COUNT - 1, TRL_CODEBOOK_NAMES_TEXT, (int)cb);
  if ((st = trl_codebook_check_rate(cb, bits, half, "bits")) != TRELLIS_OK)
    return st;
  const uint16_t *table = trellis_codebook_table_bits(cb, bits);
  if (table == NULL)
    return trl_sqg_tables_status();
  const int h = trl_rate_h(bits, half);
  uint32_t ext[MAX_W32 + 2] = {
      0}; /* zeroed: keeps gcc 13 -Wmaybe-uninitialized quiet */
  load_extended_words(tile, h, ext);
  for (int i = 0; i < 256; i++)
    out[tile_offset(i)] = table[window_state(ext, h, i)];
  return TRELLIS_OK;
}

trellis_status trellis_decode_tile(const int16_t *tile, int bits,
                                   trellis_codebook cb, uint16_t out[256]) {
  return trellis_decode_tile_rate(tile, bits, 0, cb, out);
}

trellis_status trellis_expand_signs(const int16_t *packed, int64_t count,
                                    uint16_t *out) {
  if (count < 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "expand_signs: count must be >= 0, got %lld",
                    (long long)count);
  if (count > 0 && (packed == NULL || out == NULL))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "expand_signs: %s is NULL",
                    packed ? "out" : "packed");
  for (int64_t e = 0; e < count; e++) {
    const uint16_t word = (uint16_t)packed[e >> 4];
    out[e] = ((word >> (e & 15)) & 1u) ? 0xBC00u : 0x3C00u;
  }
  return TRELLIS_OK;
}
