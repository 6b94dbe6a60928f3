/* SPDX-License-Identifier: Apache-2.0 */
#include "rules/decision.h"

#include <string.h>

/* The fused cluster kernel's launch: its m-block variant, that variant's
 * cluster, how x is rotated for it, whether it is a dependent launch. */
static void decide_fused(const trl_path_plan *pp, const trl_layout_params *lp,
                         int64_t m, trl_decision *d) {
  d->family = TRL_FAMILY_FUSED;
  d->fused.m_blocks = trl_layout_m_blocks(m);
  const int mbi = trl_m_block_index(d->fused.m_blocks);
  d->fused.cluster = mbi >= 0 ? lp->fused_cluster[mbi] : 0;
  const trl_fused_rotation rule =
      trl_layout_fused_rotation(m, lp->k, lp->n, d->fused.cluster, lp->sm_count,
                                (pp->flags & TRELLIS_PLAN_LEGACY_KERNELS) != 0);
  d->fused.rotation = trl_layout_fused_rotation_for(rule, pp->input_dtype);
  if (d->fused.rotation == TRL_FUSED_PRE) {
    /* x rotated into the rotated buffer first; the kernel is its
     * dependent launch (it waits before it reads that buffer) */
    d->input = TRL_INPUT_ROTATE;
    d->pdl = pp->pdl;
  } else {
    d->pdl = pp->pdl && trl_layout_fused_pdl(lp->k, d->fused.cluster);
  }
}

/* The dense path: which folds its W_hat takes, its algorithm, and what
 * runs before and after cuBLASLt. */
static void decide_dense(const trl_path_plan *pp, const trl_layout_params *lp,
                         int64_t m, trl_decision *d) {
  d->family = TRL_FAMILY_DENSE;
  const int fold_in = trl_layout_dense_folds_input(lp, m);
  d->input = pp->has_h128 ? TRL_INPUT_EXTERNAL
             : fold_in    ? TRL_INPUT_NONE
                          : TRL_INPUT_ROTATE;
  d->dense.form = pp->has_h128 || pp->half || pp->kmajor ? TRL_RECON_PLAIN
                  : fold_in                              ? TRL_RECON_FULL
                                                         : TRL_RECON_HAD;
  const int64_t first = trl_path_dense_first_bucket(pp);
  d->dense.bucket =
      first > 0 ? trl_layout_dense_bucket(first, m) : TRL_DENSE_BUCKETS;
  /* cuBLASLt writes y (rotations and svh folded); a half rate's or a
   * k-major payload's plain W_hat takes the generic output stage */
  d->output = lp->dense_direct         ? TRL_OUTPUT_NONE
              : pp->has_h128           ? TRL_OUTPUT_EXTERNAL
              : pp->half || pp->kmajor ? TRL_OUTPUT_ROTATE
                                       : TRL_OUTPUT_BIAS;
}

int trl_decide(const trl_path_plan *pp, const trl_layout_params *lp, int64_t m,
               trl_decision *out) {
  memset(out, 0, sizeof *out);
  /* the path (rules/path.h), then the register-direct kernel's shape,
   * computed once for both the family and the launch */
  out->path = trl_path_for(pp, m, &out->gate);
  trl_direct_grid grid;
  const int direct = trl_layout_direct_launch(lp, out->path, m, &grid);
  if (direct) {                      /* GENERIC rows the direct kernel takes */
    out->family = TRL_FAMILY_DIRECT; /* it rotates x, it writes y */
    out->pdl = pp->pdl;
  } else if (pp->kmajor && out->path == TRELLIS_PATH_GENERIC) {
    out->family = TRL_FAMILY_KMAJOR; /* it rotates x; its finish writes y */
    out->pdl = pp->pdl;
  } else if (out->path == TRELLIS_PATH_FUSED) {
    decide_fused(pp, lp, m, out);
  } else if (out->path == TRELLIS_PATH_DENSE) {
    decide_dense(pp, lp, m, out);
  } else {
    out->family = TRL_FAMILY_GEMM;
    out->input = pp->has_h128 ? TRL_INPUT_EXTERNAL : TRL_INPUT_ROTATE;
    out->output = pp->has_h128 ? TRL_OUTPUT_EXTERNAL : TRL_OUTPUT_ROTATE;
    out->pdl = pp->pdl;
  }
  return trl_layout_sizes(lp, out->path, m,
                          out->family == TRL_FAMILY_DIRECT ? &grid : NULL,
                          &out->layout);
}

void trl_decision_sizes(const trl_decision *d, trellis_buffer_sizes *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->path = d->path;
  out->rotated_bytes = d->layout.rotated_bytes;
  out->input_f16_bytes = d->layout.input_f16_bytes;
  out->output_f16_bytes = d->layout.output_f16_bytes;
  out->workspace_bytes = d->layout.workspace_bytes;
}
