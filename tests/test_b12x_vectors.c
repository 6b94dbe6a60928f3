/* SPDX-License-Identifier: Apache-2.0 */
/* The b12x known-answer vectors (testvectors/b12x/manifest.json) through the
 * loader, the CPU decoders and the CLI, and the loader's rejection of
 * malformed b12x containers (FORMAT.md §9.6, §9.7):
 *   - the layer the loader finds matches the manifest (k, n, codebook, K or
 *     pair kind and rate axis);
 *   - W_hat from trellis_decode_weight equals w_hat bit for bit;
 *   - trellis_dense_weight matches w_dense and trellis_cpu_forward matches
 *     y (rel L2 <= 2e-3, max|d| <= 2e-3 max|ref|), fp16/fp32 x, fp32/fp16
 *     y, 1 and 2 threads;
 *   - an n-axis pair's two records, row by row, are b12x's prepared payload
 *     (checked with the layer);
 *   - `trellis info`, `decode` and `forward --device cpu` on them. */
#include "testutil.h"

#include "format/pair.h"
#include "format/sqg.h"
#include "io/model.h"
#include "tools/npy.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#define TOL 2e-3
#define B12X_DIR TU_TV_DIR "/b12x"

static tv_b12x_case *cases;
static size_t ncases;

static char *case_path(const tv_b12x_case *c, const char *suffix) {
  char *p =
      malloc(strlen(B12X_DIR) + strlen(c->base.name) + strlen(suffix) + 2);
  assert_non_null(p);
  sprintf(p, "%s/%s%s", B12X_DIR, c->base.name, suffix);
  return p;
}

/* ---------------------------------------------------- per-case checks -- */

/* FORMAT.md §9.5: b12x's n-axis copy puts, per K16 row kt, record0's 8 tiles
 * then record1's 8 tiles; the records as the loader sees them give it back. */
static void check_prepared_payload(const tv_loaded *t) {
  trellis_tensor prep;
  tu_assert_status(trellis_file_find(t->ref, "payload_prepared", &prep),
                   TRELLIS_OK);
  const trellis_weight *w = &t->layer.weight;
  const size_t row0 = 8 * 16 * (size_t)w->bits,
               row1 = 8 * 16 * (size_t)w->bits1;
  assert_int_equal(prep.nbytes, (size_t)(w->k / 16) * (row0 + row1) * 2);
  const uint8_t *p = prep.data;
  for (int64_t kt = 0; kt < w->k / 16; kt++) {
    const uint8_t *row = p + (size_t)kt * (row0 + row1) * 2;
    assert_memory_equal(row, w->trellis + (size_t)kt * row0, row0 * 2);
    assert_memory_equal(row + row0 * 2, w->trellis1 + (size_t)kt * row1,
                        row1 * 2);
  }
}

static void test_layer(void **state) {
  const tv_b12x_case *c = *state;
  tv_loaded t;
  tv_open(&c->base, &t);
  const trellis_weight *w = &t.layer.weight;
  assert_int_equal(w->k, c->base.k);
  assert_int_equal(w->n, c->base.n);
  assert_int_equal(w->codebook, c->base.codebook);
  assert_int_equal(w->pair, c->pair);
  assert_int_equal(t.layer.signs, TRELLIS_SIGNS_SCALED);
  assert_int_equal(t.layer.has_bias, 0);
  if (c->pair == TRELLIS_PAIR_NONE) {
    assert_int_equal(w->bits, c->base.bits);
  } else {
    assert_int_equal(w->rate_axis, c->axis);
    assert_int_equal(w->bits, trl_pair_bits0(c->pair));
    assert_int_equal(w->bits1, trl_pair_bits1(c->pair));
    const int64_t orth = c->axis == TRELLIS_RATE_AXIS_N ? c->base.k : c->base.n;
    assert_ptr_equal(w->trellis1,
                     w->trellis + trl_pair_record_words(orth, w->bits));
    if (c->axis == TRELLIS_RATE_AXIS_N)
      check_prepared_payload(&t);
  }
  assert_int_equal(trellis_weight_validate(w), TRELLIS_OK);
  assert_int_equal(t.x.shape[0], c->base.m);
  assert_int_equal(t.x.shape[1], c->base.k);
  tv_close(&t);
}

