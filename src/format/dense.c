/* Original-basis weight W = diag(s_in) . Hblk . W_hat . Hblk . diag(s_out),
 * in fp32, in the order of exllamav3's get_weight_tensor: left rotation, row
 * scale, right rotation, column scale. */
#include "core/internal.h"
#include "format/codebook.h"
#include "format/hadamard.h"
#include "format/tile.h"
#include "format/weight.h"

#include <stdlib.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Columns rotated together by the left transform: 128 rows x 256 floats
 * = 128 KiB stays in L2. */
#define LEFT_CHUNK 256

static float scale_at(const uint16_t *scaled, const int16_t *legacy,
                      int64_t i) {
  if (scaled != NULL)
    return trellis_f16_to_f32(scaled[i]);
  return (((uint16_t)legacy[i >> 4] >> (i & 15)) & 1u) ? -1.0f : 1.0f;
}

static void decode_into(const trellis_weight *w, float *dense) {
  const float *table = trellis_codebook_table_f32(w->codebook);
  const size_t n = (size_t)w->n;
  float tile_values[256];
  for (int64_t kt = 0; kt < w->k / 16; kt++) {
    for (int64_t nt = 0; nt < w->n / 16; nt++) {
      trellis_tile_decode_f32(w->trellis +
                                  trellis_weight_tile_offset(w, kt, nt),
                              w->bits, table, tile_values);
      float *corner = dense + (size_t)(16 * kt) * n + (size_t)(16 * nt);
      for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
          corner[(size_t)r * n + (size_t)c] = tile_values[16 * r + c];
    }
  }
}

trellis_status trellis_dense_weight(const trellis_weight *w, float *dense) {
  trellis_status st = trellis_weight_validate(w);
  if (st != TRELLIS_OK)
    return st;
  if (dense == NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "dense_weight: dense is NULL");
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  float *s_out = malloc(n * sizeof *s_out);
  if (s_out == NULL)
    return trellis_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                        "dense_weight: cannot allocate %zu bytes for s_out",
                        n * sizeof *s_out);
  for (size_t j = 0; j < n; j++)
    s_out[j] = scale_at(w->svh, w->sv, (int64_t)j);
  decode_into(w, dense);

  for (size_t row0 = 0; row0 < k; row0 += TRELLIS_HBLOCK) {
    float *block = dense + row0 * n;
    for (size_t j0 = 0; j0 < n; j0 += LEFT_CHUNK) {
      const size_t width = n - j0 < LEFT_CHUNK ? n - j0 : LEFT_CHUNK;
      trellis_h128_f32_columns(block + j0, n, width);
    }
  }
  for (size_t i = 0; i < k; i++) {
    float *row = dense + i * n;
    const float s_in = scale_at(w->suh, w->su, (int64_t)i);
    for (size_t j = 0; j < n; j++)
      row[j] *= s_in;
    for (size_t j0 = 0; j0 < n; j0 += TRELLIS_HBLOCK)
      trellis_h128_f32(row + j0);
    for (size_t j = 0; j < n; j++)
      row[j] *= s_out[j];
  }
  free(s_out);
  return TRELLIS_OK;
}
