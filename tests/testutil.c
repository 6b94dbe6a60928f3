/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test helpers (see testutil.h). */
#define _DEFAULT_SOURCE /* wait4: a child's own peak memory (tu_run_tool) */
#include "testutil.h"

#include "core/sha256.h"
#include "format/codebooks.h"
#include "tools/synth_model.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* -------------------------------------------------------------- paths -- */

char *tu_join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  int slash = la > 0 && a[la - 1] != '/';
  char *p = malloc(la + (size_t)slash + lb + 1);
  assert_non_null(p);
  memcpy(p, a, la);
  if (slash)
    p[la] = '/';
  memcpy(p + la + slash, b, lb + 1);
  return p;
}

char *tu_tv_path(const char *name) { return tu_join(TU_TV_DIR, name); }

static char tmp_dir[64];

/* Removes a directory tree (only what the tests created). */
static void remove_tree(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0)
    return;
  if (S_ISDIR(sb.st_mode)) {
    DIR *d = opendir(path);
    if (d) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
          continue;
        char *child = malloc(strlen(path) + strlen(e->d_name) + 2);
        if (!child)
          break;
        sprintf(child, "%s/%s", path, e->d_name);
        remove_tree(child);
        free(child);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

static void remove_tmpdir(void) {
  if (tmp_dir[0])
    remove_tree(tmp_dir);
}

const char *tu_tmpdir(void) {
  if (!tmp_dir[0]) {
    strcpy(tmp_dir, "/tmp/trellis-test-XXXXXX");
    if (!mkdtemp(tmp_dir)) {
      tmp_dir[0] = '\0';
      fail_msg("mkdtemp failed");
    }
    atexit(remove_tmpdir);
  }
  return tmp_dir;
}

char *tu_tmp_path(const char *name) { return tu_join(tu_tmpdir(), name); }

void tu_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f)
    fail_msg("cannot create %s", path);
  int ok = size == 0 || fwrite(data, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  if (!ok)
    fail_msg("cannot write %s", path);
}

uint8_t *tu_read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot open %s", path);
  size_t cap = 1 << 16, len = 0;
  uint8_t *buf = malloc(cap);
  assert_non_null(buf);
  for (;;) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap)
      break;
    cap *= 2;
    buf = realloc(buf, cap);
    assert_non_null(buf);
  }
  int err = ferror(f);
  fclose(f);
  if (err)
    fail_msg("cannot read %s", path);
  *size = len;
  return buf;
}

char *tu_read_text(const char *path) {
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  char *text = realloc(data, size + 1);
  assert_non_null(text);
  text[size] = '\0';
  return text;
}

/* ------------------------------------------------------- test vectors -- */

static void copy_field(char *dst, size_t cap, json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (!json_is_string(v) || json_string_length(v) >= cap)
    fail_msg("manifest: case field '%s' missing or too long", key);
  memcpy(dst, json_string_value(v), json_string_length(v) + 1);
}

/* "bits": an integer K, or a half-integer K (1.5 -> 1, half). */
static void rate_field(json_t *obj, int *bits, int *half) {
  json_t *v = json_object_get(obj, "bits");
  const double x = json_number_value(v);
  if (!json_is_number(v) || x < 1 || x > 8 || 2 * x != (double)(int)(2 * x))
    fail_msg("manifest: case field 'bits' is not a rate");
  *bits = (int)x;
  *half = (int)(2 * x) % 2;
}

static int64_t int_field(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (!json_is_integer(v))
    fail_msg("manifest: case field '%s' is not an integer", key);
  return (int64_t)json_integer_value(v);
}

static int bool_field(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  if (!json_is_boolean(v))
    fail_msg("manifest: case field '%s' is not a boolean", key);
  return json_is_true(v);
}

static trellis_codebook codebook_of(const char *s) {
  trellis_codebook cb = TRELLIS_CB_3INST;
  if (!trl_codebook_parse(s, &cb))
    fail_msg("manifest: unknown codebook '%s'", s);
  return cb;
}

size_t tv_load_manifest(tv_case **cases) {
  return tv_load_manifest_set("", cases);
}

size_t tv_load_all(tv_case **cases) {
  static const char *const sets[] = {"", TU_TV_HALF, TU_TV_REAL};
  size_t total = 0;
  tv_case *all = NULL;
  for (size_t s = 0; s < sizeof sets / sizeof *sets; s++) {
    tv_case *part = NULL;
    const size_t n = tv_load_manifest_set(sets[s], &part);
    all = realloc(all, (total + n) * sizeof *all);
    assert_non_null(all);
    memcpy(all + total, part, n * sizeof *all);
    total += n;
    free(part);
  }
  *cases = all;
  return total;
}

