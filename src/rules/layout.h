/* SPDX-License-Identifier: Apache-2.0 */
/* Buffer layout of one run and the kernel-choice rules for m rows. Pure C,
 * no CUDA. trellis_plan_query and trellis_run read them through one
 * decision record per (plan, m) (rules/decision.h), so size and use cannot
 * disagree. */
#ifndef TRL_PLAN_LAYOUT_H
#define TRL_PLAN_LAYOUT_H

#include "plan/direct_rules.h"
#include "rules/kernel_config.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRL_WS_ALIGN 256
#define TRL_CUBLAS_WS_BYTES ((size_t)32 << 20)
/* Most elements of the W_hat slice the dense path decodes at a time (128
 * MiB of fp16): one slice up to 14336x4096, 4 for 8192x28672. */
#define TRL_DENSE_SLICE_ELEMS ((int64_t)64 << 20)
/* Most cuBLASLt algorithm buckets a dense plan keeps. */
#define TRL_DENSE_BUCKETS 16

typedef struct trl_layout_params {
  int64_t k, n;
  int sm_count;
  int split_k;      /* forced k-splits (0 = automatic) */
  int has_h128;     /* external rotation: stages fp32 sums through scratch */
  int dense_direct; /* dense path: cuBLASLt writes y itself (no partial) */
  int dense_fold_input; /* dense path may take x itself (x dtype = compute) */
  /* decode-GEMM CTAs resident per SM, per m-block variant (0 unknown) */
  int ctas_per_sm[TRL_M_BLOCK_COUNT];
  /* the register-direct kernel can run this plan (direct_rules.h): its
   * codebook and rate, registers per thread of each multiply's variant,
   * and its clusters: the largest size and, per size,
   * how many fit the GPU at once (0: unknown, assumed unlimited) */
  int direct;
  trellis_codebook codebook;
  int rate;
  int direct_regs[3]; /* per TRL_DIRECT_* multiply */
  int direct_max_cluster, direct_force_cluster;
  int direct_max_splits; /* k-splits across clusters, generic path (0: 1) */
  int direct_park;       /* the parked form where it fits (TRL_DIRECT_PARK) */
  int direct_active[3][TRL_DIRECT_MAX_CLUSTER + 1];
  /* a k-major payload: the generic path runs the k-major kernel
   * (trl_kmajor_shape, direct_rules.h), its codebook and rate above */
  int kmajor;
  /* a pair on the k axis (k = 256): the decode-GEMM runs one k-split per
   * record, whatever split_k asks */
  int pair_k;
  /* the fused kernel's cluster size per m-block variant (index
   * trl_m_block_index; prepare's choice, 0 before) */
  int fused_cluster[TRL_M_BLOCK_COUNT];
} trl_layout_params;

typedef struct trl_layout {
  trellis_path path;
  int m_blocks;     /* 16-row blocks per CTA of the decode-GEMM */
  int splits;       /* k-splits: fp32 partial slices */
  int kt_per_split; /* tile rows (16 k) per split, multiple of 8 */
  int64_t slice_n;  /* dense path: W_hat columns decoded per GEMM */
  size_t partial_off, partial_bytes; /* fp32 [splits][m][n] (or none) */
  size_t sums_off, sums_bytes;       /* fp32 [m][n], external rotation */
  size_t rotout_off, rotout_bytes;   /* fp32 [m][n], external rotation */
  /* the register-direct kernel runs it (trl_layout_direct) in this
   * launch shape; partial_* then holds its k-splits' sums, if any */
  int direct;
  trl_direct_grid direct_grid;
  /* the k-major kernel runs it (generic path of a k-major payload) in this
   * launch shape; partial_* holds its k-splits' sums */
  int kmajor;
  trl_kmajor_grid kmajor_grid;
  size_t what_off, what_bytes;     /* fp16 [k][slice_n], dense path */
  size_t cublas_off, cublas_bytes; /* cuBLASLt workspace, dense path */
  size_t workspace_bytes;          /* total scratch (0 on the fused path) */
  size_t rotated_bytes;            /* fp16 [m][k] */
  size_t input_f16_bytes, output_f16_bytes;
} trl_layout;

/* Whether the dense path folds the input rotation into its weight at m
 * rows: that skips a pass over x ([m, k]) but the weight's reconstruct
 * (over [k, n]) costs more; the pass over x costs more from about
 * m >= 2n/3 (docs/TUNING.md, "Dense path: the input rotation folded from
 * m >= 2n/3"). */
static inline int trl_layout_dense_folds_input(const trl_layout_params *p,
                                               int64_t m) {
  return p->dense_fold_input && 3 * m >= 2 * p->n;
}

/* 128-k blocks (ring stages) each CTA of the fused kernel runs: its
 * cluster of `cluster` CTAs splits k evenly (cluster >= 1). */
static inline int64_t trl_layout_fused_stages(int64_t k, int cluster) {
  return (k / 128 + cluster - 1) / cluster;
}

/* Whether the fused kernel rotates x in every CTA (m <= 8, the kernel's
 * TRL_FUSED_LOCAL_ROWS; no rotation claims shared between CTAs) rather
 * than claiming 128-k blocks of the rotated buffer: the claims are a fixed
 * wait per CTA (a CTA of a later wave finds its blocks ready), the local
 * rotation costs every CTA a few percent per row. Local where the grid
 * leaves SMs idle, where the CTAs are short (m x k-blocks per CTA <= 16),
 * or up to 32 when the grid is one wave (TRL_FUSED_CTAS_PER_SM per
 * SM): the bounds where local wins (docs/TUNING.md, "Fused kernel: local
 * input rotation"). */
