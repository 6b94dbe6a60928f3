/* SPDX-License-Identifier: Apache-2.0 */
/* b12x layer containers (FORMAT.md §9.7) and their validation (§9.6).
 *
 * Choices:
 *   - The codebook comes from the payload file's __metadata__ "codebook",
 *     else from config.json (quant_method "b12x_qsrt"); an `mcg` marker
 *     tensor alone selects MCG. No source is an error: EXL3's "no marker
 *     means 3INST" does not apply to these names.
 *   - Names are case-insensitive; the aliases sqg_xor_cheb_t12 and
 *     sqg_fp16_d3l are accepted. 3inst and mul1 are not b12x codebooks
 *     (the b12x column of format/codebooks.h), and a mul1 marker is
 *     rejected.
 *   - Uniform layers have K 2..6 (b12x's dense range) and a K the codebook
 *     defines; a metadata "bits" must equal it. A pair's "bits", when
 *     present, must be its bits per weight, (K0 + K1) / 2 ("3" for P24,
 *     "3.5" for P43).
 *   - Pair scales must be finite (b12x checks this at prepare). */
#include "io/qsrt.h"

#include "format/codebook.h"
#include "format/pair.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define QSRT_MIN_BITS 2
#define QSRT_MAX_BITS 6

/* An F16 vector; its length is returned in *len. */
static trellis_status check_scale(const char *label, const char *prefix,
                                  const trellis_tensor *t, const char *what,
                                  int64_t *len) {
  if (t->dtype != TRELLIS_T_F16)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "%s: layer '%s': %s has dtype %s, expected F16", label,
                    prefix, what, trellis_tensor_dtype_name(t->dtype));
  if (t->ndim != 1) {
    char sh[96];
    trl_shape_text(t, sh, sizeof sh);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': %s has shape %s, expected 1 dimension",
                    label, prefix, what, sh);
  }
  *len = t->shape[0];
  return TRELLIS_OK;
}

/* FORMAT.md §9.6: a pair's suh and svh are finite. The data may be
 * misaligned, so it is read byte by byte. */
static trellis_status check_finite(const char *label, const char *prefix,
                                   const trellis_tensor *t, const char *what) {
  const uint8_t *b = t->data;
  for (int64_t i = 0; i < t->shape[0]; i++) {
    const unsigned v = (unsigned)b[2 * i] | (unsigned)b[2 * i + 1] << 8;
    if ((v & 0x7C00u) == 0x7C00u)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: layer '%s': %s[%lld] = 0x%04X is not finite (a "
                      "pair's scales must be)",
                      label, prefix, what, (long long)i, v);
  }
  return TRELLIS_OK;
}

/* "mcg, sqg_e4m3, sqg_fp16": the codebooks a b12x layer can name. */
static const char *b12x_codebooks(char *buf, size_t cap) {
  return trl_codebook_list(trl_codebook_b12x, buf, cap);
}

static int parse_codebook(const char *s, trellis_codebook *out) {
  return trl_codebook_parse(s, out) && trl_codebook_b12x((int)*out);
}

static trellis_status pick_codebook(const char *label, const char *prefix,
                                    const trl_qsrt_group *g,
                                    const trl_st_meta *meta,
                                    const char *model_codebook,
                                    trellis_codebook *out) {
  char names[96];
  if (g->marker && !trl_codebook_b12x((int)g->marker_codebook))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': a %s marker is not allowed in a "
                    "b12x layer (codebooks: %s)",
                    label, prefix, trellis_codebook_name(g->marker_codebook),
                    b12x_codebooks(names, sizeof names));
  const char *name = trl_st_meta_get(meta, "codebook");
  const char *source = "__metadata__ codebook";
  if (name == NULL && model_codebook != NULL && model_codebook[0]) {
    name = model_codebook;
    source = "config.json quantization_config.codebook";
  }
  if (name == NULL) {
    if (g->marker) {
      *out = g->marker_codebook;
      return TRELLIS_OK;
    }
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': no codebook for tensor '%s': the "
                    "file's __metadata__ names none and there is no "
                    "b12x_qsrt quantization_config",
                    label, prefix, g->payload->name);
  }
  if (!parse_codebook(name, out))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': %s '%.40s' is not one of %s", label,
                    prefix, source, name, b12x_codebooks(names, sizeof names));
  if (g->marker && *out != g->marker_codebook)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': the %s marker disagrees with %s "
                    "'%.40s'",
                    label, prefix, trellis_codebook_name(g->marker_codebook),
                    source, name);
  return TRELLIS_OK;
}

/* qsrt_trellis: I16 [k/16, n/16, 16*K], K 2..6 and valid for the codebook,
 * k and n multiples of 128; suh [k], svh [n]. */