size_t tv_load_manifest_set(const char *set, tv_case **cases) {
  char where[64];
  snprintf(where, sizeof where, "%s%smanifest.json", set, set[0] ? "/" : "");
  char *path = tu_tv_path(where);
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root)
    fail_msg("%s: %s", path, err.text);
  free(path);
  json_t *list = json_object_get(root, "cases");
  assert_true(json_is_array(list));
  size_t n = json_array_size(list);
  assert_true(n > 0);
  tv_case *cs = calloc(n, sizeof *cs);
  assert_non_null(cs);
  for (size_t i = 0; i < n; i++) {
    json_t *c = json_array_get(list, i);
    char cb[16];
    snprintf(cs[i].set, sizeof cs[i].set, "%s", set);
    copy_field(cs[i].name, sizeof cs[i].name, c, "name");
    copy_field(cs[i].layer, sizeof cs[i].layer, c, "layer");
    copy_field(cb, sizeof cb, c, "codebook");
    cs[i].codebook = codebook_of(cb);
    cs[i].k = int_field(c, "k");
    cs[i].n = int_field(c, "n");
    cs[i].m = int_field(c, "m");
    rate_field(c, &cs[i].bits, &cs[i].half);
    cs[i].legacy_signs = bool_field(c, "legacy_signs");
    cs[i].bias = bool_field(c, "bias");
  }
  json_decref(root);
  *cases = cs;
  return n;
}

static void find_ref(trellis_file *f, const char *name, trellis_tensor *t) {
  trellis_status st = trellis_file_find(f, name, t);
  if (st != TRELLIS_OK)
    fail_msg("ref tensor %s: %s", name, trellis_last_error());
}

void tv_open(const tv_case *c, tv_loaded *out) {
  memset(out, 0, sizeof *out);
  char stem[200];
  const char *slash = c->set[0] ? "/" : "";
  snprintf(stem, sizeof stem, "%s%s%s.safetensors", c->set, slash, c->name);
  char *path = tu_tv_path(stem);
  trellis_status st = trellis_model_open(path, &out->model);
  free(path);
  if (st != TRELLIS_OK)
    fail_msg("%s: %s", c->name, trellis_last_error());
  st = trellis_model_find_layer(out->model, c->layer, &out->layer);
  if (st != TRELLIS_OK)
    fail_msg("%s: %s", c->name, trellis_last_error());
  snprintf(stem, sizeof stem, "%s%s%s.ref.safetensors", c->set, slash, c->name);
  path = tu_tv_path(stem);
  st = trellis_file_open(path, &out->ref);
  free(path);
  if (st != TRELLIS_OK)
    fail_msg("%s: %s", c->name, trellis_last_error());
  find_ref(out->ref, "x", &out->x);
  find_ref(out->ref, "w_hat", &out->w_hat);
  if (trellis_file_find(out->ref, "w_dense", &out->w_dense) != TRELLIS_OK)
    memset(&out->w_dense, 0, sizeof out->w_dense);
  if (trellis_file_find(out->ref, "y_exact", &out->y) != TRELLIS_OK)
    find_ref(out->ref, "y", &out->y);
  trellis_clear_error();
}

void tv_close(tv_loaded *t) {
  trellis_model_close(t->model);
  trellis_file_close(t->ref);
  memset(t, 0, sizeof *t);
}

void tv_check_w_hat(const tv_case *c, const tv_loaded *t) {
  const size_t count = (size_t)c->k * (size_t)c->n;
  assert_int_equal(t->w_hat.nbytes, count * 2);
  uint16_t *w = malloc(count * 2);
  assert_non_null(w);
  memset(w, 0xFF, count * 2);
  tu_assert_status(trellis_decode_weight(&t->layer.weight, w), TRELLIS_OK);
  const uint8_t *ref = t->w_hat.data;
  for (size_t i = 0; i < count; i++) {
    uint16_t want;
    memcpy(&want, ref + 2 * i, 2);
    if (w[i] != want)
      fail_msg("%s: w_hat[%zu][%zu] = 0x%04x, want 0x%04x", c->name,
               i / (size_t)c->n, i % (size_t)c->n, w[i], want);
  }
  free(w);
}

