/* SPDX-License-Identifier: Apache-2.0 */
/* CPU forward, dense weight and H128: the end-to-end layers of FORMAT.md
 * §10.2, the dense weight of the shipped test vectors to fp32 accuracy
 * (test_vectors.c runs the rest of each case), a bit-exact
 * emulation of the documented numerics for every dtype pair, thread-count
 * independence and argument/workspace errors. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/hadamard.h"
#include "format/weight.h"
#include "core/sha256.h"
#include "tools/synth.h"

/* ------------------------------------------------------------- helpers -- */

/* One stream for the whole program (seeded in main): the tests run in a
 * fixed order, so every run sees the same values. */
static synth_rng rng;

/* Uniform in [-1, 1). */
static float random_unit(void) { return synth_uniform(&rng, -1.0f, 1.0f); }

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  return p;
}

static float round_f16(float v) {
  return trellis_f16_to_f32(trellis_f32_to_f16(v));
}

/* The H128 exactly as the GPU writes it: 32 lanes of 4 elements, a 4-point
 * stage, then xor-shuffle stages with strides 1..16, then * r_scale. */
static void lane_h128(float v[128]) {
  float h[32][4], next[32][4];
  for (int t = 0; t < 32; t++) {
    const float a0 = v[4 * t], a1 = v[4 * t + 1], a2 = v[4 * t + 2],
                a3 = v[4 * t + 3];
    const float s0 = a0 + a1, d0 = a0 - a1, s1 = a2 + a3, d1 = a2 - a3;
    h[t][0] = s0 + s1;
    h[t][1] = d0 + d1;
    h[t][2] = s0 - s1;
    h[t][3] = d0 - d1;
  }
  for (int m = 1; m <= 16; m <<= 1) {
    for (int lane = 0; lane < 32; lane++)
      for (int q = 0; q < 4; q++) {
        const float own = (lane & m) ? -h[lane][q] : h[lane][q];
        next[lane][q] = own + h[lane ^ m][q];
      }
    memcpy(h, next, sizeof h);
  }
  uint32_t scale_bits = 0x3DB504F3u;
  float r_scale;
  memcpy(&r_scale, &scale_bits, sizeof r_scale);
  for (int t = 0; t < 32; t++)
    for (int q = 0; q < 4; q++)
      v[4 * t + q] = h[t][q] * r_scale;
}

static int parity(unsigned v) {
  int p = 0;
  for (; v; v &= v - 1)
    p ^= 1;
  return p;
}

/* out = H128 . in in double, straight from the definition. */
static void exact_h128(const double in[128], double out[128]) {
  for (int i = 0; i < 128; i++) {
    double sum = 0;
    for (int j = 0; j < 128; j++)
      sum += parity((unsigned)(i & j)) ? -in[j] : in[j];
    out[i] = sum / sqrt(128.0);
  }
}

static float load_as_f32(const void *x, trellis_dtype dtype, size_t i) {
  if (dtype == TRELLIS_F16)
    return trellis_f16_to_f32(((const uint16_t *)x)[i]);
  if (dtype == TRELLIS_BF16)
    return trellis_bf16_to_f32(((const uint16_t *)x)[i]);
  return ((const float *)x)[i];
}

static float output_as_f32(const void *y, trellis_dtype dtype, size_t i) {
  return load_as_f32(y, dtype, i);
}

/* x in `dtype`, converted from fp32 values. */
static void *make_input(const float *values, size_t count,
                        trellis_dtype dtype) {
  void *x = checked_malloc(count * trellis_dtype_size(dtype));
  for (size_t i = 0; i < count; i++) {
    if (dtype == TRELLIS_F16)
      ((uint16_t *)x)[i] = trellis_f32_to_f16(values[i]);
    else if (dtype == TRELLIS_BF16)
      ((uint16_t *)x)[i] = trellis_f32_to_bf16(values[i]);
    else
      ((float *)x)[i] = values[i];
  }
  return x;
}

/* Runs the forward with a fresh workspace; returns its status. */
static trellis_status run_forward(const trellis_weight *w, const void *x,
                                  trellis_dtype x_dtype, int64_t m, void *y,
                                  trellis_dtype y_dtype, int threads) {
  const size_t bytes = trellis_cpu_workspace_size(w, m, threads);
  assert_true(bytes > 0);
  void *ws = checked_malloc(bytes);
  trellis_status st =
      trellis_cpu_forward(w, x, x_dtype, m, y, y_dtype, ws, bytes, threads);
  free(ws);
  return st;
}

