/* SPDX-License-Identifier: Apache-2.0 */
/* Initialisers of the versioned public structs and enum names that do not
 * depend on CUDA. */
#include "core/internal.h"

#include <string.h>

void trellis_plan_desc_init(trellis_plan_desc *d) {
  if (!d)
    return;
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->max_m = 1;
  d->input_dtype = TRELLIS_F16;
  d->output_dtype = TRELLIS_F16;
  d->compute_dtype = TRELLIS_F16;
}

void trellis_buffers_init(trellis_buffers *b) {
  if (!b)
    return;
  memset(b, 0, sizeof *b);
  b->struct_size = sizeof *b;
}

const char *trellis_path_name(trellis_path path) {
  switch (path) {
  case TRELLIS_PATH_NONE:
    return "none";
  case TRELLIS_PATH_FUSED:
    return "fused";
  case TRELLIS_PATH_GENERIC:
    return "generic";
  case TRELLIS_PATH_DENSE:
    return "dense";
  }
  return "invalid";
}
