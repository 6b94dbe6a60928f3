/* SPDX-License-Identifier: Apache-2.0 */
/* Internal tile decoding helpers (FORMAT.md §3). */
#ifndef TRL_FORMAT_TILE_H
#define TRL_FORMAT_TILE_H

#include "trellis.h"

/* Words of one tile: 16 * bits int16 (a rate in half-bits:
 * trl_rate_tile_words, format/codebooks.h). */
#define TRL_TILE_WORDS(bits) (16 * (bits))

/* The 256 16-bit trellis states of a tile, in trellis order (state i is the
 * tail-biting window ending at symbol i). `bits` must be 1..8. */
void trl_tile_states(const int16_t *tile, int bits, uint16_t states[256]);
/* The same at rate h half-bits (2..16: K = h/2, a half-integer K when h is
 * odd; EXL3-1.6 §1.3): state i is the ring window ending at bit
 * floor((i + 1) h / 2). */
void trl_tile_states_rate(const int16_t *tile, int h, uint16_t states[256]);

/* In-tile position of trellis index i (m16n8k16 B-fragment order):
 * row = input (k) row, col = output (n) column, both 0..15. */
void trl_tile_position(int i, int *row, int *col);

/* Decodes a tile through an fp32 state table (trl_codebook_table_f32_bits)
 * into out[16*r + c], row-major. `bits` must be 1..8. */
void trl_tile_decode_f32(const int16_t *tile, int bits, const float *table,
                         float out[256]);
/* The same at rate h half-bits (2..16). */
void trl_tile_decode_f32_rate(const int16_t *tile, int h, const float *table,
                              float out[256]);

#endif
