/* SPDX-License-Identifier: Apache-2.0 */
/* Tensor-parallel shards on one GPU (trellis_weight_shard, FORMAT.md §6.6):
 * a shard is uploaded and planned like any layer, so
 *   - for codebooks 3INST, MCG (K6 takes the fused path), MUL1, SQG and a
 *     pair, at 2, 3 and 4 ranks: the column shards' outputs are the CPU
 *     reference's columns of the unsharded layer, and the row shards'
 *     partials (the bias on rank 0) sum to its output, within §7.2's 2e-3,
 *     at m = 1, 8 and 160 (the register-direct, fused, generic and dense paths
 *     the plans pick);
 *   - every rank's plan of a split, captured into one CUDA graph, replays
 *     equal to the eager runs bit for bit, outputs poisoned with NaN first.
 * NCCL is not involved: the all-reduce is the test's sum on the host. */
#include "gpu_util.h"

#define TOL 2e-3
#define MAX_RANKS 4

static const int64_t ms[] = {1, 8, 160};
#define MAX_M 160

/* The ranks of one split of a layer, uploaded and planned. */
typedef struct split_set {
  int ranks;
  trellis_split split;
  trellis_weight shard[MAX_RANKS];
  void *memory[MAX_RANKS];
  int64_t begin[MAX_RANKS], end[MAX_RANKS];
  grun run[MAX_RANKS];
} split_set;

static void set_open(split_set *s, const trellis_weight *w, trellis_split split,
                     int ranks) {
  memset(s, 0, sizeof *s);
  s->ranks = ranks;
  s->split = split;
  const trellis_plan_desc d = gu_desc(MAX_M, TRELLIS_F16, TRELLIS_F32, 0);
  for (int r = 0; r < ranks; r++) {
    trellis_shard_desc sd;
    trellis_shard_desc_init(&sd);
    sd.split = split;
    sd.ranks = ranks;
    sd.rank = r;
    OK(trellis_shard_range(split == TRELLIS_SPLIT_K ? w->k : w->n, &sd,
                           &s->begin[r], &s->end[r]));
    size_t bytes;
    OK(trellis_weight_shard_bytes(w, &sd, &bytes));
    s->memory[r] = bytes ? aligned_alloc(16, bytes) : NULL;
    trellis_weight_init(&s->shard[r]);
    OK(trellis_weight_shard(w, &sd, s->memory[r], bytes, &s->shard[r]));
    /* uploaded like any layer; the host copy may go after the upload */
    grun_open(&s->run[r], &s->shard[r], &d);
  }
}

static void set_close(split_set *s) {
  for (int r = 0; r < s->ranks; r++) {
    grun_close(&s->run[r]);
    free(s->memory[r]);
  }
}

/* Rank r's input rows: x itself (split n), or its columns [begin, end). */
static uint16_t *rank_input(const split_set *s, int r, const uint16_t *x,
                            int64_t m, int64_t k) {
  const int64_t w = s->split == TRELLIS_SPLIT_K ? s->end[r] - s->begin[r] : k;
  uint16_t *out = malloc((size_t)(m * w) * 2);
  assert_non_null(out);
  const int64_t first = s->split == TRELLIS_SPLIT_K ? s->begin[r] : 0;
  for (int64_t row = 0; row < m; row++)
    memcpy(out + row * w, x + row * k + first, (size_t)w * 2);
  return out;
}

/* Every rank at m against the CPU output of the whole layer. */
static void check_set(split_set *s, const trellis_weight *w, int64_t m,
                      const char *label) {
  uint16_t *x = rand_input(m, w->k, TRELLIS_F16, 0x51u + (uint64_t)m);
  float *ref = cpu_ref(w, x, TRELLIS_F16, m, TRELLIS_F32);
  float *joined = calloc((size_t)(m * w->n), sizeof *joined);
  assert_non_null(joined);
  for (int r = 0; r < s->ranks; r++) {
    uint16_t *xr = rank_input(s, r, x, m, w->k);
    float *y = grun_forward(&s->run[r], xr, m, 0);
    const int64_t n = s->shard[r].n;
    for (int64_t row = 0; row < m; row++)
      for (int64_t j = 0; j < n; j++) {
        if (s->split == TRELLIS_SPLIT_N)
          joined[row * w->n + s->begin[r] + j] = y[row * n + j];
        else
          joined[row * w->n + j] += y[row * n + j];
      }
    free(y);
    free(xr);
  }
  char what[160];
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(s->run[0].plan, m, &sz));
  snprintf(what, sizeof what, "%s, %d ranks split %s, m = %lld (rank 0: %s)",
           label, s->ranks, trellis_split_name(s->split), (long long)m,
           trellis_path_name(sz.path));
  check_close(joined, ref, (size_t)(m * w->n), TOL, TOL, what);
  free(joined);
  free(ref);
  free(x);
}

/* Every rank's plan captured into one graph on one stream; replays with
 * poisoned outputs equal the eager runs bit for bit. */
