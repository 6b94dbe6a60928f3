/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct decode-GEMM's rules (cuda/direct_gemm.cuh): which
 * variants exist, its shared-memory layout and how a launch is shaped.
 * Pure C, read by the plan (query and run, tests/test_gate.c without a GPU)
 * and by the kernel itself, so the two cannot disagree. */
#ifndef TRL_PLAN_DIRECT_RULES_H
#define TRL_PLAN_DIRECT_RULES_H

#include "format/codebooks.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define TRL_DIRECT_FN __host__ __device__ __forceinline__ constexpr
#else
#define TRL_DIRECT_FN static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The rates (half-bits per weight, 2K) it is compiled for: K 1..8 and the
 * half rates 1.5, 2.5, 3.5. */
#define TRL_DIRECT_RATES 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16
/* How the tensor cores multiply (see the kernel's header). */
#define TRL_DIRECT_HALVES 0 /* 3INST, MCG: the two fp16 halves summed */
#define TRL_DIRECT_AFFINE 1 /* MUL1: fp16 1024 + S, the affine map after */
#define TRL_DIRECT_INT8 2   /* MUL1, m <= 4: int8 MMA, s8 activation limbs */
#define TRL_DIRECT_MAX_M 8  /* rows: one block of tokens, the MMA's n */
#define TRL_DIRECT_INT8_MAX_M 4
#define TRL_DIRECT_WARPS 8
#ifndef TRL_DIRECT_CTAS_PER_SM
#define TRL_DIRECT_CTAS_PER_SM 2 /* its launch bounds */
#endif
#define TRL_DIRECT_ROW_PITCH 132 /* floats per token row of the sums */
#define TRL_DIRECT_MAX_CLUSTER 16
/* The most shared memory one CTA may take (an SM has 228 KiB, 1 KiB of it
 * reserved per CTA). */
#define TRL_DIRECT_MAX_SMEM (227 * 1024)

/* Whether `ctas` CTAs of `bytes` of shared memory each fit one SM. */
TRL_DIRECT_FN int trl_direct_smem_fits(size_t bytes, int ctas) {
  return bytes <= TRL_DIRECT_MAX_SMEM &&
         (size_t)ctas * (bytes + 1024) <= 228 * 1024;
}

/* Whether the kernel has the variant: a rate the codebook takes (half
 * rates only with MUL1: format/codebooks.h), the halves only for
 * 3INST/MCG, the affine and int8 forms only for MUL1. */
TRL_DIRECT_FN int trl_direct_variant_exists(int h, int cb, int var) {
  return trl_codebook_rate_valid(cb, h / 2, h % 2) &&
         (var == TRL_DIRECT_HALVES
              ? cb == TRELLIS_CB_3INST || cb == TRELLIS_CB_MCG
              : cb == TRELLIS_CB_MUL1);
}

/* Groups in flight per warp: 2, 3 at K 6 (where the two-stage ring
 * measured slower) (docs/TUNING.md, "groups in flight": the kernel is
 * bound by issue, not by loads in flight, and every stage is one more
 * unrolled copy of the decode). TRL_DIRECT_STAGES_FORCE (measurement
 * builds only) sets the count; 0 restores the earlier rule of about 36
 * payload registers. */
TRL_DIRECT_FN int trl_direct_stages(int h) {
#ifdef TRL_DIRECT_STAGES_FORCE
  if (TRL_DIRECT_STAGES_FORCE > 0)
    return TRL_DIRECT_STAGES_FORCE;
  return 36 / h < 2 ? 2 : 36 / h > 6 ? 6 : 36 / h;
#else
  return h == 12 ? 3 : 2;
#endif
}

typedef struct trl_direct_smem {
  int xs_pitch; /* bytes per activation row */
  int wbufs;    /* buffers of the warps' sums: rounds in flight */
  size_t off_sumx, off_scale, off_wpart, off_cbuf, off_park, bytes;
} trl_direct_smem;

/* The parked form (cuda/direct_gemm.cuh, direct_park_kernel): a CTA whose
 * whole share fits in half an SM's shared memory decodes it before
 * griddepcontrol.wait into fp16 A-operand tiles (16 n x 16 k, 512 bytes
 * each, a lane's four words side by side); after the wait warp w
 * multiplies n-tile w of every k-tile, so no warps' sums meet. Plans take
 * it where its shape fits (trl_direct_park_shape; bench/RESULTS.md, "The
 * parked form on its own shape"); TRL_DIRECT_PARK 0 (a measurement build)
 * never parks, and the tests run both forms through their hook. */
