/* Internal codebook tables (the public ones live in trellis.h) and the
 * (codebook, K) rules, header-only so the loader shares them. */
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

/* K range of each codebook (FORMAT.md §8, §9.3, §9.4): 3INST, MCG and MUL1
 * 1..8; sqg_e4m3 2..6 (5 and 6 a b12x branch's extension); sqg_fp16 5..6.
 * 0 for an unknown codebook. */
static inline int trl_codebook_min_bits(trellis_codebook cb) {
  switch (cb) {
  case TRELLIS_CB_3INST:
  case TRELLIS_CB_MCG:
  case TRELLIS_CB_MUL1:
    return TRELLIS_MIN_BITS;
  case TRELLIS_CB_SQG_E4M3:
    return 2;
  case TRELLIS_CB_SQG_FP16:
    return 5;
  }
  return 0;
}

static inline int trl_codebook_max_bits(trellis_codebook cb) {
  switch (cb) {
  case TRELLIS_CB_3INST:
  case TRELLIS_CB_MCG:
  case TRELLIS_CB_MUL1:
    return TRELLIS_MAX_BITS;
  case TRELLIS_CB_SQG_E4M3:
  case TRELLIS_CB_SQG_FP16:
    return 6;
  }
  return 0;
}

static inline int trl_codebook_is_sqg(trellis_codebook cb) {
  return cb == TRELLIS_CB_SQG_E4M3 || cb == TRELLIS_CB_SQG_FP16;
}

#endif
