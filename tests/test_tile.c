/* SPDX-License-Identifier: Apache-2.0 */
/* Tile decoding (FORMAT.md §3, §10.1): windows, permutation and
 * known-answer tiles for every K and codebook. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format/codebook.h"
#include "format/tile.h"
#include "core/sha256.h"
#include "testutil.h"
#include "tools/synth.h"
#include "trellis.h"

#define MAX_WORDS (16 * TRELLIS_MAX_BITS)

static const trellis_codebook all_codebooks[3] = {
    TRELLIS_CB_3INST, TRELLIS_CB_MCG, TRELLIS_CB_MUL1};

static synth_rng rng = {0x12345678u}; /* a synth_rng is its seed */

static void random_tile(int16_t *tile, int bits) {
  synth_words(&rng, tile, (size_t)(16 * bits));
}

/* Stream bit p, straight from its definition (FORMAT.md §3.2). */
static int stream_bit(const int16_t *tile, int bits, int p) {
  const int length = 256 * bits;
  p = ((p % length) + length) % length;
  const int j = p >> 5;
  const uint32_t w32 = (uint32_t)(uint16_t)tile[2 * j] |
                       (uint32_t)(uint16_t)tile[2 * j + 1] << 16;
  return (int)((w32 >> (31 - (p & 31))) & 1u);
}

static uint16_t slow_state(const int16_t *tile, int bits, int i) {
  uint32_t s = 0;
  for (int b = 0; b < 16; b++)
    s = (s << 1) | (uint32_t)stream_bit(tile, bits, bits * i + bits - 16 + b);
  return (uint16_t)s;
}

/* Packs 256 K-bit symbols the way the quantizer does: MSB-first stream of
 * 16-bit words, then the halves of every 32-bit word swapped. */
static void pack_symbols(const uint8_t sym[256], int bits, int16_t *tile) {
  uint8_t stream[256 * TRELLIS_MAX_BITS];
  for (int i = 0; i < 256; i++)
    for (int b = 0; b < bits; b++)
      stream[bits * i + b] = (uint8_t)((sym[i] >> (bits - 1 - b)) & 1);
  for (int q = 0; q < 16 * bits; q++) {
    uint16_t word = 0;
    for (int b = 0; b < 16; b++)
      word = (uint16_t)((word << 1) | stream[16 * q + b]);
    tile[q ^ 1] = (int16_t)word;
  }
}

static void decode(const int16_t *tile, int bits, trellis_codebook cb,
                   uint16_t out[256]) {
  assert_int_equal(trellis_decode_tile(tile, bits, cb, out), TRELLIS_OK);
}

static void tile_sha(const int16_t *tile, int bits, trellis_codebook cb,
                     char hex[65]) {
  uint16_t out[256];
  decode(tile, bits, cb, out);
  tu_sha256_u16_hex(out, 256, hex);
}

static void test_positions(void **state) {
  (void)state;
  static const int examples[][3] = {{0, 0, 0}, {1, 1, 0},  {2, 8, 0},
                                    {3, 9, 0}, {4, 0, 8},  {7, 9, 8},
                                    {8, 2, 0}, {32, 0, 1}, {255, 15, 15}};
  for (size_t e = 0; e < sizeof examples / sizeof *examples; e++) {
    int r = -1, c = -1;
    trl_tile_position(examples[e][0], &r, &c);
    assert_int_equal(r, examples[e][1]);
    assert_int_equal(c, examples[e][2]);
  }
  int seen[256] = {0};
  for (int i = 0; i < 256; i++) {
    int r, c;
    trl_tile_position(i, &r, &c);
    const int lane = i / 8, j = i % 8;
    /* The alternative column formula of FORMAT.md §3.5. */
    assert_int_equal(c, 2 * (lane >> 3) + ((lane >> 2) & 1) + 8 * (j >> 2));
    assert_int_equal(r, 2 * (lane % 4) + (j & 1) + 8 * ((j >> 1) & 1));
    seen[16 * r + c]++;
  }
  for (int p = 0; p < 256; p++)
    assert_int_equal(seen[p], 1);
}

static void test_all_zero_and_all_ones(void **state) {
  (void)state;
  static const uint16_t zero_value[3] = {0x3A25, 0x3F60, 0xC2E8};
  static const uint16_t ones_value[3] = {0xB110, 0x3ACD, 0xB936};
  int16_t tile[MAX_WORDS];
  uint16_t out[256], states[256];
  for (int bits = 1; bits <= 8; bits++) {
    for (int pass = 0; pass < 2; pass++) {
      for (int j = 0; j < 16 * bits; j++)
        tile[j] = pass ? -1 : 0;
      trl_tile_states(tile, bits, states);
      for (int i = 0; i < 256; i++)
        assert_int_equal(states[i], pass ? 0xFFFF : 0x0000);
      for (int cb = 0; cb < 3; cb++) {
        decode(tile, bits, all_codebooks[cb], out);
        for (int i = 0; i < 256; i++)
          assert_int_equal(out[i], pass ? ones_value[cb] : zero_value[cb]);
      }
    }
  }
}

