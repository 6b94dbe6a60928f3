/* SPDX-License-Identifier: Apache-2.0 */
/* The decision record (rules/decision.h) that trellis_plan_query reports
 * and trellis_run executes, tested without a GPU: for representative plans
 * (EXL3 codebooks and rates, the half rates, the b12x formats, the fused
 * K6/MCG path, flags, dtypes, external rotations, an sm_80 device) at
 * m = 1 .. 4096, each field equals what the rule it comes from says, and
 * every buffer the record uses fits the sizes the query reports. */
#include "testutil.h"

#include "format/lanes.h"
#include "rules/decision.h"

#include <string.h>

/* A plan: its weight, its desc and its device. */
typedef struct pcase {
  const char *name;
  int64_t k, n;
  int bits, half;
  trellis_codebook cb;
  trellis_pair_kind pair;
  trellis_rate_axis axis;
  int bias, h128;
  trellis_dtype in, out, compute;
  uint32_t flags;
  int split_k;
  int cc_major, sms;
  int fused_cluster; /* prepare's cluster of the one-m-block variant */
  int kmajor;        /* the payload in the k-major layout */
} pcase;

#define F16 TRELLIS_F16
#define BF16 TRELLIS_BF16
#define F32 TRELLIS_F32
#define NOPAIR TRELLIS_PAIR_NONE, TRELLIS_RATE_AXIS_N