void tv_check_w_dense(const tv_case *c, const tv_loaded *t, double tol) {
  const size_t count = (size_t)c->k * (size_t)c->n;
  assert_int_equal(t->w_dense.nbytes, count * 4);
  float *w = malloc(count * 4);
  assert_non_null(w);
  memset(w, 0xFF, count * 4); /* NaN: unwritten elements fail */
  tu_assert_status(trellis_dense_weight(&t->layer.weight, w), TRELLIS_OK);
  float *ref = tu_copy_tensor(&t->w_dense);
  tu_assert_close(c->name, "w_dense", w, ref, count, tol);
  free(ref);
  free(w);
}

void tv_check_cpu_forward(const tv_case *c, const tv_loaded *t, double tol) {
  assert_int_equal(t->y.nbytes, (size_t)c->m * (size_t)c->n * 4);
  const trellis_weight *w = &t->layer.weight;
  uint16_t *x16 = tu_copy_tensor(&t->x);
  float *yref = tu_copy_tensor(&t->y);
  const trellis_dtype xdts[] = {TRELLIS_F16, TRELLIS_F32};
  const trellis_dtype ydts[] = {TRELLIS_F32, TRELLIS_F16};
  for (int threads = 1; threads <= 2; threads++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        assert_true(trellis_cpu_workspace_size(w, c->m, threads) > 0);
        float *yf = tu_cpu_forward_f32(w, x16, c->m, xdts[i], ydts[j], threads);
        char what[96];
        snprintf(what, sizeof what, "y (x %s, y %s, %d threads)",
                 trellis_dtype_name(xdts[i]), trellis_dtype_name(ydts[j]),
                 threads);
        tu_assert_close(c->name, what, yf, yref, (size_t)c->m * (size_t)c->n,
                        tol);
        free(yf);
      }
  free(x16);
  free(yref);
}

size_t tv_load_b12x_manifest(tv_b12x_case **cases) {
  char *path = tu_tv_path(TU_TV_B12X "/manifest.json");
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root)
    fail_msg("b12x manifest: %s", err.text);
  free(path);
  json_t *list = json_object_get(root, "cases");
  assert_true(json_is_array(list));
  const size_t n = json_array_size(list);
  tv_b12x_case *cs = calloc(n ? n : 1, sizeof *cs);
  assert_non_null(cs);
  for (size_t i = 0; i < n; i++) {
    json_t *c = json_array_get(list, i);
    tv_b12x_case *b = &cs[i];
    char cb[16];
    snprintf(b->base.set, sizeof b->base.set, "%s", TU_TV_B12X);
    copy_field(b->base.name, sizeof b->base.name, c, "name");
    copy_field(b->base.layer, sizeof b->base.layer, c, "layer");
    copy_field(cb, sizeof cb, c, "codebook");
    b->base.codebook = codebook_of(cb);
    b->base.k = int_field(c, "k");
    b->base.n = int_field(c, "n");
    b->base.m = int_field(c, "m");
    json_t *kind = json_object_get(c, "pair_kind");
    if (kind) {
      json_t *bits = json_object_get(c, "bits");
      assert_true(json_is_array(bits) && json_array_size(bits) == 2);
      b->pair =
          (trellis_pair_kind)(json_integer_value(json_array_get(bits, 0)) << 4 |
                              json_integer_value(json_array_get(bits, 1)));
      assert_string_equal(trellis_pair_kind_name(b->pair),
                          json_string_value(kind));
      char axis[8];
      copy_field(axis, sizeof axis, c, "rate_axis");
      b->axis =
          strcmp(axis, "n") == 0 ? TRELLIS_RATE_AXIS_N : TRELLIS_RATE_AXIS_K;
    } else {
      b->base.bits = (int)int_field(c, "bits");
    }
  }
  json_decref(root);
  *cases = cs;
  return n;
}

void tu_sha256_u16_hex(const uint16_t *v, size_t count, char hex[65]) {
  uint8_t *le = malloc(count * 2 + 1);
  assert_non_null(le);
  for (size_t i = 0; i < count; i++) {
    le[2 * i] = (uint8_t)(v[i] & 0xFF);
    le[2 * i + 1] = (uint8_t)(v[i] >> 8);
  }
  trl_sha256_hex(le, count * 2, hex);
  free(le);
}

/* ------------------------------------------------------------ metrics -- */

