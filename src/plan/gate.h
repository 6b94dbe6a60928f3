/* The gate between the fused K6/MCG small-M path and the generic path.
 * One pure function that plan and run share, so the path a plan reports for
 * m is the path run takes. */
#ifndef TRELLIS_PLAN_GATE_H
#define TRELLIS_PLAN_GATE_H

#include "plan/kernel_config.h"
#include "trellis.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trellis_gate_input {
  int64_t m;
  int bits;
  trellis_codebook codebook;
  int paired; /* a pair payload (trellis_weight.pair is set) */
  trellis_dtype compute_dtype;
  int has_external_h128;   /* the caller owns the rotations */
  int fused_image_present; /* fused kernel image runs on this device */
  int forced;              /* forced launch configuration or path */
} trellis_gate_input;

/* Why the gate sent a call to the generic path (TRELLIS_GATE_OPEN: fused). */
typedef enum trellis_gate_reason {
  TRELLIS_GATE_OPEN = 0,
  TRELLIS_GATE_M_TOO_LARGE,
  TRELLIS_GATE_BITS,
  TRELLIS_GATE_CODEBOOK,
  TRELLIS_GATE_PAIRED,
  TRELLIS_GATE_COMPUTE_DTYPE,
  TRELLIS_GATE_EXTERNAL_H128,
  TRELLIS_GATE_NO_IMAGE,
  TRELLIS_GATE_FORCED
} trellis_gate_reason;

trellis_gate_reason trellis_gate(const trellis_gate_input *in);
const char *trellis_gate_reason_text(trellis_gate_reason reason);

#ifdef __cplusplus
}
#endif

#endif