static const pcase cases[] = {
    /* K6/MCG: the fused gate, the register-direct kernel, the dense folds */
    {"k6 mcg 4096x4096", 4096, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0, F16,
     F16, F16, 0, 0, 9, 132, 8},
    {"k6 mcg 8192x28672 bias", 8192, 28672, 6, 0, TRELLIS_CB_MCG, NOPAIR, 1, 0,
     F16, F16, F16, 0, 0, 9, 132, 3},
    {"k6 mcg 14336x4096 exact weights", 14336, 4096, 6, 0, TRELLIS_CB_MCG,
     NOPAIR, 0, 0, F16, F16, F16, TRELLIS_PLAN_EXACT_WEIGHTS, 0, 9, 132, 9},
    {"k6 mcg 4096x4096 exact weights", 4096, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR,
     0, 0, F16, F16, F16, TRELLIS_PLAN_EXACT_WEIGHTS, 0, 9, 132, 8},
    {"k6 mcg 512x6144 exact weights", 512, 6144, 6, 0, TRELLIS_CB_MCG, NOPAIR,
     0, 0, F16, F16, F16, TRELLIS_PLAN_EXACT_WEIGHTS, 0, 9, 132, 4},
    {"k6 mcg 4096x4096 exact weights f32 in", 4096, 4096, 6, 0, TRELLIS_CB_MCG,
     NOPAIR, 0, 0, F32, F32, F16, TRELLIS_PLAN_EXACT_WEIGHTS, 0, 9, 132, 8},
    {"k6 mcg legacy kernels", 4096, 14336, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0,
     F16, F16, F16, TRELLIS_PLAN_LEGACY_KERNELS, 0, 9, 132, 3},
    {"k6 mcg force dense", 4096, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0, F16,
     F16, F16, TRELLIS_PLAN_FORCE_DENSE, 0, 9, 132, 8},
    {"k6 mcg force generic", 2048, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0,
     F16, F16, F16, TRELLIS_PLAN_FORCE_GENERIC, 0, 9, 132, 8},
    {"k6 mcg bf16 compute", 4096, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0,
     BF16, BF16, BF16, 0, 0, 9, 132, 8},
    {"k6 mcg sm_80", 4096, 4096, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0, F16, F16,
     F16, 0, 0, 8, 108, 0},
    {"k6 mcg 6144x1024 f32 in", 6144, 1024, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0,
     F32, F16, F16, 0, 0, 9, 132, 16},
    /* other EXL3 codebooks and rates: the generic side */
    {"k4 mul1 28672x8192 (k split across clusters)", 28672, 8192, 4, 0,
     TRELLIS_CB_MUL1, NOPAIR, 0, 0, F16, F16, F16, 0, 0, 9, 132, 0},
    {"k3 3inst bias bf16 out", 4096, 14336, 3, 0, TRELLIS_CB_3INST, NOPAIR, 1,
     0, F16, BF16, F16, 0, 0, 9, 132, 0},
    {"k5 3inst external rotation", 4096, 4096, 5, 0, TRELLIS_CB_3INST, NOPAIR,
     1, 1, F16, F16, F16, 0, 0, 9, 132, 0},
    {"k8 mcg split_k 2", 4096, 4096, 8, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0, F16,
     F32, F16, 0, 2, 9, 132, 0},
    {"k2 mcg force decode", 512, 6144, 2, 0, TRELLIS_CB_MCG, NOPAIR, 0, 0, F16,
     F16, F16, TRELLIS_PLAN_FORCE_DECODE, 0, 9, 132, 0},
    {"k1 mul1 small", 128, 128, 1, 0, TRELLIS_CB_MUL1, NOPAIR, 0, 0, F16, F16,
     F16, 0, 0, 9, 132, 0},
    /* the half rates (bits + 1/2, MUL1) */
    {"k2.5 mul1 4096x14336", 4096, 14336, 2, 1, TRELLIS_CB_MUL1, NOPAIR, 0, 0,
     F16, F16, F16, 0, 0, 9, 132, 0},
    {"k3.5 mul1 bias f32 out", 14336, 4096, 3, 1, TRELLIS_CB_MUL1, NOPAIR, 1, 0,
     F16, F32, F16, 0, 0, 9, 132, 0},
    {"k1.5 mul1 external rotation", 1024, 512, 1, 1, TRELLIS_CB_MUL1, NOPAIR, 0,
     1, F16, F16, F16, 0, 0, 9, 132, 0},
    {"k2.5 mul1 exact weights", 4096, 4096, 2, 1, TRELLIS_CB_MUL1, NOPAIR, 0, 0,
     F16, F16, F16, TRELLIS_PLAN_EXACT_WEIGHTS, 0, 9, 132, 0},
    /* b12x: the SQG codebooks and pairs */
    {"sqg e4m3 k4", 4096, 4096, 4, 0, TRELLIS_CB_SQG_E4M3, NOPAIR, 0, 0, F16,
     F16, F16, 0, 0, 9, 132, 0},
    {"sqg fp16 k6", 2048, 4096, 6, 0, TRELLIS_CB_SQG_FP16, NOPAIR, 0, 0, F16,
     F16, F16, 0, 0, 9, 132, 0},
    {"p24 pair on n", 4096, 256, 2, 0, TRELLIS_CB_MCG, TRELLIS_PAIR_P24,
     TRELLIS_RATE_AXIS_N, 0, 0, F16, F16, F16, 0, 0, 9, 132, 0},
    {"p33 sqg pair on k", 256, 4096, 3, 0, TRELLIS_CB_SQG_E4M3,
     TRELLIS_PAIR_P33, TRELLIS_RATE_AXIS_K, 0, 0, F16, F16, F16, 0, 0, 9, 132,
     0},
    /* the k-major layout: its kernel up to 32 rows, then the plain dense
     * path; never the fused gate */
    {"k6 mcg 8192x28672 k-major", 8192, 28672, 6, 0, TRELLIS_CB_MCG, NOPAIR, 0,
     0, F16, F16, F16, 0, 0, 9, 132, 3, 1},
    {"k4 mul1 4096x4096 k-major bias bf16 out", 4096, 4096, 4, 0,
     TRELLIS_CB_MUL1, NOPAIR, 1, 0, F16, BF16, F16, 0, 0, 9, 132, 0, 1},
    {"k2.5 mul1 512x6144 k-major", 512, 6144, 2, 1, TRELLIS_CB_MUL1, NOPAIR, 0,
     0, F16, F16, F16, 0, 0, 9, 132, 0, 1},
    {"k3 3inst k-major force decode", 2048, 4096, 3, 0, TRELLIS_CB_3INST,
     NOPAIR, 0, 0, F32, F16, F16, TRELLIS_PLAN_FORCE_DECODE, 0, 9, 132, 0, 1},
    {"k4 mcg k-major force dense", 4096, 4096, 4, 0, TRELLIS_CB_MCG, NOPAIR, 0,
     0, F16, F16, F16, TRELLIS_PLAN_FORCE_DENSE, 0, 9, 132, 0, 1},
};
#define CASE_COUNT (sizeof cases / sizeof cases[0])