double tu_rel_l2(const float *got, const float *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - (double)ref[i];
    num += d * d;
    den += (double)ref[i] * (double)ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

double tu_max_abs_diff(const float *got, const float *ref, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)got[i] - (double)ref[i]);
    if (!(d <= m)) /* NaN propagates */
      m = d;
  }
  return m;
}

double tu_max_abs(const float *v, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)v[i]);
    if (!(d <= m))
      m = d;
  }
  return m;
}

int tu_all_finite(const float *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return 0;
  return 1;
}

void tu_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = trellis_f16_to_f32(src[i]);
}

void tu_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
  for (size_t i = 0; i < n; i++)
    dst[i] = trellis_bf16_to_f32(src[i]);
}

void tu_assert_close(const char *name, const char *what, const float *got,
                     const float *ref, size_t count, double tol) {
  const double rel = tu_rel_l2(got, ref, count);
  const double maxd = tu_max_abs_diff(got, ref, count);
  const double maxr = tu_max_abs(ref, count);
  if (!tu_all_finite(got, count) || !(rel <= tol) || !(maxd <= tol * maxr))
    fail_msg("%s %s: rel_l2 %.3e, max|d| %.3e vs %.3e allowed (finite %d)",
             name, what, rel, maxd, tol * maxr, tu_all_finite(got, count));
}

void *tu_copy_tensor(const trellis_tensor *t) {
  void *p = malloc(t->nbytes ? t->nbytes : 1);
  assert_non_null(p);
  memcpy(p, t->data, t->nbytes);
  return p;
}

float *tu_cpu_forward_f32(const trellis_weight *w, const uint16_t *x16,
                          int64_t m, trellis_dtype xdt, trellis_dtype ydt,
                          int threads) {
  const size_t xcount = (size_t)m * (size_t)w->k;
  const size_t ycount = (size_t)m * (size_t)w->n;
  const void *x = x16;
  float *x32 = NULL;
  if (xdt == TRELLIS_F32) {
    x32 = malloc(xcount * sizeof *x32);
    assert_non_null(x32);
    tu_f16_to_f32(x16, x32, xcount);
    x = x32;
  }
  const size_t ws_bytes = trellis_cpu_workspace_size(w, m, threads);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  void *y = malloc(ycount * trellis_dtype_size(ydt));
  float *yf = malloc(ycount * sizeof *yf);
  assert_true(ws && y && yf);
  memset(y, 0xFF, ycount * trellis_dtype_size(ydt)); /* NaN-filled */
  tu_assert_status(
      trellis_cpu_forward(w, x, xdt, m, y, ydt, ws, ws_bytes, threads),
      TRELLIS_OK);
  if (ydt == TRELLIS_F16)
    tu_f16_to_f32(y, yf, ycount);
  else
    memcpy(yf, y, ycount * sizeof *yf);
  free(x32);
  free(ws);
  free(y);
  return yf;
}

/* ----------------------------------------------- safetensors builders -- */

uint8_t *tu_st_raw_len(uint64_t length_field, const char *header,
                       const void *data, size_t data_size, size_t *size) {
  size_t hlen = strlen(header);
  size_t total = 8 + hlen + data_size;
  uint8_t *buf = calloc(total ? total : 1, 1);
  assert_non_null(buf);
  for (int i = 0; i < 8; i++)
    buf[i] = (uint8_t)(length_field >> (8 * i));
  memcpy(buf + 8, header, hlen);
  if (data && data_size)
    memcpy(buf + 8 + hlen, data, data_size);
  *size = total;
  return buf;
}

uint8_t *tu_st_raw(const char *header, const void *data, size_t data_size,
                   size_t *size) {
  return tu_st_raw_len(strlen(header), header, data, data_size, size);
}

/* Appends printf output to a growing string. */
static void append(char **s, size_t *len, size_t *cap, const char *fmt, ...) {
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int n = vsnprintf(*s + *len, *cap - *len, fmt, ap);
    va_end(ap);
    assert_true(n >= 0);
    if ((size_t)n < *cap - *len) {
      *len += (size_t)n;
      return;
    }
    *cap = 2 * *cap + (size_t)n;
    *s = realloc(*s, *cap);
    assert_non_null(*s);
  }
}

