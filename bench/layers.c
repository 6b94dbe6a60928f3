/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's own layers. For one (shape, bits, codebook): C distinct
 * random copies of the layer (C x payload >= the cold size, C >= 2), one
 * prepared plan per copy; for each M the copy-0 plan is checked against the
 * CPU reference, then L = max(C, 20) launches cycling the copies are timed by
 * CUDA-graph replay and eagerly. With --with-generic a second plan per copy
 * (FORCE_GENERIC added) is checked and graph-timed on the fused rows. */
#include "bench.h"

#include "kernels.h"
#include "tools/device.h"
#include "tools/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The host layer: synth_layer_init's random layer, like a real checkpoint
 * (any K-bit symbol stream decodes; suh ~ 1/sqrt(k), svh ~ 1 keep y =
 * O(1)). */
static int host_layer_build(synth_layer *h, int64_t k, int64_t n, int bits,
                            int half, trellis_codebook cb, uint64_t seed) {
  trellis_clear_error();
  trellis_status st =
      synth_layer_init(h, k, n, bits, cb, half ? SYNTH_HALF : 0, seed);
  if (st == TRELLIS_OK)
    return CLI_OK;
  synth_layer_free(h);
  if (st == TRELLIS_ERR_OUT_OF_MEMORY) {
    cli_error("bench: cannot allocate the %lldx%lld host layer", (long long)k,
              (long long)n);
    return CLI_FAIL;
  }
  return cli_lib_error(st, "bench: layer");
}

/* A pair of `kind` on `axis`, 256 x orth, built like synth_layer_init's
 * layers: the records are one random array (record1 right after record0,
 * as a checkpoint stores them), the scales as there. */
static int host_pair_build(synth_layer *h, int64_t orth, trellis_pair_kind kind,
                           trellis_rate_axis axis, trellis_codebook cb,
                           uint64_t seed) {
  const int k0 = (kind >> 4) & 15, k1 = kind & 15;
  const int64_t k = axis == TRELLIS_RATE_AXIS_N ? orth : 256;
  const int64_t n = axis == TRELLIS_RATE_AXIS_N ? 256 : orth;
  /* the larger K's uniform layer holds both records' words */
  if (host_layer_build(h, k, n, k0 > k1 ? k0 : k1, 0, cb, seed) != CLI_OK)
    return CLI_FAIL;
  h->w.pair = kind;
  h->w.rate_axis = axis;
  h->w.bits = k0;
  h->w.bits1 = k1;
  h->w.trellis1 = h->trellis + orth / 16 * 8 * 16 * k0;
  trellis_clear_error();
  trellis_status st = trellis_weight_validate(&h->w);
  if (st == TRELLIS_OK)
    return CLI_OK;
  synth_layer_free(h);
  return cli_lib_error(st, "bench: pair layer");
}

/* Bits per weight of a row's layer: K, or a pair's (K0 + K1) / 2 (0 when
 * not whole). */
static int row_bpw(const trellis_weight *w) {
  if (w->pair == TRELLIS_PAIR_NONE)
    return w->bits;
  return (w->bits + w->bits1) % 2 ? 0 : (w->bits + w->bits1) / 2;
}

/* The graph time of the uniform MCG row of the same layer, M and flags at
 * `bits` bits measured earlier in the run, or NAN. */
static double mcg_partner(const bench_results *res, const bench_row *r,
                          int bits) {
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *s = &res->rows[i];
    if (s->k == r->k && s->n == r->n && s->m == r->m && s->bits == bits &&
        !s->half && s->cb == TRELLIS_CB_MCG && s->pair == TRELLIS_PAIR_NONE &&
        s->flags == r->flags)
      return s->graph_us;
  }
  return NAN;
}

typedef struct ours_ctx {
  trellis_plan *const *plans;
  int copies;
  const void *x;
  void *y;
  int64_t m;
  const trellis_buffers *b;
} ours_ctx;

static int ours_enqueue(void *ctx, int index, cudaStream_t stream) {
  const ours_ctx *c = ctx;
  trellis_clear_error();
  trellis_status st =
      trellis_run(c->plans[index % c->copies], c->x, c->m, c->y, c->b, stream);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, "trellis_run");
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* Copy 0's plan once on x with y poisoned with NaN, its first min(m, 16)
 * rows against the CPU reference `ref` of x's first rows: relative L2. */
