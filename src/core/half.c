/* SPDX-License-Identifier: Apache-2.0 */
/* fp16 / bf16 <-> fp32 conversions, round-to-nearest-even, bit-exact with
 * the GPU's __float2half_rn / __float2bfloat16_rn. */
#include "internal.h"

#include <string.h>

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t trellis_f32_to_f16(float value) {
  uint32_t x = f32_bits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xFFu;
  uint32_t man = x & 0x7FFFFFu;

  if (exp == 0xFFu) /* inf or NaN (keep NaN quiet and non-zero) */
    return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0u));

  int32_t e = (int32_t)exp - 127 + 15;
  if (e >= 31) /* overflow */
    return (uint16_t)(sign | 0x7C00u);
  if (e <= 0) { /* subnormal or zero in fp16 */
    if (e < -10)
      return (uint16_t)sign;
    man |= 0x800000u; /* implicit one */
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1u);
    if (rem > mid || (rem == mid && (half & 1u)))
      half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
    half++; /* may carry into the exponent, and up to inf: both correct */
  return (uint16_t)(sign | half);
}

float trellis_f16_to_f32(uint16_t bits) {
  uint32_t sign = (uint32_t)(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1Fu;
  uint32_t man = bits & 0x3FFu;
  if (exp == 0x1Fu)
    return bits_f32(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    if (man == 0)
      return bits_f32(sign);
    /* subnormal: value = man * 2^-24 */
    float v = (float)man * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

uint16_t trellis_f32_to_bf16(float value) {
  uint32_t x = f32_bits(value);
  if ((x & 0x7F800000u) == 0x7F800000u && (x & 0x7FFFFFu))
    return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7FFFu + lsb;
  return (uint16_t)(x >> 16);
}

float trellis_bf16_to_f32(uint16_t bits) {
  return bits_f32((uint32_t)bits << 16);
}

size_t trellis_dtype_size(trellis_dtype dtype) {
  switch (dtype) {
  case TRELLIS_F16:
  case TRELLIS_BF16:
    return 2;
  case TRELLIS_F32:
    return 4;
  }
  return 0;
}

const char *trellis_dtype_name(trellis_dtype dtype) {
  switch (dtype) {
  case TRELLIS_F16:
    return "f16";
  case TRELLIS_BF16:
    return "bf16";
  case TRELLIS_F32:
    return "f32";
  }
  return "invalid";
}