static trellis_status describe_uniform(const char *label, const char *prefix,
                                       const trl_qsrt_group *g,
                                       const trl_st_meta *meta, int64_t suh_len,
                                       int64_t svh_len, trellis_weight *w) {
  const trellis_tensor *t = g->payload;
  char sh[96];
  trl_shape_text(t, sh, sizeof sh);
  if (t->ndim != 3 || t->shape[2] % 16 != 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': qsrt_trellis has shape %s, expected "
                    "[k/16, n/16, 16*K]",
                    label, prefix, sh);
  const int64_t bits = t->shape[2] / 16;
  if (bits >= 1 && bits <= TRELLIS_MAX_BITS &&
      (bits < trl_codebook_min_bits(w->codebook) ||
       bits > trl_codebook_max_bits(w->codebook)))
    return trl_fail(
        TRELLIS_ERR_SHAPE,
        "%s: layer '%s': codebook %s is defined for K %d..%d; qsrt_trellis "
        "shape %s gives K = %lld",
        label, prefix, trellis_codebook_name(w->codebook),
        trl_codebook_min_bits(w->codebook), trl_codebook_max_bits(w->codebook),
        sh, (long long)bits);
  if (bits < QSRT_MIN_BITS || bits > QSRT_MAX_BITS)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': qsrt_trellis shape %s gives K = "
                    "%lld, expected %d..%d",
                    label, prefix, sh, (long long)bits, QSRT_MIN_BITS,
                    QSRT_MAX_BITS);
  const int64_t limit = INT64_MAX / TRELLIS_TILE;
  for (int d = 0; d < 2; d++)
    if (t->shape[d] <= 0 || t->shape[d] > limit ||
        (t->shape[d] * TRELLIS_TILE) % TRELLIS_HBLOCK != 0)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "%s: layer '%s': qsrt_trellis shape %s: %s is not a "
                      "positive multiple of %d",
                      label, prefix, sh, d ? "n" : "k", TRELLIS_HBLOCK);
  w->k = t->shape[0] * TRELLIS_TILE;
  w->n = t->shape[1] * TRELLIS_TILE;
  w->bits = (int)bits;
  const char *given = trl_st_meta_get(meta, "bits");
  if (given != NULL) {
    char want[8];
    snprintf(want, sizeof want, "%d", w->bits);
    if (strcmp(given, want) != 0)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: layer '%s': __metadata__ bits '%.20s' differs "
                      "from K = %d of qsrt_trellis shape %s",
                      label, prefix, given, w->bits, sh);
  }
  if (suh_len != w->k || svh_len != w->n)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': %s has %lld elements, expected %lld "
                    "(%s from qsrt_trellis)",
                    label, prefix, suh_len != w->k ? "qsrt_suh" : "qsrt_svh",
                    (long long)(suh_len != w->k ? suh_len : svh_len),
                    (long long)(suh_len != w->k ? w->k : w->n),
                    suh_len != w->k ? "k" : "n");
  return TRELLIS_OK;
}

static int parse_pair_kind(const char *s, trellis_pair_kind *out) {
  static const struct {
    const char *name;
    trellis_pair_kind kind;
  } kinds[] = {{"P22", TRELLIS_PAIR_P22},
               {"P24", TRELLIS_PAIR_P24},
               {"P33", TRELLIS_PAIR_P33},
               {"P43", TRELLIS_PAIR_P43},
               {"P44", TRELLIS_PAIR_P44}};
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (!strcasecmp(s, kinds[i].name)) {
      *out = kinds[i].kind;
      return 1;
    }
  return 0;
}

/* 1 when `s` is a plain decimal ("3", "3.5", "3.50") equal to halves / 2:
 * digits, optionally a point and digits, nothing else. */
static int is_half_count(const char *s, int halves) {
  long whole = 0;
  int len = 0;
  while (s[len] >= '0' && s[len] <= '9' && len < 8)
    whole = whole * 10 + (s[len++] - '0');
  if (len == 0)
    return 0;
  int half = 0;
  if (s[len] == '.') {
    const char *f = s + len + 1;
    if (*f < '0' || *f > '9')
      return 0;
    half = *f == '5';
    if (*f != '0' && *f != '5')
      return 0;
    for (f++; *f == '0'; f++)
      ;
    if (*f != '\0')
      return 0;
  } else if (s[len] != '\0') {
    return 0;
  }
  return whole * 2 + half == halves;
}

/* A pair's __metadata__ "bits", when present, is its bits per weight. */
static trellis_status check_pair_bits(const char *label, const char *prefix,
                                      const trl_st_meta *meta,
                                      const trellis_weight *w) {
  const char *given = trl_st_meta_get(meta, "bits");
  const int halves = w->bits + w->bits1;
  if (given == NULL || is_half_count(given, halves))
    return TRELLIS_OK;
  return trl_fail(TRELLIS_ERR_FORMAT,
                  "%s: layer '%s': __metadata__ bits '%.20s' is wrong: pair "
                  "%s has %d%s bits per weight, (%d + %d) / 2",
                  label, prefix, given, trellis_pair_kind_name(w->pair),
                  halves / 2, halves % 2 ? ".5" : "", w->bits, w->bits1);
}

/* qsrt_pair: I16 [(orth/16)*128*(K0+K1)], the rate axis 256 channels long,
 * the other a positive multiple of 128 (k = |suh|, n = |svh|), MCG or
 * SQG_E4M3, finite scales. */
