/* SPDX-License-Identifier: Apache-2.0 */
/* EXL3 layer discovery (FORMAT.md §2, §8), and b12x layers
 * (`<p>.qsrt_trellis` / `<p>.qsrt_pair`, checked in io/qsrt.c).
 *
 * A group `<p>.trellis` + `<p>.suh|su` + `<p>.svh|sv` (+ `<p>.mcg|mul1`,
 * `<p>.bias`) is one layer. Once `<p>.trellis` exists the group must be a
 * complete, consistent layer: a missing sign tensor is an error, never a
 * silent fall-back to "other" tensors.
 *
 * Choices:
 *   - A marker whose value differs from the built-in multiplier is rejected
 *     (TRELLIS_ERR_UNSUPPORTED): such files come from exllamav3's
 *     experimental 2025-05..10 era, where the value selected the codebook's
 *     multiplier; decoding them with the constant would give silently wrong
 *     weights.
 *   - Mixed sign forms (suh with sv, or su with svh) are accepted; the layer
 *     reports TRELLIS_SIGNS_LEGACY when either side is legacy.
 *   - A tensor misaligned for its element type (possible when a writer does
 *     not pad the header to 8 bytes) is copied to aligned memory, but only
 *     when its layer is fetched (trl_layers_realign): listing a model
 *     must not cost its payload.
 *   - Non-finite suh/svh/bias values, and an F32 bias beyond fp16's range,
 *     are rejected: a finite EXL3 layer never has them, and they would turn
 *     every output into NaN or inf. */
#include "io/layers.h"
#include "io/qsrt.h"

#include "format/weight.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PAYLOAD_EXL3, PAYLOAD_QSRT_TRELLIS, PAYLOAD_QSRT_PAIR, PAYLOAD_KINDS };

/* The members of one group, NULL when absent. A b12x group (qsrt != 0)
 * has its qsrt_trellis/qsrt_pair in `trellis` and qsrt_suh/qsrt_svh in
 * suh/svh. */
typedef struct group {
  const trellis_tensor *trellis, *suh, *su, *svh, *sv, *bias, *scale;
  /* `<p>.<marker>` of each codebook with a marker (format/codebooks.h) */
  const trellis_tensor *marker[TRL_CB_COUNT];
  int qsrt; /* 0: EXL3, else a payload suffix index (PAYLOAD_QSRT_*) */
} group;

/* The group's one marker and its codebook (the first, when several are
 * present: check_members rejects that). */
static const trellis_tensor *group_marker(const group *g,
                                          trellis_codebook *cb) {
  for (int c = 0; c < TRL_CB_COUNT; c++)
    if (g->marker[c]) {
      *cb = (trellis_codebook)c;
      return g->marker[c];
    }
  return NULL;
}

static const trellis_tensor *find(const trellis_tensor *ts, size_t n, char *key,
                                  size_t plen, const char *suffix) {
  strcpy(key + plen, suffix);
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(key, ts[mid].name);
    if (c == 0)
      return &ts[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* ------------------------------------------------------------- owning -- */

static int own(trl_layer_set *s, void *p) {
  if (!p)
    return 0;
  if (s->owned_count == s->owned_cap) {
    size_t cap = s->owned_cap ? 2 * s->owned_cap : 16;
    void **grown = realloc(s->owned, cap * sizeof *grown);
    if (!grown) {
      free(p);
      return 0;
    }
    s->owned = grown;
    s->owned_cap = cap;
  }
  s->owned[s->owned_count++] = p;
  return 1;
}

/* Points member j (trellis .. bias) of `w` at `p`. A pair's record1 lies
 * in its payload tensor, so trellis1 moves with trellis. */
static void set_member(trellis_weight *w, int j, const void *p) {
  switch (j) {
  case TRL_MEMBER_TRELLIS:
    w->trellis = p;
    w->trellis1 = p && w->pair != TRELLIS_PAIR_NONE
                      ? w->trellis + trl_qsrt_record1_offset(w)
                      : NULL;
    break;
  case TRL_MEMBER_SUH:
    w->suh = p;
    break;
  case TRL_MEMBER_SU:
    w->su = p;
    break;
  case TRL_MEMBER_SVH:
    w->svh = p;
    break;
  case TRL_MEMBER_SV:
    w->sv = p;
    break;
  case TRL_MEMBER_BIAS:
    w->bias = p;
    break;
  default:
    break;
  }
}

/* ------------------------------------------------------------- checks -- */

static trellis_status check_vector(const char *label, const char *prefix,
                                   const trellis_tensor *t, const char *what,
                                   trellis_tensor_dtype dtype, int64_t len,
                                   const char *why) {
  if (t->dtype != dtype)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "%s: layer '%s': %s has dtype %s, expected %s", label,
                    prefix, what, trellis_tensor_dtype_name(t->dtype),
                    trellis_tensor_dtype_name(dtype));
  if (t->ndim != 1 || t->shape[0] != len) {
    char sh[96];
    trl_shape_text(t, sh, sizeof sh);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': %s has shape %s, expected [%lld] (%s)",
                    label, prefix, what, sh, (long long)len, why);
  }
  return TRELLIS_OK;
}

