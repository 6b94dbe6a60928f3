/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor-parallel shards in the CLI: `forward ... --tp N --rank R --split
 * n|k` runs rank R's shard of the layer (trellis_weight_shard, FORMAT.md
 * §6.6) and `info PATH --tp N [--split n|k]` lists each rank's bytes. */
#include "cli_util.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

#define MOST_RANKS 1024

int cli_tp_parse(const char *tp_text, const char *rank_text,
                 const char *split_text, int need_rank, cli_tp *out) {
  memset(out, 0, sizeof *out);
  out->split = TRELLIS_SPLIT_N;
  if (tp_text == NULL) {
    if (rank_text || split_text) {
      cli_error("%s needs --tp N", rank_text ? "--rank" : "--split");
      return CLI_USAGE;
    }
    return CLI_OK;
  }
  long ranks = 0, rank = 0;
  int r = cli_parse_int("--tp", tp_text, 1, MOST_RANKS, &ranks);
  if (r != CLI_OK)
    return r;
  out->ranks = (int)ranks;
  if (need_rank && (rank_text == NULL || split_text == NULL)) {
    cli_error("--tp %ld needs --rank R (0..%ld) and --split n|k", ranks,
              ranks - 1);
    return CLI_USAGE;
  }
  if (rank_text) {
    if ((r = cli_parse_int("--rank", rank_text, 0, ranks - 1, &rank)) != CLI_OK)
      return r;
    out->rank = (int)rank;
  }
  if (split_text) {
    if (strcmp(split_text, "n") == 0)
      out->split = TRELLIS_SPLIT_N;
    else if (strcmp(split_text, "k") == 0)
      out->split = TRELLIS_SPLIT_K;
    else {
      cli_error("--split: expected n (column-parallel) or k (row-parallel), "
                "got '%s'",
                split_text);
      return CLI_USAGE;
    }
    out->split_given = 1;
  }
  return CLI_OK;
}

static trellis_shard_desc tp_desc(const cli_tp *tp, trellis_split split,
                                  int rank) {
  trellis_shard_desc d;
  trellis_shard_desc_init(&d);
  d.split = split;
  d.ranks = tp->ranks;
  d.rank = rank;
  return d;
}

int cli_tp_shard(cli_tp *tp, trellis_layer *layer) {
  if (tp->ranks == 0)
    return CLI_OK;
  const trellis_shard_desc d = tp_desc(tp, tp->split, tp->rank);
  const int along_k = tp->split == TRELLIS_SPLIT_K;
  tp->full = layer->weight;
  size_t bytes = 0;
  trellis_clear_error();
  trellis_status st = trellis_shard_range(
      along_k ? layer->weight.k : layer->weight.n, &d, &tp->begin, &tp->end);
  if (st == TRELLIS_OK)
    st = trellis_weight_shard_bytes(&layer->weight, &d, &bytes);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, layer->name);
  if (bytes > 0 &&
      (tp->memory = aligned_alloc(16, (bytes + 15) / 16 * 16)) == NULL) {
    cli_error("%s: cannot allocate %zu bytes for rank %d's payload",
              layer->name, bytes, tp->rank);
    return CLI_FAIL;
  }
  trellis_weight shard;
  trellis_weight_init(&shard);
  if ((st = trellis_weight_shard(&layer->weight, &d, tp->memory, bytes,
                                 &shard)) != TRELLIS_OK)
    return cli_lib_error(st, layer->name);
  layer->weight = shard;
  const char *partial = "";
  if (along_k)
    partial = tp->full.bias == NULL
                  ? "; a partial: sum the ranks' outputs"
                  : (shard.bias ? "; a partial with the bias: sum the ranks' "
                                  "outputs"
                                : "; a partial without the bias (rank 0 adds "
                                  "it): sum the ranks' outputs");
  snprintf(tp->said, sizeof tp->said,
           "shard: rank %d of %d, split %s: %s %lld..%lld of %lld (payload "
           "%s, %zu bytes)%s",
           tp->rank, tp->ranks, trellis_split_name(tp->split),
           along_k ? "inputs" : "outputs", (long long)tp->begin,
           (long long)tp->end, (long long)(along_k ? tp->full.k : tp->full.n),
           bytes ? "copied" : "a view", trellis_weight_payload_bytes(&shard),
           partial);
  return CLI_OK;
}

void cli_tp_report(const cli_tp *tp) {
  if (tp->ranks > 0)
    fprintf(stderr, "%s\n", tp->said);
}

