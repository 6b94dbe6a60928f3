/* SPDX-License-Identifier: Apache-2.0 */
#include "rules/layout.h"

#include "core/size.h"

#include <string.h>

/* Appends a workspace region of `bytes` at the running offset `*at`. */
static int carve(size_t *at, size_t bytes, size_t *off, size_t *len) {
  *len = bytes;
  return trl_carve_size(at, bytes, TRL_WS_ALIGN, off);
}

int trl_layout_m_blocks(int64_t m) {
  int i = 0;
  while (i + 1 < TRL_M_BLOCK_COUNT && 16 * (int64_t)trl_m_block_at(i) < m)
    ++i;
  return trl_m_block_at(i);
}

/* k-splits, in whole stages of 8 tile rows: minimise waves x (stages per
 * split + 2), a wave being the CTAs that fit on the GPU at once and the +2
 * each CTA's ramp (pipeline fill and partial write). */
static void choose_splits(const trl_layout_params *p, int64_t m, int m_blocks,
                          trl_layout *out) {
  const int64_t stages = p->k / 128;
  const int64_t m_ctas = (m + 16 * m_blocks - 1) / (16 * m_blocks);
  const int64_t base = (p->n / 128) * m_ctas;
  const int64_t sms = p->sm_count > 0 ? p->sm_count : 132;
  const int mbi = trl_m_block_index(m_blocks);
  const int64_t per_sm =
      mbi >= 0 && p->ctas_per_sm[mbi] > 0 ? p->ctas_per_sm[mbi] : 2;
  const int64_t wave = sms * per_sm;
  int64_t want = p->pair_k ? 2 : p->split_k;
  if (want <= 0) {
    int64_t best_cost = INT64_MAX;
    want = 1;
    for (int64_t s = 1; s <= stages && s <= 64; ++s) {
      const int64_t per = (stages + s - 1) / s;
      if ((stages + per - 1) / per != s)
        continue; /* s splits would leave one empty: same as fewer */
      const int64_t waves = (base * s + wave - 1) / wave;
      const int64_t cost = waves * (per + 2);
      if (cost < best_cost) {
        best_cost = cost;
        want = s;
      }
    }
  }
  if (want < 1)
    want = 1;
  if (want > stages)
    want = stages;
  int64_t per_stages = (stages + want - 1) / want;
  out->kt_per_split = (int)(per_stages * 8);
  out->splits = (int)((stages + per_stages - 1) / per_stages);
}

int trl_layout_compute(const trl_layout_params *p, trellis_path path, int64_t m,
                       trl_layout *out) {
  trl_direct_grid g;
  const int direct = trl_layout_direct_launch(p, path, m, &g);
  return trl_layout_sizes(p, path, m, direct ? &g : NULL, out);
}