/* A marker is I32 with shape [] (as ExLlamaV3 writes it; [1] is accepted
 * too) and holds exactly its codebook's value (EXL3-1.6 §3). */
static trellis_status check_marker(const char *label, const char *prefix,
                                   const trellis_tensor *t,
                                   trellis_codebook cb) {
  const char *what = trl_codebook_marker((int)cb);
  const uint32_t expected = trl_codebook_marker_value((int)cb);
  if (t->dtype != TRELLIS_T_I32)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "%s: layer '%s': %s marker has dtype %s, expected I32",
                    label, prefix, what, trellis_tensor_dtype_name(t->dtype));
  if (!(t->ndim == 0 || (t->ndim == 1 && t->shape[0] == 1))) {
    char sh[96];
    trl_shape_text(t, sh, sizeof sh);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': %s marker has shape %s, expected [] "
                    "or [1]",
                    label, prefix, what, sh);
  }
  const uint8_t *b = t->data;
  uint32_t v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
               (uint32_t)b[3] << 24;
  if (v != expected)
    return trl_fail(TRELLIS_ERR_UNSUPPORTED,
                    "%s: layer '%s': %s marker value 0x%08X differs from "
                    "the built-in multiplier 0x%08X (non-default "
                    "codebook multipliers are not supported)",
                    label, prefix, what, (unsigned)v, (unsigned)expected);
  return TRELLIS_OK;
}

/* At most one codebook marker. */
static trellis_status check_one_marker(const char *label, const char *prefix,
                                       const group *g) {
  for (int a = 0; a < TRL_CB_COUNT; a++)
    for (int b = a + 1; b < TRL_CB_COUNT; b++)
      if (g->marker[a] && g->marker[b])
        return trl_fail(TRELLIS_ERR_FORMAT,
                        "%s: layer '%s': both %s and %s codebook markers "
                        "are present",
                        label, prefix, trl_codebook_marker(a),
                        trl_codebook_marker(b));
  return TRELLIS_OK;
}

/* Exclusive pairs, the required members, and the scale leftover. */
static trellis_status check_members(const char *label, const char *prefix,
                                    const group *g) {
  if (g->scale)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': tensor '%s' is present, but scale is "
                    "no longer used",
                    label, prefix, g->scale->name);
  trellis_status st = check_one_marker(label, prefix, g);
  if (st != TRELLIS_OK)
    return st;
  if (g->suh && g->su)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': both suh and legacy su are present", label,
                    prefix);
  if (g->svh && g->sv)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: layer '%s': both svh and legacy sv are present", label,
                    prefix);
  if (!g->suh && !g->su)
    return trl_fail(TRELLIS_ERR_NOT_FOUND,
                    "%s: layer '%s': has a trellis but tensor '%s.suh' "
                    "(or legacy '%s.su') is missing",
                    label, prefix, prefix, prefix);
  if (!g->svh && !g->sv)
    return trl_fail(TRELLIS_ERR_NOT_FOUND,
                    "%s: layer '%s': has a trellis but tensor '%s.svh' "
                    "(or legacy '%s.sv') is missing",
                    label, prefix, prefix, prefix);
  return TRELLIS_OK;
}

