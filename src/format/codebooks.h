/* SPDX-License-Identifier: Apache-2.0 */
/* The one table of codebooks and the rates each allows (FORMAT.md §4, §8,
 * §9; EXL3-1.6 §1). Every codebook fact elsewhere is generated from it:
 * names and the name parser, validation and the K ranges, the markers a
 * layer carries and their values, whether the value depends on K (SQG),
 * which codebooks pair and which b12x files name, the GPU's codebook axis
 * (rules/kernel_config.h) and the kernels' codebook_has_bits / is_sqg.
 * Plain C macros and expression-only inline functions: the header is C and
 * CUDA (constexpr and __host__ __device__ there) alike.
 *
 * X(ID, name, alias, marker, marker_value, kind, lo, hi, half, pairs, b12x)
 *   ID            TRELLIS_CB_<ID> is its public enum value (trellis.h);
 *                 the rows are in enum order (checked below)
 *   name          what files, the CLI and the benchmark call it
 *   alias         another name a b12x file may use, or ""
 *   marker        the layer's I32 0-dim marker tensor `<p>.<marker>` that
 *                 selects it, or "" (3INST: no marker)
 *   marker_value  the marker's exact value (the codebook's multiplier)
 *   kind          EXL3 (the value of a state alone) or SQG (a value per K,
 *                 from tables: format/sqg.h)
 *   lo, hi        the integer K it is defined at
 *   half          1: also K = KA + 1/2 for KA in TRL_HALF_MIN_BITS ..
 *                 TRL_HALF_MAX_BITS, ExLlamaV3 1.6's half-integer rates
 *   pairs         1: b12x pairs (format/pair.h) use it
 *   b12x          1: a b12x layer (io/qsrt.c) may name it
 *
 * A new codebook is one row here, its value of a state (format/codebook.c
 * or a table module like sqg.c; decode_state<CB> on the GPU) and its tests.
 * A new rate is a change of lo/hi/half and, beyond K 8 or half 3, of
 * TRELLIS_MAX_BITS / TRL_HALF_MAX_BITS and the decoders. */
#ifndef TRL_FORMAT_CODEBOOKS_H
#define TRL_FORMAT_CODEBOOKS_H

#include "format/constants.h"
#include "trellis.h"

#define TRL_CODEBOOK_MAP(X)                                                    \
  X(3INST, "3inst", "", "", 0u, EXL3, TRELLIS_MIN_BITS, TRELLIS_MAX_BITS, 0,   \
    0, 0)                                                                      \
  X(MCG, "mcg", "", "mcg", TRL_MUL_MCG, EXL3, TRELLIS_MIN_BITS,                \
    TRELLIS_MAX_BITS, 0, 1, 1)                                                 \
  X(MUL1, "mul1", "", "mul1", TRL_MUL_MUL1, EXL3, TRELLIS_MIN_BITS,            \
    TRELLIS_MAX_BITS, 1, 0, 0)                                                 \
  X(SQG_E4M3, "sqg_e4m3", "sqg_xor_cheb_t12", "", 0u, SQG, 2, 6, 0, 1, 1)      \
  X(SQG_FP16, "sqg_fp16", "sqg_fp16_d3l", "", 0u, SQG, 5, 6, 0, 0, 1)

/* Half-integer rates K = KA + 1/2 (EXL3-1.6 §1.5): ExLlamaV3 1.6 writes
 * and reads KA 1..3 only (tiles of 24, 40 and 56 int16). */
#define TRL_HALF_MIN_BITS 1
#define TRL_HALF_MAX_BITS 3

/* The kinds of the `kind` column. */
#define TRL_CB_KIND_EXL3 0
#define TRL_CB_KIND_SQG 1

#if defined(__CUDACC__)
#define TRL_CB_FN __host__ __device__ constexpr inline
#elif defined(__cplusplus)
#define TRL_CB_FN constexpr inline
#else
#define TRL_CB_FN static inline
#endif

/* ------------------------------------------------ generated values -- */

/* Row index of each codebook, and their count. */
#define TRL_CB_ROW_(ID, ...) TRL_CB_ROW_##ID,
enum { TRL_CODEBOOK_MAP(TRL_CB_ROW_) TRL_CB_COUNT };
#undef TRL_CB_ROW_

/* Each codebook's K range as constants, TRL_CB_MIN_BITS_<ID> and
 * TRL_CB_MAX_BITS_<ID> (for array sizes). */
