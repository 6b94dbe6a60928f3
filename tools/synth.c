/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic data (see synth.h). */
#include "tools/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void synth_seed(synth_rng *r, uint64_t seed) { r->state = seed; }

uint64_t synth_next(synth_rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void synth_skip(synth_rng *r, uint64_t draws) {
  r->state += draws * 0x9E3779B97F4A7C15ull;
}

double synth_unit(synth_rng *r) {
  return (double)(synth_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

float synth_uniform(synth_rng *r, float lo, float hi) {
  return (float)(lo + (hi - lo) * synth_unit(r));
}

double synth_normal(synth_rng *r) {
  /* u1 in (0, 1] keeps the log finite. */
  double u1 = 1.0 - synth_unit(r);
  double u2 = synth_unit(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void synth_words(synth_rng *r, int16_t *dst, size_t count) {
  for (size_t i = 0; i < count; i += 4) { /* four words per draw */
    uint64_t v = synth_next(r);
    for (size_t j = 0; j < 4 && i + j < count; j++)
      dst[i + j] = (int16_t)(uint16_t)(v >> (16 * j));
  }
}

void synth_scales(synth_rng *r, uint16_t *dst, size_t count, double scale) {
  for (size_t i = 0; i < count; i++) {
    double mag = fabs(1.0 + 0.1 * synth_normal(r)) * scale;
    double sign = (synth_next(r) & 1) ? -1.0 : 1.0;
    dst[i] = trellis_f32_to_f16((float)(sign * mag));
  }
}

static void store(void *dst, trellis_dtype dt, size_t i, float v) {
  if (dt == TRELLIS_F16)
    ((uint16_t *)dst)[i] = trellis_f32_to_f16(v);
  else if (dt == TRELLIS_BF16)
    ((uint16_t *)dst)[i] = trellis_f32_to_bf16(v);
  else
    ((float *)dst)[i] = v;
}

void synth_fill_uniform(synth_rng *r, void *dst, trellis_dtype dt, size_t count,
                        float lo, float hi) {
  for (size_t i = 0; i < count; i++)
    store(dst, dt, i, synth_uniform(r, lo, hi));
}

void synth_fill_normal(synth_rng *r, void *dst, trellis_dtype dt,
                       size_t count) {
  for (size_t i = 0; i < count; i++)
    store(dst, dt, i, (float)synth_normal(r));
}

trellis_status synth_layer_init(synth_layer *l, int64_t k, int64_t n, int bits,
                                trellis_codebook cb, unsigned flags,
                                uint64_t seed) {
  memset(l, 0, sizeof *l);
  trellis_weight_init(&l->w);
  l->w.k = k;
  l->w.n = n;
  l->w.bits = bits;
  l->w.half = (flags & SYNTH_HALF) != 0;
  l->w.codebook = cb;
  if (k <= 0 || n <= 0 || bits <= 0) /* validate names the bad field */
    return trellis_weight_validate(&l->w);
  synth_rng r;
  synth_seed(&r, seed);
  /* 16 K words per tile: 16 bits, or 16 bits + 8 at a half rate */
  const size_t words = (size_t)(k / 16) * (size_t)(n / 16) *
                       (16 * (size_t)bits + (l->w.half ? 8u : 0u));
  const int legacy = (flags & SYNTH_LEGACY_SIGNS) != 0;
  l->trellis = malloc(words * sizeof *l->trellis);
  if (legacy) {
    l->su = malloc((size_t)(k / 16) * sizeof *l->su);
    l->sv = malloc((size_t)(n / 16) * sizeof *l->sv);
  } else {
    l->suh = malloc((size_t)k * sizeof *l->suh);
    l->svh = malloc((size_t)n * sizeof *l->svh);
  }
  if (flags & SYNTH_BIAS)
    l->bias = malloc((size_t)n * sizeof *l->bias);
  if (!l->trellis || (legacy ? !l->su || !l->sv : !l->suh || !l->svh) ||
      ((flags & SYNTH_BIAS) && !l->bias)) {
    synth_layer_free(l);
    return TRELLIS_ERR_OUT_OF_MEMORY;
  }
  synth_words(&r, l->trellis, words);
  if (legacy) {
    synth_words(&r, l->su, (size_t)(k / 16));
    synth_words(&r, l->sv, (size_t)(n / 16));
  } else {
    synth_scales(&r, l->suh, (size_t)k, 1.0 / sqrt((double)k));
    synth_scales(&r, l->svh, (size_t)n, 1.0);
  }
  if (l->bias)
    synth_fill_uniform(&r, l->bias, TRELLIS_F16, (size_t)n, -0.5f, 0.5f);
  l->w.trellis = l->trellis;
  l->w.suh = l->suh;
  l->w.svh = l->svh;
  l->w.su = l->su;
  l->w.sv = l->sv;
  l->w.bias = l->bias;
  return trellis_weight_validate(&l->w);
}

void synth_layer_free(synth_layer *l) {
  free(l->trellis);
  free(l->su);
  free(l->sv);
  free(l->suh);
  free(l->svh);
  free(l->bias);
  memset(l, 0, sizeof *l);
}