/* trellis: I16 [k/16, n/16, 16*K], k and n multiples of 128; K in 1..8
 * (16*K = 16, 32, .., 128), or a half-integer K 1.5, 2.5, 3.5 of
 * ExLlamaV3 1.6 (16*K = 24, 40, 56: a width with remainder 8 mod 16,
 * EXL3-1.6 §1.5). */
static trellis_status check_trellis(const char *label, const char *prefix,
                                    const trellis_tensor *t,
                                    trellis_weight *w) {
  char sh[96];
  trl_shape_text(t, sh, sizeof sh);
  if (t->dtype != TRELLIS_T_I16)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "%s: layer '%s': trellis has dtype %s, expected I16", label,
                    prefix, trellis_tensor_dtype_name(t->dtype));
  if (t->ndim != 3)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': trellis has shape %s, expected 3 "
                    "dimensions [k/16, n/16, 16*K]",
                    label, prefix, sh);
  const int64_t last = t->shape[2];
  const int half = last % 16 == 8;
  const int64_t bits = last / 16;
  if (!(last % 16 == 0 && bits >= TRELLIS_MIN_BITS &&
        bits <= TRELLIS_MAX_BITS) &&
      !(half && bits >= TRL_HALF_MIN_BITS && bits <= TRL_HALF_MAX_BITS))
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: layer '%s': trellis last dim %lld is not 16*K "
                    "for K in 1..8 or K 1.5, 2.5, 3.5 (widths 24, 40, 56)",
                    label, prefix, (long long)last);
  const int64_t limit = INT64_MAX / TRELLIS_TILE;
  for (int d = 0; d < 2; d++) {
    int64_t tiles = t->shape[d];
    if (tiles <= 0 || tiles > limit ||
        (tiles * TRELLIS_TILE) % TRELLIS_HBLOCK != 0)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "%s: layer '%s': trellis shape %s gives %s = %lld, "
                      "which is not a positive multiple of %d",
                      label, prefix, sh, d ? "n" : "k",
                      (long long)(tiles > limit ? tiles : tiles * TRELLIS_TILE),
                      TRELLIS_HBLOCK);
  }
  w->k = t->shape[0] * TRELLIS_TILE;
  w->n = t->shape[1] * TRELLIS_TILE;
  w->bits = (int)bits;
  w->half = half;
  return TRELLIS_OK;
}

static trellis_status check_signs(const char *label, const char *prefix,
                                  const group *g, const trellis_weight *w) {
  trellis_status st = TRELLIS_OK;
  if (g->suh)
    st = check_vector(label, prefix, g->suh, "suh", TRELLIS_T_F16, w->k,
                      "k from the trellis");
  else
    st = check_vector(label, prefix, g->su, "su", TRELLIS_T_I16, w->k / 16,
                      "k/16 packed sign words");
  if (st != TRELLIS_OK)
    return st;
  if (g->svh)
    return check_vector(label, prefix, g->svh, "svh", TRELLIS_T_F16, w->n,
                        "n from the trellis");
  return check_vector(label, prefix, g->sv, "sv", TRELLIS_T_I16, w->n / 16,
                      "n/16 packed sign words");
}

static trellis_status check_bias(const char *label, const char *prefix,
                                 const trellis_tensor *b, int64_t n) {
  if (b->dtype != TRELLIS_T_F16 && b->dtype != TRELLIS_T_F32)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "%s: layer '%s': bias has dtype %s, expected F16 (or "
                    "F32)",
                    label, prefix, trellis_tensor_dtype_name(b->dtype));
  return check_vector(label, prefix, b, "bias", b->dtype, n, "n");
}

