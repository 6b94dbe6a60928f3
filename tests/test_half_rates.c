/* SPDX-License-Identifier: Apache-2.0 */
/* ExLlamaV3 1.6's half-integer rates K = KA + 1/2 (EXL3-1.6 §1; MUL1, KA
 * 1..3, tiles of 24, 40 and 56 int16): the spec's worked example (§1.4)
 * bit for bit, the tile states against their definition (ring windows
 * [S(i) - 16, S(i)) with S(i) = floor((i + 1)(2 KA + 1) / 2)), the fast
 * decode, the trellis consistency of packed symbol streams, the weight
 * API, and strict checkpoint validation (§1.5). */
#include "testutil.h"

#include "format/codebook.h"
#include "format/tile.h"
#include "tools/synth.h"

#include <stdio.h>
#include <string.h>

#define MAX_HALF_WORDS 56

static synth_rng rng = {0x4A1Fu};

/* Step width of position i at KA: KA, KA + 1 alternating (MASK 0xAAAA). */
static int step(int ka, int i) { return ka + ((0xAAAA >> (i % 16)) & 1); }

/* Window end S(i), summed from the steps (not the closed form). */
static int window_end(int ka, int i) {
  int s = 0;
  for (int j = 0; j <= i; j++)
    s += step(ka, j);
  return s;
}

/* Ring bit p of a tile: bit 31 - p % 32 of w32[p / 32]. */
static unsigned ring_bit(const int16_t *tile, int ring, int p) {
  p = ((p % ring) + ring) % ring;
  const uint32_t w = (uint32_t)(uint16_t)tile[2 * (p / 32)] |
                     (uint32_t)(uint16_t)tile[2 * (p / 32) + 1] << 16;
  return (w >> (31 - p % 32)) & 1u;
}

/* State i from the definition: ring bits [S(i) - 16, S(i)) mod R. */
static uint16_t slow_state(const int16_t *tile, int ka, int i) {
  const int ring = 256 * (2 * ka + 1) / 2, end = window_end(ka, i);
  unsigned s = 0;
  for (int p = end - 16; p < end; p++)
    s = s << 1 | ring_bit(tile, ring, p);
  return (uint16_t)s;
}

/* The encoder of §1.3: symbol i (its low D(i) bits) MSB-first at ring
 * bits [S(i) - D(i), S(i)), words stored little-endian as two int16. */
static void pack(const uint16_t sym[256], int ka, int16_t *tile) {
  uint32_t w32[MAX_HALF_WORDS / 2] = {0};
  for (int i = 0; i < 256; i++) {
    const int d = step(ka, i), end = window_end(ka, i);
    for (int b = 0; b < d; b++) {
      const int p = end - d + b;
      if ((sym[i] >> (d - 1 - b)) & 1u)
        w32[p / 32] |= 1u << (31 - p % 32);
    }
  }
  for (int j = 0; j < 4 * (2 * ka + 1); j++) {
    tile[2 * j] = (int16_t)(uint16_t)(w32[j] & 0xFFFFu);
    tile[2 * j + 1] = (int16_t)(uint16_t)(w32[j] >> 16);
  }
}

/* §1.4 (a): K = 1.5 with sym_i = i mod 2^D(i). */
static void test_worked_example_k1p5(void **state) {
  (void)state;
  uint16_t sym[256];
  for (int i = 0; i < 256; i++)
    sym[i] = (uint16_t)(i % (1 << step(1, i)));
  int16_t tile[24];
  pack(sym, 1, tile);
  static const uint16_t words[8] = {0xCB2C, 0x2CB2, 0x2CB2, 0xB2CB,
                                    0xB2CB, 0xCB2C, 0xCB2C, 0x2CB2};
  for (int j = 0; j < 8; j++)
    assert_int_equal((uint16_t)tile[j], words[j]);
  uint16_t states[256];
  trl_tile_states_rate(tile, 3, states);
  static const uint16_t first[4] = {0x6596, 0x9659, 0x2CB2, 0xB2CB};
  for (int i = 0; i < 16; i++)
    assert_int_equal(states[i], first[i % 4]);
}

