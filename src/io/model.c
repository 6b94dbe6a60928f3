/* SPDX-License-Identifier: Apache-2.0 */
/* EXL3 models: one .safetensors file, or a directory holding
 * model.safetensors or model.safetensors.index.json shards, plus an optional
 * config.json with a quantization_config (FORMAT.md §2.6).
 *
 * Shard names in the index are plain file names inside the directory, but
 * a directory entry may be a symbolic link to anywhere (the Hugging Face
 * cache links snapshots/REV/NAME to ../../blobs/HASH). A dangling or
 * looping link is reported as such, never as a missing file. */
#include "io/model.h"
#include "io/json_bounds.h"
#include "io/posix_file.h"

#include "format/sqg.h"
#include "io/layers.h"
#include "io/safetensors.h"

#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* config.json and the index are small; refuse anything absurd (README
 * "Limits"): bytes, and JSON values (about two per index entry). */
#define TEXT_FILE_LIMIT ((size_t)64 << 20)
#define TEXT_MAX_VALUES ((size_t)1 << 21)

struct trellis_model {
  char *label; /* the path given to open, for messages */
  trellis_file **files;
  size_t file_count;
  trellis_file **by_addr;  /* files sorted by mapping address */
  trellis_tensor *tensors; /* every model tensor, sorted by name */
  size_t count;
  const trl_st_meta **tensor_meta; /* shards: each tensor's __metadata__ */
  trl_layer_set set;
  trellis_quant_config qc;
  /* Guards the realignment of lazy layers (set.layers[i] and set.extra[i]
   * of layers with extra.lazy, and set's owned memory), and the holds. */
  pthread_mutex_t lock;
  int lock_ready;
  /* trellis_model_hold: the model is freed when it is closed and no hold
   * is left, by whichever of close and the last release comes last. */
  size_t holds;
  int closed;
  /* the text files read at open (trellis_model_file_path), or NULL */
  char *index_path, *config_path;
  /* a directory's ngram_embedding.safetensors (EXL3-1.6 §8), or NULL */
  trellis_file *ngram;
};

static char *dup_str(const char *s) {
  size_t len = strlen(s) + 1;
  char *d = malloc(len);
  if (d)
    memcpy(d, s, len);
  return d;
}

static char *join(const char *dir, const char *name) {
  size_t a = strlen(dir), b = strlen(name);
  int slash = a > 0 && dir[a - 1] != '/';
  char *p = malloc(a + (size_t)slash + b + 1);
  if (!p)
    return NULL;
  memcpy(p, dir, a);
  if (slash)
    p[a] = '/';
  memcpy(p + a + slash, name, b + 1);
  return p;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ------------------------------------------------------------- config -- */

static trellis_status get_string(const char *label, json_t *qc,
                                 const char *field, char *dst, size_t cap) {
  json_t *v = json_object_get(qc, field);
  if (!v || json_is_null(v))
    return TRELLIS_OK;
  if (!json_is_string(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: quantization_config.%s is not a string", label, field);
  size_t len = json_string_length(v);
  if (len >= cap || strlen(json_string_value(v)) != len)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: quantization_config.%s is longer than %zu "
                    "characters",
                    label, field, cap - 1);
  memcpy(dst, json_string_value(v), len + 1);
  return TRELLIS_OK;
}

static trellis_status get_int(const char *label, json_t *obj, const char *path,
                              const char *field, int64_t max, int64_t *dst) {
  json_t *v = json_object_get(obj, field);
  if (!v || json_is_null(v))
    return TRELLIS_OK;
  if (!json_is_integer(v))
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: %s.%s is not an integer", label,
                    path, field);
  json_int_t x = json_integer_value(v);
  if (x < 0 || x > max)
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: %s.%s = %lld is out of range",
                    label, path, field, (long long)x);
  *dst = (int64_t)x;
  return TRELLIS_OK;
}

/* A K field of 1.6 (head_bits, mtp_bits): a non-negative integer, or a
 * half-integer rate 1.5 / 2.5 / 3.5 written as a float; an integer-valued
 * float is that integer (EXL3-1.6 §2). */