/* Every element of an F16 vector (suh, svh, bias) is finite. */
static trellis_status check_finite_f16(const char *label, const char *prefix,
                                       const trellis_tensor *t) {
  size_t count = (size_t)t->shape[0];
  size_t i = trl_f16_first_nonfinite(t->data, count);
  if (i == count)
    return TRELLIS_OK;
  const uint8_t *b = (const uint8_t *)t->data + 2 * i;
  return trl_fail(TRELLIS_ERR_FORMAT,
                  "%s: layer '%s': tensor '%s' element %zu is %s (a "
                  "finite EXL3 layer never has one)",
                  label, prefix, t->name, i,
                  (b[0] | (b[1] & 3)) ? "NaN" : "inf");
}

/* Every element of an F32 bias is finite and within fp16's range. */
static trellis_status check_bias_f32(const char *label, const char *prefix,
                                     const trellis_tensor *t) {
  const uint8_t *src = t->data;
  for (size_t i = 0; i < (size_t)t->shape[0]; i++) {
    float v;
    memcpy(&v, src + 4 * i, 4);
    uint16_t h = trellis_f32_to_f16(v);
    if ((h & 0x7C00u) == 0x7C00u)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: layer '%s': tensor '%s' element %zu = %g is "
                      "%s",
                      label, prefix, t->name, i, (double)v,
                      isnan(v)   ? "NaN"
                      : isinf(v) ? "infinite"
                                 : "beyond fp16's range (largest finite "
                                   "65504)");
  }
  return TRELLIS_OK;
}

/* The values a finite layer needs (the scales and bias: O(k + n) reads). */
static trellis_status check_values(const char *label, const char *prefix,
                                   const group *g) {
  trellis_status st = TRELLIS_OK;
  if (g->suh)
    st = check_finite_f16(label, prefix, g->suh);
  if (st == TRELLIS_OK && g->svh)
    st = check_finite_f16(label, prefix, g->svh);
  if (st == TRELLIS_OK && g->bias)
    st = g->bias->dtype == TRELLIS_T_F32
             ? check_bias_f32(label, prefix, g->bias)
             : check_finite_f16(label, prefix, g->bias);
  return st;
}

/* --------------------------------------------------------- assembling -- */

/* F32 bias -> F16 copy owned by the set. */
static const uint16_t *bias_f16(trl_layer_set *s, const trellis_tensor *b) {
  size_t n = (size_t)b->shape[0];
  uint16_t *out = malloc(n ? n * sizeof *out : 1);
  if (!own(s, out))
    return NULL;
  s->copied_bytes += n * sizeof *out;
  const uint8_t *src = b->data;
  for (size_t i = 0; i < n; i++) {
    float v;
    memcpy(&v, src + 4 * i, 4);
    out[i] = trellis_f32_to_f16(v);
  }
  return out;
}

/* Points the weight at the group's data; a member misaligned for its
 * 2-byte elements is left NULL and marked pending instead. */
static trellis_status attach(trl_layer_set *s, const char *label,
                             const char *prefix, const group *g,
                             trellis_layer *L, trl_layer_extra *x) {
  trellis_codebook marker_cb;
  const trellis_tensor *m[TRL_MEMBER_COUNT] = {g->trellis,
                                               g->suh,
                                               g->su,
                                               g->svh,
                                               g->sv,
                                               g->bias,
                                               group_marker(g, &marker_cb)};
  memcpy(x->member, m, sizeof m);
  x->input_legacy = g->su != NULL;
  x->output_legacy = g->sv != NULL;
  trellis_weight *w = &L->weight;
  for (int j = 0; j <= TRL_MEMBER_BIAS; j++) {
    if (!m[j])
      continue;
    if (j == TRL_MEMBER_BIAS && m[j]->dtype == TRELLIS_T_F32) {
      if (!(w->bias = bias_f16(s, m[j])))
        goto oom;
    } else if ((uintptr_t)m[j]->data % 2 != 0) {
      x->pending |= 1u << j;
    } else {
      set_member(w, j, m[j]->data);
    }
  }
  x->lazy = x->pending != 0;
  size_t len = strlen(prefix) + 1;
  char *name = malloc(len);
  if (!own(s, name))
    goto oom;
  memcpy(name, prefix, len);
  L->name = name;
  L->has_bias = g->bias != NULL;
  L->signs = (g->su || g->sv) ? TRELLIS_SIGNS_LEGACY : TRELLIS_SIGNS_SCALED;
  return TRELLIS_OK;
oom:
  return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: layer '%s': out of memory",
                  label, prefix);
}