#ifndef TRL_DIRECT_PARK
#define TRL_DIRECT_PARK 1
#endif
#define TRL_DIRECT_PARK_TILE_BYTES 512

/* Buffers of the warps' sums for m rows and `rounds` rounds: two (a
 * round's owner warp adds them while the others run the next round) where
 * there is a next round and they stay small, else one (the others wait
 * only for its read, before their next flush). */
TRL_DIRECT_FN int trl_direct_wbufs(int m, int rounds) {
  return m <= 4 && rounds > 1 ? 2 : 1;
}

/* The CTA's shared memory for m rows (tokens), a k share of kt_cta k-tiles
 * (a multiple of 8) and `rounds` groups: activations (a row per token, or
 * two s8 limb rows with kInt8, of pitch bytes: 16 bytes of padding so the
 * lanes' B-operand loads hit distinct banks), per-k-tile sums, per-block
 * scales, the warps' sums (wbufs rounds of them; none when parked) and the
 * CTA's sums of every round, then (park) the decoded tiles of every round
 * and k-tile, [round][k-tile][n-tile]. Sized by m, not by the variant's
 * widest m: what shared memory leaves free is the L1 that the payload's
 * loads stream through. */
TRL_DIRECT_FN trl_direct_smem trl_direct_smem_layout(int var, int m, int kt_cta,
                                                     int rounds, int park) {
  const int tokens = m;
  const int rows = var == TRL_DIRECT_INT8 ? 2 * m : m;
  const int elem = var == TRL_DIRECT_INT8 ? 1 : 2;
  trl_direct_smem s = {0, 0, 0, 0, 0, 0, 0, 0};
  s.wbufs = park ? 0 : trl_direct_wbufs(m, rounds);
  s.xs_pitch = 16 * kt_cta * elem + 16;
  size_t at = (size_t)rows * (size_t)s.xs_pitch;
  s.off_sumx = at;
  at += var == TRL_DIRECT_HALVES ? 0 : (size_t)kt_cta * tokens * 4;
  s.off_scale = at;
  at += var == TRL_DIRECT_INT8 ? (size_t)(kt_cta / 8) * tokens * 4 : 0;
  at = (at + 15) / 16 * 16;
  s.off_wpart = at;
  at += (size_t)s.wbufs * TRL_DIRECT_WARPS * tokens * TRL_DIRECT_ROW_PITCH * 4;
  s.off_cbuf = at;
  at += (size_t)rounds * tokens * TRL_DIRECT_ROW_PITCH * 4;
  s.off_park = at;
  if (park)
    at += (size_t)rounds * (size_t)kt_cta * 8 * TRL_DIRECT_PARK_TILE_BYTES;
  s.bytes = at;
  return s;
}

/* How one launch is shaped. */
typedef struct trl_direct_grid {
  int var;      /* the variant's multiply */
  int cluster;  /* CTAs per cluster, each a share of k */
  int clusters; /* `splits` of them take 128-column groups in rounds */
  int splits;   /* k-splits across clusters (workspace partials) */
  int rounds;   /* groups of the busiest cluster */
  int kt_cta;   /* k-tiles of the largest share */
  size_t smem_bytes;
  int ctas_per_sm;
  int park; /* the parked form (var then halves or affine) */
} trl_direct_grid;

/* The variant for m rows of codebook cb: int8 for MUL1 up to 4 rows. */
static inline int trl_direct_var(trellis_codebook cb, int64_t m) {
  if (cb != TRELLIS_CB_MUL1)
    return TRL_DIRECT_HALVES;
  return m <= TRL_DIRECT_INT8_MAX_M ? TRL_DIRECT_INT8 : TRL_DIRECT_AFFINE;
}

/* The parked form's variant: MUL1 parks in the affine form (fp16 1024 + S,
 * two bytes a weight; the int8 form's operands are four), 3INST/MCG park
 * W_hat. */
static inline int trl_direct_park_var(trellis_codebook cb, int64_t m) {
  const int var = trl_direct_var(cb, m);
  return var == TRL_DIRECT_INT8 ? TRL_DIRECT_AFFINE : var;
}

/* Takes the launch `g` of cost `cost` into *out where it is the cheapest
 * so far (*best < 0: none yet). */
static inline void trl_direct_keep(double cost, const trl_direct_grid *g,
                                   double *best, trl_direct_grid *out) {
  if (*best < 0 || cost < *best) {
    *best = cost;
    *out = *g;
  }
}

/* What a k-split across clusters costs beyond its shares, in the cost's
 * units (k-tiles of the busiest warp): the partials' round trip and the
 * finishing launch (docs/TUNING.md, "Register-direct kernel: k-splits
 * across clusters"). */
