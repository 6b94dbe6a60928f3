/* SPDX-License-Identifier: Apache-2.0 */
/* CPU reference forward: y = Hblk(Hblk(x * s_in) . W_hat) * s_out + bias.
 *
 * Numerics (see trellis.h): the rotated input is rounded to fp16 exactly as
 * the GPU does it, the product accumulates in fp32 over k in increasing
 * order, and the output rotation, scale and bias run in fp32 before one
 * rounding to the output dtype. Each output column is computed by exactly
 * one thread with the same operation order, so the result does not depend
 * on the thread count. */
#include "core/internal.h"
#include "format/codebook.h"
#include "format/hadamard.h"
#include "format/sqg.h"
#include "format/tile.h"
#include "format/weight.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define MAX_THREADS 256
#define WS_ALIGN 64
/* Adjacent column tiles decoded per k step: their payloads are contiguous. */
#define TILE_GROUP 8

/* Workspace: fp32 rotated input [m][k] (fp16-representable values), fp32
 * z [m][n], fp32 s_in [k] and s_out [n], each 64-byte aligned inside a
 * caller buffer of any alignment. */
typedef struct workspace_layout {
  size_t rotated, z, s_in, s_out; /* offsets from the aligned base */
  size_t total;                   /* bytes the caller must provide */
} workspace_layout;

static int add_section(size_t *cursor, size_t count, size_t *offset) {
  size_t bytes;
  return trl_mul_size(count, sizeof(float), &bytes) &&
         trl_carve_size(cursor, bytes, WS_ALIGN, offset);
}

static int plan_workspace(int64_t k, int64_t n, int64_t m,
                          workspace_layout *out) {
  size_t mk, mn, cursor = 0;
  if (k <= 0 || n <= 0 || m <= 0 || !trl_mul_size((size_t)m, (size_t)k, &mk) ||
      !trl_mul_size((size_t)m, (size_t)n, &mn))
    return 0;
  if (!add_section(&cursor, mk, &out->rotated) ||
      !add_section(&cursor, mn, &out->z) ||
      !add_section(&cursor, (size_t)k, &out->s_in) ||
      !add_section(&cursor, (size_t)n, &out->s_out) ||
      !trl_align_size(cursor, WS_ALIGN, &cursor) ||
      !trl_add_size(cursor, WS_ALIGN - 1, &out->total))
    return 0;
  return 1;
}

size_t trellis_cpu_workspace_size(const trellis_weight *w, int64_t m,
                                  int threads) {
  (void)threads; /* the layout does not depend on the thread count */
  workspace_layout layout;
  if (trellis_weight_payload_bytes(w) == 0 ||
      !plan_workspace(w->k, w->n, m, &layout))
    return 0;
  return layout.total;
}

static float load_value(const void *src, trellis_dtype dtype, size_t i) {
  switch (dtype) {
  case TRELLIS_F16:
    return trellis_f16_to_f32(((const uint16_t *)src)[i]);
  case TRELLIS_BF16:
    return trellis_bf16_to_f32(((const uint16_t *)src)[i]);
  case TRELLIS_F32:
    break;
  }
  return ((const float *)src)[i];
}

static void store_value(void *dst, trellis_dtype dtype, size_t i, float v) {
  switch (dtype) {
  case TRELLIS_F16:
    ((uint16_t *)dst)[i] = trellis_f32_to_f16(v);
    return;
  case TRELLIS_BF16:
    ((uint16_t *)dst)[i] = trellis_f32_to_bf16(v);
    return;
  case TRELLIS_F32:
    break;
  }
  ((float *)dst)[i] = v;
}

static float round_f16(float v) {
  return trellis_f16_to_f32(trellis_f32_to_f16(v));
}

/* rotated = fp16(H128(fp16(x * s_in)) * r_scale), per 128-block. For fp16
 * and bf16 x the fp32 product is exact, so fp16(x * s_in) is one rounding
 * (the GPU's __hmul); fp32 x is multiplied in fp32 first, as the GPU input
 * rotation does. */
static void rotate_input(const void *x, trellis_dtype x_dtype, int64_t m,
                         size_t k, const float *s_in, float *rotated) {
  for (int64_t row = 0; row < m; row++) {
    float *a = rotated + (size_t)row * k;
    for (size_t i = 0; i < k; i++) {
      const float product =
          load_value(x, x_dtype, (size_t)row * k + i) * s_in[i];
      a[i] = round_f16(product);
    }
    for (size_t i0 = 0; i0 < k; i0 += TRELLIS_HBLOCK) {
      trl_h128_f32(a + i0);
      for (size_t i = i0; i < i0 + TRELLIS_HBLOCK; i++)
        a[i] = round_f16(a[i]);
    }
  }
}

#if defined(__GNUC__)
/* Four-lane vectors keep the 16 column sums of a row in registers; every
 * lane is an independent column, so the per-column order is unchanged. */
typedef float f32x4 __attribute__((vector_size(16)));