static trellis_status build_layer(trl_layer_set *s, const char *label,
                                  const char *prefix, const group *g,
                                  trellis_layer *L, trl_layer_extra *x) {
  memset(L, 0, sizeof *L);
  memset(x, 0, sizeof *x);
  trellis_weight *w = &L->weight;
  w->struct_size = sizeof *w;
  /* no marker: 3INST (FORMAT.md §2.3) */
  trellis_codebook cb = TRELLIS_CB_3INST;
  const trellis_tensor *marker = group_marker(g, &cb);
  trellis_status st = check_members(label, prefix, g);
  if (st == TRELLIS_OK)
    st = check_trellis(label, prefix, g->trellis, w);
  if (st == TRELLIS_OK)
    st = check_signs(label, prefix, g, w);
  if (st == TRELLIS_OK && marker)
    st = check_marker(label, prefix, marker, cb);
  if (st == TRELLIS_OK && !trl_codebook_rate_valid((int)cb, w->bits, w->half))
    st = trl_fail_prefix(
        trl_codebook_check_rate(cb, w->bits, w->half, "trellis"),
        "%s: layer '%s' (trellis width %lld%s)", label, prefix,
        (long long)g->trellis->shape[2],
        marker ? "" : ", no codebook marker: 3inst");
  if (st == TRELLIS_OK && g->bias)
    st = check_bias(label, prefix, g->bias, w->n);
  if (st == TRELLIS_OK)
    st = check_values(label, prefix, g);
  if (st != TRELLIS_OK)
    return st;
  w->codebook = cb;
  return attach(s, label, prefix, g, L, x);
}

/* A b12x layer (io/qsrt.h); a pair's record1 follows record0 in the one
 * payload tensor (set_member points trellis1 at it). */
static trellis_status build_qsrt_layer(trl_layer_set *s, const char *label,
                                       const char *prefix, const group *g,
                                       const trl_st_meta *meta,
                                       const char *model_codebook,
                                       trellis_layer *L, trl_layer_extra *x) {
  memset(L, 0, sizeof *L);
  memset(x, 0, sizeof *x);
  trellis_weight *w = &L->weight;
  w->struct_size = sizeof *w;
  trl_qsrt_group q = {.payload = g->trellis,
                      .is_pair = g->qsrt == PAYLOAD_QSRT_PAIR,
                      .suh = g->suh,
                      .svh = g->svh};
  q.marker = group_marker(g, &q.marker_codebook);
  trellis_status st = check_one_marker(label, prefix, g);
  if (st == TRELLIS_OK)
    st = trl_qsrt_describe(label, prefix, &q, meta, model_codebook, w);
  if (st == TRELLIS_OK && q.marker)
    st = check_marker(label, prefix, q.marker, q.marker_codebook);
  if (st == TRELLIS_OK)
    st = check_values(label, prefix, g);
  if (st == TRELLIS_OK)
    st = attach(s, label, prefix, g, L, x);
  return st;
}

static void claim(const trellis_tensor *base, const trellis_tensor *t,
                  unsigned char *claimed) {
  if (t)
    claimed[t - base] = 1;
}

