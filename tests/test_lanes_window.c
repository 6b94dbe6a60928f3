/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU's window fetch from a staged group of the lane layout
 * (format/lanes_window.h, the code cuda/lanes.cuh runs), on the host: the
 * staged arrangement is a permutation whose loads and copies are free of
 * bank conflicts, and for every K, tile of a group and lane the words a
 * lane loads and its assembly give the window the format defines, so every
 * state equals trl_tile_states'. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format/lanes.h"
#include "format/lanes_window.h"
#include "format/tile.h"
#include "tools/synth.h"
#include "trellis.h"

static synth_rng rng = {0x3A9E5u};

static void fill_random(void *p, size_t bytes) {
  uint8_t *b = p;
  for (size_t i = 0; i < bytes; i++)
    b[i] = (uint8_t)synth_next(&rng);
}

/* The 32-bit word at byte `off` of a group (little-endian, as the GPU's
 * shared-memory loads read it). */
static uint32_t load_word(const void *group, int off) {
  const uint8_t *b = (const uint8_t *)group + off;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

/* Bit q (0 = most significant of e[0]) of a word string. */
static unsigned string_bit(const uint32_t *e, int q) {
  return (e[q / 32] >> (31 - q % 32)) & 1u;
}

/* A group of the lane layout staged as the kernels stage it. */
static void stage(const int16_t *group, int h, uint32_t *staged) {
  for (int g = 0; g < 32 * h; g++)
    staged[trl_lanes_staged_of_layout(h, g)] = load_word(group, 4 * g);
}

/* Lane `lane`'s window of tile `tau`, fetched as the GPU fetches it from the
 * staged group. */
static void fetch(const uint32_t *group, int bits, int lane, int tau,
                  uint32_t e[3]) {
  uint32_t own[TRL_LANES_MAX_OWN], pre[TRL_LANES_MAX_PREFIX];
  for (int i = 0; i < trl_lanes_own_words(bits); i++)
    own[i] = load_word(group, trl_lanes_own_offset(bits, lane, tau, i));
  for (int i = 0; i < trl_lanes_prefix_words(bits); i++)
    pre[i] = load_word(group, trl_lanes_prefix_offset(bits, lane, tau, i));
  trl_lanes_window(bits, own, pre, trl_lanes_own_shift(bits, tau),
                   trl_lanes_prefix_shift(bits, tau), e);
}

/* The staged arrangement: a permutation of the group's words, the lane
 * layout's word (lane, w) at trl_lanes_staged_word; a warp's load of word w
 * of every lane (or of every lane's lower neighbour) and its copy of 32
 * consecutive words of the lane layout each touch 32 distinct banks; and
 * the decomposition the decode-GEMM's Loader uses (a lane copies words
 * lane + 32 i: quads repeat every 4 i, 512 bytes on). Every rate 2..16. */
static void test_staged(void **state) {
  (void)state;
  for (int h = 2; h <= 16; h++) {
    static unsigned seen[32 * 16];
    memset(seen, 0, sizeof seen);
    for (int g = 0; g < 32 * h; g++) {
      const int s = trl_lanes_staged_of_layout(h, g);
      assert_true(s >= 0 && s < 32 * h);
      seen[s]++;
    }
    for (int s = 0; s < 32 * h; s++)
      assert_int_equal(seen[s], 1);
    for (int lane = 0; lane < 32; lane++)
      for (int w = 0; w < h; w++)
        assert_int_equal(trl_lanes_staged_of_layout(
                             h, trl_lanes_word_offset(h, lane, w) / 4),
                         trl_lanes_staged_word(h, lane, w));
    for (int w = 0; w < h; w++)
      for (int shift = 0; shift < 3; shift++) {
        unsigned banks = 0;
        for (int lane = 0; lane < 32; lane++)
          banks |=
              1u << (trl_lanes_staged_word(h, (lane + 32 - shift) % 32, w) %
                     32);
        assert_int_equal(banks, 0xFFFFFFFFu);
      }
    for (int g0 = 0; g0 < 32 * h; g0 += 32) {
      unsigned banks = 0;
      for (int lane = 0; lane < 32; lane++)
        banks |= 1u << (trl_lanes_staged_of_layout(h, g0 + lane) % 32);
      assert_int_equal(banks, 0xFFFFFFFFu);
    }
    const int quads = h / 4;
    for (int lane = 0; lane < 32; lane++)
      for (int i = 0; i < 4 * quads; i++)
        assert_int_equal(trl_lanes_staged_of_layout(h, lane + 32 * i),
                         trl_lanes_staged_of_layout(h, lane + 32 * (i % 4)) +
                             128 * (i / 4));
  }
}

/* The loads stay inside the group, word-aligned, and within the fixed
 * counts the kernels' register arrays have. */
static void test_offsets(void **state) {
  (void)state;
  for (int bits = 1; bits <= 8; bits++) {
    const int h = 2 * bits;
    assert_true(trl_lanes_own_words(bits) <= TRL_LANES_MAX_OWN);
    assert_true(trl_lanes_prefix_words(bits) <= TRL_LANES_MAX_PREFIX);
    assert_true(trl_lanes_window_words(bits) <= 3);
    for (int tau = 0; tau < 8; tau++) {
      for (int lane = 0; lane < 32; lane++) {
        for (int i = 0; i < trl_lanes_own_words(bits); i++) {
          const int off = trl_lanes_own_offset(bits, lane, tau, i);
          assert_true(off >= 0 && off + 4 <= trl_lanes_group_bytes(h));
          assert_int_equal(off % 4, 0);
        }
        for (int i = 0; i < trl_lanes_prefix_words(bits); i++) {
          const int off = trl_lanes_prefix_offset(bits, lane, tau, i);
          assert_true(off >= 0 && off + 4 <= trl_lanes_group_bytes(h));
          assert_int_equal(off % 4, 0);
        }
      }
      if (bits >= 2 && bits % 2 == 0) /* one prefix word is enough */
        assert_true((int)trl_lanes_prefix_shift(bits, tau) + 16 - bits <= 32);
    }
  }
}

/* The host emulations of the device's funnel shift and byte permute. */
static void test_primitives(void **state) {
  (void)state;
  assert_int_equal(trl_lanes_funnel(0x12345678u, 0x9ABCDEF0u, 0), 0x12345678u);
  assert_int_equal(trl_lanes_funnel(0x12345678u, 0x9ABCDEF0u, 8), 0x3456789Au);
  assert_int_equal(trl_lanes_funnel(0x12345679u, 0x9ABCDEF0u, 31), 0xCD5E6F78u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x7654u),
                   0x77665544u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x0123u),
                   0x00112233u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x5270u),
                   0x55227700u);
  /* the register-direct kernel's selectors (cuda/direct_windows.cuh) */
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x3210u),
                   0x33221100u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x5432u),
                   0x55443322u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0u, 0x4421u), 0x00002211u);
  assert_int_equal(trl_lanes_prmt(0x33221100u, 0x77665544u, 0x7610u),
                   0x77661100u);
}

