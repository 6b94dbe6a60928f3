/* SPDX-License-Identifier: Apache-2.0 */
/* The gate between the fused K6/MCG small-M path and the generic path.
 * One pure function that plan and run share, so the path a plan reports for
 * m is the path run takes. */
#ifndef TRL_PLAN_GATE_H
#define TRL_PLAN_GATE_H

#include "rules/kernel_config.h"
#include "trellis.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trl_gate_input {
  int64_t m;
  int bits;
  int half; /* a half-integer rate: K = bits + 1/2 */
  trellis_codebook codebook;
  int paired; /* a pair payload (trellis_weight.pair is set) */
  trellis_dtype compute_dtype;
  int has_external_h128;   /* the caller owns the rotations */
  int fused_image_present; /* fused kernel image runs on this device */
  int forced;              /* forced launch configuration or path */
  int kmajor;              /* the payload is in the k-major layout */
} trl_gate_input;

/* Why the gate sent a call to the generic path (TRL_GATE_OPEN: fused). */
typedef enum trl_gate_reason {
  TRL_GATE_OPEN = 0,
  TRL_GATE_M_TOO_LARGE,
  TRL_GATE_BITS,
  TRL_GATE_CODEBOOK,
  TRL_GATE_PAIRED,
  TRL_GATE_COMPUTE_DTYPE,
  TRL_GATE_EXTERNAL_H128,
  TRL_GATE_NO_IMAGE,
  TRL_GATE_FORCED,
  TRL_GATE_LAYOUT
} trl_gate_reason;

trl_gate_reason trl_gate(const trl_gate_input *in);
const char *trl_gate_reason_text(trl_gate_reason reason);

#ifdef __cplusplus
}
#endif

#endif
