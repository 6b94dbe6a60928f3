/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct kernel's windows at the half-integer rates
 * (format/lanes_prefix.h, the code cuda/direct_gemm.cuh runs), on the host:
 * for H = 3, 5, 7, every tile of random groups and every lane, the words a
 * lane takes from the lanes below it (K 1.5: lane L-1's words and lane
 * L-2's span ends, built into four prefix words; else the tails of lane
 * L-1's spans, two to a word) and its cross word give every state the
 * format defines (trl_tile_states_rate). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format/lanes.h"
#include "format/lanes_prefix.h"
#include "format/tile.h"
#include "tools/synth.h"
#include "trellis.h"

static synth_rng rng = {0x51F3Du};

static void fill_random(void *p, size_t bytes) {
  uint8_t *b = p;
  for (size_t i = 0; i < bytes; i++)
    b[i] = (uint8_t)synth_next(&rng);
}

/* The 32-bit word at byte `off` of a group (little-endian, as the GPU's
 * global loads read it). */
static uint32_t load_word(const void *group, int off) {
  const uint8_t *b = (const uint8_t *)group + off;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

/* 16 bits of a lane's string at bit q (0 = most significant of w[0]). */
static uint32_t field16(const uint32_t *w, int q) {
  uint32_t s = 0;
  for (int b = q; b < q + 16; b++)
    s = s << 1 | ((w[b / 32] >> (31 - b % 32)) & 1u);
  return s;
}

/* The kernel's tail pairs (direct_gemm.cuh, tail_pair): the last 16 bits of
 * spans 2k (low half) and 2k + 1 (high half). */
static uint32_t tail_pair(const uint32_t *w, int h, int k) {
  return field16(w, 4 * h * (2 * k + 1) - 16) |
         field16(w, 4 * h * (2 * k + 2) - 16) << 16;
}

static void test_bits(void **state) {
  (void)state;
  assert_int_equal(TRL_LANES_BITS(0, 32), 0xFFFFFFFFu);
  assert_int_equal(TRL_LANES_BITS(0, 4), 0xF0000000u);
  assert_int_equal(TRL_LANES_BITS(12, 16), 0x000F0000u);
  assert_int_equal(TRL_LANES_BITS(20, 32), 0x00000FFFu);
  assert_int_equal(trl_lanes_rotr(0x12345678u, 4), 0x81234567u);
  assert_int_equal(trl_lanes_rotr(0x12345678u, 20), 0x45678123u);
  assert_int_equal(trl_lanes_pick(0xAAAAAAAAu, 0x55555555u, 0xFFFF0000u),
                   0x5555AAAAu);
  /* tiles tau and tau + 4 share a word, one half each */
  for (int tau = 0; tau < 4; tau++) {
    assert_int_equal(trl_lanes_k15_word(tau), trl_lanes_k15_word(tau + 4));
    assert_int_not_equal(trl_lanes_k15_top(tau), trl_lanes_k15_top(tau + 4));
  }
}

/* K 1.5: span tau's last 4 bits at bit (12 tau + 28) mod 32 of the ends. */
static void test_k15_ends(void **state) {
  (void)state;
  for (int round = 0; round < 64; round++) {
    uint32_t w[4] = {0}; /* field16 of the last span reads past w[2] */
    fill_random(w, 3 * sizeof(w[0]));
    const uint32_t e = trl_lanes_k15_ends(w[0], w[1], w[2]);
    for (int tau = 0; tau < 8; tau++) {
      const uint32_t want = field16(w, 12 * tau + 8) >> 12;
      const int at = (12 * tau + 28) % 32;
      assert_int_equal((e >> (28 - at)) & 0xFu, want);
    }
  }
}

static void test_states(void **state) {
  (void)state;
  static int16_t tiles[8 * 128], lanes[8 * 128];
  for (int h = 3; h <= 7; h += 2) {
    for (int round = 0; round < 8; round++) {
      fill_random(tiles, (size_t)trl_lanes_group_bytes(h));
      assert_int_equal(trl_lanes_convert(tiles, lanes, 16, 128, h, 1),
                       TRELLIS_OK);
      uint32_t w[32][8], prev[32][4];
      for (int lane = 0; lane < 32; lane++)
        for (int i = 0; i < h; i++)
          w[lane][i] = load_word(lanes, trl_lanes_word_offset(h, lane, i));
      /* what each lane takes from the lanes below it (lower_bits) */
      for (int lane = 0; lane < 32; lane++) {
        const uint32_t *v = w[(lane + 31) % 32];
        if (h == 3) {
          const uint32_t *v2 = w[(lane + 30) % 32];
          trl_lanes_k15_prefix(v[0], v[1], v[2],
                               trl_lanes_k15_ends(v2[0], v2[1], v2[2]),
                               prev[lane]);
        } else {
          for (int k = 0; k < 4; k++)
            prev[lane][k] = tail_pair(v, h, k);
        }
      }
      for (int tau = 0; tau < 8; tau++) {
        uint16_t states[256];
        trl_tile_states_rate(tiles + tau * 8 * h, h, states);
        for (int lane = 0; lane < 32; lane++) {
          const uint32_t pk =
              prev[lane][h == 3 ? trl_lanes_k15_word(tau) : tau >> 1];
          const int top = h == 3 ? trl_lanes_k15_top(tau) : tau & 1;
          const uint32_t cross = trl_lanes_cross(h, tau, w[lane], pk, top);
          for (int j = 0; j < 8; j++) {
            const int o = h / 2 + trl_lanes_state_offset(h, j);
            uint32_t s; /* as window_states reads it */
            if (o < 16)
              s = (cross << o) >> 16;
            else
              s = field16(w[lane], 4 * h * tau + o - 16);
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
      cmocka_unit_test(test_bits),
      cmocka_unit_test(test_k15_ends),
      cmocka_unit_test(test_states),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
