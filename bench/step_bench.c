/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis bench --model`: the decode step of a model (step.h) timed
 * eagerly, FULL and PIECEWISE after each mode's check, per layer kind, and
 * beside the same step built from FP16 cuBLASLt and FP8 W8A8 cuBLASLt
 * layers of the same shapes. Method: bench/README.md. */
#include "step_bench.h"

#include "kernels.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRELLIS_HAVE_CUDA

/* A decision that changes the collectives a rank issues, taken alike on
 * every rank (the smallest value); the value itself on one GPU. */
static int agree(const step_model *model, int value) {
  const step_tp *tp = model->tp;
  return tp && tp->agree_min ? tp->agree_min(tp->ctx, value) : value;
}

/* ---- timing of a step mode ---------------------------------------------- */

typedef struct mode_ctx {
  step_engine *e;
  step_mode mode;
  int64_t m;
} mode_ctx;

static int mode_unit(void *ctx, int index, cudaStream_t stream) {
  mode_ctx *c = ctx;
  return step_launch(c->e, c->mode, index % c->e->copies, c->m, stream);
}

/* The layers of one kind, every copy, in step order. */
typedef struct kind_ctx {
  step_engine *e;
  const size_t *ops; /* indices into e->ops */
  size_t nops;
  int64_t m;
} kind_ctx;

static int kind_unit(void *ctx, int index, cudaStream_t stream) {
  kind_ctx *c = ctx;
  const step_op *op = &c->e->ops[c->ops[(size_t)index % c->nops]];
  const int copy = (int)((size_t)index / c->nops);
  const size_t slot = (size_t)copy * c->e->model->count + (size_t)op->layer;
  trellis_clear_error();
  trellis_status st =
      trellis_run(c->e->plans[slot], op->x, c->m, op->y, &c->e->b, stream);
  return st == TRELLIS_OK
             ? CLI_OK
             : cli_lib_error(st, c->e->model->layers[op->layer].name);
}

/* Copies every layer's output of the eager step of copy 0 at m (poisoned
 * first) into dump[0..count-1] (malloc'd, m x n fp16 each). */
static int dump_outputs(step_engine *e, int64_t m, cudaStream_t stream,
                        uint16_t **dump) {
  const step_model *model = e->model;
  int r = CLI_FAIL;
  if (step_poison(e, stream) != CLI_OK ||
      step_enqueue(e, 0, m, stream) != CLI_OK)
    goto done;
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (size_t i = 0; i < model->count; i++) {
    const size_t count = (size_t)m * (size_t)model->layers[i].n;
    BENCH_ALLOC(dump[i], count);
    BENCH_CUDA(cudaMemcpy(dump[i], e->y[i], count * 2, cudaMemcpyDeviceToHost));
  }
  r = CLI_OK;
done:
  return r;
}

int step_bench_ours(const bench_options *o, const step_model *model, int copies,
                    cudaStream_t stream, step_row *rows, size_t *mem_used,
                    step_engine *stats, uint16_t **dump) {
  step_engine e;
  size_t *kind_ops = NULL;
  size_t free0 = 0, free1 = 0, total = 0;
  int r = CLI_FAIL;
  memset(&e, 0, sizeof e);
  const cudaError_t info = cudaMemGetInfo(&free0, &total);
  if (info != cudaSuccess)
    cli_error("cuda: cudaMemGetInfo: %s", cudaGetErrorString(info));
  const int opened =
      info == cudaSuccess && step_engine_open(&e, model, copies, o->ms, o->nms,
                                              o->flags, stream) == CLI_OK;
  if (!agree(model, opened)) /* no rank starts the step's collectives alone */
    goto done;
  BENCH_CUDA(cudaMemGetInfo(&free1, &total));
  *mem_used = free0 > free1 ? free0 - free1 : 0;
  BENCH_ALLOC(kind_ops, e.nops);
  for (int j = 0; j < o->nms; j++) {
    step_row *row = &rows[j];
    const int64_t m = row->m;
    if (step_capture(&e, STEP_FULL, m, stream) != CLI_OK ||
        step_capture(&e, STEP_PIECEWISE, m, stream) != CLI_OK)
      goto done;
    if (dump &&
        dump_outputs(&e, m, stream, dump + (size_t)j * model->count) != CLI_OK)
      goto done;
    for (int md = 0; md < 3; md++) {
      if (step_check(&e, (step_mode)md, m, 1, stream, &row->ok[md],
                     row->detail[md], sizeof row->detail[md]) != CLI_OK)
        goto done;
      mode_ctx mc = {&e, (step_mode)md, m};
      if (bench_time_eager(mode_unit, &mc, e.copies, o->reps, stream,
                           &row->us[md]) != CLI_OK)
        goto done;
    }
    for (int kd = 0; kd < STEP_KINDS; kd++) {
      size_t n = 0;
      for (size_t i = 0; i < e.nops; i++)
        if (e.ops[i].layer >= 0 &&
            step_kind_of(model->layers[e.ops[i].layer].role) == kd)
          kind_ops[n++] = i;
      row->kind_us[kd] = NAN;
      if (n == 0)
        continue;
      kind_ctx kc = {&e, kind_ops, n, m};
      const int launches = (int)n * e.copies;
      double us = NAN;
      if (bench_time_graph(kind_unit, &kc, launches, o->reps, stream, &us) !=
          CLI_OK)
        goto done;
      row->kind_us[kd] = us * launches / e.copies;
    }
  }
  r = CLI_OK;
done:
  if (r == CLI_OK) {
    stats->weight_bytes = e.weight_bytes;
    stats->buffer_bytes = e.buffer_bytes;
    stats->activation_bytes = e.activation_bytes;
    stats->need = e.need;
    stats->copies = e.copies;
    stats->npieces = e.npieces;
  }
  free(kind_ops);
  step_engine_close(&e);
  return r;
}

/* ---- the peers' step ---------------------------------------------------- */

typedef struct peer_step {
  const step_model *model;
  int fp8;
  int copies, pool;
  size_t nslots;   /* weight slots of one copy */
  size_t *slot_of; /* [count] a layer's weight slot */
  void **w;        /* [copies * nslots] W[n][k] */
  void **y;        /* [count] outputs, max_m rows (FP8: rounded up) */
  void *x0;        /* FP16: the step input; FP8: every layer's E4M3 x */
  const void **x;  /* [count] what each layer reads */
  void *attn, *ws;
  float *one; /* FP8 scales: a device fp32 1.0 */
  cublasLtHandle_t h;
  bench_lt_desc *ld; /* [count] at the current m (layers of one shape
                        use the first one's: shape_of) */
  size_t *shape_of;  /* [count] the first layer of the same k x n */
  cublasLtMatmulAlgo_t *algo;
  cudaGraphExec_t *exec; /* [copies] */
  float alpha, beta;
  int64_t m; /* the GEMM's M (FP8: rounded up) */
} peer_step;

static int peer_layer(peer_step *p, int copy, size_t i, cudaStream_t stream) {
  const void *w = p->w[(size_t)copy * p->nslots + p->slot_of[i]];
  cublasStatus_t s = cublasLtMatmul(
      p->h, p->ld[p->shape_of[i]].desc, &p->alpha, w, p->ld[p->shape_of[i]].a,
      p->x[i], p->ld[p->shape_of[i]].b, &p->beta, p->y[i],
      p->ld[p->shape_of[i]].d, p->y[i], p->ld[p->shape_of[i]].d,
      &p->algo[p->shape_of[i]], p->ws, BENCH_LT_WORKSPACE, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cli_error("cuBLASLt: cublasLtMatmul (%s): %s", p->model->layers[i].name,
              cublasLtGetStatusName(s));
    return CLI_FAIL;
  }
  return CLI_OK;
}

/* One step of the peer, the same order and stand-ins as ours. */
static int peer_enqueue(peer_step *p, int copy, int64_t m,
                        cudaStream_t stream) {
  const step_model *model = p->model;
  long q = -1;
  for (size_t i = 0; i < model->count; i++) {
    const step_layer *l = &model->layers[i];
    if (l->role == SYNTH_ROLE_Q || l->role == SYNTH_ROLE_Q_B)
      q = (long)i;
    if (q >= 0 && model->layers[q].block == l->block &&
        step_kind_of(l->role) >= step_kind_of(SYNTH_ROLE_O) &&
        step_kind_of(model->layers[i - 1].role) < step_kind_of(SYNTH_ROLE_O)) {
      int err = bench_attention_standin(
          p->y[q], p->attn, (size_t)m * (size_t)model->layers[q].n, stream);
      if (err != 0) {
        cli_error("cuda: attention stand-in: %s",
                  cudaGetErrorString((cudaError_t)err));
        return CLI_FAIL;
      }
    }
    if (peer_layer(p, copy, i, stream) != CLI_OK)
      return CLI_FAIL;
    if (model->tp && (l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN) &&
        model->tp->allreduce(model->tp->ctx, p->y[i], (size_t)m * (size_t)l->n,
                             stream) != CLI_OK)
      return CLI_FAIL;
  }
  return CLI_OK;
}

static int peer_unit(void *ctx, int index, cudaStream_t stream) {
  peer_step *p = ctx;
  int r = CLI_FAIL;
  BENCH_CUDA(cudaGraphLaunch(p->exec[index % p->copies], stream));
  r = CLI_OK;
done:
  return r;
}

static void peer_release_m(peer_step *p) {
  for (size_t i = 0; p->ld && i < p->model->count; i++)
    bench_lt_desc_release(&p->ld[i]);
  for (int c = 0; p->exec && c < p->copies; c++)
    if (p->exec[c]) {
      cudaGraphExecDestroy(p->exec[c]);
      p->exec[c] = NULL;
    }
}

static void peer_free(peer_step *p) {
  peer_release_m(p);
  for (size_t s = 0; p->w && s < (size_t)p->copies * p->nslots; s++)
    cudaFree(p->w[s]);
  for (size_t i = 0; p->y && i < p->model->count; i++)
    cudaFree(p->y[i]);
  cudaFree(p->x0);
  cudaFree(p->attn);
  cudaFree(p->ws);
  cudaFree(p->one);
  if (p->h)
    cublasLtDestroy(p->h);
  free(p->slot_of);
  free(p->shape_of);
  free(p->x);
  free(p->w);
  free(p->y);
  free(p->ld);
  free(p->algo);
  free(p->exec);
}

/* Descriptors and algorithm of every layer at m; *found = 0 when cuBLASLt
 * has none for some layer (then *why). */
static int peer_describe(peer_step *p, int64_t m, cudaStream_t stream,
                         int *found, const char **why) {
  const step_model *model = p->model;
  cublasLtMatmulHeuristicResult_t heur[BENCH_FP8_ALGOS];
  int r = CLI_FAIL;
  *found = 0;
  p->m = p->fp8 ? (m + BENCH_FP8_M_MULTIPLE - 1) / BENCH_FP8_M_MULTIPLE *
                      BENCH_FP8_M_MULTIPLE
                : m;
  for (size_t i = 0; i < model->count; i++) {
    const step_layer *l = &model->layers[i];
    int count = 0, usable = -1;
    if (p->shape_of[i] != i) /* described with its shape's first layer */
      continue;
    if (p->fp8) {
      const trellis_dtype outs[2] = {TRELLIS_F16, TRELLIS_BF16};
      for (int o = 0; o < 2 && count == 0; o++) {
        bench_lt_desc_release(&p->ld[i]);
        if (bench_lt_fp8_desc(p->h, p->one, l->k, l->n, p->m, outs[o],
                              BENCH_LT_WORKSPACE, &p->ld[i], heur,
                              BENCH_FP8_ALGOS, &count, why) != CLI_OK)
          goto done;
      }
    } else if (bench_lt_fp16_desc(p->h, 1, l->k, l->n, p->m, BENCH_LT_WORKSPACE,
                                  &p->ld[i], heur, 1, &count) != CLI_OK)
      goto done;
    /* the first candidate that launches (one eager launch each) */
    for (int a = 0; a < count && usable < 0; a++) {
      if (heur[a].state != CUBLAS_STATUS_SUCCESS)
        continue;
      p->algo[i] = heur[a].algo;
      cublasStatus_t s = cublasLtMatmul(
          p->h, p->ld[i].desc, &p->alpha, p->w[p->slot_of[i]], p->ld[i].a,
          p->x0, p->ld[i].b, &p->beta, p->y[i], p->ld[i].d, p->y[i], p->ld[i].d,
          &p->algo[i], p->ws, BENCH_LT_WORKSPACE, stream);
      if (s == CUBLAS_STATUS_SUCCESS)
        usable = a;
      else
        *why = cublasLtGetStatusName(s);
    }
    (void)cudaGetLastError();
    if (usable < 0) {
      if (*why == NULL)
        *why = "no algorithm";
      r = CLI_OK;
      goto done;
    }
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  *found = 1;
  r = CLI_OK;
done:
  return r;
}

/* The peer's weights (copies x slots), outputs, inputs, cuBLASLt handle
 * and per-layer tables, for M up to max_m. */
static int peer_alloc(peer_step *p, int64_t max_m, int64_t max_k, int64_t max_n,
                      cudaStream_t stream, peer_result *res) {
  const step_model *model = p->model;
  const size_t esize = p->fp8 ? 1 : 2;
  const float host_one = 1.0f;
  int r = CLI_FAIL;
  /* weight slots: every layer, or a pool of blocks and the head */
  BENCH_ALLOC(p->slot_of, model->count);
  p->nslots = p->pool == model->blocks
                  ? model->count
                  : (size_t)p->pool * model->block_layers + model->has_head;
  for (size_t i = 0; i < model->count; i++) {
    const step_layer *l = &model->layers[i];
    if (p->pool == model->blocks)
      p->slot_of[i] = i;
    else if (l->block < 0)
      p->slot_of[i] = (size_t)p->pool * model->block_layers;
    else
      p->slot_of[i] = (size_t)(l->block % p->pool) * model->block_layers +
                      i % model->block_layers;
  }
  BENCH_ALLOC(p->w, (size_t)p->copies * p->nslots);
  for (int c = 0; c < p->copies; c++)
    for (size_t i = 0; i < model->count; i++) {
      const size_t s = (size_t)c * p->nslots + p->slot_of[i];
      if (p->w[s])
        continue;
      const step_layer *l = &model->layers[i];
      const size_t bytes = (size_t)l->k * (size_t)l->n * esize;
      BENCH_CUDA(cudaMalloc(&p->w[s], bytes));
      res->weight_bytes += (double)bytes;
      BENCH_KERNEL(bench_fill(p->w[s], bytes / 2, 0xfeed0000ull + s,
                              p->fp8 ? 2 : 1, stream));
    }
  BENCH_ALLOC(p->y, model->count);
  for (size_t i = 0; i < model->count; i++)
    BENCH_CUDA(
        cudaMalloc(&p->y[i], (size_t)max_m * (size_t)model->layers[i].n * 2));
  BENCH_CUDA(cudaMalloc(&p->x0, (size_t)max_m * (size_t)max_k * 2));
  BENCH_KERNEL(bench_fill(p->x0, (size_t)max_m * (size_t)max_k, 0x5eedull,
                          p->fp8 ? 2 : 1, stream));
  /* inputs: FP16 wired as ours (the block input is the last down's
   * output); FP8 reads x0 everywhere */
  BENCH_ALLOC(p->x, model->count);
  const void *block_in = p->x0;
  for (size_t i = 0; i < model->count; i++) {
    const step_layer *l = &model->layers[i];
    p->x[i] = p->fp8
                  ? p->x0
                  : (l->src == STEP_SRC_LAYER ? p->y[l->src_layer] : block_in);
    if (l->role == SYNTH_ROLE_DOWN)
      block_in = p->y[i];
  }
  BENCH_CUDA(cudaMalloc(&p->attn, (size_t)max_m * (size_t)max_n * 2));
  BENCH_CUDA(cudaMalloc(&p->ws, BENCH_LT_WORKSPACE));
  BENCH_CUDA(cudaMalloc((void **)&p->one, sizeof *p->one));
  BENCH_CUDA(cudaMemcpyAsync(p->one, &host_one, sizeof host_one,
                             cudaMemcpyHostToDevice, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_LT(cublasLtCreate(&p->h));
  BENCH_ALLOC(p->ld, model->count);
  BENCH_ALLOC(p->shape_of, model->count);
  for (size_t i = 0; i < model->count; i++) {
    p->shape_of[i] = i;
    for (size_t j = 0; j < i && p->shape_of[i] == i; j++)
      if (model->layers[j].k == model->layers[i].k &&
          model->layers[j].n == model->layers[i].n)
        p->shape_of[i] = j;
  }
  BENCH_ALLOC(p->algo, model->count);
  BENCH_ALLOC(p->exec, p->copies);
  r = CLI_OK;
done:
  return r;
}

/* Allocates the peer (the whole model, or a pool of blocks when it does
 * not fit), times its FULL step at every m into rows[].fp16_us/fp8_us. */
int step_bench_peer(const bench_options *o, const bench_env *env,
                    const step_model *model, int fp8, cudaStream_t stream,
                    step_row *rows, peer_result *res) {
  peer_step p;
  const size_t esize = fp8 ? 1 : 2;
  int r = CLI_FAIL;
  memset(&p, 0, sizeof p);
  memset(res, 0, sizeof *res);
  p.model = model;
  p.fp8 = fp8;
  p.alpha = 1.0f;
  p.beta = 0.0f;
  for (int j = 0; j < o->nms; j++)
    (fp8 ? &rows[j].fp8_us : &rows[j].fp16_us)[0] = NAN;
  int64_t max_m = 1, max_k = 1, max_n = 1;
  for (int j = 0; j < o->nms; j++)
    max_m = o->ms[j] > max_m ? o->ms[j] : max_m;
  if (fp8)
    max_m = (max_m + BENCH_FP8_M_MULTIPLE - 1) / BENCH_FP8_M_MULTIPLE *
            BENCH_FP8_M_MULTIPLE;
  double block_bytes = 0, head_bytes = 0, act_bytes = 0;
  for (size_t i = 0; i < model->count; i++) {
    const step_layer *l = &model->layers[i];
    const double wb = (double)l->k * (double)l->n * (double)esize;
    if (l->block == 0)
      block_bytes += wb;
    else if (l->block < 0)
      head_bytes += wb;
    act_bytes += (double)max_m * (double)l->n * 2;
    max_k = l->k > max_k ? l->k : max_k;
    max_n = l->n > max_n ? l->n : max_n;
  }
  act_bytes += (double)max_m * (double)(max_k + max_n) * 2 + BENCH_LT_WORKSPACE;
  const double step_bytes =
      block_bytes * model->blocks + head_bytes; /* of the whole model */
  size_t free_bytes = 0, total = 0;
  const cudaError_t info = cudaMemGetInfo(&free_bytes, &total);
  if (info != cudaSuccess) {
    cli_error("cuda: cudaMemGetInfo: %s", cudaGetErrorString(info));
    free_bytes = 0; /* agreed as "does not fit", then failed */
  }
  p.pool = step_pool_blocks(model->blocks, block_bytes, head_bytes + act_bytes,
                            free_bytes, STEP_HEADROOM, env->cold_bytes);
  if (p.pool < model->blocks && model->block_layers == 0)
    p.pool = 0; /* blocks differ: no pool */
  p.pool = agree(model, p.pool);
  if (!agree(model, info == cudaSuccess))
    goto done;
  if (p.pool == 0) {
    res->note = "does not fit in device memory";
    r = CLI_OK;
    goto done;
  }
  p.copies =
      p.pool == model->blocks ? step_copies(step_bytes, env->cold_bytes) : 1;
  if (p.copies > 1 &&
      p.copies * step_bytes + act_bytes + STEP_HEADROOM > (double)free_bytes)
    p.copies = 1;
  p.copies = agree(model, p.copies);
  res->pool = p.pool;
  res->copies = p.copies;

  const int ready = peer_alloc(&p, max_m, max_k, max_n, stream, res) == CLI_OK;
  if (!agree(model, ready)) /* no rank starts the peer's collectives alone */
    goto done;

  for (int j = 0; j < o->nms; j++) {
    const int64_t m = o->ms[j];
    int found = 0;
    const char *why = NULL;
    peer_release_m(&p);
    const int described = peer_describe(&p, m, stream, &found, &why) == CLI_OK;
    if (!agree(model, described))
      goto done;
    found = agree(model, found);
    if (!found) {
      fprintf(stderr,
              "trellis: bench: note: cuBLASLt has no %s algorithm for a "
              "layer of the step at M=%lld (%s): n/a\n",
              fp8 ? "FP8 (E4M3)" : "FP16", (long long)p.m, why);
      continue;
    }
    if (fp8)
      rows[j].fp8_m = p.m;
    /* one eager step first, then one FULL graph per copy */
    if (peer_enqueue(&p, 0, m, stream) != CLI_OK)
      goto done;
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int c = 0; c < p.copies; c++) {
      cudaGraph_t graph = NULL;
      BENCH_CUDA(
          cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      int er = peer_enqueue(&p, c, m, stream);
      cudaError_t ce = cudaStreamEndCapture(stream, &graph);
      if (er != CLI_OK || ce != cudaSuccess) {
        if (graph)
          cudaGraphDestroy(graph);
        (void)cudaGetLastError();
        if (ce != cudaSuccess)
          cli_error("cuda: cudaStreamEndCapture: %s", cudaGetErrorString(ce));
        goto done;
      }
      cudaError_t ie = cudaGraphInstantiate(&p.exec[c], graph, 0);
      cudaGraphDestroy(graph);
      BENCH_CUDA(ie);
    }
    double us = NAN;
    if (bench_time_eager(peer_unit, &p, p.copies, o->reps, stream, &us) !=
        CLI_OK)
      goto done;
    (fp8 ? &rows[j].fp8_us : &rows[j].fp16_us)[0] = us;
  }
  r = CLI_OK;
done:
  peer_free(&p);
  return r;
}

/* ---- report ------------------------------------------------------------- */

/* K averaged over the step's weights. */
static double bits_average(const step_model *model) {
  double kbits = 0, weights = 0;
  for (size_t i = 0; i < model->count; i++) {
    const double w = (double)model->layers[i].k * (double)model->layers[i].n;
    weights += w;
    kbits += w * model->layers[i].bits;
  }
  return weights > 0 ? kbits / weights : 0;
}

static void print_headline(const bench_env *env, const bench_options *o,
                           const step_model *model, int copies) {
  char fl[64];
  bench_print_env(env, "trellis bench --model");
  printf("model: %s: %d blocks, hidden %lld, %zu EXL3 layers%s, %.3f bits "
         "per weight on average, %.1f MiB of trellis payload per step\n",
         model->source, model->blocks, (long long)model->hidden, model->count,
         model->has_head ? " (lm_head included)" : "", bits_average(model),
         model->weight_bytes / (1 << 20));
  printf("method: every layer uploaded and planned once (max_m %lld, flags "
         "%s), one set of caller buffers sized with "
         "trellis_plans_buffer_sizes; a step = per block q/k/v (or q_b), an "
         "attention stand-in kernel, o, gate/up (or gate_up), down, then "
         "the head; eager = every launch on the stream, FULL = one CUDA "
         "graph, PIECEWISE = one graph per run of layers between stand-ins "
         "(which stay eager); each mode checked first (outputs poisoned "
         "with NaN, every layer's output and the final output bit-equal to "
         "the eager step); median over %d timed steps after >= %.0f ms of "
         "warm-up; weights cold: %s\n",
         (long long)env->max_m, bench_flags_name(o->flags, fl, sizeof fl),
         o->reps, o->warmup_ms,
         copies > 1 ? "the step's weights are below max(256 MiB, 4 x L2), so "
                      "timed steps cycle distinct copies"
                    : "one step reads more than max(256 MiB, 4 x L2)");
  if (copies > 1)
    printf("copies: %d distinct copies of every layer, each timed step on "
           "the next\n",
           copies);
  printf("peers: the same step (order, stand-ins, data dependencies for "
         "FP16; FP8 layers read one E4M3 activation buffer, quantisation "
         "not counted) from cuBLASLt FP16 (W[n,k], heuristic algorithm) and "
         "FP8 W8A8 (E4M3 TN, per-tensor scales, M rounded up to %d, the "
         "first heuristic algorithm that runs) GEMMs, timed as FULL graphs; "
         "vs = peer us / ours FULL us (> 1: ours faster)\n\n",
         BENCH_FP8_M_MULTIPLE);
  fflush(stdout);
}

static void peer_text(char *out, size_t size, const peer_result *p,
                      const char *name, int blocks) {
  if (p->note)
    bench_sfmt(out, size, "%s n/a (%s)", name, p->note);
  else if (p->pool < 0)
    bench_sfmt(out, size, "%s not run", name);
  else if (p->pool < blocks)
    bench_sfmt(out, size,
               "%s %.2f GiB of weights, pool of %d blocks (the model does not "
               "fit: block b runs on the weights of block b %% %d)",
               name, p->weight_bytes / (1 << 30), p->pool, p->pool);
  else
    bench_sfmt(out, size, "%s %.2f GiB of weights, %d cop%s", name,
               p->weight_bytes / (1 << 30), p->copies,
               p->copies == 1 ? "y" : "ies (cycled)");
}

/* A number, or "n/a" where not measured. */
static void cell(char *out, size_t size, const char *fmt, double v) {
  if (isnan(v))
    bench_sfmt(out, size, "n/a");
  else
    snprintf(out, size, fmt, v);
}

void step_bench_print(const bench_env *env, const bench_options *o,
                      const step_model *model, const step_row *rows,
                      const step_engine *st, size_t mem_used,
                      const peer_result *p16, const peer_result *p8) {
  printf("| %4s | %10s | %10s | %10s | %8s | %6s | %10s | %7s | %10s | %7s "
         "| %-5s |\n",
         "M", "eager us", "FULL us", "PIECE us", "wt GB/s", "%peak", "FP16 us",
         "vs FP16", "FP8 us", "vs FP8", "check");
  printf("|------|------------|------------|------------|----------|-------"
         "-|------------|---------|------------|---------|-------|\n");
  for (int j = 0; j < o->nms; j++) {
    const step_row *r = &rows[j];
    const double gbs = model->weight_bytes / (r->us[1] * 1e-6) / 1e9;
    const int ok = r->ok[0] && r->ok[1] && r->ok[2];
    char f16[32], v16[32], f8[32], v8[32];
    cell(f16, sizeof f16, "%.1f", r->fp16_us);
    cell(v16, sizeof v16, "%.2fx", r->fp16_us / r->us[1]);
    cell(f8, sizeof f8, "%.1f", r->fp8_us);
    cell(v8, sizeof v8, "%.2fx", r->fp8_us / r->us[1]);
    printf("| %4lld | %10.1f | %10.1f | %10.1f | %8.1f | %5.1f%% | %10s | "
           "%7s | %10s | %7s | %-5s |\n",
           (long long)r->m, r->us[0], r->us[1], r->us[2], gbs,
           100.0 * gbs / env->read_peak_gbs, f16, v16, f8, v8,
           ok ? "PASS" : "FAIL");
  }
  printf("\nper layer kind (us per step, each kind's layers alone as one "
         "graph):\n| %4s |",
         "M");
  for (int kd = 0; kd < STEP_KINDS; kd++)
    if (!isnan(rows[0].kind_us[kd]))
      printf(" %8s |", synth_role_name(step_kind_role(kd)));
  printf(" %8s |\n", "sum");
  for (int j = 0; j < o->nms; j++) {
    double sum = 0;
    printf("| %4lld |", (long long)rows[j].m);
    for (int kd = 0; kd < STEP_KINDS; kd++)
      if (!isnan(rows[0].kind_us[kd])) {
        printf(" %8.1f |", rows[j].kind_us[kd]);
        sum += rows[j].kind_us[kd];
      }
    printf(" %8.1f |\n", sum);
  }
  for (int j = 0; j < o->nms; j++)
    for (int md = 0; md < 3; md++)
      if (!rows[j].ok[md])
        printf("check FAIL at M=%lld: %s\n", (long long)rows[j].m,
               rows[j].detail[md]);
  char t16[200], t8[200];
  peer_text(t16, sizeof t16, p16, "FP16", model->blocks);
  peer_text(t8, sizeof t8, p8, "FP8", model->blocks);
  printf("\ndevice memory (ours): weights %.2f GiB, caller buffers %.2f MiB "
         "(rotated %zu, input_f16 %zu, output_f16 %zu, workspace %zu bytes), "
         "activations %.2f MiB; cudaMemGetInfo: %.2f GiB used by the engine "
         "(plans included)\n",
         (double)st->weight_bytes / (1 << 30),
         (double)st->buffer_bytes / (1 << 20), st->need.rotated_bytes,
         st->need.input_f16_bytes, st->need.output_f16_bytes,
         st->need.workspace_bytes, (double)st->activation_bytes / (1 << 20),
         (double)mem_used / (1 << 30));
  printf("peers: %s; %s\n", t16, t8);
  fflush(stdout);
}

/* ---- files -------------------------------------------------------------- */

/* the next number field (bench_csv_num) */
static void csv_num(FILE *f, const char *fmt, double v) {
  fputc(',', f);
  bench_csv_num(f, fmt, v);
}

/* One row per M; text fields never hold a quote or comma but the GPU's and
 * the model's names, which are quoted (bench_csv_str). */
static int write_csv(const char *path, const bench_env *env,
                     const step_model *model, const step_row *rows, int nms,
                     const peer_result *p16, const peer_result *p8) {
  bench_out out;
  if (bench_out_open(&out, "--csv", path) != CLI_OK)
    return CLI_FAIL;
  FILE *f = out.f;
  fprintf(f, "gpu,date,commit,read_peak_gbs,model,bits,m,eager_us,full_us,"
             "piecewise_us,weight_bytes,weight_gbs,pct_read_peak,fp16_us,"
             "vs_fp16,fp16_pool,fp8_us,vs_fp8,fp8_m,fp8_pool,check");
  for (int kd = 0; kd < STEP_KINDS; kd++)
    fprintf(f, ",%s_us", synth_role_name(step_kind_role(kd)));
  fputc('\n', f);
  for (int j = 0; j < nms; j++) {
    const step_row *r = &rows[j];
    const double gbs = model->weight_bytes / (r->us[1] * 1e-6) / 1e9;
    bench_csv_str(f, env->gpu);
    fprintf(f, ",%s,%s,%.1f,", env->date, env->commit, env->read_peak_gbs);
    bench_csv_str(f, model->source);
    fprintf(f, ",%.4f,%lld", bits_average(model), (long long)r->m);
    for (int md = 0; md < 3; md++)
      csv_num(f, "%.3f", r->us[md]);
    fprintf(f, ",%.0f", model->weight_bytes);
    csv_num(f, "%.1f", gbs);
    csv_num(f, "%.2f", 100.0 * gbs / env->read_peak_gbs);
    csv_num(f, "%.3f", r->fp16_us);
    csv_num(f, "%.3f", r->fp16_us / r->us[1]);
    fprintf(f, ",%d", p16->pool);
    csv_num(f, "%.3f", r->fp8_us);
    csv_num(f, "%.3f", r->fp8_us / r->us[1]);
    fprintf(f, ",%lld,%d,%s", (long long)r->fp8_m, p8->pool,
            r->ok[0] && r->ok[1] && r->ok[2] ? "PASS" : "FAIL");
    for (int kd = 0; kd < STEP_KINDS; kd++)
      csv_num(f, "%.3f", r->kind_us[kd]);
    fputc('\n', f);
  }
  return bench_out_close(&out);
}

static json_t *jnum(double v) {
  return isfinite(v) ? json_real(v) : json_null();
}

static json_t *json_peer(const peer_result *p) {
  return json_pack("{s:i, s:i, s:f, s:s?}", "pool_blocks", p->pool, "copies",
                   p->copies, "weight_bytes", p->weight_bytes, "note", p->note);
}

static int write_json(const char *path, const bench_env *env,
                      const bench_options *o, const step_model *model,
                      const step_row *rows, const step_engine *st,
                      size_t mem_used, const peer_result *p16,
                      const peer_result *p8) {
  char fl[64];
  json_t *jrows = json_array();
  for (int j = 0; jrows && j < o->nms; j++) {
    const step_row *r = &rows[j];
    const double gbs = model->weight_bytes / (r->us[1] * 1e-6) / 1e9;
    json_t *kinds = json_object();
    for (int kd = 0; kinds && kd < STEP_KINDS; kd++)
      if (!isnan(r->kind_us[kd]))
        json_object_set_new(kinds, synth_role_name(step_kind_role(kd)),
                            jnum(r->kind_us[kd]));
    json_t *row = json_pack(
        "{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, "
        "s:{s:b, s:b, s:b}, s:[s, s, s]}",
        "m", (json_int_t)r->m, "eager_us", jnum(r->us[0]), "full_us",
        jnum(r->us[1]), "piecewise_us", jnum(r->us[2]), "weight_gbs", jnum(gbs),
        "pct_read_peak", jnum(100.0 * gbs / env->read_peak_gbs), "kinds_us",
        kinds ? kinds : json_null(), "fp16_us", jnum(r->fp16_us), "vs_fp16",
        jnum(r->fp16_us / r->us[1]), "fp8_us", jnum(r->fp8_us), "fp8_m",
        (json_int_t)r->fp8_m, "vs_fp8", jnum(r->fp8_us / r->us[1]), "check",
        "eager", r->ok[0], "full", r->ok[1], "piecewise", r->ok[2],
        "check_detail", r->detail[0], r->detail[1], r->detail[2]);
    if (row == NULL || json_array_append_new(jrows, row) != 0) {
      json_decref(jrows);
      jrows = NULL;
    }
  }
  json_t *root =
      jrows == NULL
          ? NULL
          : json_pack(
                "{s:s, s:s, s:s, s:f, s:{s:s, s:i, s:I, s:I, s:b, s:f, s:f}, "
                "s:{s:i, s:f, s:s, s:I, s:i, s:i}, s:{s:I, s:I, s:I, s:I, "
                "s:I, s:I, s:I}, s:{s:o, s:o}, s:o, s:b}",
                "gpu", env->gpu, "date", env->date, "commit", env->commit,
                "read_peak_gbs", env->read_peak_gbs, "model", "source",
                model->source, "blocks", model->blocks, "hidden",
                (json_int_t)model->hidden, "layers", (json_int_t)model->count,
                "head", model->has_head, "bits", bits_average(model),
                "weight_bytes", model->weight_bytes, "method", "reps", o->reps,
                "warmup_ms", o->warmup_ms, "flags",
                bench_flags_name(o->flags, fl, sizeof fl), "max_m",
                (json_int_t)env->max_m, "copies", st->copies, "pieces",
                st->npieces, "memory", "weights", (json_int_t)st->weight_bytes,
                "rotated", (json_int_t)st->need.rotated_bytes, "input_f16",
                (json_int_t)st->need.input_f16_bytes, "output_f16",
                (json_int_t)st->need.output_f16_bytes, "workspace",
                (json_int_t)st->need.workspace_bytes, "activations",
                (json_int_t)st->activation_bytes, "engine_total",
                (json_int_t)mem_used, "peers", "fp16", json_peer(p16), "fp8",
                json_peer(p8), "rows", jrows, "complete", 1);
  bench_out out;
  if (root == NULL || bench_out_open(&out, "--json", path) != CLI_OK) {
    if (root == NULL)
      cli_error("--json %s: out of host memory", path);
    json_decref(root);
    return CLI_FAIL;
  }
  out.failed =
      json_dumpf(root, out.f, JSON_INDENT(1)) != 0 || fputc('\n', out.f) == EOF;
  json_decref(root);
  return bench_out_close(&out);
}

int bench_step_run(const bench_options *o) {
  bench_env env;
  step_model model;
  step_preset_options po;
  step_row *rows = NULL;
  step_engine stats;
  peer_result p16 = {.pool = -1}, p8 = {.pool = -1};
  cudaStream_t stream = NULL;
  size_t mem_used = 0;
  int r = CLI_FAIL, failed = 0;
  memset(&env, 0, sizeof env);
  memset(&stats, 0, sizeof stats);
  step_preset_options_init(&po);
  po.bits = o->model_bits;
  po.blocks = o->blocks;
  po.head_bits = o->head_bits;
  po.head_half = o->head_half;
  po.codebook = o->cbs[0];
  int mr = step_model_open(o->model, &po, &model);
  if (mr != CLI_OK) {
    step_model_close(&model);
    return mr;
  }
  if (trellis_cuda_device_count() <= 0) {
    cli_error("bench: " CLI_NO_CUDA_DEVICE);
    step_model_close(&model);
    return CLI_FAIL;
  }
  bench_stamp(&env);
  env.max_m = 1;
  for (int i = 0; i < o->nms; i++)
    env.max_m = o->ms[i] > env.max_m ? o->ms[i] : env.max_m;
  bench_time_set_warmup_ms(o->warmup_ms);
  BENCH_ALLOC(rows, o->nms);
  for (int j = 0; j < o->nms; j++) {
    rows[j].m = o->ms[j];
    rows[j].fp16_us = rows[j].fp8_us = NAN;
    for (int kd = 0; kd < STEP_KINDS; kd++)
      rows[j].kind_us[kd] = NAN;
  }
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (bench_query_gpu(&env) != CLI_OK ||
      bench_read_peak(stream, &env.read_peak_gbs) != CLI_OK)
    goto done;
  const int copies = step_copies(model.weight_bytes, env.cold_bytes);
  print_headline(&env, o, &model, copies);
  if (step_bench_ours(o, &model, copies, stream, rows, &mem_used, &stats,
                      NULL) != CLI_OK)
    goto done;
  if (!o->no_peers &&
      (step_bench_peer(o, &env, &model, 0, stream, rows, &p16) != CLI_OK ||
       step_bench_peer(o, &env, &model, 1, stream, rows, &p8) != CLI_OK))
    goto done;
  step_bench_print(&env, o, &model, rows, &stats, mem_used, &p16, &p8);
  if (o->csv_path &&
      write_csv(o->csv_path, &env, &model, rows, o->nms, &p16, &p8) != CLI_OK)
    goto done;
  if (o->json_path && write_json(o->json_path, &env, o, &model, rows, &stats,
                                 mem_used, &p16, &p8) != CLI_OK)
    goto done;
  for (int j = 0; j < o->nms; j++)
    failed += !(rows[j].ok[0] && rows[j].ok[1] && rows[j].ok[2]);
  r = CLI_OK;
done:
  if (r == CLI_OK && failed) {
    cli_error("bench: %d M value%s failed the check against the eager step",
              failed, failed == 1 ? "" : "s");
    r = CLI_FAIL;
  }
  free(rows);
  if (stream)
    cudaStreamDestroy(stream);
  step_model_close(&model);
  return r;
}

#else /* CPU-only build */

int bench_step_run(const bench_options *o) {
  (void)o;
  cli_error("bench: " CLI_NO_CUDA_BUILD " (the benchmark needs "
            "a GPU build: configure with -DTRELLIS_CUDA=ON)");
  return CLI_USAGE;
}

#endif