static void test_w_hat(void **state) {
  const tv_b12x_case *c = *state;
  tv_loaded t;
  tv_open(&c->base, &t);
  tv_check_w_hat(&c->base, &t);
  tv_close(&t);
}

/* The case's file with one more header byte, so that every tensor starts
 * at an odd address: listing copies nothing, a fetch realigns the payload
 * (a pair's record1 with it) and decodes as the aligned file does. */
static void test_misaligned(void **state) {
  const tv_b12x_case *c = *state;
  tv_loaded t;
  tv_open(&c->base, &t);
  char *path = case_path(c, ".safetensors");
  size_t size;
  uint8_t *buf = tu_read_file(path, &size);
  free(path);
  assert_true(size > 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--)
    hlen = hlen << 8 | buf[i];
  assert_true(8 + hlen <= size);
  uint8_t *odd = malloc(size + 1);
  assert_non_null(odd);
  memcpy(odd, buf, 8 + hlen);
  odd[8 + hlen] = ' ';
  memcpy(odd + 9 + hlen, buf + 8 + hlen, size - 8 - hlen);
  for (int i = 0; i < 8; i++)
    odd[i] = (uint8_t)((hlen + 1) >> (8 * i));
  path = tu_tmp_path("b12x-odd.safetensors");
  tu_write_file(path, odd, size + 1);
  free(buf);
  free(odd);

  trellis_model *m;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_OK);
  trellis_layer_info info;
  tu_assert_status(trellis_model_layer_info(m, 0, &info), TRELLIS_OK);
  const trellis_weight *a = &t.layer.weight;
  assert_string_equal(info.name, c->base.layer);
  assert_int_equal(info.k, a->k);
  assert_int_equal(info.n, a->n);
  assert_int_equal(info.bits, a->bits);
  assert_int_equal(info.codebook, a->codebook);
  assert_int_equal(info.pair, a->pair);
  assert_int_equal(info.rate_axis, a->rate_axis);
  assert_int_equal(trl_model_copied_bytes(m), 0);

  trellis_layer L;
  tu_assert_status(trellis_model_layer(m, 0, &L), TRELLIS_OK);
  const trellis_weight *w = &L.weight;
  assert_true(trl_model_copied_bytes(m) >= trellis_weight_payload_bytes(a));
  assert_int_equal((uintptr_t)w->trellis % 2, 0);
  assert_ptr_equal(w->trellis1, a->trellis1
                                    ? w->trellis + (a->trellis1 - a->trellis)
                                    : NULL);
  const size_t count = (size_t)c->base.k * (size_t)c->base.n;
  uint16_t *want = malloc(count * 2), *got = malloc(count * 2);
  assert_true(want && got);
  tu_assert_status(trellis_decode_weight(a, want), TRELLIS_OK);
  tu_assert_status(trellis_decode_weight(w, got), TRELLIS_OK);
  assert_memory_equal(got, want, count * 2);
  free(want);
  free(got);
  trellis_model_close(m);
  free(path);
  tv_close(&t);
}

static void test_w_dense(void **state) {
  const tv_b12x_case *c = *state;
  tv_loaded t;
  tv_open(&c->base, &t);
  tv_check_w_dense(&c->base, &t, TOL);
  tv_close(&t);
}

static void test_cpu_forward(void **state) {
  const tv_b12x_case *c = *state;
  tv_loaded t;
  tv_open(&c->base, &t);
  tv_check_cpu_forward(&c->base, &t, TOL);
  tv_close(&t);
}

/* ---------------------------------------------------------------- CLI -- */

