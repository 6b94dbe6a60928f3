/* SPDX-License-Identifier: Apache-2.0 */
#include "rules/path.h"

#include "format/codebooks.h"
#include "plan/direct_rules.h"

#include <string.h>

int64_t trl_path_dense_min_m(const trl_path_plan *p) {
  /* docs/TUNING.md, "Dense crossover" */
  if (p->kmajor)
    return TRL_KMAJOR_DENSE_MIN_M;
  return (p->cc_major == 9 && p->k >= 1024) ? 257 : 192;
}

const char *trl_path_kmajor_refusal(const trl_path_plan *p) {
  if (!p->fused_image)
    return "it needs an sm_90 device and image";
  if (p->compute_dtype != TRELLIS_F16)
    return "its compute dtype is fp16 only";
  if (p->has_h128)
    return "it rotates x itself (no external H128)";
  if (p->split_k != 0)
    return "it chooses its own k-splits (split_k 0)";
  if (p->flags & TRELLIS_PLAN_LEGACY_KERNELS)
    return "it has no legacy kernel (LEGACY_KERNELS)";
  if (p->flags & TRELLIS_PLAN_EXACT_WEIGHTS)
    return "it does not round to the fp16 W_hat (EXACT_WEIGHTS)";
  return NULL;
}

int trl_path_direct_eligible(const trl_path_plan *p) {
  return !p->kmajor && p->fused_image && p->compute_dtype == TRELLIS_F16 &&
         !p->has_h128 && p->split_k == 0 &&
         !(p->flags &
           (TRELLIS_PLAN_LEGACY_KERNELS | TRELLIS_PLAN_EXACT_WEIGHTS)) &&
         !trl_codebook_is_sqg((int)p->codebook) && !p->paired;
}

int trl_path_dense_direct(const trl_path_plan *p) {
  const trellis_dtype o = p->output_dtype, c = p->compute_dtype;
  if (p->has_h128 || p->half || p->kmajor) /* plain W_hat: a rotation after */
    return 0;
  if (p->has_bias) /* the bias is fp16: only an fp16 output takes it as is */
    return o == TRELLIS_F16 && c == TRELLIS_F16;
  return o == c || o == TRELLIS_F32;
}

int trl_path_dense_fold_input(const trl_path_plan *p) {
  return !p->has_h128 && !p->half && !p->kmajor &&
         p->input_dtype == p->compute_dtype;
}

int64_t trl_path_dense_first_bucket(const trl_path_plan *p) {
  if (p->flags & TRELLIS_PLAN_FORCE_DENSE)
    return 1;
  if (p->flags & TRELLIS_PLAN_FORCE_DECODE)
    return 0;
  return trl_path_dense_min_m(p);
}

trellis_path trl_path_for(const trl_path_plan *p, int64_t m,
                          trl_gate_reason *why) {
  trl_gate_input g;
  memset(&g, 0, sizeof g);
  g.m = m;
  g.bits = p->bits;
  g.half = p->half;
  g.codebook = p->codebook;
  g.paired = p->paired;
  g.compute_dtype = p->compute_dtype;
  g.has_external_h128 = p->has_h128;
  g.fused_image_present = p->fused_image;
  g.forced = (p->flags & TRELLIS_PLAN_FORCE_GENERIC) || p->split_k > 0;
  g.kmajor = p->kmajor;
  const trl_gate_reason r = trl_gate(&g);
  if (why)
    *why = r;
  if (r == TRL_GATE_OPEN)
    return TRELLIS_PATH_FUSED;
  if (p->flags & TRELLIS_PLAN_FORCE_DENSE)
    return TRELLIS_PATH_DENSE;
  if (!(p->flags & TRELLIS_PLAN_FORCE_DECODE) && m >= trl_path_dense_min_m(p))
    return TRELLIS_PATH_DENSE;
  return TRELLIS_PATH_GENERIC;
}
