/* SPDX-License-Identifier: Apache-2.0 */
/* Strictly validated, memory-mapped safetensors files.
 *
 * Layout: 8-byte little-endian header length N, N bytes of JSON header, then
 * the data region. The length and the header are read with pread() into
 * owned memory; only the data region is used through the mapping. Errors:
 *   TRELLIS_ERR_IO        open/fstat/read/mmap failed, not a regular file,
 *                         the file shrank since it was opened
 *   TRELLIS_ERR_NOT_FOUND the file does not exist; find() of an unknown name
 *   TRELLIS_ERR_DTYPE     a dtype string outside the safetensors whitelist
 *   TRELLIS_ERR_SHAPE     a negative dimension or more than TRELLIS_MAX_DIMS
 *   TRELLIS_ERR_FORMAT    everything else: sizes, JSON, fields, offsets,
 *                         overlaps, gaps, shape x dtype != byte length
 * Every message starts with the file's path ("<memory>" for buffers) and
 * names the tensor concerned. */
#include "io/safetensors.h"
#include "io/json_bounds.h"
#include "io/posix_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
  const char *name;
  size_t size;
} dtype_table[] = {
    [TRELLIS_T_BOOL] = {"BOOL", 1},       [TRELLIS_T_U8] = {"U8", 1},
    [TRELLIS_T_I8] = {"I8", 1},           [TRELLIS_T_I16] = {"I16", 2},
    [TRELLIS_T_U16] = {"U16", 2},         [TRELLIS_T_I32] = {"I32", 4},
    [TRELLIS_T_U32] = {"U32", 4},         [TRELLIS_T_I64] = {"I64", 8},
    [TRELLIS_T_U64] = {"U64", 8},         [TRELLIS_T_F16] = {"F16", 2},
    [TRELLIS_T_BF16] = {"BF16", 2},       [TRELLIS_T_F32] = {"F32", 4},
    [TRELLIS_T_F64] = {"F64", 8},         [TRELLIS_T_F8_E4M3] = {"F8_E4M3", 1},
    [TRELLIS_T_F8_E5M2] = {"F8_E5M2", 1},
};
#define DTYPE_COUNT (sizeof(dtype_table) / sizeof(dtype_table[0]))

const char *trellis_tensor_dtype_name(trellis_tensor_dtype dt) {
  if ((unsigned)dt >= DTYPE_COUNT)
    return "invalid";
  return dtype_table[dt].name;
}

size_t trellis_tensor_dtype_size(trellis_tensor_dtype dt) {
  if ((unsigned)dt >= DTYPE_COUNT)
    return 0;
  return dtype_table[dt].size;
}

/* ------------------------------------------------------------ parsing -- */

/* One header entry while parsing: its tensor plus the raw offsets. */
typedef struct entry {
  trellis_tensor t;
  uint64_t begin, end;
} entry;

