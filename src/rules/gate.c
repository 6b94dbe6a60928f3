/* SPDX-License-Identifier: Apache-2.0 */
#include "rules/gate.h"

trl_gate_reason trl_gate(const trl_gate_input *in) {
  if (in->m < 1 || in->m > TRL_FUSED_MAX_M)
    return TRL_GATE_M_TOO_LARGE;
  if (in->bits != TRL_FUSED_BITS || in->half)
    return TRL_GATE_BITS;
  if (in->codebook != TRL_FUSED_CODEBOOK)
    return TRL_GATE_CODEBOOK;
  if (in->paired)
    return TRL_GATE_PAIRED;
  if (in->compute_dtype != TRELLIS_F16)
    return TRL_GATE_COMPUTE_DTYPE;
  if (in->has_external_h128)
    return TRL_GATE_EXTERNAL_H128;
  if (!in->fused_image_present)
    return TRL_GATE_NO_IMAGE;
  if (in->kmajor)
    return TRL_GATE_LAYOUT;
  if (in->forced)
    return TRL_GATE_FORCED;
  return TRL_GATE_OPEN;
}

const char *trl_gate_reason_text(trl_gate_reason reason) {
  switch (reason) {
  case TRL_GATE_OPEN:
    return "fused path";
  case TRL_GATE_M_TOO_LARGE:
    return "m is outside 1..128";
  case TRL_GATE_BITS:
    return "bits is not 6 (a half-integer rate never is)";
  case TRL_GATE_CODEBOOK:
    return "codebook is not MCG";
  case TRL_GATE_PAIRED:
    return "paired payload";
  case TRL_GATE_COMPUTE_DTYPE:
    return "compute dtype is not fp16";
  case TRL_GATE_EXTERNAL_H128:
    return "external H128 callback";
  case TRL_GATE_NO_IMAGE:
    return "fused kernel not compiled for this device";
  case TRL_GATE_FORCED:
    return "forced configuration";
  case TRL_GATE_LAYOUT:
    return "k-major payload (the generic path's k-major kernel)";
  }
  return "unknown";
}