static void test_word_pattern(void **state) {
  (void)state;
  static const struct {
    uint16_t states[4], last;
    const char *sha[3];
  } expected[8] = {
      {{0xE022, 0xC044, 0x8088, 0x0111},
       0xF011,
       {"ecff3e66db8025c5", "14c70c859f62d029", "5af0cb4455028445"}},
      {{0x0484, 0x1211, 0x4844, 0x2112},
       0x0121,
       {"e22dbd61020d5ff4", "769c2a66a21d3687", "b69805fec5f08dd0"}},
      {{0x9188, 0x8C44, 0x6224, 0x1123},
       0x1231,
       {"851c3616b56994e4", "07bf733651b61959", "2441f6d06fb57196"}},
      {{0x3411, 0x4112, 0x1123, 0x1234},
       0x2341,
       {"30a8fb99603b9b35", "1fb798a74da958d8", "75c6f4bbd700f9f5"}},
      {{0x8A22, 0x4448, 0x891A, 0x2340},
       0x3451,
       {"ccabeb8bab9d5c4c", "649719d09cc3b4de", "d5e31f0183763fc5"}},
      {{0x5844, 0x1123, 0x48D0, 0x3401},
       0x4561,
       {"d64f36676e696a40", "44cdf8992cb51271", "c6e3a35afd593e47"}},
      {{0x3889, 0x448D, 0x4680, 0x4012},
       0x5671,
       {"5e897ed904651cc0", "1344f822a18d2150", "96fd801f20dc7296"}},
      {{0x8112, 0x1234, 0x3401, 0x0123},
       0x6781,
       {"7f974835dcbae692", "bd6212d4b740d9e3", "ee20a66e865e9016"}},
  };
  int16_t tile[MAX_WORDS];
  uint16_t states[256];
  for (int bits = 1; bits <= 8; bits++) {
    for (int j = 0; j < 16 * bits; j++)
      tile[j] = (int16_t)(uint16_t)(0x0123u + 0x1111u * (unsigned)j);
    trl_tile_states(tile, bits, states);
    for (int i = 0; i < 4; i++)
      assert_int_equal(states[i], expected[bits - 1].states[i]);
    assert_int_equal(states[255], expected[bits - 1].last);
    for (int cb = 0; cb < 3; cb++) {
      char hex[65];
      tile_sha(tile, bits, all_codebooks[cb], hex);
      hex[16] = '\0';
      assert_string_equal(hex, expected[bits - 1].sha[cb]);
    }
  }
}

static void test_k4_ramp(void **state) {
  (void)state;
  static const uint16_t words[4] = {0x4567, 0x0123, 0xCDEF, 0x89AB};
  static const struct {
    uint16_t at[5]; /* W[0][0], W[1][0], W[8][0], W[0][8], W[15][15] */
    const char *sha;
  } expected[3] = {
      {{0xBC1A, 0x4022, 0xB690, 0xC066, 0xB66D},
       "e9a090aa6cfc384c55fead70dbdfdf035762eae9e42685ab3af1bc529d31944b"},
      {{0x42DE, 0x3C4D, 0xB883, 0x3E0F, 0xBCA7},
       "c7a2c3c253e6cdda3f573335ed08c31aa02b470b333ba4d1474242c13f6da623"},
      {{0xC006, 0xB4E7, 0xA96E, 0xB89E, 0xB02C},
       "b26d963caad812c8a2e87801eb803aa7ea989695179c9016dee93ba66081e265"},
  };
  uint8_t sym[256];
  int16_t tile[64], packed[64];
  for (int i = 0; i < 256; i++)
    sym[i] = (uint8_t)(i % 16);
  pack_symbols(sym, 4, packed);
  for (int j = 0; j < 64; j++) {
    tile[j] = (int16_t)words[j % 4];
    assert_int_equal((uint16_t)packed[j], words[j % 4]);
  }
  uint16_t states[256], out[256];
  trl_tile_states(tile, 4, states);
  assert_int_equal(states[0], 0xDEF0);
  assert_int_equal(states[1], 0xEF01);
  assert_int_equal(states[3], 0x0123);
  assert_int_equal(states[255], 0xCDEF);
  for (int cb = 0; cb < 3; cb++) {
    decode(tile, 4, all_codebooks[cb], out);
    const int at[5] = {0, 16 * 1, 16 * 8, 8, 16 * 15 + 15};
    for (int e = 0; e < 5; e++)
      assert_int_equal(out[at[e]], expected[cb].at[e]);
    assert_int_equal(out[1], out[0]); /* W[0][1] = W[0][0] */
    char hex[65];
    tu_sha256_u16_hex(out, 256, hex);
    assert_string_equal(hex, expected[cb].sha);
  }
}