static trellis_status parse_dtype(const char *label, const char *name,
                                  json_t *v, trellis_tensor_dtype *out) {
  if (!json_is_string(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': dtype is not a string", label, name);
  const char *s = json_string_value(v);
  for (size_t i = 0; i < DTYPE_COUNT; i++) {
    if (strcmp(s, dtype_table[i].name) == 0) {
      *out = (trellis_tensor_dtype)i;
      return TRELLIS_OK;
    }
  }
  return trl_fail(TRELLIS_ERR_DTYPE,
                  "%s: tensor '%s': dtype '%.40s' is not a safetensors "
                  "dtype",
                  label, name, s);
}

static trellis_status parse_shape(const char *label, const char *name,
                                  json_t *v, trellis_tensor *t) {
  if (!json_is_array(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': shape is not an array", label, name);
  size_t nd = json_array_size(v);
  if (nd > TRELLIS_MAX_DIMS)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "%s: tensor '%s': shape has %zu dimensions (at most "
                    "%d supported)",
                    label, name, nd, TRELLIS_MAX_DIMS);
  t->ndim = (int)nd;
  for (size_t i = 0; i < nd; i++) {
    json_t *d = json_array_get(v, i);
    if (!json_is_integer(d))
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: tensor '%s': shape[%zu] is not an integer", label,
                      name, i);
    json_int_t x = json_integer_value(d);
    if (x < 0)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "%s: tensor '%s': shape[%zu] = %lld is negative", label,
                      name, i, (long long)x);
    t->shape[i] = (int64_t)x;
  }
  return TRELLIS_OK;
}

static trellis_status parse_offsets(const char *label, const char *name,
                                    json_t *v, size_t data_size, entry *e) {
  if (!json_is_array(v) || json_array_size(v) != 2)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': data_offsets is not an array "
                    "[begin, end]",
                    label, name);
  json_t *b = json_array_get(v, 0), *en = json_array_get(v, 1);
  if (!json_is_integer(b) || !json_is_integer(en) ||
      json_integer_value(b) < 0 || json_integer_value(en) < 0)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': data_offsets must be two "
                    "non-negative integers",
                    label, name);
  e->begin = (uint64_t)json_integer_value(b);
  e->end = (uint64_t)json_integer_value(en);
  if (e->begin > e->end)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': data_offsets [%llu, %llu] has "
                    "begin > end",
                    label, name, (unsigned long long)e->begin,
                    (unsigned long long)e->end);
  if (e->end > data_size)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': data_offsets [%llu, %llu] run past "
                    "the data region (%zu bytes)",
                    label, name, (unsigned long long)e->begin,
                    (unsigned long long)e->end, data_size);
  return TRELLIS_OK;
}

/* shape x dtype size must equal the byte span (overflow-checked). */
static trellis_status check_length(const char *label, const entry *e) {
  size_t bytes = trellis_tensor_dtype_size(e->t.dtype);
  int ok = 1;
  for (int i = 0; i < e->t.ndim && ok; i++)
    ok = trl_mul_size(bytes, (size_t)e->t.shape[i], &bytes);
  if (!ok)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': shape x dtype size overflows", label,
                    e->t.name);
  if (bytes != e->end - e->begin)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': shape x %s is %zu bytes but "
                    "data_offsets [%llu, %llu] span %llu",
                    label, e->t.name, trellis_tensor_dtype_name(e->t.dtype),
                    bytes, (unsigned long long)e->begin,
                    (unsigned long long)e->end,
                    (unsigned long long)(e->end - e->begin));
  return TRELLIS_OK;
}

static trellis_status parse_entry(const char *label, const char *name,
                                  json_t *v, size_t data_size, entry *e) {
  if (!json_is_object(v))
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: tensor '%s': entry is not a JSON object", label, name);
  static const char *const fields[] = {"dtype", "shape", "data_offsets"};
  for (size_t i = 0; i < 3; i++)
    if (!json_object_get(v, fields[i]))
      return trl_fail(TRELLIS_ERR_FORMAT, "%s: tensor '%s': missing field '%s'",
                      label, name, fields[i]);
  if (json_object_size(v) != 3) {
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
      if (strcmp(key, "dtype") && strcmp(key, "shape") &&
          strcmp(key, "data_offsets"))
        return trl_fail(TRELLIS_ERR_FORMAT,
                        "%s: tensor '%s': unexpected field '%.64s'", label,
                        name, key);
    }
  }
  trellis_status st =
      parse_dtype(label, name, json_object_get(v, "dtype"), &e->t.dtype);
  if (st == TRELLIS_OK)
    st = parse_shape(label, name, json_object_get(v, "shape"), &e->t);
  if (st == TRELLIS_OK)
    st = parse_offsets(label, name, json_object_get(v, "data_offsets"),
                       data_size, e);
  return st;
}

static trellis_status check_metadata(const char *label, json_t *meta) {
  if (!json_is_object(meta))
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: __metadata__ is not a JSON object",
                    label);
  const char *key;
  json_t *val;
  json_object_foreach(meta, key, val) {
    if (!json_is_string(val))
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: __metadata__ value of '%.64s' is not a string",
                      label, key);
  }
  return TRELLIS_OK;
}

/* The __metadata__ keys the library reads (io/qsrt.c); the others are
 * dropped at open, so a header's metadata costs nothing after it is parsed,
 * however many entries it has. */
static const char *const kept_keys[] = {"codebook", "bits", "pair_kind",
                                        "rate_axis"};