/* The documented numerics, written out slowly from W_hat: a = fp16(x*s_in),
 * lane H128, fp16; z accumulated in fp32 over k in order; lane H128;
 * * s_out; + bias; one rounding. The forward must match it bit for bit. */
static void emulate_forward(const trellis_weight *w, const void *x,
                            trellis_dtype x_dtype, int64_t m, void *y,
                            trellis_dtype y_dtype) {
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  uint16_t *w_hat = checked_malloc(k * n * sizeof *w_hat);
  float *s_in = checked_malloc(k * sizeof *s_in);
  float *s_out = checked_malloc(n * sizeof *s_out);
  float *a = checked_malloc(k * sizeof *a);
  float *z = checked_malloc(n * sizeof *z);
  assert_int_equal(trellis_decode_weight(w, w_hat), TRELLIS_OK);
  assert_int_equal(trl_weight_scales(w, s_in, s_out), TRELLIS_OK);
  for (int64_t r = 0; r < m; r++) {
    for (size_t i = 0; i < k; i++) {
      const float product =
          load_as_f32(x, x_dtype, (size_t)r * k + i) * s_in[i];
      a[i] = round_f16(product);
    }
    for (size_t b = 0; b < k; b += 128) {
      lane_h128(a + b);
      for (size_t i = b; i < b + 128; i++)
        a[i] = round_f16(a[i]);
    }
    for (size_t c = 0; c < n; c++) {
      float acc = 0;
      for (size_t i = 0; i < k; i++) {
        const float product = a[i] * trellis_f16_to_f32(w_hat[i * n + c]);
        acc = acc + product;
      }
      z[c] = acc;
    }
    for (size_t b = 0; b < n; b += 128)
      lane_h128(z + b);
    for (size_t c = 0; c < n; c++) {
      float v = z[c] * s_out[c];
      if (w->bias)
        v = v + trellis_f16_to_f32(w->bias[c]);
      const size_t at = (size_t)r * n + c;
      if (y_dtype == TRELLIS_F16)
        ((uint16_t *)y)[at] = trellis_f32_to_f16(v);
      else if (y_dtype == TRELLIS_BF16)
        ((uint16_t *)y)[at] = trellis_f32_to_bf16(v);
      else
        ((float *)y)[at] = v;
    }
  }
  free(w_hat);
  free(s_in);
  free(s_out);
  free(a);
  free(z);
}

/* A random layer (payload, suh, svh, optional bias) that owns its memory. */
static void layer_random(synth_layer *l, int64_t k, int64_t n, int bits,
                         trellis_codebook cb, int with_bias) {
  assert_int_equal(synth_layer_init(l, k, n, bits, cb,
                                    with_bias ? SYNTH_BIAS : 0u,
                                    synth_next(&rng)),
                   TRELLIS_OK);
}

static float *random_values(size_t count, float scale) {
  float *v = checked_malloc(count * sizeof *v);
  synth_fill_uniform(&rng, v, TRELLIS_F32, count, -scale, scale);
  return v;
}

/* ------------------------------------------------------------ hadamard -- */

static void test_h128_scale_constant(void **state) {
  (void)state;
  const float r_scale = TRL_H128_SCALE;
  uint32_t bits;
  memcpy(&bits, &r_scale, sizeof bits);
  assert_int_equal(bits, 0x3DB504F3u);
}

/* Equal bits, or both NaN: negating a NaN flips its sign, and compilers
 * may fold -b + a into a - b, so NaN signs are not part of the contract. */
static void assert_same_floats(const float *a, const float *b, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (a[i] != a[i] && b[i] != b[i])
      continue;
    uint32_t ua, ub;
    memcpy(&ua, &a[i], 4);
    memcpy(&ub, &b[i], 4);
    if (ua != ub)
      fail_msg("element %zu: 0x%08x vs 0x%08x", i, ua, ub);
  }
}