static void check_capture(split_set *s, int64_t m) {
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  size_t ybytes[MAX_RANKS];
  void *want[MAX_RANKS], *got = NULL;
  size_t most = 0;
  for (int r = 0; r < s->ranks; r++) {
    grun *g = &s->run[r];
    void *x = rand_input(m, s->shard[r].k, TRELLIS_F16, 0x77u + (uint64_t)r);
    CK(cudaMemcpyAsync(g->dx, x, (size_t)(m * s->shard[r].k) * 2,
                       cudaMemcpyHostToDevice, st));
    free(x);
    ybytes[r] = (size_t)(m * s->shard[r].n) * 4;
    most = ybytes[r] > most ? ybytes[r] : most;
    CK(cudaMemsetAsync(g->dy, 0xFF, ybytes[r], st));
    OK(trellis_run(g->plan, g->dx, m, g->dy, &g->b, st));
    want[r] = malloc(ybytes[r]);
    assert_non_null(want[r]);
  }
  CK(cudaStreamSynchronize(st));
  for (int r = 0; r < s->ranks; r++)
    CK(cudaMemcpy(want[r], s->run[r].dy, ybytes[r], cudaMemcpyDeviceToHost));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int r = 0; r < s->ranks; r++) {
    grun *g = &s->run[r];
    OK(trellis_run(g->plan, g->dx, m, g->dy, &g->b, st));
  }
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  got = malloc(most);
  assert_non_null(got);
  for (int rep = 0; rep < 5; rep++) {
    for (int r = 0; r < s->ranks; r++)
      CK(cudaMemsetAsync(s->run[r].dy, 0xFF, ybytes[r], st));
    CK(cudaGraphLaunch(exec, st));
    CK(cudaStreamSynchronize(st));
    for (int r = 0; r < s->ranks; r++) {
      CK(cudaMemcpy(got, s->run[r].dy, ybytes[r], cudaMemcpyDeviceToHost));
      if (memcmp(got, want[r], ybytes[r]) != 0)
        fail_msg("replay %d of %d ranks split %s at m = %lld: rank %d differs "
                 "from its eager run",
                 rep, s->ranks, trellis_split_name(s->split), (long long)m, r);
    }
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  for (int r = 0; r < s->ranks; r++)
    free(want[r]);
  free(got);
  CK(cudaStreamDestroy(st));
}

/* Both axes at 2, 3 and 4 ranks where the axis has the blocks. */
static void check_layer(const trellis_weight *w, const char *label) {
  for (int split = 0; split < 2; split++)
    for (int ranks = 2; ranks <= MAX_RANKS; ranks++) {
      const int64_t length = split == TRELLIS_SPLIT_K ? w->k : w->n;
      if (length / TRELLIS_HBLOCK < ranks)
        continue;
      split_set s;
      set_open(&s, w, (trellis_split)split, ranks);
      for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        check_set(&s, w, ms[i], label);
      check_capture(&s, 1);
      check_capture(&s, 160);
      set_close(&s);
    }
}

/* k = 640, n = 768: uneven splits at 2, 3 or 4 ranks on one axis or both. */
static void test_codebooks(void **state) {
  (void)state;
  static const struct {
    trellis_codebook cb;
    int bits;
  } cases[] = {{TRELLIS_CB_MCG, 6},      {TRELLIS_CB_3INST, 4},
               {TRELLIS_CB_MUL1, 3},     {TRELLIS_CB_MCG, 2},
               {TRELLIS_CB_SQG_E4M3, 4}, {TRELLIS_CB_SQG_FP16, 5}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    gw w;
    gw_random(&w, 640, 768, cases[i].bits, cases[i].cb, 0, 1, 0x5Au + i);
    char label[64];
    snprintf(label, sizeof label, "%s K%d", trellis_codebook_name(cases[i].cb),
             cases[i].bits);
    check_layer(&w.w, label);
    gw_free(&w);
  }
}

/* The fused path takes a K6/MCG shard at m = 1 on Hopper, like any K6/MCG
 * layer. */
static void test_fused_shard(void **state) {
  (void)state;
  if (!gu_is_hopper())
    skip();
  gw w;
  gw_random(&w, 1024, 1024, 6, TRELLIS_CB_MCG, 0, 0, 0xF5u);
  for (int split = 0; split < 2; split++) {
    split_set s;
    set_open(&s, &w.w, (trellis_split)split, 4);
    for (int r = 0; r < 4; r++) {
      trellis_buffer_sizes sz;
      OK(trellis_plan_query(s.run[r].plan, 1, &sz));
      assert_int_equal(sz.path, TRELLIS_PATH_FUSED);
    }
    set_close(&s);
  }
  gw_free(&w);
}

/* A pair: split on its rate axis (a record per rank) and on the other. */
static void test_pair(void **state) {
  (void)state;
  gw base;
  /* words enough for both records (the larger K over both halves) */
  gw_random(&base, 640, 256, 4, TRELLIS_CB_MCG, 0, 1, 0xA1u);
  trellis_weight w = base.w;
  w.pair = TRELLIS_PAIR_P24;
  w.rate_axis = TRELLIS_RATE_AXIS_N;
  w.bits = 2;
  w.bits1 = 4;
  w.trellis1 = base.trellis + 640 / 16 * 8 * 16 * 2;
  OK(trellis_weight_validate(&w));
  check_layer(&w, "MCG P24/n");
  gw_free(&base);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_codebooks),
      cmocka_unit_test(test_fused_shard),
      cmocka_unit_test(test_pair),
  };
  return TU_RUN_TESTS("gpu_shard", tests);
}