static trellis_status get_rate(const char *label, json_t *obj,
                               const char *field, int *bits, int *half) {
  json_t *v = json_object_get(obj, field);
  *bits = 0;
  *half = 0;
  if (!v || json_is_null(v))
    return TRELLIS_OK;
  if (json_is_integer(v)) {
    const json_int_t x = json_integer_value(v);
    if (x < 0 || x > INT_MAX)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: quantization_config.%s = %lld is out of range",
                      label, field, (long long)x);
    *bits = (int)x;
    return TRELLIS_OK;
  }
  const double x = json_is_real(v) ? json_real_value(v) : -1.0;
  const double twice = 2.0 * x;
  if (!(x >= 0.0 && x <= 1e6) || twice != (double)(long long)twice ||
      ((long long)twice % 2 == 1 &&
       !(x > TRL_HALF_MIN_BITS && x < TRL_HALF_MAX_BITS + 1)))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: quantization_config.%s is not an integer or a "
                    "half-integer rate %d.5 .. %d.5",
                    label, field, TRL_HALF_MIN_BITS, TRL_HALF_MAX_BITS);
  *bits = (int)(x);
  *half = (long long)twice % 2 == 1;
  return TRELLIS_OK;
}

/* config.json's top-level tie_word_embeddings: a boolean or absent. */
static trellis_status get_tie(const char *label, json_t *root, int *out) {
  json_t *v = json_object_get(root, "tie_word_embeddings");
  *out = -1;
  if (!v || json_is_null(v))
    return TRELLIS_OK;
  if (!json_is_boolean(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tie_word_embeddings is not true or false", label);
  *out = json_is_true(v);
  return TRELLIS_OK;
}

static trellis_status parse_qc(const char *label, json_t *qc,
                               trellis_quant_config *out) {
  static const char *const path = "quantization_config";
  trellis_status st = get_string(label, qc, "quant_method", out->quant_method,
                                 sizeof out->quant_method);
  if (st == TRELLIS_OK)
    st = get_string(label, qc, "version", out->version, sizeof out->version);
  if (st == TRELLIS_OK)
    st = get_string(label, qc, "codebook", out->codebook, sizeof out->codebook);
  if (st == TRELLIS_OK)
    st = get_string(label, qc, "out_scales", out->out_scales,
                    sizeof out->out_scales);
  if (st == TRELLIS_OK)
    st = get_string(label, qc, "descriptor_sha256", out->descriptor_sha256,
                    sizeof out->descriptor_sha256);
  if (st != TRELLIS_OK)
    return st;
  json_t *bits = json_object_get(qc, "bits");
  if (bits && !json_is_null(bits)) {
    if (!json_is_number(bits))
      return trl_fail(TRELLIS_ERR_FORMAT, "%s: %s.bits is not a number", label,
                      path);
    out->bits = json_number_value(bits);
  }
  st = get_rate(label, qc, "head_bits", &out->head_bits, &out->head_half);
  if (st == TRELLIS_OK)
    st = get_rate(label, qc, "mtp_bits", &out->mtp_bits, &out->mtp_half);
  int64_t vision = 0;
  if (st == TRELLIS_OK)
    st = get_int(label, qc, path, "vision_bits", INT_MAX, &vision);
  if (st != TRELLIS_OK)
    return st;
  out->vision_bits = (int)vision;
  json_t *cal = json_object_get(qc, "calibration");
  if (!cal || json_is_null(cal))
    return TRELLIS_OK;
  if (!json_is_object(cal))
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: %s.calibration is not an object",
                    label, path);
  st = get_int(label, cal, "quantization_config.calibration", "rows", INT64_MAX,
               &out->calibration_rows);
  if (st == TRELLIS_OK)
    st = get_int(label, cal, "quantization_config.calibration", "cols",
                 INT64_MAX, &out->calibration_cols);
  return st;
}

static trellis_status load_json(const char *json, size_t len, const char *label,
                                json_t **out) {
  trl_json_bounds b;
  trl_json_scan(json, len, &b);
  if (b.depth > TRL_JSON_MAX_DEPTH)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: JSON nests %zu levels deep (limit %d)", label, b.depth,
                    TRL_JSON_MAX_DEPTH);
  if (b.values > TEXT_MAX_VALUES)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: %zu JSON values, more than the limit of %zu", label,
                    b.values, TEXT_MAX_VALUES);
  json_error_t err;
  json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    char text[JSON_ERROR_TEXT_LENGTH];
    trl_json_error_text(&err, text, sizeof text);
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: invalid JSON at line %d, column %d: %s", label,
                    err.line, err.column, text);
  }
  if (!json_is_object(root)) {
    json_decref(root);
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: not a JSON object", label);
  }
  *out = root;
  return TRELLIS_OK;
}

