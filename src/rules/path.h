/* SPDX-License-Identifier: Apache-2.0 */
/* The path rules a plan decides by, from its weight, its desc and its
 * device alone: the path for m (the gate, the dense crossover, the
 * half-integer rates' fallback), whether the register-direct kernel may
 * run the plan at all, the dense path's folds and its first algorithm
 * bucket. Pure C, no CUDA: plan create (plan/plan.c) and `info --plan
 * --gpu` (cli/cli_gpu_target.c) fill the same trl_path_plan, the decision
 * record (rules/decision.h) applies these functions for both, and
 * tests/test_gate.c tests them. */
#ifndef TRL_RULES_PATH_H
#define TRL_RULES_PATH_H

#include "rules/gate.h"
#include "trellis.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the rules read of a plan. */
typedef struct trl_path_plan {
  /* the weight */
  int64_t k;
  int bits, half;
  trellis_codebook codebook;
  int paired;   /* a pair payload (trellis_weight.pair is set) */
  int kmajor;   /* the payload is in the k-major layout */
  int has_bias; /* trellis_weight.bias is set */
  /* the desc */
  trellis_dtype input_dtype, output_dtype, compute_dtype;
  int has_h128; /* the caller owns the rotations (desc.h128) */
  int split_k;
  uint32_t flags; /* TRELLIS_PLAN_* */
  /* the device */
  int cc_major;
  int fused_image; /* an sm_90 device running an sm_90 image */
  int pdl;         /* kernels may be dependent launches (an sm_90 image, too) */
} trl_path_plan;

/* The smallest m the generic side sends to the dense path (unless forced):
 * 257 on Hopper with k >= 1024, where the wgmma decode-GEMM stays faster
 * up to two m-blocks, else 192 (docs/TUNING.md, "Dense crossover"); a
 * k-major payload TRL_KMAJOR_DENSE_MIN_M (its kernel decodes the weights
 * once per 32 rows). */
int64_t trl_path_dense_min_m(const trl_path_plan *p);

/* Whether a plan can read a k-major payload: fp16 compute, the library's
 * own rotations, an sm_90 image, no forced split, neither LEGACY_KERNELS
 * nor EXACT_WEIGHTS (the k-major kernel is a form of the register-direct
 * one). Plan create refuses the others (TRELLIS_ERR_LAYOUT); NULL or the
 * reason in words. */
const char *trl_path_kmajor_refusal(const trl_path_plan *p);

/* Whether the register-direct kernel may run the plan: fp16 compute, the
 * library's own rotations, an sm_90 image, an EXL3 codebook on a uniform
 * layer, no forced split and neither LEGACY_KERNELS nor EXACT_WEIGHTS (its
 * weights are not rounded to the fp16 W_hat). Whether it runs m rows is
 * trl_layout_direct's. */
int trl_path_direct_eligible(const trl_path_plan *p);

/* The dense path: whether cuBLASLt writes y itself (no fp32 partial; the
 * output rotation and svh folded into the weight), and whether the input
 * rotation may be folded too (x already in the compute dtype). Neither
 * with external rotations or a half-integer rate (plain W_hat). */
int trl_path_dense_direct(const trl_path_plan *p);
int trl_path_dense_fold_input(const trl_path_plan *p);

/* The m of the dense path's first cuBLASLt algorithm bucket
 * (trl_layout_dense_bucket): 1 under FORCE_DENSE, else the crossover; 0
 * where the plan never takes the dense path (FORCE_DECODE). */
int64_t trl_path_dense_first_bucket(const trl_path_plan *p);

/* The path for m rows: the gate (FUSED), then FORCE_DENSE, the dense
 * crossover (unless FORCE_DECODE), else GENERIC (the register-direct
 * kernel or the split-K decode-GEMM, which both take every rate, the
 * half-integer ones too). `why` (or NULL) receives the gate's reason. */
trellis_path trl_path_for(const trl_path_plan *p, int64_t m,
                          trl_gate_reason *why);

#ifdef __cplusplus
}
#endif

#endif