static void test_k3_lcg(void **state) {
  (void)state;
  static const uint16_t words[48] = {
      0xD39A, 0xD8B6, 0x3CEC, 0xF90F, 0x9421, 0xBFFB, 0x4892, 0x59B5,
      0x4888, 0xFFAB, 0x9FFE, 0xD6DC, 0xB653, 0xCC5A, 0xF880, 0x686E,
      0x531D, 0xF914, 0xD5DD, 0x4C14, 0x28E8, 0x5598, 0x53BF, 0x818B,
      0x2513, 0xC6E4, 0xDC1E, 0xC2E9, 0x8B6D, 0x5F74, 0xF613, 0x6EED,
      0x13B4, 0x22D9, 0x8E9D, 0x017C, 0xA8FB, 0x04FA, 0xA727, 0x1738,
      0xCD50, 0x80DF, 0x6268, 0x8C3E, 0xFE08, 0x0BBD, 0xC74E, 0xDC59};
  static const struct {
    uint16_t row0[4];
    const char *sha;
  } expected[3] = {
      {{0xB88E, 0x2570, 0x378C, 0x37CA},
       "6b70298e3b4bb0bfeb93a0f26cea0ca9abb6ac3aa4d72ece114768f1919375d9"},
      {{0xBA5A, 0x40BB, 0xBAC9, 0xBC78},
       "995dcaaa8ecc91b3091230e4beffc808fc154f2878ac624c2c3d9f6ef9dbde81"},
      {{0x38B2, 0xBBDD, 0x37FC, 0xB764},
       "e710d8fc09abde3ba8bbd0df3d5a9d1fb07cd88a212236c6def3a05fa0681579"},
  };
  uint8_t sym[256];
  uint32_t seed = 1;
  for (int i = 0; i < 256; i++) {
    seed = (seed * 1103515245u + 12345u) & 0x7FFFFFFFu;
    sym[i] = (uint8_t)((seed >> 16) & 7u);
  }
  static const uint8_t first_symbols[8] = {6, 6, 1, 3, 3, 3, 2, 3};
  assert_memory_equal(sym, first_symbols, 8);
  int16_t tile[48];
  pack_symbols(sym, 3, tile);
  for (int j = 0; j < 48; j++)
    assert_int_equal((uint16_t)tile[j], words[j]);
  uint16_t states[256], out[256];
  trl_tile_states(tile, 3, states);
  for (int i = 0; i < 256; i++)
    assert_int_equal(states[i] & 7, sym[i]); /* low K bits are symbol i */
  for (int cb = 0; cb < 3; cb++) {
    decode(tile, 3, all_codebooks[cb], out);
    for (int c = 0; c < 4; c++)
      assert_int_equal(out[c], expected[cb].row0[c]);
    char hex[65];
    tu_sha256_u16_hex(out, 256, hex);
    assert_string_equal(hex, expected[cb].sha);
  }
}

/* Random tiles: fast windows == pseudocode windows == symbol-sum form,
 * tail-biting holds, and decode == table[state] at the mapped position. */
static void test_random_tiles(void **state) {
  (void)state;
  int16_t tile[MAX_WORDS];
  uint16_t states[256], out[256];
  for (int bits = 1; bits <= 8; bits++) {
    const uint32_t mask = (1u << (16 - bits)) - 1u;
    for (int trial = 0; trial < 40; trial++) {
      random_tile(tile, bits);
      trl_tile_states(tile, bits, states);
      for (int i = 0; i < 256; i++) {
        assert_int_equal(states[i], slow_state(tile, bits, i));
        uint32_t sum = 0;
        for (int l = 0; l < (16 + bits - 1) / bits; l++)
          sum |= (uint32_t)(states[(i - l + 256) % 256] & ((1u << bits) - 1))
                 << (l * bits);
        assert_int_equal(states[i], sum & 0xFFFFu);
        const int prev = (i + 255) % 256; /* includes state_0 vs state_255 */
        assert_int_equal(states[i] >> bits, states[prev] & mask);
      }
      for (int cb = 0; cb < 3; cb++) {
        const uint16_t *table = trellis_codebook_table(all_codebooks[cb]);
        decode(tile, bits, all_codebooks[cb], out);
        for (int i = 0; i < 256; i++) {
          int r, c;
          trl_tile_position(i, &r, &c);
          assert_int_equal(out[16 * r + c], table[states[i]]);
        }
      }
    }
  }
}

