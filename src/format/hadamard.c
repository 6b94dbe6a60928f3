/* SPDX-License-Identifier: Apache-2.0 */
/* H128 butterflies in the GPU's order; see hadamard.h for why the in-place
 * radix-2 form below is bit-identical to the lane/shuffle form. */
#include "format/hadamard.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

void trl_h128_f32(float v[128]) {
  /* Strides 1 and 2 are the in-lane 4-point stage; 4..64 are the
   * cross-lane shuffle stages m = 1..16. */
  for (int stride = 1; stride < 128; stride <<= 1) {
    for (int base = 0; base < 128; base += 2 * stride) {
      for (int e = base; e < base + stride; e++) {
        const float lo = v[e], hi = v[e + stride];
        v[e] = lo + hi;
        v[e + stride] = lo - hi;
      }
    }
  }
  for (int e = 0; e < 128; e++)
    v[e] *= TRL_H128_SCALE;
}

void trl_h128_f32_columns(float *base, size_t stride, size_t width) {
  for (size_t s = 1; s < 128; s <<= 1) {
    for (size_t group = 0; group < 128; group += 2 * s) {
      for (size_t e = group; e < group + s; e++) {
        float *lo_row = base + e * stride;
        float *hi_row = base + (e + s) * stride;
        for (size_t j = 0; j < width; j++) {
          const float lo = lo_row[j], hi = hi_row[j];
          lo_row[j] = lo + hi;
          hi_row[j] = lo - hi;
        }
      }
    }
  }
  for (size_t e = 0; e < 128; e++) {
    float *row = base + e * stride;
    for (size_t j = 0; j < width; j++)
      row[j] *= TRL_H128_SCALE;
  }
}