static void test_h128_matches_gpu_order(void **state) {
  (void)state;
  float v[128], lanes[128];
  for (int trial = 0; trial < 3000; trial++) {
    for (int i = 0; i < 128; i++) {
      /* Wide dynamic range so that the addition order matters. */
      const int exponent = (int)(synth_next(&rng) % 36) - 20;
      v[i] = ldexpf(random_unit(), exponent);
      if (trial % 3 == 0)
        v[i] = round_f16(v[i]);
    }
    if (trial % 100 == 1) /* infinities and NaN propagate alike */
      v[synth_next(&rng) % 128] = trial % 200 == 1 ? INFINITY : NAN;
    memcpy(lanes, v, sizeof v);
    trl_h128_f32(v);
    lane_h128(lanes);
    assert_same_floats(v, lanes, 128);
  }
}

static void test_h128_columns_identical(void **state) {
  (void)state;
  enum { WIDTH = 37, STRIDE = 41 };
  float *block = random_values(128 * STRIDE, 3.0f);
  float column[128];
  float expected[WIDTH][128];
  for (int j = 0; j < WIDTH; j++) {
    for (int e = 0; e < 128; e++)
      column[e] = block[e * STRIDE + j];
    trl_h128_f32(column);
    memcpy(expected[j], column, sizeof column);
  }
  const float untouched = block[STRIDE - 1];
  trl_h128_f32_columns(block, STRIDE, WIDTH);
  for (int j = 0; j < WIDTH; j++)
    for (int e = 0; e < 128; e++)
      assert_true(block[e * STRIDE + j] == expected[j][e]);
  assert_true(block[STRIDE - 1] == untouched); /* outside the width */
  free(block);
}

static void test_h128_definition(void **state) {
  (void)state;
  float v[128];
  double in[128], out[128];
  for (int i = 0; i < 128; i++) {
    v[i] = random_unit();
    in[i] = v[i];
  }
  trl_h128_f32(v);
  exact_h128(in, out);
  for (int i = 0; i < 128; i++)
    assert_float_equal(v[i], out[i], 1e-5);
  trl_h128_f32(v); /* its own inverse */
  for (int i = 0; i < 128; i++)
    assert_float_equal(v[i], in[i], 1e-5);
}

/* ------------------------------------ end-to-end layers, FORMAT.md §10.2 */

typedef struct spec_case {
  int bits;
  trellis_codebook cb;
  const char *w_hat_sha;
  double y0[6];
  int has_y1;
  double y1[6];
} spec_case;

static const spec_case spec_cases[3] = {
    {3,
     TRELLIS_CB_MUL1,
     "8d69ebaeaac39ebd36801b62318f4d12fa473b1e90954f0ca77609cc7ce3efb7",
     {0.105540, 0.135863, -0.411858, 0.023276, 0.216485, 0.008514},
     1,
     {-0.032107, -0.154627, 0.290873, -0.574249, -0.238346, 0.008959}},
    {2,
     TRELLIS_CB_MCG,
     "6662604e1e5cfd2dd6806981bdde2c42a8e8b6bdf52813c34f3111abf143253f",
     {-0.128693, 0.063294, -0.132312, -0.155418, 0.127771, -0.230809},
     0,
     {0}},
    {4,
     TRELLIS_CB_3INST,
     "b3df2359a5e61ba371dac90fc05ed5e6ce8bca6d7af61a81eca3808c2f16fbbe",
     {-0.091228, -0.250956, -0.534376, 0.529043, -0.169477, 0.049332},
     0,
     {0}},
};

enum { SPEC_K = 256, SPEC_N = 128, SPEC_M = 2 };

typedef struct spec_layer {
  trellis_weight w;
  int16_t trellis[SPEC_K * SPEC_N / 16 * 8];
  uint16_t suh[SPEC_K], svh[SPEC_N], x[SPEC_M * SPEC_K];
} spec_layer;

static void spec_layer_build(spec_layer *l, int bits, trellis_codebook cb) {
  for (unsigned t = 0; t < (unsigned)(SPEC_K * SPEC_N / 16 * bits); t++)
    l->trellis[t] = (int16_t)(uint16_t)((t * 40503u + 12345u) & 0xFFFFu);
  for (int i = 0; i < SPEC_K; i++)
    l->suh[i] = trellis_f32_to_f16((parity((unsigned)i) ? -1.0f : 1.0f) *
                                   (0.5f + (float)(i % 7) / 8.0f));
  for (int j = 0; j < SPEC_N; j++)
    l->svh[j] = trellis_f32_to_f16((j % 3 == 0 ? -1.0f : 1.0f) *
                                   (1.0f + (float)(j % 4) / 4.0f) / 64.0f);
  for (int r = 0; r < SPEC_M; r++)
    for (int i = 0; i < SPEC_K; i++)
      l->x[r * SPEC_K + i] =
          trellis_f32_to_f16((float)(((37 * i + 101 * r) % 29) - 14) / 16.0f);
  trellis_weight_init(&l->w);
  l->w.k = SPEC_K;
  l->w.n = SPEC_N;
  l->w.bits = bits;
  l->w.codebook = cb;
  l->w.trellis = l->trellis;
  l->w.suh = l->suh;
  l->w.svh = l->svh;
}

