/* Internal helpers around trellis_weight. */
#ifndef TRELLIS_FORMAT_WEIGHT_H
#define TRELLIS_FORMAT_WEIGHT_H

#include "trellis.h"

/* Input and output scales as fp32: suh/svh converted, or legacy su/sv bits
 * expanded to +-1. Validates `w` first. */
trellis_status trellis_weight_scales(const trellis_weight *w,
                                     float *s_in /* [k] */,
                                     float *s_out /* [n] */);

/* Index of the first of `count` fp16 values at `bytes` (any alignment)
 * that is NaN or infinite; `count` when every value is finite. */
size_t trellis_f16_first_nonfinite(const void *bytes, size_t count);

/* int16 offset of tile (kt, nt) inside w->trellis. */
static inline size_t trellis_weight_tile_offset(const trellis_weight *w,
                                                int64_t kt, int64_t nt) {
  return ((size_t)kt * (size_t)(w->n / 16) + (size_t)nt) * 16u *
         (size_t)w->bits;
}

#endif
