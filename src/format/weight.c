/* trellis_weight: initialisation, validation, scales and W_hat decoding. */
#include "format/weight.h"

#include "core/internal.h"
#include "format/codebook.h"
#include "format/tile.h"

#include <string.h>

void trellis_weight_init(trellis_weight *w) {
  if (w == NULL)
    return;
  memset(w, 0, sizeof *w);
  w->struct_size = sizeof *w;
}

static trellis_status check_dim(const char *name, int64_t value) {
  if (value <= 0 || value % TRELLIS_HBLOCK != 0)
    return trellis_fail(TRELLIS_ERR_SHAPE,
                        "weight.%s: expected a positive multiple of %d, got "
                        "%lld",
                        name, TRELLIS_HBLOCK, (long long)value);
  return TRELLIS_OK;
}

/* Exactly one of the fp16 scale vector and the legacy packed signs. */
static trellis_status check_sign_pair(const char *scaled, const void *h,
                                      const char *legacy, const void *bits) {
  if (h != NULL && bits != NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "weight: expected exactly one of %s and %s, got both",
                        scaled, legacy);
  if (h == NULL && bits == NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "weight: expected exactly one of %s and %s, got "
                        "neither",
                        scaled, legacy);
  return TRELLIS_OK;
}

/* k*n*bits/8 without overflow; 0 if it does not fit in size_t. */
static size_t payload_bytes(int64_t k, int64_t n, int bits) {
  size_t kn, total;
  if (!trellis_mul_size((size_t)k, (size_t)n, &kn) ||
      !trellis_mul_size(kn, (size_t)bits, &total))
    return 0;
  return total / 8;
}

trellis_status trellis_weight_validate(const trellis_weight *w) {
  TRELLIS_CHECK_STRUCT(w, trellis_weight, "weight");
  trellis_status st;
  if ((st = check_dim("k", w->k)) != TRELLIS_OK ||
      (st = check_dim("n", w->n)) != TRELLIS_OK)
    return st;
  if (w->bits < TRELLIS_MIN_BITS || w->bits > TRELLIS_MAX_BITS)
    return trellis_fail(TRELLIS_ERR_SHAPE,
                        "weight.bits: expected %d..%d, got %d",
                        TRELLIS_MIN_BITS, TRELLIS_MAX_BITS, w->bits);
  if (payload_bytes(w->k, w->n, w->bits) == 0)
    return trellis_fail(TRELLIS_ERR_SHAPE,
                        "weight: k = %lld, n = %lld, bits = %d: payload size "
                        "overflows size_t",
                        (long long)w->k, (long long)w->n, w->bits);
  if ((unsigned)w->codebook > (unsigned)TRELLIS_CB_MUL1)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "weight.codebook: expected 0 (3inst), 1 (mcg) or 2 "
                        "(mul1), got %d",
                        (int)w->codebook);
  if (w->trellis == NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "weight.trellis: expected a [k/16][n/16][16*bits] "
                        "int16 payload, got NULL");
  if ((st = check_sign_pair("suh", w->suh, "su", w->su)) != TRELLIS_OK ||
      (st = check_sign_pair("svh", w->svh, "sv", w->sv)) != TRELLIS_OK)
    return st;
  return TRELLIS_OK;
}

size_t trellis_f16_first_nonfinite(const void *bytes, size_t count) {
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
  size_t i = trellis_f16_first_nonfinite(v, (size_t)count);
  if (i == (size_t)count)
    return TRELLIS_OK;
  return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
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
  if (w == NULL || w->struct_size < sizeof *w || w->k <= 0 || w->n <= 0 ||
      w->bits < TRELLIS_MIN_BITS || w->bits > TRELLIS_MAX_BITS)
    return 0;
  return payload_bytes(w->k, w->n, w->bits);
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

trellis_status trellis_weight_scales(const trellis_weight *w, float *s_in,
                                     float *s_out) {
  trellis_status st = trellis_weight_validate(w);
  if (st != TRELLIS_OK)
    return st;
  if (s_in == NULL || s_out == NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "weight_scales: %s is NULL", s_in ? "s_out" : "s_in");
  scales_f32(w->suh, w->su, w->k, s_in);
  scales_f32(w->svh, w->sv, w->n, s_out);
  return TRELLIS_OK;
}

trellis_status trellis_decode_weight(const trellis_weight *w, uint16_t *w_hat) {
  trellis_status st = trellis_weight_validate(w);
  if (st != TRELLIS_OK)
    return st;
  if (w_hat == NULL)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "decode_weight: w_hat is NULL");
  const uint16_t *table = trellis_codebook_table(w->codebook);
  const int64_t tiles_k = w->k / 16, tiles_n = w->n / 16;
  uint16_t states[256];
  for (int64_t kt = 0; kt < tiles_k; kt++) {
    for (int64_t nt = 0; nt < tiles_n; nt++) {
      const int16_t *tile = w->trellis + trellis_weight_tile_offset(w, kt, nt);
      trellis_tile_states(tile, w->bits, states);
      uint16_t *corner = w_hat + (size_t)(16 * kt) * (size_t)w->n + 16 * nt;
      for (int i = 0; i < 256; i++) {
        int r, c;
        trellis_tile_position(i, &r, &c);
        corner[(size_t)r * (size_t)w->n + (size_t)c] = table[states[i]];
      }
    }
  }
  return TRELLIS_OK;
}