#ifndef TRL_DIRECT_SPLIT_COST
#define TRL_DIRECT_SPLIT_COST 2.0
#endif
/* The prologue's batches of loads per warp (stage_x: a warp per (token,
 * 128-k block) unit, TRL_DIRECT_STAGE_BATCH(var) units' loads at once)
 * for m tokens and a share of `blocks` 128-k blocks, and what one costs:
 * every CTA of the grid reads the same x before it streams. */
#define TRL_DIRECT_STAGE_BATCH(var) ((var) == TRL_DIRECT_INT8 ? 2 : 4)
TRL_DIRECT_FN int64_t trl_direct_stage_batches(int var, int64_t m,
                                               int64_t blocks) {
  const int64_t per = (int64_t)TRL_DIRECT_WARPS * TRL_DIRECT_STAGE_BATCH(var);
  return (m * blocks + per - 1) / per;
}
#ifndef TRL_DIRECT_STAGE_COST
#define TRL_DIRECT_STAGE_COST 2.0
#endif
/* What a round costs beyond its k-tiles (its flush and sum), same units. */
#ifndef TRL_DIRECT_ROUND_COST
#define TRL_DIRECT_ROUND_COST 1.0
#endif
#define TRL_DIRECT_MAX_SPLITS 16

/* The shape's cost for m rows: clusters of c CTAs, `rounds` groups each, a
 * share of `share` 128-k blocks per CTA (k-tiles per warp), k split
 * `splits` ways across clusters. */
TRL_DIRECT_FN double trl_direct_cost(int var, int64_t m, int c, int64_t rounds,
                                     int64_t share, int splits) {
  return (double)(rounds * share) + TRL_DIRECT_ROUND_COST * (double)rounds +
         0.125 * (double)c +
         TRL_DIRECT_STAGE_COST *
             (double)trl_direct_stage_batches(var, m, share) +
         (splits > 1 ? TRL_DIRECT_SPLIT_COST : 0.0);
}

/* The launch for m rows of a k x n layer on sm_count SMs, `regs`
 * registers per thread for its variant (0: the launch bounds' cap) and
 * clusters of up to max_cluster CTAs (exactly `force` where that fits;
 * 0: any), of which active[c] fit the GPU at once (NULL or 0: no limit
 * known, -1: none), and up to max_splits k-splits across clusters (1 where
 * there is no workspace): the shape minimising the k-tiles of the busiest
 * warp, plus one per round (each ends with a barrier), one eighth per CTA of
 * a cluster (its sums are read once more by the owner) and
 * TRL_DIRECT_SPLIT_COST where k is split across clusters; the grid never
 * asks for more clusters than fit at once. Returns 0 when no shape fits
 * (shared memory). */
static inline int trl_direct_shape(int64_t k, int64_t n, int64_t m,
                                   trellis_codebook cb, int sm_count, int regs,
                                   int max_cluster, int force,
                                   const int *active, int max_splits,
                                   trl_direct_grid *out) {
  const int64_t kblocks = k / 128, groups = n / 128;
  const int var = trl_direct_var(cb, m);
  const trl_direct_grid none = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  *out = none;
  if (m < 1 || m > TRL_DIRECT_MAX_M)
    return 0;
  int reg_ctas = TRL_DIRECT_CTAS_PER_SM;
  if (regs > 0) {
    const int per = ((regs + 7) / 8 * 8) * 32 * TRL_DIRECT_WARPS;
    reg_ctas = 65536 / per;
    if (reg_ctas > TRL_DIRECT_CTAS_PER_SM)
      reg_ctas = TRL_DIRECT_CTAS_PER_SM;
  }
  if (max_splits > TRL_DIRECT_MAX_SPLITS)
    max_splits = TRL_DIRECT_MAX_SPLITS;
  double best = -1.0;
  for (int c = 1; c <= max_cluster && c <= kblocks; c++) {
    if (force > 0 && c != force)
      continue;
    if (active != NULL && active[c] < 0)
      continue; /* clusters of c CTAs do not fit this GPU */
    for (int sp = 1; sp <= max_splits && (int64_t)sp * c <= kblocks; ++sp) {
      const int64_t parts = (int64_t)sp * c;
      const int64_t share = (kblocks + parts - 1) / parts; /* 128-k blocks */
      int64_t q = (int64_t)sm_count * reg_ctas / c; /* clusters that fit */
      if (active != NULL && active[c] > 0 && q > active[c])
        q = active[c];
      q /= sp; /* groups at once */
      if (q > groups)
        q = groups;
      if (q < 1)
        continue;
      int64_t rounds = (groups + q - 1) / q;
      trl_direct_smem s =
          trl_direct_smem_layout(var, (int)m, (int)(8 * share), (int)rounds, 0);
      int ctas = 0; /* CTAs per SM its shared memory allows */
      for (int t = reg_ctas; t >= 1 && ctas == 0; --t)
        if (trl_direct_smem_fits(s.bytes, t))
          ctas = t;
      if (ctas == 0)
        continue;
      if (ctas < reg_ctas) { /* one CTA per SM: fewer clusters, more rounds */
        q = (int64_t)sm_count * ctas / c;
        if (active != NULL && active[c] > 0 && q > active[c] / 2)
          q = active[c] / 2 > 0 ? active[c] / 2 : 1;
        q /= sp;
        if (q > groups)
          q = groups;
        if (q < 1)
          continue;
        rounds = (groups + q - 1) / q;
        s = trl_direct_smem_layout(var, (int)m, (int)(8 * share), (int)rounds,
                                   0);
        if (s.bytes > TRL_DIRECT_MAX_SMEM)
          continue;
      }
      const trl_direct_grid g = {var,     c,           (int)(q * sp),
                                 sp,      (int)rounds, (int)(8 * share),
                                 s.bytes, ctas,        0};
      trl_direct_keep(trl_direct_cost(var, m, c, rounds, share, sp), &g, &best,
                      out);
    }
  }
  return best >= 0;
}

