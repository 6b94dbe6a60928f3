/* SPDX-License-Identifier: Apache-2.0 */
/* The tensor-parallel step against the single-GPU step (step.h,
 * "tensor parallelism"): the lockstep run of every rank's engine on one
 * GPU and the layer-by-layer comparison of the ranks' outputs. Used by
 * trellis-tp-step (tp_step.c) and by tests/gpu_tp_local.c, which runs the
 * ranks on one GPU without NCCL. */
#include "step.h"

#include "bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Relative L2 of fp16 `got` against fp16 `want` (count values); infinite
 * when the difference is not finite. */
static double rel_l2_f16(const uint16_t *got, const uint16_t *want,
                         size_t count) {
  double num = 0, den = 0;
  for (size_t i = 0; i < count; i++) {
    const double g = trellis_f16_to_f32(got[i]),
                 w = trellis_f16_to_f32(want[i]);
    num += (g - w) * (g - w);
    den += w * w;
  }
  if (!isfinite(num) || !isfinite(den))
    return INFINITY;
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

void step_ref_init(step_ref *r) {
  memset(r, 0, sizeof *r);
  r->same_sums = 1;
}

int step_ref_pass(const step_ref *r) {
  return !r->nonfinite && r->worst_ratio <= 1.0 && r->same_sums;
}

double step_ref_tol(const step_model *m, const step_layer *l) {
  return STEP_REF_TOL *
         sqrt((double)(l->block < 0 ? m->blocks : l->block) + 1.0);
}

static void judge(step_ref *res, const step_model *m, const step_layer *l,
                  double rel) {
  const double ratio = rel / step_ref_tol(m, l);
  if (!isfinite(ratio))
    res->nonfinite = 1;
  if (res->worst[0] == '\0' || ratio > res->worst_ratio || !isfinite(ratio)) {
    if (isfinite(ratio))
      res->worst_ratio = ratio;
    bench_sfmt(res->worst, sizeof res->worst, "%s (%.3g)", l->name, rel);
  }
  if (l->block == 0 && !(rel <= res->block0))
    res->block0 = rel;
  if (l->role == SYNTH_ROLE_DOWN && l->block == m->blocks - 1)
    res->final_rel = rel;
}

/* Whether rank r's all-reduced output of layer i equals rank 0's. */
static void same_sum(const step_model *const *ranks, int r, size_t i,
                     uint16_t *const *const *got, int64_t m, step_ref *res) {
  const step_layer *l = &ranks[r]->layers[i];
  if (r > 0 && (l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN) &&
      memcmp(got[r][i], got[0][i], (size_t)m * (size_t)l->n * 2) != 0)
    res->same_sums = 0;
}

void step_ref_unsharded(const step_model *const *ranks, int n,
                        uint16_t *const *const *got, const step_model *full,
                        uint16_t *const *want, int64_t m, step_ref *res) {
  for (size_t i = 0; i < full->count; i++) {
    const size_t width = (size_t)full->layers[i].n;
    uint16_t *joined = malloc((size_t)m * width * 2);
    if (joined == NULL) {
      res->nonfinite = 1; /* not compared: not a pass */
      continue;
    }
    for (int r = 0; r < n; r++) {
      const step_layer *l = &ranks[r]->layers[i];
      same_sum(ranks, r, i, got, m, res);
      if (l->split == TRELLIS_SPLIT_N)
        for (int64_t row = 0; row < m; row++)
          memcpy(joined + (size_t)row * width + (size_t)l->begin,
                 got[r][i] + (size_t)row * (size_t)l->n, (size_t)l->n * 2);
      else if (r == 0)
        memcpy(joined, got[0][i], (size_t)m * width * 2);
    }
    judge(res, full, &full->layers[i],
          rel_l2_f16(joined, want[i], (size_t)m * width));
    free(joined);
  }
}

void step_ref_ranks(const step_model *const *ranks, int n,
                    uint16_t *const *const *got, uint16_t *const *const *want,
                    int64_t m, step_ref *res) {
  for (int r = 0; r < n; r++)
    for (size_t i = 0; i < ranks[r]->count; i++) {
      const step_layer *l = &ranks[r]->layers[i];
      same_sum(ranks, r, i, got, m, res);
      judge(res, ranks[r], l,
            rel_l2_f16(got[r][i], want[r][i], (size_t)m * (size_t)l->n));
    }
}

#ifdef TRELLIS_HAVE_CUDA
#include "kernels.h"

int step_lockstep(step_engine *e, int n, int64_t m, cudaStream_t stream,
                  uint16_t ***out) {
  int r = CLI_FAIL;
  for (int k = 0; k < n; k++)
    if (step_poison(&e[k], stream) != CLI_OK)
      goto done;
  for (size_t i = 0; i < e[0].nops; i++) {
    const step_op *op = &e[0].ops[i];
    if (op->layer != STEP_OP_ALLREDUCE) {
      for (int k = 0; k < n; k++)
        if (step_run_op(&e[k], i, 0, m, stream) != CLI_OK)
          goto done;
      continue;
    }
    const size_t count = (size_t)m * (size_t)e[0].model->layers[op->reduced].n;
    for (int k = 1; k < n; k++)
      BENCH_KERNEL(bench_add_f16(op->y, e[k].ops[i].y, count, stream));
    for (int k = 1; k < n; k++)
      BENCH_CUDA(cudaMemcpyAsync(e[k].ops[i].y, op->y, count * 2,
                                 cudaMemcpyDeviceToDevice, stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (int k = 0; k < n; k++) {
    const step_model *model = e[k].model;
    for (size_t i = 0; i < model->count; i++) {
      const size_t count = (size_t)m * (size_t)model->layers[i].n;
      BENCH_ALLOC(out[k][i], count);
      BENCH_CUDA(
          cudaMemcpy(out[k][i], e[k].y[i], count * 2, cudaMemcpyDeviceToHost));
    }
  }
  r = CLI_OK;
done:
  return r;
}
#endif
