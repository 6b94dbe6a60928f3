/* SPDX-License-Identifier: Apache-2.0 */
/* The lane layout on the host: the reference repack and its inverse
 * (FORMAT.md, "The lane layout"; the GPU's copy is cuda/lanes.cu). */
#include "format/lanes.h"

#include "core/internal.h"
#include "format/weight.h"

#include <stdint.h>
#include <string.h>

/* Word j of a bit string stored as little-endian 32-bit words. */
static uint32_t load_word(const uint8_t *p, size_t j) {
  const uint8_t *b = p + 4 * j;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
         (uint32_t)b[3] << 24;
}

static void store_word(uint8_t *p, size_t j, uint32_t v) {
  uint8_t *b = p + 4 * j;
  b[0] = (uint8_t)v;
  b[1] = (uint8_t)(v >> 8);
  b[2] = (uint8_t)(v >> 16);
  b[3] = (uint8_t)(v >> 24);
}

/* Bit `p` (0 = the first, most significant bit of word 0) of a string of
 * words read through `word`. */
static unsigned string_bit(uint32_t (*word)(const void *, size_t),
                           const void *s, size_t p) {
  return (word(s, p / 32) >> (31 - p % 32)) & 1u;
}

/* The two ways a group is read: as tiles (checkpoint) or as lane words. */
typedef struct lane_view {
  const uint8_t *group;
  int h, lane;
} lane_view;

static uint32_t tile_word(const void *tile, size_t j) {
  return load_word(tile, j);
}

static uint32_t lane_word(const void *view, size_t j) {
  const lane_view *v = view;
  return load_word(v->group,
                   (size_t)trl_lanes_word_offset(v->h, v->lane, (int)j) / 4);
}

/* Checkpoint group -> lane layout (dst must not overlap src). */
static void repack_group(const uint8_t *src, uint8_t *dst, int h) {
  const size_t span = 4u * (size_t)h, tile_bytes = 16u * (size_t)h;
  for (int lane = 0; lane < TRL_LANES_LANES; lane++) {
    uint32_t words[16] = {0};
    for (int t = 0; t < TRL_LANES_TILES; t++) {
      const uint8_t *tile = src + (size_t)t * tile_bytes;
      for (size_t b = 0; b < span; b++) {
        const size_t from = (size_t)lane * span + b, to = (size_t)t * span + b;
        if (string_bit(tile_word, tile, from))
          words[to / 32] |= 1u << (31 - to % 32);
      }
    }
    for (int w = 0; w < h; w++)
      store_word(dst, (size_t)trl_lanes_word_offset(h, lane, w) / 4, words[w]);
  }
}

/* Lane layout -> checkpoint group (dst must not overlap src). */
static void unpack_group(const uint8_t *src, uint8_t *dst, int h) {
  const size_t span = 4u * (size_t)h, tile_bytes = 16u * (size_t)h;
  memset(dst, 0, (size_t)trl_lanes_group_bytes(h));
  for (int lane = 0; lane < TRL_LANES_LANES; lane++) {
    const lane_view v = {src, h, lane};
    for (int t = 0; t < TRL_LANES_TILES; t++) {
      uint8_t *tile = dst + (size_t)t * tile_bytes;
      for (size_t b = 0; b < span; b++) {
        const size_t from = (size_t)t * span + b, to = (size_t)lane * span + b;
        if (string_bit(lane_word, &v, from)) {
          uint32_t w = load_word(tile, to / 32) | 1u << (31 - to % 32);
          store_word(tile, to / 32, w);
        }
      }
    }
  }
}

trellis_status trl_lanes_convert(const int16_t *src, int16_t *dst, int64_t k,
                                 int64_t n, int h, int to_lanes) {
  if (h < 2 || h > 16 || k <= 0 || n <= 0 || k % 16 || n % 128)
    return trl_fail(TRELLIS_ERR_INTERNAL,
                    "lanes: bad record (k %lld, n %lld, rate %d half-bits)",
                    (long long)k, (long long)n, h);
  const size_t group = (size_t)trl_lanes_group_bytes(h);
  const size_t groups = (size_t)(k / 16) * (size_t)(n / 128);
  uint8_t tmp[128 * 16];
  const uint8_t *s = (const uint8_t *)src;
  uint8_t *d = (uint8_t *)dst;
  for (size_t g = 0; g < groups; g++) {
    if (to_lanes)
      repack_group(s + g * group, tmp, h);
    else
      unpack_group(s + g * group, tmp, h);
    memcpy(d + g * group, tmp, group); /* src may equal dst */
  }
  return TRELLIS_OK;
}

