/* SPDX-License-Identifier: Apache-2.0 */
/* The tensor-parallel decode step (bench/step.h, step_model_open_tp) with
 * every rank on one GPU, without NCCL: the step's all-reduces are done by
 * step_lockstep (a local sum), which is also trellis-tp-step's single-GPU
 * reference. On one device this checks what the multi-GPU program relies on:
 *   - llama-3.1-8b (2 blocks) at 2, 3 and 4 ranks: the ranks' eager steps,
 *     summed after o and down, against the unsharded step within
 *     STEP_REF_TOL x sqrt(block + 1), every rank holding the same sums;
 *   - a model directory's ranks (trellis_weight_shard of the mapped layers)
 *     equal the preset's ranks built on the device (each shard's payload
 *     generated where it lies in the layer) bit for bit;
 *   - every rank's FULL and PIECEWISE graphs, with the all-reduce ops in
 *     them (here no-ops), replay equal to its eager step;
 *   - glm-tp4 as four ranks with their own weights runs in lockstep.
 * TRELLIS_TEST_SMALL (the compute-sanitizer runs): one block, 2 ranks
 * against the unsharded step, 3 ranks' graphs at m = 1 only. */
#include "gpu_util.h"
#include "step.h"
#include "tools/cli.h"

#define MAX_RANKS 4

static const int64_t ms[] = {1, 8, 33};
#define NMS 3

static int small_run(void) {
  const char *small = getenv("TRELLIS_TEST_SMALL");
  return small && small[0] && strcmp(small, "0") != 0;
}

static int no_allreduce(void *ctx, void *buf, size_t count, void *stream) {
  (void)ctx, (void)buf, (void)count, (void)stream;
  return CLI_OK; /* step_lockstep sums */
}

static step_preset_options llama_options(void) {
  step_preset_options po;
  step_preset_options_init(&po);
  po.bits = 4.25;
  po.blocks = small_run() ? 1 : 2;
  po.head_bits = 6;
  po.vocab = 1024;
  return po;
}

/* The ranks of `spec` as models and engines on this GPU. */
typedef struct ranks_on_one {
  int n;
  step_model model[MAX_RANKS];
  step_engine engine[MAX_RANKS];
  step_tp tp[MAX_RANKS];
  const step_model *view[MAX_RANKS];
} ranks_on_one;

static void ranks_open(ranks_on_one *r, const char *spec,
                       const step_preset_options *po, int n, cudaStream_t s) {
  memset(r, 0, sizeof *r);
  r->n = n;
  for (int k = 0; k < n; k++) {
    assert_int_equal(step_model_open_tp(spec, po, n, k, &r->model[k]), CLI_OK);
    r->tp[k] = (step_tp){.ranks = n, .rank = k, .allreduce = no_allreduce};
    r->model[k].tp = &r->tp[k];
    assert_int_equal(
        step_engine_open(&r->engine[k], &r->model[k], 1, ms, NMS, 0, s),
        CLI_OK);
    r->view[k] = &r->model[k];
    /* an all-reduce after every o and down */
    assert_int_equal(r->engine[k].nops, r->engine[0].nops);
  }
}

static void ranks_close(ranks_on_one *r) {
  for (int k = 0; k < r->n; k++) {
    step_engine_close(&r->engine[k]);
    step_model_close(&r->model[k]);
  }
}

static uint16_t ***outputs_alloc(const ranks_on_one *r) {
  uint16_t ***out = calloc((size_t)r->n, sizeof *out);
  assert_non_null(out);
  for (int k = 0; k < r->n; k++) {
    out[k] = calloc(r->model[k].count, sizeof **out);
    assert_non_null(out[k]);
  }
  return out;
}

static void outputs_free(const ranks_on_one *r, uint16_t ***out) {
  for (int k = 0; k < r->n; k++) {
    for (size_t i = 0; i < r->model[k].count; i++)
      free(out[k][i]);
    free(out[k]);
  }
  free(out);
}

static void test_llama_ranks_against_unsharded(void **state) {
  (void)state;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const step_preset_options po = llama_options();
  ranks_on_one full;
  memset(&full, 0, sizeof full);
  full.n = 1;
  assert_int_equal(step_model_open("preset:llama-3.1-8b", &po, &full.model[0]),
                   CLI_OK);
  assert_int_equal(
      step_engine_open(&full.engine[0], &full.model[0], 1, ms, NMS, 0, s),
      CLI_OK);
  for (int n = 2; n <= (small_run() ? 2 : MAX_RANKS); n++) {
    ranks_on_one r;
    ranks_open(&r, "preset:llama-3.1-8b", &po, n, s);
    /* two all-reduces per block */
    assert_int_equal(r.engine[0].nops,
                     full.engine[0].nops + 2 * (size_t)r.model[0].blocks);
    for (int j = 0; j < NMS; j++) {
      uint16_t ***got = outputs_alloc(&r), ***want = outputs_alloc(&full);
      assert_int_equal(step_lockstep(r.engine, n, ms[j], s, got), CLI_OK);
      assert_int_equal(step_lockstep(full.engine, 1, ms[j], s, want), CLI_OK);
      step_ref res;
      step_ref_init(&res);
      step_ref_unsharded(r.view, n, (uint16_t *const *const *)got,
                         &full.model[0], want[0], ms[j], &res);
      print_message("%d ranks, m = %lld: block 0 worst %.3g, last down "
                    "%.3g, worst %s\n",
                    n, (long long)ms[j], res.block0, res.final_rel, res.worst);
      if (!step_ref_pass(&res))
        fail_msg("%d ranks at m = %lld: %s is %.2f x its tolerance%s%s", n,
                 (long long)ms[j], res.worst, res.worst_ratio,
                 res.nonfinite ? ", a difference is not finite" : "",
                 res.same_sums ? "" : ", ranks hold different sums");
      outputs_free(&r, got);
      outputs_free(&full, want);
    }
    ranks_close(&r);
  }
  ranks_close(&full);
  CK(cudaStreamDestroy(s));
}