/* A layer and its extra, sorted together by name. */
typedef struct layer_pair {
  trellis_layer layer;
  trl_layer_extra extra;
} layer_pair;

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int trl_layer_name_cmp(const char *a, const char *b) {
  const char *p = a, *q = b;
  while (*p && *q) {
    if (is_digit(*p) && is_digit(*q)) {
      /* a run of digits: by value (leading zeros skipped, then length,
       * then digits) */
      while (*p == '0')
        p++;
      while (*q == '0')
        q++;
      size_t lp = 0, lq = 0;
      while (is_digit(p[lp]))
        lp++;
      while (is_digit(q[lq]))
        lq++;
      if (lp != lq)
        return lp < lq ? -1 : 1;
      const int c = memcmp(p, q, lp);
      if (c)
        return c;
      p += lp;
      q += lq;
      continue;
    }
    if (*p != *q)
      return (unsigned char)*p < (unsigned char)*q ? -1 : 1;
    p++;
    q++;
  }
  if (*p || *q)
    return *p ? 1 : -1;
  return strcmp(a, b); /* equal by value (x01, x1): a total order still */
}

static int cmp_pairs(const void *a, const void *b) {
  return trl_layer_name_cmp(((const layer_pair *)a)->layer.name,
                            ((const layer_pair *)b)->layer.name);
}

static int sort_layers(trl_layer_set *s) {
  layer_pair *p = malloc((s->count ? s->count : 1) * sizeof *p);
  if (!p)
    return 0;
  for (size_t i = 0; i < s->count; i++) {
    p[i].layer = s->layers[i];
    p[i].extra = s->extra[i];
  }
  qsort(p, s->count, sizeof *p, cmp_pairs);
  for (size_t i = 0; i < s->count; i++) {
    s->layers[i] = p[i].layer;
    s->extra[i] = p[i].extra;
  }
  free(p);
  return 1;
}

/* Payload suffixes: index 0 is EXL3's, the others b12x's. */
static const char *const payload_suffix[] = {".trellis", ".qsrt_trellis",
                                             ".qsrt_pair"};

/* The payload suffix index of `name` (-1: none); *plen = prefix length. */
static int payload_kind(const char *name, size_t *plen) {
  size_t len = strlen(name);
  for (int i = 0; i < PAYLOAD_KINDS; i++) {
    size_t slen = strlen(payload_suffix[i]);
    if (len >= slen && strcmp(name + len - slen, payload_suffix[i]) == 0) {
      *plen = len - slen;
      return i;
    }
  }
  return -1;
}

/* One prefix has one payload: EXL3's or one of b12x's. */
static trellis_status check_one_payload(const trellis_tensor *ts, size_t n,
                                        char *key, size_t plen, int kind,
                                        const char *label) {
  for (int i = 0; i < PAYLOAD_KINDS; i++) {
    if (i == kind || !find(ts, n, key, plen, payload_suffix[i]))
      continue;
    key[plen] = '\0';
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: layer '%s': has both %s and %s",
                    label, key, payload_suffix[kind] + 1,
                    payload_suffix[i] + 1);
  }
  return TRELLIS_OK;
}

