/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis forward --tp N --rank R --split n|k` and `trellis info --tp N`
 * end to end, on a model of two 640 x 512 and 512 x 640 layers with bias:
 *   - split n: the ranks' outputs, side by side, are the unsharded output
 *     bit for bit (CPU);
 *   - split k: the ranks' partials sum to it (§7.2's 2e-3, and 1e-5), the
 *     bias on rank 0 only; X as [m, k] or as the rank's [m, k_R] alike;
 *   - on a GPU the same with --device cuda against the CPU output (2e-3);
 *   - info --tp: each rank's bytes are those of the library's shards. */
#include "testutil.h"

#include "tools/npy.h"
#include "tools/synth.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 3
#define DOWN "model.layers.0.mlp.down_proj" /* 640 x 512: split k */
#define UP "model.layers.0.mlp.up_proj"     /* 512 x 640: split n */

static char *model_path;
static synth_layer down, up;

static void *checked_malloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  return p;
}

static void add_layer(tu_st_tensor *t, const char *name, const synth_layer *l,
                      char names[][96]) {
  static const uint32_t marker = 0xCBAC1FEDu;
  snprintf(names[0], 96, "%s.trellis", name);
  snprintf(names[1], 96, "%s.suh", name);
  snprintf(names[2], 96, "%s.svh", name);
  snprintf(names[3], 96, "%s.bias", name);
  snprintf(names[4], 96, "%s.mcg", name);
  const int64_t k = l->w.k, n = l->w.n;
  t[0] = (tu_st_tensor){names[0],   "I16",
                        3,          {k / 16, n / 16, 16 * l->w.bits},
                        l->trellis, trellis_weight_payload_bytes(&l->w)};
  t[1] = (tu_st_tensor){names[1], "F16", 1, {k}, l->suh, (size_t)k * 2};
  t[2] = (tu_st_tensor){names[2], "F16", 1, {n}, l->svh, (size_t)n * 2};
  t[3] = (tu_st_tensor){names[3], "F16", 1, {n}, l->bias, (size_t)n * 2};
  t[4] = (tu_st_tensor){names[4], "I32", 0, {0}, &marker, 4};
}

static int setup(void **state) {
  (void)state;
  tu_assert_status(
      synth_layer_init(&down, 640, 512, 4, TRELLIS_CB_MCG, SYNTH_BIAS, 0xD0u),
      TRELLIS_OK);
  tu_assert_status(
      synth_layer_init(&up, 512, 640, 3, TRELLIS_CB_MCG, SYNTH_BIAS, 0x0Bu),
      TRELLIS_OK);
  tu_st_tensor t[10];
  char names[10][96];
  add_layer(t, DOWN, &down, names);
  add_layer(t + 5, UP, &up, names + 5);
  size_t size;
  uint8_t *image = tu_st_build(t, 10, &size);
  model_path = tu_tmp_path("tp-model.safetensors");
  tu_write_file(model_path, image, size);
  free(image);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  synth_layer_free(&down);
  synth_layer_free(&up);
  free(model_path);
  return 0;
}

/* X: random fp16 [M][k] written to `name`. */
static char *write_x(const char *name, int64_t k, uint64_t seed,
                     uint16_t **data) {
  synth_rng rng;
  synth_seed(&rng, seed);
  *data = checked_malloc((size_t)M * (size_t)k * 2);
  synth_fill_uniform(&rng, *data, TRELLIS_F16, (size_t)M * (size_t)k, -1.0f,
                     1.0f);
  char *path = tu_tmp_path(name);
  const int64_t shape[2] = {M, k};
  tu_assert_status(npy_write(path, TRELLIS_F16, 2, shape, *data), TRELLIS_OK);
  return path;
}

/* `forward` of `layer` (with --tp N --rank R --split S when ranks > 0);
 * Y as fp32 [M][*n], malloc'd; *err gets stderr (malloc'd, may be NULL). */
static float *forward(const char *layer, const char *x, const char *device,
                      int ranks, int rank, const char *split, int64_t *n,
                      char **err) {
  char *y = tu_tmp_path("tp-y.npy");
  char tp[16], rk[16];
  snprintf(tp, sizeof tp, "%d", ranks);
  snprintf(rk, sizeof rk, "%d", rank);
  const char *args[] = {"forward", model_path, layer, "--device",
                        device,    "--input",  x,     "--output",
                        y,         "--tp",     tp,    "--rank",
                        rk,        "--split",  split, NULL};
  if (ranks == 0)
    args[9] = NULL;
  tu_run_result r = tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
  if (r.code != 0)
    fail_msg("forward %s --tp %s --rank %s --split %s: exit %d: %s", layer, tp,
             rk, split, r.code, r.err);
  if (ranks > 0) {
    char says[64];
    snprintf(says, sizeof says, "shard: rank %d of %d, split %s", rank, ranks,
             split);
    if (strstr(r.err, says) == NULL)
      fail_msg("forward --tp does not say '%s': %s", says, r.err);
  }
  if (err)
    *err = strdup(r.err);
  tu_run_free(&r);
  npy_array a;
  tu_assert_status(npy_read(y, &a), TRELLIS_OK);
  assert_int_equal(a.dtype, TRELLIS_F32);
  assert_int_equal(a.ndim, 2);
  assert_int_equal(a.shape[0], M);
  *n = a.shape[1];
  float *out = checked_malloc(a.nbytes);
  memcpy(out, a.data, a.nbytes);
  npy_free(&a);
  free(y);
  return out;
}

/* Column slices side by side: the full output bit for bit on the CPU,
 * within 2e-3 of it on a GPU. */
static void check_columns(const char *device, const float *full, int64_t n) {
  char *x = NULL;
  uint16_t *xd;
  x = write_x("tp-x-up.npy", 512, 11, &xd);
  for (int ranks = 2; ranks <= 4; ranks++) {
    float *joined = checked_malloc((size_t)M * (size_t)n * 4);
    int64_t at = 0;
    for (int rank = 0; rank < ranks; rank++) {
      int64_t width;
      float *y = forward(UP, x, device, ranks, rank, "n", &width, NULL);
      for (int row = 0; row < M; row++)
        memcpy(joined + (size_t)row * (size_t)n + (size_t)at,
               y + (size_t)row * (size_t)width, (size_t)width * 4);
      at += width;
      free(y);
    }
    assert_int_equal(at, n);
    if (strcmp(device, "cpu") == 0) {
      if (memcmp(joined, full, (size_t)M * (size_t)n * 4) != 0)
        fail_msg("%d column ranks: not the unsharded output bit for bit",
                 ranks);
    } else {
      tu_assert_close("up_proj", "column ranks on cuda", joined, full,
                      (size_t)M * (size_t)n, 2e-3);
    }
    free(joined);
  }
  free(xd);
  free(x);
}

static void check_rows(const char *device, const float *full, int64_t n,
                       double tight) {
  uint16_t *xd;
  char *x = write_x("tp-x-down.npy", 640, 12, &xd);
  for (int ranks = 2; ranks <= 4; ranks++) {
    double *sum = calloc((size_t)M * (size_t)n, sizeof *sum);
    assert_non_null(sum);
    for (int rank = 0; rank < ranks; rank++) {
      int64_t width;
      char *err = NULL;
      float *y = forward(DOWN, x, device, ranks, rank, "k", &width, &err);
      assert_int_equal(width, n);
      if (strstr(err, rank == 0 ? "a partial with the bias"
                                : "a partial without the bias") == NULL)
        fail_msg("rank %d does not say where the bias goes: %s", rank, err);
      free(err);
      for (size_t i = 0; i < (size_t)M * (size_t)n; i++)
        sum[i] += y[i];
      free(y);
    }
    float *total = checked_malloc((size_t)M * (size_t)n * 4);
    for (size_t i = 0; i < (size_t)M * (size_t)n; i++)
      total[i] = (float)sum[i];
    tu_assert_close("down_proj", "row partials", total, full,
                    (size_t)M * (size_t)n, 2e-3);
    const double rel = tu_rel_l2(total, full, (size_t)M * (size_t)n);
    if (rel > tight)
      fail_msg("%d row ranks on %s: %.3g from the full output (> %.1g)", ranks,
               device, rel, tight);
    free(total);
    free(sum);
  }
  free(xd);
  free(x);
}

static void test_forward_cpu(void **state) {
  (void)state;
  uint16_t *xd;
  char *x = write_x("tp-x-up.npy", 512, 11, &xd);
  int64_t n;
  float *full = forward(UP, x, "cpu", 0, 0, "n", &n, NULL);
  assert_int_equal(n, 640);
  check_columns("cpu", full, n);
  free(full);
  free(xd);
  free(x);

  x = write_x("tp-x-down.npy", 640, 12, &xd);
  full = forward(DOWN, x, "cpu", 0, 0, "k", &n, NULL);
  assert_int_equal(n, 512);
  check_rows("cpu", full, n, 1e-5);
  free(full);
  free(x);

  /* X already cut to the rank's inputs: the same partial */
  const trellis_shard_desc d = {sizeof d, TRELLIS_SPLIT_K, 3, 1, NULL};
  int64_t b, e;
  tu_assert_status(trellis_shard_range(640, &d, &b, &e), TRELLIS_OK);
  uint16_t *cut = checked_malloc((size_t)M * (size_t)(e - b) * 2);
  for (int row = 0; row < M; row++)
    memcpy(cut + (size_t)row * (size_t)(e - b), xd + (size_t)row * 640 + b,
           (size_t)(e - b) * 2);
  char *xcut = tu_tmp_path("tp-x-cut.npy");
  const int64_t shape[2] = {M, e - b};
  tu_assert_status(npy_write(xcut, TRELLIS_F16, 2, shape, cut), TRELLIS_OK);
  x = tu_tmp_path("tp-x-down.npy");
  int64_t n1, n2;
  float *from_full = forward(DOWN, x, "cpu", 3, 1, "k", &n1, NULL);
  float *from_cut = forward(DOWN, xcut, "cpu", 3, 1, "k", &n2, NULL);
  assert_int_equal(n1, n2);
  assert_memory_equal(from_full, from_cut, (size_t)M * (size_t)n1 * 4);
  free(from_full);
  free(from_cut);
  free(cut);
  free(xcut);
  free(x);
  free(xd);
}

/* The shards' GPU plans against the unsharded CPU output. */
static void test_forward_cuda(void **state) {
  (void)state;
  if (!tu_gpu_available()) {
    print_message("no CUDA device: forward --tp --device cuda not run\n");
    skip();
  }
  uint16_t *xd;
  char *x = write_x("tp-x-up.npy", 512, 11, &xd);
  int64_t n;
  float *full = forward(UP, x, "cpu", 0, 0, "n", &n, NULL);
  check_columns("cuda", full, n);
  free(full);
  free(xd);
  free(x);
  x = write_x("tp-x-down.npy", 640, 12, &xd);
  full = forward(DOWN, x, "cpu", 0, 0, "k", &n, NULL);
  check_rows("cuda", full, n, 2e-3);
  free(full);
  free(xd);
  free(x);
}

/* The bytes of rank `rank`'s shard of `w` as the library cuts it. */
static size_t library_bytes(const trellis_weight *w, trellis_split split,
                            int ranks, int rank) {
  const trellis_shard_desc d = {sizeof d, split, ranks, rank, NULL};
  size_t copy;
  tu_assert_status(trellis_weight_shard_bytes(w, &d, &copy), TRELLIS_OK);
  void *memory = copy ? aligned_alloc(16, copy) : NULL;
  trellis_weight s;
  trellis_weight_init(&s);
  tu_assert_status(trellis_weight_shard(w, &d, memory, copy, &s), TRELLIS_OK);
  const size_t bytes = trellis_weight_payload_bytes(&s) + 2 * (size_t)s.k +
                       2 * (size_t)s.n + (s.bias ? 2 * (size_t)s.n : 0);
  free(memory);
  return bytes;
}

static void test_info(void **state) {
  (void)state;
  for (int ranks = 1; ranks <= 4; ranks++)
    for (int given = 0; given < 3; given++) {
      char tp[16];
      snprintf(tp, sizeof tp, "%d", ranks);
      const char *split = given == 1 ? "n" : "k";
      const char *args[] = {"info",    model_path, "--tp", tp,
                            "--split", split,      NULL};
      if (given == 0)
        args[4] = NULL;
      tu_run_result r = tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
      if (r.code != 0)
        fail_msg("info --tp %s: exit %d: %s", tp, r.code, r.err);
      /* the same with --json (in place of --split when none is given) */
      const char *jargs[] = {"info",    model_path, "--tp",   tp,
                             "--split", split,      "--json", NULL};
      if (given == 0)
        jargs[4] = "--json", jargs[5] = NULL;
      tu_run_result rj = tu_run_tool(TRELLIS_CLI_PATH, jargs, NULL);
      json_error_t jerr;
      json_t *j = rj.code == 0 ? json_loads(rj.out, 0, &jerr) : NULL;
      if (!j)
        fail_msg("info --tp %s --json: exit %d: %s%s", tp, rj.code, rj.err,
                 rj.out);
      assert_int_equal(json_integer_value(json_object_get(j, "ranks")), ranks);
      assert_string_equal(json_string_value(json_object_get(j, "split")),
                          given ? split : "by role");
      json_t *rank_bytes = json_object_get(j, "rank_bytes");
      assert_int_equal(json_array_size(rank_bytes), ranks);
      for (int rank = 0; rank < ranks; rank++) {
        /* by role: down_proj on k, up_proj on n */
        const trellis_split sd = given == 0   ? TRELLIS_SPLIT_K
                                 : given == 1 ? TRELLIS_SPLIT_N
                                              : TRELLIS_SPLIT_K;
        const trellis_split su = given == 0   ? TRELLIS_SPLIT_N
                                 : given == 1 ? TRELLIS_SPLIT_N
                                              : TRELLIS_SPLIT_K;
        const size_t want = library_bytes(&down.w, sd, ranks, rank) +
                            library_bytes(&up.w, su, ranks, rank);
        char line[96];
        snprintf(line, sizeof line, "rank %d: %zu bytes", rank, want);
        if (strstr(r.out, line) == NULL)
          fail_msg("info --tp %d (%s): no '%s' in:\n%s", ranks,
                   given ? split : "by role", line, r.out);
        assert_int_equal(
            json_integer_value(json_array_get(rank_bytes, (size_t)rank)), want);
      }
      json_decref(j);
      tu_run_free(&rj);
      tu_run_free(&r);
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_forward_cpu),
      cmocka_unit_test(test_forward_cuda),
      cmocka_unit_test(test_info),
  };
  return cmocka_run_group_tests_name("cli_tp", tests, setup, teardown);
}
