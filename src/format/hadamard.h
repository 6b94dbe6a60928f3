/* SPDX-License-Identifier: Apache-2.0 */
/* CPU block Hadamard (H128), bit-identical to the GPU butterfly order. */
#ifndef TRL_FORMAT_HADAMARD_H
#define TRL_FORMAT_HADAMARD_H

#include "format/constants.h" /* TRL_H128_SCALE */

#include <stddef.h>

/*
 * In place: v = H128 . v * r_scale, all in fp32, in exactly the GPU order
 * (FORMAT.md §5.2): lane t holds v[4t..4t+3]; 4-point stage
 * s0=a0+a1, d0=a0-a1, s1=a2+a3, d1=a2-a3, h=(s0+s1, d0+d1, s0-s1, d0-d1);
 * then for stride m = 1, 2, 4, 8, 16:
 *   h_lane = (lane & m ? -h_lane : h_lane) + h_(lane ^ m);
 * then h * r_scale. Since -b + a == a - b exactly in IEEE arithmetic, each
 * stage is an in-place radix-2 butterfly (lo, hi) -> (lo + hi, lo - hi) over
 * element strides 1, 2, 4, ..., 64.
 */
void trl_h128_f32(float v[128]);

/*
 * The same transform applied independently to `width` interleaved vectors:
 * element e of vector j is base[e * stride + j] (stride >= width). Every
 * vector gets exactly the operations trl_h128_f32 would apply to it, so
 * the results are bit-identical; this form is cache-friendly for rotating
 * the rows of a matrix block (H128 from the left).
 */
void trl_h128_f32_columns(float *base, size_t stride, size_t width);

#endif
