/* SPDX-License-Identifier: Apache-2.0 */
/* `info --plan --gpu NAME`: plan sizes without a GPU, from the library's
 * pure rules (rules/decision.h over rules/path.h, rules/gate.h,
 * rules/layout.h, plan/direct_rules.h, rules/kernel_config.h) for a named
 * target, so that buffers can be sized on a build host.
 *
 * It fills the rules' inputs as trellis_plan_create (plan/plan.c) does, for
 * the default plan desc `info --plan` uses (fp16 input, output and compute,
 * no flags, no split_k, the library's own rotations), with the same
 * functions (trl_path_direct_eligible, the dense folds), and reports the
 * decision record that trellis_plan_query reports (trl_decide,
 * trl_decision_sizes), with what only a GPU can say replaced by the defaults
 * the rules assume when it is unknown: the decode-GEMM's CTAs per SM
 * (cudaFuncGetAttributes and the occupancy query; choose_splits assumes 2), the
 * register-direct kernel's registers (0: its launch bounds' cap) and how many
 * of its clusters fit at once (0: no limit known), and a kernel image for the
 * target's arch in the build (the fused path and the register-direct kernel
 * need an sm_90 one). The sizes are therefore estimates: a real plan's
 * k-splits, and so its workspace, can differ (tests/gpu_plan_target.c holds it
 * to real plans on a GPU). */
#include "cli_util.h"

#include "format/codebooks.h"
#include "format/lanes.h"
#include "rules/decision.h"

#include <stdlib.h>
#include <string.h>

/* The targets by name: SM count and compute capability. */
static const struct {
  const char *name;
  int sms, major, minor;
  const char *what;
} targets[] = {
    {"h200", 132, 9, 0, "NVIDIA H200 (SXM)"},
    {"h100", 132, 9, 0, "NVIDIA H100 SXM"},
    {"h100-pcie", 114, 9, 0, "NVIDIA H100 PCIe"},
    {"a100", 108, 8, 0, "NVIDIA A100"},
    {"l40s", 142, 8, 9, "NVIDIA L40S"},
    {"b200", 148, 10, 0, "NVIDIA B200"},
    {"rtx-pro-6000", 188, 12, 0, "NVIDIA RTX PRO 6000 Blackwell"},
};
#define TARGET_COUNT (sizeof targets / sizeof targets[0])

const char *cli_gpu_target_names(void) {
  return "h200, h100, h100-pcie, a100, l40s, b200, rtx-pro-6000, or "
         "sms=N,arch=MAJORMINOR (e.g. sms=132,arch=90)";
}

/* "sms=N,arch=A" in either order; A is 80, 89, 90, 100, 120, ... */
static int parse_custom(const char *text, cli_gpu_target *out) {
  long sms = -1, arch = -1;
  char buf[64];
  if (strlen(text) >= sizeof buf)
    return 0;
  strcpy(buf, text);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    long *dst = strncmp(tok, "sms=", 4) == 0    ? &sms
                : strncmp(tok, "arch=", 5) == 0 ? &arch
                                                : NULL;
    const char *num = tok + (dst == &sms ? 4 : 5);
    char *end = NULL;
    if (!dst || *dst >= 0 || !*num)
      return 0;
    *dst = strtol(num, &end, 10);
    if (*end)
      return 0;
  }
  if (sms < 1 || sms > 4096 || arch < 50 || arch > 1299)
    return 0;
  out->sm_count = (int)sms;
  out->cc_major = (int)(arch / 10);
  out->cc_minor = (int)(arch % 10);
  snprintf(out->name, sizeof out->name, "sms=%ld,arch=%ld", sms, arch);
  snprintf(out->what, sizeof out->what, "a GPU of %ld SMs, sm_%ld", sms, arch);
  return 1;
}

int cli_gpu_target_parse(const char *text, cli_gpu_target *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < TARGET_COUNT; i++)
    if (strcmp(text, targets[i].name) == 0) {
      snprintf(out->name, sizeof out->name, "%s", targets[i].name);
      snprintf(out->what, sizeof out->what, "%s: %d SMs, sm_%d%d",
               targets[i].what, targets[i].sms, targets[i].major,
               targets[i].minor);
      out->sm_count = targets[i].sms;
      out->cc_major = targets[i].major;
      out->cc_minor = targets[i].minor;
      return CLI_OK;
    }
  if (parse_custom(text, out))
    return CLI_OK;
  char shown[256];
  cli_error("--gpu: expected %s, got '%s'", cli_gpu_target_names(),
            cli_escape(text, shown, sizeof shown));
  return CLI_USAGE;
}

struct cli_target_plan {
  trellis_layer_info l;
  int64_t max_m;
  trl_path_plan pp;
  trl_layout_params lp;
};

cli_target_plan *cli_target_plan_make(const cli_gpu_target *t,
                                      const trellis_layer_info *l,
                                      int64_t max_m) {
  cli_target_plan *p = calloc(1, sizeof *p);
  if (!p)
    return NULL;
  p->l = *l;
  p->l.name = NULL; /* borrowed from the model: not kept */
  p->max_m = max_m;
  /* plan_create with the default desc: fp16 input, output and compute, no
   * flags, no split_k, the library's own rotations; an sm_90 device runs
   * an sm_90 image (assumed built) */
  p->pp.k = l->k;
  p->pp.bits = l->bits;
  p->pp.half = l->half;
  p->pp.codebook = l->codebook;
  p->pp.paired = l->pair != TRELLIS_PAIR_NONE;
  p->pp.has_bias = l->has_bias;
  p->pp.input_dtype = p->pp.output_dtype = TRELLIS_F16;
  p->pp.compute_dtype = TRELLIS_F16;
  p->pp.cc_major = t->cc_major;
  p->pp.fused_image = t->cc_major >= 9;
  p->pp.pdl = p->pp.fused_image;
  p->lp.k = l->k;
  p->lp.n = l->n;
  p->lp.sm_count = t->sm_count;
  p->lp.dense_direct = trl_path_dense_direct(&p->pp);
  p->lp.dense_fold_input = trl_path_dense_fold_input(&p->pp);
  p->lp.pair_k =
      l->pair != TRELLIS_PAIR_NONE && l->rate_axis == TRELLIS_RATE_AXIS_K;
  /* ctas_per_sm: 0 (unknown), choose_splits takes 2 */
  /* plan_direct, with registers and active clusters unknown (0) */
  p->lp.codebook = l->codebook;
  p->lp.rate = trl_lanes_rate(l->bits, l->half);
  p->lp.direct = trl_path_direct_eligible(&p->pp);
  p->lp.direct_max_cluster = TRL_DIRECT_MAX_CLUSTER;
  return p;
}

int cli_target_plan_query(const cli_target_plan *p, int64_t m,
                          trellis_buffer_sizes *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  if (m < 1 || m > p->max_m)
    return 0;
  trl_decision d;
  if (!trl_decide(&p->pp, &p->lp, m, &d))
    return 0;
  trl_decision_sizes(&d, out);
  return 1;
}