int cli_tp_input(const cli_tp *tp, const char *path, npy_array *x) {
  if (tp->ranks == 0 || tp->split != TRELLIS_SPLIT_K || x->ndim < 1 ||
      x->ndim > 2)
    return CLI_OK;
  const int64_t width = x->shape[x->ndim - 1];
  const int64_t slice = tp->end - tp->begin;
  if (width == slice)
    return CLI_OK; /* the rank's columns already */
  if (width != tp->full.k) {
    cli_error("%s: last dimension %lld is neither the layer's k = %lld nor "
              "rank %d's inputs %lld..%lld (%lld)",
              path, (long long)width, (long long)tp->full.k, tp->rank,
              (long long)tp->begin, (long long)tp->end, (long long)slice);
    return CLI_FAIL;
  }
  const size_t rows = x->ndim == 2 ? (size_t)x->shape[0] : 1;
  const size_t item = trellis_dtype_size(x->dtype);
  uint8_t *data = x->data;
  for (size_t row = 0; row < rows; row++) /* in place, front to back */
    memmove(data + row * (size_t)slice * item,
            data + (row * (size_t)width + (size_t)tp->begin) * item,
            (size_t)slice * item);
  x->shape[x->ndim - 1] = slice;
  x->nbytes = rows * (size_t)slice * item;
  return CLI_OK;
}

void cli_tp_free(cli_tp *tp) {
  free(tp->memory);
  tp->memory = NULL;
}

/* ---- info --tp ---------------------------------------------------------- */

trellis_split cli_tp_role_split(const char *name) {
  static const char *const rows[] = {"o_proj", "down_proj", "out_proj",
                                     "dense_4h_to_h"};
  const char *dot = strrchr(name, '.');
  const char *last = dot ? dot + 1 : name;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (strcmp(last, rows[i]) == 0)
      return TRELLIS_SPLIT_K;
  return TRELLIS_SPLIT_N;
}

void cli_shard_info(const trellis_layer_info *l, trellis_split split,
                    int64_t begin, int64_t end, trellis_layer_info *s) {
  *s = *l;
  const int along_k = split == TRELLIS_SPLIT_K;
  if (along_k) {
    s->k = end - begin;
    s->has_bias = l->has_bias && begin == 0; /* rank 0 adds the bias */
  } else {
    s->n = end - begin;
  }
  const int rate_k = l->rate_axis == TRELLIS_RATE_AXIS_K;
  if (l->pair != TRELLIS_PAIR_NONE && along_k == rate_k && end - begin < 256) {
    /* one record of the pair, a uniform layer */
    s->pair = TRELLIS_PAIR_NONE;
    s->rate_axis = TRELLIS_RATE_AXIS_N;
    s->bits = begin == 0 ? (int)((unsigned)l->pair >> 4 & 15u)
                         : (int)((unsigned)l->pair & 15u);
  }
}

/* Each rank's range of layer `l`, or 0 when it has too few blocks. */
static int layer_ranges(const cli_tp *tp, const trellis_layer_info *l,
                        trellis_split split, int64_t *begin, int64_t *end) {
  const int64_t length = split == TRELLIS_SPLIT_K ? l->k : l->n;
  if (length / TRELLIS_HBLOCK < tp->ranks)
    return 0;
  for (int r = 0; r < tp->ranks; r++) {
    const trellis_shard_desc d = tp_desc(tp, split, r);
    if (trellis_shard_range(length, &d, &begin[r], &end[r]) != TRELLIS_OK)
      return 0;
  }
  return 1;
}

#define SHOWN(text, buf) cli_escape((text), (buf), sizeof(buf))

/* --json: an array of the sizes, or NULL (then *ok = 0). */
static json_t *sizes_json(const size_t *v, int n, int *ok) {
  json_t *a = json_array();
  for (int k = 0; a && k < n; k++)
    if (json_array_append_new(a, json_integer((json_int_t)v[k])) != 0)
      *ok = 0;
  if (!a)
    *ok = 0;
  return a;
}

static void put(json_t *obj, const char *key, json_t *value, int *ok) {
  if (!value || json_object_set_new(obj, key, value) != 0)
    *ok = 0;
}