/* synth's directory and the preset built on the device, cut alike: rank by
 * rank the same outputs (the shards' bytes are the same). */
static void test_directory_ranks_equal_preset_ranks(void **state) {
  (void)state;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char *dir =
      tu_write_synth("tp-dir", "llama-3.1-8b", 1, 4.0, 6, TRELLIS_CB_MCG, -1);
  step_preset_options po;
  step_preset_options_init(&po);
  po.bits = 4.0;
  po.blocks = 1;
  po.head_bits = 6;
  po.vocab = 256;
  ranks_on_one a, b;
  ranks_open(&a, dir, NULL, 2, s);
  ranks_open(&b, "preset:llama-3.1-8b", &po, 2, s);
  uint16_t ***ga = outputs_alloc(&a), ***gb = outputs_alloc(&b);
  assert_int_equal(step_lockstep(a.engine, 2, 8, s, ga), CLI_OK);
  assert_int_equal(step_lockstep(b.engine, 2, 8, s, gb), CLI_OK);
  for (int k = 0; k < 2; k++) {
    assert_int_equal(a.model[k].count, b.model[k].count);
    for (size_t i = 0; i < a.model[k].count; i++) {
      const step_layer *l = &a.model[k].layers[i];
      assert_int_equal(l->n, b.model[k].layers[i].n);
      if (memcmp(ga[k][i], gb[k][i], (size_t)8 * (size_t)l->n * 2) != 0)
        fail_msg("rank %d: %s: the directory's shard and the preset's "
                 "differ",
                 k, l->name);
    }
  }
  outputs_free(&a, ga);
  outputs_free(&b, gb);
  ranks_close(&a);
  ranks_close(&b);
  free(dir);
  CK(cudaStreamDestroy(s));
}

/* Every rank's graphs, with its all-reduce slots, replay like its eager
 * step. */
static void test_rank_graphs(void **state) {
  (void)state;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const step_preset_options po = llama_options();
  ranks_on_one r;
  ranks_open(&r, "preset:llama-3.1-8b", &po, 3, s);
  for (int k = 0; k < 3; k++)
    for (int j = 0; j < (small_run() ? 1 : NMS); j++)
      for (int md = STEP_FULL; md <= STEP_PIECEWISE; md++) {
        assert_int_equal(step_capture(&r.engine[k], (step_mode)md, ms[j], s),
                         CLI_OK);
        int ok = 0;
        char detail[256];
        assert_int_equal(step_check(&r.engine[k], (step_mode)md, ms[j], 3, s,
                                    &ok, detail, sizeof detail),
                         CLI_OK);
        if (!ok)
          fail_msg("rank %d, %s at m = %lld: %s", k,
                   step_mode_name((step_mode)md), (long long)ms[j], detail);
      }
  ranks_close(&r);
  CK(cudaStreamDestroy(s));
}

/* glm-tp4: four ranks, each the preset with its own seed, uncut. */
static void test_glm_four_ranks(void **state) {
  (void)state;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  step_preset_options po;
  step_preset_options_init(&po);
  po.bits = 3.36;
  po.blocks = 2;
  po.head_bits = 6;
  po.vocab = 256;
  step_model m;
  assert_int_equal(step_model_open_tp("preset:glm-tp4", &po, 2, 0, &m),
                   CLI_USAGE);
  step_model_close(&m);
  ranks_on_one r;
  ranks_open(&r, "preset:glm-tp4", &po, 4, s);
  assert_true(r.model[0].presharded);
  uint16_t ***got = outputs_alloc(&r);
  assert_int_equal(step_lockstep(r.engine, 4, 8, s, got), CLI_OK);
  for (int k = 0; k < 4; k++)
    for (size_t i = 0; i < r.model[k].count; i++) {
      const size_t count = (size_t)8 * (size_t)r.model[k].layers[i].n;
      float *f = to_float(got[k][i], count, TRELLIS_F16);
      if (!tu_all_finite(f, count))
        fail_msg("rank %d: %s has values that are not finite", k,
                 r.model[k].layers[i].name);
      free(f);
    }
  /* the ranks' own weights: their q_b outputs differ */
  assert_true(memcmp(got[0][0], got[1][0],
                     (size_t)8 * (size_t)r.model[0].layers[0].n * 2) != 0);
  outputs_free(&r, got);
  ranks_close(&r);
  CK(cudaStreamDestroy(s));
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_ranks_against_unsharded),
      cmocka_unit_test(test_directory_ranks_equal_preset_ranks),
      cmocka_unit_test(test_rank_graphs),
      cmocka_unit_test(test_glm_four_ranks),
  };
  return TU_RUN_TESTS("gpu_tp_local", tests);
}
