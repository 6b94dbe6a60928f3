/* SPDX-License-Identifier: Apache-2.0 */
/* The `trellis` CLI end to end (fork/exec of TRELLIS_CLI_PATH, files in a
 * temporary directory):
 *   - `decode` of every test-vector case is w_hat bit for bit; `--dense` is
 *     w_dense within tolerance;
 *   - `forward --device cpu` of every case matches y (fp32 out), and with
 *     `--out-dtype f16`; a 1-D input [k] gives a 1-D output [n];
 *   - `--output -` writes the same .npy to stdout;
 *   - `info` on the toy model directory lists its 14 EXL3 layers and counts
 *     the norm tensors as other tensors;
 *   - `demo` exits 0 and reports PASS (on a GPU: the fused path at m = 1 and
 *     the generic path at m = 129);
 *   - `--version` and `help`. */
#include "testutil.h"

#include "tools/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 2e-3

static tv_case *cases;
static size_t ncases;

/* ------------------------------------------------------------ running -- */

/* Runs TRELLIS_CLI_PATH with `args` (NULL-terminated, without argv[0]). */
static tu_run_result run_cli(const char *const *args) {
  return tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
}

static void expect_success(const char *what, tu_run_result *r) {
  if (r->code != 0)
    fail_msg("%s: exit %d, stderr: %s", what, r->code, r->err);
}

/* Reads a .npy file the CLI wrote and checks its dtype and shape. */
static void read_npy(const char *path, trellis_dtype dtype, int ndim,
                     const int64_t *shape, npy_array *out) {
  tu_assert_status(npy_read(path, out), TRELLIS_OK);
  assert_int_equal(out->dtype, dtype);
  assert_int_equal(out->ndim, ndim);
  for (int i = 0; i < ndim; i++)
    assert_int_equal(out->shape[i], shape[i]);
}

static void check_close(const char *what, const char *name, const float *got,
                        const float *ref, size_t count) {
  double rel = tu_rel_l2(got, ref, count);
  double maxd = tu_max_abs_diff(got, ref, count);
  double maxr = tu_max_abs(ref, count);
  if (!tu_all_finite(got, count) || !(rel <= TOL) || !(maxd <= TOL * maxr))
    fail_msg("%s %s: rel_l2 %.3e, max|d| %.3e vs %.3e allowed", name, what, rel,
             maxd, TOL * maxr);
}

static char *case_path(const tv_case *c) {
  char stem[160];
  snprintf(stem, sizeof stem, "%s.safetensors", c->name);
  return tu_tv_path(stem);
}

/* -------------------------------------------------------------- decode -- */

static void test_decode_every_case(void **state) {
  (void)state;
  char *out = tu_tmp_path("w.npy");
  for (size_t i = 0; i < ncases; i++) {
    const tv_case *c = &cases[i];
    tv_loaded t;
    tv_open(c, &t);
    char *path = case_path(c);
    const char *args[] = {"decode", path, c->layer, "--output", out, NULL};
    tu_run_result r = run_cli(args);
    expect_success(c->name, &r);
    npy_array w;
    int64_t shape[2] = {c->k, c->n};
    read_npy(out, TRELLIS_F16, 2, shape, &w);
    assert_int_equal(w.nbytes, t.w_hat.nbytes);
    if (memcmp(w.data, t.w_hat.data, w.nbytes) != 0)
      fail_msg("%s: trellis decode differs from w_hat", c->name);
    npy_free(&w);
    tu_run_free(&r);
    free(path);
    tv_close(&t);
  }
  free(out);
}

static void test_decode_dense_every_case(void **state) {
  (void)state;
  char *out = tu_tmp_path("wd.npy");
  for (size_t i = 0; i < ncases; i++) {
    const tv_case *c = &cases[i];
    tv_loaded t;
    tv_open(c, &t);
    char *path = case_path(c);
    const char *args[] = {"decode",   path, c->layer, "--dense",
                          "--output", out,  NULL};
    tu_run_result r = run_cli(args);
    expect_success(c->name, &r);
    npy_array w;
    int64_t shape[2] = {c->k, c->n};
    read_npy(out, TRELLIS_F32, 2, shape, &w);
    size_t count = (size_t)c->k * (size_t)c->n;
    float *ref = malloc(count * sizeof *ref);
    assert_non_null(ref);
    memcpy(ref, t.w_dense.data, count * sizeof *ref);
    check_close("decode --dense", c->name, w.data, ref, count);
    free(ref);
    npy_free(&w);
    tu_run_free(&r);
    free(path);
    tv_close(&t);
  }
  free(out);
}

/* ------------------------------------------------------------- forward -- */

/* Runs `forward --device DEVICE` on rows [0, m) of the case's x, written
 * with `ndim` dims, and compares Y (dtype ydt) with the reference rows. */
