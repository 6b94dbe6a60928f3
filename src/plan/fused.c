/* SPDX-License-Identifier: Apache-2.0 */
/* Fused K6/MCG small-M path, host side: the per-plan flags and the
 * launch. Needs no workspace. */
#include "plan/plan_internal.h"
#include "cuda/kernels.h"

/* One state per 128-k block of the input rotation, then a done counter. */
size_t trl_fused_lock_count(const trellis_weight *w) {
  return (size_t)(w->k / 128) + 1;
}

trellis_status trl_fused_prepare(trellis_plan *plan) {
  int err = trl_fused_prepare_kernels(
      plan->w.k, plan->w.n, plan->lp.fused_cluster, plan->fused_waves);
  if (err)
    return trl_cuda_fail(err, "plan prepare (fused kernel attributes)");
  return TRELLIS_OK;
}

trellis_status trl_fused_run(const trellis_plan *plan, const void *x, int64_t m,
                             void *y, void *rotated, cudaStream_t stream) {
  const int mb = trl_layout_m_blocks(m);
  const int cluster = plan->lp.fused_cluster[trl_m_block_index(mb)];
  const trl_fused_rotation rotation = trl_layout_fused_rotation(
      m, plan->w.k, plan->w.n, cluster, plan->sm_count,
      !!(plan->desc.flags & TRELLIS_PLAN_LEGACY_KERNELS));
  int pdl = plan->pdl && trl_layout_fused_pdl(plan->w.k, cluster);
  if (rotation == TRL_FUSED_PRE) {
    /* x -> rotated by the input rotation kernel, then the fused kernel as
     * its dependent launch (the kernel waits for it before it reads the
     * rotated buffer) */
    const int err =
        trl_launch_h128(x, plan->desc.input_dtype, rotated, TRELLIS_F16,
                        plan->s_in, NULL, m, plan->w.k, plan->pdl, stream);
    if (err)
      return trl_cuda_fail(err, "fused path: input rotation launch");
    pdl = plan->pdl;
  }
  const int err = trl_launch_fused(
      plan->w.trellis, x, plan->desc.input_dtype, plan->s_in, plan->s_out,
      plan->w.bias, (uint16_t *)rotated, y, plan->desc.output_dtype,
      plan->locks, m, plan->w.k, plan->w.n, mb, cluster, rotation, pdl, stream);
  if (err)
    return trl_cuda_fail(err, "fused kernel launch");
  return TRELLIS_OK;
}