/* §1.4 (b): u16[j] = 0x0123 + 0x1111 j, at every half rate. */
static void test_worked_example_pattern(void **state) {
  (void)state;
  static const struct {
    int ka;
    uint16_t s[4], last;
    const char *sha;
  } cases[] = {
      {1,
       {0xF132, 0xC4C8, 0x8991, 0x2644},
       0x7899,
       "475f1851a4d4607aa7ef804216d4ffc6d22eaf97bcae2c36e96af4789990cb88"},
      {2,
       {0x26A4, 0x3522, 0xD489, 0xA448},
       0x89A9,
       "38c8e6df29785d5c42ff32ee468f97c1a7847657d18584256c30efe9e3776516"},
      {3,
       {0xD5C8, 0x5C89, 0xE448, 0x448D},
       0x9AB9,
       "e0a33c50a217b183d62e20f379db0f6f43b300b48dd7ca66850acacb1b849c4b"},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    const int ka = cases[c].ka, words = 16 * ka + 8;
    int16_t tile[MAX_HALF_WORDS];
    for (int j = 0; j < words; j++)
      tile[j] = (int16_t)(uint16_t)(0x0123u + 0x1111u * (unsigned)j);
    uint16_t states[256], w[256];
    trl_tile_states_rate(tile, 2 * ka + 1, states);
    for (int i = 0; i < 4; i++)
      assert_int_equal(states[i], cases[c].s[i]);
    assert_int_equal(states[255], cases[c].last);
    tu_assert_status(trellis_decode_tile_rate(tile, ka, 1, TRELLIS_CB_MUL1, w),
                     TRELLIS_OK);
    char hex[65];
    tu_sha256_u16_hex(w, 256, hex);
    assert_string_equal(hex, cases[c].sha);
  }
}

/* §1.4 (b), K = 2.5 in full: states 0..15 and the weights they give. */
static void test_worked_example_k2p5(void **state) {
  (void)state;
  int16_t tile[40];
  for (int j = 0; j < 40; j++)
    tile[j] = (int16_t)(uint16_t)(0x0123u + 0x1111u * (unsigned)j);
  static const int ends[16] = {2,  5,  7,  10, 12, 15, 17, 20,
                               22, 25, 27, 30, 32, 35, 37, 40};
  for (int i = 0; i < 16; i++) {
    assert_int_equal(window_end(2, i), ends[i]);
    assert_int_equal(window_end(2, i), (i + 1) * 5 / 2); /* closed form */
  }
  static const uint16_t want[16] = {
      0x26A4, 0x3522, 0xD489, 0xA448, 0x9123, 0x891A, 0x2468, 0x2340,
      0x8D00, 0x6802, 0xA009, 0x0048, 0x0123, 0x0919, 0x2466, 0x2334};
  uint16_t states[256];
  trl_tile_states_rate(tile, 5, states);
  for (int i = 0; i < 16; i++)
    assert_int_equal(states[i], want[i]);
  static const struct {
    int r, c;
    uint16_t v;
  } weights[16] = {
      {0, 0, 0x378D}, {1, 0, 0xAF0C}, {8, 0, 0xBE19},  {9, 0, 0xAA4C},
      {0, 8, 0xBEDB}, {1, 8, 0xB4AF}, {8, 8, 0xBC9C},  {9, 8, 0xB8C7},
      {2, 0, 0xB944}, {3, 0, 0x3CE4}, {10, 0, 0x35B6}, {11, 0, 0xB874},
      {2, 8, 0xB4CB}, {3, 8, 0xAC04}, {10, 8, 0x3C15}, {11, 8, 0x35D1}};
  uint16_t w[256];
  tu_assert_status(trellis_decode_tile_rate(tile, 2, 1, TRELLIS_CB_MUL1, w),
                   TRELLIS_OK);
  for (int i = 0; i < 16; i++) {
    int r, c;
    trl_tile_position(i, &r, &c);
    assert_int_equal(r, weights[i].r);
    assert_int_equal(c, weights[i].c);
    assert_int_equal(w[16 * r + c], weights[i].v);
    assert_int_equal(trellis_codebook_value(TRELLIS_CB_MUL1, want[i]),
                     weights[i].v);
  }
}

/* Random tiles: every state equals its definition; the fast fp32 decode
 * equals the fp16 one; W_hat of a weight decodes tile by tile alike. */
static void test_random_tiles(void **state) {
  (void)state;
  const float *table = trl_codebook_table_f32(TRELLIS_CB_MUL1);
  for (int ka = TRL_HALF_MIN_BITS; ka <= TRL_HALF_MAX_BITS; ka++) {
    for (int rep = 0; rep < 50; rep++) {
      int16_t tile[MAX_HALF_WORDS];
      synth_words(&rng, tile, (size_t)(16 * ka + 8));
      uint16_t states[256], w[256];
      trl_tile_states_rate(tile, 2 * ka + 1, states);
      for (int i = 0; i < 256; i++)
        assert_int_equal(states[i], slow_state(tile, ka, i));
      tu_assert_status(
          trellis_decode_tile_rate(tile, ka, 1, TRELLIS_CB_MUL1, w),
          TRELLIS_OK);
      float f[256];
      trl_tile_decode_f32_rate(tile, 2 * ka + 1, table, f);
      for (int p = 0; p < 256; p++)
        assert_true(f[p] == trellis_f16_to_f32(w[p]));
    }
  }
}

