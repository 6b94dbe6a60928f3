/* SPDX-License-Identifier: Apache-2.0 */
/* Original-basis weight W = diag(s_in) . Hblk . W_hat . Hblk . diag(s_out),
 * in fp32, in the order of exllamav3's get_weight_tensor: left rotation, row
 * scale, right rotation, column scale. */
#include "core/internal.h"
#include "format/codebook.h"
#include "format/hadamard.h"
#include "format/sqg.h"
#include "format/tile.h"
#include "format/weight.h"

#include <stdlib.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Columns rotated together by the left transform: 128 rows x 256 floats
 * = 128 KiB stays in L2. */
#define LEFT_CHUNK 256

/* W_hat as fp32 into `dense`, record by record; 0 when a table is missing
 * (the SQG tables failed their checks). */
static int decode_into(const trellis_weight *w, float *dense) {
  const size_t n = (size_t)w->n;
  float tile_values[256];
  trl_record rec[2];
  const int count = trl_weight_records(w, rec);
  for (int r = 0; r < count; r++) {
    const float *table = trl_codebook_table_f32_bits(w->codebook, rec[r].bits);
    if (table == NULL)
      return 0;
    for (int64_t kt = rec[r].kt0; kt < rec[r].kt0 + rec[r].k / 16; kt++) {
      for (int64_t nt = rec[r].nt0; nt < rec[r].nt0 + rec[r].n / 16; nt++) {
        trl_tile_decode_f32_rate(trl_record_tile(&rec[r], kt, nt),
                                 trl_record_rate(&rec[r]), table, tile_values);
        float *corner = dense + (size_t)(16 * kt) * n + (size_t)(16 * nt);
        for (int row = 0; row < 16; row++)
          for (int c = 0; c < 16; c++)
            corner[(size_t)row * n + (size_t)c] = tile_values[16 * row + c];
      }
    }
  }
  return 1;
}

trellis_status trellis_dense_weight(const trellis_weight *caller,
                                    float *dense) {
  trellis_weight full;
  const trellis_weight *w = &full;
  trellis_status st = trl_weight_load(caller, &full);
  if (st == TRELLIS_OK)
    st = trl_weight_require_layout(&full, TRELLIS_LAYOUT_CHECKPOINT,
                                   "dense_weight");
  if (st != TRELLIS_OK)
    return st;
  if (dense == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "dense_weight: dense is NULL");
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  float *s_in = malloc(k * sizeof *s_in);
  float *s_out = malloc(n * sizeof *s_out);
  if (s_in == NULL || s_out == NULL) {
    free(s_in);
    free(s_out);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "dense_weight: cannot allocate %zu bytes for the "
                    "scales",
                    (k + n) * sizeof *s_out);
  }
  st = trl_weight_scales(w, s_in, s_out);
  if (st == TRELLIS_OK && !decode_into(w, dense))
    st = trl_sqg_tables_status();
  if (st != TRELLIS_OK) {
    free(s_in);
    free(s_out);
    return st;
  }

  for (size_t row0 = 0; row0 < k; row0 += TRELLIS_HBLOCK) {
    float *block = dense + row0 * n;
    for (size_t j0 = 0; j0 < n; j0 += LEFT_CHUNK) {
      const size_t width = n - j0 < LEFT_CHUNK ? n - j0 : LEFT_CHUNK;
      trl_h128_f32_columns(block + j0, n, width);
    }
  }
  for (size_t i = 0; i < k; i++) {
    float *row = dense + i * n;
    for (size_t j = 0; j < n; j++)
      row[j] *= s_in[i];
    for (size_t j0 = 0; j0 < n; j0 += TRELLIS_HBLOCK)
      trl_h128_f32(row + j0);
    for (size_t j = 0; j < n; j++)
      row[j] *= s_out[j];
  }
  free(s_in);
  free(s_out);
  return TRELLIS_OK;
}
