/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection into trellis_plan_prepare, for the tests of its ownership
 * rule (a failed prepare leaves nothing allocated, a retry starts clean). */
#ifndef TRL_PLAN_PREPARE_FAULT_H
#define TRL_PLAN_PREPARE_FAULT_H

#include "trellis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The steps of prepare after which a failure can be injected; each later
 * one has acquired more (plan memory, then kernel attributes, then the
 * cuBLASLt handle of plans that may take the dense path). */
typedef enum trl_prepare_step {
  TRL_PREPARE_STEP_NONE = 0,
  TRL_PREPARE_AFTER_MEMORY = 1,
  TRL_PREPARE_AFTER_FUSED = 2,
  TRL_PREPARE_AFTER_DENSE = 3
} trl_prepare_step;

/* The next trellis_plan_prepare of `plan` fails with TRELLIS_ERR_INTERNAL
 * right after `step` (once; STEP_NONE cancels). */
void trl_plan_inject_prepare_failure(trellis_plan *plan, trl_prepare_step step);

#ifdef __cplusplus
}
#endif

#endif
