/* SPDX-License-Identifier: Apache-2.0 */
/* Constants of the EXL3 format, written once for the CPU reference
 * (format/), the GPU kernels (cuda/) and the checkpoint reader (io/). Plain
 * macros: the header is C and CUDA alike. The bitrate range
 * (TRELLIS_MIN_BITS..TRELLIS_MAX_BITS), the tile edge (TRELLIS_TILE) and the
 * Hadamard block (TRELLIS_HBLOCK) are public and live in trellis.h. */
#ifndef TRL_FORMAT_CONSTANTS_H
#define TRL_FORMAT_CONSTANTS_H

#include "trellis.h"

/* States of the 16-bit trellis (entries of one codebook table). */
#define TRL_CODEBOOK_STATES 65536

/* Codebook multipliers (FORMAT.md §4.1): the state times the
 * multiplier (plus the increment for 3INST), modulo 2^32. The `mcg` and
 * `mul1` marker tensors hold theirs (format/codebooks.h). */
#define TRL_MUL_3INST 89226354u
#define TRL_ADD_3INST 64248484u
#define TRL_MUL_MCG 0xCBAC1FEDu
#define TRL_MUL_MUL1 0x83DCD12Du

/* 3INST and MCG: (x & mask) ^ xor gives two fp16 halves in [0.125, 2)
 * whose sum is the weight (one LOP3 on the GPU). */
#define TRL_LOP3_MASK 0x8FFF8FFFu
#define TRL_LOP3_XOR 0x3B603B60u

/* MUL1: fp16(ACC + bytesum(x)) * K_INV + BIAS, all fp16 bit patterns
 * (ACC = 1024.0, so ACC + S is exactly 1024 + S). */
#define TRL_MUL1_ACC 0x6400u
#define TRL_MUL1_K_INV 0x1EEEu /* 887/131072 */
#define TRL_MUL1_BIAS 0xC931u  /* -1329/128 */

/* r_scale = 1/sqrt(128) rounded to fp32 (bits and value): the H128 rotation
 * is the Sylvester Hadamard matrix times r_scale. */
#define TRL_R_SCALE_BITS 0x3DB504F3u
#define TRL_H128_SCALE 0.088388347648f

#endif