/* The parked form's own shape for m rows (0: none fits): at most one CTA
 * of the layer per SM and at most half an SM's shared memory a CTA, so
 * that every SM keeps room for a CTA of the next launch, which then
 * decodes its share before its griddepcontrol.wait while this one
 * finishes (docs/TUNING.md, "the parked form"). The clusters, k-splits
 * and cost are trl_direct_shape's; a cluster size takes at most half the
 * clusters active[c] says fit at two CTAs per SM; the variant is
 * trl_direct_park_var's. */
static inline int trl_direct_park_shape(int64_t k, int64_t n, int64_t m,
                                        trellis_codebook cb, int sm_count,
                                        int max_cluster, int force,
                                        const int *active, int max_splits,
                                        trl_direct_grid *out) {
  const int64_t kblocks = k / 128, groups = n / 128;
  const int var = trl_direct_park_var(cb, m);
  const trl_direct_grid none = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  *out = none;
  if (m < 1 || m > TRL_DIRECT_MAX_M)
    return 0;
  if (max_splits > TRL_DIRECT_MAX_SPLITS)
    max_splits = TRL_DIRECT_MAX_SPLITS;
  double best = -1.0;
  for (int c = 1; c <= max_cluster && c <= kblocks; c++) {
    if ((force > 0 && c != force) || (active != NULL && active[c] < 0))
      continue;
    for (int sp = 1; sp <= max_splits && (int64_t)sp * c <= kblocks; ++sp) {
      const int64_t share = (kblocks + (int64_t)sp * c - 1) / ((int64_t)sp * c);
      int64_t q = (int64_t)sm_count / c; /* one CTA per SM */
      if (active != NULL && active[c] > 0 && q > active[c] / 2)
        q = active[c] / 2;
      q /= sp;
      if (q > groups)
        q = groups;
      if (q < 1)
        continue;
      const int64_t rounds = (groups + q - 1) / q;
      const trl_direct_smem s =
          trl_direct_smem_layout(var, (int)m, (int)(8 * share), (int)rounds, 1);
      if (!trl_direct_smem_fits(s.bytes, 2))
        continue; /* no room left for the next launch's CTA */
      const trl_direct_grid g = {var,     c,           (int)(q * sp),
                                 sp,      (int)rounds, (int)(8 * share),
                                 s.bytes, 1,           1};
      trl_direct_keep(trl_direct_cost(var, m, c, rounds, share, sp), &g, &best,
                      out);
    }
  }
  return best >= 0;
}

/* One launch (what the plan hands the launcher). */
typedef struct trl_direct_launch {
  const int16_t *payload; /* lane layout */
  const void *x;
  const uint16_t *s_in, *s_out, *bias;
  void *y;
  float *partial; /* grid.splits > 1: [splits][m][n] of workspace */
  int64_t m, k, n;
  int rate; /* half-bits per weight */
  trellis_codebook codebook;
  int in_dtype, out_dtype;
  int pdl;
  trl_direct_grid grid;
} trl_direct_launch;

