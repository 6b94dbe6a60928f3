/* SPDX-License-Identifier: Apache-2.0 */
/* What `trellis info` lists besides the EXL3 layers, read from the
 * headers alone: the table (cmd_info.c) and --json (cmd_info_json.c) print
 * the same rows. */
#include "cli_util.h"

#include <string.h>

static int ends_with(const char *s, const char *suffix) {
  const size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

int cli_fp16_linear_at(const trellis_model *model, size_t i,
                       cli_fp16_linear *out) {
  trellis_other_kind kind;
  trellis_tensor w, b;
  if (trellis_model_other_kind(model, i, &kind) != TRELLIS_OK ||
      kind != TRELLIS_OTHER_FP16_LINEAR ||
      trellis_model_other(model, i, &w) != TRELLIS_OK ||
      !ends_with(w.name, ".weight") || w.ndim != 2 ||
      strlen(w.name) - strlen(".weight") >= sizeof out->name - 8) {
    trellis_clear_error();
    return 0;
  }
  const size_t plen = strlen(w.name) - strlen(".weight");
  memcpy(out->name, w.name, plen);
  strcpy(out->name + plen, ".bias");
  out->bias = trellis_model_find_tensor(model, out->name, &b) == TRELLIS_OK;
  out->name[plen] = '\0';
  out->k = w.shape[1];
  out->n = w.shape[0];
  out->dtype = w.dtype;
  out->weight_bytes = w.nbytes;
  out->bytes = w.nbytes + (out->bias ? b.nbytes : 0);
  trellis_clear_error();
  return 1;
}

int cli_embedding_at(const trellis_model *model, size_t i, cli_embedding *out) {
  trellis_other_kind kind;
  trellis_tensor t, signs;
  char key[1024];
  memset(out, 0, sizeof *out);
  if (trellis_model_other_kind(model, i, &kind) != TRELLIS_OK ||
      kind != TRELLIS_OTHER_EXL3_EMBEDDING ||
      trellis_model_other(model, i, &t) != TRELLIS_OK ||
      !ends_with(t.name, ".trellis") || t.ndim != 2 ||
      strlen(t.name) >= sizeof key - 8) {
    trellis_clear_error();
    return 0;
  }
  /* <key>.trellis or <key>.shard_N.trellis: the signs are <key>.signs */
  strcpy(key, t.name);
  key[strlen(key) - strlen(".trellis")] = '\0';
  char *shard = strrchr(key, '.');
  if (shard && strncmp(shard, ".shard_", 7) == 0)
    *shard = '\0';
  strcat(key, ".signs");
  out->name = t.name;
  out->vocab = t.shape[0];
  out->groups = trellis_model_find_tensor(model, key, &signs) == TRELLIS_OK &&
                        signs.ndim == 2
                    ? signs.shape[0]
                    : 0;
  const int64_t per = out->groups > 0 ? t.shape[1] / out->groups : 0;
  if (per > 0 && t.shape[1] % out->groups == 0 && (per - 1) % 16 == 0)
    out->bits = (per - 1) / 16;
  out->bytes = t.nbytes;
  trellis_clear_error();
  return 1;
}

int cli_ngram_of(const trellis_model *model, cli_ngram *out) {
  memset(out, 0, sizeof *out);
  const trellis_file *ngram = trellis_model_ngram_file(model);
  if (!ngram)
    return 0;
  out->tensors = trellis_file_tensor_count(ngram);
  int64_t width = 0;
  for (size_t i = 0; i < out->tensors; i++) {
    trellis_tensor t;
    if (trellis_file_tensor(ngram, i, &t) != TRELLIS_OK)
      continue;
    out->bytes += t.nbytes;
    if (ends_with(t.name, ".trellis") && t.ndim == 2) {
      out->shards++;
      out->rows += t.shape[0];
      width = t.shape[1];
    }
  }
  if (width > 1 && (width - 1) % 10 == 0)
    out->bits = (width - 1) / 10;
  trellis_clear_error();
  return 1;
}

int cli_layer_has_correction(const trellis_model *model,
                             const trellis_layer_info *l) {
  char name[1024];
  trellis_tensor t;
  const int has =
      snprintf(name, sizeof name, "%s.qsrt_a", l->name) < (int)sizeof name &&
      trellis_model_find_tensor(model, name, &t) == TRELLIS_OK;
  trellis_clear_error();
  return has;
}

const char *cli_layer_rate_text(const trellis_layer_info *l, char *buf,
                                size_t size) {
  if (l->pair != TRELLIS_PAIR_NONE) {
    snprintf(buf, size, "%s/%s", trellis_pair_kind_name(l->pair),
             trellis_rate_axis_name(l->rate_axis));
    return buf;
  }
  return cli_rate_text(l->bits, l->half, buf, size);
}
