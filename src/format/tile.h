/* Internal tile decoding helpers (FORMAT.md §3). */
#ifndef TRL_FORMAT_TILE_H
#define TRL_FORMAT_TILE_H

#include "trellis.h"

/* Words of one tile: 16 * bits int16. */
#define TRL_TILE_WORDS(bits) (16 * (bits))

/* The 256 16-bit trellis states of a tile, in trellis order (state i is the
 * tail-biting window ending at symbol i). `bits` must be 1..8. */
void trl_tile_states(const int16_t *tile, int bits, uint16_t states[256]);

/* In-tile position of trellis index i (m16n8k16 B-fragment order):
 * row = input (k) row, col = output (n) column, both 0..15. */
void trl_tile_position(int i, int *row, int *col);

/* Decodes a tile through an fp32 state table (trl_codebook_table_f32_bits)
 * into out[16*r + c], row-major. `bits` must be 1..8. */
void trl_tile_decode_f32(const int16_t *tile, int bits, const float *table,
                         float out[256]);

#endif