/* Runs `trellis ARGS` and returns its exit status; stdout+stderr in *out. */
static int run_cli(const char *args, char *out, size_t cap) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", TRELLIS_CLI_PATH, args);
  FILE *f = popen(cmd, "r");
  assert_non_null(f);
  size_t len = fread(out, 1, cap - 1, f);
  out[len] = '\0';
  const int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli_info(void **state) {
  (void)state;
  static char out[8192];
  static const struct {
    const char *file, *row[3];
  } want[] = {
      {"sqg_e4m3_k3_128x128", {" 3 ", "sqg_e4m3", " 3.00 "}},
      {"sqg_fp16_k5_128x128", {" 5 ", "sqg_fp16", " 5.00 "}},
      {"p24_n_sqg_e4m3_128x256", {"P24/n", "sqg_e4m3", " 3.00 "}},
      {"p43_n_sqg_e4m3_128x256", {"P43/n", "sqg_e4m3", " 3.50 "}},
      {"p24_k_mcg_256x128", {"P24/k", "mcg", " 3.00 "}},
  };
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    char args[512];
    snprintf(args, sizeof args, "info '%s/%s.safetensors'", B12X_DIR,
             want[i].file);
    assert_int_equal(run_cli(args, out, sizeof out), 0);
    for (int j = 0; j < 3; j++)
      if (!strstr(out, want[i].row[j]))
        fail_msg("info %s lacks '%s':\n%s", want[i].file, want[i].row[j], out);
    assert_non_null(strstr(out, "model.layers.0.mlp.proj"));
  }
}

/* decode writes w_hat; forward --device cpu matches y. */
static void test_cli_decode_forward(void **state) {
  (void)state;
  static char out[8192];
  static const char *const names[] = {"sqg_fp16_k6_128x128",
                                      "p33_k_sqg_e4m3_256x128",
                                      "p24_n_sqg_e4m3_128x256"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const tv_b12x_case *c = NULL;
    for (size_t j = 0; j < ncases; j++)
      if (!strcmp(cases[j].base.name, names[i]))
        c = &cases[j];
    assert_non_null(c);
    tv_loaded t;
    tv_open(&c->base, &t);
    char *model = case_path(c, ".safetensors");
    char *w_path = tu_tmp_path("w.npy"), *x_path = tu_tmp_path("x.npy");
    char *y_path = tu_tmp_path("y.npy");
    char args[1024];
    snprintf(args, sizeof args, "decode '%s' %s --output '%s'", model,
             c->base.layer, w_path);
    if (run_cli(args, out, sizeof out) != 0)
      fail_msg("%s: %s", args, out);
    npy_array a;
    tu_assert_status(npy_read(w_path, &a), TRELLIS_OK);
    assert_int_equal(a.dtype, TRELLIS_F16);
    assert_int_equal(a.nbytes, t.w_hat.nbytes);
    assert_memory_equal(a.data, t.w_hat.data, a.nbytes);
    npy_free(&a);

    const int64_t xshape[2] = {c->base.m, c->base.k};
    tu_assert_status(npy_write(x_path, TRELLIS_F16, 2, xshape, t.x.data),
                     TRELLIS_OK);
    snprintf(args, sizeof args,
             "forward '%s' %s --input '%s' --output '%s' --device cpu", model,
             c->base.layer, x_path, y_path);
    if (run_cli(args, out, sizeof out) != 0)
      fail_msg("%s: %s", args, out);
    tu_assert_status(npy_read(y_path, &a), TRELLIS_OK);
    assert_int_equal(a.dtype, TRELLIS_F32);
    assert_int_equal(a.nbytes, t.y.nbytes);
    float *yref = tu_copy_tensor(&t.y);
    tu_assert_close(c->base.name, "cli forward", a.data, yref,
                    (size_t)(c->base.m * c->base.n), TOL);
    free(yref);
    npy_free(&a);
    free(model);
    free(w_path);
    free(x_path);
    free(y_path);
    tv_close(&t);
  }
}

/* ------------------------------------------------ malformed containers -- */

/* One tensor of a hand-made file. */
typedef struct mk_tensor {
  const char *suffix; /* appended to the layer prefix */
  const char *dtype;  /* "I16", "F16", ... */
  int ndim;
  int64_t shape[3];
  const void *data; /* NULL: zeros */
} mk_tensor;

static size_t dtype_bytes(const char *dtype) {
  return !strcmp(dtype, "I32") ? 4 : !strcmp(dtype, "U8") ? 1 : 2;
}