#define KEPT_KEYS (sizeof kept_keys / sizeof *kept_keys)

/* Keeps the (already checked) __metadata__ strings that are read. */
static trellis_status keep_metadata(trellis_file *f, json_t *meta) {
  f->meta.kv = calloc(2 * KEPT_KEYS + 1, sizeof *f->meta.kv);
  if (!f->meta.kv)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "%s: cannot allocate __metadata__", f->label);
  for (size_t k = 0; k < KEPT_KEYS; k++) {
    json_t *val = json_object_get(meta, kept_keys[k]);
    if (!val)
      continue;
    const char *pair[2] = {kept_keys[k], json_string_value(val)};
    for (int i = 0; i < 2; i++) {
      const size_t len = strlen(pair[i]) + 1;
      char *copy = malloc(len);
      if (!copy)
        return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                        "%s: cannot allocate __metadata__", f->label);
      memcpy(copy, pair[i], len);
      f->meta.kv[2 * f->meta.count + (size_t)i] = copy;
    }
    f->meta.count++;
  }
  return TRELLIS_OK;
}

const char *trl_st_meta_get(const trl_st_meta *m, const char *key) {
  for (size_t i = 0; m && i < m->count; i++)
    if (strcmp(m->kv[2 * i], key) == 0)
      return m->kv[2 * i + 1];
  return NULL;
}

static int cmp_offsets(const void *a, const void *b) {
  const entry *x = a, *y = b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end)
    return x->end < y->end ? -1 : 1;
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  const trellis_tensor *x = a, *y = b;
  return strcmp(x->name, y->name);
}

/* The data region must be covered exactly once, as the reference library
 * writes it and requires it: no overlap, no gap, no trailing bytes. */
static trellis_status check_layout(const char *label, entry *es, size_t n,
                                   size_t data_size) {
  qsort(es, n, sizeof *es, cmp_offsets);
  uint64_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    if (es[i].begin < pos)
      return trl_fail(
          TRELLIS_ERR_FORMAT,
          "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, "
          "%llu] overlap",
          label, es[i - 1].t.name, (unsigned long long)es[i - 1].begin,
          (unsigned long long)es[i - 1].end, es[i].t.name,
          (unsigned long long)es[i].begin, (unsigned long long)es[i].end);
    if (es[i].begin > pos)
      return trl_fail(
          TRELLIS_ERR_FORMAT,
          "%s: tensor '%s': %llu-byte gap before data_offsets "
          "[%llu, %llu] (the data region must be contiguous)",
          label, es[i].t.name, (unsigned long long)(es[i].begin - pos),
          (unsigned long long)es[i].begin, (unsigned long long)es[i].end);
    pos = es[i].end;
  }
  if (pos != data_size)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: %llu trailing bytes after the last tensor are "
                    "not covered by any tensor",
                    label, (unsigned long long)(data_size - pos));
  return TRELLIS_OK;
}

/* The header's structure against the limits, before jansson builds it. */
static trellis_status check_bounds(const trellis_file *f, const char *hdr,
                                   size_t len) {
  trl_json_bounds b;
  trl_json_scan(hdr, len, &b);
  if (b.depth > TRL_JSON_MAX_DEPTH)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header nests %zu levels deep (limit %d; a "
                    "safetensors header nests 3)",
                    f->label, b.depth, TRL_JSON_MAX_DEPTH);
  /* The root and __metadata__ are the objects that are not tensors. */
  if (b.objects > TRL_ST_MAX_TENSORS + 2)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header has %zu JSON objects, more than the limit "
                    "of %zu tensors per file",
                    f->label, b.objects, TRL_ST_MAX_TENSORS);
  if (b.values > TRL_ST_MAX_VALUES)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header has %zu JSON values, more than the limit "
                    "of %zu",
                    f->label, b.values, TRL_ST_MAX_VALUES);
  return TRELLIS_OK;
}

