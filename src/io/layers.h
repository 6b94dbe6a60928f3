/* EXL3 layer discovery over a name-sorted list of tensors. */
#ifndef TRELLIS_IO_LAYERS_H
#define TRELLIS_IO_LAYERS_H

#include "core/internal.h"
#include "format/constants.h" /* the marker multipliers */
#include "io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors of a layer, in this order. */
enum {
  TRELLIS_MEMBER_TRELLIS,
  TRELLIS_MEMBER_SUH,
  TRELLIS_MEMBER_SU,
  TRELLIS_MEMBER_SVH,
  TRELLIS_MEMBER_SV,
  TRELLIS_MEMBER_BIAS,
  TRELLIS_MEMBER_MCG,
  TRELLIS_MEMBER_MUL1,
  TRELLIS_MEMBER_COUNT
};

/* What a layer needs besides its public trellis_layer. */
typedef struct trellis_layer_extra {
  const trellis_tensor *member[TRELLIS_MEMBER_COUNT]; /* NULL when absent */
  unsigned pending;   /* bit j: member j awaits realignment (its weight
                         pointer is NULL until trellis_layers_realign) */
  unsigned char lazy; /* pending was non-zero at discovery (never changes) */
  unsigned char input_legacy, output_legacy; /* su / sv rather than suh/svh */
} trellis_layer_extra;

typedef struct trellis_layer_set {
  trellis_layer *layers;      /* sorted by name */
  trellis_layer_extra *extra; /* extra[i] belongs to layers[i] */
  size_t count;
  trellis_tensor *others; /* tensors of no layer, sorted by name */
  size_t other_count;
  void **owned; /* layer names, converted/realigned copies */
  size_t owned_count, owned_cap;
  size_t copied_bytes; /* tensor data copied so far (realigned, converted) */
} trellis_layer_set;

/* Groups `tensors` (sorted by name with strcmp, names unique) into EXL3
 * layers: `<p>.trellis` + `<p>.suh|su` + `<p>.svh|sv` (+ `mcg|mul1`, `bias`)
 * and b12x layers (trellis_layers_discover_hinted).
 * Every other tensor is an "other". Layer pointers point into the tensors'
 * data. A tensor misaligned for its element type is not copied here: its
 * pointer stays NULL and its bit is set in extra[i].pending until
 * trellis_layers_realign(), so discovery reads O(k + n) bytes per layer
 * (scales, bias, markers), never the payload. An F32 bias is converted to
 * an F16 copy the set owns. Non-finite scales or bias are
 * TRELLIS_ERR_FORMAT. `label` prefixes every error message. On failure
 * `out` is left empty. `tensors` must outlive the set. */
trellis_status trellis_layers_discover(const trellis_tensor *tensors,
                                       size_t count, const char *label,
                                       trellis_layer_set *out);
/* Copies layer i's pending tensors into aligned memory the set owns and
 * points its weight at them; a no-op when none is pending. Not
 * thread-safe: callers serialise calls on one set. */
trellis_status trellis_layers_realign(trellis_layer_set *s, size_t i,
                                      const char *label);
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
