/* SPDX-License-Identifier: Apache-2.0 */
/* SQG codebooks of the b12x formats (FORMAT.md §9.2-§9.4): the 16-bit trellis
 * state of a weight goes through a bijective "graph" to a 16-bit rank (a
 * quantile position), and the rank to an fp16 value through one small table.
 * Unlike 3INST/MCG/MUL1 the value depends on K (the graph splits the state
 * into history and newest symbol).
 *
 * Per weight, for a tile at K bits (state = the EXL3 tail-biting window):
 *   rank  = trl_sqg_rank(state, K)           one IMAD plus shifts/xors
 *   sqg_e4m3 (K 2..6):  value = T12_F16[rank >> 4]
 *   sqg_fp16 (K 5..6):  idx = trl_sqg_d3l_index(rank, &x, &neg);
 *                       value = fma_rn_f16(D3L[idx].slope, (fp16)x,
 *                                          D3L[idx].base) | neg << 15
 * (For K 5 and 6 the graph's xorshifts are identities; the code keeps them,
 * they cost nothing on the CPU.)
 *
 * Tables, built once at first use and checked by SHA-256 (thread-safe).
 * Plain little-endian arrays a kernel can copy to shared (or constant)
 * memory as they are; the indices differ across a warp, which shared
 * memory serves without serialising:
 *   trl_sqg_t12()      uint8_t  [4096]     E4M3 codes (OCP e4m3fn), 4 KiB,
 *                                              generated from the frozen
 *                                              STAIRCASE constants
 *   trl_sqg_t12_f16()  uint16_t [4096]     the same codes as fp16 bits
 *                                              (exact), 8 KiB
 *   trl_sqg_d3l()      uint16_t [104][2]   fp16 bits (base, slope) of the
 *                                              D3L segments, 416 B, embedded
 * The CPU decoders use 65536-entry per-K state tables built from these
 * (trl_sqg_state_table). The helpers below are plain integer code, also
 * compiled as __host__ __device__ by nvcc, so a kernel computes the same
 * rank and the same descriptor index as the CPU reference. */
#ifndef TRL_FORMAT_SQG_H
#define TRL_FORMAT_SQG_H

#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__CUDACC__)
#define TRL_SQG_INLINE __host__ __device__ static inline
#else
#define TRL_SQG_INLINE static inline
#endif

/* The graph's multiplier and increment (§9.2). */
#define TRL_SQG_A 0x3FA7D929u
#define TRL_SQG_C 0xC928FD8Eu

#define TRL_SQG_T12_SIZE 4096
#define TRL_SQG_D3L_COUNT 104

/* SHA-256 of the 65536 exact staircase labels in rank order (§9.3), of T12
 * (§9.3) and of the 416 D3L bytes (§9.4; b12x's descriptor_sha256). */
#define TRL_SQG_LABELS_SHA256                                                  \
  "4ccef33598b9a772a6c48023030d87c46501255858077eab4561657ffe63a4b0"
#define TRL_SQG_T12_SHA256                                                     \
  "cca11fe5744c9c93a34f4217f342fbc0f74ecc8a007c076582424a505fc9da5e"
#define TRL_SQG_D3L_SHA256                                                     \
  "17cf4ca9ef1e3a07c3354c12f7ac887b4e081b1668bea61eb37d8f2b410bb968"

/* The low `bits` bits of v in reverse order. */
TRL_SQG_INLINE uint32_t trl_sqg_bitrev(uint32_t v, int bits) {
  uint32_t r = 0;
  for (int i = 0; i < bits; i++)
    r |= ((v >> i) & 1u) << (bits - 1 - i);
  return r;
}

/* §9.2: state -> rank, a permutation of 0..65535 for each K in 2..6. Only the
 * low 16 bits of `state` are used. */
TRL_SQG_INLINE uint32_t trl_sqg_rank(uint32_t state, int bits) {
  const int width = 16 - bits;
  const uint32_t hmask = (1u << width) - 1u;
  const uint32_t history = (state & 0xFFFFu) >> bits;
  const uint32_t branch = state & ((1u << bits) - 1u);
  uint32_t mixed = history ^ (history >> 11);
  mixed ^= (mixed << 11) & hmask; /* two width-limited xorshifts */
  const uint32_t product = TRL_SQG_A * mixed + TRL_SQG_C;
  const uint32_t phase = product & hmask;
  const uint32_t syndrome = product >> (32 - bits);
  const uint32_t stratum = trl_sqg_bitrev(branch, bits) ^ syndrome;
  return (stratum << width) | phase;
}

/* §9.4: the D3L descriptor of a rank, the offset x (0..2047, exact in fp16)
 * inside its segment and the sign (1 = negative). */
TRL_SQG_INLINE uint32_t trl_sqg_d3l_index(uint32_t rank, uint32_t *x,
                                          uint32_t *negative) {
  const uint32_t neg = rank < 0x8000u;
  uint32_t m = rank & 0x7FFFu;
  if (neg)
    m ^= 0x7FFFu;                     /* 0 = smallest magnitude on both sides */
  const uint32_t v = 65535u - 2u * m; /* odd, 1 = largest magnitude */
  uint32_t e = 0;                     /* floor(log2 v), GPU: bfind */
  while ((v >> (e + 1)) != 0)
    e++;
  const uint32_t d = v - (1u << e);
  *negative = neg;
  if (e <= 3) { /* v < 16: one descriptor per value (v = 1 -> idx 0) */
    *x = 0;
    return e == 0 ? 0u : (1u << (e - 1)) + ((d - 1u) >> 1);
  }
  const uint32_t s = e - 3, sub = d >> s; /* 8 segments per octave */
  const uint32_t top = (1u << e) + (sub << s) + (1u << s) - 1u;
  *x = (top - v) >> 1;
  return 8u * s + sub;
}

/* The tables (see the top of this file); NULL when a check failed, with
 * the reason from trl_sqg_tables_status(). */
const uint8_t *trl_sqg_t12(void);
const uint16_t *trl_sqg_t12_f16(void);
const uint16_t *trl_sqg_d3l(void);
/* TRELLIS_OK once the tables are built and their hashes match, else
 * TRELLIS_ERR_INTERNAL with the failed check as the detail message. */
trellis_status trl_sqg_tables_status(void);

/* The 65536-entry state -> value table of a valid SQG (cb, bits), as fp16
 * bits or as fp32; NULL for any other (cb, bits) or when the tables failed
 * their checks. */
const uint16_t *trl_sqg_state_table(trellis_codebook cb, int bits);
const float *trl_sqg_state_table_f32(trellis_codebook cb, int bits);

/* The GPU decode-GEMM's state -> value table of a valid SQG (cb, bits):
 * the E4M3 code of every state (sqg_e4m3, 65536 bytes) or its fp16 bits
 * (sqg_fp16, 65536 little-endian uint16), written to out unless it is
 * NULL. Returns its size in bytes; 0 (nothing written) for any other
 * (cb, bits) or when the tables failed their checks. */
size_t trl_sqg_kernel_table(trellis_codebook cb, int bits, void *out);

/* fp16 bits of an SQG codebook's value at `bits`, given a valid (cb, bits);
 * the tables must be ready. The value never is NaN, inf or -0. */
uint16_t trl_sqg_value(trellis_codebook cb, int bits, uint32_t state);

/* fp16 bits of an E4M3 code (exact; never called with a NaN code). */
uint16_t trl_e4m3_to_f16(uint8_t code);

#ifdef __cplusplus
}
#endif

#endif