static const int64_t ms[] = {1, 4, 8, 16, 17, 64, 128, 129, 256, 257, 4096};
#define MAX_M 4096

/* How many clusters of each size fit an H200 at once (its
 * cudaOccupancyMaxActiveClusters at m = 1, as tests/test_gate.c's
 * test_direct_splits takes it). */
static const int h200_active[TRL_DIRECT_MAX_CLUSTER + 1] = {
    0, 132, 132, 79, 62, 47, 39, 32, 30, 23, 21, 16, 16, 14, 14, 14, 14};

/* The rules' inputs as trellis_plan_create fills them (plan/plan.c), with
 * what the GPU reports set as an H200 could: 2 or 1 decode-GEMM CTAs per
 * SM, 128 registers, the clusters above; after prepare (`prepared`) the
 * fused kernel's clusters. */
static void fill(const pcase *c, int prepared, trl_path_plan *pp,
                 trl_layout_params *lp) {
  memset(pp, 0, sizeof *pp);
  memset(lp, 0, sizeof *lp);
  const int sm90 = c->cc_major >= 9;
  pp->k = c->k;
  pp->bits = c->bits;
  pp->half = c->half;
  pp->codebook = c->cb;
  pp->paired = c->pair != TRELLIS_PAIR_NONE;
  pp->kmajor = c->kmajor;
  pp->has_bias = c->bias;
  pp->input_dtype = c->in;
  pp->output_dtype = c->out;
  pp->compute_dtype = c->compute;
  pp->has_h128 = c->h128;
  pp->split_k = c->split_k;
  pp->flags = c->flags;
  pp->cc_major = c->cc_major;
  pp->fused_image = sm90;
  pp->pdl = sm90;
  lp->k = c->k;
  lp->n = c->n;
  lp->sm_count = c->sms;
  lp->split_k = c->split_k;
  lp->has_h128 = c->h128;
  lp->dense_direct = trl_path_dense_direct(pp);
  lp->dense_fold_input = trl_path_dense_fold_input(pp);
  lp->pair_k = pp->paired && c->axis == TRELLIS_RATE_AXIS_K;
  for (int i = 0; i < TRL_M_BLOCK_COUNT; ++i)
    lp->ctas_per_sm[i] = i < 2 ? 2 : 1;
  lp->codebook = c->cb;
  lp->rate = trl_lanes_rate(c->bits, c->half);
  lp->direct = trl_path_direct_eligible(pp);
  lp->kmajor = c->kmajor;
  if (lp->direct) {
    lp->direct_max_cluster = TRL_DIRECT_MAX_CLUSTER;
    lp->direct_max_splits = TRL_DIRECT_MAX_SPLITS;
    for (int v = 0; v < 3; ++v) {
      lp->direct_regs[v] = 128;
      memcpy(lp->direct_active[v], h200_active, sizeof h200_active);
    }
  }
  if (prepared && sm90) {
    const int cl[TRL_M_BLOCK_COUNT] = {c->fused_cluster, 4, 2, 2};
    memcpy(lp->fused_cluster, cl, sizeof cl);
  }
}

/* The dense path's algorithm for m as run found it before the record:
 * prepare's buckets (1 under FORCE_DENSE, else the
 * crossover, then powers of two, the last capped at max_m) searched for
 * the first that holds m. -1: none. */
static int searched_bucket(const trl_path_plan *pp, int64_t max_m, int64_t m) {
  const int forced = (pp->flags & TRELLIS_PLAN_FORCE_DENSE) != 0;
  if (pp->flags & TRELLIS_PLAN_FORCE_DECODE)
    return -1;
  if (!forced && max_m < trl_path_dense_min_m(pp))
    return -1;
  int64_t bucket[TRL_DENSE_BUCKETS];
  int count = 0;
  int64_t b = forced ? 1 : trl_path_dense_min_m(pp);
  for (;;) {
    if (count == TRL_DENSE_BUCKETS)
      return -1;
    bucket[count] = b < max_m ? b : max_m;
    if (bucket[count++] >= max_m)
      break;
    int64_t next = 1;
    while (next <= b)
      next *= 2;
    b = next;
  }
  for (int i = 0; i < count; ++i)
    if (bucket[i] >= m)
      return i;
  return -1;
}

