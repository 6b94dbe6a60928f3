#include "plan/gate.h"

trellis_gate_reason trellis_gate(const trellis_gate_input *in) {
  if (in->m < 1 || in->m > TRELLIS_FUSED_MAX_M)
    return TRELLIS_GATE_M_TOO_LARGE;
  if (in->bits != TRELLIS_FUSED_BITS)
    return TRELLIS_GATE_BITS;
  if (in->codebook != TRELLIS_FUSED_CODEBOOK)
    return TRELLIS_GATE_CODEBOOK;
  if (in->paired)
    return TRELLIS_GATE_PAIRED;
  if (in->compute_dtype != TRELLIS_F16)
    return TRELLIS_GATE_COMPUTE_DTYPE;
  if (in->has_external_h128)
    return TRELLIS_GATE_EXTERNAL_H128;
  if (!in->fused_image_present)
    return TRELLIS_GATE_NO_IMAGE;
  if (in->forced)
    return TRELLIS_GATE_FORCED;
  return TRELLIS_GATE_OPEN;
}

const char *trellis_gate_reason_text(trellis_gate_reason reason) {
  switch (reason) {
  case TRELLIS_GATE_OPEN:
    return "fused path";
  case TRELLIS_GATE_M_TOO_LARGE:
    return "m is outside 1..128";
  case TRELLIS_GATE_BITS:
    return "bits is not 6";
  case TRELLIS_GATE_CODEBOOK:
    return "codebook is not MCG";
  case TRELLIS_GATE_PAIRED:
    return "paired payload";
  case TRELLIS_GATE_COMPUTE_DTYPE:
    return "compute dtype is not fp16";
  case TRELLIS_GATE_EXTERNAL_H128:
    return "external H128 callback";
  case TRELLIS_GATE_NO_IMAGE:
    return "fused kernel not compiled for this device";
  case TRELLIS_GATE_FORCED:
    return "forced configuration";
  }
  return "unknown";
}
