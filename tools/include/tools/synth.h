/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic data for the demo, the benchmark and the tests: one RNG,
 * random EXL3 layers shaped like a real checkpoint's, random inputs.
 *
 * The RNG is splitmix64: tiny, fast and the same sequence on every
 * platform, so a seed names the same layer everywhere. */
#ifndef TOOLS_SYNTH_H
#define TOOLS_SYNTH_H

#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

typedef struct synth_rng {
  uint64_t state;
} synth_rng;

void synth_seed(synth_rng *r, uint64_t seed);
uint64_t synth_next(synth_rng *r);
/* Advances the RNG past `draws` calls of synth_next in O(1) (splitmix64's
 * state is a counter): draw d of a fresh synth_seed(seed) is a function of
 * seed + (d + 1) x the increment alone, which lets a GPU kernel generate
 * the same words (synth_words) as the host. */
void synth_skip(synth_rng *r, uint64_t draws);
/* Uniform in [0, 1) with 53 random bits. */
double synth_unit(synth_rng *r);
/* Uniform in [lo, hi). */
float synth_uniform(synth_rng *r, float lo, float hi);
/* N(0, 1) (Box-Muller). */
double synth_normal(synth_rng *r);

/* `count` random 16-bit words: trellis payloads (any K-bit symbol stream
 * decodes, so any words are a valid payload) and legacy sign words. */
void synth_words(synth_rng *r, int16_t *dst, size_t count);
/* Scales as real suh/svh look: random signs, magnitudes scale * |N(1, 0.1)|
 * (never near zero), as fp16. */
void synth_scales(synth_rng *r, uint16_t *dst, size_t count, double scale);
/* `count` values uniform in [lo, hi), or ~ N(0, 1), stored as dtype `dt`. */
void synth_fill_uniform(synth_rng *r, void *dst, trellis_dtype dt, size_t count,
                        float lo, float hi);
void synth_fill_normal(synth_rng *r, void *dst, trellis_dtype dt, size_t count);

/* Flags of synth_layer_init. */
#define SYNTH_BIAS 1u         /* an fp16 bias uniform in [-0.5, 0.5) */
#define SYNTH_LEGACY_SIGNS 2u /* packed su/sv signs instead of suh/svh */
#define SYNTH_HALF 4u         /* K = bits + 1/2 (a half-integer rate) */

/* A random layer and the host arrays it owns (unused ones NULL). */
typedef struct synth_layer {
  trellis_weight w; /* points into the arrays below */
  int16_t *trellis, *su, *sv;
  uint16_t *suh, *svh, *bias;
} synth_layer;

/* A random k x n layer of `bits` bits with codebook `cb`, from `seed`:
 * random trellis words; suh = synth_scales(1 / sqrt(k)) and
 * svh = synth_scales(1), so y = O(1) for x = O(1) as in a real model (with
 * SYNTH_LEGACY_SIGNS random packed signs instead, and y = O(sqrt(k))).
 * Returns TRELLIS_ERR_OUT_OF_MEMORY when an allocation fails, else what
 * trellis_weight_validate says about the layer; free it with
 * synth_layer_free() whatever the result. */
trellis_status synth_layer_init(synth_layer *l, int64_t k, int64_t n, int bits,
                                trellis_codebook cb, unsigned flags,
                                uint64_t seed);
/* Frees every array of the layer (also ones a caller attached) and zeroes
 * it. */
void synth_layer_free(synth_layer *l);

#endif