/* Float64 forward Hblk(Hblk(x * suh) . W_hat) * svh (+ bias). */
static void reference_forward(const trellis_weight *w, const uint16_t *w_hat,
                              const float *x, int64_t m, double *y) {
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  float *s_in = checked_malloc(k * sizeof *s_in);
  float *s_out = checked_malloc(n * sizeof *s_out);
  double *u = checked_malloc(k * sizeof *u);
  double *v = checked_malloc(k * sizeof *v);
  double *z = checked_malloc(n * sizeof *z);
  double *t = checked_malloc(n * sizeof *t);
  assert_int_equal(trl_weight_scales(w, s_in, s_out), TRELLIS_OK);
  for (int64_t r = 0; r < m; r++) {
    for (size_t i = 0; i < k; i++)
      u[i] = (double)x[(size_t)r * k + i] * s_in[i];
    for (size_t b = 0; b < k; b += 128)
      exact_h128(u + b, v + b);
    for (size_t c = 0; c < n; c++) {
      double sum = 0;
      for (size_t i = 0; i < k; i++)
        sum += v[i] * trellis_f16_to_f32(w_hat[i * n + c]);
      z[c] = sum;
    }
    for (size_t b = 0; b < n; b += 128)
      exact_h128(z + b, t + b);
    for (size_t c = 0; c < n; c++)
      y[(size_t)r * n + c] =
          t[c] * s_out[c] + (w->bias ? trellis_f16_to_f32(w->bias[c]) : 0.0);
  }
  free(s_in);
  free(s_out);
  free(u);
  free(v);
  free(z);
  free(t);
}

static double max_abs(const double *v, size_t count) {
  double best = 0;
  for (size_t i = 0; i < count; i++)
    best = fabs(v[i]) > best ? fabs(v[i]) : best;
  return best;
}

static void test_spec_layers(void **state) {
  (void)state;
  for (int c = 0; c < 3; c++) {
    const spec_case *sc = &spec_cases[c];
    spec_layer l;
    spec_layer_build(&l, sc->bits, sc->cb);
    static uint16_t w_hat[SPEC_K * SPEC_N];
    assert_int_equal(trellis_decode_weight(&l.w, w_hat), TRELLIS_OK);
    char hex[65];
    tu_sha256_u16_hex(w_hat, SPEC_K * SPEC_N, hex);
    assert_string_equal(hex, sc->w_hat_sha);
    if (c == 0)
      assert_int_equal((uint16_t)l.trellis[0], 0x3039);

    float x_f32[SPEC_M * SPEC_K];
    for (int i = 0; i < SPEC_M * SPEC_K; i++)
      x_f32[i] = trellis_f16_to_f32(l.x[i]);
    double ref[SPEC_M * SPEC_N];
    reference_forward(&l.w, w_hat, x_f32, SPEC_M, ref);
    /* Our float64 reference reproduces FORMAT.md §10.2's values. */
    for (int j = 0; j < 6; j++) {
      assert_float_equal(ref[j], sc->y0[j], 1e-6);
      if (sc->has_y1)
        assert_float_equal(ref[SPEC_N + j], sc->y1[j], 1e-6);
    }

    float y[SPEC_M * SPEC_N];
    assert_int_equal(
        run_forward(&l.w, l.x, TRELLIS_F16, SPEC_M, y, TRELLIS_F32, 2),
        TRELLIS_OK);
    const double tolerance = 2e-3 * max_abs(ref, SPEC_M * SPEC_N);
    for (int j = 0; j < 6; j++) {
      assert_float_equal(y[j], sc->y0[j], tolerance);
      if (sc->has_y1)
        assert_float_equal(y[SPEC_N + j], sc->y1[j], tolerance);
    }
    /* The whole output, at the accuracy the GPU reaches (<= 4e-4). */
    for (int i = 0; i < SPEC_M * SPEC_N; i++)
      assert_float_equal(y[i], ref[i], 4e-4 * max_abs(ref, SPEC_M * SPEC_N));
  }
}