static inline int trl_layout_fused_local(int64_t m, int64_t k, int64_t n,
                                         int cluster, int sm_count) {
  if (m > TRL_FUSED_LOCAL_ROWS || cluster < 1)
    return 0;
  const int64_t ctas = (n / 128) * cluster;
  const int64_t rows = m * trl_layout_fused_stages(k, cluster);
  return ctas <= sm_count || rows <= 16 ||
         (rows <= 32 && ctas <= (int64_t)TRL_FUSED_CTAS_PER_SM * sm_count);
}

/* Whether a local rotation (above) is done before the ring: where every
 * CTA's rows x k-blocks fit the kernel's area for them
 * (TRL_FUSED_PRE_ROWS). Rotating each stage's rows as it enters the
 * ring makes one warp per row late to the stage barrier. */
static inline int trl_layout_fused_ahead(int64_t m, int64_t k, int cluster) {
  return cluster >= 1 &&
         m * trl_layout_fused_stages(k, cluster) <= TRL_FUSED_PRE_ROWS;
}

/* How the fused cluster kernel gets x rotated for m rows: locally in its
 * CTAs where trl_layout_fused_local says so (before the ring where
 * trl_layout_fused_ahead does), else by the input-rotation kernel launched
 * before it (PRE): the claims between CTAs (LEGACY_KERNELS) make them wait
 * on each other's rotations (docs/TUNING.md, "Fused kernel: x rotated
 * before it (PRE) instead of claims"). */
static inline trl_fused_rotation
trl_layout_fused_rotation(int64_t m, int64_t k, int64_t n, int cluster,
                          int sm_count, int legacy) {
  if (!trl_layout_fused_local(m, k, n, cluster, sm_count))
    return legacy ? TRL_FUSED_CLAIMS : TRL_FUSED_PRE;
  return trl_layout_fused_ahead(m, k, cluster) ? TRL_FUSED_LOCAL_AHEAD
                                               : TRL_FUSED_LOCAL;
}

/* The form the kernel can run for x of `in_dtype`: it rotates 16-bit x
 * only, so fp32 x takes the claims where trl_layout_fused_rotation says
 * local. (Its launcher, cuda/fused_k6.cu, falls back the same way, and
 * also where x is not on 8-byte boundaries, which only run knows.) */
static inline trl_fused_rotation
trl_layout_fused_rotation_for(trl_fused_rotation r, trellis_dtype in_dtype) {
  return in_dtype == TRELLIS_F32 &&
                 (r == TRL_FUSED_LOCAL || r == TRL_FUSED_LOCAL_AHEAD)
             ? TRL_FUSED_CLAIMS
             : r;
}

/* Whether the fused kernel is launched as a programmatic dependent launch:
 * it streams its first weight stages while the stream's previous kernel
 * finishes (see griddep_wait): a gain where its CTAs run two or more
 * k-blocks, a loss where they run one (docs/TUNING.md, "Fused kernel: a
 * dependent launch where its CTAs run two k-blocks"). */
static inline int trl_layout_fused_pdl(int64_t k, int cluster) {
  return cluster >= 1 && trl_layout_fused_stages(k, cluster) >= 2;
}

/* The register-direct kernel's launch for m rows (trl_direct_shape with
 * the plan's registers and cluster limits). 0 when none fits.
 * On the generic path k may be split across clusters (workspace partials
 * and a finishing launch); on the fused path never (its contract: no
 * workspace). trl_layout_direct: whether it runs m rows on `path`: up to 8
 * rows on the fused and the generic path wherever the plan can run it and a
 * launch fits. Otherwise the fused cluster kernel (fused path) or the split-K
 * decode-GEMM. */
int trl_layout_direct_grid(const trl_layout_params *p, trellis_path path,
                           int64_t m, trl_direct_grid *out);
/* trl_layout_direct, and the launch in `out` where it runs (zeroed where it
 * does not): the shape is computed once. */
int trl_layout_direct_launch(const trl_layout_params *p, trellis_path path,
                             int64_t m, trl_direct_grid *out);
static inline int trl_layout_direct(const trl_layout_params *p,
                                    trellis_path path, int64_t m) {
  trl_direct_grid g;
  return trl_layout_direct_launch(p, path, m, &g);
}

/* Fills `out` for `path` at m rows. Returns 0 on size overflow. */
int trl_layout_compute(const trl_layout_params *p, trellis_path path, int64_t m,
                       trl_layout *out);
/* The same, with the register-direct kernel's launch already decided:
 * `direct` is trl_layout_direct_launch's grid where it runs m rows on
 * `path`, NULL where it does not. */
int trl_layout_sizes(const trl_layout_params *p, trellis_path path, int64_t m,
                     const trl_direct_grid *direct, trl_layout *out);

/* The dense path's cuBLASLt algorithm buckets: bucket 0 serves m up to
 * `first`, each next one up to the smallest power of two above the one
 * before (192 -> 256 -> 512 ...), so every m runs with the algorithm of the
 * smallest bucket that holds it: one picked for a larger m can be far
 * slower (docs/TUNING.md, "Dense path: cuBLASLt algorithm buckets").
 * trl_layout_dense_bucket_m: the largest m of bucket i (before prepare caps
 * the last at max_m); trl_layout_dense_bucket: the bucket of m rows
 * (TRL_DENSE_BUCKETS where it is past the last bucket a plan can keep). */
int64_t trl_layout_dense_bucket_m(int64_t first, int i);
int trl_layout_dense_bucket(int64_t first, int64_t m);

/* 16-row blocks per CTA the decode-GEMM and the fused kernel use for m
 * rows: the smallest variant that holds m rows, else the largest. */
int trl_layout_m_blocks(int64_t m);

#ifdef __cplusplus
}
#endif

#endif