static void expect_grid(const trl_direct_grid *a, const trl_direct_grid *b) {
  assert_int_equal(a->var, b->var);
  assert_int_equal(a->cluster, b->cluster);
  assert_int_equal(a->clusters, b->clusters);
  assert_int_equal(a->splits, b->splits);
  assert_int_equal(a->rounds, b->rounds);
  assert_int_equal(a->kt_cta, b->kt_cta);
  assert_int_equal(a->smem_bytes, b->smem_bytes);
  assert_int_equal(a->ctas_per_sm, b->ctas_per_sm);
}

static void expect_layout(const trl_layout *a, const trl_layout *b) {
  assert_int_equal(a->path, b->path);
  assert_int_equal(a->m_blocks, b->m_blocks);
  assert_int_equal(a->splits, b->splits);
  assert_int_equal(a->kt_per_split, b->kt_per_split);
  assert_int_equal(a->slice_n, b->slice_n);
  assert_int_equal(a->partial_off, b->partial_off);
  assert_int_equal(a->partial_bytes, b->partial_bytes);
  assert_int_equal(a->sums_off, b->sums_off);
  assert_int_equal(a->sums_bytes, b->sums_bytes);
  assert_int_equal(a->rotout_off, b->rotout_off);
  assert_int_equal(a->rotout_bytes, b->rotout_bytes);
  assert_int_equal(a->direct, b->direct);
  expect_grid(&a->direct_grid, &b->direct_grid);
  assert_int_equal(a->what_off, b->what_off);
  assert_int_equal(a->what_bytes, b->what_bytes);
  assert_int_equal(a->cublas_off, b->cublas_off);
  assert_int_equal(a->cublas_bytes, b->cublas_bytes);
  assert_int_equal(a->workspace_bytes, b->workspace_bytes);
  assert_int_equal(a->rotated_bytes, b->rotated_bytes);
  assert_int_equal(a->input_f16_bytes, b->input_f16_bytes);
  assert_int_equal(a->output_f16_bytes, b->output_f16_bytes);
}

/* What the records of every case covered (each kind must show up). */
static struct {
  int family[5], input[3], output[4], rotation[4], form[3];
  int direct_split, direct_fused, fused_pdl_off, dense_bucket_past_first;
  int fp32_claims;
} seen;

/* The workspace regions a record uses: they fit the reported workspace,
 * they do not overlap, and each holds what its kernel writes there. */
static void expect_fits(const trl_path_plan *pp, const trl_decision *d,
                        int64_t m, int64_t n, int64_t k,
                        const trellis_buffer_sizes *q) {
  const trl_layout *l = &d->layout;
  const size_t off[5] = {l->partial_off, l->sums_off, l->rotout_off,
                         l->what_off, l->cublas_off};
  const size_t len[5] = {l->partial_bytes, l->sums_bytes, l->rotout_bytes,
                         l->what_bytes, l->cublas_bytes};
  for (int i = 0; i < 5; ++i) {
    assert_true(len[i] == 0 || off[i] + len[i] <= q->workspace_bytes);
    for (int j = 0; j < i; ++j)
      assert_true(len[i] == 0 || len[j] == 0 || off[i] >= off[j] + len[j] ||
                  off[j] >= off[i] + len[i]);
  }
  const size_t mn4 = (size_t)m * (size_t)n * 4;
  /* the rotated buffer: x rotated for the kernel (the register-direct and
   * the fused kernels keep it in the contract even where they rotate x
   * themselves); none where the dense path folds the rotation */
  const size_t rot = (size_t)m * (size_t)k * 2;
  if ((d->family == TRL_FAMILY_DENSE && d->input == TRL_INPUT_NONE) ||
      d->family == TRL_FAMILY_KMAJOR) /* the k-major kernel rotates x */
    assert_int_equal(q->rotated_bytes, 0);
  else
    assert_true(q->rotated_bytes >= rot);
  switch (d->family) {
  case TRL_FAMILY_FUSED:
    assert_int_equal(q->workspace_bytes, 0);
    break;
  case TRL_FAMILY_DIRECT:
    if (l->direct_grid.splits > 1)
      /* the splits' fp32 sums */
      assert_true(l->partial_bytes >= (size_t)l->direct_grid.splits * mn4);
    else
      assert_int_equal(q->workspace_bytes, 0);
    break;
  case TRL_FAMILY_GEMM:
    assert_true(l->partial_bytes >= (size_t)l->splits * mn4);
    break;
  case TRL_FAMILY_KMAJOR: /* every split's fp32 sums */
    assert_true(l->partial_bytes >= (size_t)l->kmajor_grid.splits * mn4);
    break;
  case TRL_FAMILY_DENSE:
    assert_true(l->what_bytes >= (size_t)k * (size_t)l->slice_n * 2);
    assert_int_equal(l->cublas_bytes, TRL_CUBLAS_WS_BYTES);
    if (d->output != TRL_OUTPUT_NONE)
      assert_true(l->partial_bytes >= mn4);
    break;
  }
  if (d->output == TRL_OUTPUT_EXTERNAL) {
    assert_true(l->rotout_bytes >= mn4);
    if (l->splits > 1)
      assert_true(l->sums_bytes >= mn4);
  }
  (void)pp;
}