int cli_info_tp(const char *path, const cli_tp *tp, int json) {
  trellis_model *model = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  const size_t count = trellis_model_layer_count(model);
  const int n = tp->ranks;
  size_t *rank_bytes = calloc((size_t)n, sizeof *rank_bytes);
  size_t *rank_payload = calloc((size_t)n, sizeof *rank_payload);
  int64_t *begin = calloc((size_t)n, sizeof *begin);
  int64_t *end = calloc((size_t)n, sizeof *end);
  size_t *layer_bytes = calloc((size_t)n, sizeof *layer_bytes);
  size_t *layer_payload = calloc((size_t)n, sizeof *layer_payload);
  int r = CLI_FAIL, ok = 1;
  json_t *root = NULL, *rows = NULL;
  if (json && (!(root = json_object()) || !(rows = json_array())))
    ok = 0;
  if (!rank_bytes || !rank_payload || !begin || !end || !layer_bytes ||
      !layer_payload || !ok) {
    cli_error("info: out of memory");
    goto done;
  }
  char shown[4 * 4096 + 1];
  int width = 4;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    if (trellis_model_layer_info(model, i, &l) == TRELLIS_OK &&
        (int)strlen(SHOWN(l.name, shown)) > width)
      width = (int)strlen(shown);
  }
  if (!json) { /* the table's head */
    printf("%s\n", SHOWN(path, shown));
    if (tp->split_given)
      printf("tensor parallel: %d rank%s, every layer split %s (%s)\n", n,
             n == 1 ? "" : "s", trellis_split_name(tp->split),
             tp->split == TRELLIS_SPLIT_N ? "column-parallel" : "row-parallel");
    else
      printf("tensor parallel: %d rank%s; o_proj, down_proj, out_proj and "
             "dense_4h_to_h split k (row-parallel), every other layer n "
             "(column-parallel)\n",
             n, n == 1 ? "" : "s");
    printf("\n%-*s split", width, "name");
    for (int k = 0; k < n; k++) {
      char head[24];
      snprintf(head, sizeof head, "rank %d MB", k);
      printf(" %10s", head);
    }
    printf("\n");
  }

  size_t whole = 0, replicated = 0;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    if ((st = trellis_model_layer_info(model, i, &l)) != TRELLIS_OK) {
      r = cli_lib_error(st, path);
      goto done;
    }
    const trellis_split split =
        tp->split_given ? tp->split : cli_tp_role_split(l.name);
    whole += cli_layer_bytes(&l);
    /* too few 128-blocks for every rank: each holds the whole layer */
    const int whole_layer = !layer_ranges(tp, &l, split, begin, end);
    replicated += whole_layer;
    for (int k = 0; k < n; k++) {
      trellis_layer_info shard;
      if (whole_layer)
        shard = l;
      else
        cli_shard_info(&l, split, begin[k], end[k], &shard);
      layer_bytes[k] = cli_layer_bytes(&shard);
      layer_payload[k] = cli_layer_payload_bytes(&shard);
      rank_bytes[k] += layer_bytes[k];
      rank_payload[k] += layer_payload[k];
    }
    if (json) {
      json_t *row = json_object();
      if (!row || json_array_append_new(rows, row) != 0) {
        ok = 0;
        break;
      }
      json_t *name = json_string(l.name);
      put(row, "name", name ? name : json_string(SHOWN(l.name, shown)), &ok);
      put(row, "split", json_string(trellis_split_name(split)), &ok);
      put(row, "replicated", json_boolean(whole_layer), &ok);
      put(row, "bytes", sizes_json(layer_bytes, n, &ok), &ok);
      put(row, "payload_bytes", sizes_json(layer_payload, n, &ok), &ok);
      continue;
    }
    printf("%-*s %-5s", width, SHOWN(l.name, shown), trellis_split_name(split));
    for (int k = 0; k < n; k++)
      printf(" %10.3f", (double)layer_bytes[k] / 1e6);
    if (whole_layer)
      printf("  (replicated: %lld features, fewer than %d blocks of %d)",
             (long long)(split == TRELLIS_SPLIT_K ? l.k : l.n), n,
             TRELLIS_HBLOCK);
    printf("\n");
  }
  if (json) {
    json_t *p = json_string(path);
    put(root, "path", p ? p : json_string(SHOWN(path, shown)), &ok);
    put(root, "ranks", json_integer(n), &ok);
    put(root, "split",
        tp->split_given ? json_string(trellis_split_name(tp->split))
                        : json_string("by role"),
        &ok);
    put(root, "layers", rows, &ok);
    rows = NULL;
    put(root, "rank_bytes", sizes_json(rank_bytes, n, &ok), &ok);
    put(root, "rank_payload_bytes", sizes_json(rank_payload, n, &ok), &ok);
    put(root, "exl3_layers", json_integer((json_int_t)count), &ok);
    put(root, "unsharded_bytes", json_integer((json_int_t)whole), &ok);
    put(root, "replicated_layers", json_integer((json_int_t)replicated), &ok);
    r = cli_json_print(root, path, ok);
    root = NULL;
    goto done;
  }
  printf("\n");
  for (int k = 0; k < n; k++)
    printf("rank %d: %zu bytes (%.3f MB), %zu of them trellis payload\n", k,
           rank_bytes[k], (double)rank_bytes[k] / 1e6, rank_payload[k]);
  printf("totals: %zu EXL3 layer%s, %zu bytes unsharded", count,
         count == 1 ? "" : "s", whole);
  if (replicated)
    printf(", %zu replicated on every rank", replicated);
  printf("\n");
  r = CLI_OK;
done:
  json_decref(root);
  json_decref(rows);
  free(layer_bytes);
  free(layer_payload);
  free(rank_bytes);
  free(rank_payload);
  free(begin);
  free(end);
  trellis_model_close(model);
  return r;
}
