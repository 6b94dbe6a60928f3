/* SPDX-License-Identifier: Apache-2.0 */
/* trellis_weight: initialisation, validation, scales and W_hat decoding. */
#include "format/weight.h"

#include "core/internal.h"
#include "format/codebook.h"
#include "format/pair.h"
#include "format/sqg.h"
#include "format/tile.h"

#include <stdio.h>
#include <string.h>

void trellis_weight_init(trellis_weight *w) {
  if (w == NULL)
    return;
  memset(w, 0, sizeof *w);
  w->struct_size = sizeof *w;
}

const char *trellis_pair_kind_name(trellis_pair_kind kind) {
  switch (kind) {
  case TRELLIS_PAIR_NONE:
    return "none";
  case TRELLIS_PAIR_P22:
    return "P22";
  case TRELLIS_PAIR_P24:
    return "P24";
  case TRELLIS_PAIR_P33:
    return "P33";
  case TRELLIS_PAIR_P43:
    return "P43";
  case TRELLIS_PAIR_P44:
    return "P44";
  }
  return "invalid";
}

const char *trellis_rate_axis_name(trellis_rate_axis axis) {
  switch (axis) {
  case TRELLIS_RATE_AXIS_N:
    return "n";
  case TRELLIS_RATE_AXIS_K:
    return "k";
  }
  return "invalid";
}

/* The first version (no pair fields), the second (no half and layout
 * fields), or this one or a newer one. */
static int size_accepted(uint32_t struct_size) {
  return struct_size == TRELLIS_WEIGHT_SIZE_V1 ||
         struct_size == TRELLIS_WEIGHT_SIZE_V2 ||
         struct_size >= sizeof(trellis_weight);
}

/* The first struct_size bytes of `w`, the rest zero. */
static void copy_weight(const trellis_weight *w, trellis_weight *full) {
  const size_t size =
      w->struct_size < sizeof *full ? w->struct_size : sizeof *full;
  memset(full, 0, sizeof *full);
  memcpy(full, w, size);
  full->struct_size = sizeof *full;
}

static trellis_status check_dim(const char *name, int64_t value) {
  if (value <= 0 || value % TRELLIS_HBLOCK != 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight.%s: expected a positive multiple of %d, got "
                    "%lld",
                    name, TRELLIS_HBLOCK, (long long)value);
  return TRELLIS_OK;
}

/* Exactly one of the fp16 scale vector and the legacy packed signs. */
static trellis_status check_sign_pair(const char *scaled, const void *h,
                                      const char *legacy, const void *bits) {
  if (h != NULL && bits != NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight: expected exactly one of %s and %s, got both",
                    scaled, legacy);
  if (h == NULL && bits == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight: expected exactly one of %s and %s, got "
                    "neither",
                    scaled, legacy);
  return TRELLIS_OK;
}

/* k*n*h/16 (h: the rate in half-bits) without overflow; 0 if it does not
 * fit in size_t. */
static size_t payload_bytes(int64_t k, int64_t n, int h) {
  size_t kn, total;
  if (!trl_mul_size((size_t)k, (size_t)n, &kn) ||
      !trl_mul_size(kn, (size_t)h, &total))
    return 0;
  return total / 16;
}

/* FORMAT.md §9.5, §9.6: a known kind and axis, 256 channels on the rate axis,
 * bits/bits1 equal to the kind's K values, MCG or SQG_E4M3, both records and
 * fp16 scales present. */
