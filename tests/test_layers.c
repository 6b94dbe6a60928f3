/* SPDX-License-Identifier: Apache-2.0 */
/* EXL3 layer discovery: every test vector, and every malformed layer. */
#include "testutil.h"

#include "io/layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ builder -- */

#define MAX_T 24

/* The tensors of a file being built; names live in `names`. */
typedef struct files {
  tu_st_tensor t[MAX_T];
  char names[MAX_T][160];
  size_t n;
} files;

static const uint32_t mcg_value = 0xCBAC1FEDu, mul1_value = 0x83DCD12Du;

static size_t dtype_bytes(const char *dt) {
  if (!strcmp(dt, "F32") || !strcmp(dt, "I32") || !strcmp(dt, "U32"))
    return 4;
  if (!strcmp(dt, "I64") || !strcmp(dt, "F64"))
    return 8;
  if (!strcmp(dt, "U8") || !strcmp(dt, "I8"))
    return 1;
  return 2;
}

/* Adds (or replaces) `prefix.suffix`; data NULL means zeros. */
static tu_st_tensor *put(files *f, const char *prefix, const char *suffix,
                         const char *dtype, int ndim, const int64_t *shape,
                         const void *data) {
  char name[160];
  snprintf(name, sizeof name, "%s.%s", prefix, suffix);
  size_t i = 0;
  while (i < f->n && strcmp(f->names[i], name) != 0)
    i++;
  if (i == f->n) {
    assert_true(f->n < MAX_T);
    f->n++;
  }
  strcpy(f->names[i], name);
  tu_st_tensor *t = &f->t[i];
  memset(t, 0, sizeof *t);
  t->name = f->names[i];
  t->dtype = dtype;
  t->ndim = ndim;
  size_t bytes = dtype_bytes(dtype);
  for (int d = 0; d < ndim; d++) {
    t->shape[d] = shape[d];
    bytes *= (size_t)shape[d];
  }
  t->nbytes = bytes;
  t->data = data;
  return t;
}

static void put1(files *f, const char *prefix, const char *suffix,
                 const char *dtype, int64_t len) {
  put(f, prefix, suffix, dtype, 1, &len, NULL);
}

static void drop(files *f, const char *prefix, const char *suffix) {
  char name[160];
  snprintf(name, sizeof name, "%s.%s", prefix, suffix);
  for (size_t i = 0; i < f->n; i++) {
    if (strcmp(f->names[i], name) == 0) {
      for (size_t j = i; j + 1 < f->n; j++) {
        f->t[j] = f->t[j + 1];
        strcpy(f->names[j], f->names[j + 1]);
        f->t[j].name = f->names[j];
      }
      f->n--;
      return;
    }
  }
  fail_msg("drop: no tensor %s", name);
}

static void put_trellis(files *f, const char *prefix, int64_t k, int64_t n,
                        int64_t last) {
  int64_t shape[3] = {k / 16, n / 16, last};
  put(f, prefix, "trellis", "I16", 3, shape, NULL);
}

/* A valid scaled-sign layer: trellis, suh, svh (3INST). */
static void add_layer(files *f, const char *prefix, int64_t k, int64_t n,
                      int bits) {
  put_trellis(f, prefix, k, n, 16 * bits);
  put1(f, prefix, "suh", "F16", k);
  put1(f, prefix, "svh", "F16", n);
}

static void add_marker(files *f, const char *prefix, const char *which,
                       const uint32_t *value) {
  put(f, prefix, which, "I32", 0, NULL, value);
}

/* Writes the file and opens it as a model. */
static trellis_status open_files(files *f, trellis_model **m) {
  size_t size;
  uint8_t *buf = tu_st_build(f->t, f->n, &size);
  char *path = tu_tmp_path("layers.safetensors");
  tu_write_file(path, buf, size);
  *m = NULL;
  trellis_status st = trellis_model_open(path, m);
  free(path);
  free(buf);
  return st;
}

static void expect_error(files *f, trellis_status want, const char *needle) {
  trellis_model *m = (trellis_model *)1;
  tu_assert_status(open_files(f, &m), want);
  assert_null(m);
  tu_assert_error_has(needle);
  tu_assert_error_has("layers.safetensors");
}

