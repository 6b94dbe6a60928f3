/* EXL3 layer discovery over a name-sorted list of tensors. */
#ifndef TRELLIS_IO_LAYERS_H
#define TRELLIS_IO_LAYERS_H

#include "core/internal.h"
#include "io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Multipliers the MCG / MUL1 marker tensors must hold (EXL3-FORMAT §1). */
#define TRELLIS_MCG_MARKER 0xCBAC1FEDu
#define TRELLIS_MUL1_MARKER 0x83DCD12Du

typedef struct trellis_layer_set {
  trellis_layer *layers; /* sorted by name */
  size_t count;
  trellis_tensor *others; /* tensors of no layer, sorted by name */
  size_t other_count;
  void **owned; /* layer names, converted/realigned copies */
  size_t owned_count, owned_cap;
} trellis_layer_set;

/* Groups `tensors` (sorted by name with strcmp, names unique) into EXL3
 * layers: `<p>.trellis` + `<p>.suh|su` + `<p>.svh|sv` (+ `mcg|mul1`, `bias`)
 * and b12x layers (trellis_layers_discover_hinted).
 * Every other tensor is an "other". Layer pointers point into the tensors'
 * data, except where a tensor is misaligned for its element type or an F32
 * bias is converted to F16: those live in memory the set owns. `label`
 * prefixes every error message. On failure `out` is left empty. */
trellis_status trellis_layers_discover(const trellis_tensor *tensors,
                                       size_t count, const char *label,
                                       trellis_layer_set *out);
void trellis_layers_free(trellis_layer_set *s);

/* Where b12x layers (`<p>.qsrt_trellis` / `<p>.qsrt_pair`, io/qsrt.h) take
 * their codebook and pair layout from. */
typedef struct trellis_layer_hints {
  const trellis_st_meta *meta; /* __metadata__ of every tensor's file */
  const trellis_st_meta *const *tensor_meta; /* per tensor; overrides meta */
  const char *codebook; /* config.json codebook of a b12x_qsrt model */
} trellis_layer_hints;

/* trellis_layers_discover, plus b12x layers; `hints` may be NULL (then a
 * b12x layer has no codebook unless an mcg marker names it). */
trellis_status trellis_layers_discover_hinted(const trellis_tensor *tensors,
                                              size_t count,
                                              const trellis_layer_hints *hints,
                                              const char *label,
                                              trellis_layer_set *out);

#ifdef __cplusplus
}
#endif

#endif