/* The forward's unrolled fp32 decode equals the public fp16 decode. */
static void test_fast_f32_decode(void **state) {
  (void)state;
  int16_t tile[MAX_WORDS];
  uint16_t out[256];
  float fast[256];
  for (int bits = 1; bits <= 8; bits++) {
    for (int trial = 0; trial < 20; trial++) {
      random_tile(tile, bits);
      for (int cb = 0; cb < 3; cb++) {
        decode(tile, bits, all_codebooks[cb], out);
        trl_tile_decode_f32(tile, bits,
                            trl_codebook_table_f32(all_codebooks[cb]), fast);
        for (int p = 0; p < 256; p++)
          assert_true(fast[p] == trellis_f16_to_f32(out[p]));
      }
    }
  }
}

/* FORMAT.md §3.3's K=3 example: weight 0 reads stream bits 755..767 then 0..2;
 * weight 5 reads bits 2..17. */
static void test_window_bits(void **state) {
  (void)state;
  int16_t tile[48];
  uint16_t states[256];
  for (int p = 0; p < 768; p++) {
    memset(tile, 0, sizeof tile);
    const int q = p / 16;
    tile[q ^ 1] = (int16_t)(uint16_t)(0x8000u >> (p % 16));
    trl_tile_states(tile, 3, states);
    uint16_t expect0 = 0, expect5 = 0;
    if (p >= 755)
      expect0 = (uint16_t)(1u << (15 - (p - 755)));
    if (p <= 2)
      expect0 = (uint16_t)(1u << (2 - p));
    if (p >= 2 && p <= 17)
      expect5 = (uint16_t)(1u << (17 - p));
    assert_int_equal(states[0], expect0);
    assert_int_equal(states[5], expect5);
  }
}

static void test_decode_tile_errors(void **state) {
  (void)state;
  int16_t tile[MAX_WORDS] = {0};
  uint16_t out[256];
  assert_int_equal(trellis_decode_tile(NULL, 4, TRELLIS_CB_MCG, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "tile"));
  assert_int_equal(trellis_decode_tile(tile, 4, TRELLIS_CB_MCG, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "out"));
  assert_int_equal(trellis_decode_tile(tile, 0, TRELLIS_CB_MCG, out),
                   TRELLIS_ERR_SHAPE);
  assert_non_null(strstr(trellis_last_error(), "bits"));
  assert_int_equal(trellis_decode_tile(tile, 9, TRELLIS_CB_MCG, out),
                   TRELLIS_ERR_SHAPE);
  assert_non_null(strstr(trellis_last_error(), "got 9"));
  assert_int_equal(trellis_decode_tile(tile, 4, (trellis_codebook)5, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(trellis_last_error(), "codebook"));
}

static void test_expand_signs(void **state) {
  (void)state;
  const int16_t packed[3] = {(int16_t)0x8001, 0x0000, (int16_t)0xFFFF};
  uint16_t out[48];
  assert_int_equal(trellis_expand_signs(packed, 48, out), TRELLIS_OK);
  for (int e = 0; e < 48; e++) {
    int negative = (e == 0 || e == 15 || e >= 32);
    assert_int_equal(out[e], negative ? 0xBC00 : 0x3C00);
  }
  /* A count that is not a multiple of 16 uses the low bits of the last
   * word and writes nothing past `count`. */
  uint16_t partial[20];
  memset(partial, 0x77, sizeof partial);
  assert_int_equal(trellis_expand_signs(packed, 17, partial), TRELLIS_OK);
  assert_int_equal(partial[16], 0x3C00);
  assert_int_equal(partial[17], 0x7777);
  assert_int_equal(trellis_expand_signs(NULL, 0, NULL), TRELLIS_OK);
  assert_int_equal(trellis_expand_signs(NULL, 16, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_int_equal(trellis_expand_signs(packed, 16, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_int_equal(trellis_expand_signs(packed, -1, out),
                   TRELLIS_ERR_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_positions),
      cmocka_unit_test(test_all_zero_and_all_ones),
      cmocka_unit_test(test_word_pattern),
      cmocka_unit_test(test_k4_ramp),
      cmocka_unit_test(test_k3_lcg),
      cmocka_unit_test(test_random_tiles),
      cmocka_unit_test(test_fast_f32_decode),
      cmocka_unit_test(test_window_bits),
      cmocka_unit_test(test_decode_tile_errors),
      cmocka_unit_test(test_expand_signs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