static void forward_case(const tv_case *c, int64_t m, int ndim,
                         trellis_dtype ydt, const char *device) {
  tv_loaded t;
  tv_open(c, &t);
  char *path = case_path(c);
  char *xin = tu_tmp_path("x.npy"), *yout = tu_tmp_path("y.npy");
  int64_t xshape[2] = {m, c->k};
  tu_assert_status(npy_write(xin, TRELLIS_F16, ndim,
                             ndim == 1 ? &xshape[1] : xshape, t.x.data),
                   TRELLIS_OK);
  const char *args[] = {"forward",
                        path,
                        c->layer,
                        "--device",
                        device,
                        "--input",
                        xin,
                        "--output",
                        yout,
                        "--out-dtype",
                        ydt == TRELLIS_F16 ? "f16" : "f32",
                        NULL};
  tu_run_result r = run_cli(args);
  expect_success(c->name, &r);
  /* The CLI says where it ran: "device: cpu ..." or "device: cuda ...". */
  char where[32];
  snprintf(where, sizeof where, "device: %s", device);
  if (strstr(r.err, where) == NULL || strstr(r.err, "path: ") == NULL)
    fail_msg("%s: forward did not report '%s' and its path: %s", c->name, where,
             r.err);
  npy_array y;
  int64_t yshape[2] = {m, c->n};
  read_npy(yout, ydt, ndim, ndim == 1 ? &yshape[1] : yshape, &y);
  size_t count = (size_t)m * (size_t)c->n;
  float *got = malloc(count * sizeof *got), *ref = malloc(count * 4);
  assert_true(got && ref);
  if (ydt == TRELLIS_F16)
    tu_f16_to_f32(y.data, got, count);
  else
    memcpy(got, y.data, count * 4);
  memcpy(ref, t.y.data, count * 4);
  check_close(ydt == TRELLIS_F16 ? "forward --out-dtype f16" : "forward",
              c->name, got, ref, count);
  free(got);
  free(ref);
  npy_free(&y);
  tu_run_free(&r);
  free(xin);
  free(yout);
  free(path);
  tv_close(&t);
}

static void test_forward_every_case(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    forward_case(&cases[i], cases[i].m, 2, TRELLIS_F32, "cpu");
}

static void test_forward_f16_output(void **state) {
  (void)state;
  for (size_t i = 0; i < ncases; i++)
    forward_case(&cases[i], cases[i].m, 2, TRELLIS_F16, "cpu");
}

/* On a GPU machine: `--device cuda` for every case, fp32 and fp16 out. */
static void test_forward_cuda_every_case(void **state) {
  (void)state;
  if (!tu_gpu_available()) {
    print_message("no CUDA device: --device cuda is covered by cli_errors\n");
    skip();
  }
  for (size_t i = 0; i < ncases; i++) {
    forward_case(&cases[i], cases[i].m, 2, TRELLIS_F32, "cuda");
    forward_case(&cases[i], cases[i].m, 2, TRELLIS_F16, "cuda");
  }
}

static void test_forward_1d_input(void **state) {
  (void)state;
  /* Row 0 of a few cases as X [k]: Y must be [n] and match y[0]. */
  for (size_t i = 0; i < ncases; i += 5)
    forward_case(&cases[i], 1, 1, TRELLIS_F32, "cpu");
}

/* `--output -`: decode and forward write the same .npy bytes to stdout
 * as to a file (stdout is the file tu_run_tool left, run.stdout), their
 * reports stay on stderr, and an error leaves stdout empty. */
static void expect_stdout_is(const char *what, const char *file) {
  char *out = tu_tmp_path("run.stdout");
  size_t a = 0, b = 0;
  uint8_t *got = tu_read_file(out, &a), *want = tu_read_file(file, &b);
  if (a != b || memcmp(got, want, a) != 0)
    fail_msg("%s --output -: %zu bytes on stdout, the file has %zu%s", what, a,
             b, a == b ? " (they differ)" : "");
  free(got);
  free(want);
  free(out);
}

static void test_output_stdout(void **state) {
  (void)state;
  const tv_case *c = &cases[0];
  char *path = case_path(c);
  char *w = tu_tmp_path("w_file.npy"), *x = tu_tmp_path("x_stdout.npy"),
       *y = tu_tmp_path("y_file.npy");
  const char *file_args[] = {"decode", path, c->layer, "--output", w, NULL};
  tu_run_result r = run_cli(file_args);
  expect_success("decode", &r);
  tu_run_free(&r);
  const char *args[] = {"decode", path, c->layer, "--output", "-", NULL};
  r = run_cli(args);
  expect_success("decode --output -", &r);
  assert_string_equal(r.err, "");
  expect_stdout_is("decode", w);
  tu_run_free(&r);

  tv_loaded t;
  tv_open(c, &t);
  int64_t xshape[2] = {c->m, c->k};
  tu_assert_status(npy_write(x, TRELLIS_F16, 2, xshape, t.x.data), TRELLIS_OK);
  tv_close(&t);
  const char *ff[] = {"forward", path, c->layer,   "--device", "cpu",
                      "--input", x,    "--output", y,          NULL};
  r = run_cli(ff);
  expect_success("forward", &r);
  tu_run_free(&r);
  const char *fs[] = {"forward", path, c->layer,   "--device", "cpu",
                      "--input", x,    "--output", "-",        NULL};
  r = run_cli(fs);
  expect_success("forward --output -", &r);
  assert_non_null(strstr(r.err, "device: cpu")); /* the report: stderr */
  expect_stdout_is("forward", y);
  tu_run_free(&r);

  /* an error: one line on stderr, nothing on stdout, exit 1 */
  const char *bad[] = {"forward", path, c->layer,   "--device", "cpu",
                       "--input", w,    "--output", "-",        NULL};
  r = run_cli(bad);
  assert_int_equal(r.code, 1);
  assert_string_equal(r.out, "");
  assert_non_null(strstr(r.err, "w_file.npy"));
  tu_run_free(&r);
  free(path);
  free(w);
  free(x);
  free(y);
}

