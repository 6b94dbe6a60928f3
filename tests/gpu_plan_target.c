/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis info --plan --gpu sms=N,arch=XY` (the plan rules without a GPU,
 * cli/cli_gpu_target.c) against `info --plan` on this GPU, for the
 * same N and XY: every layer's path at every m listed, and its rotated,
 * input_f16 and output_f16 bytes, are the real plans'; so is the
 * workspace of every row off the generic path (dense and fused sizes do
 * not depend on the GPU). A generic row's workspace depends on the
 * decode-GEMM's CTAs per SM, which only the GPU knows (the estimate takes
 * 2): the rows where it differs are counted and printed, not failed. */
#include "gpu_util.h"

/* The "m path rotated in out ws" of every row of the per-layer table. */
typedef struct row {
  long long m, rot, in, out, ws;
  char path[16];
} row;

static size_t table_rows(const char *out, row *rows, size_t cap) {
  const char *at = strstr(out, "\nlayer ");
  assert_non_null(at);
  at = strchr(at + 1, '\n') + 1;
  size_t n = 0;
  while (*at && *at != '\n' && n < cap) {
    const char *end = strchr(at, '\n');
    char line[512], *tok[16];
    int t = 0;
    snprintf(line, sizeof line, "%.*s", (int)(end - at), at);
    for (char *s = NULL, *p = strtok_r(line, " ", &s); p && t < 16;
         p = strtok_r(NULL, " ", &s))
      tok[t++] = p;
    assert_true(t >= 6);
    row *r = &rows[n++];
    r->m = atoll(tok[t - 6]);
    snprintf(r->path, sizeof r->path, "%s", tok[t - 5]);
    r->rot = atoll(tok[t - 4]);
    r->in = atoll(tok[t - 3]);
    r->out = atoll(tok[t - 2]);
    r->ws = atoll(tok[t - 1]);
    at = end + 1;
  }
  return n;
}

static void compare(const char *dir, const char *max_m) {
  int dev = 0, sms = 0, major = 0, minor = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  char target[64];
  snprintf(target, sizeof target, "sms=%d,arch=%d%d", sms, major, minor);
  const char *real_args[] = {"info", dir, "--plan", "--max-m", max_m, NULL};
  const char *rule_args[] = {"info", dir,     "--plan", "--max-m",
                             max_m,  "--gpu", target,   NULL};
  tu_run_result real = tu_run_tool(TRELLIS_CLI_PATH, real_args, NULL);
  tu_run_result rule = tu_run_tool(TRELLIS_CLI_PATH, rule_args, NULL);
  if (real.code != 0 || rule.code != 0)
    fail_msg("info --plan %s: exit %d / --gpu %s: exit %d\n%s%s", dir,
             real.code, target, rule.code, real.err, rule.err);
  static row a[4096], b[4096];
  const size_t na = table_rows(real.out, a, 4096);
  const size_t nb = table_rows(rule.out, b, 4096);
  assert_int_equal(na, nb);
  size_t generic = 0, differ = 0;
  for (size_t i = 0; i < na; i++) {
    if (a[i].m != b[i].m || strcmp(a[i].path, b[i].path) != 0 ||
        a[i].rot != b[i].rot || a[i].in != b[i].in || a[i].out != b[i].out)
      fail_msg("%s row %zu: the GPU's plan says m %lld %s %lld %lld %lld, "
               "the rules for %s m %lld %s %lld %lld %lld",
               dir, i, a[i].m, a[i].path, a[i].rot, a[i].in, a[i].out, target,
               b[i].m, b[i].path, b[i].rot, b[i].in, b[i].out);
    if (strcmp(a[i].path, "generic") == 0) {
      generic++;
      if (a[i].ws != b[i].ws) {
        differ++;
        print_message("%s m %lld generic: workspace %lld on the GPU, %lld "
                      "estimated\n",
                      dir, a[i].m, a[i].ws, b[i].ws);
      }
    } else if (a[i].ws != b[i].ws)
      fail_msg("%s row %zu (m %lld, %s): workspace %lld on the GPU, %lld "
               "from the rules",
               dir, i, a[i].m, a[i].path, a[i].ws, b[i].ws);
  }
  print_message("%s (--gpu %s): %zu rows agree in path and sizes; %zu of "
                "%zu generic rows estimate another workspace\n",
                dir, target, na, differ, generic);
  tu_run_free(&real);
  tu_run_free(&rule);
}

static void test_toy_models(void **state) {
  (void)state;
  compare(TU_TOY_MODEL, "256");
  compare(TU_TOY16_MODEL, "300");
}

static void test_synth_models(void **state) {
  (void)state;
  char *dirs[] = {
      tu_write_synth("target-8b", "llama-3.1-8b", 1, 4.0, 6, TRELLIS_CB_MCG,
                     -1),
      tu_write_synth("target-glm", "glm-tp4", 2, 5.5, 6, TRELLIS_CB_MCG,
                     (int)TRELLIS_CB_MUL1),
  };
  for (size_t i = 0; i < 2; i++) {
    compare(dirs[i], "512");
    free(dirs[i]);
  }
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_toy_models),
      cmocka_unit_test(test_synth_models),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
