/* SPDX-License-Identifier: Apache-2.0 */
/* The lane layout (format/lanes.h): word offsets, the repack and its
 * inverse, and what the GPU kernels rely on: that a lane finds its states'
 * windows in its own words and the words of the lanes below it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "format/codebooks.h"
#include "format/lanes.h"
#include "format/tile.h"
#include "tools/synth.h"
#include "trellis.h"

static synth_rng rng = {0x1A2E5u};

static void fill_random(void *p, size_t bytes) {
  uint8_t *b = p;
  for (size_t i = 0; i < bytes; i++)
    b[i] = (uint8_t)synth_next(&rng);
}

/* Every byte of a group is one lane word's, exactly once, for every rate. */
static void test_word_offsets(void **state) {
  (void)state;
  for (int h = 2; h <= 16; h++) {
    static unsigned seen[128 * 16];
    memset(seen, 0, sizeof seen);
    for (int lane = 0; lane < 32; lane++)
      for (int w = 0; w < h; w++) {
        const int off = trl_lanes_word_offset(h, lane, w);
        assert_true(off >= 0 && off + 4 <= trl_lanes_group_bytes(h));
        assert_int_equal(off % 4, 0);
        for (int b = 0; b < 4; b++)
          seen[off + b]++;
      }
    for (int i = 0; i < trl_lanes_group_bytes(h); i++)
      assert_int_equal(seen[i], 1);
    /* a warp's loads: 16-byte quads, then 8-byte pairs, then words */
    for (int w = 0; w + 3 < 4 * (h / 4); w += 4)
      assert_int_equal(trl_lanes_word_offset(h, 5, w) % 16, 0);
  }
}

/* Repack then unpack gives the payload back, in place or not. */
static void test_round_trip(void **state) {
  (void)state;
  enum { K = 256, N = 256 };
  static int16_t src[K / 16 * N / 16 * 128], a[sizeof src / 2],
      b[sizeof src / 2];
  for (int h = 2; h <= 16; h++) {
    const size_t bytes = (size_t)(K / 16) * (N / 16) * 16 * (size_t)h;
    fill_random(src, bytes);
    assert_int_equal(trl_lanes_convert(src, a, K, N, h, 1), TRELLIS_OK);
    assert_true(memcmp(a, src, bytes) != 0);
    assert_int_equal(trl_lanes_convert(a, b, K, N, h, 0), TRELLIS_OK);
    assert_memory_equal(b, src, bytes);
    memcpy(b, src, bytes); /* in place */
    assert_int_equal(trl_lanes_convert(b, b, K, N, h, 1), TRELLIS_OK);
    assert_memory_equal(b, a, bytes);
  }
}