uint8_t *tu_st_build(const tu_st_tensor *t, size_t count, size_t *size) {
  size_t cap = 256, len = 0, off = 0;
  char *h = malloc(cap);
  assert_non_null(h);
  h[0] = '\0';
  append(&h, &len, &cap, "{");
  for (size_t i = 0; i < count; i++) {
    append(&h, &len, &cap, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
           i ? "," : "", t[i].name, t[i].dtype);
    for (int d = 0; d < t[i].ndim; d++)
      append(&h, &len, &cap, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
    append(&h, &len, &cap, "],\"data_offsets\":[%zu,%zu]}", off,
           off + t[i].nbytes);
    off += t[i].nbytes;
  }
  append(&h, &len, &cap, "}");
  while (len % 8)
    append(&h, &len, &cap, " ");
  uint8_t *buf = tu_st_raw(h, NULL, off, size);
  off = 0;
  for (size_t i = 0; i < count; i++) {
    if (t[i].data && t[i].nbytes)
      memcpy(buf + 8 + len + off, t[i].data, t[i].nbytes);
    off += t[i].nbytes;
  }
  free(h);
  return buf;
}

char *tu_write_synth(const char *name, const char *preset, int blocks,
                     double bits, int head_bits, trellis_codebook cb,
                     int odd_cb) {
  synth_options o;
  synth_options_init(&o);
  o.odd_block_codebook = odd_cb;
  o.preset = preset;
  o.blocks = blocks;
  o.bits = bits;
  o.head_bits = head_bits;
  o.codebook = cb;
  o.vocab = 256;
  synth_model m;
  tu_assert_status(synth_model_plan(&o, &m), TRELLIS_OK);
  char *dir = tu_tmp_path(name);
  tu_assert_status(synth_model_write(&m, dir, 0, NULL, NULL, NULL), TRELLIS_OK);
  synth_model_free(&m);
  return dir;
}

/* ------------------------------------------------------ hostile files -- */

char *tu_copy_toy(void) {
  static int counter;
  static const char *const files[] = {
      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
      "model.safetensors.index.json", "config.json"};
  char name[32];
  snprintf(name, sizeof name, "toy%d", counter++);
  char *dir = tu_tmp_path(name);
  assert_int_equal(mkdir(dir, 0700), 0);
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char *src = tu_join(TU_TOY_MODEL, files[i]);
    char *dst = tu_join(dir, files[i]);
    size_t size;
    uint8_t *buf = tu_read_file(src, &size);
    tu_write_file(dst, buf, size);
    free(buf);
    free(src);
    free(dst);
  }
  return dir;
}

void tu_replace_entry(const char *dir, const char *name, int fifo,
                      const char *target) {
  char *path = tu_join(dir, name);
  unlink(path);
  if (fifo)
    assert_int_equal(mkfifo(path, 0600), 0);
  else
    assert_int_equal(symlink(target, path), 0);
  free(path);
}

char *tu_many_tensors_header(size_t count, size_t *len) {
  size_t cap = count * 64 + 16, used = 0;
  char *h = malloc(cap);
  assert_non_null(h);
  h[used++] = '{';
  for (size_t i = 0; i < count; i++)
    used += (size_t)snprintf(h + used, cap - used,
                             "%s\"%zx\":{\"dtype\":\"U8\",\"shape\":[0],"
                             "\"data_offsets\":[0,0]}",
                             i ? "," : "", i);
  h[used++] = '}';
  h[used] = '\0';
  *len = used;
  return h;
}

size_t tu_write_odd_sparse_layer(const char *path, const char *prefix,
                                 int64_t k, int64_t n) {
  const size_t payload = (size_t)k * (size_t)n; /* K = 8: one byte each */
  char header[1024];
  int len = snprintf(header, sizeof header,
                     "{\"%s.suh\":{\"dtype\":\"F16\",\"shape\":[%lld],"
                     "\"data_offsets\":[0,%lld]},"
                     "\"%s.svh\":{\"dtype\":\"F16\",\"shape\":[%lld],"
                     "\"data_offsets\":[%lld,%lld]},"
                     "\"%s.trellis\":{\"dtype\":\"I16\",\"shape\":[%lld,%lld,"
                     "128],\"data_offsets\":[%lld,%lld]}}",
                     prefix, (long long)k, (long long)(2 * k), prefix,
                     (long long)n, (long long)(2 * k),
                     (long long)(2 * k + 2 * n), prefix, (long long)(k / 16),
                     (long long)(n / 16), (long long)(2 * k + 2 * n),
                     (long long)(2 * k + 2 * n + (int64_t)payload));
  assert_true(len > 0 && (size_t)len < sizeof header - 2);
  while (len % 2 == 0) /* odd length: every tensor starts misaligned */
    header[len++] = ' ';
  header[len] = '\0';
  size_t scales = (size_t)(2 * k + 2 * n);
  uint8_t *head = malloc(8 + (size_t)len + scales);
  assert_non_null(head);
  for (int i = 0; i < 8; i++)
    head[i] = (uint8_t)((uint64_t)len >> (8 * i));
  memcpy(head + 8, header, (size_t)len);
  uint16_t one = 0x3C00;
  for (size_t i = 0; i < scales / 2; i++)
    memcpy(head + 8 + len + 2 * i, &one, 2);
  tu_write_file(path, head, 8 + (size_t)len + scales);
  free(head);
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(
      ftruncate(fileno(fp), (off_t)(8 + (size_t)len + scales + payload)), 0);
  fclose(fp);
  return payload;
}