/* One record against the rules. */
static void check(const pcase *c, const trl_path_plan *pp,
                  const trl_layout_params *lp, int64_t m) {
  trl_decision d;
  assert_true(trl_decide(pp, lp, m, &d));

  /* the path and the gate's reason: trl_path_for */
  trl_gate_reason why;
  const trellis_path path = trl_path_for(pp, m, &why);
  assert_int_equal(d.path, path);
  assert_int_equal(d.gate, why);
  /* the buffers and shapes: trl_layout_compute for that path */
  trl_layout lay;
  assert_true(trl_layout_compute(lp, path, m, &lay));
  expect_layout(&d.layout, &lay);

  /* the family */
  const int direct = trl_layout_direct(lp, path, m);
  const trl_family family = direct                       ? TRL_FAMILY_DIRECT
                            : path == TRELLIS_PATH_FUSED ? TRL_FAMILY_FUSED
                            : path == TRELLIS_PATH_DENSE ? TRL_FAMILY_DENSE
                            : c->kmajor                  ? TRL_FAMILY_KMAJOR
                                                         : TRL_FAMILY_GEMM;
  assert_int_equal(d.family, family);
  seen.family[family]++;

  switch (family) {
  case TRL_FAMILY_DIRECT: {
    trl_direct_grid g;
    assert_true(trl_layout_direct_grid(lp, path, m, &g));
    expect_grid(&d.layout.direct_grid, &g);
    assert_true(d.layout.direct);
    assert_int_equal(d.input, TRL_INPUT_NONE);
    assert_int_equal(d.output, TRL_OUTPUT_NONE);
    assert_int_equal(d.pdl, pp->pdl);
    if (path == TRELLIS_PATH_FUSED) /* no workspace: never split */
      assert_int_equal(g.splits, 1);
    seen.direct_split += g.splits > 1;
    seen.direct_fused += path == TRELLIS_PATH_FUSED;
    break;
  }
  case TRL_FAMILY_FUSED: {
    const int mb = trl_layout_m_blocks(m);
    const int cluster = lp->fused_cluster[trl_m_block_index(mb)];
    const trl_fused_rotation rule = trl_layout_fused_rotation(
        m, c->k, c->n, cluster, lp->sm_count,
        (c->flags & TRELLIS_PLAN_LEGACY_KERNELS) != 0);
    /* fp32 x: the claims where the rule says local (the launcher's
     * fallback, cuda/fused_k6.cu) */
    const trl_fused_rotation r = c->in == F32 && (rule == TRL_FUSED_LOCAL ||
                                                  rule == TRL_FUSED_LOCAL_AHEAD)
                                     ? TRL_FUSED_CLAIMS
                                     : rule;
    assert_int_equal(trl_layout_fused_rotation_for(rule, c->in), r);
    seen.fp32_claims += r != rule;
    assert_int_equal(d.fused.m_blocks, mb);
    assert_int_equal(d.fused.cluster, cluster);
    assert_int_equal(d.fused.rotation, r);
    /* as plan/fused.c decided it: a dependent launch where its CTAs run
     * two k-blocks, or after the input rotation it depends on */
    assert_int_equal(d.pdl,
                     r == TRL_FUSED_PRE
                         ? pp->pdl
                         : pp->pdl && trl_layout_fused_pdl(c->k, cluster));
    assert_int_equal(d.input,
                     r == TRL_FUSED_PRE ? TRL_INPUT_ROTATE : TRL_INPUT_NONE);
    assert_int_equal(d.output, TRL_OUTPUT_NONE);
    seen.rotation[r]++;
    seen.fused_pdl_off += !d.pdl;
    break;
  }
  case TRL_FAMILY_KMAJOR: {
    /* trl_kmajor_shape's launch: blocks of 8, 16 or 32 rows (int8: 4,
     * m <= 4), the fewest that hold m up to 32; a CTA column per split and
     * block at least, an n-tile a column at most, about the CTAs the SMs
     * hold */
    const trl_kmajor_grid *g = &d.layout.kmajor_grid;
    const trl_kmajor_grid e =
        trl_kmajor_shape(c->k, c->n, m, c->cb, lp->sm_count);
    assert_true(d.layout.kmajor);
    assert_memory_equal(g, &e, sizeof e);
    assert_int_equal(g->var, trl_direct_var(c->cb, m));
    assert_int_equal(g->rows, g->var == TRL_DIRECT_INT8 ? 4 : 8 * g->blocks);
    assert_true(g->blocks == 1 || g->blocks == 2 || g->blocks == 4);
    assert_true(g->var != TRL_DIRECT_INT8 || g->blocks == 1);
    assert_true(g->blocks == 1 || 4 * g->blocks < m); /* the fewest */
    assert_true((int64_t)g->m_blocks * g->rows >= m &&
                (int64_t)(g->m_blocks - 1) * g->rows < m);
    assert_int_equal(g->splits, (c->k / 128 + 7) / 8);
    assert_true(g->cols >= 1 && g->cols <= c->n / 16);
    assert_true(g->cols == 1 ||
                (int64_t)g->splits * g->m_blocks * g->cols <=
                    trl_kmajor_ctas_per_sm(g->blocks) * (int64_t)lp->sm_count);
    assert_int_equal(d.layout.splits, g->splits);
    assert_int_equal(d.input, TRL_INPUT_NONE);
    assert_int_equal(d.output, TRL_OUTPUT_NONE);
    assert_int_equal(d.pdl, pp->pdl);
    /* the gate never opens; past 32 rows only FORCE_DECODE keeps it */
    assert_int_equal(d.path, TRELLIS_PATH_GENERIC);
    assert_true(m < TRL_KMAJOR_DENSE_MIN_M ||
                (c->flags & TRELLIS_PLAN_FORCE_DECODE));
    break;
  }
  case TRL_FAMILY_GEMM:
    assert_int_equal(d.layout.m_blocks, trl_layout_m_blocks(m));
    assert_int_equal(d.input, c->h128 ? TRL_INPUT_EXTERNAL : TRL_INPUT_ROTATE);
    assert_int_equal(d.output,
                     c->h128 ? TRL_OUTPUT_EXTERNAL : TRL_OUTPUT_ROTATE);
    assert_int_equal(d.pdl, pp->pdl);
    break;
  case TRL_FAMILY_DENSE: {
    /* as trellis_run and plan/dense.c decided it */
    const int fold = trl_layout_dense_folds_input(lp, m);
    assert_int_equal(d.input, c->h128 ? TRL_INPUT_EXTERNAL
                              : fold  ? TRL_INPUT_NONE
                                      : TRL_INPUT_ROTATE);
    /* a half rate's or a k-major payload's W_hat is plain */
    const int plain = c->h128 || c->half || c->kmajor;
    assert_false(c->kmajor && (fold || lp->dense_direct));
    assert_int_equal(d.dense.form, plain  ? TRL_RECON_PLAIN
                                   : fold ? TRL_RECON_FULL
                                          : TRL_RECON_HAD);
    assert_int_equal(d.output, lp->dense_direct       ? TRL_OUTPUT_NONE
                               : c->h128              ? TRL_OUTPUT_EXTERNAL
                               : c->half || c->kmajor ? TRL_OUTPUT_ROTATE
                                                      : TRL_OUTPUT_BIAS);
    assert_true(!c->kmajor || m >= TRL_KMAJOR_DENSE_MIN_M ||
                (c->flags & TRELLIS_PLAN_FORCE_DENSE));
    const int b = searched_bucket(pp, MAX_M, m);
    assert_true(b >= 0);
    assert_int_equal(d.dense.bucket, b);
    assert_int_equal(d.pdl, 0);
    seen.form[d.dense.form]++;
    seen.dense_bucket_past_first += b > 0;
    break;
  }
  }
  seen.input[d.input]++;
  seen.output[d.output]++;

  /* what the query reports: the record's sizes, and they hold what it
   * uses */
  trellis_buffer_sizes q;
  memset(&q, 0xff, sizeof q);
  trl_decision_sizes(&d, &q);
  assert_int_equal(q.struct_size, sizeof q);
  assert_int_equal(q.path, d.path);
  assert_int_equal(q.rotated_bytes, d.layout.rotated_bytes);
  assert_int_equal(q.input_f16_bytes, d.layout.input_f16_bytes);
  assert_int_equal(q.output_f16_bytes, d.layout.output_f16_bytes);
  assert_int_equal(q.workspace_bytes, d.layout.workspace_bytes);
  expect_fits(pp, &d, m, c->n, c->k, &q);
}