/* Fills one layer per payload tensor; marks their members claimed. */
static trellis_status find_layers(trl_layer_set *s, const trellis_tensor *ts,
                                  size_t n, const trl_layer_hints *hints,
                                  const char *label, unsigned char *claimed) {
  for (size_t i = 0; i < n; i++) {
    size_t plen;
    const int kind = payload_kind(ts[i].name, &plen);
    if (kind < 0)
      continue;
    char *key = malloc(plen + 16); /* room for the longest suffix */
    if (!key)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
    memcpy(key, ts[i].name, plen);
    group g = {.trellis = &ts[i], .qsrt = kind};
    trellis_status st = TRELLIS_OK;
    if (kind == PAYLOAD_EXL3) {
      g.suh = find(ts, n, key, plen, ".suh");
      g.su = find(ts, n, key, plen, ".su");
      g.svh = find(ts, n, key, plen, ".svh");
      g.sv = find(ts, n, key, plen, ".sv");
      g.bias = find(ts, n, key, plen, ".bias");
      g.scale = find(ts, n, key, plen, ".scale");
      /* A 2-D trellis without scales is a ring table (a quantized token
       * embedding or an n-gram table, EXL3-1.6 §7, §8), not a Linear:
       * 1.6 takes a Linear only where trellis, suh|su and svh|sv exist. */
      if (ts[i].ndim == 2 && !g.suh && !g.su && !g.svh && !g.sv) {
        free(key);
        continue;
      }
    } else {
      g.suh = find(ts, n, key, plen, ".qsrt_suh");
      g.svh = find(ts, n, key, plen, ".qsrt_svh");
      st = check_one_payload(ts, n, key, plen, kind, label);
    }
    for (int c = 0; c < TRL_CB_COUNT; c++) {
      char suffix[16];
      if (trl_codebook_marker(c)[0] &&
          snprintf(suffix, sizeof suffix, ".%s", trl_codebook_marker(c)) <
              (int)sizeof suffix)
        g.marker[c] = find(ts, n, key, plen, suffix);
    }
    key[plen] = '\0';
    if (st == TRELLIS_OK && kind == PAYLOAD_EXL3)
      st = build_layer(s, label, key, &g, &s->layers[s->count],
                       &s->extra[s->count]);
    else if (st == TRELLIS_OK)
      st = build_qsrt_layer(s, label, key, &g,
                            hints == NULL        ? NULL
                            : hints->tensor_meta ? hints->tensor_meta[i]
                                                 : hints->meta,
                            hints ? hints->codebook : NULL,
                            &s->layers[s->count], &s->extra[s->count]);
    free(key);
    if (st != TRELLIS_OK)
      return st;
    s->count++;
    const trellis_tensor *members[] = {g.trellis, g.suh, g.su,
                                       g.svh,     g.sv,  g.bias};
    for (size_t j = 0; j < sizeof members / sizeof *members; j++)
      claim(ts, members[j], claimed);
    for (int c = 0; c < TRL_CB_COUNT; c++)
      claim(ts, g.marker[c], claimed);
  }
  return TRELLIS_OK;
}

/* ------------------------------------------------------------- others -- */

/* Length of the module part of `name` before its last component. */
static size_t parent_len(const char *name, size_t len) {
  while (len > 0 && name[len - 1] != '.')
    len--;
  return len > 0 ? len - 1 : 0;
}