/* ------------------------------------------------------------ asserts -- */

void tu_assert_status_at(trellis_status got, trellis_status want,
                         const char *file, int line) {
  if (got != want)
    fail_msg("%s:%d: got %s, want %s (last error: %s)", file, line,
             trellis_status_name(got), trellis_status_name(want),
             trellis_last_error());
}

void tu_assert_error_has_at(const char *needle, const char *file, int line) {
  const char *msg = trellis_last_error();
  if (!strstr(msg, needle))
    fail_msg("%s:%d: error message \"%s\" does not contain \"%s\"", file, line,
             msg, needle);
}

/* ----------------------------------------------------- running a tool -- */

static double mono_secs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

tu_run_result tu_run_tool(const char *tool, const char *const *args,
                          const tu_run_opts *opts) {
  static const tu_run_opts plain;
  const tu_run_opts *o = opts ? opts : &plain;
  const char *argv[32] = {tool};
  int argc = 1;
  for (; args[argc - 1]; argc++) {
    assert_true(argc < 31);
    argv[argc] = args[argc - 1];
  }
  argv[argc] = NULL;
  char *out_path = tu_tmp_path("run.stdout");
  char *err_path = tu_tmp_path("run.stderr");
  fflush(NULL);
  double t0 = mono_secs();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* stdin from /dev/null: a tool under test never waits on a terminal. */
    int i = open("/dev/null", O_RDONLY);
    int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (i < 0 || fo < 0 || fe < 0 || dup2(i, 0) < 0 || dup2(fo, 1) < 0 ||
        dup2(fe, 2) < 0)
      _exit(126);
    if (o->fsize > 0) {
      struct rlimit rl = {(rlim_t)o->fsize, (rlim_t)o->fsize};
      if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
        _exit(126);
    }
    execv(tool, (char *const *)argv);
    _exit(127);
  }
  if (o->sig) {
    /* The child is not reaped before the kill, so its pid cannot be
     * reused: a child that ended already is a zombie, unaffected. */
    struct timespec ts = {o->signal_after_ms / 1000,
                          (o->signal_after_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    kill(pid, o->sig);
  }
  int status = 0;
  struct rusage ru; /* wait4, not getrusage: this child's peak alone */
  memset(&ru, 0, sizeof ru);
  pid_t got;
  if (o->watchdog_s > 0) {
    while ((got = wait4(pid, &status, WNOHANG, &ru)) == 0 &&
           mono_secs() - t0 < o->watchdog_s)
      nanosleep(&(struct timespec){0, 10000000}, NULL);
    if (got == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      free(out_path);
      free(err_path);
      const char *name = strrchr(tool, '/');
      fail_msg("%s %s %s: still running after %d s (hangs)",
               name ? name + 1 : tool, args[0] ? args[0] : "",
               args[0] && args[1] ? args[1] : "", o->watchdog_s);
    }
  } else {
    got = wait4(pid, &status, 0, &ru);
  }
  assert_int_equal(got, pid);
  tu_run_result r;
  r.secs = mono_secs() - t0;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.maxrss_kb = ru.ru_maxrss;
  r.out = tu_read_text(out_path);
  r.err = tu_read_text(err_path);
  free(out_path);
  free(err_path);
  return r;
}

void tu_run_free(tu_run_result *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

/* ---------------------------------------------------------------- GPU -- */

int tu_gpu_available(void) { return trellis_cuda_device_count() > 0; }

void tu_require_gpu(void) {
  if (!tu_gpu_available()) {
    fprintf(stderr,
            "no CUDA device is available (built with CUDA: %d): skipping\n",
            trellis_cuda_built());
    exit(77);
  }
}