static const char *const P = "model.layers.3.mlp.up_proj";

/* --------------------------------------------------------- the vectors -- */

static void test_all_vectors(void **state) {
  (void)state;
  tv_case *cases;
  size_t n = tv_load_manifest(&cases);
  for (size_t i = 0; i < n; i++) {
    const tv_case *c = &cases[i];
    tv_loaded tv;
    tv_open(c, &tv);
    assert_int_equal(trellis_model_layer_count(tv.model), 1);
    assert_int_equal(trellis_model_other_count(tv.model), 0);
    const trellis_layer *L = &tv.layer;
    const trellis_weight *w = &L->weight;
    assert_string_equal(L->name, c->layer);
    if (w->k != c->k || w->n != c->n || w->bits != c->bits ||
        w->codebook != c->codebook)
      fail_msg("%s: got k=%lld n=%lld K=%d cb=%d", c->name, (long long)w->k,
               (long long)w->n, w->bits, (int)w->codebook);
    assert_int_equal(L->signs, c->legacy_signs ? TRELLIS_SIGNS_LEGACY
                                               : TRELLIS_SIGNS_SCALED);
    assert_int_equal(L->has_bias, c->bias);
    assert_int_equal(w->bias != NULL, c->bias);
    assert_int_equal(w->suh != NULL, !c->legacy_signs);
    assert_int_equal(w->svh != NULL, !c->legacy_signs);
    assert_int_equal(w->su != NULL, c->legacy_signs);
    assert_int_equal(w->sv != NULL, c->legacy_signs);
    assert_non_null(w->trellis);
    assert_int_equal(w->struct_size, sizeof(trellis_weight));
    /* Reference shapes agree with the layer. */
    assert_int_equal(tv.x.shape[0], c->m);
    assert_int_equal(tv.x.shape[1], c->k);
    assert_int_equal(tv.y.shape[1], c->n);
    tv_close(&tv);
  }
  free(cases);
}

/* ------------------------------------------------------- valid layers -- */

static void test_every_bitrate(void **state) {
  (void)state;
  for (int bits = 1; bits <= 8; bits++) {
    files f = {0};
    add_layer(&f, P, 384, 128, bits);
    if (bits % 2)
      add_marker(&f, P, "mul1", &mul1_value);
    trellis_model *m;
    tu_assert_status(open_files(&f, &m), TRELLIS_OK);
    trellis_layer L;
    tu_assert_status(trellis_model_find_layer(m, P, &L), TRELLIS_OK);
    assert_int_equal(L.weight.bits, bits);
    assert_int_equal(L.weight.k, 384);
    assert_int_equal(L.weight.n, 128);
    assert_int_equal(L.weight.codebook,
                     bits % 2 ? TRELLIS_CB_MUL1 : TRELLIS_CB_3INST);
    trellis_model_close(m);
  }
}

static void test_markers_shapes(void **state) {
  (void)state;
  int64_t one = 1;
  files f = {0};
  add_layer(&f, "a", 128, 128, 2);
  add_marker(&f, "a", "mcg", &mcg_value);
  add_layer(&f, "b", 128, 128, 2);
  put(&f, "b", "mcg", "I32", 1, &one, &mcg_value);
  trellis_model *m;
  tu_assert_status(open_files(&f, &m), TRELLIS_OK);
  for (size_t i = 0; i < 2; i++) {
    trellis_layer L;
    tu_assert_status(trellis_model_layer(m, i, &L), TRELLIS_OK);
    assert_int_equal(L.weight.codebook, TRELLIS_CB_MCG);
  }
  trellis_model_close(m);
}

