/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis info PATH --json`: every field of the table as one JSON object
 * on stdout, built and written with jansson. The keys are listed in
 * cmd_info.c's usage text and the README.
 *
 * Rates: a layer's K is `bits` (the integer part, as trellis_layer_info)
 * with `half` (true for K = bits + 1/2), and `rate` the number itself (2.5);
 * the config's head_bits and mtp_bits likewise. Names and paths are JSON
 * strings of the file's own bytes (they are UTF-8: a safetensors header is
 * JSON); a path that is not UTF-8 is given escaped as info prints it. The
 * output is ASCII: everything else is \u-escaped, so it is safe on a
 * terminal too. */
#include "cli_util.h"

#include <jansson.h>
#include <string.h>

/* A JSON string of `s`, or of its cli_escape form when it is not UTF-8. */
static json_t *jstr(const char *s) {
  json_t *j = json_string(s);
  if (!j) {
    char buf[4 * 4096 + 1];
    j = json_string(cli_escape(s, buf, sizeof buf));
  }
  return j;
}

/* The string, or null when it is empty (a field config.json left out). */
static json_t *jstr_or_null(const char *s) {
  return s[0] ? jstr(s) : json_null();
}

/* A ratio as a JSON number, or null where it has no value. */
static json_t *jratio(double num, double den) {
  return den > 0 ? json_real(num / den) : json_null();
}

static json_t *jrate(int bits, int half) {
  return json_real((double)bits + (half ? 0.5 : 0.0));
}

/* Sets key to `value` (taking it); a NULL value (jansson's allocation
 * failure) marks the object failed. */
static void put(json_t *obj, const char *key, json_t *value, int *ok) {
  if (!value || json_object_set_new(obj, key, value) != 0)
    *ok = 0;
}

static void append(json_t *arr, json_t *value, int *ok) {
  if (!value || json_array_append_new(arr, value) != 0)
    *ok = 0;
}

/* head_bits, mtp_bits: K as bits and half, and the number (null: absent). */
static void put_rate(json_t *o, const char *name, int bits, int half, int *ok) {
  char key[32];
  snprintf(key, sizeof key, "%s_bits", name);
  put(o, key, bits > 0 ? json_integer(bits) : json_null(), ok);
  snprintf(key, sizeof key, "%s_half", name);
  put(o, key, bits > 0 ? json_boolean(half) : json_null(), ok);
  snprintf(key, sizeof key, "%s_rate", name);
  put(o, key, bits > 0 ? jrate(bits, half) : json_null(), ok);
}

static json_t *config_json(const trellis_quant_config *q, int *ok) {
  if (q == NULL || !q->present)
    return json_null();
  json_t *o = json_object();
  if (!o) {
    *ok = 0;
    return NULL;
  }
  put(o, "quant_method", jstr_or_null(q->quant_method), ok);
  put(o, "version", jstr_or_null(q->version), ok);
  put(o, "bits", q->bits > 0 ? json_real(q->bits) : json_null(), ok);
  put_rate(o, "head", q->head_bits, q->head_half, ok);
  put_rate(o, "mtp", q->mtp_bits, q->mtp_half, ok);
  put(o, "vision_bits",
      q->vision_bits > 0 ? json_integer(q->vision_bits) : json_null(), ok);
  put(o, "codebook", jstr_or_null(q->codebook), ok);
  put(o, "out_scales", jstr_or_null(q->out_scales), ok);
  const int calib = q->calibration_rows > 0 || q->calibration_cols > 0;
  put(o, "calibration_rows",
      calib ? json_integer(q->calibration_rows) : json_null(), ok);
  put(o, "calibration_cols",
      calib ? json_integer(q->calibration_cols) : json_null(), ok);
  put(o, "descriptor_sha256", jstr_or_null(q->descriptor_sha256), ok);
  put(o, "tie_word_embeddings",
      q->tie_word_embeddings >= 0 ? json_boolean(q->tie_word_embeddings)
                                  : json_null(),
      ok);
  return o;
}

static const char *sign_name(trellis_sign_form f) {
  return f == TRELLIS_SIGNS_LEGACY ? "legacy" : "scaled";
}

static json_t *layer_json(const trellis_model *model,
                          const trellis_layer_info *l, int *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = 0;
    return NULL;
  }
  const int pair = l->pair != TRELLIS_PAIR_NONE;
  const double kn = (double)l->k * (double)l->n;
  put(o, "name", jstr(l->name), ok);
  put(o, "k", json_integer(l->k), ok);
  put(o, "n", json_integer(l->n), ok);
  put(o, "bits", json_integer(l->bits), ok); /* a pair: record0's K */
  put(o, "half", json_boolean(l->half), ok);
  put(o, "rate", pair ? json_null() : jrate(l->bits, l->half), ok);
  put(o, "pair", pair ? jstr(trellis_pair_kind_name(l->pair)) : json_null(),
      ok);
  put(o, "rate_axis",
      pair ? jstr(trellis_rate_axis_name(l->rate_axis)) : json_null(), ok);
  put(o, "codebook", jstr(trellis_codebook_name(l->codebook)), ok);
  put(o, "payload_bits_per_weight",
      jratio(8.0 * (double)cli_layer_payload_bytes(l), kn), ok);
  put(o, "bytes", json_integer((json_int_t)cli_layer_bytes(l)), ok);
  put(o, "payload_bytes", json_integer((json_int_t)cli_layer_payload_bytes(l)),
      ok);
  put(o, "input_signs", jstr(sign_name(l->input_signs)), ok);
  put(o, "output_signs", jstr(sign_name(l->output_signs)), ok);
  put(o, "bias", json_boolean(l->has_bias), ok);
  put(o, "correction", json_boolean(cli_layer_has_correction(model, l)), ok);
  return o;
}

static json_t *fp16_json(const cli_fp16_linear *f, int *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = 0;
    return NULL;
  }
  put(o, "name", jstr(f->name), ok);
  put(o, "k", json_integer(f->k), ok);
  put(o, "n", json_integer(f->n), ok);
  put(o, "dtype", jstr(trellis_tensor_dtype_name(f->dtype)), ok);
  put(o, "bits_per_weight",
      jratio(8.0 * (double)f->weight_bytes, (double)f->k * (double)f->n), ok);
  put(o, "bytes", json_integer((json_int_t)f->bytes), ok);
  put(o, "bias", json_boolean(f->bias), ok);
  return o;
}

static json_t *other_json(const trellis_model *model, size_t i, int *ok) {
  trellis_tensor t;
  trellis_other_kind kind;
  if (trellis_model_other(model, i, &t) != TRELLIS_OK ||
      trellis_model_other_kind(model, i, &kind) != TRELLIS_OK) {
    *ok = 0;
    return NULL;
  }
  json_t *o = json_object(), *shape = json_array();
  if (!o || !shape) {
    json_decref(o);
    json_decref(shape);
    *ok = 0;
    return NULL;
  }
  for (int d = 0; d < t.ndim; d++)
    append(shape, json_integer(t.shape[d]), ok);
  put(o, "name", jstr(t.name), ok);
  put(o, "kind", jstr(trellis_other_kind_name(kind)), ok);
  put(o, "dtype", jstr(trellis_tensor_dtype_name(t.dtype)), ok);
  put(o, "shape", shape, ok);
  put(o, "bytes", json_integer((json_int_t)t.nbytes), ok);
  return o;
}

static json_t *embedding_json(const cli_embedding *e, int *ok) {
  json_t *o = json_object();
  if (!o) {
    *ok = 0;
    return NULL;
  }
  put(o, "name", jstr(e->name), ok);
  put(o, "vocab", json_integer(e->vocab), ok);
  put(o, "groups", e->groups > 0 ? json_integer(e->groups) : json_null(), ok);
  put(o, "bits", e->bits > 0 ? json_integer(e->bits) : json_null(), ok);
  put(o, "bytes", json_integer((json_int_t)e->bytes), ok);
  return o;
}

static json_t *ngram_json(const trellis_model *model, int *ok) {
  cli_ngram ng;
  if (!cli_ngram_of(model, &ng))
    return json_null();
  json_t *o = json_object();
  if (!o) {
    *ok = 0;
    return NULL;
  }
  put(o, "file", jstr("ngram_embedding.safetensors"), ok);
  put(o, "tensors", json_integer((json_int_t)ng.tensors), ok);
  put(o, "shards", json_integer((json_int_t)ng.shards), ok);
  put(o, "rows", json_integer(ng.rows), ok);
  put(o, "bits", ng.bits > 0 ? json_integer(ng.bits) : json_null(), ok);
  put(o, "bytes", json_integer((json_int_t)ng.bytes), ok);
  return o;
}

int cli_json_print(json_t *root, const char *path, int ok) {
  int r = CLI_OK;
  if (!ok || !root) {
    cli_error("%s: --json: out of memory building the report", path);
    r = CLI_FAIL;
  } else if (json_dumpf(root, stdout,
                        JSON_INDENT(2) | JSON_ENSURE_ASCII |
                            JSON_REAL_PRECISION(12)) != 0 ||
             fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
    cli_error("%s: --json: cannot write the report to stdout", path);
    r = CLI_FAIL;
  }
  json_decref(root);
  return r;
}

int cli_info_json(const char *path) {
  trellis_model *model = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  int ok = 1;
  json_t *root = json_object(), *layers = json_array(), *fp16 = json_array(),
         *others = json_array(), *embeddings = json_array(),
         *totals = json_object();
  if (!root || !layers || !fp16 || !others || !embeddings || !totals)
    ok = 0;

  const size_t count = trellis_model_layer_count(model);
  size_t layer_bytes = 0, payload_bytes = 0, fp16_bytes = 0, fp16_count = 0;
  double weights = 0.0, fp16_weights = 0.0;
  for (size_t i = 0; ok && i < count; i++) {
    trellis_layer_info l;
    if ((st = trellis_model_layer_info(model, i, &l)) != TRELLIS_OK) {
      json_decref(root);
      json_decref(layers);
      json_decref(fp16);
      json_decref(others);
      json_decref(embeddings);
      json_decref(totals);
      trellis_model_close(model);
      return cli_lib_error(st, path);
    }
    layer_bytes += cli_layer_bytes(&l);
    payload_bytes += cli_layer_payload_bytes(&l);
    weights += (double)l.k * (double)l.n;
    append(layers, layer_json(model, &l, &ok), &ok);
  }
  const size_t nothers = trellis_model_other_count(model);
  for (size_t i = 0; ok && i < nothers; i++) {
    cli_fp16_linear f;
    cli_embedding e;
    if (cli_fp16_linear_at(model, i, &f)) {
      append(fp16, fp16_json(&f, &ok), &ok);
      fp16_bytes += f.bytes;
      fp16_weights += (double)f.k * (double)f.n;
      fp16_count++;
    }
    if (cli_embedding_at(model, i, &e))
      append(embeddings, embedding_json(&e, &ok), &ok);
    append(others, other_json(model, i, &ok), &ok);
  }
  trellis_clear_error();

  const size_t all_bytes = layer_bytes + fp16_bytes;
  put(totals, "exl3_layers", json_integer((json_int_t)count), &ok);
  put(totals, "fp16_linears", json_integer((json_int_t)fp16_count), &ok);
  put(totals, "bytes", json_integer((json_int_t)all_bytes), &ok);
  put(totals, "bits_per_weight",
      jratio(8.0 * (double)all_bytes, weights + fp16_weights), &ok);
  put(totals, "exl3_bits_per_weight",
      jratio(8.0 * (double)layer_bytes, weights), &ok);
  put(totals, "payload_bits_per_weight",
      jratio(8.0 * (double)payload_bytes, weights), &ok);
  put(totals, "other_tensors", json_integer((json_int_t)nothers), &ok);

  if (root) {
    put(root, "path", jstr(path), &ok);
    put(root, "quantization_config",
        config_json(trellis_model_quant_config(model), &ok), &ok);
    put(root, "layers", layers, &ok);
    put(root, "fp16_linears", fp16, &ok);
    put(root, "other_tensors", others, &ok);
    put(root, "quantized_embeddings", embeddings, &ok);
    put(root, "ngram_table", ngram_json(model, &ok), &ok);
    put(root, "totals", totals, &ok);
  } else {
    json_decref(layers);
    json_decref(fp16);
    json_decref(others);
    json_decref(embeddings);
    json_decref(totals);
  }
  trellis_model_close(model);
  return cli_json_print(root, path, ok);
}