trellis_status trl_quant_config_parse(const char *json, size_t len,
                                      const char *label,
                                      trellis_quant_config *out) {
  memset(out, 0, sizeof *out);
  json_t *root = NULL;
  trellis_status st = load_json(json, len, label, &root);
  if (st != TRELLIS_OK)
    return st;
  st = get_tie(label, root, &out->tie_word_embeddings);
  json_t *qc = json_object_get(root, "quantization_config");
  if (st == TRELLIS_OK && qc && !json_is_null(qc)) {
    if (!json_is_object(qc))
      st = trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: quantization_config is not an object", label);
    else {
      out->present = 1;
      st = parse_qc(label, qc, out);
    }
  }
  json_decref(root);
  if (st != TRELLIS_OK)
    memset(out, 0, sizeof *out);
  return st;
}

/* -------------------------------------------------------------- index -- */

void trl_index_free(trl_index *idx) {
  if (!idx)
    return;
  for (size_t i = 0; i < idx->count; i++)
    free(idx->tensors[i]);
  for (size_t i = 0; i < idx->shard_count; i++)
    free(idx->shards[i]);
  free(idx->tensors);
  free(idx->shard);
  free(idx->shards);
  memset(idx, 0, sizeof *idx);
}

/* Shard names are plain file names inside the model directory. */
static trellis_status check_shard_name(const char *label, const char *tensor,
                                       json_t *v) {
  if (!json_is_string(v))
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: weight_map['%s'] is not a string",
                    label, tensor);
  const char *s = json_string_value(v);
  if (s[0] == '\0' || strlen(s) != json_string_length(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: weight_map['%s'] is an empty or invalid file name",
                    label, tensor);
  if (strchr(s, '/') || strchr(s, '\\') || strstr(s, ".."))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: weight_map['%s'] = '%.200s' leaves the model "
                    "directory (no '/', '\\' or '..' allowed)",
                    label, tensor, s);
  return TRELLIS_OK;
}

typedef struct pair {
  const char *tensor, *shard;
} pair;

static int cmp_pair(const void *a, const void *b) {
  return strcmp(((const pair *)a)->tensor, ((const pair *)b)->tensor);
}

/* Unique sorted shard names, then each entry's shard number. */
static trellis_status fill_index(trl_index *idx, pair *ps, size_t n) {
  qsort(ps, n, sizeof *ps, cmp_pair);
  const char **names = malloc((n ? n : 1) * sizeof *names);
  if (!names)
    return TRELLIS_ERR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n; i++)
    names[i] = ps[i].shard;
  qsort(names, n, sizeof *names, cmp_str);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || strcmp(names[u - 1], names[i]) != 0)
      names[u++] = names[i];
  for (size_t i = 0; i < u; i++) {
    if (!(idx->shards[i] = dup_str(names[i]))) {
      free(names);
      return TRELLIS_ERR_OUT_OF_MEMORY;
    }
    idx->shard_count++;
  }
  free(names);
  for (size_t i = 0; i < n; i++) {
    const char *key = ps[i].shard;
    char **hit = bsearch(&key, idx->shards, u, sizeof *idx->shards, cmp_str);
    idx->shard[i] = (size_t)(hit - idx->shards);
    if (!(idx->tensors[i] = dup_str(ps[i].tensor)))
      return TRELLIS_ERR_OUT_OF_MEMORY;
    idx->count++;
  }
  return TRELLIS_OK;
}