static void test_others_and_order(void **state) {
  (void)state;
  files f = {0};
  /* "a.b.trellis" sorts before "a.trellis", but layer "a" < "a.b". */
  add_layer(&f, "a", 128, 256, 4);
  add_layer(&f, "a.b", 256, 128, 3);
  add_layer(&f, "z.proj", 128, 128, 5);
  put1(&f, "lm_head", "weight", "F16", 8);
  put1(&f, "orphan", "suh", "F16", 128); /* no trellis: other */
  put1(&f, "orphan", "bias", "F32", 4);
  put1(&f, "orphan", "scale", "F16", 1); /* harmless without a trellis */
  trellis_model *m;
  tu_assert_status(open_files(&f, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 3);
  const char *layers[] = {"a", "a.b", "z.proj"};
  for (size_t i = 0; i < 3; i++) {
    trellis_layer L;
    tu_assert_status(trellis_model_layer(m, i, &L), TRELLIS_OK);
    assert_string_equal(L.name, layers[i]);
  }
  const char *others[] = {"lm_head.weight", "orphan.bias", "orphan.scale",
                          "orphan.suh"};
  assert_int_equal(trellis_model_other_count(m), 4);
  for (size_t i = 0; i < 4; i++) {
    trellis_tensor t;
    tu_assert_status(trellis_model_other(m, i, &t), TRELLIS_OK);
    assert_string_equal(t.name, others[i]);
  }
  trellis_model_close(m);
}

/* Layers in model order: the numbers in names compare by value, so
 * layers.2 comes before layers.10 (strcmp puts it after), and a find
 * (a binary search in that order) finds every one. */
static void test_model_order(void **state) {
  (void)state;
  files f = {0};
  const char *order[] = {
      "model.layers.1.mlp.up_proj",  "model.layers.2.mlp.down_proj",
      "model.layers.2.mlp.up_proj",  "model.layers.9.self_attn.o_proj",
      "model.layers.10.mlp.up_proj", "model.layers.100.mlp.up_proj"};
  for (size_t i = 6; i-- > 0;)
    add_layer(&f, order[i], 128, 128, 2);
  trellis_model *m;
  tu_assert_status(open_files(&f, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 6);
  for (size_t i = 0; i < 6; i++) {
    trellis_layer L;
    tu_assert_status(trellis_model_layer(m, i, &L), TRELLIS_OK);
    assert_string_equal(L.name, order[i]);
    tu_assert_status(trellis_model_find_layer(m, order[i], &L), TRELLIS_OK);
    assert_string_equal(L.name, order[i]);
  }
  trellis_layer L;
  tu_assert_status(
      trellis_model_find_layer(m, "model.layers.3.mlp.up_proj", &L),
      TRELLIS_ERR_NOT_FOUND);
  trellis_model_close(m);

  /* the comparison itself: by value, leading zeros, a total order */
  assert_true(trl_layer_name_cmp("l.2.x", "l.10.x") < 0);
  assert_true(trl_layer_name_cmp("l.10.x", "l.2.x") > 0);
  assert_true(trl_layer_name_cmp("l.10", "l.10.a") < 0);
  assert_true(trl_layer_name_cmp("l.007", "l.10") < 0);
  assert_true(trl_layer_name_cmp("l.01", "l.1") != 0);
  assert_true(trl_layer_name_cmp("l.01", "l.1") ==
              -trl_layer_name_cmp("l.1", "l.01"));
  assert_int_equal(trl_layer_name_cmp("l.0", "l.0"), 0);
  assert_true(trl_layer_name_cmp("a9", "a.9") > 0); /* '9' > '.' */
  assert_true(trl_layer_name_cmp("x99999999999999999999999",
                                 "x100000000000000000000000") < 0);
}

static void test_legacy_and_bias(void **state) {
  (void)state;
  float bias32[128];
  for (int i = 0; i < 128; i++)
    bias32[i] = (float)i * 0.5f - 3.0f;
  files f = {0};
  put_trellis(&f, "legacy", 256, 128, 48);
  put1(&f, "legacy", "su", "I16", 16);
  put1(&f, "legacy", "sv", "I16", 8);
  put_trellis(&f, "mixed", 128, 128, 32);
  put1(&f, "mixed", "suh", "F16", 128);
  put1(&f, "mixed", "sv", "I16", 8);
  add_layer(&f, "f32bias", 128, 128, 2);
  int64_t n = 128;
  put(&f, "f32bias", "bias", "F32", 1, &n, bias32);
  add_layer(&f, "f16bias", 128, 128, 2);
  put1(&f, "f16bias", "bias", "F16", 128);
  trellis_model *m;
  tu_assert_status(open_files(&f, &m), TRELLIS_OK);
  trellis_layer L;
  tu_assert_status(trellis_model_find_layer(m, "legacy", &L), TRELLIS_OK);
  assert_int_equal(L.signs, TRELLIS_SIGNS_LEGACY);
  assert_non_null(L.weight.su);
  assert_non_null(L.weight.sv);
  assert_null(L.weight.suh);
  assert_null(L.weight.svh);
  assert_int_equal(L.weight.k, 256);
  tu_assert_status(trellis_model_find_layer(m, "mixed", &L), TRELLIS_OK);
  assert_int_equal(L.signs, TRELLIS_SIGNS_LEGACY);
  assert_non_null(L.weight.suh);
  assert_non_null(L.weight.sv);
  tu_assert_status(trellis_model_find_layer(m, "f32bias", &L), TRELLIS_OK);
  assert_int_equal(L.has_bias, 1);
  for (int i = 0; i < 128; i++)
    assert_int_equal(L.weight.bias[i], trellis_f32_to_f16(bias32[i]));
  tu_assert_status(trellis_model_find_layer(m, "f16bias", &L), TRELLIS_OK);
  assert_int_equal(L.has_bias, 1);
  trellis_tensor t;
  tu_assert_status(trellis_model_find_tensor(m, "f16bias.bias", &t),
                   TRELLIS_OK);
  assert_ptr_equal(t.data, L.weight.bias);
  trellis_model_close(m);
}

/* A header one byte longer than needed makes every tensor odd-aligned; the
 * layer must then point at aligned copies with the same contents. */
static void test_misaligned_copy(void **state) {
  (void)state;
  int16_t words[8 * 8 * 16];
  for (int i = 0; i < 8 * 8 * 16; i++)
    words[i] = (int16_t)(i * 37);
  files f = {0};
  int64_t shape[3] = {8, 8, 16};
  put(&f, P, "trellis", "I16", 3, shape, words);
  put1(&f, P, "suh", "F16", 128);
  put1(&f, P, "svh", "F16", 128);
  size_t size;
  uint8_t *buf = tu_st_build(f.t, f.n, &size);
  uint8_t *odd = malloc(size + 1);
  assert_non_null(odd);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | buf[i];
  memcpy(odd, buf, 8 + hlen);
  odd[8 + hlen] = ' ';
  memcpy(odd + 9 + hlen, buf + 8 + hlen, size - 8 - hlen);
  hlen++;
  for (int i = 0; i < 8; i++)
    odd[i] = (uint8_t)(hlen >> (8 * i));
  char *path = tu_tmp_path("odd.safetensors");
  tu_write_file(path, odd, size + 1);
  trellis_model *m;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_OK);
  trellis_layer L;
  tu_assert_status(trellis_model_layer(m, 0, &L), TRELLIS_OK);
  assert_int_equal((uintptr_t)L.weight.trellis % 2, 0);
  assert_int_equal((uintptr_t)L.weight.suh % 2, 0);
  assert_memory_equal(L.weight.trellis, words, sizeof words);
  trellis_tensor t;
  tu_assert_status(trellis_model_find_tensor(m,
                                             "model.layers.3.mlp.up_proj"
                                             ".trellis",
                                             &t),
                   TRELLIS_OK);
  assert_int_equal((uintptr_t)t.data % 2, 1);
  trellis_model_close(m);
  free(path);
  free(odd);
  free(buf);
}

/* ------------------------------------------------------- bad layers -- */

static void test_bad_trellis(void **state) {
  (void)state;
  const int64_t lasts[] = {50, 0, 144, 8, 17, 160, 256};
  const char *msgs[] = {"trellis last dim 50 is not 16*K for K in 1..8",
                        "trellis last dim 0 is not 16*K for K in 1..8",
                        "trellis last dim 144 is not 16*K for K in 1..8",
                        "trellis last dim 8 is not",
                        "trellis last dim 17 is not",
                        "trellis last dim 160 is not",
                        "trellis last dim 256 is not"};
  for (size_t i = 0; i < sizeof lasts / sizeof *lasts; i++) {
    files f = {0};
    add_layer(&f, P, 256, 128, 4);
    put_trellis(&f, P, 256, 128, lasts[i]);
    expect_error(&f, TRELLIS_ERR_SHAPE, msgs[i]);
    tu_assert_error_has(P);
  }
  files f = {0};
  add_layer(&f, P, 256, 128, 4);
  int64_t two[2] = {16, 8};
  put(&f, P, "trellis", "I16", 2, two, NULL);
  expect_error(&f, TRELLIS_ERR_SHAPE, "trellis has shape [16, 8], expected 3");
  int64_t four[4] = {16, 8, 64, 1};
  put(&f, P, "trellis", "I16", 4, four, NULL);
  expect_error(&f, TRELLIS_ERR_SHAPE, "expected 3 dimensions");
  int64_t three[3] = {16, 8, 64};
  put(&f, P, "trellis", "F16", 3, three, NULL);
  expect_error(&f, TRELLIS_ERR_DTYPE, "trellis has dtype F16, expected I16");
  put(&f, P, "trellis", "U16", 3, three, NULL);
  expect_error(&f, TRELLIS_ERR_DTYPE, "trellis has dtype U16");
}

static void test_bad_sizes(void **state) {
  (void)state;
  files f = {0};
  add_layer(&f, P, 64, 128, 4); /* k = 64 */
  expect_error(&f, TRELLIS_ERR_SHAPE,
               "k = 64, which is not a positive "
               "multiple of 128");
  f.n = 0;
  add_layer(&f, P, 128, 192, 4); /* n = 192 */
  expect_error(&f, TRELLIS_ERR_SHAPE, "n = 192, which is not a positive");
  f.n = 0;
  add_layer(&f, P, 0, 128, 4);
  expect_error(&f, TRELLIS_ERR_SHAPE, "k = 0");
  f.n = 0;
  add_layer(&f, P, 256, 128, 4);
  put1(&f, P, "suh", "F16", 128);
  expect_error(&f, TRELLIS_ERR_SHAPE,
               "suh has shape [128], expected [256] (k from the trellis)");
  put1(&f, P, "suh", "F16", 256);
  put1(&f, P, "svh", "F16", 256);
  expect_error(&f, TRELLIS_ERR_SHAPE,
               "svh has shape [256], expected [128] (n from the trellis)");
  int64_t sq[2] = {1, 128};
  put(&f, P, "svh", "F16", 2, sq, NULL);
  expect_error(&f, TRELLIS_ERR_SHAPE, "svh has shape [1, 128]");
}

static void test_bad_dtypes(void **state) {
  (void)state;
  files f = {0};
  add_layer(&f, P, 256, 128, 4);
  put1(&f, P, "suh", "F32", 256);
  expect_error(&f, TRELLIS_ERR_DTYPE, "suh has dtype F32, expected F16");
  put1(&f, P, "suh", "F16", 256);
  put1(&f, P, "svh", "BF16", 128);
  expect_error(&f, TRELLIS_ERR_DTYPE, "svh has dtype BF16, expected F16");
  drop(&f, P, "svh");
  put1(&f, P, "sv", "F16", 8);
  expect_error(&f, TRELLIS_ERR_DTYPE, "sv has dtype F16, expected I16");
  put1(&f, P, "sv", "I16", 16);
  expect_error(&f, TRELLIS_ERR_SHAPE, "sv has shape [16], expected [8]");
  put1(&f, P, "sv", "I16", 8);
  drop(&f, P, "suh");
  put1(&f, P, "su", "I16", 8);
  expect_error(&f, TRELLIS_ERR_SHAPE, "su has shape [8], expected [16]");
  put1(&f, P, "su", "I16", 16);
  trellis_model *m;
  tu_assert_status(open_files(&f, &m), TRELLIS_OK);
  trellis_model_close(m);

  /* Bias. */
  put1(&f, P, "bias", "BF16", 128);
  expect_error(&f, TRELLIS_ERR_DTYPE, "bias has dtype BF16, expected F16");
  put1(&f, P, "bias", "F16", 256);
  expect_error(&f, TRELLIS_ERR_SHAPE, "bias has shape [256], expected [128]");
  put1(&f, P, "bias", "F32", 64);
  expect_error(&f, TRELLIS_ERR_SHAPE, "bias has shape [64], expected [128]");
}

static void test_bad_markers(void **state) {
  (void)state;
  const uint32_t wrong = 0x12345678u;
  const int64_t two = 2;
  const uint32_t pair[2] = {mcg_value, mcg_value};
  const uint64_t wide = mcg_value;
  files f = {0};
  add_layer(&f, P, 256, 128, 4);
  add_marker(&f, P, "mcg", &mcg_value);
  add_marker(&f, P, "mul1", &mul1_value);
  expect_error(&f, TRELLIS_ERR_FORMAT, "both mcg and mul1");
  drop(&f, P, "mul1");
  add_marker(&f, P, "mcg", &wrong);
  expect_error(&f, TRELLIS_ERR_UNSUPPORTED,
               "mcg marker value 0x12345678 differs from the built-in "
               "multiplier 0xCBAC1FED");
  add_marker(&f, P, "mcg", &mul1_value);
  expect_error(&f, TRELLIS_ERR_UNSUPPORTED, "0x83DCD12D differs");
  put(&f, P, "mcg", "I32", 1, &two, pair);
  expect_error(&f, TRELLIS_ERR_SHAPE,
               "mcg marker has shape [2], expected [] or [1]");
  put(&f, P, "mcg", "I64", 0, NULL, &wide);
  expect_error(&f, TRELLIS_ERR_DTYPE, "mcg marker has dtype I64");
  put(&f, P, "mcg", "U32", 0, NULL, &mcg_value);
  expect_error(&f, TRELLIS_ERR_DTYPE, "mcg marker has dtype U32");
  drop(&f, P, "mcg");
  add_marker(&f, P, "mul1", &mcg_value);
  expect_error(&f, TRELLIS_ERR_UNSUPPORTED, "mul1 marker value 0xCBAC1FED");
}

static void test_bad_members(void **state) {
  (void)state;
  files f = {0};
  add_layer(&f, P, 256, 128, 4);
  put1(&f, P, "scale", "F16", 1);
  expect_error(&f, TRELLIS_ERR_FORMAT, "scale is no longer used");
  drop(&f, P, "scale");

  put1(&f, P, "su", "I16", 16);
  expect_error(&f, TRELLIS_ERR_FORMAT, "both suh and legacy su");
  drop(&f, P, "su");
  put1(&f, P, "sv", "I16", 8);
  expect_error(&f, TRELLIS_ERR_FORMAT, "both svh and legacy sv");
  drop(&f, P, "sv");

  drop(&f, P, "svh");
  expect_error(&f, TRELLIS_ERR_NOT_FOUND,
               "tensor 'model.layers.3.mlp.up_proj.svh' (or legacy "
               "'model.layers.3.mlp.up_proj.sv') is missing");
  put1(&f, P, "svh", "F16", 128);
  drop(&f, P, "suh");
  expect_error(&f, TRELLIS_ERR_NOT_FOUND,
               "tensor 'model.layers.3.mlp.up_proj.suh'");
  /* A bad layer among good ones still fails the whole model. */
  f.n = 0;
  add_layer(&f, "good.a", 128, 128, 2);
  add_layer(&f, "good.b", 128, 128, 2);
  put_trellis(&f, "bad", 128, 128, 32);
  put1(&f, "bad", "suh", "F16", 128);
  expect_error(&f, TRELLIS_ERR_NOT_FOUND, "layer 'bad'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_all_vectors),
      cmocka_unit_test(test_every_bitrate),
      cmocka_unit_test(test_markers_shapes),
      cmocka_unit_test(test_others_and_order),
      cmocka_unit_test(test_model_order),
      cmocka_unit_test(test_legacy_and_bias),
      cmocka_unit_test(test_misaligned_copy),
      cmocka_unit_test(test_bad_trellis),
      cmocka_unit_test(test_bad_sizes),
      cmocka_unit_test(test_bad_dtypes),
      cmocka_unit_test(test_bad_markers),
      cmocka_unit_test(test_bad_members),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