/* Bit p (MSB first) of a lane's string: word p / 32 at its offset. */
static unsigned lane_bit(const uint8_t *group, int h, int lane, int p) {
  const uint8_t *w = group + trl_lanes_word_offset(h, lane, p / 32);
  const uint32_t v = (uint32_t)w[0] | (uint32_t)w[1] << 8 |
                     (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
  return (v >> (31 - p % 32)) & 1u;
}

/* Bit q of lane L's window of tile t: the window starts prefix bits before
 * its span, in the spans of the lanes below it (lane 0 wraps to lane 31:
 * the tile's ring is tail-biting). */
static unsigned window_bit(const uint8_t *group, int h, int lane, int t,
                           int q) {
  const int span = 4 * h;
  int pos = lane * span - trl_lanes_prefix_bits(h) + q; /* ring position */
  pos = (pos + 32 * span) % (32 * span);
  return lane_bit(group, h, pos / span, t * span + pos % span);
}

/* Every state of every tile read from the lane layout at the offsets the
 * kernels use equals the format's own state, at every rate of the table:
 * K 1..8 and the half-integer K 1.5, 2.5, 3.5 (h 3, 5, 7). */
static void test_states_from_lanes(void **state) {
  (void)state;
  for (int h = 2; h <= 16; h++) {
    if (!trl_codebook_rate_valid(TRELLIS_CB_MUL1, trl_rate_bits(h),
                                 trl_rate_half(h)))
      continue;
    static int16_t tiles[8 * 128], lanes[8 * 128];
    fill_random(tiles, (size_t)trl_lanes_group_bytes(h));
    assert_int_equal(trl_lanes_convert(tiles, lanes, 16, 128, h, 1),
                     TRELLIS_OK);
    for (int t = 0; t < 8; t++) {
      uint16_t states[256];
      trl_tile_states_rate(tiles + t * trl_rate_tile_words(h), h, states);
      for (int lane = 0; lane < 32; lane++)
        for (int j = 0; j < 8; j++) {
          const int q = trl_lanes_state_offset(h, j);
          unsigned s = 0;
          for (int b = 0; b < 16; b++)
            s = s << 1 | window_bit((const uint8_t *)lanes, h, lane, t, q + b);
          assert_int_equal(s, states[8 * lane + j]);
        }
    }
  }
}

/* Bit p (MSB first) of a checkpoint tile's ring. */
static unsigned tile_bit(const uint8_t *tile, int p) {
  const uint8_t *w = tile + 4 * (p / 32);
  const uint32_t v = (uint32_t)w[0] | (uint32_t)w[1] << 8 |
                     (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
  return (v >> (31 - p % 32)) & 1u;
}

/* The k-major lane layout at every rate: lane L's span of tile t in group
 * (kg, nt) is the ring bits [4 H L, 4 H (L + 1)) of checkpoint tile
 * (8 kg + t, nt), and the same bits as the lane layout's group
 * (8 kg + t, nt / 8) holds in slot nt % 8 (what the measurement build's
 * device repack copies); bad records are refused. */
static void test_kmajor(void **state) {
  (void)state;
  enum { K = 256, N = 256, KT = K / 16, NT = N / 16 };
  static int16_t src[KT * NT * 128], km[sizeof src / 2], ln[sizeof src / 2];
  for (int h = 2; h <= 16; h++) {
    const int span = 4 * h, tile = 16 * h, group = trl_lanes_group_bytes(h);
    fill_random(src, (size_t)KT * NT * (size_t)tile);
    assert_int_equal(trl_lanes_kmajor(src, km, K, N, h), TRELLIS_OK);
    assert_int_equal(trl_lanes_convert(src, ln, K, N, h, 1), TRELLIS_OK);
    const uint8_t *s = (const uint8_t *)src, *k = (const uint8_t *)km,
                  *l = (const uint8_t *)ln;
    for (int kg = 0; kg < K / 128; kg++)
      for (int nt = 0; nt < NT; nt++)
        for (int t = 0; t < 8; t++)
          for (int lane = 0; lane < 32; lane++)
            for (int b = 0; b < span; b++) {
              const unsigned got =
                  lane_bit(k + (kg * NT + nt) * group, h, lane, t * span + b);
              const int kt = 8 * kg + t;
              assert_int_equal(
                  got, tile_bit(s + (kt * NT + nt) * tile, lane * span + b));
              assert_int_equal(got,
                               lane_bit(l + (kt * (N / 128) + nt / 8) * group,
                                        h, lane, (nt % 8) * span + b));
            }
  }
  assert_int_equal(trl_lanes_kmajor(src, km, 96, N, 8), TRELLIS_ERR_INTERNAL);
  assert_int_equal(trl_lanes_kmajor(src, src, K, N, 8), TRELLIS_ERR_INTERNAL);
  assert_int_equal(trl_lanes_kmajor(src, km, K, N, 17), TRELLIS_ERR_INTERNAL);
}

/* The host repack of a half-rate weight: rate 2 K = 5 half-bits. */
static void test_repack_host_half(void **state) {
  (void)state;
  static int16_t payload[256 * 128 * 5 / 32], out[sizeof payload / 2],
      ref[sizeof payload / 2];
  static uint16_t suh[256], svh[128];
  fill_random(payload, sizeof payload);
  for (int i = 0; i < 256; i++)
    suh[i] = 0x3C00;
  for (int i = 0; i < 128; i++)
    svh[i] = 0x3C00;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 256;
  w.n = 128;
  w.bits = 2;
  w.half = 1;
  w.codebook = TRELLIS_CB_MUL1;
  w.trellis = payload;
  w.suh = suh;
  w.svh = svh;
  assert_int_equal(trellis_weight_payload_bytes(&w), sizeof payload);
  assert_int_equal(trellis_weight_repack_host(&w, out, NULL), TRELLIS_OK);
  assert_int_equal(trl_lanes_convert(payload, ref, 256, 128, 5, 1), TRELLIS_OK);
  assert_memory_equal(out, ref, sizeof payload);
}

static void test_repack_host(void **state) {
  (void)state;
  static int16_t payload[2 * 16 * 8 * 128], out[sizeof payload / 2];
  static uint16_t suh[256], svh[256];
  fill_random(payload, sizeof payload);
  for (int i = 0; i < 256; i++)
    suh[i] = svh[i] = 0x3C00;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 256;
  w.n = 128;
  w.bits = 3;
  w.codebook = TRELLIS_CB_MCG;
  w.trellis = payload;
  w.suh = suh;
  w.svh = svh;
  assert_int_equal(trellis_weight_repack_host(&w, out, NULL), TRELLIS_OK);
  static int16_t ref[sizeof payload / 2];
  assert_int_equal(trl_lanes_convert(payload, ref, 256, 128, 6, 1), TRELLIS_OK);
  assert_memory_equal(out, ref, trellis_weight_payload_bytes(&w));
  trellis_clear_error();
  assert_int_equal(trellis_weight_repack_host(&w, NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  w.layout = TRELLIS_LAYOUT_LANES; /* already repacked */
  assert_int_equal(trellis_weight_repack_host(&w, out, NULL),
                   TRELLIS_ERR_LAYOUT);
  assert_non_null(strstr(trellis_last_error(), "checkpoint layout"));
}

/* The public repack into a named layout: LANES as above, KMAJOR as
 * trl_lanes_kmajor (never in place), CHECKPOINT and the layouts that
 * cannot hold the weight refused with their reasons. */
static void test_repack_host_layout(void **state) {
  (void)state;
  static int16_t payload[1024 * 128 / 2], out[sizeof payload / 2],
      ref[sizeof payload / 2];
  static uint16_t suh[1024], svh[128];
  for (int i = 0; i < 1024; i++)
    suh[i] = 0x3C00;
  for (int i = 0; i < 128; i++)
    svh[i] = 0x3C00;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 1024;
  w.n = 128;
  w.bits = 3;
  w.half = 1; /* K 3.5: an odd rate, the widest half-rate span */
  w.codebook = TRELLIS_CB_MUL1;
  w.trellis = payload;
  w.suh = suh;
  w.svh = svh;
  const size_t bytes = trellis_weight_payload_bytes(&w);
  assert_true(bytes <= sizeof payload);
  fill_random(payload, bytes);
  assert_int_equal(
      trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_KMAJOR, out, NULL),
      TRELLIS_OK);
  assert_int_equal(trl_lanes_kmajor(payload, ref, 1024, 128, 7), TRELLIS_OK);
  assert_memory_equal(out, ref, bytes);
  assert_int_equal(
      trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_LANES, out, NULL),
      TRELLIS_OK);
  assert_int_equal(trl_lanes_convert(payload, ref, 1024, 128, 7, 1),
                   TRELLIS_OK);
  assert_memory_equal(out, ref, bytes);
  /* k-major in place, or overlapping the source */
  trellis_clear_error();
  assert_int_equal(trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_KMAJOR,
                                                     payload, NULL),
                   TRELLIS_ERR_BUFFER);
  assert_non_null(strstr(trellis_last_error(), "in place"));
  assert_int_equal(trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_KMAJOR,
                                                     payload + 64, NULL),
                   TRELLIS_ERR_BUFFER);
  /* not a device layout */
  const trellis_layout bad[] = {TRELLIS_LAYOUT_CHECKPOINT, (trellis_layout)3,
                                (trellis_layout)-1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    trellis_clear_error();
    assert_int_equal(trellis_weight_repack_host_layout(&w, bad[i], out, NULL),
                     TRELLIS_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(trellis_last_error(), "device layout"));
  }
  /* the k-major layout holds no SQG codebook */
  w.half = 0;
  w.bits = 4;
  w.codebook = TRELLIS_CB_SQG_E4M3;
  trellis_clear_error();
  assert_int_equal(
      trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_KMAJOR, out, NULL),
      TRELLIS_ERR_UNSUPPORTED);
  assert_non_null(strstr(trellis_last_error(), "SQG"));
  assert_int_equal(
      trellis_weight_repack_host_layout(&w, TRELLIS_LAYOUT_LANES, out, NULL),
      TRELLIS_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_word_offsets),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_states_from_lanes),
      cmocka_unit_test(test_repack_host),
      cmocka_unit_test(test_repack_host_half),
      cmocka_unit_test(test_kmajor),
      cmocka_unit_test(test_repack_host_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