static trellis_status check_pair(const trellis_weight *w) {
  const char *kind = trellis_pair_kind_name(w->pair);
  if (!trl_pair_kind_known(w->pair))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.pair: expected TRELLIS_PAIR_NONE or a pair "
                    "kind P22, P24, P33, P43 or P44, got 0x%x",
                    (unsigned)w->pair);
  if (w->rate_axis != TRELLIS_RATE_AXIS_N &&
      w->rate_axis != TRELLIS_RATE_AXIS_K)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.rate_axis: expected TRELLIS_RATE_AXIS_N or "
                    "TRELLIS_RATE_AXIS_K, got %d",
                    (int)w->rate_axis);
  if (!trl_codebook_pairs((int)w->codebook)) {
    char pairing[96];
    return trl_fail(
        TRELLIS_ERR_INVALID_ARGUMENT,
        "weight: pair %s needs a codebook that pairs (%s), got "
        "%s",
        kind, trl_codebook_list(trl_codebook_pairs, pairing, sizeof pairing),
        trellis_codebook_name(w->codebook));
  }
  if (w->half != 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight.half: pair %s has integer record rates, got "
                    "half = %d",
                    kind, w->half);
  const int k0 = trl_pair_bits0(w->pair), k1 = trl_pair_bits1(w->pair);
  if (w->bits != k0 || w->bits1 != k1)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight: pair %s needs bits = %d and bits1 = %d (K of "
                    "record0 and record1), got %d and %d",
                    kind, k0, k1, w->bits, w->bits1);
  const int axis_n = w->rate_axis == TRELLIS_RATE_AXIS_N;
  const int64_t rate = axis_n ? w->n : w->k;
  if (rate != TRL_PAIR_CHANNELS)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight.%s: a pair on rate axis %s has exactly %d "
                    "channels there, got %lld",
                    axis_n ? "n" : "k", axis_n ? "n" : "k", TRL_PAIR_CHANNELS,
                    (long long)rate);
  if (w->trellis1 == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.trellis1: pair %s needs record1's tiles, got "
                    "NULL",
                    kind);
  if (w->suh == NULL || w->svh == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight: pair %s needs fp16 suh and svh, not legacy "
                    "%s",
                    kind, w->suh == NULL ? "su" : "sv");
  return TRELLIS_OK;
}

/* A uniform layer's pair fields are zero (trellis.h): anything else is a
 * weight filled wrongly, perhaps a pair whose kind was lost. */
static trellis_status check_uniform(const trellis_weight *w) {
  if (w->rate_axis == TRELLIS_RATE_AXIS_N && w->bits1 == 0 &&
      w->trellis1 == NULL)
    return TRELLIS_OK;
  char got[96];
  if (w->rate_axis != TRELLIS_RATE_AXIS_N)
    snprintf(got, sizeof got, "rate_axis = %d", (int)w->rate_axis);
  else if (w->bits1 != 0)
    snprintf(got, sizeof got, "bits1 = %d", w->bits1);
  else
    snprintf(got, sizeof got, "trellis1 set");
  return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                  "weight: a uniform layer (pair TRELLIS_PAIR_NONE) has "
                  "rate_axis, bits1 and trellis1 zero, got %s",
                  got);
}

static trellis_status validate_full(const trellis_weight *w) {
  trellis_status st;
  if ((st = check_dim("k", w->k)) != TRELLIS_OK ||
      (st = check_dim("n", w->n)) != TRELLIS_OK)
    return st;
  if (w->bits < TRELLIS_MIN_BITS || w->bits > TRELLIS_MAX_BITS)
    return trl_fail(TRELLIS_ERR_SHAPE, "weight.bits: expected %d..%d, got %d",
                    TRELLIS_MIN_BITS, TRELLIS_MAX_BITS, w->bits);
  if (w->half != 0 && w->half != 1)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.half: expected 0 (K = bits) or 1 (K = bits + "
                    "1/2), got %d",
                    w->half);
  if (payload_bytes(w->k, w->n, trl_rate_h(w->bits, w->half)) == 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight: k = %lld, n = %lld, bits = %d: payload size "
                    "overflows size_t",
                    (long long)w->k, (long long)w->n, w->bits);
  if (!trl_codebook_known((int)w->codebook))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.codebook: expected 0..%d (in order:%s), got %d",
                    TRL_CB_COUNT - 1, TRL_CODEBOOK_NAMES_TEXT,
                    (int)w->codebook);
  if ((st = trl_codebook_check_rate(w->codebook, w->bits, w->half,
                                    "weight.bits")) != TRELLIS_OK)
    return st;
  if (w->trellis == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.trellis: expected a [k/16][n/16][16*bits] "
                    "int16 payload, got NULL");
  if ((st = check_sign_pair("suh", w->suh, "su", w->su)) != TRELLIS_OK ||
      (st = check_sign_pair("svh", w->svh, "sv", w->sv)) != TRELLIS_OK)
    return st;
  if (w->layout != TRELLIS_LAYOUT_CHECKPOINT &&
      w->layout != TRELLIS_LAYOUT_LANES && w->layout != TRELLIS_LAYOUT_KMAJOR)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight.layout: expected TRELLIS_LAYOUT_CHECKPOINT (0), "
                    "TRELLIS_LAYOUT_LANES (1) or TRELLIS_LAYOUT_KMAJOR (2), "
                    "got %d",
                    (int)w->layout);
  if (w->layout == TRELLIS_LAYOUT_KMAJOR &&
      (st = trl_weight_kmajor_supported(w, "weight.layout")) != TRELLIS_OK)
    return st;
  if (w->pair != TRELLIS_PAIR_NONE)
    return check_pair(w);
  return check_uniform(w);
}