/* ---------------------------------------------------------------- info -- */

static void test_info_toy_model(void **state) {
  (void)state;
  static const char *const projs[] = {"self_attn.q_proj", "self_attn.k_proj",
                                      "self_attn.v_proj", "self_attn.o_proj",
                                      "mlp.gate_proj",    "mlp.up_proj",
                                      "mlp.down_proj"};
  const char *args[] = {"info", TU_TOY_MODEL, NULL};
  tu_run_result r = run_cli(args);
  expect_success("info toy model", &r);
  for (int layer = 0; layer < 2; layer++)
    for (size_t p = 0; p < sizeof projs / sizeof projs[0]; p++) {
      char name[96];
      snprintf(name, sizeof name, "model.layers.%d.%s ", layer, projs[p]);
      if (strstr(r.out, name) == NULL)
        fail_msg("info does not list %s:\n%s", name, r.out);
    }
  assert_non_null(strstr(r.out, "14 EXL3 layers"));
  assert_non_null(strstr(r.out, "2 other tensors"));
  assert_null(strstr(r.out, "input_layernorm"));
  assert_non_null(strstr(r.out, "exl3")); /* the quantization_config */
  assert_non_null(strstr(r.out, "mcg"));
  tu_run_free(&r);
}

static void test_info_single_file(void **state) {
  (void)state;
  char *path = case_path(&cases[0]);
  const char *args[] = {"info", path, NULL};
  tu_run_result r = run_cli(args);
  expect_success("info file", &r);
  assert_non_null(strstr(r.out, cases[0].layer));
  assert_non_null(strstr(r.out, "1 EXL3 layer,"));
  tu_run_free(&r);
  free(path);
}

/* ---------------------------------------------------------------- demo -- */

static void test_demo(void **state) {
  (void)state;
  const char *args[] = {"demo", NULL};
  tu_run_result r = run_cli(args);
  print_message("trellis demo took %.1f s:\n%s", r.secs, r.out);
  expect_success("demo", &r);
  assert_non_null(strstr(r.out, "result: PASS"));
  if (tu_gpu_available()) {
    if (!strstr(r.out, "m=1    path fused") ||
        !strstr(r.out, "m=129  path generic"))
      fail_msg("demo on a GPU must show the fused path at m=1 and the "
               "generic path at m=129");
  } else {
    assert_non_null(strstr(r.out, "device: cpu"));
    if (r.secs >= 30.0) /* the demo must stay quick on a plain CPU */
      fail_msg("trellis demo took %.1f s on the CPU (limit 30 s)", r.secs);
  }
  tu_run_free(&r);
}

static void test_version_and_help(void **state) {
  (void)state;
  const char *v[] = {"--version", NULL};
  tu_run_result r = run_cli(v);
  expect_success("--version", &r);
  assert_non_null(strstr(r.out, TRELLIS_VERSION_STRING));
  tu_run_free(&r);
  const char *h[] = {"help", NULL};
  r = run_cli(h);
  expect_success("help", &r);
  assert_non_null(strstr(r.out, "forward"));
  tu_run_free(&r);
  const char *fh[] = {"forward", "--help", NULL};
  r = run_cli(fh);
  expect_success("forward --help", &r);
  assert_non_null(strstr(r.out, "--out-dtype"));
  tu_run_free(&r);
  const char *hf[] = {"help", "forward", NULL}; /* the same text */
  tu_run_result r2 = run_cli(hf);
  expect_success("help forward", &r2);
  r = run_cli(fh);
  assert_string_equal(r2.out, r.out);
  tu_run_free(&r);
  tu_run_free(&r2);
}

int main(void) {
  ncases = tv_load_manifest(&cases);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version_and_help),
      cmocka_unit_test(test_decode_every_case),
      cmocka_unit_test(test_decode_dense_every_case),
      cmocka_unit_test(test_forward_every_case),
      cmocka_unit_test(test_forward_f16_output),
      cmocka_unit_test(test_forward_1d_input),
      cmocka_unit_test(test_forward_cuda_every_case),
      cmocka_unit_test(test_output_stdout),
      cmocka_unit_test(test_info_toy_model),
      cmocka_unit_test(test_info_single_file),
      cmocka_unit_test(test_demo),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  free(cases);
  return failed;
}
