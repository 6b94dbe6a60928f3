/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-model planning on a GPU: trellis_plans_buffer_sizes and `trellis
 * info --plan`.
 *   - over every layer of the toy model and of synthetic models (mixed K
 *     and codebooks), the helper's sizes at every m up to max_m are the
 *     element-wise maximum of each plan's query, and its path is the one
 *     they share or NONE;
 *   - an all-K6/MCG model (its head too) takes the fused path with zero
 *     workspace at every m <= 128 on sm_90;
 *   - an m outside a plan's range is an error naming the plan;
 *   - `trellis info --plan` lists every layer and provisions what the
 *     helper says (the largest size over every m), zero workspace for the
 *     all-K6/MCG model to m = 128 on sm_90. */
#include "gpu_util.h"
#include "tools/synth_model.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_M 256

/* Every EXL3 layer of a model, uploaded and planned. */
typedef struct planned {
  trellis_model *model;
  size_t count;
  trellis_device_weight **dw;
  trellis_plan **plans;
} planned;

static void plan_model(const char *dir, int64_t max_m, planned *p) {
  memset(p, 0, sizeof *p);
  OK(trellis_model_open(dir, &p->model));
  p->count = trellis_model_layer_count(p->model);
  assert_true(p->count > 0);
  p->dw = calloc(p->count, sizeof *p->dw);
  p->plans = calloc(p->count, sizeof *p->plans);
  assert_true(p->dw && p->plans);
  trellis_plan_desc d =
      gu_desc(max_m, TRELLIS_F16, TRELLIS_F16, 0); /* as info --plan */
  for (size_t i = 0; i < p->count; i++) {
    trellis_layer l;
    OK(trellis_model_layer(p->model, i, &l));
    OK(trellis_weight_upload(&l.weight, &p->dw[i]));
    OK(trellis_plan_create(trellis_device_weight_view(p->dw[i]), &d,
                           &p->plans[i]));
  }
}

static void unplan_model(planned *p) {
  for (size_t i = 0; i < p->count; i++) {
    trellis_plan_destroy(p->plans[i]);
    trellis_device_weight_destroy(p->dw[i]);
  }
  free(p->dw);
  free(p->plans);
  trellis_model_close(p->model);
}

/* The helper against each plan's query at every m; returns the largest
 * sizes over all m (what info --plan provisions). */
static trellis_buffer_sizes check_helper(const planned *p, int64_t max_m) {
  trellis_buffer_sizes all;
  memset(&all, 0, sizeof all);
  for (int64_t m = 1; m <= max_m; m++) {
    trellis_buffer_sizes want, got;
    memset(&want, 0, sizeof want);
    trellis_path path = TRELLIS_PATH_NONE;
    for (size_t i = 0; i < p->count; i++) {
      trellis_buffer_sizes one = {.struct_size = sizeof one};
      OK(trellis_plan_query(p->plans[i], m, &one));
      if (i == 0)
        path = one.path;
      else if (one.path != path)
        path = TRELLIS_PATH_NONE;
#define MAXF(f) want.f = one.f > want.f ? one.f : want.f
      MAXF(rotated_bytes);
      MAXF(input_f16_bytes);
      MAXF(output_f16_bytes);
      MAXF(workspace_bytes);
    }
    OK(trellis_plans_buffer_sizes((const trellis_plan *const *)p->plans,
                                  p->count, m, &got));
    assert_int_equal(got.struct_size, sizeof got);
    assert_int_equal(got.path, path);
    assert_true(got.rotated_bytes == want.rotated_bytes);
    assert_true(got.input_f16_bytes == want.input_f16_bytes);
    assert_true(got.output_f16_bytes == want.output_f16_bytes);
    assert_true(got.workspace_bytes == want.workspace_bytes);
    const trellis_buffer_sizes *one = &got;
    trellis_buffer_sizes *w = &all;
#undef MAXF
#define MAXF(f) w->f = one->f > w->f ? one->f : w->f
    MAXF(rotated_bytes);
    MAXF(input_f16_bytes);
    MAXF(output_f16_bytes);
    MAXF(workspace_bytes);
#undef MAXF
  }
  return all;
}

/* ------------------------------------------------------------ the CLI -- */