static inline f32x4 load4(const float *p) {
  f32x4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void store4(float *p, f32x4 v) { memcpy(p, &v, sizeof v); }

/* z[row][0..16) += a[row][0..16) . tile, summing over the tile's rows in
 * increasing order (fp16 x fp16 products are exact in fp32). */
static void accumulate_tile(const float tile[256], const float *a, size_t lda,
                            float *z, size_t ldz, int64_t m) {
  for (int64_t row = 0; row < m; row++) {
    const float *a_row = a + (size_t)row * lda;
    float *z_row = z + (size_t)row * ldz;
    f32x4 acc0 = load4(z_row), acc1 = load4(z_row + 4);
    f32x4 acc2 = load4(z_row + 8), acc3 = load4(z_row + 12);
    for (int r = 0; r < 16; r++) {
      const f32x4 a_r = {a_row[r], a_row[r], a_row[r], a_row[r]};
      const float *w_r = tile + 16 * r;
      acc0 = acc0 + a_r * load4(w_r);
      acc1 = acc1 + a_r * load4(w_r + 4);
      acc2 = acc2 + a_r * load4(w_r + 8);
      acc3 = acc3 + a_r * load4(w_r + 12);
    }
    store4(z_row, acc0);
    store4(z_row + 4, acc1);
    store4(z_row + 8, acc2);
    store4(z_row + 12, acc3);
  }
}
#else
static void accumulate_tile(const float tile[256], const float *a, size_t lda,
                            float *z, size_t ldz, int64_t m) {
  for (int64_t row = 0; row < m; row++) {
    const float *a_row = a + (size_t)row * lda;
    float *z_row = z + (size_t)row * ldz;
    for (int r = 0; r < 16; r++)
      for (int c = 0; c < 16; c++)
        z_row[c] = z_row[c] + a_row[r] * tile[16 * r + c];
  }
}
#endif

/* One thread's share: output columns of tiles [nt_begin, nt_end). */
typedef struct gemm_share {
  const trellis_weight *w;
  trl_record rec[2];     /* the weight's records (one unless a pair) */
  const float *table[2]; /* their state tables */
  const float *rotated;
  float *z;
  int64_t m;
  int64_t nt_begin, nt_end;
} gemm_share;

static void gemm_columns(const gemm_share *s) {
  const trellis_weight *w = s->w;
  const size_t k = (size_t)w->k, n = (size_t)w->n;
  const int64_t tiles_k = w->k / 16;
  float tile[256];
  for (int64_t g0 = s->nt_begin; g0 < s->nt_end; g0 += TILE_GROUP) {
    const int64_t g1 =
        g0 + TILE_GROUP < s->nt_end ? g0 + TILE_GROUP : s->nt_end;
    for (int64_t row = 0; row < s->m; row++)
      memset(s->z + (size_t)row * n + (size_t)(16 * g0), 0,
             (size_t)(16 * (g1 - g0)) * sizeof(float));
    for (int64_t kt = 0; kt < tiles_k; kt++) {
      for (int64_t nt = g0; nt < g1; nt++) {
        const int r = trl_weight_record_of(w, kt, nt);
        trl_tile_decode_f32_rate(trl_record_tile(&s->rec[r], kt, nt),
                                 trl_record_rate(&s->rec[r]), s->table[r],
                                 tile);
        accumulate_tile(tile, s->rotated + (size_t)(16 * kt), k,
                        s->z + (size_t)(16 * nt), n, s->m);
      }
    }
  }
}

static void *gemm_thread(void *arg) {
  gemm_columns((const gemm_share *)arg);
  return NULL;
}

static int resolve_threads(int threads, int64_t tiles_n) {
  if (threads == 0) {
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    threads =
        online > 0 ? (int)(online < MAX_THREADS ? online : MAX_THREADS) : 1;
  }
  if (threads > MAX_THREADS)
    threads = MAX_THREADS;
  if ((int64_t)threads > tiles_n)
    threads = (int)tiles_n;
  return threads;
}

int trellis_cpu_forward_threads(const trellis_weight *w, int threads) {
  if (threads < 0 || w == NULL ||
      (w->struct_size < sizeof *w && w->struct_size != TRELLIS_WEIGHT_SIZE_V1 &&
       w->struct_size != TRELLIS_WEIGHT_SIZE_V2) ||
      w->n < 16)
    return 0;
  return resolve_threads(threads, w->n / 16);
}

/* Splits the column tiles evenly; the calling thread takes share 0 and runs
 * any share whose thread could not be created. */
static void run_gemm(const gemm_share *proto, int threads) {
  gemm_share shares[MAX_THREADS];
  pthread_t ids[MAX_THREADS];
  int started[MAX_THREADS];
  const int64_t tiles_n = proto->w->n / 16;
  for (int t = 0; t < threads; t++) {
    shares[t] = *proto;
    shares[t].nt_begin = tiles_n * t / threads;
    shares[t].nt_end = tiles_n * (t + 1) / threads;
    started[t] = 0;
  }
  for (int t = 1; t < threads; t++)
    started[t] = pthread_create(&ids[t], NULL, gemm_thread, &shares[t]) == 0;
  gemm_columns(&shares[0]);
  for (int t = 1; t < threads; t++) {
    if (started[t])
      pthread_join(ids[t], NULL);
    else
      gemm_columns(&shares[t]);
  }
}

/* y = round_to_dtype(H128(z) * r_scale * s_out + bias), per 128-block. */
static void finish_output(float *z, int64_t m, size_t n, const float *s_out,
                          const uint16_t *bias, void *y,
                          trellis_dtype y_dtype) {
  for (int64_t row = 0; row < m; row++) {
    float *z_row = z + (size_t)row * n;
    for (size_t j0 = 0; j0 < n; j0 += TRELLIS_HBLOCK)
      trl_h128_f32(z_row + j0);
    for (size_t j = 0; j < n; j++) {
      float v = z_row[j] * s_out[j];
      if (bias != NULL)
        v = v + trellis_f16_to_f32(bias[j]);
      store_value(y, y_dtype, (size_t)row * n + j, v);
    }
  }
}

static trellis_status check_dtype(const char *what, trellis_dtype dtype) {
  if (trellis_dtype_size(dtype) == 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: expected TRELLIS_F16, TRELLIS_BF16 or "
                    "TRELLIS_F32, got %d",
                    what, (int)dtype);
  return TRELLIS_OK;
}

static trellis_status check_forward_args(const trellis_weight *w, const void *x,
                                         trellis_dtype x_dtype, int64_t m,
                                         const void *y, trellis_dtype y_dtype,
                                         int threads) {
  trellis_status st = trellis_weight_validate(w);
  if (st != TRELLIS_OK)
    return st;
  if (x == NULL || y == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "cpu_forward: %s is NULL",
                    x ? "y" : "x");
  if ((st = check_dtype("x_dtype", x_dtype)) != TRELLIS_OK ||
      (st = check_dtype("y_dtype", y_dtype)) != TRELLIS_OK)
    return st;
  if (m < 1)
    return trl_fail(TRELLIS_ERR_SHAPE, "m: expected >= 1 rows, got %lld",
                    (long long)m);
  if (threads < 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "threads: expected >= 0 (0 = one per core), got %d",
                    threads);
  return TRELLIS_OK;
}

trellis_status trellis_cpu_forward(const trellis_weight *caller, const void *x,
                                   trellis_dtype x_dtype, int64_t m, void *y,
                                   trellis_dtype y_dtype, void *workspace,
                                   size_t workspace_bytes, int threads) {
  trellis_status st =
      check_forward_args(caller, x, x_dtype, m, y, y_dtype, threads);
  if (st != TRELLIS_OK)
    return st;
  trellis_weight full;
  const trellis_weight *w = &full;
  if ((st = trl_weight_load(caller, &full)) != TRELLIS_OK ||
      (st = trl_weight_require_layout(&full, TRELLIS_LAYOUT_CHECKPOINT,
                                      "cpu_forward")) != TRELLIS_OK)
    return st;
  workspace_layout layout;
  if (!plan_workspace(w->k, w->n, m, &layout))
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "cpu_forward: m = %lld, k = %lld, n = %lld: "
                    "workspace size overflows size_t",
                    (long long)m, (long long)w->k, (long long)w->n);
  if (workspace == NULL || workspace_bytes < layout.total)
    return trl_fail(TRELLIS_ERR_WORKSPACE,
                    "cpu_forward: workspace needs %zu bytes "
                    "(trellis_cpu_workspace_size), got %zu%s",
                    layout.total, workspace_bytes, workspace ? "" : " (NULL)");

  const uintptr_t raw = (uintptr_t)workspace;
  char *base = (char *)workspace +
               (((raw + WS_ALIGN - 1) & ~(uintptr_t)(WS_ALIGN - 1)) - raw);
  float *rotated = (float *)(base + layout.rotated);
  float *z = (float *)(base + layout.z);
  float *s_in = (float *)(base + layout.s_in);
  float *s_out = (float *)(base + layout.s_out);
  if ((st = trl_weight_scales(w, s_in, s_out)) != TRELLIS_OK)
    return st;

  gemm_share proto = {.w = w, .rotated = rotated, .z = z, .m = m};
  const int records = trl_weight_records(w, proto.rec);
  for (int r = 0; r < records; r++)
    if ((proto.table[r] = trl_codebook_table_f32_bits(
             w->codebook, proto.rec[r].bits)) == NULL)
      return trl_sqg_tables_status();
  rotate_input(x, x_dtype, m, (size_t)w->k, s_in, rotated);
  run_gemm(&proto, resolve_threads(threads, w->n / 16));
  finish_output(z, m, (size_t)w->n, s_out, w->bias, y, y_dtype);
  return TRELLIS_OK;
}