int trl_layout_sizes(const trl_layout_params *p, trellis_path path, int64_t m,
                     const trl_direct_grid *direct, trl_layout *out) {
  memset(out, 0, sizeof *out);
  out->path = path;
  size_t mm = (size_t)m, k = (size_t)p->k, n = (size_t)p->n;
  if (!trl_mul3_size(mm, k, 2, &out->rotated_bytes))
    return 0;
  if (path == TRELLIS_PATH_DENSE && trl_layout_dense_folds_input(p, m))
    out->rotated_bytes = 0;
  size_t at = 0, mn4;
  if (p->kmajor && path == TRELLIS_PATH_GENERIC) {
    /* it rotates x itself; its k-splits' sums are [splits][m][n] fp32 */
    out->rotated_bytes = 0;
    out->kmajor = 1;
    out->kmajor_grid =
        trl_kmajor_shape(p->k, p->n, m, p->codebook, p->sm_count);
    out->splits = out->kmajor_grid.splits;
    size_t rows, part;
    if (!trl_mul_size((size_t)out->splits, mm, &rows) ||
        !trl_mul3_size(rows, n, sizeof(float), &part) ||
        !carve(&at, part, &out->partial_off, &out->partial_bytes))
      return 0;
    return trl_align_size(at, TRL_WS_ALIGN, &out->workspace_bytes);
  }
  if (direct) {
    /* scratch only for k-splits across clusters (generic path) */
    out->direct = 1;
    out->direct_grid = *direct;
    out->splits = out->direct_grid.splits;
    size_t part = 0; /* [splits][m][n] fp32 */
    if (out->splits > 1 &&
        !trl_mul3_size((size_t)out->splits * mm, n, sizeof(float), &part))
      return 0;
    if (!carve(&at, part, &out->partial_off, &out->partial_bytes))
      return 0;
    return trl_align_size(at, TRL_WS_ALIGN, &out->workspace_bytes);
  }
  if (path == TRELLIS_PATH_FUSED || path == TRELLIS_PATH_NONE)
    return 1; /* the fused path needs no scratch */

  if (!trl_mul3_size(mm, n, 4, &mn4))
    return 0;
  if (path == TRELLIS_PATH_GENERIC) {
    out->m_blocks = trl_layout_m_blocks(m);
    choose_splits(p, m, out->m_blocks, out);
  } else { /* dense: one fp32 GEMM output, W_hat slices, cuBLASLt scratch */
    out->m_blocks = 0;
    out->splits = 1;
    out->kt_per_split = (int)(p->k / 16);
    /* as few slices as the cap allows, of equal width (a narrow last
     * slice runs a small, slow GEMM) */
    int64_t cap = TRL_DENSE_SLICE_ELEMS / p->k / 128 * 128;
    if (cap < 128)
      cap = 128;
    const int64_t count = (p->n + cap - 1) / cap;
    int64_t slice = (p->n / 128 + count - 1) / count * 128;
    if (slice > p->n)
      slice = p->n;
    out->slice_n = slice;
  }
  size_t partial = 0;
  if (!(path == TRELLIS_PATH_DENSE && p->dense_direct) &&
      !trl_mul_size((size_t)out->splits, mn4, &partial))
    return 0;
  if (!carve(&at, partial, &out->partial_off, &out->partial_bytes))
    return 0;
  if (p->has_h128) {
    if (out->splits > 1 && !carve(&at, mn4, &out->sums_off, &out->sums_bytes))
      return 0;
    if (!carve(&at, mn4, &out->rotout_off, &out->rotout_bytes))
      return 0;
  }
  if (path == TRELLIS_PATH_DENSE) {
    size_t what;
    if (!trl_mul3_size(k, (size_t)out->slice_n, 2, &what))
      return 0;
    if (!carve(&at, what, &out->what_off, &out->what_bytes))
      return 0;
    if (!carve(&at, TRL_CUBLAS_WS_BYTES, &out->cublas_off, &out->cublas_bytes))
      return 0;
  }
  return trl_align_size(at, TRL_WS_ALIGN, &out->workspace_bytes);
}

int trl_layout_direct_grid(const trl_layout_params *p, trellis_path path,
                           int64_t m, trl_direct_grid *out) {
  if (p->sm_count < 1)
    return 0;
  if (m > TRL_DIRECT_MAX_M)
    return 0;
  const int var = trl_direct_var(p->codebook, m);
  int max_cluster = p->direct_max_cluster > 0 ? p->direct_max_cluster
                                              : TRL_DIRECT_MAX_CLUSTER;
  if (max_cluster > TRL_DIRECT_MAX_CLUSTER)
    max_cluster = TRL_DIRECT_MAX_CLUSTER;
  const int max_splits =
      path == TRELLIS_PATH_GENERIC && p->direct_max_splits > 1
          ? p->direct_max_splits
          : 1;
  /* the parked form's shape where it fits, else the streaming one's */
  if (p->direct_park &&
      trl_direct_park_shape(
          p->k, p->n, m, p->codebook, p->sm_count, max_cluster,
          p->direct_force_cluster,
          p->direct_active[trl_direct_park_var(p->codebook, m)], max_splits,
          out))
    return 1;
  return trl_direct_shape(
      p->k, p->n, m, p->codebook, p->sm_count, p->direct_regs[var], max_cluster,
      p->direct_force_cluster, p->direct_active[var], max_splits, out);
}

int trl_layout_direct_launch(const trl_layout_params *p, trellis_path path,
                             int64_t m, trl_direct_grid *out) {
  /* up to 8 rows: its two-token-block form (9..16 rows) measured slower
   * than the fused cluster kernel and the split-K decode-GEMM on every
   * bench layer, the half rates' too, and is gone (docs/TUNING.md) */
  if (p->direct && m <= TRL_DIRECT_MAX_M &&
      (path == TRELLIS_PATH_FUSED || path == TRELLIS_PATH_GENERIC) &&
      trl_layout_direct_grid(p, path, m, out))
    return 1;
  memset(out, 0, sizeof *out);
  return 0;
}

int64_t trl_layout_dense_bucket_m(int64_t first, int i) {
  int64_t b = first;
  for (; i > 0 && b < ((int64_t)1 << 62); --i) {
    int64_t next = 1;
    while (next <= b)
      next *= 2;
    b = next;
  }
  return b;
}

int trl_layout_dense_bucket(int64_t first, int64_t m) {
  int i = 0;
  while (i < TRL_DENSE_BUCKETS && trl_layout_dense_bucket_m(first, i) < m)
    ++i;
  return i;
}