/* The fast decode's unrolled forms agree with the states at every rate
 * h = 2..16, those the table has and those it might gain. */
static void test_fast_decode_every_h(void **state) {
  (void)state;
  const float *table = trl_codebook_table_f32(TRELLIS_CB_MUL1);
  for (int h = 2; h <= 16; h++) {
    int16_t tile[8 * 16];
    synth_words(&rng, tile, (size_t)(8 * h));
    uint16_t states[256];
    float f[256];
    trl_tile_states_rate(tile, h, states);
    trl_tile_decode_f32_rate(tile, h, table, f);
    for (int i = 0; i < 256; i++) {
      int r, c;
      trl_tile_position(i, &r, &c);
      assert_true(f[16 * r + c] == table[states[i]]);
    }
  }
}

/* A packed symbol stream is a tail-biting trellis: state i >> D(i) equals
 * the low 16 - D(i) bits of state i - 1, cyclically (EXL3-1.6 §1.3), and
 * state i's low D(i) bits are symbol i. */
static void test_trellis_consistency(void **state) {
  (void)state;
  for (int ka = TRL_HALF_MIN_BITS; ka <= TRL_HALF_MAX_BITS; ka++) {
    uint16_t sym[256], states[256];
    for (int i = 0; i < 256; i++)
      sym[i] = (uint16_t)(synth_next(&rng) & ((1u << step(ka, i)) - 1));
    int16_t tile[MAX_HALF_WORDS];
    pack(sym, ka, tile);
    trl_tile_states_rate(tile, 2 * ka + 1, states);
    for (int i = 0; i < 256; i++) {
      const int d = step(ka, i);
      const uint16_t prev = states[(i + 255) % 256];
      assert_int_equal(states[i] >> d, prev & ((1u << (16 - d)) - 1));
      assert_int_equal(states[i] & ((1u << d) - 1), sym[i]);
    }
  }
}

static void test_rate_table(void **state) {
  (void)state;
  for (int cb = 0; cb < TRL_CB_COUNT; cb++)
    for (int bits = 0; bits <= 9; bits++) {
      const int half =
          cb == TRELLIS_CB_MUL1 && bits >= 1 && bits <= 3; /* 1.5 .. 3.5 */
      assert_int_equal(
          trellis_codebook_rate_valid((trellis_codebook)cb, bits, 1), half);
      assert_int_equal(
          trellis_codebook_rate_valid((trellis_codebook)cb, bits, 0),
          trellis_codebook_bits_valid((trellis_codebook)cb, bits));
      assert_int_equal(
          trellis_codebook_rate_valid((trellis_codebook)cb, bits, 2), 0);
    }
  assert_int_equal(trl_rate_tile_words(trl_rate_h(2, 1)), 40);
  assert_int_equal(trl_rate_tile_words(trl_rate_h(3, 0)), 48);
}