/* ---------------------------------------------------- dense consistency -- */

static void test_dense_matches_forward(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 384, 256, 5, TRELLIS_CB_MCG, 1);
  const int64_t m = 3;
  const size_t k = 384, n = 256;
  float *dense = checked_malloc(k * n * sizeof *dense);
  assert_int_equal(trellis_dense_weight(&l.w, dense), TRELLIS_OK);
  uint16_t *w_hat = checked_malloc(k * n * sizeof *w_hat);
  assert_int_equal(trellis_decode_weight(&l.w, w_hat), TRELLIS_OK);

  float *x_values = random_values((size_t)m * k, 2.0f);
  uint16_t *x = make_input(x_values, (size_t)m * k, TRELLIS_F16);
  float *x_f16 = checked_malloc((size_t)m * k * sizeof *x_f16);
  for (size_t i = 0; i < (size_t)m * k; i++)
    x_f16[i] = trellis_f16_to_f32(x[i]);

  double *ref = checked_malloc((size_t)m * n * sizeof *ref);
  reference_forward(&l.w, w_hat, x_f16, m, ref);
  const double y_max = max_abs(ref, (size_t)m * n);
  float *y = checked_malloc((size_t)m * n * sizeof *y);
  assert_int_equal(run_forward(&l.w, x, TRELLIS_F16, m, y, TRELLIS_F32, 2),
                   TRELLIS_OK);
  for (int64_t r = 0; r < m; r++)
    for (size_t c = 0; c < n; c++) {
      double via_dense = trellis_f16_to_f32(l.bias[c]);
      for (size_t i = 0; i < k; i++)
        via_dense += (double)x_f16[(size_t)r * k + i] * dense[i * n + c];
      /* dense is x . W exactly up to fp32 rounding of W */
      assert_float_equal(via_dense, ref[(size_t)r * n + c], 1e-5 * y_max);
      assert_float_equal(y[(size_t)r * n + c], via_dense, 2e-3 * y_max);
    }
  free(dense);
  free(w_hat);
  free(x_values);
  free(x);
  free(x_f16);
  free(ref);
  free(y);
  synth_layer_free(&l);
}

/* -------------------------------------------- bit-exact numerics, dtypes */

static void test_every_dtype_pair_bit_exact(void **state) {
  (void)state;
  static const trellis_dtype dtypes[3] = {TRELLIS_F16, TRELLIS_BF16,
                                          TRELLIS_F32};
  for (int with_bias = 0; with_bias < 2; with_bias++) {
    synth_layer l;
    layer_random(&l, 256, 384, 3 + with_bias, TRELLIS_CB_MUL1, with_bias);
    const int64_t m = 3;
    const size_t mk = (size_t)m * 256, mn = (size_t)m * 384;
    float *x_values = random_values(mk, 3.0f);
    for (int xi = 0; xi < 3; xi++) {
      void *x = make_input(x_values, mk, dtypes[xi]);
      float *y_f32 = checked_malloc(mn * sizeof *y_f32);
      assert_int_equal(
          run_forward(&l.w, x, dtypes[xi], m, y_f32, TRELLIS_F32, 2),
          TRELLIS_OK);
      for (int yi = 0; yi < 3; yi++) {
        void *y = checked_malloc(mn * 4);
        void *expected = checked_malloc(mn * 4);
        assert_int_equal(run_forward(&l.w, x, dtypes[xi], m, y, dtypes[yi], 2),
                         TRELLIS_OK);
        emulate_forward(&l.w, x, dtypes[xi], m, expected, dtypes[yi]);
        assert_memory_equal(y, expected, mn * trellis_dtype_size(dtypes[yi]));
        /* fp16/bf16 outputs are the fp32 output rounded once. */
        for (size_t i = 0; i < mn; i++) {
          if (dtypes[yi] == TRELLIS_F16)
            assert_int_equal(((uint16_t *)y)[i], trellis_f32_to_f16(y_f32[i]));
          else if (dtypes[yi] == TRELLIS_BF16)
            assert_int_equal(((uint16_t *)y)[i], trellis_f32_to_bf16(y_f32[i]));
          else
            assert_true(output_as_f32(y, dtypes[yi], i) == y_f32[i]);
        }
        free(y);
        free(expected);
      }
      free(x);
      free(y_f32);
    }
    free(x_values);
    synth_layer_free(&l);
  }
}