static trellis_status describe_pair(const char *label, const char *prefix,
                                    const trl_qsrt_group *g,
                                    const trl_st_meta *meta, int64_t suh_len,
                                    int64_t svh_len, trellis_weight *w) {
  const char *kind = trl_st_meta_get(meta, "pair_kind");
  const char *axis = trl_st_meta_get(meta, "rate_axis");
  if (kind == NULL || !parse_pair_kind(kind, &w->pair))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': __metadata__ pair_kind %s%.20s%s is "
                    "not P22, P24, P33, P43 or P44",
                    label, prefix, kind ? "'" : "", kind ? kind : "(absent)",
                    kind ? "'" : "");
  if (axis != NULL && !strcasecmp(axis, "n"))
    w->rate_axis = TRELLIS_RATE_AXIS_N;
  else if (axis != NULL && !strcasecmp(axis, "k"))
    w->rate_axis = TRELLIS_RATE_AXIS_K;
  else
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': __metadata__ rate_axis %s%.20s%s is "
                    "not n or k",
                    label, prefix, axis ? "'" : "", axis ? axis : "(absent)",
                    axis ? "'" : "");
  if (!trl_codebook_pairs((int)w->codebook)) {
    char pairing[96];
    trl_codebook_list(trl_codebook_pairs, pairing, sizeof pairing);
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': pair %s needs a codebook that pairs "
                    "(%s), got %s",
                    label, prefix, kind, pairing,
                    trellis_codebook_name(w->codebook));
  }
  const int axis_n = w->rate_axis == TRELLIS_RATE_AXIS_N;
  const int64_t rate = axis_n ? svh_len : suh_len;
  const int64_t orth = axis_n ? suh_len : svh_len;
  if (rate != TRL_PAIR_CHANNELS)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': pair on rate axis %s: %s has %lld "
                    "elements, expected %d",
                    label, prefix, axis_n ? "n" : "k",
                    axis_n ? "qsrt_svh" : "qsrt_suh", (long long)rate,
                    TRL_PAIR_CHANNELS);
  if (orth <= 0 || orth % TRELLIS_HBLOCK != 0)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': %s has %lld elements, expected a "
                    "positive multiple of %d",
                    label, prefix, axis_n ? "qsrt_suh" : "qsrt_svh",
                    (long long)orth, TRELLIS_HBLOCK);
  w->k = suh_len;
  w->n = svh_len;
  w->bits = trl_pair_bits0(w->pair);
  w->bits1 = trl_pair_bits1(w->pair);
  trellis_status st = check_pair_bits(label, prefix, meta, w);
  if (st != TRELLIS_OK)
    return st;
  const uint64_t words = trl_pair_record_words(orth, w->bits) +
                         trl_pair_record_words(orth, w->bits1);
  const trellis_tensor *t = g->payload;
  if (t->ndim != 1 || (uint64_t)t->shape[0] != words) {
    char sh[96];
    trl_shape_text(t, sh, sizeof sh);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': qsrt_pair has shape %s, expected "
                    "[%llu] (%s on %s: (%lld/16)*128*(%d+%d) words)",
                    label, prefix, sh, (unsigned long long)words, kind,
                    axis_n ? "n" : "k", (long long)orth, w->bits, w->bits1);
  }
  st = check_finite(label, prefix, g->suh, "qsrt_suh");
  if (st == TRELLIS_OK)
    st = check_finite(label, prefix, g->svh, "qsrt_svh");
  return st;
}

trellis_status trl_qsrt_describe(const char *label, const char *prefix,
                                 const trl_qsrt_group *g,
                                 const trl_st_meta *meta,
                                 const char *model_codebook,
                                 trellis_weight *w) {
  const char *payload = g->is_pair ? "qsrt_pair" : "qsrt_trellis";
  if (!g->suh || !g->svh)
    return trl_fail(TRELLIS_ERR_NOT_FOUND,
                    "%s: layer '%s': has a %s but tensor '%s.%s' is "
                    "missing",
                    label, prefix, payload, prefix,
                    g->suh ? "qsrt_svh" : "qsrt_suh");
  if (g->payload->dtype != TRELLIS_T_I16)
    return trl_fail(
        TRELLIS_ERR_DTYPE, "%s: layer '%s': %s has dtype %s, expected I16",
        label, prefix, payload, trellis_tensor_dtype_name(g->payload->dtype));
  int64_t suh_len = 0, svh_len = 0;
  trellis_status st = check_scale(label, prefix, g->suh, "qsrt_suh", &suh_len);
  if (st == TRELLIS_OK)
    st = check_scale(label, prefix, g->svh, "qsrt_svh", &svh_len);
  if (st == TRELLIS_OK)
    st = pick_codebook(label, prefix, g, meta, model_codebook, &w->codebook);
  if (st != TRELLIS_OK)
    return st;
  if (g->is_pair)
    return describe_pair(label, prefix, g, meta, suh_len, svh_len, w);
  return describe_uniform(label, prefix, g, meta, suh_len, svh_len, w);
}

size_t trl_qsrt_record1_offset(const trellis_weight *w) {
  const int64_t orth = w->rate_axis == TRELLIS_RATE_AXIS_N ? w->k : w->n;
  return (size_t)trl_pair_record_words(orth, w->bits);
}