static trellis_status parse_weight_map(const char *label, json_t *map,
                                       trl_index *idx) {
  size_t n = json_object_size(map), i = 0;
  size_t alloc = n ? n : 1;
  pair *ps = malloc(alloc * sizeof *ps);
  idx->tensors = calloc(alloc, sizeof *idx->tensors);
  idx->shard = calloc(alloc, sizeof *idx->shard);
  idx->shards = calloc(alloc, sizeof *idx->shards);
  if (!ps || !idx->tensors || !idx->shard || !idx->shards) {
    free(ps);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", label);
  }
  const char *key;
  json_t *v;
  json_object_foreach(map, key, v) {
    trellis_status st = TRELLIS_OK;
    if (strlen(key) > TRL_ST_MAX_NAME)
      st = trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: a weight_map name of %zu bytes exceeds the limit "
                    "of %d bytes (it starts '%.40s')",
                    label, strlen(key), TRL_ST_MAX_NAME, key);
    else
      st = check_shard_name(label, key, v);
    if (st != TRELLIS_OK) {
      free(ps);
      return st;
    }
    ps[i].tensor = key;
    ps[i].shard = json_string_value(v);
    i++;
  }
  trellis_status st = fill_index(idx, ps, n);
  free(ps);
  if (st != TRELLIS_OK)
    return trl_fail(st, "%s: out of memory", label);
  return TRELLIS_OK;
}

trellis_status trl_index_parse(const char *json, size_t len, const char *label,
                               trl_index *out) {
  memset(out, 0, sizeof *out);
  json_t *root = NULL;
  trellis_status st = load_json(json, len, label, &root);
  if (st != TRELLIS_OK)
    return st;
  json_t *map = json_object_get(root, "weight_map");
  json_t *meta = json_object_get(root, "metadata");
  if (!map)
    st = trl_fail(TRELLIS_ERR_FORMAT, "%s: no \"weight_map\"", label);
  else if (!json_is_object(map))
    st = trl_fail(TRELLIS_ERR_FORMAT, "%s: weight_map is not an object", label);
  else if (meta && !json_is_object(meta) && !json_is_null(meta))
    st = trl_fail(TRELLIS_ERR_FORMAT, "%s: metadata is not an object", label);
  else
    st = parse_weight_map(label, map, out);
  json_decref(root);
  if (st != TRELLIS_OK)
    trl_index_free(out);
  return st;
}

/* -------------------------------------------------------------- model -- */

static void model_free(trellis_model *m) {
  trl_layers_free(&m->set);
  for (size_t i = 0; i < m->file_count; i++)
    trellis_file_close(m->files[i]);
  free(m->files);
  free(m->by_addr);
  if (m->lock_ready)
    pthread_mutex_destroy(&m->lock);
  free(m->tensors);
  free(m->tensor_meta);
  free(m->index_path);
  free(m->config_path);
  trellis_file_close(m->ngram);
  free(m->label);
  free(m);
}

void trellis_model_close(trellis_model *m) {
  if (!m)
    return;
  if (!m->lock_ready) { /* a model that failed to open: no holds yet */
    model_free(m);
    return;
  }
  pthread_mutex_lock(&m->lock);
  const int again = m->closed;
  m->closed = 1;
  const int free_now = !again && m->holds == 0;
  pthread_mutex_unlock(&m->lock);
  if (again)
    trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
             "%s: trellis_model_close: the model was closed twice (it "
             "lives on only while holds remain)",
             m->label);
  else if (free_now)
    model_free(m);
}

trellis_status trellis_model_hold(trellis_model *m) {
  if (!m)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "m is NULL");
  pthread_mutex_lock(&m->lock);
  const int closed = m->closed;
  if (!closed)
    m->holds++;
  pthread_mutex_unlock(&m->lock);
  if (closed)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: the model is closed: trellis_model_hold gives no "
                    "new holds (the model lives on until the holds taken "
                    "before the close are released)",
                    m->label);
  return TRELLIS_OK;
}

void trellis_model_release(trellis_model *m) {
  if (!m)
    return;
  pthread_mutex_lock(&m->lock);
  const int none = m->holds == 0;
  if (!none)
    m->holds--;
  const int free_now = !none && m->closed && m->holds == 0;
  pthread_mutex_unlock(&m->lock);
  if (none)
    trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
             "%s: trellis_model_release without a hold (ignored)", m->label);
  else if (free_now)
    model_free(m);
}