#define TRL_CB_RANGE_(ID, name, alias, marker, value, kind, lo, hi, half,      \
                      pairs, b12x)                                             \
  TRL_CB_MIN_BITS_##ID = lo, TRL_CB_MAX_BITS_##ID = hi,
enum { TRL_CODEBOOK_MAP(TRL_CB_RANGE_) TRL_CB_RANGE_END_ };
#undef TRL_CB_RANGE_

/* The rows are in enum order, so a codebook's value is its row. */
#if defined(__cplusplus)
#define TRL_CB_STATIC_ASSERT_ static_assert
#else
#define TRL_CB_STATIC_ASSERT_ _Static_assert
#endif
#define TRL_CB_ORDER_(ID, ...)                                                 \
  TRL_CB_STATIC_ASSERT_(                                                       \
      (int)TRELLIS_CB_##ID == (int)TRL_CB_ROW_##ID,                            \
      "TRL_CODEBOOK_MAP rows are in trellis_codebook order");
TRL_CODEBOOK_MAP(TRL_CB_ORDER_)
#undef TRL_CB_ORDER_

/* The enum values, comma separated, in order (the GPU's codebook axis).
 * Each row gives ", TRELLIS_CB_<ID>"; the first comma is dropped. */
#define TRL_CB_ENUM_(ID, ...) , TRELLIS_CB_##ID
#define TRL_CB_DROP_FIRST_(first, ...) __VA_ARGS__
#define TRL_CB_DROP_FIRST(...) TRL_CB_DROP_FIRST_(__VA_ARGS__)
#define TRL_CODEBOOK_ENUMS TRL_CB_DROP_FIRST(TRL_CODEBOOK_MAP(TRL_CB_ENUM_))

/* "3inst mcg mul1 sqg_e4m3 sqg_fp16": the names in enum order, for
 * messages ("expected 0..4, in order: ..."). */
#define TRL_CB_NAME_TEXT_(ID, name, ...) " " name
#define TRL_CODEBOOK_NAMES_TEXT TRL_CODEBOOK_MAP(TRL_CB_NAME_TEXT_)

/* The lookups: each is one expression over the rows,
 * cb == TRELLIS_CB_<ID> ? <column> : ... : <none>. */
#define TRL_CB_IF_(ID) cb == (int)TRELLIS_CB_##ID ?

/* 1 for a codebook of the table. */
TRL_CB_FN int trl_codebook_known(int cb) {
  return cb >= 0 && cb < TRL_CB_COUNT;
}

#define TRL_CB_X_NAME_OF_(ID, name, alias, marker, value, kind, lo, hi, half,  \
                          pairs, b12x)                                         \
  TRL_CB_IF_(ID)(name) :
TRL_CB_FN const char *trl_codebook_name_of(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_NAME_OF_) "invalid";
}
#undef TRL_CB_X_NAME_OF_

#define TRL_CB_X_ALIAS_(ID, name, alias, marker, value, kind, lo, hi, half,    \
                        pairs, b12x)                                           \
  TRL_CB_IF_(ID)(alias) :
TRL_CB_FN const char *trl_codebook_alias(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_ALIAS_) "";
}
#undef TRL_CB_X_ALIAS_

/* The marker tensor's suffix ("" for none) and its exact value. */
#define TRL_CB_X_MARKER_(ID, name, alias, marker, value, kind, lo, hi, half,   \
                         pairs, b12x)                                          \
  TRL_CB_IF_(ID)(marker) :
TRL_CB_FN const char *trl_codebook_marker(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_MARKER_) "";
}
#undef TRL_CB_X_MARKER_

#define TRL_CB_X_MARKER_VALUE_(ID, name, alias, marker, value, kind, lo, hi,   \
                               half, pairs, b12x)                              \
  TRL_CB_IF_(ID)(value) :
TRL_CB_FN unsigned trl_codebook_marker_value(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_MARKER_VALUE_) 0u;
}
#undef TRL_CB_X_MARKER_VALUE_

/* 1 for a codebook whose value depends on K (tables per K: format/sqg.h). */
#define TRL_CB_X_IS_SQG_(ID, name, alias, marker, value, kind, lo, hi, half,   \
                         pairs, b12x)                                          \
  TRL_CB_IF_(ID)(TRL_CB_KIND_##kind == TRL_CB_KIND_SQG) :
TRL_CB_FN int trl_codebook_is_sqg(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_IS_SQG_) 0;
}
#undef TRL_CB_X_IS_SQG_