static int check_plan(trellis_plan *plan, const void *x, int64_t m, void *y,
                      int64_t n, const trellis_buffers *b, const float *ref,
                      uint16_t *hy, float *got, cudaStream_t stream,
                      double *rel_l2, int *rows_checked) {
  const int64_t rows = m < BENCH_CHECK_ROWS ? m : BENCH_CHECK_ROWS;
  const size_t count = (size_t)rows * (size_t)n;
  int r = CLI_FAIL;
  BENCH_CUDA(cudaMemsetAsync(y, 0xFF, (size_t)m * (size_t)n * 2, stream));
  BENCH_TRELLIS(trellis_run(plan, x, m, y, b, stream));
  BENCH_CUDA(cudaMemcpyAsync(hy, y, count * 2, cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  cli_to_f32(hy, TRELLIS_F16, count, got);
  *rel_l2 = cli_compare(got, ref, count).rel_l2;
  *rows_checked = (int)rows;
  r = CLI_OK;
done:
  return r;
}

/* Replays for one row: o->reps, fewer (>= 3) when one launch is so slow that
 * the row would pass BENCH_TIME_BUDGET_S. */
static int row_reps(int reps, double one_launch_s, int launches) {
  double per_replay = one_launch_s * launches;
  if (per_replay * (reps + BENCH_WARMUP) <= BENCH_TIME_BUDGET_S)
    return reps;
  int fit = (int)(BENCH_TIME_BUDGET_S / per_replay) - BENCH_WARMUP;
  return fit < 3 ? 3 : (fit < reps ? fit : reps);
}

/* One layer (the host layer `hl`, built from `seed`): cold copies and
 * plans, then per M the check and the timings (bench_run_config). */
static int run_layer(const bench_options *o, const bench_env *env,
                     const synth_layer *hlp, uint64_t seed,
                     const double *cublas_kn, const double *cublas_nk,
                     const bench_fp8 *fp8, int overhead, cudaStream_t stream,
                     bench_results *res) {
  const synth_layer hl = *hlp;
  const int64_t k = hl.w.k, n = hl.w.n;
  const int bits = hl.w.bits;
  const trellis_codebook cb = hl.w.codebook;
  trellis_device_weight **dw = NULL;
  trellis_plan **plans = NULL, **gplans = NULL; /* gplans: --with-generic */
  trellis_buffers b;
  void *x = NULL, *y = NULL;
  uint16_t *hx = NULL, *hy = NULL;
  float *ref = NULL, *got = NULL;
  cudaEvent_t ev[2] = {NULL, NULL};
  int uploaded = 0, copies = 0, nplans = 0, ngplans = 0, r = CLI_FAIL;
  trellis_buffers_init(&b);

  const size_t payload = trellis_weight_payload_bytes(&hl.w);
  copies = (int)((env->cold_bytes + payload - 1) / payload);
  copies = copies < 2 ? 2 : copies;
  const int launches =
      copies > BENCH_MIN_LAUNCHES ? copies : BENCH_MIN_LAUNCHES;
  int64_t ms_max = 1;
  for (int j = 0; j < o->nms; j++)
    ms_max = o->ms[j] > ms_max ? o->ms[j] : ms_max;

  /* Cold copies: all uploaded from copy 0's host data, then copies 1.. get
   * fresh random payloads on the device (same scales). */
  BENCH_ALLOC(dw, copies);
  BENCH_ALLOC(plans, copies);
  BENCH_ALLOC(gplans, copies);
  for (int i = 0; i < copies; i++) {
    BENCH_TRELLIS(
        trellis_weight_upload_layout(&hl.w, bench_layout(o->flags), &dw[i]));
    uploaded = i + 1;
  }
  BENCH_CUDA(cudaDeviceSynchronize()); /* uploads done before the refills */
  for (int i = 1; i < copies; i++)
    BENCH_KERNEL(
        bench_fill((uint16_t *)trellis_device_weight_view(dw[i])->trellis,
                   payload / 2, seed + (uint64_t)i, 0, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  trellis_plan_desc desc;
  trellis_plan_desc_init(&desc);
  desc.max_m = env->max_m;
  desc.input_dtype = TRELLIS_F16;
  desc.output_dtype = TRELLIS_F16;
  desc.flags = bench_plan_flags(o->flags);
  for (int i = 0; i < copies; i++) {
    BENCH_TRELLIS(trellis_plan_create(trellis_device_weight_view(dw[i]), &desc,
                                      &plans[i]));
    nplans = i + 1;
    BENCH_TRELLIS(trellis_plan_prepare(plans[i]));
  }
  /* --with-generic: the same weights, FORCE_GENERIC added. */
  trellis_plan_desc gdesc = desc;
  gdesc.flags |= TRELLIS_PLAN_FORCE_GENERIC;
  for (int i = 0; o->with_generic && i < copies; i++) {
    BENCH_TRELLIS(trellis_plan_create(trellis_device_weight_view(dw[i]), &gdesc,
                                      &gplans[i]));
    ngplans = i + 1;
    BENCH_TRELLIS(trellis_plan_prepare(gplans[i]));
  }

  /* One buffer set sized for the largest need over the Ms (and M = 1) and
   * both plan sets. */
  trellis_buffer_sizes need = {.struct_size = sizeof need};
  for (int j = -1; j < o->nms; j++)
    for (int g = 0; g < (ngplans ? 2 : 1); g++) {
      trellis_buffer_sizes sz = {.struct_size = sizeof sz};
      BENCH_TRELLIS(trellis_plan_query(g ? gplans[0] : plans[0],
                                       j < 0 ? 1 : o->ms[j], &sz));
      need.rotated_bytes = max_size(need.rotated_bytes, sz.rotated_bytes);
      need.input_f16_bytes = max_size(need.input_f16_bytes, sz.input_f16_bytes);
      need.output_f16_bytes =
          max_size(need.output_f16_bytes, sz.output_f16_bytes);
      need.workspace_bytes = max_size(need.workspace_bytes, sz.workspace_bytes);
    }
  if (cli_buffers_alloc(&need, &b) != CLI_OK)
    goto done;
  BENCH_CUDA(cudaMalloc(&x, (size_t)ms_max * (size_t)k * 2));
  BENCH_CUDA(cudaMalloc(&y, (size_t)ms_max * (size_t)n * 2));
  BENCH_KERNEL(
      bench_fill(x, (size_t)ms_max * (size_t)k, seed ^ 0xa5, 1, stream));
  BENCH_CUDA(cudaEventCreate(&ev[0]));
  BENCH_CUDA(cudaEventCreate(&ev[1]));

  /* CPU reference of x's first rows, once: rows are independent, so the
   * first min(M, 16) rows of any M compare against its first rows. */
  const int64_t ref_rows =
      ms_max < BENCH_CHECK_ROWS ? ms_max : BENCH_CHECK_ROWS;
  BENCH_ALLOC(hx, (size_t)ref_rows * (size_t)k);
  BENCH_ALLOC(hy, (size_t)ref_rows * (size_t)n);
  BENCH_ALLOC(ref, (size_t)ref_rows * (size_t)n);
  BENCH_ALLOC(got, (size_t)ref_rows * (size_t)n);
  BENCH_CUDA(cudaMemcpyAsync(hx, x, (size_t)ref_rows * (size_t)k * 2,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  if (cli_cpu_forward(&hl.w, hx, TRELLIS_F16, ref_rows, ref, TRELLIS_F32, 0) !=
      CLI_OK)
    goto done;

  ours_ctx ctx = {plans, copies, x, y, 1, &b};
  int have_m1 = 0;
  for (int j = 0; j < o->nms; j++) {
    const int64_t m = o->ms[j];
    bench_row row = {.k = k,
                     .n = n,
                     .m = m,
                     .bits = bits,
                     .half = hl.w.half,
                     .cb = cb,
                     .flags = o->flags,
                     .sweep = o->sweep,
                     .copies = copies,
                     .launches = launches,
                     .weight_bytes = (double)payload,
                     .graph_us = NAN,
                     .eager_us = NAN,
                     .cublas_kn_us = cublas_kn ? cublas_kn[j] : NAN,
                     .cublas_nk_us = cublas_nk ? cublas_nk[j] : NAN,
                     .fp8 = {.us = NAN, .rel_l2 = NAN},
                     .generic_us = NAN,
                     .generic_rel_l2 = NAN,
                     .pair = hl.w.pair,
                     .rate_axis = hl.w.rate_axis,
                     .mcg_us = NAN};
    if (fp8)
      row.fp8 = fp8[j];
    trellis_buffer_sizes sz = {.struct_size = sizeof sz};
    BENCH_TRELLIS(trellis_plan_query(plans[0], m, &sz));
    row.path = sz.path;

    /* Check: copy 0 once, y poisoned with NaN first. */
    if (check_plan(plans[0], x, m, y, n, &b, ref, hy, got, stream, &row.rel_l2,
                   &row.check_rows) != CLI_OK)
      goto done;
    row.check_ok = row.rel_l2 <= BENCH_CHECK_TOL;
    if (!row.check_ok)
      res->failed_checks++;

    /* One launch on its own sizes the number of replays. */
    float one_ms = 0.0f;
    BENCH_CUDA(cudaEventRecord(ev[0], stream));
    BENCH_TRELLIS(trellis_run(plans[1], x, m, y, &b, stream));
    BENCH_CUDA(cudaEventRecord(ev[1], stream));
    BENCH_CUDA(cudaEventSynchronize(ev[1]));
    BENCH_CUDA(cudaEventElapsedTime(&one_ms, ev[0], ev[1]));
    row.replays = row_reps(o->reps, 1e-3 * one_ms, launches);

    ctx.m = m;
    if (bench_time_graph(ours_enqueue, &ctx, launches, row.replays, stream,
                         &row.graph_us) != CLI_OK ||
        bench_time_eager(ours_enqueue, &ctx, launches, row.replays, stream,
                         &row.eager_us) != CLI_OK)
      goto done;
    if (ngplans && row.path == TRELLIS_PATH_FUSED) {
      int rows_checked = 0;
      ours_ctx gctx = ctx;
      gctx.plans = gplans;
      if (check_plan(gplans[0], x, m, y, n, &b, ref, hy, got, stream,
                     &row.generic_rel_l2, &rows_checked) != CLI_OK)
        goto done;
      row.generic_ok = row.generic_rel_l2 <= BENCH_CHECK_TOL;
      if (!row.generic_ok)
        res->failed_checks++;
      if (bench_time_graph(ours_enqueue, &gctx, launches, row.replays, stream,
                           &row.generic_us) != CLI_OK)
        goto done;
    } else if (ngplans) { /* not fused: these are the generic launches */
      row.generic_us = row.graph_us;
      row.generic_rel_l2 = row.rel_l2;
      row.generic_ok = row.check_ok;
    }
    if (bench_row_b12x(&row) && row_bpw(&hl.w))
      row.mcg_us = mcg_partner(res, &row, row_bpw(&hl.w));
    if (bench_results_add(res, &row) != CLI_OK)
      goto done;
    bench_print_row(env, o, &row);
    if (m == 1 && overhead) {
      have_m1 = 1;
      res->overhead.lrun_us = row.graph_us;
      res->overhead.eager_us = row.eager_us;
    }
  }

  if (overhead) { /* BENCH_OVERHEAD_LAUNCHES launches of M = 1, one graph */
    bench_overhead *ov = &res->overhead;
    ctx.m = 1;
    if (!have_m1 && (bench_time_graph(ours_enqueue, &ctx, launches, o->reps,
                                      stream, &ov->lrun_us) != CLI_OK ||
                     bench_time_eager(ours_enqueue, &ctx, launches, o->reps,
                                      stream, &ov->eager_us) != CLI_OK))
      goto done;
    if (bench_time_graph(ours_enqueue, &ctx, BENCH_OVERHEAD_LAUNCHES, o->reps,
                         stream, &ov->cycled_us) != CLI_OK)
      goto done;
    ours_ctx single = ctx;
    single.copies = 1;
    if (bench_time_graph(ours_enqueue, &single, BENCH_OVERHEAD_LAUNCHES,
                         o->reps, stream, &ov->single_us) != CLI_OK)
      goto done;
    ov->measured = 1;
    ov->k = k;
    ov->n = n;
    ov->bits = bits;
    ov->cb = cb;
    ov->copies = copies;
    ov->lrun_launches = launches;
  }
  r = CLI_OK;
done:
  for (int i = 0; i < 2; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  for (int i = 0; i < nplans; i++)
    trellis_plan_destroy(plans[i]);
  for (int i = 0; i < ngplans; i++)
    trellis_plan_destroy(gplans[i]);
  for (int i = 0; i < uploaded; i++)
    trellis_device_weight_destroy(dw[i]);
  free(plans);
  free(gplans);
  free(dw);
  cli_buffers_free(&b);
  cudaFree(x);
  cudaFree(y);
  free(hx);
  free(hy);
  free(ref);
  free(got);
  return r;
}

int bench_run_config(const bench_options *o, const bench_env *env, int64_t k,
                     int64_t n, int bits, int half, trellis_codebook cb,
                     const double *cublas_kn, const double *cublas_nk,
                     const bench_fp8 *fp8, int overhead, cudaStream_t stream,
                     bench_results *res) {
  const uint64_t seed = 0x7e111500ull ^ ((uint64_t)k * 1000003u) ^
                        ((uint64_t)n * 7919u) ^ ((uint64_t)bits << 40) ^
                        ((uint64_t)cb << 48) ^ ((uint64_t)half << 56);
  synth_layer hl = {0};
  if (host_layer_build(&hl, k, n, bits, half, cb, seed) != CLI_OK)
    return CLI_FAIL;
  const int r = run_layer(o, env, &hl, seed, cublas_kn, cublas_nk, fp8,
                          overhead, stream, res);
  synth_layer_free(&hl);
  return r;
}

int bench_run_pair(const bench_options *o, const bench_env *env, int64_t orth,
                   trellis_pair_kind kind, trellis_codebook cb,
                   cudaStream_t stream, bench_results *res) {
  const uint64_t seed = 0x9a125eedull ^ ((uint64_t)orth * 1000003u) ^
                        ((uint64_t)kind << 40) ^ ((uint64_t)cb << 48) ^
                        ((uint64_t)o->rate_axis << 56);
  synth_layer hl = {0};
  if (host_pair_build(&hl, orth, kind, o->rate_axis, cb, seed) != CLI_OK)
    return CLI_FAIL;
  const int r = run_layer(o, env, &hl, seed, NULL, NULL, NULL, 0, stream, res);
  synth_layer_free(&hl);
  return r;
}