static trellis_status open_single(trellis_model *m, const char *path) {
  m->files = calloc(1, sizeof *m->files);
  if (!m->files)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  trellis_status st = trellis_file_open(path, &m->files[0]);
  if (st != TRELLIS_OK)
    return st;
  m->file_count = 1;
  const trellis_file *f = m->files[0];
  m->tensors = malloc((f->count ? f->count : 1) * sizeof *m->tensors);
  if (!m->tensors)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  memcpy(m->tensors, f->tensors, f->count * sizeof *m->tensors);
  m->count = f->count;
  return TRELLIS_OK;
}

static trl_model_limits_t limits = {TRL_MODEL_MAX_HEADER_BYTES,
                                    TRL_MODEL_MAX_TENSORS};

void trl_model_set_limits(uint64_t header_bytes, size_t tensors) {
  limits.header_bytes =
      header_bytes ? header_bytes : TRL_MODEL_MAX_HEADER_BYTES;
  limits.tensors = tensors ? tensors : TRL_MODEL_MAX_TENSORS;
}

trl_model_limits_t trl_model_limits(void) { return limits; }

/* Opens every shard once and takes each listed tensor from its shard; the
 * shards' headers together stay within the model's limits. */
static trellis_status open_shards(trellis_model *m, const char *dir,
                                  const char *index_path,
                                  const trl_index *idx) {
  trl_st_budget budget = {0, limits.header_bytes, 0, limits.tensors};
  m->files = calloc(idx->shard_count ? idx->shard_count : 1, sizeof *m->files);
  m->tensors = malloc((idx->count ? idx->count : 1) * sizeof *m->tensors);
  m->tensor_meta =
      malloc((idx->count ? idx->count : 1) * sizeof *m->tensor_meta);
  if (!m->files || !m->tensors || !m->tensor_meta)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  for (size_t i = 0; i < idx->shard_count; i++) {
    char *p = join(dir, idx->shards[i]);
    if (!p)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
    trellis_status st = trl_file_open_within(p, &budget, &m->files[i]);
    free(p);
    if (st != TRELLIS_OK)
      return trl_fail_prefix(st, "%s: shard '%s'", index_path, idx->shards[i]);
    m->file_count++;
  }
  for (size_t i = 0; i < idx->count; i++) {
    const trellis_file *f = m->files[idx->shard[i]];
    ptrdiff_t at = trl_file_index(f, idx->tensors[i]);
    if (at < 0)
      return trl_fail(TRELLIS_ERR_NOT_FOUND,
                      "%s: tensor '%s' is listed in the index but missing "
                      "from shard '%s'",
                      index_path, idx->tensors[i], idx->shards[idx->shard[i]]);
    m->tensor_meta[m->count] = &f->meta;
    m->tensors[m->count++] = f->tensors[at];
  }
  return TRELLIS_OK;
}

static trellis_status open_index(trellis_model *m, const char *dir,
                                 const char *index_path) {
  char *text = NULL;
  size_t len = 0;
  trellis_status st =
      trl_read_file(index_path, TEXT_FILE_LIMIT, (uint8_t **)&text, &len);
  if (st != TRELLIS_OK)
    return st;
  if (!(m->index_path = dup_str(index_path))) {
    free(text);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  }
  trl_index idx;
  st = trl_index_parse(text, len, index_path, &idx);
  free(text);
  if (st != TRELLIS_OK)
    return st;
  st = open_shards(m, dir, index_path, &idx);
  trl_index_free(&idx);
  return st;
}

static trellis_status open_config(trellis_model *m, const char *dir) {
  char *path = join(dir, "config.json");
  if (!path)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  trellis_status st = TRELLIS_OK;
  if (trl_path_entry_exists(path)) {
    char *text = NULL;
    size_t len = 0;
    st = trl_read_file(path, TEXT_FILE_LIMIT, (uint8_t **)&text, &len);
    if (st == TRELLIS_OK)
      st = trl_quant_config_parse(text, len, path, &m->qc);
    free(text);
    m->config_path = path;
    return st;
  }
  free(path);
  return st;
}

static int ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* The directory part of a file path ("." when there is none). */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash)
    return dup_str(".");
  size_t len = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(len + 1);
  if (d) {
    memcpy(d, path, len);
    d[len] = '\0';
  }
  return d;
}

/* ExLlamaV3 1.6's n-gram table: a separate file that no index lists
 * (EXL3-1.6 §8), opened (strictly, like any safetensors file) only to be
 * listed; its tensors are not model tensors. */
