/* SPDX-License-Identifier: Apache-2.0 */
/* Internal helpers around trellis_weight. */
#ifndef TRL_FORMAT_WEIGHT_H
#define TRL_FORMAT_WEIGHT_H

#include "format/codebooks.h"
#include "trellis.h"

/* A caller's weight (any accepted struct_size) as a full-size copy: the
 * fields past its struct_size read as zero, i.e. a uniform layer. Validates
 * first; every internal user of a public weight works on such a copy. */
trellis_status trl_weight_load(const trellis_weight *w, trellis_weight *full);

/* TRELLIS_OK when `w` (a full-size copy) has its payload in `layout`, else
 * TRELLIS_ERR_LAYOUT naming `who` and both layouts. */
trellis_status trl_weight_require_layout(const trellis_weight *w,
                                         trellis_layout layout,
                                         const char *who);
/* TRELLIS_OK when the k-major layout can hold `w`: a uniform layer of an
 * EXL3 codebook; else TRELLIS_ERR_UNSUPPORTED naming `who`. */
trellis_status trl_weight_kmajor_supported(const trellis_weight *w,
                                           const char *who);
/* "checkpoint", "lanes", "k-major" or "invalid". */
const char *trl_layout_name(trellis_layout layout);

/* Input and output scales as fp32: suh/svh converted, or legacy su/sv bits
 * expanded to +-1. Validates `w` first; a pair's scales must be finite. */
trellis_status trl_weight_scales(const trellis_weight *w, float *s_in /* [k] */,
                                 float *s_out /* [n] */);

/* Index of the first of `count` fp16 values at `bytes` (any alignment)
 * that is NaN or infinite; `count` when every value is finite. */
size_t trl_f16_first_nonfinite(const void *bytes, size_t count);

/* One ordinary tile array of a weight: a uniform layer is one record, a pair
 * two (see format/pair.h). */
typedef struct trl_record {
  const int16_t *trellis; /* [k/16][n/16][16*K] */
  int bits;
  int half;         /* K = bits + half/2 */
  int64_t k, n;     /* the record's own shape */
  int64_t kt0, nt0; /* its first tile row and column in W_hat */
} trl_record;

/* The record's rate in half-bits (format/codebooks.h). */
static inline int trl_record_rate(const trl_record *r) {
  return trl_rate_h(r->bits, r->half);
}

/* The records of a full-size, valid weight; returns their count (1 or 2). */
int trl_weight_records(const trellis_weight *w, trl_record rec[2]);

/* Which record holds tile (kt, nt) of W_hat. */
static inline int trl_weight_record_of(const trellis_weight *w, int64_t kt,
                                       int64_t nt) {
  if (w->pair == TRELLIS_PAIR_NONE)
    return 0;
  return w->rate_axis == TRELLIS_RATE_AXIS_N ? nt >= 8 : kt >= 8;
}

/* The words of tile (kt, nt) of W_hat, which lies in record `r`. */
static inline const int16_t *trl_record_tile(const trl_record *r, int64_t kt,
                                             int64_t nt) {
  return r->trellis +
         ((size_t)(kt - r->kt0) * (size_t)(r->n / 16) + (size_t)(nt - r->nt0)) *
             (size_t)trl_rate_tile_words(trl_record_rate(r));
}

#endif