/* Inputs that are exact in every dtype give identical outputs. */
static void test_input_dtypes_agree_on_exact_values(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 256, 128, 6, TRELLIS_CB_3INST, 0);
  const int64_t m = 2;
  float values[2 * 256];
  for (int i = 0; i < 2 * 256; i++)
    values[i] = (float)((int)(synth_next(&rng) % 61) - 30) / 16.0f;
  float y[3][2 * 128];
  static const trellis_dtype dtypes[3] = {TRELLIS_F16, TRELLIS_BF16,
                                          TRELLIS_F32};
  for (int d = 0; d < 3; d++) {
    void *x = make_input(values, 2 * 256, dtypes[d]);
    assert_int_equal(run_forward(&l.w, x, dtypes[d], m, y[d], TRELLIS_F32, 1),
                     TRELLIS_OK);
    free(x);
  }
  assert_memory_equal(y[0], y[1], sizeof y[0]);
  assert_memory_equal(y[0], y[2], sizeof y[0]);
  synth_layer_free(&l);
}

static void test_bias_and_legacy_signs(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 256, 256, 4, TRELLIS_CB_MCG, 1);
  /* +-1 scales, once as fp16 vectors and once as legacy bits. */
  l.su = checked_malloc(16 * sizeof *l.su);
  l.sv = checked_malloc(16 * sizeof *l.sv);
  synth_words(&rng, l.su, 16);
  synth_words(&rng, l.sv, 16);
  assert_int_equal(trellis_expand_signs(l.su, 256, l.suh), TRELLIS_OK);
  assert_int_equal(trellis_expand_signs(l.sv, 256, l.svh), TRELLIS_OK);
  const int64_t m = 4;
  float *x_values = random_values((size_t)m * 256, 1.0f);
  uint16_t *x = make_input(x_values, (size_t)m * 256, TRELLIS_F16);
  float y_scaled[4 * 256], y_legacy[4 * 256], y_no_bias[4 * 256];
  assert_int_equal(
      run_forward(&l.w, x, TRELLIS_F16, m, y_scaled, TRELLIS_F32, 2),
      TRELLIS_OK);
  trellis_weight legacy = l.w;
  legacy.suh = NULL;
  legacy.svh = NULL;
  legacy.su = l.su;
  legacy.sv = l.sv;
  assert_int_equal(
      run_forward(&legacy, x, TRELLIS_F16, m, y_legacy, TRELLIS_F32, 2),
      TRELLIS_OK);
  assert_memory_equal(y_scaled, y_legacy, sizeof y_scaled);

  trellis_weight no_bias = l.w;
  no_bias.bias = NULL;
  assert_int_equal(
      run_forward(&no_bias, x, TRELLIS_F16, m, y_no_bias, TRELLIS_F32, 2),
      TRELLIS_OK);
  for (int i = 0; i < 4 * 256; i++) {
    const float with_bias = y_no_bias[i] + trellis_f16_to_f32(l.bias[i % 256]);
    assert_true(y_scaled[i] == with_bias);
  }
  free(x_values);
  free(x);
  synth_layer_free(&l);
}

/* ------------------------------------------------------------- threads -- */

static void test_thread_count_independent(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 512, 1024, 2, TRELLIS_CB_3INST, 1);
  const int64_t m = 5;
  const size_t mn = (size_t)m * 1024;
  float *x_values = random_values((size_t)m * 512, 4.0f);
  uint16_t *x = make_input(x_values, (size_t)m * 512, TRELLIS_BF16);
  float *first = checked_malloc(mn * sizeof *first);
  float *other = checked_malloc(mn * sizeof *other);
  assert_int_equal(run_forward(&l.w, x, TRELLIS_BF16, m, first, TRELLIS_F32, 1),
                   TRELLIS_OK);
  static const int counts[] = {2, 3, 7, 0, 64, 1000};
  for (size_t t = 0; t < sizeof counts / sizeof *counts; t++) {
    memset(other, 0, mn * sizeof *other);
    assert_int_equal(
        run_forward(&l.w, x, TRELLIS_BF16, m, other, TRELLIS_F32, counts[t]),
        TRELLIS_OK);
    assert_memory_equal(first, other, mn * sizeof *first);
  }
  free(x_values);
  free(x);
  free(first);
  free(other);
  synth_layer_free(&l);
}

