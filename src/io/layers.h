/* EXL3 layer discovery over a name-sorted list of tensors. */
#ifndef TRELLIS_IO_LAYERS_H
#define TRELLIS_IO_LAYERS_H

#include "core/internal.h"
#include "format/constants.h" /* the marker multipliers */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trellis_layer_set {
  trellis_layer *layers; /* sorted by name */
  size_t count;
  trellis_tensor *others; /* tensors of no layer, sorted by name */
  size_t other_count;
  void **owned; /* layer names, converted/realigned copies */
  size_t owned_count, owned_cap;
} trellis_layer_set;

/* Groups `tensors` (sorted by name with strcmp, names unique) into EXL3
 * layers: `<p>.trellis` + `<p>.suh|su` + `<p>.svh|sv` (+ `mcg|mul1`, `bias`).
 * Every other tensor is an "other". Layer pointers point into the tensors'
 * data, except where a tensor is misaligned for its element type or an F32
 * bias is converted to F16: those live in memory the set owns. `label`
 * prefixes every error message. On failure `out` is left empty. */
trellis_status trellis_layers_discover(const trellis_tensor *tensors,
                                       size_t count, const char *label,
                                       trellis_layer_set *out);
void trellis_layers_free(trellis_layer_set *s);

#ifdef __cplusplus
}
#endif

#endif