static trellis_status open_ngram(trellis_model *m, const char *dir) {
  char *path = join(dir, "ngram_embedding.safetensors");
  if (!path)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  trellis_status st = TRELLIS_OK;
  if (trl_path_entry_exists(path))
    st = trellis_file_open(path, &m->ngram);
  free(path);
  return st;
}

/* Directory: model.safetensors first (as transformers does), then the
 * index; config.json is read in directory form and beside an index given
 * by its path (a lone .safetensors file has none). */
static trellis_status open_dir(trellis_model *m, const char *dir) {
  char *single = join(dir, "model.safetensors");
  char *index = join(dir, "model.safetensors.index.json");
  trellis_status st;
  if (!single || !index)
    st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", dir);
  else if (trl_path_entry_exists(single))
    st = open_single(m, single);
  else if (trl_path_entry_exists(index))
    st = open_index(m, dir, index);
  else
    st = trl_fail(TRELLIS_ERR_NOT_FOUND,
                  "%s: neither model.safetensors nor "
                  "model.safetensors.index.json found in the directory",
                  dir);
  free(single);
  free(index);
  if (st == TRELLIS_OK)
    st = open_config(m, dir);
  if (st == TRELLIS_OK)
    st = open_ngram(m, dir);
  return st;
}

static trellis_status open_any(trellis_model *m, const char *path) {
  struct stat sb;
  trellis_status st = trl_stat_path(path, "cannot open model", &sb);
  if (st != TRELLIS_OK)
    return st;
  if (S_ISDIR(sb.st_mode))
    return open_dir(m, path);
  if (!S_ISREG(sb.st_mode))
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: is %s; expected a .safetensors file, an index "
                    "or a model directory",
                    path, trl_file_kind(sb.st_mode));
  if (!ends_with(path, ".index.json"))
    return open_single(m, path);
  char *dir = dir_of(path);
  if (!dir)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  st = open_index(m, dir, path);
  if (st == TRELLIS_OK)
    st = open_config(m, dir);
  free(dir);
  return st;
}

static int cmp_file_addr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)(*(trellis_file *const *)a)->data;
  uintptr_t y = (uintptr_t)(*(trellis_file *const *)b)->data;
  return x < y ? -1 : x > y;
}

static trellis_status index_files(trellis_model *m) {
  m->by_addr = malloc((m->file_count ? m->file_count : 1) * sizeof *m->by_addr);
  if (!m->by_addr)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", m->label);
  memcpy(m->by_addr, m->files, m->file_count * sizeof *m->by_addr);
  qsort(m->by_addr, m->file_count, sizeof *m->by_addr, cmp_file_addr);
  if (pthread_mutex_init(&m->lock, NULL) != 0)
    return trl_fail(TRELLIS_ERR_INTERNAL, "%s: cannot create a mutex",
                    m->label);
  m->lock_ready = 1;
  return TRELLIS_OK;
}

/* Where b12x layers take their codebook from (io/qsrt.h): each tensor's
 * file __metadata__, and config.json when its quant_method is b12x_qsrt.
 * Such a config's descriptor_sha256 must name the built-in D3L table. */
static trellis_status b12x_hints(const trellis_model *m, trl_layer_hints *h) {
  h->tensor_meta = m->tensor_meta;
  h->meta = m->file_count == 1 ? &m->files[0]->meta : NULL;
  if (!m->qc.present || strcmp(m->qc.quant_method, "b12x_qsrt") != 0)
    return TRELLIS_OK;
  h->codebook = m->qc.codebook;
  if (m->qc.descriptor_sha256[0] &&
      strcasecmp(m->qc.descriptor_sha256, TRL_SQG_D3L_SHA256) != 0)
    return trl_fail(TRELLIS_ERR_UNSUPPORTED,
                    "%s: quantization_config.descriptor_sha256 %s is not "
                    "the sqg_fp16 descriptor table this library has (%s)",
                    m->label, m->qc.descriptor_sha256, TRL_SQG_D3L_SHA256);
  return TRELLIS_OK;
}