/* Every case at every m: the record equals the rules. */
static void test_records_match_rules(void **state) {
  (void)state;
  memset(&seen, 0, sizeof seen);
  for (size_t i = 0; i < CASE_COUNT; ++i) {
    trl_path_plan pp;
    trl_layout_params lp;
    fill(&cases[i], 1, &pp, &lp);
    for (size_t j = 0; j < sizeof ms / sizeof ms[0]; ++j) {
      print_message("%s, m = %lld\n", cases[i].name, (long long)ms[j]);
      check(&cases[i], &pp, &lp, ms[j]);
    }
  }
  /* the cases reach every kind of record */
  for (int f = 0; f < 5; ++f)
    assert_true(seen.family[f] > 0);
  for (int s = 0; s < 3; ++s)
    assert_true(seen.input[s] > 0);
  for (int s = 0; s < 4; ++s)
    assert_true(seen.output[s] > 0);
  for (int r = 0; r < 4; ++r)
    assert_true(seen.rotation[r] > 0);
  for (int f = 0; f < 3; ++f)
    assert_true(seen.form[f] > 0);
  assert_true(seen.direct_split > 0);
  assert_true(seen.direct_fused > 0);
  assert_true(seen.fused_pdl_off > 0);
  assert_true(seen.dense_bucket_past_first > 0);
  assert_true(seen.fp32_claims > 0);
}

