/* SPDX-License-Identifier: Apache-2.0 */
/* Overflow-checked size arithmetic, the one copy every module uses. Each
 * helper returns 1 and stores the result, or returns 0 (leaving the output
 * untouched) when the result does not fit in size_t. Header-only so that
 * CUDA translation units can use it too. */
#ifndef TRL_CORE_SIZE_H
#define TRL_CORE_SIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *out = a * b */
static inline int trl_mul_size(size_t a, size_t b, size_t *out) {
  if (a != 0 && b > SIZE_MAX / a)
    return 0;
  *out = a * b;
  return 1;
}

/* *out = a + b */
static inline int trl_add_size(size_t a, size_t b, size_t *out) {
  if (b > SIZE_MAX - a)
    return 0;
  *out = a + b;
  return 1;
}

/* *out = a * b * c */
static inline int trl_mul3_size(size_t a, size_t b, size_t c, size_t *out) {
  size_t ab;
  return trl_mul_size(a, b, &ab) && trl_mul_size(ab, c, out);
}

/* *out = v rounded up to a multiple of `align` (align > 0). */
static inline int trl_align_size(size_t v, size_t align, size_t *out) {
  if (v > SIZE_MAX - (align - 1))
    return 0;
  *out = (v + align - 1) / align * align;
  return 1;
}

/* Places a region of `bytes` at the first multiple of `align` at or after
 * the running offset *at: stores its offset in *off and moves *at to its
 * end. Buffers made of several regions are laid out with one call each. */
static inline int trl_carve_size(size_t *at, size_t bytes, size_t align,
                                 size_t *off) {
  size_t start, end;
  if (!trl_align_size(*at, align, &start) || !trl_add_size(start, bytes, &end))
    return 0;
  *off = start;
  *at = end;
  return 1;
}

#ifdef __cplusplus
}
#endif

#endif