trellis_status trl_weight_require_layout(const trellis_weight *w,
                                         trellis_layout layout,
                                         const char *who) {
  if (w->layout == layout)
    return TRELLIS_OK;
  return trl_fail(TRELLIS_ERR_LAYOUT,
                  "%s: the weight's payload is in the %s layout, expected "
                  "the %s layout%s",
                  who, trl_layout_name(w->layout), trl_layout_name(layout),
                  layout == TRELLIS_LAYOUT_LANES
                      ? " (upload it with trellis_weight_upload, or "
                        "convert device memory with trellis_weight_repack)"
                      : " (the CPU functions read the tiles as a file "
                        "stores them)");
}

trellis_status trl_weight_kmajor_supported(const trellis_weight *w,
                                           const char *who) {
  if (w->pair != TRELLIS_PAIR_NONE || trl_codebook_is_sqg(w->codebook))
    return trl_fail(
        TRELLIS_ERR_UNSUPPORTED,
        "%s: the k-major layout holds uniform layers of the EXL3 "
        "codebooks (3INST, MCG, MUL1) only, not %s (use the lane "
        "layout)",
        who, w->pair != TRELLIS_PAIR_NONE ? "a pair" : "an SQG codebook");
  return TRELLIS_OK;
}

const char *trl_layout_name(trellis_layout layout) {
  switch (layout) {
  case TRELLIS_LAYOUT_CHECKPOINT:
    return "checkpoint";
  case TRELLIS_LAYOUT_LANES:
    return "lanes";
  case TRELLIS_LAYOUT_KMAJOR:
    return "k-major";
  }
  return "invalid";
}

trellis_status trl_weight_load(const trellis_weight *w, trellis_weight *full) {
  if (w == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "weight is NULL");
  if (!size_accepted(w->struct_size))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight: struct_size %u is neither %zu (before the "
                    "pair fields), %zu (before the half and layout "
                    "fields) nor >= %zu (call the *_init function first)",
                    (unsigned)w->struct_size, (size_t)TRELLIS_WEIGHT_SIZE_V1,
                    (size_t)TRELLIS_WEIGHT_SIZE_V2, sizeof *w);
  copy_weight(w, full);
  return validate_full(full);
}

trellis_status trellis_weight_validate(const trellis_weight *w) {
  trellis_weight full;
  return trl_weight_load(w, &full);
}

size_t trl_f16_first_nonfinite(const void *bytes, size_t count) {
  const uint8_t *b = bytes;
  for (size_t i = 0; i < count; i++) {
    uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
    if ((h & 0x7C00u) == 0x7C00u)
      return i;
  }
  return count;
}

/* The first non-finite element of an fp16 vector, as an error. */
static trellis_status check_finite(const char *what, const uint16_t *v,
                                   int64_t count) {
  if (v == NULL)
    return TRELLIS_OK;
  size_t i = trl_f16_first_nonfinite(v, (size_t)count);
  if (i == (size_t)count)
    return TRELLIS_OK;
  return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                  "weight.%s[%zu] is %s (a finite EXL3 layer has finite "
                  "scales and bias)",
                  what, i, (v[i] & 0x3FFu) ? "NaN" : "infinite");
}

trellis_status trellis_weight_check_values(const trellis_weight *w) {
  trellis_status st = trellis_weight_validate(w);
  if (st == TRELLIS_OK)
    st = check_finite("suh", w->suh, w->k);
  if (st == TRELLIS_OK)
    st = check_finite("svh", w->svh, w->n);
  if (st == TRELLIS_OK)
    st = check_finite("bias", w->bias, w->n);
  return st;
}

size_t trellis_weight_payload_bytes(const trellis_weight *w) {
  if (w == NULL || !size_accepted(w->struct_size))
    return 0;
  trellis_weight full;
  copy_weight(w, &full);
  if (full.k <= 0 || full.n <= 0 || full.bits < TRELLIS_MIN_BITS ||
      full.bits > TRELLIS_MAX_BITS || (full.half != 0 && full.half != 1))
    return 0;
  if (full.pair == TRELLIS_PAIR_NONE)
    return payload_bytes(full.k, full.n, trl_rate_h(full.bits, full.half));
  if (!trl_pair_kind_known(full.pair) || full.half != 0)
    return 0;
  /* record r holds k*n/2 weights at K_r */
  return payload_bytes(
             full.k, full.n,
             2 * (trl_pair_bits0(full.pair) + trl_pair_bits1(full.pair))) /
         2;
}