/* Writes a one-layer safetensors file under prefix P with the given
 * __metadata__ JSON object body (or none) to the temp dir. */
static char *write_file(const char *file, const mk_tensor *ts, size_t count,
                        const char *meta) {
  static const char prefix[] = "model.layers.0.mlp.proj";
  char header[4096];
  size_t used = (size_t)snprintf(header, sizeof header, "{");
  size_t total = 0;
  for (size_t i = 0; i < count; i++) {
    size_t elems = 1;
    char shape[64] = "";
    size_t sl = 0;
    for (int d = 0; d < ts[i].ndim; d++) {
      elems *= (size_t)ts[i].shape[d];
      sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%s%lld",
                             d ? "," : "", (long long)ts[i].shape[d]);
    }
    const size_t bytes = elems * dtype_bytes(ts[i].dtype);
    used += (size_t)snprintf(
        header + used, sizeof header - used,
        "%s\"%s%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,"
        "%zu]}",
        i ? "," : "", prefix, ts[i].suffix, ts[i].dtype, shape, total,
        total + bytes);
    total += bytes;
  }
  if (meta)
    used += (size_t)snprintf(header + used, sizeof header - used,
                             ",\"__metadata__\":{%s}", meta);
  snprintf(header + used, sizeof header - used, "}");
  assert_true(used + 2 < sizeof header);
  uint8_t *data = calloc(total ? total : 1, 1);
  assert_non_null(data);
  size_t off = 0;
  for (size_t i = 0; i < count; i++) {
    size_t elems = 1;
    for (int d = 0; d < ts[i].ndim; d++)
      elems *= (size_t)ts[i].shape[d];
    const size_t bytes = elems * dtype_bytes(ts[i].dtype);
    if (ts[i].data)
      memcpy(data + off, ts[i].data, bytes);
    off += bytes;
  }
  size_t size;
  uint8_t *image = tu_st_raw(header, data, total, &size);
  char *path = tu_tmp_path(file);
  tu_write_file(path, image, size);
  free(image);
  free(data);
  return path;
}

static void expect_open(const char *path, trellis_status want,
                        const char *needle1, const char *needle2) {
  trellis_model *m = NULL;
  trellis_clear_error();
  tu_assert_status(trellis_model_open(path, &m), want);
  if (want == TRELLIS_OK) {
    trellis_model_close(m);
    return;
  }
  assert_null(m);
  tu_assert_error_has(needle1);
  if (needle2)
    tu_assert_error_has(needle2);
}

static uint16_t ones[512];
static uint16_t scale_inf[512];

static void init_scales(void) {
  for (int i = 0; i < 512; i++)
    ones[i] = scale_inf[i] = 0x3C00;
}

/* A uniform layer k = n = 128 at K bits. */
static char *uniform_file(const char *file, int bits, const char *meta) {
  init_scales();
  const mk_tensor ts[] = {
      {".qsrt_trellis", "I16", 3, {8, 8, 16 * bits}, NULL},
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_svh", "F16", 1, {128}, ones},
  };
  return write_file(file, ts, 3, meta);
}