trellis_status trl_lanes_kmajor(const int16_t *src, int16_t *dst, int64_t k,
                                int64_t n, int h) {
  if (h < 2 || h > 16 || k <= 0 || n <= 0 || k % 128 || n % 16 ||
      (const void *)src == (const void *)dst)
    return trl_fail(TRELLIS_ERR_INTERNAL,
                    "lanes: bad k-major record (k %lld, n %lld, rate %d "
                    "half-bits)",
                    (long long)k, (long long)n, h);
  const size_t group = (size_t)trl_lanes_group_bytes(h), tile = 16u * (size_t)h,
               ntiles = (size_t)(n / 16);
  uint8_t tiles[128 * 16];
  const uint8_t *s = (const uint8_t *)src;
  uint8_t *d = (uint8_t *)dst;
  for (size_t kg = 0; kg < (size_t)(k / 128); kg++)
    for (size_t nt = 0; nt < ntiles; nt++) {
      for (size_t t = 0; t < TRL_LANES_TILES; t++)
        memcpy(tiles + t * tile, s + ((8 * kg + t) * ntiles + nt) * tile, tile);
      repack_group(tiles, d + (kg * ntiles + nt) * group, h);
    }
  return TRELLIS_OK;
}

trellis_status trl_check_target_layout(const trellis_weight *w,
                                       trellis_layout layout, const char *who) {
  if (layout == TRELLIS_LAYOUT_LANES)
    return TRELLIS_OK;
  if (layout != TRELLIS_LAYOUT_KMAJOR)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: layout %d: expected TRELLIS_LAYOUT_LANES (1) or "
                    "TRELLIS_LAYOUT_KMAJOR (2), a device layout",
                    who, (int)layout);
  return trl_weight_kmajor_supported(w, who);
}

trellis_status trl_check_kmajor_out(const trellis_weight *w, const void *out,
                                    const char *who) {
  const uintptr_t x = (uintptr_t)w->trellis, y = (uintptr_t)out;
  const size_t bytes = trellis_weight_payload_bytes(w);
  if (x < y + bytes && y < x + bytes)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "%s: the k-major layout is not written in place (out "
                    "overlaps the payload)",
                    who);
  return TRELLIS_OK;
}

trellis_status trellis_weight_repack_host(const trellis_weight *w, int16_t *out,
                                          int16_t *out1) {
  return trellis_weight_repack_host_layout(w, TRELLIS_LAYOUT_LANES, out, out1);
}

trellis_status trellis_weight_repack_host_layout(const trellis_weight *w,
                                                 trellis_layout layout,
                                                 int16_t *out, int16_t *out1) {
  trellis_weight full;
  trellis_status st = trl_weight_load(w, &full);
  if (st == TRELLIS_OK)
    st = trl_weight_require_layout(&full, TRELLIS_LAYOUT_CHECKPOINT,
                                   "weight_repack_host");
  if (st == TRELLIS_OK)
    st = trl_check_target_layout(&full, layout, "weight_repack_host");
  if (st != TRELLIS_OK)
    return st;
  if (out == NULL || (full.pair != TRELLIS_PAIR_NONE && out1 == NULL))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight_repack_host: %s is NULL",
                    out == NULL ? "out" : "out1 (a pair's record1)");
  if (layout == TRELLIS_LAYOUT_KMAJOR) {
    if ((st = trl_check_kmajor_out(&full, out, "weight_repack_host")) !=
        TRELLIS_OK)
      return st;
    return trl_lanes_kmajor(full.trellis, out, full.k, full.n,
                            trl_lanes_rate(full.bits, full.half));
  }
  trl_record rec[2];
  const int count = trl_weight_records(&full, rec);
  for (int r = 0; r < count; r++) {
    st = trl_lanes_convert(rec[r].trellis, r == 0 ? out : out1, rec[r].k,
                           rec[r].n, trl_lanes_rate(rec[r].bits, full.half), 1);
    if (st != TRELLIS_OK)
      return st;
  }
  return TRELLIS_OK;
}