static trellis_status parse_json(trellis_file *f, const char *hdr, size_t len,
                                 json_t **out) {
  trellis_status st = check_bounds(f, hdr, len);
  if (st != TRELLIS_OK)
    return st;
  json_error_t err;
  json_t *root = json_loadb(hdr, len, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    if (json_error_code(&err) == json_error_duplicate_key)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: header: duplicate tensor name (%s)", f->label,
                      err.text);
    char text[JSON_ERROR_TEXT_LENGTH];
    trl_json_error_text(&err, text, sizeof text);
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header is not valid JSON at byte %d: %s", f->label,
                    err.position, text);
  }
  if (!json_is_object(root)) {
    json_decref(root);
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: header is not a JSON object",
                    f->label);
  }
  *out = root;
  return TRELLIS_OK;
}

/* Collects every tensor of the header into f->tensors (sorted by name). */
static trellis_status parse_tensors(trellis_file *f, json_t *root) {
  const char *key;
  json_t *val;
  size_t n = 0, name_bytes = 0;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) {
      trellis_status st = check_metadata(f->label, val);
      if (st == TRELLIS_OK)
        st = keep_metadata(f, val);
      if (st != TRELLIS_OK)
        return st;
      continue;
    }
    size_t len = strlen(key);
    if (len > TRL_ST_MAX_NAME)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "%s: a tensor name of %zu bytes exceeds the limit "
                      "of %d bytes (it starts '%.40s')",
                      f->label, len, TRL_ST_MAX_NAME, key);
    n++;
    name_bytes += len + 1; /* bounded by the header size */
  }
  if (n > TRL_ST_MAX_TENSORS)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header has %zu tensors, more than the limit of "
                    "%zu tensors per file",
                    f->label, n, TRL_ST_MAX_TENSORS);
  entry *es = calloc(n ? n : 1, sizeof *es);
  f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
  f->names = malloc(name_bytes ? name_bytes : 1);
  if (!es || !f->tensors || !f->names) {
    free(es);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "%s: cannot allocate the index of %zu tensors", f->label,
                    n);
  }
  trellis_status st = TRELLIS_OK;
  size_t i = 0;
  char *np = f->names;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0)
      continue;
    size_t len = strlen(key) + 1;
    memcpy(np, key, len);
    es[i].t.name = np;
    np += len;
    st = parse_entry(f->label, key, val, f->data_size, &es[i]);
    if (st != TRELLIS_OK)
      break;
    es[i].t.data = f->data + es[i].begin;
    es[i].t.nbytes = (size_t)(es[i].end - es[i].begin);
    st = check_length(f->label, &es[i]);
    if (st != TRELLIS_OK)
      break;
    i++;
  }
  if (st == TRELLIS_OK)
    st = check_layout(f->label, es, n, f->data_size);
  if (st == TRELLIS_OK) {
    for (i = 0; i < n; i++)
      f->tensors[i] = es[i].t;
    qsort(f->tensors, n, sizeof *f->tensors, cmp_names);
    f->count = n;
  }
  free(es);
  return st;
}

/* The 8-byte little-endian header length of a `size`-byte file. A value
 * out of range is reported without echoing it when it exceeds the limit:
 * such a file is not a safetensors file, and its first bytes are its own
 * content (text, say), not a length. */
static trellis_status header_length(const trellis_file *f, const uint8_t *b,
                                    size_t size, uint64_t *hlen) {
  if (size == 0)
    return trl_fail(TRELLIS_ERR_FORMAT, "%s: file is empty", f->label);
  if (size < 8)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: file is %zu bytes, too small for the 8-byte "
                    "header length",
                    f->label, size);
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | b[i];
  if (v > TRL_ST_MAX_HEADER)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: not a safetensors file: the header length in "
                    "its first 8 bytes exceeds the limit of %llu bytes "
                    "(the file is %zu bytes)",
                    f->label, (unsigned long long)TRL_ST_MAX_HEADER, size);
  if (v > size - 8)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "%s: header length %llu runs past the end of the file "
                    "(%zu bytes follow the length field; truncated, or "
                    "not a safetensors file?)",
                    f->label, (unsigned long long)v, size - 8);
  *hlen = v;
  return TRELLIS_OK;
}

