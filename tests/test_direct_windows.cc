/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct kernel's window extraction (cuda/direct_windows.cuh),
 * run on the host: for every rate the kernel is built for, both forms of
 * its shifts and random groups, the 8 states each lane forms for each tile
 * from its lane words and what the lanes below it send equal the format's
 * states (trl_tile_states_rate). The kernel compiles this very header;
 * the host's byte permute and funnel shift are tested in
 * test_lanes_window.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cuda/direct_windows.cuh"
#include "format/codebooks.h"
#include "plan/direct_rules.h"
extern "C" { /* C headers without linkage blocks of their own */
#include <cmocka.h>

#include "format/tile.h"
#include "tools/synth.h"
}

namespace {

synth_rng rng = {0xD1C7u};

/* window16<R> is bits R..R+15 (MSB first) of x, for both shift forms. */
template <int R> void check_window16() {
  for (int i = 0; i < 1000; ++i) {
    const uint32_t x = (uint32_t)synth_next(&rng);
    const uint32_t want = (uint32_t)((uint64_t)x << R >> 16) & 0xFFFFu;
    assert_int_equal((trl::direct::window16<R, false>(x)), want);
    assert_int_equal((trl::direct::window16<R, true>(x)), want);
  }
  if constexpr (R < 16)
    check_window16<R + 1>();
}

void test_window16(void **) { check_window16<0>(); }

template <int H, int T, bool F>
void check_tile(const uint32_t (&w)[32][H], const uint32_t (&prev)[32][2 * H],
                const int16_t *tiles) {
  if constexpr (T < 8) {
    uint16_t states[256];
    trl_tile_states_rate(tiles + T * trl_rate_tile_words(H), H, states);
    for (int lane = 0; lane < 32; ++lane) {
      uint32_t s[8];
      trl::direct::tile_states<H, T, F>(w[lane], prev[lane], s);
      for (int j = 0; j < 8; ++j)
        if (s[j] != states[8 * lane + j])
          fail_msg("H %d tile %d lane %d state %d: %04x, want %04x (F %d)", H,
                   T, lane, j, (unsigned)s[j], (unsigned)states[8 * lane + j],
                   (int)F);
    }
    check_tile<H, T + 1, F>(w, prev, tiles);
  }
}

/* Random groups at rate H: the lane words as the kernel loads them (each
 * 4-byte word little-endian), the lanes below's sends put together as the
 * shuffles do, then every state of every tile, both shift forms. */
template <int H> void check_rate() {
  for (int g = 0; g < 64; ++g) {
    static int16_t tiles[8 * 128], lanes[8 * 128];
    uint8_t *b = reinterpret_cast<uint8_t *>(tiles);
    for (int i = 0; i < trl_lanes_group_bytes(H); ++i)
      b[i] = (uint8_t)synth_next(&rng);
    if (g == 0) /* all ones: every bit of every window read as 1 */
      memset(b, 0xFF, (size_t)trl_lanes_group_bytes(H));
    assert_int_equal(trl_lanes_convert(tiles, lanes, 16, 128, H, 1),
                     TRELLIS_OK);
    uint32_t w[32][H], prev[32][2 * H];
    trl::direct::LaneSends<H> sends[32];
    for (int lane = 0; lane < 32; ++lane) {
      for (int i = 0; i < H; ++i)
        memcpy(&w[lane][i],
               reinterpret_cast<const uint8_t *>(lanes) +
                   trl_lanes_word_offset(H, lane, i),
               4);
      sends[lane] = trl::direct::lane_sends<H>(w[lane]);
    }
    for (int lane = 0; lane < 32; ++lane)
      trl::direct::lane_receive<H>(sends[(lane + 31) & 31],
                                   sends[(lane + 30) & 31], prev[lane]);
    check_tile<H, 0, false>(w, prev, tiles);
    check_tile<H, 0, true>(w, prev, tiles);
  }
}

template <int... Hs> void check_rates() { (check_rate<Hs>(), ...); }

void test_every_rate(void **) { check_rates<TRL_DIRECT_RATES>(); }

} // namespace

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_window16),
      cmocka_unit_test(test_every_rate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
