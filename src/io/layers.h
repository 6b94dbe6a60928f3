/* SPDX-License-Identifier: Apache-2.0 */
/* EXL3 layer discovery over a name-sorted list of tensors. */
#ifndef TRL_IO_LAYERS_H
#define TRL_IO_LAYERS_H

#include "core/internal.h"
#include "format/codebooks.h" /* the markers */
#include "io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors of a layer, in this order. */
enum {
  TRL_MEMBER_TRELLIS,
  TRL_MEMBER_SUH,
  TRL_MEMBER_SU,
  TRL_MEMBER_SVH,
  TRL_MEMBER_SV,
  TRL_MEMBER_BIAS,
  TRL_MEMBER_MARKER, /* the codebook's marker (format/codebooks.h) */
  TRL_MEMBER_COUNT
};

/* What a layer needs besides its public trellis_layer. */
typedef struct trl_layer_extra {
  const trellis_tensor *member[TRL_MEMBER_COUNT]; /* NULL when absent */
  unsigned pending;   /* bit j: member j awaits realignment (its weight
                         pointer is NULL until trl_layers_realign) */
  unsigned char lazy; /* pending was non-zero at discovery (never changes) */
  unsigned char input_legacy, output_legacy; /* su / sv rather than suh/svh */
} trl_layer_extra;

typedef struct trl_layer_set {
  trellis_layer *layers;  /* in model order (trl_layer_name_cmp) */
  trl_layer_extra *extra; /* extra[i] belongs to layers[i] */
  size_t count;
  trellis_tensor *others; /* tensors of no layer, sorted by name */
  size_t other_count;
  unsigned char *other_kind; /* trellis_other_kind of each other tensor */
  void **owned;              /* layer names, converted/realigned copies */
  size_t owned_count, owned_cap;
  size_t copied_bytes; /* tensor data copied so far (realigned, converted) */
} trl_layer_set;

/* Groups `tensors` (sorted by name with strcmp, names unique) into EXL3
 * layers: `<p>.trellis` + `<p>.suh|su` + `<p>.svh|sv` (+ a codebook
 * marker `mcg|mul1`, `bias`)
 * and b12x layers (trl_layers_discover_hinted).
 * Every other tensor is an "other", with a kind (other_kind): a body
 * Linear stored unquantized (`<p>.weight`, 2-D, beside EXL3 layers of the
 * same module, and its `<p>.bias`), a quantized token embedding
 * (`<key>.trellis` 2-D with `<key>.signs` and no scales: EXL3-1.6 §7,
 * never a layer), or plain. Layer pointers point into the tensors'
 * data. A tensor misaligned for its element type is not copied here: its
 * pointer stays NULL and its bit is set in extra[i].pending until
 * trl_layers_realign(), so discovery reads O(k + n) bytes per layer
 * (scales, bias, markers), never the payload. An F32 bias is converted to
 * an F16 copy the set owns. Non-finite scales or bias are
 * TRELLIS_ERR_FORMAT. `label` prefixes every error message. On failure
 * `out` is left empty. `tensors` must outlive the set. */
trellis_status trl_layers_discover(const trellis_tensor *tensors, size_t count,
                                   const char *label, trl_layer_set *out);
/* Copies layer i's pending tensors into aligned memory the set owns and
 * points its weight at them; a no-op when none is pending. Not
 * thread-safe: callers serialise calls on one set. */
trellis_status trl_layers_realign(trl_layer_set *s, size_t i,
                                  const char *label);
void trl_layers_free(trl_layer_set *s);

/* The order of a set's layers (model order): names compared byte by byte,
 * except that runs of digits compare by value, so model.layers.2 comes
 * before model.layers.10; names equal by value (x01, x1) fall back to
 * strcmp, so distinct names never compare equal. */
int trl_layer_name_cmp(const char *a, const char *b);

/* Where b12x layers (`<p>.qsrt_trellis` / `<p>.qsrt_pair`, io/qsrt.h) take
 * their codebook and pair layout from. */
typedef struct trl_layer_hints {
  const trl_st_meta *meta; /* __metadata__ of every tensor's file */
  const trl_st_meta *const *tensor_meta; /* per tensor; overrides meta */
  const char *codebook; /* config.json codebook of a b12x_qsrt model */
} trl_layer_hints;

/* trl_layers_discover, plus b12x layers; `hints` may be NULL (then a
 * b12x layer has no codebook unless an mcg marker names it). */
trellis_status trl_layers_discover_hinted(const trellis_tensor *tensors,
                                          size_t count,
                                          const trl_layer_hints *hints,
                                          const char *label,
                                          trl_layer_set *out);

#ifdef __cplusplus
}
#endif

#endif