int trl_weight_records(const trellis_weight *w, trl_record rec[2]) {
  memset(rec, 0, 2 * sizeof *rec);
  rec[0].trellis = w->trellis;
  rec[0].bits = w->bits;
  rec[0].half = w->half;
  rec[0].k = w->k;
  rec[0].n = w->n;
  if (w->pair == TRELLIS_PAIR_NONE)
    return 1;
  const int axis_n = w->rate_axis == TRELLIS_RATE_AXIS_N;
  rec[1] = rec[0];
  rec[1].trellis = w->trellis1;
  rec[1].bits = w->bits1;
  for (int r = 0; r < 2; r++) {
    if (axis_n) {
      rec[r].n = TRL_PAIR_RECORD;
      rec[r].nt0 = r * (TRL_PAIR_RECORD / 16);
    } else {
      rec[r].k = TRL_PAIR_RECORD;
      rec[r].kt0 = r * (TRL_PAIR_RECORD / 16);
    }
  }
  return 2;
}

static void scales_f32(const uint16_t *scaled, const int16_t *legacy,
                       int64_t count, float *out) {
  for (int64_t i = 0; i < count; i++) {
    if (scaled != NULL)
      out[i] = trellis_f16_to_f32(scaled[i]);
    else
      out[i] = (((uint16_t)legacy[i >> 4] >> (i & 15)) & 1u) ? -1.0f : 1.0f;
  }
}

/* FORMAT.md §9.6: a pair's suh and svh are finite. */
static trellis_status check_pair_finite(const char *what, const uint16_t *v,
                                        int64_t count) {
  for (int64_t i = 0; i < count; i++)
    if ((v[i] & 0x7C00u) == 0x7C00u)
      return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                      "weight.%s[%lld] = 0x%04X is not finite (a pair's "
                      "scales must be)",
                      what, (long long)i, (unsigned)v[i]);
  return TRELLIS_OK;
}

trellis_status trl_weight_scales(const trellis_weight *w, float *s_in,
                                 float *s_out) {
  trellis_weight full;
  trellis_status st = trl_weight_load(w, &full);
  if (st != TRELLIS_OK)
    return st;
  if (s_in == NULL || s_out == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "weight_scales: %s is NULL",
                    s_in ? "s_out" : "s_in");
  if (full.pair != TRELLIS_PAIR_NONE &&
      ((st = check_pair_finite("suh", full.suh, full.k)) != TRELLIS_OK ||
       (st = check_pair_finite("svh", full.svh, full.n)) != TRELLIS_OK))
    return st;
  scales_f32(full.suh, full.su, full.k, s_in);
  scales_f32(full.svh, full.sv, full.n, s_out);
  return TRELLIS_OK;
}

trellis_status trellis_decode_weight(const trellis_weight *w, uint16_t *w_hat) {
  trellis_weight full;
  trellis_status st = trl_weight_load(w, &full);
  if (st == TRELLIS_OK)
    st = trl_weight_require_layout(&full, TRELLIS_LAYOUT_CHECKPOINT,
                                   "decode_weight");
  if (st != TRELLIS_OK)
    return st;
  if (w_hat == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "decode_weight: w_hat is NULL");
  trl_record rec[2];
  const int count = trl_weight_records(&full, rec);
  uint16_t states[256];
  for (int r = 0; r < count; r++) {
    const uint16_t *table =
        trellis_codebook_table_bits(full.codebook, rec[r].bits);
    if (table == NULL)
      return trl_sqg_tables_status();
    for (int64_t kt = rec[r].kt0; kt < rec[r].kt0 + rec[r].k / 16; kt++) {
      for (int64_t nt = rec[r].nt0; nt < rec[r].nt0 + rec[r].n / 16; nt++) {
        trl_tile_states_rate(trl_record_tile(&rec[r], kt, nt),
                             trl_record_rate(&rec[r]), states);
        uint16_t *corner =
            w_hat + (size_t)(16 * kt) * (size_t)full.n + (size_t)(16 * nt);
        for (int i = 0; i < 256; i++) {
          int row, col;
          trl_tile_position(i, &row, &col);
          corner[(size_t)row * (size_t)full.n + (size_t)col] = table[states[i]];
        }
      }
    }
  }
  return TRELLIS_OK;
}