static void test_bad_uniform(void **state) {
  (void)state;
  char *p;
  p = uniform_file("k7.safetensors", 7, "\"codebook\":\"sqg_e4m3\"");
  expect_open(p, TRELLIS_ERR_SHAPE, "sqg_e4m3 is defined for K 2..6", "K = 7");
  free(p);
  p = uniform_file("fp16k4.safetensors", 4, "\"codebook\":\"sqg_fp16\"");
  expect_open(p, TRELLIS_ERR_SHAPE, "sqg_fp16 is defined for K 5..6", "K = 4");
  free(p);
  p = uniform_file("mcgk7.safetensors", 7, "\"codebook\":\"mcg\"");
  expect_open(p, TRELLIS_ERR_SHAPE, "K = 7", "2..6");
  free(p);
  p = uniform_file("nocb.safetensors", 3, "\"format\":\"b12x-trellis\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "no codebook", "qsrt_trellis");
  free(p);
  p = uniform_file("nometa.safetensors", 3, NULL);
  expect_open(p, TRELLIS_ERR_FORMAT, "no codebook", NULL);
  free(p);
  p = uniform_file("foo.safetensors", 3, "\"codebook\":\"foo\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "'foo'", "one of mcg, sqg_e4m3, sqg_fp16");
  free(p);
  p = uniform_file("3inst.safetensors", 3, "\"codebook\":\"3inst\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "'3inst'", NULL);
  free(p);
  p = uniform_file("bits.safetensors", 3,
                   "\"codebook\":\"sqg_e4m3\",\"bits\":\"4\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "bits '4'", "K = 3");
  free(p);
  /* names are case-insensitive, aliases accepted */
  p = uniform_file("alias.safetensors", 3,
                   "\"codebook\":\"SQG_XOR_CHEB_T12\",\"bits\":\"3\"");
  expect_open(p, TRELLIS_OK, NULL, NULL);
  free(p);
  p = uniform_file("alias16.safetensors", 5, "\"codebook\":\"sqg_fp16_d3l\"");
  expect_open(p, TRELLIS_OK, NULL, NULL);
  free(p);

  /* markers: mul1 never, mcg only for mcg */
  static const int32_t mcg = (int32_t)0xCBAC1FEDu, mul1 = (int32_t)0x83DCD12Du;
  const mk_tensor with_mcg[] = {
      {".mcg", "I32", 0, {0}, &mcg},
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_svh", "F16", 1, {128}, ones},
      {".qsrt_trellis", "I16", 3, {8, 8, 48}, NULL},
  };
  p = write_file("mcg_disagree.safetensors", with_mcg, 4,
                 "\"codebook\":\"sqg_e4m3\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "mcg marker disagrees", NULL);
  free(p);
  p = write_file("mcg_alone.safetensors", with_mcg, 4, NULL);
  trellis_model *m;
  tu_assert_status(trellis_model_open(p, &m), TRELLIS_OK);
  trellis_layer l;
  tu_assert_status(trellis_model_layer(m, 0, &l), TRELLIS_OK);
  assert_int_equal(l.weight.codebook, TRELLIS_CB_MCG);
  assert_int_equal(trellis_model_other_count(m), 0);
  trellis_model_close(m);
  free(p);
  mk_tensor with_mul1[4];
  memcpy(with_mul1, with_mcg, sizeof with_mul1);
  with_mul1[0].suffix = ".mul1";
  with_mul1[0].data = &mul1;
  p = write_file("mul1.safetensors", with_mul1, 4, "\"codebook\":\"mcg\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "mul1 marker", NULL);
  free(p);

  /* a missing scale, a wrong length, two payloads for one prefix */
  const mk_tensor no_svh[] = {
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_trellis", "I16", 3, {8, 8, 48}, NULL},
  };
  p = write_file("no_svh.safetensors", no_svh, 2, "\"codebook\":\"mcg\"");
  expect_open(p, TRELLIS_ERR_NOT_FOUND, "qsrt_svh", NULL);
  free(p);
  const mk_tensor short_svh[] = {
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_svh", "F16", 1, {64}, ones},
      {".qsrt_trellis", "I16", 3, {8, 8, 48}, NULL},
  };
  p = write_file("short_svh.safetensors", short_svh, 3, "\"codebook\":\"mcg\"");
  expect_open(p, TRELLIS_ERR_SHAPE, "qsrt_svh has 64 elements", NULL);
  free(p);
  const mk_tensor both[] = {
      {".qsrt_pair", "I16", 1, {6144}, NULL},
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_svh", "F16", 1, {128}, ones},
      {".qsrt_trellis", "I16", 3, {8, 8, 48}, NULL},
  };
  p = write_file("both.safetensors", both, 4, "\"codebook\":\"mcg\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "has both", NULL);
  free(p);
}

/* A pair on axis n (k = 128, n = 256) with payload of `words` words. */
static char *pair_file(const char *file, int64_t words, int64_t n,
                       const uint16_t *suh, const uint16_t *svh,
                       const char *meta) {
  const mk_tensor ts[] = {
      {".qsrt_pair", "I16", 1, {words}, NULL},
      {".qsrt_suh", "F16", 1, {128}, suh},
      {".qsrt_svh", "F16", 1, {n}, svh},
  };
  return write_file(file, ts, 3, meta);
}

static void test_bad_pairs(void **state) {
  (void)state;
  init_scales();
  static const char p24n[] =
      "\"codebook\":\"sqg_e4m3\",\"pair_kind\":\"P24\",\"rate_axis\":\"n\"";
  char *p = pair_file("ok.safetensors", 6144, 256, ones, ones, p24n);
  expect_open(p, TRELLIS_OK, NULL, NULL);
  free(p);
  /* payload length: (128/16)*128*(2+4) = 6144 words exactly */
  p = pair_file("short.safetensors", 6143, 256, ones, ones, p24n);
  expect_open(p, TRELLIS_ERR_SHAPE, "qsrt_pair has shape [6143]", "[6144]");
  free(p);
  p = pair_file("long.safetensors", 6145, 256, ones, ones, p24n);
  expect_open(p, TRELLIS_ERR_SHAPE, "[6144]", NULL);
  free(p);
  p = pair_file("p43len.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"sqg_e4m3\",\"pair_kind\":\"P43\","
                "\"rate_axis\":\"n\"");
  expect_open(p, TRELLIS_ERR_SHAPE, "P43", "(4+3)");
  free(p);
  /* the rate axis is 256 channels */
  p = pair_file("rate.safetensors", 6144, 384, ones, ones, p24n);
  expect_open(p, TRELLIS_ERR_SHAPE, "qsrt_svh has 384 elements",
              "expected 256");
  free(p);
  /* kind, axis, codebook */
  p = pair_file("kind.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"mcg\",\"pair_kind\":\"P55\","
                "\"rate_axis\":\"n\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "pair_kind 'P55'", NULL);
  free(p);
  p = pair_file("nokind.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"mcg\",\"rate_axis\":\"n\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "pair_kind (absent)", NULL);
  free(p);
  p = pair_file("axis.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"mcg\",\"pair_kind\":\"P24\","
                "\"rate_axis\":\"x\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "rate_axis 'x'", NULL);
  free(p);
  p = pair_file("fp16.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"sqg_fp16\",\"pair_kind\":\"P24\","
                "\"rate_axis\":\"n\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "(mcg, sqg_e4m3)", "sqg_fp16");
  free(p);
  /* non-finite scales: +inf, -inf, NaN in suh or svh */
  const uint16_t bad[3] = {0x7C00, 0xFC00, 0x7E01};
  for (int i = 0; i < 3; i++) {
    scale_inf[100] = bad[i];
    p = pair_file("inf_suh.safetensors", 6144, 256, scale_inf, ones, p24n);
    expect_open(p, TRELLIS_ERR_FORMAT, "qsrt_suh[100]", "not finite");
    free(p);
    p = pair_file("inf_svh.safetensors", 6144, 256, ones, scale_inf, p24n);
    expect_open(p, TRELLIS_ERR_FORMAT, "qsrt_svh[100]", "not finite");
    free(p);
  }
  /* a __metadata__ bits is the pair's bits per weight, (K0 + K1) / 2, as
   * a uniform layer's is its K: a lying one is refused */
  p = pair_file("bits_lie.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"sqg_e4m3\",\"pair_kind\":\"P24\","
                "\"rate_axis\":\"n\",\"bits\":\"4\"");
  expect_open(p, TRELLIS_ERR_FORMAT, "__metadata__ bits '4'",
              "pair P24 has 3 bits per weight, (2 + 4) / 2");
  free(p);
  static const char *const p24_bits_ok[] = {"3", "3.0"};
  for (int i = 0; i < 2; i++) {
    char meta[160];
    snprintf(meta, sizeof meta, "%s,\"bits\":\"%s\"", p24n, p24_bits_ok[i]);
    p = pair_file("bits_ok.safetensors", 6144, 256, ones, ones, meta);
    expect_open(p, TRELLIS_OK, NULL, NULL);
    free(p);
  }
  static const char *const p43_bits_bad[] = {"3",    "4",  "3.55", "3.5x", "",
                                             " 3.5", "3.", ".5",   "35e-1"};
  for (size_t i = 0; i < sizeof p43_bits_bad / sizeof *p43_bits_bad; i++) {
    char meta[160];
    snprintf(meta, sizeof meta,
             "\"codebook\":\"mcg\",\"pair_kind\":\"P43\",\"rate_axis\":"
             "\"n\",\"bits\":\"%s\"",
             p43_bits_bad[i]);
    p = pair_file("p43_bits.safetensors", 7168, 256, ones, ones, meta);
    expect_open(p, TRELLIS_ERR_FORMAT, "pair P43 has 3.5 bits per weight",
                NULL);
    free(p);
  }
  p = pair_file("p43_bits.safetensors", 7168, 256, ones, ones,
                "\"codebook\":\"mcg\",\"pair_kind\":\"P43\","
                "\"rate_axis\":\"n\",\"bits\":\"3.5\"");
  expect_open(p, TRELLIS_OK, NULL, NULL);
  free(p);
  /* case-insensitive names */
  p = pair_file("case.safetensors", 6144, 256, ones, ones,
                "\"codebook\":\"MCG\",\"pair_kind\":\"p24\","
                "\"rate_axis\":\"N\"");
  expect_open(p, TRELLIS_OK, NULL, NULL);
  free(p);
}

/* FORMAT.md §9.7: a b12x_qsrt model directory takes its codebook from
 * config.json; the rank-16 correction stays an "other" tensor. */
static void test_research_container(void **state) {
  (void)state;
  init_scales();
  const mk_tensor ts[] = {
      {".qsrt_a", "BF16", 2, {128, 16}, NULL},
      {".qsrt_b", "BF16", 2, {128, 16}, NULL},
      {".qsrt_suh", "F16", 1, {128}, ones},
      {".qsrt_svh", "F16", 1, {128}, ones},
      {".qsrt_trellis", "I16", 3, {8, 8, 80}, NULL},
  };
  char *dir = tu_tmp_path("qwen");
  assert_int_equal(mkdir(dir, 0700), 0);
  char *file = write_file("qwen/model.safetensors", ts, 5, NULL);
  char *config = tu_tmp_path("qwen/config.json");
  static const char good[] =
      "{\"quantization_config\":{\"quant_method\":\"b12x_qsrt\",\"format\":"
      "\"qwen38_dense_mlp_qsrt_k5_rank16\",\"bits\":5,\"codebook\":\"sqg_"
      "fp16\",\"descriptor_sha256\":\"" TRL_SQG_D3L_SHA256 "\",\"rank\":"
      "16}}";
  tu_write_file(config, good, strlen(good));
  trellis_model *m;
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 1);
  trellis_layer l;
  tu_assert_status(trellis_model_layer(m, 0, &l), TRELLIS_OK);
  assert_int_equal(l.weight.codebook, TRELLIS_CB_SQG_FP16);
  assert_int_equal(l.weight.bits, 5);
  assert_int_equal(trellis_model_other_count(m), 2);
  assert_string_equal(trellis_model_quant_config(m)->descriptor_sha256,
                      TRL_SQG_D3L_SHA256);
  trellis_model_close(m);
  static char out[8192];
  char args[512];
  snprintf(args, sizeof args, "info '%s'", dir);
  assert_int_equal(run_cli(args, out, sizeof out), 0);
  assert_non_null(strstr(out, "rank-16 correction"));
  assert_non_null(strstr(out, "b12x_qsrt"));

  /* The same layer as a sharded model: opened by its directory or by its
   * index, config.json beside the index is read (by the index path it was
   * not, so the layer had no codebook). */
  char *sdir = tu_tmp_path("qwen-sharded");
  assert_int_equal(mkdir(sdir, 0700), 0);
  char *shard =
      write_file("qwen-sharded/model-00001-of-00001.safetensors", ts, 5, NULL);
  char *sconfig = tu_tmp_path("qwen-sharded/config.json");
  tu_write_file(sconfig, good, strlen(good));
  char *index = tu_tmp_path("qwen-sharded/model.safetensors.index.json");
  char text[1024];
  size_t used = (size_t)snprintf(text, sizeof text, "{\"weight_map\":{");
  static const char *const sfx[] = {"qsrt_a", "qsrt_b", "qsrt_suh", "qsrt_svh",
                                    "qsrt_trellis"};
  for (int i = 0; i < 5; i++)
    used += (size_t)snprintf(text + used, sizeof text - used,
                             "%s\"model.layers.0.mlp.proj.%s\":\"model-00001-"
                             "of-00001.safetensors\"",
                             i ? "," : "", sfx[i]);
  used += (size_t)snprintf(text + used, sizeof text - used, "}}");
  tu_write_file(index, text, used);
  const char *const ways[] = {sdir, index};
  for (int i = 0; i < 2; i++) {
    tu_assert_status(trellis_model_open(ways[i], &m), TRELLIS_OK);
    tu_assert_status(trellis_model_layer(m, 0, &l), TRELLIS_OK);
    assert_int_equal(l.weight.codebook, TRELLIS_CB_SQG_FP16);
    assert_true(trellis_model_quant_config(m)->present);
    /* the files read: the shard, the index, config.json */
    assert_non_null(trellis_model_file_path(m, 2));
    assert_non_null(strstr(trellis_model_file_path(m, 2), "config.json"));
    trellis_model_close(m);
  }
  free(index);
  free(sconfig);
  free(shard);
  free(sdir);

  static const char other_table[] =
      "{\"quantization_config\":{\"quant_method\":\"b12x_qsrt\",\"codebook\":"
      "\"sqg_fp16\",\"descriptor_sha256\":"
      "\"00112233445566778899aabbccddeeff0011"
      "2233445566778899aabbccddeeff\"}}";
  tu_write_file(config, other_table, strlen(other_table));
  expect_open(dir, TRELLIS_ERR_UNSUPPORTED, "descriptor_sha256", NULL);
  /* without a b12x_qsrt config there is no codebook */
  static const char exl3[] = "{\"quantization_config\":{\"quant_method\":"
                             "\"exl3\",\"codebook\":\"sqg_fp16\"}}";
  tu_write_file(config, exl3, strlen(exl3));
  expect_open(dir, TRELLIS_ERR_FORMAT, "no codebook", NULL);
  free(dir);
  free(file);
  free(config);
}

int main(void) {
  ncases = tv_load_b12x_manifest(&cases);
  static const struct {
    const char *suffix;
    CMUnitTestFunction fn;
  } checks[] = {{"layer", test_layer},
                {"w_hat bit-exact", test_w_hat},
                {"misaligned", test_misaligned},
                {"w_dense", test_w_dense},
                {"cpu forward", test_cpu_forward}};
  const size_t nchecks = sizeof checks / sizeof *checks;
  const struct CMUnitTest fixed[] = {
      cmocka_unit_test(test_cli_info),
      cmocka_unit_test(test_cli_decode_forward),
      cmocka_unit_test(test_bad_uniform),
      cmocka_unit_test(test_bad_pairs),
      cmocka_unit_test(test_research_container),
  };
  const size_t nfixed = sizeof fixed / sizeof *fixed;
  const size_t ntests = ncases * nchecks + nfixed;
  struct CMUnitTest *tests = calloc(ntests, sizeof *tests);
  char(*names)[160] = calloc(ntests, sizeof *names);
  if (!tests || !names)
    return 1;
  for (size_t i = 0; i < ncases; i++)
    for (size_t j = 0; j < nchecks; j++) {
      const size_t k = i * nchecks + j;
      snprintf(names[k], sizeof names[k], "%s: %s", cases[i].base.name,
               checks[j].suffix);
      tests[k].name = names[k];
      tests[k].test_func = checks[j].fn;
      tests[k].initial_state = &cases[i];
    }
  memcpy(tests + ncases * nchecks, fixed, sizeof fixed);
  const int failed =
      _cmocka_run_group_tests("test_b12x_vectors", tests, ntests, NULL, NULL);
  free(tests);
  free(names);
  free(cases);
  return failed;
}