/* A 4096 x 4096 layer on 1 and 2 threads: identical, and decoded tile by
 * tile fast enough for the test budget. */
static void test_large_layer(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 4096, 4096, 4, TRELLIS_CB_MCG, 0);
  const int64_t m = 4;
  float *x_values = random_values((size_t)m * 4096, 1.0f);
  uint16_t *x = make_input(x_values, (size_t)m * 4096, TRELLIS_F16);
  uint16_t *y1 = checked_malloc((size_t)m * 4096 * 2);
  uint16_t *y2 = checked_malloc((size_t)m * 4096 * 2);
  assert_int_equal(run_forward(&l.w, x, TRELLIS_F16, m, y1, TRELLIS_F16, 1),
                   TRELLIS_OK);
  assert_int_equal(run_forward(&l.w, x, TRELLIS_F16, m, y2, TRELLIS_F16, 2),
                   TRELLIS_OK);
  assert_memory_equal(y1, y2, (size_t)m * 4096 * 2);
  int finite = 1;
  for (size_t i = 0; i < (size_t)m * 4096; i++)
    finite &= (y1[i] & 0x7C00) != 0x7C00;
  assert_true(finite);
  free(x_values);
  free(x);
  free(y1);
  free(y2);
  synth_layer_free(&l);
}

/* -------------------------------------------------- errors and workspace */

static void test_workspace_errors(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 256, 128, 3, TRELLIS_CB_MCG, 0);
  const int64_t m = 2;
  float *x_values = random_values((size_t)m * 256, 1.0f);
  uint16_t *x = make_input(x_values, (size_t)m * 256, TRELLIS_F16);
  float y[2 * 128], y_offset[2 * 128];
  const size_t bytes = trellis_cpu_workspace_size(&l.w, m, 2);
  /* rotated input and z in fp32 at least */
  assert_true(bytes >= (size_t)m * (256 + 128) * sizeof(float));
  assert_int_equal(trellis_cpu_workspace_size(&l.w, m, 1), bytes);
  assert_int_equal(trellis_cpu_workspace_size(&l.w, 0, 1), 0);
  assert_int_equal(trellis_cpu_workspace_size(NULL, m, 1), 0);
  char *ws = checked_malloc(bytes + 8);

  trellis_clear_error();
  assert_int_equal(trellis_cpu_forward(&l.w, x, TRELLIS_F16, m, y, TRELLIS_F32,
                                       ws, bytes - 1, 2),
                   TRELLIS_ERR_WORKSPACE);
  char needed[64], given[64];
  snprintf(needed, sizeof needed, "%zu", bytes);
  snprintf(given, sizeof given, "got %zu", bytes - 1);
  assert_non_null(strstr(trellis_last_error(), needed));
  assert_non_null(strstr(trellis_last_error(), given));
  assert_int_equal(trellis_cpu_forward(&l.w, x, TRELLIS_F16, m, y, TRELLIS_F32,
                                       NULL, bytes, 2),
                   TRELLIS_ERR_WORKSPACE);
  assert_int_equal(
      trellis_cpu_forward(&l.w, x, TRELLIS_F16, m, y, TRELLIS_F32, ws, 0, 2),
      TRELLIS_ERR_WORKSPACE);

  /* Any alignment of the caller's buffer gives the same result. */
  assert_int_equal(trellis_cpu_forward(&l.w, x, TRELLIS_F16, m, y, TRELLIS_F32,
                                       ws, bytes, 2),
                   TRELLIS_OK);
  for (int shift = 1; shift < 8; shift++) {
    assert_int_equal(trellis_cpu_forward(&l.w, x, TRELLIS_F16, m, y_offset,
                                         TRELLIS_F32, ws + shift, bytes, 2),
                     TRELLIS_OK);
    assert_memory_equal(y, y_offset, sizeof y);
  }
  free(ws);
  free(x_values);
  free(x);
  synth_layer_free(&l);
}

