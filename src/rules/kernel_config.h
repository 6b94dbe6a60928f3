/* SPDX-License-Identifier: Apache-2.0 */
/* What the plan and the kernels agree on: the kernel variants this build
 * has, the fused kernel's limits and rotation forms, and the reconstruct
 * kernels' forms. The plan's rules (rules/layout.h, rules/decision.h,
 * rules/gate.c) read it; src/cuda includes it for the kernels' template
 * parameters and the dispatch axes (cuda/dispatch.cuh). Pure C macros, no
 * CUDA: the plan side stays compilable without nvcc. The codebook facts come
 * from the one table, format/codebooks.h (C and CUDA alike). */
#ifndef TRL_PLAN_KERNEL_CONFIG_H
#define TRL_PLAN_KERNEL_CONFIG_H

#include "format/codebooks.h"
#include "trellis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- variants -- */
/* The values of each variant axis the GPU kernels are compiled for, as
 * comma-separated template arguments. A value added here is compiled into
 * every kernel family that has the axis (cuda/dispatch.cuh); a value asked
 * for at run time that is not listed is TRELLIS_ERR_UNSUPPORTED. */
#define TRL_GPU_BITS 1, 2, 3, 4, 5, 6, 7, 8
/* every codebook of the table (format/codebooks.h); a family's exists()
 * narrows it to the K each defines */
#define TRL_GPU_CODEBOOKS TRL_CODEBOOK_ENUMS
/* K of a pair's record1 the decode-GEMM is compiled for (0: a uniform
 * layer); the pair kinds themselves are format/pair.h's. */
#define TRL_GPU_BITS1 0, 2, 3, 4
/* 1: the half-integer rate K + 1/2 (a codebook's `half` column in
 * format/codebooks.h, K TRL_HALF_MIN_BITS .. TRL_HALF_MAX_BITS) */
#define TRL_GPU_HALF 0, 1
/* dtypes of the tensor-core operands (decoded weight, rotated input) */
#define TRL_GPU_COMPUTE_DTYPES TRELLIS_F16, TRELLIS_BF16
/* dtypes of x and y the rotation and output kernels read and write */
#define TRL_GPU_IO_DTYPES TRELLIS_F16, TRELLIS_BF16, TRELLIS_F32
/* 16-row blocks per CTA of the decode-GEMM and the fused kernel, in
 * increasing order, and their count (the plan keeps one entry per variant;
 * cuda/dispatch.cuh checks that the two agree). */
#define TRL_GPU_M_BLOCKS 1, 2, 4, 8
#define TRL_M_BLOCK_COUNT 4

/* Index of m_blocks in TRL_GPU_M_BLOCKS, or -1. */
static inline int trl_m_block_index(int m_blocks) {
  const int values[] = {TRL_GPU_M_BLOCKS};
  for (int i = 0; i < TRL_M_BLOCK_COUNT; ++i)
    if (values[i] == m_blocks)
      return i;
  return -1;
}

/* The m-block variant at index i (0 <= i < TRL_M_BLOCK_COUNT). */
static inline int trl_m_block_at(int i) {
  const int values[] = {TRL_GPU_M_BLOCKS};
  return values[i];
}

/* ------------------------------------------------------ fused kernel -- */
/* The one variant the fused small-M kernel exists for (the gate's rule). */
#define TRL_FUSED_BITS 6
#define TRL_FUSED_CODEBOOK TRELLIS_CB_MCG
/* Largest m: one CTA column holds 16 rows x the largest m-block. */
#define TRL_FUSED_MAX_M 128
/* Up to this many rows (one m-block) the kernel can rotate x inside every
 * CTA (`local`, see LocalRotation). */
#define TRL_FUSED_LOCAL_ROWS 8
/* CTAs of its one-m-block variant resident per SM (its launch bounds). */
#define TRL_FUSED_CTAS_PER_SM 3
/* Rows x k-blocks per CTA its up-front local rotation holds (kPreRows). */
#define TRL_FUSED_PRE_ROWS 20
/* Largest cluster prepare picks (the non-portable limit), for every
 * m-block variant. */
#define TRL_FUSED_MAX_CLUSTER 16

/* How the fused kernel rotates x: claims of 128-k blocks of the shared
 * rotated buffer, locally in every CTA as stages enter the ring, locally
 * before the ring, or not at all: a rotation kernel launched before it
 * fills the rotated buffer (PRE; the kernel is its dependent launch). The
 * launcher falls back to claims where the kernel cannot rotate locally
 * (more than one m-block or TRL_FUSED_LOCAL_ROWS rows, f32 x, x not on
 * 8-byte boundaries); a plan's decision record already says claims for f32
 * x (trl_layout_fused_rotation_for, rules/layout.h). */
typedef enum trl_fused_rotation {
  TRL_FUSED_CLAIMS = 0,
  TRL_FUSED_LOCAL = 1,
  TRL_FUSED_LOCAL_AHEAD = 2,
  TRL_FUSED_PRE = 3
} trl_fused_rotation;

/* ------------------------------------------------------- reconstruct -- */
/* The W_hat forms the reconstruct kernels write for the dense path (the
 * formulas: cuda/kernels.h, trl_launch_reconstruct): plain, with the
 * output rotation and svh folded in, or with the input rotation and suh
 * folded too. */
typedef enum trl_recon_form {
  TRL_RECON_PLAIN = 0,
  TRL_RECON_HAD = 1,
  TRL_RECON_FULL = 2
} trl_recon_form;

#ifdef __cplusplus
}
#endif

#endif