/* A query before prepare (no fused clusters chosen yet) reports what one
 * after it does: the fused kernel's cluster changes its launch, never the
 * path or the buffers. */
static void test_records_before_prepare(void **state) {
  (void)state;
  for (size_t i = 0; i < CASE_COUNT; ++i) {
    trl_path_plan pp0, pp1;
    trl_layout_params lp0, lp1;
    fill(&cases[i], 0, &pp0, &lp0);
    fill(&cases[i], 1, &pp1, &lp1);
    for (size_t j = 0; j < sizeof ms / sizeof ms[0]; ++j) {
      trl_decision a, b;
      assert_true(trl_decide(&pp0, &lp0, ms[j], &a));
      assert_true(trl_decide(&pp1, &lp1, ms[j], &b));
      assert_int_equal(a.path, b.path);
      assert_int_equal(a.family, b.family);
      expect_layout(&a.layout, &b.layout);
      if (a.family == TRL_FAMILY_FUSED) {
        /* no cluster yet: x rotated before it (or claims) */
        assert_int_equal(a.fused.cluster, 0);
        assert_true(a.fused.rotation == TRL_FUSED_PRE ||
                    a.fused.rotation == TRL_FUSED_CLAIMS);
      }
    }
  }
}

/* Sizes that overflow are refused by the record as by the layout. */
static void test_record_overflow(void **state) {
  (void)state;
  trl_path_plan pp;
  trl_layout_params lp;
  pcase c = cases[0];
  c.k = (int64_t)1 << 40;
  c.n = (int64_t)1 << 40;
  fill(&c, 1, &pp, &lp);
  trl_decision d;
  assert_false(trl_decide(&pp, &lp, (int64_t)1 << 40, &d));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_records_match_rules),
      cmocka_unit_test(test_records_before_prepare),
      cmocka_unit_test(test_record_overflow),
  };
  return cmocka_run_group_tests_name("decision", tests, NULL, NULL);
}
