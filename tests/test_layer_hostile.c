/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile layers: misaligned tensors (realigned on fetch, never when
 * listing) and non-finite scales or bias (rejected at open, and by
 * trellis_weight_check_values for weights built by the caller). */
#include "testutil.h"

#include "io/model.h"
#include "tools/synth.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static const char *const P = "model.layers.3.mlp.up_proj";

/* ------------------------------------------------------------ builder -- */

#define MAX_T 8

typedef struct files {
  tu_st_tensor t[MAX_T];
  char names[MAX_T][160];
  size_t n;
} files;

static size_t dtype_bytes(const char *dt) {
  return !strcmp(dt, "F32") || !strcmp(dt, "I32") ? 4 : 2;
}

/* Adds `prefix.suffix`, a vector of `len` or the trellis of k x n x bits. */
static void put(files *f, const char *suffix, const char *dtype, int ndim,
                const int64_t *shape, const void *data) {
  assert_true(f->n < MAX_T);
  tu_st_tensor *t = &f->t[f->n];
  snprintf(f->names[f->n], sizeof f->names[0], "%s.%s", P, suffix);
  memset(t, 0, sizeof *t);
  t->name = f->names[f->n];
  t->dtype = dtype;
  t->ndim = ndim;
  size_t bytes = dtype_bytes(dtype);
  for (int d = 0; d < ndim; d++) {
    t->shape[d] = shape[d];
    bytes *= (size_t)shape[d];
  }
  t->nbytes = bytes;
  t->data = data;
  f->n++;
}

static void put1(files *f, const char *suffix, const char *dtype, int64_t len,
                 const void *data) {
  put(f, suffix, dtype, 1, &len, data);
}

/* The image of `f`; with `odd`, one more header byte so that every tensor
 * starts at an odd address. malloc'd. */
static uint8_t *image(const files *f, int odd, size_t *size) {
  size_t n;
  uint8_t *buf = tu_st_build(f->t, f->n, &n);
  if (!odd) {
    *size = n;
    return buf;
  }
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | buf[i];
  uint8_t *out = malloc(n + 1);
  assert_non_null(out);
  memcpy(out, buf, 8 + hlen);
  out[8 + hlen] = ' ';
  memcpy(out + 9 + hlen, buf + 8 + hlen, n - 8 - hlen);
  hlen++;
  for (int i = 0; i < 8; i++)
    out[i] = (uint8_t)(hlen >> (8 * i));
  free(buf);
  *size = n + 1;
  return out;
}

static trellis_status open_image(const files *f, int odd, const char *file,
                                 trellis_model **m) {
  size_t size;
  uint8_t *buf = image(f, odd, &size);
  char *path = tu_tmp_path(file);
  tu_write_file(path, buf, size);
  *m = NULL;
  trellis_status st = trellis_model_open(path, m);
  free(path);
  free(buf);
  return st;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* ---------------------------------------------- misaligned, listing -- */

/* A 256 MiB layer (k = n = 16384, K = 8) whose tensors are all misaligned,
 * its payload a sparse hole: opening and listing must not copy it. */
static void test_listing_copies_nothing(void **state) {
  (void)state;
  const int64_t k = 16384, n = 16384;
  char *path = tu_tmp_path("huge-odd.safetensors");
  const size_t payload = tu_write_odd_sparse_layer(path, P, k, n);
  const size_t scales = (size_t)(2 * k + 2 * n);

  long rss0 = peak_rss_kb();
  trellis_model *m;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_OK);
  trellis_layer_info info;
  tu_assert_status(trellis_model_layer_info(m, 0, &info), TRELLIS_OK);
  assert_string_equal(info.name, P);
  assert_int_equal(info.k, k);
  assert_int_equal(info.n, n);
  assert_int_equal(info.bits, 8);
  assert_int_equal(info.input_signs, TRELLIS_SIGNS_SCALED);
  assert_int_equal(info.output_signs, TRELLIS_SIGNS_SCALED);
  assert_int_equal(info.has_bias, 0);
  assert_int_equal(trl_model_copied_bytes(m), 0);
  long grown_kb = peak_rss_kb() - rss0;
  print_message("open + list of a 256 MiB misaligned layer: peak RSS +%ld "
                "KiB\n",
                grown_kb);
  assert_true(grown_kb < 32 * 1024);

  /* Fetching it for computing copies it, once. */
  trellis_layer L, again;
  tu_assert_status(trellis_model_layer(m, 0, &L), TRELLIS_OK);
  assert_int_equal(trl_model_copied_bytes(m), payload + scales);
  assert_int_equal((uintptr_t)L.weight.trellis % 2, 0);
  assert_int_equal((uintptr_t)L.weight.suh % 2, 0);
  assert_int_equal((uintptr_t)L.weight.svh % 2, 0);
  assert_int_equal(L.weight.suh[k - 1], 0x3C00);
  tu_assert_status(trellis_model_find_layer(m, P, &again), TRELLIS_OK);
  assert_memory_equal(&again, &L, sizeof L);
  assert_int_equal(trl_model_copied_bytes(m), payload + scales);
  trellis_model_close(m);
  free(path);
}

