/* SPDX-License-Identifier: Apache-2.0 */
/* The decision record: what trellis_run does for m rows of a plan, decided
 * once by the pure rules (the gate and the path: rules/path.h; the
 * kernels, the buffers and the launch shapes: rules/layout.h,
 * plan/direct_rules.h) and executed by run without asking them again.
 * trellis_plan_query reports its buffer sizes (trl_decision_sizes), and
 * `info --plan --gpu` (cli/cli_gpu_target.c) fills it from the same rules
 * for a named GPU. Pure C, no CUDA; tests/test_gate.c holds each field to
 * the rule it comes from. */
#ifndef TRL_RULES_DECISION_H
#define TRL_RULES_DECISION_H

#include "rules/gate.h"
#include "rules/kernel_config.h"
#include "rules/layout.h"
#include "rules/path.h"
#include "trellis.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What computes the product. */
typedef enum trl_family {
  TRL_FAMILY_FUSED = 0,  /* the fused cluster kernel (fused path) */
  TRL_FAMILY_DIRECT = 1, /* the register-direct kernel (fused, generic) */
  TRL_FAMILY_GEMM = 2,   /* the split-K decode-GEMM (generic path) */
  TRL_FAMILY_DENSE = 3,  /* W_hat slices and cuBLASLt (dense path) */
  TRL_FAMILY_KMAJOR = 4  /* the k-major kernel (generic path of a k-major
                          * payload) */
} trl_family;

/* How x reaches it. */
typedef enum trl_input_step {
  TRL_INPUT_NONE = 0,    /* it reads x: it rotates x itself, or the dense
                          * path folds the rotation into its weight */
  TRL_INPUT_ROTATE = 1,  /* the input-rotation kernel fills the rotated
                          * buffer (trl_launch_h128) before it */
  TRL_INPUT_EXTERNAL = 2 /* the caller's rotation (desc.h128) fills it */
} trl_input_step;

/* What turns its output into y. */
typedef enum trl_output_step {
  TRL_OUTPUT_NONE = 0,     /* it writes y */
  TRL_OUTPUT_ROTATE = 1,   /* the output stage: the fp32 partials summed in
                            * split order, rotated, scaled, biased
                            * (trl_launch_rot_out) */
  TRL_OUTPUT_EXTERNAL = 2, /* the partials summed (trl_launch_reduce, where
                            * splits > 1), the caller's rotation, then bias
                            * and dtype (trl_launch_bias_convert) */
  TRL_OUTPUT_BIAS = 3      /* bias and dtype of the fp32 GEMM output, the
                            * rotation folded into the weight
                            * (trl_launch_bias_convert) */
} trl_output_step;

typedef struct trl_decision {
  trellis_path path;
  trl_gate_reason gate; /* why the gate opened (FUSED) or not */
  trl_family family;
  trl_input_step input;
  trl_output_step output;
  /* the family's kernel is a programmatic dependent launch (FUSED, DIRECT,
   * GEMM; DENSE's reconstruct and cuBLASLt never are). The input and
   * output rotation kernels are wherever the device allows
   * (trl_path_plan.pdl). */
  int pdl;
  /* the buffers (sizes and workspace offsets) and the shapes: splits,
   * kt_per_split and m_blocks (GEMM), direct_grid and the splits' partials
   * (DIRECT), kmajor_grid and its partials (KMAJOR), slice_n (DENSE);
   * trl_layout_sizes for `path` */
  trl_layout layout;
  struct {
    int m_blocks; /* trl_layout_m_blocks */
    int cluster;  /* trl_layout_params.fused_cluster of that variant */
    /* trl_layout_fused_rotation, for x's dtype
     * (trl_layout_fused_rotation_for) */
    trl_fused_rotation rotation;
  } fused; /* FUSED only */
  struct {
    trl_recon_form form; /* W_hat's folds (the input's: input NONE) */
    int bucket;          /* its cuBLASLt algorithm (trl_layout_dense_bucket) */
  } dense;               /* DENSE only */
} trl_decision;

/* The record of m rows (1 <= m) for a plan's path rules' inputs `pp` and
 * layout parameters `lp`. The register-direct kernel's shape is computed
 * once. The fused kernel's cluster is prepare's choice: before prepare
 * (lp->fused_cluster 0) the fused fields say so, the sizes do not change.
 * Returns 0 when the buffer sizes overflow. */
int trl_decide(const trl_path_plan *pp, const trl_layout_params *lp, int64_t m,
               trl_decision *out);

/* The caller buffers the record needs, as trellis_plan_query reports them
 * (struct_size set, the path, every size). */
void trl_decision_sizes(const trl_decision *d, trellis_buffer_sizes *out);

#ifdef __cplusplus
}
#endif

#endif