static void test_argument_errors(void **state) {
  (void)state;
  synth_layer l;
  layer_random(&l, 128, 128, 2, TRELLIS_CB_MUL1, 0);
  uint16_t x[128], y[128];
  memset(x, 0, sizeof x);
  const size_t bytes = trellis_cpu_workspace_size(&l.w, 1, 1);
  void *ws = checked_malloc(bytes);
#define FORWARD(w, xp, xd, m, yp, yd, threads)                                 \
  trellis_cpu_forward(w, xp, xd, m, yp, yd, ws, bytes, threads)
  assert_int_equal(FORWARD(&l.w, NULL, TRELLIS_F16, 1, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "x is NULL"));
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, 1, NULL, TRELLIS_F16, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "y is NULL"));
  assert_int_equal(FORWARD(&l.w, x, (trellis_dtype)3, 1, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "x_dtype"));
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, 1, y, (trellis_dtype)-1, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "y_dtype"));
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, 0, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_SHAPE);
  assert_non_null(strstr(trellis_last_error(), "got 0"));
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, -5, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_SHAPE);
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, 1, y, TRELLIS_F16, -1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "threads"));
  assert_int_equal(FORWARD(NULL, x, TRELLIS_F16, 1, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_weight bad = l.w;
  bad.n = 100;
  assert_int_equal(FORWARD(&bad, x, TRELLIS_F16, 1, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_SHAPE);
  assert_non_null(strstr(trellis_last_error(), "weight.n"));
  bad = l.w;
  bad.su = (const int16_t *)x;
  assert_int_equal(FORWARD(&bad, x, TRELLIS_F16, 1, y, TRELLIS_F16, 1),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_int_equal(FORWARD(&l.w, x, TRELLIS_F16, 1, y, TRELLIS_F16, 1),
                   TRELLIS_OK);
#undef FORWARD
  free(ws);
  synth_layer_free(&l);
}

/* ------------------------------------------------ shipped test vectors -- */

/* test_vectors.c runs every case through the loader, decode, dense weight
 * and forward; this adds what it leaves out: the manifest holds at least 25
 * cases, each layer validates, and the dense weight matches w_dense to fp32
 * accuracy (max error <= 1e-5 of max |w_dense|, not only the 2e-3 of a
 * forward). */
static void test_shipped_vectors_dense_exact(void **state) {
  (void)state;
  tv_case *cases = NULL;
  const size_t count = tv_load_manifest(&cases);
  assert_true(count >= 25);
  for (size_t c = 0; c < count; c++) {
    tv_loaded t;
    tv_open(&cases[c], &t);
    const trellis_weight *w = &t.layer.weight;
    assert_int_equal(trellis_weight_validate(w), TRELLIS_OK);
    const size_t kn = (size_t)w->k * (size_t)w->n;
    assert_int_equal(t.w_dense.nbytes, kn * 4);
    float *ref = checked_malloc(kn * 4); /* mapped data need not be aligned */
    memcpy(ref, t.w_dense.data, kn * 4);
    float *dense = checked_malloc(kn * 4);
    assert_int_equal(trellis_dense_weight(w, dense), TRELLIS_OK);
    float dense_max = 0, dense_err = 0;
    for (size_t i = 0; i < kn; i++) {
      dense_max = fmaxf(dense_max, fabsf(ref[i]));
      dense_err = fmaxf(dense_err, fabsf(dense[i] - ref[i]));
    }
    if (!(dense_err <= 1e-5f * dense_max))
      fail_msg("%s: dense max error %g of max %g", cases[c].name, dense_err,
               dense_max);
    free(ref);
    free(dense);
    tv_close(&t);
  }
  free(cases);
}

int main(void) {
  synth_seed(&rng, 0x2545F491u);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_h128_scale_constant),
      cmocka_unit_test(test_h128_matches_gpu_order),
      cmocka_unit_test(test_h128_columns_identical),
      cmocka_unit_test(test_h128_definition),
      cmocka_unit_test(test_spec_layers),
      cmocka_unit_test(test_dense_matches_forward),
      cmocka_unit_test(test_every_dtype_pair_bit_exact),
      cmocka_unit_test(test_input_dtypes_agree_on_exact_values),
      cmocka_unit_test(test_bias_and_legacy_signs),
      cmocka_unit_test(test_thread_count_independent),
      cmocka_unit_test(test_large_layer),
      cmocka_unit_test(test_workspace_errors),
      cmocka_unit_test(test_argument_errors),
      cmocka_unit_test(test_shipped_vectors_dense_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
