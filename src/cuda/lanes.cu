/* SPDX-License-Identifier: Apache-2.0 */
/* The lane layouts on the device: the repack of a checkpoint tile array
 * (FORMAT.md, "The lane layout" and "The k-major lane layout";
 * format/lanes.c is the host reference). One warp per group: it stages the
 * group's 8 tiles in shared memory, then each lane writes its H words, so
 * the lane layout's repack may run in place. Run once per weight (upload,
 * trellis_weight_repack), never on a hot path. */
#include "common.cuh"
#include "format/lanes.h"
#include "kernels.h"

#include <cuda_runtime.h>

namespace {

constexpr int kWarps = 4;

/* `len` (1..32) ring bits of a tile from bit p, most significant first,
 * right-aligned. */
__device__ uint32_t ring_bits(const uint32_t *tile, int words, int p, int len) {
  const int i = p >> 5;
  const uint64_t hi = tile[i];
  const uint64_t lo = i + 1 < words ? tile[i + 1] : 0u;
  const uint64_t v = ((hi << 32) | lo) << (p & 31);
  return (uint32_t)(v >> (64 - len));
}

/* Group g's 8 tiles: those of one tile row (the lane layout: the group's
 * own bytes, so the repack may run in place), or with `ntiles` > 0 (the
 * k-major layout, never in place) tiles [8 kg + t][nt] of g = kg ntiles +
 * nt. */
__global__ void __launch_bounds__(32 * kWarps)
    repack_lanes_kernel(const uint32_t *src, uint32_t *dst, int64_t groups,
                        int h, int64_t ntiles) {
  __shared__ uint32_t stage[kWarps][32 * 16];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t g = (int64_t)blockIdx.x * kWarps + warp;
  if (g >= groups)
    return;
  const int group_words = 32 * h, tile_words = 4 * h, span = 4 * h;
  uint32_t *s = stage[warp];
  if (ntiles > 0) {
    const int64_t kg = g / ntiles, nt = g % ntiles;
    for (int i = lane; i < group_words; i += 32) {
      const int64_t t = i / tile_words;
      s[i] = src[((8 * kg + t) * ntiles + nt) * tile_words + i % tile_words];
    }
  } else {
    const uint32_t *gs = src + g * group_words;
    for (int i = lane; i < group_words; i += 32)
      s[i] = gs[i];
  }
  __syncwarp();
  uint32_t *gd = dst + g * group_words;
  for (int w = 0; w < h; ++w) {
    /* string bits [32 w, 32 w + 32) of this lane: pieces of its spans */
    uint32_t word = 0;
    int p = 32 * w, got = 0;
    while (got < 32) {
      const int t = p / span, b = p % span;
      const int len = min(32 - got, span - b);
      word = (uint32_t)(((uint64_t)word << len) |
                        ring_bits(s + t * tile_words, tile_words,
                                  lane * span + b, len));
      got += len;
      p += len;
    }
    gd[trl_lanes_word_offset(h, lane, w) / 4] = word;
  }
}

/* groups of 8 tiles, ntiles as repack_lanes_kernel takes it */
int launch_repack(const int16_t *src, int16_t *dst, int64_t groups, int h,
                  int64_t ntiles, void *stream) {
  if (groups <= 0)
    return 0;
  const int64_t blocks = (groups + kWarps - 1) / kWarps;
  repack_lanes_kernel<<<(unsigned)blocks, 32 * kWarps, 0,
                        (cudaStream_t)stream>>>(
      reinterpret_cast<const uint32_t *>(src),
      reinterpret_cast<uint32_t *>(dst), groups, h, ntiles);
  return (int)cudaGetLastError();
}

} // namespace

extern "C" int trl_launch_repack_lanes(const int16_t *src, int16_t *dst,
                                       int64_t k, int64_t n, int h,
                                       void *stream) {
  return launch_repack(src, dst, (k / 16) * (n / 128), h, 0, stream);
}

extern "C" int trl_launch_repack_kmajor(const int16_t *src, int16_t *dst,
                                        int64_t k, int64_t n, int h,
                                        void *stream) {
  return launch_repack(src, dst, (k / 128) * (n / 16), h, n / 16, stream);
}