/* ------------------------------------------------ the k-major kernel -- */
/* cuda/kmajor_gemm.cuh, on a k-major payload (TRELLIS_LAYOUT_KMAJOR):
 * warp w of a CTA of k-split s owns the 128-k slice 8 s + w and walks a
 * contiguous range of n-tiles (the CTA's column); a CTA serves a block of
 * up to 8, 16 or 32 rows (4 for int8) with one decode of each tile, the
 * blocks of larger m each taking their own CTAs, the block index varying
 * fastest so one weight range is read by its blocks at about the same
 * time. The k-splits' fp32 sums always go through the workspace partials
 * and one finishing launch. */
/* Up to 32 rows, then the dense path (docs/TUNING.md). */
#define TRL_KMAJOR_DENSE_MIN_M 33
/* 8-row sub-blocks a CTA serves at most: 1, 2 or 4 (the kernel's
 * variants). A tuning constant (docs/TUNING.md); measurement builds may
 * set it. */
#ifndef TRL_KMAJOR_MAX_BLOCKS
#define TRL_KMAJOR_MAX_BLOCKS 4
#endif

/* CTAs an SM hold (the kernel's launch bounds): 32 rows' activations and
 * sums leave shared memory for one. */
TRL_DIRECT_FN int trl_kmajor_ctas_per_sm(int blocks) {
  return blocks >= 4 ? 1 : 2;
}

/* How a CTA's n-tiles [nt0, nt0 + count) are shared among its warp groups:
 * a layer of fewer than 8 slices of k (k < 1024) puts the warps of its
 * `per` slices (trl_kmajor_group_warps) into 8 / per groups, 1, 2, 4 or 8 =
 * 1 << lg (trl_kmajor_group_log2), so a group's range is worked out with
 * shifts; group i takes the n-tiles nt0 + first .. + tiles - 1. */
TRL_DIRECT_FN int trl_kmajor_group_warps(int64_t kslices) {
  return kslices < TRL_DIRECT_WARPS ? (int)kslices : TRL_DIRECT_WARPS;
}
TRL_DIRECT_FN int trl_kmajor_group_log2(int per) {
  return per <= 1 ? 3 : per == 2 ? 2 : per <= 4 ? 1 : 0;
}
TRL_DIRECT_FN int64_t trl_kmajor_group_first(int64_t count, int i, int lg) {
  return (count * i) >> lg;
}
TRL_DIRECT_FN int64_t trl_kmajor_group_tiles(int64_t count, int i, int lg) {
  return ((count * (i + 1)) >> lg) - ((count * i) >> lg);
}

typedef struct trl_kmajor_grid {
  int var;      /* TRL_DIRECT_* multiply (trl_direct_var of m) */
  int blocks;   /* 8-row sub-blocks a CTA serves: 1, 2 or 4 (int8: 1) */
  int rows;     /* rows a block: 8 x blocks, or 4 for int8 */
  int m_blocks; /* row blocks */
  int splits;   /* k-splits (CTA rows): ceil(k / 1024) */
  int cols;     /* CTA columns: contiguous ranges of n-tiles */
} trl_kmajor_grid;

/* Its launch for m >= 1 rows of a k x n layer on sm_count SMs: the fewest
 * sub-blocks (1, 2, 4) that hold m, up to TRL_KMAJOR_MAX_BLOCKS; as many
 * CTAs as the SMs hold (at least one column a split and block, at most an
 * n-tile a column). */
static inline trl_kmajor_grid trl_kmajor_shape(int64_t k, int64_t n, int64_t m,
                                               trellis_codebook cb,
                                               int sm_count) {
  trl_kmajor_grid g;
  g.var = trl_direct_var(cb, m);
  g.blocks = 1;
  if (g.var != TRL_DIRECT_INT8)
    while (g.blocks < TRL_KMAJOR_MAX_BLOCKS &&
           (int64_t)g.blocks * TRL_DIRECT_MAX_M < m)
      g.blocks *= 2;
  g.rows = g.var == TRL_DIRECT_INT8 ? TRL_DIRECT_INT8_MAX_M
                                    : g.blocks * TRL_DIRECT_MAX_M;
  g.m_blocks = (int)((m + g.rows - 1) / g.rows);
  g.splits = (int)((k / 128 + TRL_DIRECT_WARPS - 1) / TRL_DIRECT_WARPS);
  int64_t c = (int64_t)trl_kmajor_ctas_per_sm(g.blocks) *
              (sm_count > 0 ? sm_count : 1) / ((int64_t)g.splits * g.m_blocks);
  if (c > n / 16)
    c = n / 16;
  g.cols = c < 1 ? 1 : (int)c;
  return g;
}

#ifdef __cplusplus
}
#endif

#endif