/* Parses the JSON header; f->data and f->data_size are already set. */
static trellis_status parse_header(trellis_file *f, const char *hdr,
                                   size_t hlen) {
  json_t *root = NULL;
  trellis_status st = parse_json(f, hdr, hlen, &root);
  if (st != TRELLIS_OK)
    return st;
  st = parse_tensors(f, root);
  json_decref(root);
  return st;
}

static trellis_status parse_file(trellis_file *f, const uint8_t *buf,
                                 size_t size) {
  uint64_t hlen = 0;
  trellis_status st = header_length(f, buf, size, &hlen);
  if (st != TRELLIS_OK)
    return st;
  f->data = buf + 8 + hlen;
  f->data_size = size - 8 - (size_t)hlen;
  return parse_header(f, (const char *)buf + 8, (size_t)hlen);
}

/* ---------------------------------------------------------- lifecycle -- */

void trellis_file_close(trellis_file *f) {
  if (!f)
    return;
  if (f->map)
    munmap(f->map, f->map_size);
  free(f->tensors);
  free(f->names);
  for (size_t i = 0; f->meta.kv && f->meta.kv[i]; i++)
    free(f->meta.kv[i]);
  free(f->meta.kv);
  free(f->label);
  free(f);
}

static trellis_file *file_new(const char *label) {
  trellis_file *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  size_t len = strlen(label) + 1;
  f->label = malloc(len);
  if (!f->label) {
    free(f);
    return NULL;
  }
  memcpy(f->label, label, len);
  return f;
}

trellis_status trellis_file_open_memory(const void *data, size_t size,
                                        trellis_file **out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!data && size > 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "data is NULL but size is %zu", size);
  trellis_file *f = file_new("<memory>");
  if (!f)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "cannot allocate a trellis_file");
  trellis_status st = parse_file(f, data, size);
  if (st != TRELLIS_OK) {
    trellis_file_close(f);
    return st;
  }
  *out = f;
  return TRELLIS_OK;
}

/* A model's budget (trl_st_budget) is exceeded by this file. */
static trellis_status budget_fail(const char *path, const char *what,
                                  unsigned long long total,
                                  unsigned long long limit, const char *unit) {
  return trl_fail(TRELLIS_ERR_FORMAT,
                  "%s: %s the model to %llu %s, more than the limit of "
                  "%llu %s for a whole model (README \"Limits\")",
                  path, what, total, unit, limit, unit);
}

/* Reads the length and the header with pread() (a file that shrinks
 * meanwhile is an error, never a SIGBUS), then maps the whole file
 * read-only for the data region; within a budget, the header length is
 * checked before the header is read and the tensor count after it is
 * parsed. */
static trellis_status map_file(trellis_file *f, int fd, const char *path,
                               size_t size, trl_st_budget *budget) {
  uint8_t first[8] = {0};
  trellis_status st = TRELLIS_OK;
  if (size >= 8)
    st = trl_pread_exact(fd, path, 0, first, 8);
  uint64_t hlen = 0;
  if (st == TRELLIS_OK)
    st = header_length(f, first, size, &hlen);
  if (st != TRELLIS_OK)
    return st;
  if (budget && hlen > budget->header_limit - budget->header_bytes) {
    char what[64];
    snprintf(what, sizeof what, "its %llu-byte header brings",
             (unsigned long long)hlen);
    return budget_fail(path, what,
                       (unsigned long long)(budget->header_bytes + hlen),
                       (unsigned long long)budget->header_limit,
                       "bytes of safetensors headers");
  }
  char *hdr = malloc(hlen ? (size_t)hlen : 1);
  if (!hdr)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "%s: cannot allocate the %llu-byte header", path,
                    (unsigned long long)hlen);
  st = trl_pread_exact(fd, path, 8, hdr, (size_t)hlen);
  if (st == TRELLIS_OK) {
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      st = trl_errno_fail(path, "cannot mmap", errno);
    else {
      f->map = p;
      f->map_size = size;
      f->data = (const uint8_t *)p + 8 + hlen;
      f->data_size = size - 8 - (size_t)hlen;
      st = parse_header(f, hdr, (size_t)hlen);
    }
  }
  free(hdr);
  if (st == TRELLIS_OK && budget) {
    if (f->count > budget->tensor_limit - budget->tensors) {
      char what[64];
      snprintf(what, sizeof what, "its %zu tensors bring", f->count);
      return budget_fail(path, what,
                         (unsigned long long)(budget->tensors + f->count),
                         (unsigned long long)budget->tensor_limit, "tensors");
    }
    budget->header_bytes += hlen;
    budget->tensors += f->count;
  }
  return st;
}

