/* Per-lane decode of one 16x16 trellis tile into mma.m16n8k16 B fragments.
 * Lane L decodes weights i = 8L + j (j = 0..7) of the tile, which the in-tile
 * permutation of the format places exactly at this lane's B-fragment slots:
 *   j = 0,1 -> rows 2q, 2q+1   (q = L % 4), column L/4
 *   j = 2,3 -> rows 2q+8, 2q+9, column L/4
 *   j = 4..7 -> the same rows, column L/4 + 8.
 * The tile's words are read from shared memory. */
#ifndef TRELLIS_CUDA_TILE_DECODE_CUH
#define TRELLIS_CUDA_TILE_DECODE_CUH

#include "common.cuh"

namespace trellis {

/* Shifted words needed to hold the lane's 7K + 16 bits, and raw words. */
template <int K> struct TileGeom {
  static constexpr int kWords = 8 * K; /* 32-bit words per tile */
  static constexpr int kNV = (7 * K + 16 + 31) / 32;
  static constexpr int kNW = kNV + 1;
};

/* The lane's 8 weights: u[j] holds weight 8L + j in its LOW half (the high
 * half is finite). Windows are cut with shifts: a variant that moved half of
 * them to the FMA pipe (multiplies by 2^r, mul.hi by 2^16) balanced the two
 * pipes but measured 19% slower on the H200 (RESULTS.md). */
template <int K, int CB, bool BF16>
__device__ __forceinline__ void
decode_tile_weights(const uint32_t *__restrict__ tile, int lane,
                    uint32_t (&u)[8]) {
  using G = TileGeom<K>;
  /* first stream bit of weight 8L's window, kept positive modulo 256K */
  const int start = (8 * lane * K + K - 16 + 256 * K) % (256 * K);
  const int s0 = start >> 5;
  const int o = start & 31;
  uint32_t w[G::kNW];
#pragma unroll
  for (int i = 0; i < G::kNW; ++i) {
    int idx = s0 + i;
    idx = idx >= G::kWords ? idx - G::kWords : idx;
    w[i] = tile[idx];
  }
  /* Stream words are MSB-first: shift the lane's bits to the top once. */
  uint32_t v[G::kNV];
#pragma unroll
  for (int i = 0; i < G::kNV; ++i)
    v[i] = __funnelshift_l(w[i + 1], w[i], o);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int q = K * j; /* compile-time after unrolling */
    const int bi = q >> 5, r = q & 31;
    uint32_t t;
    if (r == 0)
      t = v[bi];
    else if (r <= 16)
      t = v[bi] << r;
    else
      t = __funnelshift_l(v[bi + 1], v[bi], r);
    u[j] = decode_state<CB>(t >> 16);
    if constexpr (BF16)
      u[j] = f16lo_to_bf16lo(u[j]);
  }
}

/* b[0], b[1]: B fragment (rows 2q..2q+9) of column L/4; b[2], b[3]: of
 * column L/4 + 8. Fragment halves: low = even row. */
template <int K, int CB, bool BF16>
__device__ __forceinline__ void
decode_tile_frags(const uint32_t *__restrict__ tile, int lane,
                  uint32_t (&b)[4]) {
  uint32_t u[8];
  decode_tile_weights<K, CB, BF16>(tile, lane, u);
  /* Pack the low halves pairwise: (row 2q, row 2q+1), (2q+8, 2q+9). */
  b[0] = __byte_perm(u[0], u[1], 0x5410);
  b[1] = __byte_perm(u[2], u[3], 0x5410);
  b[2] = __byte_perm(u[4], u[5], 0x5410);
  b[3] = __byte_perm(u[6], u[7], 0x5410);
}

} // namespace trellis

#endif