/* An EXL3 layer whose parent module is name[0..plen) (a sibling). */
static int has_layer_child(const trl_layer_set *s, const char *name,
                           size_t plen) {
  size_t lo = 0, hi = s->count; /* the first layer name >= the parent */
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (strncmp(s->layers[mid].name, name, plen) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (; lo < s->count && strncmp(s->layers[lo].name, name, plen) == 0; lo++) {
    const char *ln = s->layers[lo].name;
    if ((plen == 0 || ln[plen] == '.') &&
        strchr(ln + plen + (plen ? 1 : 0), '.') == NULL)
      return 1;
  }
  return 0;
}

static const trellis_tensor *find_other(const trl_layer_set *s,
                                        const char *name) {
  size_t lo = 0, hi = s->other_count;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int c = strcmp(name, s->others[mid].name);
    if (c == 0)
      return &s->others[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

static int ends_with(const char *s, size_t len, const char *suffix) {
  const size_t b = strlen(suffix);
  return len >= b && memcmp(s + len - b, suffix, b) == 0;
}

/* `<key>.signs` of a ring table `<key>.trellis` or `<key>.shard_N.trellis`
 * (EXL3-1.6 §7), or NULL. */
static const trellis_tensor *embedding_signs(const trl_layer_set *s,
                                             const char *name, size_t len) {
  char buf[1100];
  size_t key = len - strlen(".trellis");
  const size_t shard = parent_len(name, key);
  if (shard > 0 && strncmp(name + shard, ".shard_", 7) == 0 &&
      name[shard + 7] != '\0' &&
      strspn(name + shard + 7, "0123456789") == key - shard - 7)
    key = shard;
  if (key + sizeof ".signs" > sizeof buf)
    return NULL;
  memcpy(buf, name, key);
  memcpy(buf + key, ".signs", sizeof ".signs");
  return find_other(s, buf);
}

/* The kinds of the other tensors (trellis_other_kind). */
static void classify_others(trl_layer_set *s) {
  for (size_t i = 0; i < s->other_count; i++) {
    const trellis_tensor *t = &s->others[i];
    const size_t len = strlen(t->name);
    if (ends_with(t->name, len, ".trellis") && t->ndim == 2 &&
        t->dtype == TRELLIS_T_I16) {
      const trellis_tensor *signs = embedding_signs(s, t->name, len);
      if (signs) {
        s->other_kind[i] = TRELLIS_OTHER_EXL3_EMBEDDING;
        s->other_kind[signs - s->others] = TRELLIS_OTHER_EXL3_EMBEDDING;
      }
    } else if (ends_with(t->name, len, ".weight") && t->ndim == 2 &&
               has_layer_child(s, t->name,
                               parent_len(t->name, parent_len(t->name, len)))) {
      /* `<p>.weight` of a Linear beside EXL3 layers (EXL3-1.6 §6) */
      char bias[1100];
      const size_t p = len - strlen(".weight");
      s->other_kind[i] = TRELLIS_OTHER_FP16_LINEAR;
      if (p + sizeof ".bias" <= sizeof bias) {
        memcpy(bias, t->name, p);
        memcpy(bias + p, ".bias", sizeof ".bias");
        const trellis_tensor *b = find_other(s, bias);
        if (b)
          s->other_kind[b - s->others] = TRELLIS_OTHER_FP16_LINEAR;
      }
    }
  }
}

trellis_status trl_layers_discover(const trellis_tensor *tensors, size_t count,
                                   const char *label, trl_layer_set *out) {
  return trl_layers_discover_hinted(tensors, count, NULL, label, out);
}

trellis_status trl_layers_discover_hinted(const trellis_tensor *tensors,
                                          size_t count,
                                          const trl_layer_hints *hints,
                                          const char *label,
                                          trl_layer_set *out) {
  memset(out, 0, sizeof *out);
  size_t alloc = count ? count : 1;
  unsigned char *claimed = calloc(alloc, 1);
  out->layers = calloc(alloc, sizeof *out->layers);
  out->extra = calloc(alloc, sizeof *out->extra);
  out->others = calloc(alloc, sizeof *out->others);
  if (!claimed || !out->layers || !out->extra || !out->others) {
    free(claimed);
    trl_layers_free(out);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "%s: cannot allocate the layer index", label);
  }
  trellis_status st = find_layers(out, tensors, count, hints, label, claimed);
  if (st == TRELLIS_OK && !sort_layers(out))
    st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                  "%s: cannot allocate the layer index", label);
  if (st != TRELLIS_OK) {
    free(claimed);
    trl_layers_free(out);
    return st;
  }
  for (size_t i = 0; i < count; i++)
    if (!claimed[i])
      out->others[out->other_count++] = tensors[i];
  free(claimed);
  if (!(out->other_kind = calloc(alloc, 1))) {
    trl_layers_free(out);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "%s: cannot allocate the layer index", label);
  }
  classify_others(out);
  return TRELLIS_OK;
}

trellis_status trl_layers_realign(trl_layer_set *s, size_t i,
                                  const char *label) {
  trl_layer_extra *x = &s->extra[i];
  for (int j = 0; j <= TRL_MEMBER_BIAS; j++) {
    if (!(x->pending & (1u << j)))
      continue;
    const trellis_tensor *t = x->member[j];
    void *copy = malloc(t->nbytes ? t->nbytes : 1);
    if (!own(s, copy))
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                      "%s: layer '%s': cannot allocate %zu bytes to "
                      "realign tensor '%s'",
                      label, s->layers[i].name, t->nbytes, t->name);
    memcpy(copy, t->data, t->nbytes);
    s->copied_bytes += t->nbytes;
    set_member(&s->layers[i].weight, j, copy);
    x->pending &= ~(1u << j);
  }
  return TRELLIS_OK;
}

void trl_layers_free(trl_layer_set *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->owned_count; i++)
    free(s->owned[i]);
  free(s->owned);
  free(s->layers);
  free(s->extra);
  free(s->others);
  free(s->other_kind);
  memset(s, 0, sizeof *s);
}