/* Maps the file and closes its descriptor: the mapping needs none, and a
 * model holds one file per shard. The file's device and inode are kept so
 * that later accesses can notice, by the path, a file that shrank. */
static trellis_status open_file(trellis_file *f, const char *path,
                                trl_st_budget *budget) {
  int fd;
  size_t size;
  trellis_status st = trl_open_regular(path, &fd, &size);
  if (st != TRELLIS_OK)
    return st;
  struct stat sb;
  if (fstat(fd, &sb) != 0)
    st = trl_errno_fail(path, "cannot stat", errno);
  else {
    f->dev = sb.st_dev;
    f->ino = sb.st_ino;
    st = map_file(f, fd, path, size, budget);
  }
  close(fd);
  return st;
}

static trellis_status open_path(const char *path, trl_st_budget *budget,
                                trellis_file **out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "out is NULL");
  *out = NULL;
  if (!path)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "path is NULL");
  if (!path[0])
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "path is empty (expected a .safetensors file)");
  trellis_file *f = file_new(path);
  if (!f)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "cannot allocate a trellis_file");
  trellis_status st = open_file(f, path, budget);
  if (st != TRELLIS_OK) {
    trellis_file_close(f);
    return st;
  }
  *out = f;
  return TRELLIS_OK;
}

trellis_status trellis_file_open(const char *path, trellis_file **out) {
  return open_path(path, NULL, out);
}

trellis_status trl_file_open_within(const char *path, trl_st_budget *budget,
                                    trellis_file **out) {
  return open_path(path, budget, out);
}

trellis_status trl_file_check_size(const trellis_file *f) {
  if (!f->map)
    return TRELLIS_OK;
  struct stat sb;
  if (stat(f->label, &sb) != 0 || sb.st_dev != f->dev || sb.st_ino != f->ino)
    return TRELLIS_OK; /* not the mapped file any more: nothing to check */
  if ((uintmax_t)sb.st_size < (uintmax_t)f->map_size)
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: the file is now %lld bytes, %zu when it was "
                    "opened (truncated while open?)",
                    f->label, (long long)sb.st_size, f->map_size);
  return TRELLIS_OK;
}

/* ------------------------------------------------------------- access -- */

size_t trellis_file_tensor_count(const trellis_file *f) {
  return f ? f->count : 0;
}

trellis_status trellis_file_tensor(const trellis_file *f, size_t index,
                                   trellis_tensor *out) {
  if (!f || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL",
                    f ? "out" : "f");
  if (index >= f->count)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: tensor index %zu out of range (%zu tensors)", f->label,
                    index, f->count);
  trellis_status st = trl_file_check_size(f);
  if (st != TRELLIS_OK)
    return st;
  *out = f->tensors[index];
  return TRELLIS_OK;
}

ptrdiff_t trl_file_index(const trellis_file *f, const char *name) {
  size_t lo = 0, hi = f->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(name, f->tensors[mid].name);
    if (c == 0)
      return (ptrdiff_t)mid;
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return -1;
}

trellis_status trellis_file_find(const trellis_file *f, const char *name,
                                 trellis_tensor *out) {
  if (!f || !name || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL",
                    !f      ? "f"
                    : !name ? "name"
                            : "out");
  ptrdiff_t i = trl_file_index(f, name);
  if (i < 0)
    return trl_fail(TRELLIS_ERR_NOT_FOUND, "%s: no tensor named '%s'", f->label,
                    name);
  trellis_status st = trl_file_check_size(f);
  if (st != TRELLIS_OK)
    return st;
  *out = f->tensors[i];
  return TRELLIS_OK;
}

void trl_shape_text(const trellis_tensor *t, char *buf, size_t cap) {
  size_t used = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < t->ndim && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "",
                             (long long)t->shape[i]);
  if (used < cap)
    snprintf(buf + used, cap - used, "]");
}