trellis_status trellis_model_open(const char *path, trellis_model **out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!path)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "path is NULL");
  if (!path[0])
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "path is empty (expected a model file or directory)");
  trellis_model *m = calloc(1, sizeof *m);
  if (!m || !(m->label = dup_str(path))) {
    free(m);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  }
  m->qc.tie_word_embeddings = -1; /* until a config.json says */
  trellis_status st = open_any(m, path);
  trl_layer_hints hints = {0};
  if (st == TRELLIS_OK)
    st = index_files(m);
  if (st == TRELLIS_OK)
    st = b12x_hints(m, &hints);
  if (st == TRELLIS_OK)
    st =
        trl_layers_discover_hinted(m->tensors, m->count, &hints, path, &m->set);
  if (st != TRELLIS_OK) {
    trellis_model_close(m);
    return st;
  }
  *out = m;
  return TRELLIS_OK;
}

/* ------------------------------------------------------------- access -- */

const trellis_quant_config *trellis_model_quant_config(const trellis_model *m) {
  return m ? &m->qc : NULL;
}

const char *trellis_model_file_path(const trellis_model *m, size_t index) {
  if (!m)
    return NULL;
  if (index < m->file_count)
    return m->files[index]->label;
  index -= m->file_count;
  const char *text[3] = {m->index_path, m->config_path,
                         m->ngram ? m->ngram->label : NULL};
  for (size_t i = 0; i < 3; i++) {
    if (!text[i])
      continue;
    if (index == 0)
      return text[i];
    index--;
  }
  return NULL;
}

size_t trellis_model_layer_count(const trellis_model *m) {
  return m ? m->set.count : 0;
}

size_t trellis_model_other_count(const trellis_model *m) {
  return m ? m->set.other_count : 0;
}

const char *trellis_other_kind_name(trellis_other_kind kind) {
  switch (kind) {
  case TRELLIS_OTHER_PLAIN:
    return "plain";
  case TRELLIS_OTHER_FP16_LINEAR:
    return "fp16_linear";
  case TRELLIS_OTHER_EXL3_EMBEDDING:
    return "exl3_embedding";
  }
  return "invalid";
}

/* The arguments of the indexed getters: the per-layer queries (layers)
 * and the two other-tensor getters. */
static trellis_status check_index_args(const trellis_model *m, size_t index,
                                       const void *out, int layers) {
  if (!m || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL",
                    m ? "out" : "m");
  const size_t count = layers ? m->set.count : m->set.other_count;
  if (index >= count)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: %s index %zu out of range (%zu%s)", m->label,
                    layers ? "layer" : "other-tensor", index, count,
                    layers ? " layers" : "");
  return TRELLIS_OK;
}

trellis_status trellis_model_other_kind(const trellis_model *m, size_t index,
                                        trellis_other_kind *out) {
  trellis_status st = check_index_args(m, index, out, 0);
  if (st != TRELLIS_OK)
    return st;
  *out = (trellis_other_kind)m->set.other_kind[index];
  return TRELLIS_OK;
}

const trellis_file *trellis_model_ngram_file(const trellis_model *m) {
  return m ? m->ngram : NULL;
}

/* The file whose data region holds `p` (NULL if none does). */
static const trellis_file *file_of(const trellis_model *m, const void *p) {
  size_t lo = 0, hi = m->file_count;
  while (lo < hi) { /* the last file whose data starts at or before p */
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)m->by_addr[mid]->data <= (uintptr_t)p)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0)
    return NULL;
  const trellis_file *f = m->by_addr[lo - 1];
  return (uintptr_t)p <= (uintptr_t)f->data + f->data_size ? f : NULL;
}

static trellis_status check_tensor_file(const trellis_model *m,
                                        const trellis_tensor *t) {
  const trellis_file *f = file_of(m, t->data);
  return f ? trl_file_check_size(f) : TRELLIS_OK;
}

/* Hands out layer `index` with usable pointers: its files have not shrunk
 * (best effort: see trellis_model_layer), and a lazy layer is realigned
 * once under the model's lock. The realignment state is the model's own
 * cache, so it is written through a const model. */
