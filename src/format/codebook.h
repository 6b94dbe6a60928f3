/* Internal codebook tables (the public ones live in trellis.h). */
#ifndef TRELLIS_FORMAT_CODEBOOK_H
#define TRELLIS_FORMAT_CODEBOOK_H

#include "trellis.h"

/* The codebook as fp32 values (exactly the fp16 values of
 * trellis_codebook_table), 65536 entries indexed by state; built once,
 * thread-safe. NULL for an invalid codebook. Used by the CPU decode loops so
 * they skip the fp16 -> fp32 conversion. */
const float *trellis_codebook_table_f32(trellis_codebook cb);

#endif