/* The integer K range; 0 for an unknown codebook. */
#define TRL_CB_X_MIN_BITS_(ID, name, alias, marker, value, kind, lo, hi, half, \
                           pairs, b12x)                                        \
  TRL_CB_IF_(ID)(lo) :
TRL_CB_FN int trl_codebook_min_bits(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_MIN_BITS_) 0;
}
#undef TRL_CB_X_MIN_BITS_

#define TRL_CB_X_MAX_BITS_(ID, name, alias, marker, value, kind, lo, hi, half, \
                           pairs, b12x)                                        \
  TRL_CB_IF_(ID)(hi) :
TRL_CB_FN int trl_codebook_max_bits(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_MAX_BITS_) 0;
}
#undef TRL_CB_X_MAX_BITS_

/* 1 when the codebook takes the half-integer rates. */
#define TRL_CB_X_HAS_HALF_(ID, name, alias, marker, value, kind, lo, hi, half, \
                           pairs, b12x)                                        \
  TRL_CB_IF_(ID)(half) :
TRL_CB_FN int trl_codebook_has_half(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_HAS_HALF_) 0;
}
#undef TRL_CB_X_HAS_HALF_

/* 1 when b12x pairs (format/pair.h) use it. */
#define TRL_CB_X_PAIRS_(ID, name, alias, marker, value, kind, lo, hi, half,    \
                        pairs, b12x)                                           \
  TRL_CB_IF_(ID)(pairs) :
TRL_CB_FN int trl_codebook_pairs(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_PAIRS_) 0;
}
#undef TRL_CB_X_PAIRS_

/* 1 when a b12x layer (io/qsrt.c) may name it. */
#define TRL_CB_X_B12X_(ID, name, alias, marker, value, kind, lo, hi, half,     \
                       pairs, b12x)                                            \
  TRL_CB_IF_(ID)(b12x) :
TRL_CB_FN int trl_codebook_b12x(int cb) {
  return TRL_CODEBOOK_MAP(TRL_CB_X_B12X_) 0;
}
#undef TRL_CB_X_B12X_

/* 1 when codebook cb is defined at K = bits (+ 1/2 when half). */
TRL_CB_FN int trl_codebook_rate_valid(int cb, int bits, int half) {
  return half == 0 ? trl_codebook_min_bits(cb) > 0 &&
                         bits >= trl_codebook_min_bits(cb) &&
                         bits <= trl_codebook_max_bits(cb)
         : half == 1 ? trl_codebook_has_half(cb) && bits >= TRL_HALF_MIN_BITS &&
                           bits <= TRL_HALF_MAX_BITS
                     : 0;
}

/* ------------------------------------------------------------ rates -- */
/* A rate is K in half-bits, H = 2K (2..16; odd for a half rate), the
 * unit of format/lanes.h: a tile holds 8H int16 words (16K) and the ring
 * 128H bits; state i ends at ring bit floor((i + 1) H / 2). */
TRL_CB_FN int trl_rate_h(int bits, int half) { return 2 * bits + (half != 0); }
TRL_CB_FN int trl_rate_bits(int h) { return h / 2; }
TRL_CB_FN int trl_rate_half(int h) { return h & 1; }
/* int16 words of one tile at rate h. */
TRL_CB_FN int trl_rate_tile_words(int h) { return 8 * h; }

#if !defined(__CUDACC__) && !defined(__cplusplus)
#include <stddef.h>

/* The codebook named `name` (its name or alias, ASCII case ignored) into
 * *out; 0 when no row has that name. */
int trl_codebook_parse(const char *name, trellis_codebook *out);
/* "mcg, sqg_e4m3": the names of the rows where pred(cb) is non-zero, in
 * `buf` (truncated to cap); returns buf. */
const char *trl_codebook_list(int (*pred)(int cb), char *buf, size_t cap);
/* K as text: "3", "2.5" (at least 4 bytes). */
const char *trl_rate_text(int bits, int half, char *buf, size_t cap);
/* TRELLIS_OK when (cb, bits, half) is a rate of the table, else
 * TRELLIS_ERR_SHAPE with a message that starts with `what` and names the
 * rates the codebook has. cb must be known. */
trellis_status trl_codebook_check_rate(trellis_codebook cb, int bits, int half,
                                       const char *what);
#endif

#endif