/* `trellis ARGS` (NULL-terminated); stdout malloc'd into *out. */
static int run_cli(const char *const *args, char **out) {
  const char *argv[16] = {TRELLIS_CLI_PATH};
  int argc = 1;
  for (; args[argc - 1]; argc++)
    argv[argc] = args[argc - 1];
  argv[argc] = NULL;
  char *path = tu_tmp_path("cli.stdout");
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0)
      _exit(126);
    execv(TRELLIS_CLI_PATH, (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  assert_true(waitpid(pid, &status, 0) == pid);
  size_t size = 0;
  uint8_t *data = tu_read_file(path, &size);
  *out = realloc(data, size + 1);
  assert_non_null(*out);
  (*out)[size] = '\0';
  free(path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* info --plan of `dir` to max_m: every layer listed, and the provision
 * line says `want`. */
static void check_info_plan(const char *dir, const planned *p, int64_t max_m,
                            const trellis_buffer_sizes *want) {
  char max_text[16];
  snprintf(max_text, sizeof max_text, "%lld", (long long)max_m);
  const char *args[] = {"info", dir, "--plan", "--max-m", max_text, NULL};
  char *out = NULL;
  int code = run_cli(args, &out);
  if (code != 0)
    fail_msg("info --plan %s: exit %d\n%s", dir, code, out);
  for (size_t i = 0; i < p->count; i++) {
    trellis_layer_info l;
    OK(trellis_model_layer_info(p->model, i, &l));
    char row[160];
    snprintf(row, sizeof row, "\n%s ", l.name);
    if (!strstr(out, row))
      fail_msg("info --plan does not list %s:\n%s", l.name, out);
  }
  char line[96];
  snprintf(line, sizeof line,
           "provision for every m in 1..%lld:", (long long)max_m);
  const char *at = strstr(out, line);
  if (!at)
    fail_msg("no provision line:\n%s", out);
  size_t rot = 0, in = 0, o = 0, ws = 0;
  assert_int_equal(sscanf(at + strlen(line),
                          " rotated %zu, input_f16 %zu, output_f16 %zu, "
                          "workspace %zu bytes",
                          &rot, &in, &o, &ws),
                   4);
  assert_true(rot == want->rotated_bytes);
  assert_true(in == want->input_f16_bytes);
  assert_true(o == want->output_f16_bytes);
  assert_true(ws == want->workspace_bytes);
  free(out);
}

/* -------------------------------------------------------------- tests -- */

static void test_toy_model(void **state) {
  (void)state;
  planned p;
  plan_model(TU_TOY_MODEL, MAX_M, &p);
  trellis_buffer_sizes all = check_helper(&p, MAX_M);
  /* down_proj (k 512) at m = 128 (fused or generic: rotated m x k fp16;
   * the dense path may fold the rotation into the weight and need none) */
  assert_true(all.rotated_bytes >= (size_t)128 * 512 * 2);
  check_info_plan(TU_TOY_MODEL, &p, MAX_M, &all);
  unplan_model(&p);
}

static void test_mixed_model(void **state) {
  (void)state;
  /* K5 and K6 MCG (fused and generic side by side), a K4 MUL1 one */
  char *dirs[2] = {
      tu_write_synth("mixed-mcg", "glm-tp4", 2, 5.5, 6, TRELLIS_CB_MCG, -1),
      tu_write_synth("mixed-mul1", "llama-3.1-8b", 1, 4.0, 4, TRELLIS_CB_MUL1,
                     -1)};
  for (int d = 0; d < 2; d++) {
    planned p;
    plan_model(dirs[d], MAX_M, &p);
    trellis_buffer_sizes all = check_helper(&p, MAX_M);
    assert_true(all.workspace_bytes > 0); /* the generic and dense paths */
    if (d == 0 && gu_is_hopper()) {
      trellis_buffer_sizes sz;
      OK(trellis_plans_buffer_sizes((const trellis_plan *const *)p.plans,
                                    p.count, 1, &sz));
      assert_int_equal(sz.path, TRELLIS_PATH_NONE); /* fused and generic */
    }
    check_info_plan(dirs[d], &p, MAX_M, &all);
    /* m beyond max_m names the plan */
    trellis_buffer_sizes sz;
    tu_assert_status(
        trellis_plans_buffer_sizes((const trellis_plan *const *)p.plans,
                                   p.count, MAX_M + 1, &sz),
        TRELLIS_ERR_SHAPE);
    tu_assert_error_has("plans[0]");
    unplan_model(&p);
    free(dirs[d]);
  }
}

static void test_k6_mcg_model_needs_no_workspace(void **state) {
  (void)state;
  char *dir = tu_write_synth("k6", "glm-tp4", 2, 6.0, 6, TRELLIS_CB_MCG, -1);
  planned p;
  plan_model(dir, 128, &p);
  trellis_buffer_sizes all = check_helper(&p, 128);
  if (!gu_is_hopper()) {
    print_message("not sm_90: the fused path (and its zero workspace) is "
                  "not available; sizes checked only\n");
  } else {
    for (int64_t m = 1; m <= 128; m++) {
      trellis_buffer_sizes sz;
      OK(trellis_plans_buffer_sizes((const trellis_plan *const *)p.plans,
                                    p.count, m, &sz));
      assert_int_equal(sz.path, TRELLIS_PATH_FUSED);
      assert_true(sz.workspace_bytes == 0);
      assert_true(sz.rotated_bytes > 0);
    }
    assert_true(all.workspace_bytes == 0);
  }
  check_info_plan(dir, &p, 128, &all);
  unplan_model(&p);
  free(dir);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_toy_model),
      cmocka_unit_test(test_mixed_model),
      cmocka_unit_test(test_k6_mcg_model_needs_no_workspace),
  };
  return TU_RUN_TESTS("gpu_model_plan", tests);
}
