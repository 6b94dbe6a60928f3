/* SPDX-License-Identifier: Apache-2.0 */
/* b12x layer containers (FORMAT.md §9.7): `<p>.qsrt_trellis`
 * (uniform) or `<p>.qsrt_pair` (a pair), with `<p>.qsrt_suh` and
 * `<p>.qsrt_svh`; the codebook (and a pair's kind and rate axis) come from
 * the file's __metadata__, or the codebook from config.json of a
 * `b12x_qsrt` model. Never EXL3's "no marker means 3INST". */
#ifndef TRL_IO_QSRT_H
#define TRL_IO_QSRT_H

#include "core/internal.h"
#include "io/safetensors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The tensors of one b12x layer, NULL when absent. */
typedef struct trl_qsrt_group {
  const trellis_tensor *payload; /* .qsrt_trellis or .qsrt_pair */
  int is_pair;                   /* payload is .qsrt_pair */
  const trellis_tensor *suh, *svh;
  const trellis_tensor *marker;     /* a codebook marker (checked), or NULL */
  trellis_codebook marker_codebook; /* the codebook it selects */
} trl_qsrt_group;

/* Checks the group against FORMAT.md §9.6 and §9.7 and fills w's k, n,
 * bits, codebook and pair fields (not its pointers). `meta` is the
 * __metadata__ of the payload's file (may be NULL); `model_codebook` the
 * config.json codebook of a b12x_qsrt model (may be NULL or ""). Errors:
 * TRELLIS_ERR_NOT_FOUND (suh/svh missing), TRELLIS_ERR_DTYPE,
 * TRELLIS_ERR_SHAPE (geometry, K, payload length) and TRELLIS_ERR_FORMAT
 * (metadata, markers, non-finite pair scales). */
trellis_status trl_qsrt_describe(const char *label, const char *prefix,
                                 const trl_qsrt_group *g,
                                 const trl_st_meta *meta,
                                 const char *model_codebook, trellis_weight *w);

/* int16 words from the start of the payload to record1 (pairs). */
size_t trl_qsrt_record1_offset(const trellis_weight *w);

#ifdef __cplusplus
}
#endif

#endif