static trellis_status fetch_layer(const trellis_model *cm, size_t index,
                                  trellis_layer *out) {
  trellis_model *m = (trellis_model *)cm;
  const trl_layer_extra *x = &m->set.extra[index];
  for (int j = 0; j < TRL_MEMBER_COUNT; j++) {
    trellis_status st =
        x->member[j] ? check_tensor_file(m, x->member[j]) : TRELLIS_OK;
    if (st != TRELLIS_OK)
      return trl_fail_prefix(st, "%s: layer '%s'", m->label,
                             m->set.layers[index].name);
  }
  if (!x->lazy) {
    *out = m->set.layers[index];
    return TRELLIS_OK;
  }
  pthread_mutex_lock(&m->lock);
  trellis_status st = trl_layers_realign(&m->set, index, m->label);
  if (st == TRELLIS_OK)
    *out = m->set.layers[index];
  pthread_mutex_unlock(&m->lock);
  return st;
}

trellis_status trellis_model_layer(const trellis_model *m, size_t index,
                                   trellis_layer *out) {
  trellis_status st = check_index_args(m, index, out, 1);
  if (st != TRELLIS_OK)
    return st;
  return fetch_layer(m, index, out);
}

trellis_status trellis_model_layer_info(const trellis_model *m, size_t index,
                                        trellis_layer_info *out) {
  trellis_status st = check_index_args(m, index, out, 1);
  if (st != TRELLIS_OK)
    return st;
  /* Fields that realignment never writes. */
  const trellis_layer *L = &m->set.layers[index];
  const trl_layer_extra *x = &m->set.extra[index];
  memset(out, 0, sizeof *out);
  out->name = L->name;
  out->k = L->weight.k;
  out->n = L->weight.n;
  out->bits = L->weight.bits;
  out->codebook = L->weight.codebook;
  out->input_signs =
      x->input_legacy ? TRELLIS_SIGNS_LEGACY : TRELLIS_SIGNS_SCALED;
  out->output_signs =
      x->output_legacy ? TRELLIS_SIGNS_LEGACY : TRELLIS_SIGNS_SCALED;
  out->has_bias = L->has_bias;
  out->pair = L->weight.pair;
  out->rate_axis = L->weight.rate_axis;
  out->half = L->weight.half;
  return TRELLIS_OK;
}

size_t trl_model_copied_bytes(const trellis_model *m) {
  pthread_mutex_lock(&((trellis_model *)m)->lock);
  size_t bytes = m->set.copied_bytes;
  pthread_mutex_unlock(&((trellis_model *)m)->lock);
  return bytes;
}

trellis_status trellis_model_other(const trellis_model *m, size_t index,
                                   trellis_tensor *out) {
  trellis_status st = check_index_args(m, index, out, 0);
  if (st != TRELLIS_OK)
    return st;
  st = check_tensor_file(m, &m->set.others[index]);
  if (st != TRELLIS_OK)
    return st;
  *out = m->set.others[index];
  return TRELLIS_OK;
}

static int cmp_layer_key(const void *key, const void *elem) {
  return trl_layer_name_cmp(key, ((const trellis_layer *)elem)->name);
}

static int cmp_tensor_key(const void *key, const void *elem) {
  return strcmp(key, ((const trellis_tensor *)elem)->name);
}

trellis_status trellis_model_find_layer(const trellis_model *m,
                                        const char *name, trellis_layer *out) {
  if (!m || !name || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL",
                    !m      ? "m"
                    : !name ? "name"
                            : "out");
  const trellis_layer *L =
      bsearch(name, m->set.layers, m->set.count, sizeof *L, cmp_layer_key);
  if (!L)
    return trl_fail(TRELLIS_ERR_NOT_FOUND, "%s: no EXL3 layer named '%s'",
                    m->label, name);
  return fetch_layer(m, (size_t)(L - m->set.layers), out);
}

trellis_status trellis_model_find_tensor(const trellis_model *m,
                                         const char *name,
                                         trellis_tensor *out) {
  if (!m || !name || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL",
                    !m      ? "m"
                    : !name ? "name"
                            : "out");
  const trellis_tensor *t =
      bsearch(name, m->tensors, m->count, sizeof *t, cmp_tensor_key);
  if (!t)
    return trl_fail(TRELLIS_ERR_NOT_FOUND, "%s: no tensor named '%s'", m->label,
                    name);
  trellis_status st = check_tensor_file(m, t);
  if (st != TRELLIS_OK)
    return st;
  *out = *t;
  return TRELLIS_OK;
}