/* ---------------------------------------------- misaligned, compute -- */

typedef struct fetch_arg {
  trellis_model *m;
  trellis_layer layer;
  trellis_status st;
} fetch_arg;

static void *fetch_thread(void *p) {
  fetch_arg *a = p;
  a->st = trellis_model_find_layer(a->m, P, &a->layer);
  return NULL;
}

static void forward(const trellis_layer *L, const uint16_t *x, int64_t m,
                    float *y) {
  size_t ws_bytes = trellis_cpu_workspace_size(&L->weight, m, 1);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  assert_non_null(ws);
  tu_assert_status(trellis_cpu_forward(&L->weight, x, TRELLIS_F16, m, y,
                                       TRELLIS_F32, ws, ws_bytes, 1),
                   TRELLIS_OK);
  free(ws);
}

/* A misaligned layer (scales, F16 bias, legacy su) computes exactly what
 * the same layer aligned does; concurrent first fetches agree. */
static void test_misaligned_computes(void **state) {
  (void)state;
  const int64_t k = 256, n = 384, m = 3;
  const int bits = 4;
  synth_rng rng;
  synth_seed(&rng, 21);
  size_t words = (size_t)(k * n * bits / 16);
  int16_t *trellis = malloc(words * 2);
  assert_non_null(trellis);
  synth_words(&rng, trellis, words);
  int16_t su[16];
  synth_words(&rng, su, 16);
  uint16_t svh[384], bias[384], x[3 * 256];
  synth_fill_uniform(&rng, svh, TRELLIS_F16, 384, 0.5f, 1.5f);
  synth_fill_uniform(&rng, bias, TRELLIS_F16, 384, -1.0f, 1.0f);
  synth_fill_uniform(&rng, x, TRELLIS_F16, 3 * 256, -1.0f, 1.0f);

  files f = {0};
  int64_t shape[3] = {k / 16, n / 16, 16 * bits};
  put(&f, "trellis", "I16", 3, shape, trellis);
  put1(&f, "su", "I16", k / 16, su);
  put1(&f, "svh", "F16", n, svh);
  put1(&f, "bias", "F16", n, bias);

  trellis_model *aligned, *odd;
  tu_assert_status(open_image(&f, 0, "even.safetensors", &aligned), TRELLIS_OK);
  tu_assert_status(open_image(&f, 1, "odd.safetensors", &odd), TRELLIS_OK);
  assert_int_equal(trl_model_copied_bytes(odd), 0);

  fetch_arg args[4];
  pthread_t ids[4];
  for (int i = 0; i < 4; i++) {
    args[i].m = odd;
    assert_int_equal(pthread_create(&ids[i], NULL, fetch_thread, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(ids[i], NULL);
    tu_assert_status(args[i].st, TRELLIS_OK);
    assert_memory_equal(&args[i].layer, &args[0].layer, sizeof args[0].layer);
  }
  assert_int_equal(trl_model_copied_bytes(odd),
                   words * 2 + (size_t)k / 8 + 4 * (size_t)n);

  trellis_layer A, B = args[0].layer;
  tu_assert_status(trellis_model_layer(aligned, 0, &A), TRELLIS_OK);
  assert_int_equal(B.signs, TRELLIS_SIGNS_LEGACY);
  assert_non_null(B.weight.su);
  assert_non_null(B.weight.bias);
  assert_int_equal((uintptr_t)B.weight.su % 2, 0);
  assert_int_equal((uintptr_t)B.weight.bias % 2, 0);
  assert_memory_equal(B.weight.trellis, trellis, words * 2);
  float ya[3 * 384], yb[3 * 384];
  forward(&A, x, m, ya);
  forward(&B, x, m, yb);
  assert_memory_equal(ya, yb, sizeof ya);
  assert_true(tu_all_finite(yb, 3 * 384));
  trellis_model_close(aligned);
  trellis_model_close(odd);
  free(trellis);
}

/* ------------------------------------------------------- non-finite -- */

/* A layer k = 128, n = 256 with suh/svh of ones, then one value changed. */
static void expect_values(const char *member, const char *dtype,
                          const void *vec, trellis_status want,
                          const char *needle) {
  static uint16_t ones[256];
  for (int i = 0; i < 256; i++)
    ones[i] = 0x3C00;
  files f = {0};
  int64_t shape[3] = {8, 16, 32};
  put(&f, "trellis", "I16", 3, shape, NULL);
  put1(&f, "suh", "F16", 128, strcmp(member, "suh") ? ones : vec);
  put1(&f, "svh", "F16", 256, strcmp(member, "svh") ? ones : vec);
  if (!strcmp(member, "bias"))
    put1(&f, "bias", dtype, 256, vec);
  trellis_model *m = (trellis_model *)1;
  tu_assert_status(open_image(&f, 0, "values.safetensors", &m), want);
  if (want == TRELLIS_OK) {
    trellis_model_close(m);
    return;
  }
  assert_null(m);
  tu_assert_error_has(needle);
  tu_assert_error_has("values.safetensors");
}

static void test_nonfinite_rejected(void **state) {
  (void)state;
  uint16_t h[256];
  float f32[256];
  char want[256];
  for (int i = 0; i < 256; i++) {
    h[i] = 0x3C00;
    f32[i] = 1.0f;
  }
  h[5] = 0x7E00; /* NaN */
  snprintf(want, sizeof want, "layer '%s': tensor '%s.suh' element 5 is NaN", P,
           P);
  expect_values("suh", "F16", h, TRELLIS_ERR_FORMAT, want);
  h[5] = 0xFC00; /* -inf */
  expect_values("suh", "F16", h, TRELLIS_ERR_FORMAT, "suh' element 5 is inf");
  h[5] = 0x3C00;
  h[200] = 0x7C00;
  expect_values("svh", "F16", h, TRELLIS_ERR_FORMAT, "svh' element 200 is inf");
  expect_values("bias", "F16", h, TRELLIS_ERR_FORMAT,
                "bias' element 200 is inf");
  h[200] = 0x7BFF; /* 65504: finite */
  expect_values("svh", "F16", h, TRELLIS_OK, NULL);

  /* F32 bias: finite, and within fp16's range once rounded. */
  f32[7] = 65519.0f; /* rounds to 65504 */
  expect_values("bias", "F32", f32, TRELLIS_OK, NULL);
  f32[7] = 65520.0f; /* rounds to inf */
  expect_values("bias", "F32", f32, TRELLIS_ERR_FORMAT,
                "bias' element 7 = 65520 is beyond fp16's range");
  f32[7] = -1e30f;
  expect_values("bias", "F32", f32, TRELLIS_ERR_FORMAT,
                "bias' element 7 = -1e+30 is beyond fp16's range");
  f32[7] = 1.0f;
  f32[0] = INFINITY;
  expect_values("bias", "F32", f32, TRELLIS_ERR_FORMAT,
                "bias' element 0 = inf is infinite");
  f32[0] = NAN;
  expect_values("bias", "F32", f32, TRELLIS_ERR_FORMAT,
                "bias' element 0 = nan is NaN");
}

/* Weights the caller builds: trellis_weight_check_values. */
static void test_check_values_api(void **state) {
  (void)state;
  static int16_t trellis[128 * 128 * 2 / 16];
  uint16_t suh[128], svh[128], bias[128];
  int16_t sv[8] = {0};
  for (int i = 0; i < 128; i++)
    suh[i] = svh[i] = bias[i] = 0x3C00;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = w.n = 128;
  w.bits = 2;
  w.trellis = trellis;
  w.suh = suh;
  w.svh = svh;
  w.bias = bias;
  tu_assert_status(trellis_weight_check_values(&w), TRELLIS_OK);
  suh[3] = 0x7E01;
  tu_assert_status(trellis_weight_check_values(&w),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("weight.suh[3] is NaN");
  suh[3] = 0x3C00;
  bias[127] = 0xFC00;
  tu_assert_status(trellis_weight_check_values(&w),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("weight.bias[127] is infinite");
  bias[127] = 0;
  svh[0] = 0x7C00;
  tu_assert_status(trellis_weight_check_values(&w),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("weight.svh[0] is infinite");
  /* Legacy signs are always finite. */
  w.svh = NULL;
  w.sv = sv;
  tu_assert_status(trellis_weight_check_values(&w), TRELLIS_OK);
  /* Shape errors come first, as in trellis_weight_validate. */
  w.k = 100;
  tu_assert_status(trellis_weight_check_values(&w), TRELLIS_ERR_SHAPE);
  tu_assert_status(trellis_weight_check_values(NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
}

/* The thread count the forward reports is the one it uses: at most 256
 * and at most one per 16-column tile. */
static void test_forward_threads(void **state) {
  (void)state;
  static int16_t trellis[128 * 512 / 8];
  uint16_t suh[128], svh[512];
  for (int i = 0; i < 512; i++)
    svh[i] = suh[i % 128] = 0x3C00;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 128;
  w.n = 512;
  w.bits = 1;
  w.trellis = trellis;
  w.suh = suh;
  w.svh = svh;
  assert_int_equal(trellis_cpu_forward_threads(&w, 4096), 32);
  assert_int_equal(trellis_cpu_forward_threads(&w, 3), 3);
  assert_int_equal(trellis_cpu_forward_threads(&w, -1), 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int want = cores < 1 ? 1 : cores > 32 ? 32 : (int)cores;
  assert_int_equal(trellis_cpu_forward_threads(&w, 0), want);
  w.n = 128 * 64;
  assert_int_equal(trellis_cpu_forward_threads(&w, 4096), 256);
  assert_int_equal(trellis_cpu_forward_threads(NULL, 1), 0);
  /* a weight filled by the header before the pair fields */
  w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1;
  assert_int_equal(trellis_cpu_forward_threads(&w, 3), 3);
  w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1 - 1;
  assert_int_equal(trellis_cpu_forward_threads(&w, 3), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* First: it measures the process's peak RSS. */
      cmocka_unit_test(test_listing_copies_nothing),
      cmocka_unit_test(test_misaligned_computes),
      cmocka_unit_test(test_nonfinite_rejected),
      cmocka_unit_test(test_check_values_api),
      cmocka_unit_test(test_forward_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
