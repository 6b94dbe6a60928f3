/* SPDX-License-Identifier: Apache-2.0 */
/* Internal codebook tables (the public ones live in trellis.h) and the
 * (codebook, K) rules of the table, which the loader shares. */
#ifndef TRL_FORMAT_CODEBOOK_H
#define TRL_FORMAT_CODEBOOK_H

#include "trellis.h"

/* The codebook as fp32 values (exactly the fp16 values of
 * trellis_codebook_table), 65536 entries indexed by state; built once,
 * thread-safe. NULL for an invalid codebook. Used by the CPU decode loops so
 * they skip the fp16 -> fp32 conversion. */
const float *trl_codebook_table_f32(trellis_codebook cb);
/* The same for any codebook at `bits` (the per-K tables of the SQG
 * codebooks); NULL for an invalid (cb, bits) or when the SQG tables failed
 * their checks (trl_sqg_tables_status says why). */
const float *trl_codebook_table_f32_bits(trellis_codebook cb, int bits);

/* The (codebook, K) rules: names, K ranges, half rates, markers, kinds
 * (format/codebooks.h, the one table). */
#include "format/codebooks.h"

#endif
