/* SPDX-License-Identifier: Apache-2.0 */
/* Fused K6/MCG small-M path, host side: the per-plan flags and the
 * launch of a decision record (rules/decision.h). Needs no workspace. */
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

trellis_status trl_fused_run(const trellis_plan *plan, const trl_decision *d,
                             const void *x, int64_t m, void *y, void *rotated,
                             cudaStream_t stream) {
  if (d->input == TRL_INPUT_ROTATE) {
    /* x -> rotated by the input rotation kernel, then the fused kernel as
     * its dependent launch (the kernel waits for it before it reads the
     * rotated buffer) */
    const int err =
        trl_launch_h128(x, plan->desc.input_dtype, rotated, TRELLIS_F16,
                        plan->s_in, NULL, m, plan->w.k, plan->pp.pdl, stream);
    if (err)
      return trl_cuda_fail(err, "fused path: input rotation launch");
  }
  const int err = trl_launch_fused(
      plan->w.trellis, x, plan->desc.input_dtype, plan->s_in, plan->s_out,
      plan->w.bias, (uint16_t *)rotated, y, plan->desc.output_dtype,
      plan->locks, m, plan->w.k, plan->w.n, d->fused.m_blocks, d->fused.cluster,
      d->fused.rotation, d->pdl, stream);
  if (err)
    return trl_cuda_fail(err, "fused kernel launch");
  return TRELLIS_OK;
}