static void test_decode_tile_rate_errors(void **state) {
  (void)state;
  int16_t tile[MAX_HALF_WORDS] = {0};
  uint16_t out[256];
  trellis_clear_error();
  tu_assert_status(trellis_decode_tile_rate(tile, 2, 1, TRELLIS_CB_MCG, out),
                   TRELLIS_ERR_SHAPE);
  tu_assert_error_has("K = 2.5 is a half-integer rate, which only mul1 takes");
  tu_assert_status(trellis_decode_tile_rate(tile, 4, 1, TRELLIS_CB_MUL1, out),
                   TRELLIS_ERR_SHAPE);
  tu_assert_error_has("K = 4.5 is not a half-integer rate of mul1");
  tu_assert_status(trellis_decode_tile_rate(tile, 2, 2, TRELLIS_CB_MUL1, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("half");
  tu_assert_status(trellis_decode_tile_rate(NULL, 2, 1, TRELLIS_CB_MUL1, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  /* half 0 is the integer decode */
  uint16_t a[256], b[256];
  synth_words(&rng, tile, 48);
  tu_assert_status(trellis_decode_tile_rate(tile, 3, 0, TRELLIS_CB_MCG, a),
                   TRELLIS_OK);
  tu_assert_status(trellis_decode_tile(tile, 3, TRELLIS_CB_MCG, b), TRELLIS_OK);
  assert_memory_equal(a, b, sizeof a);
}

/* ------------------------------------------------------ weight API -- */

static int16_t payload[256 * 128 * 7 / 32]; /* up to K 3.5 */
static uint16_t ones[256];

static trellis_weight half_weight(int bits) {
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 256;
  w.n = 128;
  w.bits = bits;
  w.half = 1;
  w.codebook = TRELLIS_CB_MUL1;
  w.trellis = payload;
  w.suh = ones;
  w.svh = ones;
  return w;
}

static void test_weight_api(void **state) {
  (void)state;
  for (int i = 0; i < 256; i++)
    ones[i] = 0x3C00;
  for (int bits = 1; bits <= 3; bits++) {
    trellis_weight w = half_weight(bits);
    tu_assert_status(trellis_weight_validate(&w), TRELLIS_OK);
    assert_int_equal(trellis_weight_payload_bytes(&w),
                     (size_t)(256 * 128 * (2 * bits + 1) / 16));
  }
  trellis_weight w = half_weight(4);
  trellis_clear_error();
  tu_assert_status(trellis_weight_validate(&w), TRELLIS_ERR_SHAPE);
  tu_assert_error_has("4.5");
  w = half_weight(2);
  w.codebook = TRELLIS_CB_MCG;
  tu_assert_status(trellis_weight_validate(&w), TRELLIS_ERR_SHAPE);
  tu_assert_error_has("only mul1 takes");
  w = half_weight(2);
  w.half = 2;
  tu_assert_status(trellis_weight_validate(&w), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("weight.half");
  /* a header without the half field reads it as 0 */
  w = half_weight(2);
  w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V2;
  tu_assert_status(trellis_weight_validate(&w), TRELLIS_OK);
  assert_int_equal(trellis_weight_payload_bytes(&w), 256 * 128 * 2 / 8);
  /* W_hat tile by tile equals trellis_decode_tile_rate */
  w = half_weight(3);
  synth_words(&rng, payload, sizeof payload / 2);
  static uint16_t w_hat[256 * 128];
  tu_assert_status(trellis_decode_weight(&w, w_hat), TRELLIS_OK);
  for (int kt = 0; kt < 16; kt++)
    for (int nt = 0; nt < 8; nt++) {
      uint16_t tile[256];
      tu_assert_status(trellis_decode_tile_rate(payload + (kt * 8 + nt) * 56, 3,
                                                1, TRELLIS_CB_MUL1, tile),
                       TRELLIS_OK);
      for (int r = 0; r < 16; r++)
        assert_memory_equal(&w_hat[(16 * kt + r) * 128 + 16 * nt],
                            &tile[16 * r], 32);
    }
}

/* The CPU forward of a half-rate layer equals x . W_dense computed from
 * its own W_hat (bias included). */
static void test_cpu_forward(void **state) {
  (void)state;
  synth_layer l;
  tu_assert_status(synth_layer_init(&l, 384, 256, 2, TRELLIS_CB_MUL1,
                                    SYNTH_HALF | SYNTH_BIAS, 77),
                   TRELLIS_OK);
  assert_int_equal(l.w.half, 1);
  enum { M = 5 };
  uint16_t x[M * 384];
  synth_fill_normal(&rng, x, TRELLIS_F16, M * 384);
  float *dense = malloc(384 * 256 * sizeof *dense);
  assert_non_null(dense);
  tu_assert_status(trellis_dense_weight(&l.w, dense), TRELLIS_OK);
  float ref[M * 256];
  for (int r = 0; r < M; r++)
    for (int c = 0; c < 256; c++) {
      double acc = trellis_f16_to_f32(l.bias[c]);
      for (int i = 0; i < 384; i++)
        acc += (double)trellis_f16_to_f32(x[r * 384 + i]) * dense[i * 256 + c];
      ref[r * 256 + c] = (float)acc;
    }
  for (int threads = 1; threads <= 2; threads++) {
    float *y =
        tu_cpu_forward_f32(&l.w, x, M, TRELLIS_F16, TRELLIS_F32, threads);
    tu_assert_close("K2.5 384x256", "y", y, ref, M * 256, 2e-3);
    free(y);
  }
  free(dense);
  synth_layer_free(&l);
}

/* ------------------------------------------------ checkpoint checks -- */

/* A one-layer file: trellis [16][8][width], suh/svh, an optional marker
 * (`marker` "" for none) holding `value` with `ndim` dims. */
static char *write_layer(const char *name, int width, const char *marker,
                         uint32_t value, int ndim) {
  static int16_t words[16 * 8 * 128];
  static uint16_t suh[256], svh[128];
  for (int i = 0; i < 256; i++)
    suh[i] = 0x3C00;
  for (int i = 0; i < 128; i++)
    svh[i] = 0x3C00;
  const int32_t v = (int32_t)value;
  char mname[64];
  snprintf(mname, sizeof mname, "p.%s", marker);
  tu_st_tensor t[4] = {
      {"p.suh", "F16", 1, {256}, suh, sizeof suh},
      {"p.svh", "F16", 1, {128}, svh, sizeof svh},
      {"p.trellis",
       "I16",
       3,
       {16, 8, width},
       words,
       (size_t)(16 * 8 * width * 2)},
      {mname, "I32", ndim, {1}, &v, 4},
  };
  size_t size;
  uint8_t *img = tu_st_build(t, marker[0] ? 4 : 3, &size);
  char *path = tu_tmp_path(name);
  tu_write_file(path, img, size);
  free(img);
  return path;
}

static void expect_open(const char *path, trellis_status want,
                        const char *needle) {
  trellis_model *m = NULL;
  trellis_clear_error();
  tu_assert_status(trellis_model_open(path, &m), want);
  if (want == TRELLIS_OK) {
    trellis_model_close(m);
    return;
  }
  assert_null(m);
  tu_assert_error_has(needle);
}

static void test_checkpoint_validation(void **state) {
  (void)state;
  char *p = write_layer("ok40.safetensors", 40, "mul1", 0x83DCD12Du, 0);
  expect_open(p, TRELLIS_OK, NULL);
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(p, &m), TRELLIS_OK);
  trellis_layer_info info;
  tu_assert_status(trellis_model_layer_info(m, 0, &info), TRELLIS_OK);
  assert_int_equal(info.bits, 2);
  assert_int_equal(info.half, 1);
  trellis_layer l;
  tu_assert_status(trellis_model_layer(m, 0, &l), TRELLIS_OK);
  assert_int_equal(l.weight.half, 1);
  assert_int_equal(l.weight.bits, 2);
  trellis_model_close(m);
  free(p);
  /* 72 = 16 * 4.5: 1.6 reads half rates up to 3.5 only */
  p = write_layer("w72.safetensors", 72, "mul1", 0x83DCD12Du, 0);
  expect_open(p, TRELLIS_ERR_SHAPE, "trellis last dim 72 is not 16*K");
  free(p);
  p = write_layer("w20.safetensors", 20, "mul1", 0x83DCD12Du, 0);
  expect_open(p, TRELLIS_ERR_SHAPE, "trellis last dim 20");
  free(p);
  /* a half rate with mcg, or with no marker (3inst) */
  p = write_layer("mcg40.safetensors", 40, "mcg", 0xCBAC1FEDu, 0);
  expect_open(p, TRELLIS_ERR_SHAPE,
              "K = 2.5 is a half-integer rate, which "
              "only mul1 takes; codebook mcg");
  free(p);
  p = write_layer("none24.safetensors", 24, "", 0, 0);
  expect_open(p, TRELLIS_ERR_SHAPE, "no codebook marker: 3inst");
  free(p);
  /* the marker's exact value, dtype and shape */
  p = write_layer("bad56.safetensors", 56, "mul1", 0xCBAC1FEDu, 0);
  expect_open(p, TRELLIS_ERR_UNSUPPORTED, "mul1 marker value 0xCBAC1FED");
  free(p);
  p = write_layer("one56.safetensors", 56, "mul1", 0x83DCD12Du, 1);
  expect_open(p, TRELLIS_OK, NULL); /* [1], as the reference vectors have */
  free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_worked_example_k1p5),
      cmocka_unit_test(test_worked_example_pattern),
      cmocka_unit_test(test_worked_example_k2p5),
      cmocka_unit_test(test_random_tiles),
      cmocka_unit_test(test_fast_decode_every_h),
      cmocka_unit_test(test_trellis_consistency),
      cmocka_unit_test(test_rate_table),
      cmocka_unit_test(test_decode_tile_rate_errors),
      cmocka_unit_test(test_weight_api),
      cmocka_unit_test(test_cpu_forward),
      cmocka_unit_test(test_checkpoint_validation),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