/* Every bit of every window and every state, for every K 1..8, tile and
 * lane of random groups, against the format's definition. */
static void test_windows(void **state) {
  (void)state;
  static int16_t tiles[8 * 128], lanes[8 * 128];
  static uint32_t staged[32 * 16];
  for (int bits = 1; bits <= 8; bits++) {
    const int h = 2 * bits, span = 8 * bits, p = 16 - bits;
    for (int round = 0; round < 4; round++) {
      fill_random(tiles, (size_t)trl_lanes_group_bytes(h));
      assert_int_equal(trl_lanes_convert(tiles, lanes, 16, 128, h, 1),
                       TRELLIS_OK);
      stage(lanes, h, staged);
      for (int tau = 0; tau < 8; tau++) {
        const int16_t *tile = tiles + tau * 16 * bits;
        uint16_t states[256];
        trl_tile_states(tile, bits, states);
        for (int lane = 0; lane < 32; lane++) {
          uint32_t e[3] = {0, 0, 0};
          fetch(staged, bits, lane, tau, e);
          /* E = ring bits from 8K L - p on (FORMAT.md §3.2: bit b of the
           * tile's stream is bit 31 - b % 32 of its 32-bit word b / 32) */
          for (int q = 0; q < p + span; q++) {
            const int b = (span * lane - p + q + 256 * bits) % (256 * bits);
            const uint32_t w = load_word(tile, 4 * (b / 32));
            if (string_bit(e, q) != ((w >> (31 - b % 32)) & 1u))
              fail_msg("K%d tile %d lane %d: window bit %d differs", bits, tau,
                       lane, q);
          }
          for (int j = 0; j < 8; j++) {
            const int q = trl_lanes_state_offset(h, j);
            unsigned s = 0;
            for (int b = 0; b < 16; b++)
              s = s << 1 | string_bit(e, q + b);
            assert_int_equal(s, states[8 * lane + j]);
          }
        }
      }
    }
  }
}

/* The half-integer rates' fetch (trl_lanes_half_*): every state of every
 * tile and lane of random groups at H = 3, 5, 7 equals the format's
 * (trl_tile_states_rate), from loads that stay inside the group. */
static void test_half_windows(void **state) {
  (void)state;
  static int16_t tiles[8 * 128], lanes[8 * 128];
  static uint32_t staged[32 * 16];
  for (int h = 3; h <= 7; h += 2) {
    for (int round = 0; round < 4; round++) {
      fill_random(tiles, (size_t)trl_lanes_group_bytes(h));
      assert_int_equal(trl_lanes_convert(tiles, lanes, 16, 128, h, 1),
                       TRELLIS_OK);
      stage(lanes, h, staged);
      for (int tau = 0; tau < 8; tau++) {
        uint16_t states[256];
        trl_tile_states_rate(tiles + tau * 8 * h, h, states);
        for (int lane = 0; lane < 32; lane++) {
          uint32_t w[3][TRL_LANES_HALF_WORDS] = {{0}};
          for (int b = 0; b <= trl_lanes_half_lanes(h); b++)
            for (int i = 0; i < TRL_LANES_HALF_WORDS; i++) {
              const int off = trl_lanes_half_offset(h, lane, b, tau, i);
              assert_true(off >= 0 && off + 4 <= trl_lanes_group_bytes(h));
              w[b][i] = load_word(staged, off);
            }
          uint32_t e[2];
          trl_lanes_half_window(h, w[0], w[1], w[2],
                                trl_lanes_half_shift(h, tau), e);
          for (int j = 0; j < 8; j++) {
            const int q = trl_lanes_state_offset(h, j);
            unsigned s = 0;
            for (int b = 0; b < 16; b++)
              s = s << 1 | string_bit(e, q + b);
            if (s != states[8 * lane + j])
              fail_msg("H%d tile %d lane %d state %d: %04x, expected %04x", h,
                       tau, lane, j, s, states[8 * lane + j]);
          }
        }
      }
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_staged),       cmocka_unit_test(test_offsets),
      cmocka_unit_test(test_primitives),   cmocka_unit_test(test_windows),
      cmocka_unit_test(test_half_windows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
