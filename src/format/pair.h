/* SPDX-License-Identifier: Apache-2.0 */
/* Paired payloads (FORMAT.md §9.5): two 128-channel records of one layer,
 * split on the rate axis. Header-only (also __host__ __device__ under nvcc),
 * so the loader and the kernels share the rules without linking the
 * decoders.
 *
 * Memory: record r is an ordinary EXL3 tile array at K_r,
 *   rate axis n: [k/16][8][16*K_r], W_hat columns 128r .. 128r+127;
 *   rate axis k: [8][n/16][16*K_r], W_hat rows    128r .. 128r+127.
 * In a checkpoint both lie in one 1-D int16 payload record0 || record1, so
 * record1 starts orth*8*K0 words (orth = the other axis) after record0. */
#ifndef TRL_FORMAT_PAIR_H
#define TRL_FORMAT_PAIR_H

#include "trellis.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define TRL_PAIR_INLINE __host__ __device__ static inline
#else
#define TRL_PAIR_INLINE static inline
#endif

#define TRL_PAIR_CHANNELS 256 /* the rate axis */
#define TRL_PAIR_RECORD 128   /* channels per record */

/* 1 for a known kind other than NONE; the Ks are its two nibbles. */
TRL_PAIR_INLINE int trl_pair_kind_known(trellis_pair_kind kind) {
  switch (kind) {
  case TRELLIS_PAIR_P22:
  case TRELLIS_PAIR_P24:
  case TRELLIS_PAIR_P33:
  case TRELLIS_PAIR_P43:
  case TRELLIS_PAIR_P44:
    return 1;
  case TRELLIS_PAIR_NONE:
    break;
  }
  return 0;
}

TRL_PAIR_INLINE int trl_pair_bits0(trellis_pair_kind kind) {
  return ((unsigned)kind >> 4) & 15u;
}

TRL_PAIR_INLINE int trl_pair_bits1(trellis_pair_kind kind) {
  return (unsigned)kind & 15u;
}

/* int16 words of one record: orth/16 * 8 tiles of 16*K words. */
TRL_PAIR_INLINE uint64_t trl_pair_record_words(int64_t orth, int bits) {
  return (uint64_t)orth / 16u * 8u * 16u * (uint64_t)bits;
}

#ifdef __cplusplus
}
#endif

#endif
