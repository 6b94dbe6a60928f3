/* SPDX-License-Identifier: Apache-2.0 */
/* The decode-step engine (step.h): uploads and plans every layer, sizes
 * the shared buffers once, and runs one step eagerly, as one CUDA graph
 * (FULL) or as one graph per piece between attention stand-ins
 * (PIECEWISE); the check of a mode against the eager step. */
#include "step.h"

#include "bench.h"
#include "kernels.h"
#include "tools/device.h"
#include "tools/synth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *step_mode_name(step_mode mode) {
  switch (mode) {
  case STEP_EAGER:
    return "eager";
  case STEP_FULL:
    return "FULL";
  case STEP_PIECEWISE:
    return "PIECEWISE";
  }
  return "invalid";
}

/* ---- weights ------------------------------------------------------------ */

/* The payload words of a rank's shard of a preset layer, generated where
 * they lie in the whole layer: bench_fill's words are the host RNG's draws
 * (four words each), so a run starting at word w of the layer starts from
 * the seed advanced by w / 4 draws (w is a multiple of 16). */
static int fill_shard(uint16_t *dst, const step_layer *l, uint64_t seed,
                      cudaStream_t stream) {
  const size_t tile = 16u * (size_t)l->bits; /* words */
  const size_t tiles_n = (size_t)(l->full_n / 16);
  const int along_k = l->split == TRELLIS_SPLIT_K;
  const size_t rows = along_k ? 1 : (size_t)(l->k / 16);
  const size_t run =
      along_k ? l->payload_bytes / 2 : (size_t)(l->n / 16) * tile;
  int r = CLI_FAIL;
  for (size_t row = 0; row < rows; row++) {
    const size_t first = along_k
                             ? (size_t)(l->begin / 16) * tiles_n * tile
                             : (row * tiles_n + (size_t)(l->begin / 16)) * tile;
    synth_rng rng;
    synth_seed(&rng, seed);
    synth_skip(&rng, first / 4);
    BENCH_KERNEL(bench_fill(dst + row * run, run, rng.state, 3, stream));
  }
  r = CLI_OK;
done:
  return r;
}

/* Layer i of a preset, copy `copy`: one device allocation holding the
 * payload (the words tools/synth_model writes, generated on the device; a
 * rank's shard: its part of them; then repacked in place into the lane
 * layout plans read), suh and svh (the host's synth scales of the whole
 * layer, `suh`/`svh`; a shard's slice of them). */
static int upload_preset(step_engine *e, size_t i, int copy,
                         const uint16_t *suh, const uint16_t *svh,
                         cudaStream_t stream) {
  const step_model *m = e->model;
  const step_layer *l = &m->layers[i];
  const size_t slot = (size_t)copy * m->count + i;
  const size_t payload = l->payload_bytes; /* a multiple of 256 */
  const size_t bytes = payload + 2 * (size_t)l->k + 2 * (size_t)l->n;
  void *alloc = NULL;
  int r = CLI_FAIL;
  BENCH_CUDA(cudaMalloc(&alloc, bytes));
  e->raw[slot] = alloc;
  e->weight_bytes += bytes;
  uint8_t *base = alloc;
  const uint64_t seed = synth_module_seed(m->synth.opt.seed, l->name);
  if (l->sharded) {
    if (fill_shard((uint16_t *)base, l, seed, stream) != CLI_OK)
      goto done;
    if (l->split == TRELLIS_SPLIT_K)
      suh += l->begin;
    else
      svh += l->begin;
  } else {
    BENCH_KERNEL(bench_fill((uint16_t *)base, payload / 2, seed, 3, stream));
  }
  BENCH_CUDA(cudaMemcpyAsync(base + payload, suh, 2 * (size_t)l->k,
                             cudaMemcpyHostToDevice, stream));
  BENCH_CUDA(cudaMemcpyAsync(base + payload + 2 * (size_t)l->k, svh,
                             2 * (size_t)l->n, cudaMemcpyHostToDevice, stream));
  trellis_weight *v = &e->views[slot];
  trellis_weight_init(v);
  v->k = l->k;
  v->n = l->n;
  v->bits = l->bits;
  v->half = l->half;
  v->codebook = l->codebook;
  v->trellis = (const int16_t *)base;
  v->suh = (const uint16_t *)(base + payload);
  v->svh = (const uint16_t *)(base + payload + 2 * (size_t)l->k);
  /* the words are the checkpoint's; plans read the lane layout. Random
   * words in the k-major layout are as much a payload (of another random
   * checkpoint): they stay as they are. */
  if (e->layout == TRELLIS_LAYOUT_LANES)
    BENCH_TRELLIS(trellis_weight_repack(v, (int16_t *)base, NULL, stream));
  v->layout = e->layout;
  r = CLI_OK;
done:
  return r;
}

/* A directory layer, or a rank's shard of it (trellis_weight_shard on the
 * host: only the rank's pages of the mapped file are read), uploaded. */
static int upload_dir(step_engine *e, size_t i, const trellis_layer *hl) {
  const step_layer *l = &e->model->layers[i];
  trellis_weight w = hl->weight;
  void *memory = NULL;
  int r = CLI_FAIL;
  if (l->sharded) {
    trellis_shard_desc d;
    trellis_shard_desc_init(&d);
    d.split = l->split;
    d.ranks = e->model->tp_ranks;
    d.rank = e->model->tp_rank;
    size_t bytes = 0;
    BENCH_TRELLIS(trellis_weight_shard_bytes(&hl->weight, &d, &bytes));
    if (bytes && (memory = aligned_alloc(16, (bytes + 15) / 16 * 16)) == NULL) {
      cli_error("bench: out of host memory (%s's shard)", l->name);
      goto done;
    }
    trellis_weight_init(&w);
    BENCH_TRELLIS(trellis_weight_shard(&hl->weight, &d, memory, bytes, &w));
  }
  for (int c = 0; c < e->copies; c++) {
    const size_t slot = (size_t)c * e->model->count + i;
    BENCH_TRELLIS(trellis_weight_upload_layout(&w, e->layout, &e->dw[slot]));
    e->views[slot] = *trellis_device_weight_view(e->dw[slot]);
    e->weight_bytes += trellis_weight_payload_bytes(&w) +
                       2 * (size_t)(l->k + l->n) +
                       (w.bias ? 2 * (size_t)l->n : 0);
  }
  r = CLI_OK;
done:
  free(memory); /* the upload copied it */
  return r;
}

static int upload_all(step_engine *e, cudaStream_t stream) {
  const step_model *m = e->model;
  uint16_t *suh = NULL, *svh = NULL;
  int r = CLI_FAIL;
  for (size_t i = 0; i < m->count; i++) {
    const step_layer *l = &m->layers[i];
    const int64_t k = l->sharded ? l->full_k : l->k;
    const int64_t n = l->sharded ? l->full_n : l->n;
    if (m->from_preset) {
      free(suh);
      free(svh);
      suh = NULL;
      svh = NULL;
      BENCH_ALLOC(suh, k);
      BENCH_ALLOC(svh, n);
      BENCH_TRELLIS(synth_linear_scales(&m->synth, l->index, suh, svh));
      for (int c = 0; c < e->copies; c++)
        if (upload_preset(e, i, c, suh, svh, stream) != CLI_OK)
          goto done;
      /* the scales' host copies are reused by the next layer */
      BENCH_CUDA(cudaStreamSynchronize(stream));
      continue;
    }
    trellis_layer hl;
    BENCH_TRELLIS(trellis_model_layer(m->model, l->index, &hl));
    if (upload_dir(e, i, &hl) != CLI_OK)
      goto done;
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  r = CLI_OK;
done:
  free(suh);
  free(svh);
  return r;
}

/* ---- the step's launches ------------------------------------------------ */

/* The ops of one step: per block its layers in order, the stand-in after
 * the last layer that feeds attention (q, k, v or q_b), with tensor
 * parallelism an all-reduce after o and down; the pieces are the runs of
 * ops between stand-ins (all-reduces included). */
static int build_ops(step_engine *e) {
  const step_model *m = e->model;
  int r = CLI_FAIL;
  BENCH_ALLOC(e->ops, 3 * m->count + 1);
  BENCH_ALLOC(e->piece_first, m->count + 1);
  BENCH_ALLOC(e->piece_end, m->count + 1);
  const void *block_in = e->x0;
  long q_layer = -1;
  for (size_t i = 0; i < m->count; i++) {
    const step_layer *l = &m->layers[i];
    const int kind = step_kind_of(l->role);
    if (l->role == SYNTH_ROLE_Q || l->role == SYNTH_ROLE_Q_B)
      q_layer = (long)i;
    /* the stand-in goes before the first layer after attention's inputs */
    if (q_layer >= 0 && kind >= step_kind_of(SYNTH_ROLE_O) &&
        m->layers[q_layer].block == l->block &&
        (i == 0 ||
         step_kind_of(m->layers[i - 1].role) < step_kind_of(SYNTH_ROLE_O))) {
      e->ops[e->nops++] = (step_op){.layer = STEP_OP_STANDIN,
                                    .x = e->y[q_layer],
                                    .y = e->attn,
                                    .count_k = m->layers[q_layer].n};
    }
    const void *x =
        l->src == STEP_SRC_LAYER ? (const void *)e->y[l->src_layer] : block_in;
    e->ops[e->nops++] = (step_op){.layer = (int)i, .x = x, .y = e->y[i]};
    if (m->tp && (l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN))
      e->ops[e->nops++] = (step_op){
          .layer = STEP_OP_ALLREDUCE, .reduced = (int)i, .y = e->y[i]};
    if (l->role == SYNTH_ROLE_DOWN)
      block_in = e->y[i];
    if (i + 1 == m->count || m->layers[i + 1].block != l->block)
      q_layer = -1;
  }
  /* pieces: maximal runs of ops between stand-ins */
  e->npieces = 0;
  for (size_t i = 0; i < e->nops; i++) {
    if (e->ops[i].layer == STEP_OP_STANDIN)
      continue;
    if (i == 0 || e->ops[i - 1].layer == STEP_OP_STANDIN)
      e->piece_first[e->npieces] = i;
    if (i + 1 == e->nops || e->ops[i + 1].layer == STEP_OP_STANDIN)
      e->piece_end[e->npieces++] = i + 1;
  }
  r = CLI_OK;
done:
  return r;
}

static int run_op(step_engine *e, const step_op *op, int copy, int64_t m,
                  cudaStream_t stream) {
  if (op->layer == STEP_OP_ALLREDUCE) {
    const step_tp *tp = e->model->tp;
    const size_t count = (size_t)m * (size_t)e->model->layers[op->reduced].n;
    return tp->allreduce(tp->ctx, op->y, count, stream);
  }
  if (op->layer < 0) {
    int err = bench_attention_standin(op->x, op->y,
                                      (size_t)m * (size_t)op->count_k, stream);
    if (err != 0) {
      cli_error("cuda: attention stand-in: %s",
                cudaGetErrorString((cudaError_t)err));
      return CLI_FAIL;
    }
    return CLI_OK;
  }
  const size_t slot = (size_t)copy * e->model->count + (size_t)op->layer;
  trellis_clear_error();
  trellis_status st =
      trellis_run(e->plans[slot], op->x, m, op->y, &e->b, stream);
  if (st != TRELLIS_OK) {
    e->last_status = st;
    return cli_lib_error(st, e->model->layers[op->layer].name);
  }
  return CLI_OK;
}

int step_run_op(step_engine *e, size_t i, int copy, int64_t m,
                cudaStream_t stream) {
  return run_op(e, &e->ops[i], copy, m, stream);
}

int step_enqueue(step_engine *e, int copy, int64_t m, cudaStream_t stream) {
  for (size_t i = 0; i < e->nops; i++)
    if (run_op(e, &e->ops[i], copy, m, stream) != CLI_OK)
      return CLI_FAIL;
  return CLI_OK;
}

/* ---- open / close ------------------------------------------------------- */

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

int step_engine_open(step_engine *e, const step_model *model, int copies,
                     const int64_t *ms, int nms, uint32_t flags,
                     cudaStream_t stream) {
  int r = CLI_FAIL;
  memset(e, 0, sizeof *e);
  e->model = model;
  e->copies = copies < 1 ? 1 : copies;
  e->layout = bench_layout(flags);
  trellis_buffers_init(&e->b);
  trellis_buffers_init(&e->owned);
  e->max_m = 1;
  for (int i = 0; i < nms; i++)
    e->max_m = ms[i] > e->max_m ? ms[i] : e->max_m;
  const size_t count = model->count, slots = (size_t)e->copies * count;
  BENCH_ALLOC(e->dw, slots);
  BENCH_ALLOC(e->raw, slots);
  BENCH_ALLOC(e->views, slots);
  BENCH_ALLOC(e->plans, slots);
  BENCH_ALLOC(e->y, count);
  if (upload_all(e, stream) != CLI_OK)
    goto done;

  trellis_plan_desc desc;
  trellis_plan_desc_init(&desc);
  desc.max_m = e->max_m;
  desc.input_dtype = TRELLIS_F16;
  desc.output_dtype = TRELLIS_F16;
  desc.flags = bench_plan_flags(flags);
  for (size_t s = 0; s < slots; s++) {
    BENCH_TRELLIS(trellis_plan_create(&e->views[s], &desc, &e->plans[s]));
    e->nplans = s + 1;
    BENCH_TRELLIS(trellis_plan_prepare(e->plans[s]));
  }

  /* one set of buffers for every plan at every m of the run */
  memset(&e->need, 0, sizeof e->need);
  e->need.struct_size = sizeof e->need;
  for (int i = 0; i < nms; i++) {
    trellis_buffer_sizes sz;
    BENCH_TRELLIS(trellis_plans_buffer_sizes(
        (const trellis_plan *const *)e->plans, e->nplans, ms[i], &sz));
    e->need.rotated_bytes = max_size(e->need.rotated_bytes, sz.rotated_bytes);
    e->need.input_f16_bytes =
        max_size(e->need.input_f16_bytes, sz.input_f16_bytes);
    e->need.output_f16_bytes =
        max_size(e->need.output_f16_bytes, sz.output_f16_bytes);
    e->need.workspace_bytes =
        max_size(e->need.workspace_bytes, sz.workspace_bytes);
  }
  if (cli_buffers_alloc(&e->need, &e->owned) != CLI_OK)
    goto done;
  e->b = e->owned;
  e->buffer_bytes = e->need.rotated_bytes + e->need.input_f16_bytes +
                    e->need.output_f16_bytes + e->need.workspace_bytes;

  /* activations: the step input, every layer's output, the stand-in's */
  const size_t rows = (size_t)e->max_m;
  int64_t attn_n = 0;
  BENCH_CUDA(cudaMalloc(&e->x0, rows * (size_t)model->hidden * 2));
  e->activation_bytes += rows * (size_t)model->hidden * 2;
  for (size_t i = 0; i < count; i++) {
    const step_layer *l = &model->layers[i];
    BENCH_CUDA(cudaMalloc(&e->y[i], rows * (size_t)l->n * 2));
    e->activation_bytes += rows * (size_t)l->n * 2;
    attn_n = l->n > attn_n ? l->n : attn_n;
  }
  BENCH_CUDA(cudaMalloc(&e->attn, rows * (size_t)attn_n * 2));
  BENCH_CUDA(cudaMalloc((void **)&e->digests, 3 * count * sizeof *e->digests));
  e->activation_bytes +=
      rows * (size_t)attn_n * 2 + 3 * count * sizeof *e->digests;
  BENCH_KERNEL(bench_fill(e->x0, rows * (size_t)model->hidden, 0x5eed5739ull, 1,
                          stream));
  if (build_ops(e) != CLI_OK)
    goto done;
  BENCH_ALLOC(e->full, e->copies);
  BENCH_ALLOC(e->pieces, (size_t)e->copies * (size_t)(e->npieces + 1));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  r = CLI_OK;
done:
  return r;
}

static void drop_graphs(step_engine *e, step_mode mode) {
  if (mode == STEP_FULL && e->full) {
    for (int c = 0; c < e->copies; c++)
      if (e->full[c]) {
        cudaGraphExecDestroy(e->full[c]);
        e->full[c] = NULL;
      }
    e->have_full = 0;
  }
  if (mode == STEP_PIECEWISE && e->pieces) {
    for (size_t i = 0; i < (size_t)e->copies * (size_t)e->npieces; i++)
      if (e->pieces[i]) {
        cudaGraphExecDestroy(e->pieces[i]);
        e->pieces[i] = NULL;
      }
    e->have_pieces = 0;
  }
}

void step_engine_close(step_engine *e) {
  drop_graphs(e, STEP_FULL);
  drop_graphs(e, STEP_PIECEWISE);
  for (size_t s = 0; s < e->nplans; s++)
    trellis_plan_destroy(e->plans[s]);
  const size_t slots = e->model ? (size_t)e->copies * e->model->count : 0;
  for (size_t s = 0; s < slots; s++) {
    if (e->dw && e->dw[s])
      trellis_device_weight_destroy(e->dw[s]);
    if (e->raw && e->raw[s])
      cudaFree(e->raw[s]);
  }
  for (size_t i = 0; e->y && i < e->model->count; i++)
    cudaFree(e->y[i]);
  cli_buffers_free(&e->owned);
  cudaFree(e->x0);
  cudaFree(e->attn);
  cudaFree(e->digests);
  free(e->dw);
  free(e->raw);
  free(e->views);
  free(e->plans);
  free(e->y);
  free(e->ops);
  free(e->piece_first);
  free(e->piece_end);
  free(e->full);
  free(e->pieces);
  memset(e, 0, sizeof *e);
}

/* ---- graphs ------------------------------------------------------------- */

/* Captures ops[first..end) of copy `copy` at m into *exec (bench_capture:
 * a failed launch ends the capture and drops the partial graph). */
typedef struct op_range {
  step_engine *e;
  size_t first;
  int copy;
  int64_t m;
} op_range;

static int enqueue_op(void *ctx, int index, cudaStream_t stream) {
  const op_range *r = ctx;
  return run_op(r->e, &r->e->ops[r->first + (size_t)index], r->copy, r->m,
                stream);
}

static int capture_ops(step_engine *e, size_t first, size_t end, int copy,
                       int64_t m, cudaStream_t stream, cudaGraphExec_t *exec) {
  op_range r = {e, first, copy, m};
  return bench_capture(enqueue_op, &r, (int)(end - first), stream, exec);
}

int step_capture(step_engine *e, step_mode mode, int64_t m,
                 cudaStream_t stream) {
  if (mode == STEP_EAGER)
    return CLI_OK;
  if (m < 1 || m > e->max_m) {
    cli_error("bench: step capture at m = %lld, outside 1..%lld", (long long)m,
              (long long)e->max_m);
    return CLI_FAIL;
  }
  drop_graphs(e, mode);
  e->last_status = TRELLIS_OK;
  for (int c = 0; c < e->copies; c++) {
    if (mode == STEP_FULL) {
      if (capture_ops(e, 0, e->nops, c, m, stream, &e->full[c]) != CLI_OK)
        goto fail;
      continue;
    }
    for (int p = 0; p < e->npieces; p++)
      if (capture_ops(e, e->piece_first[p], e->piece_end[p], c, m, stream,
                      &e->pieces[(size_t)c * (size_t)e->npieces + (size_t)p]) !=
          CLI_OK)
        goto fail;
  }
  e->graph_m = m;
  if (mode == STEP_FULL)
    e->have_full = 1;
  else
    e->have_pieces = 1;
  return CLI_OK;
fail:
  drop_graphs(e, mode);
  return CLI_FAIL;
}

int step_launch(step_engine *e, step_mode mode, int copy, int64_t m,
                cudaStream_t stream) {
  int r = CLI_FAIL;
  if (mode == STEP_EAGER)
    return step_enqueue(e, copy, m, stream);
  if (e->graph_m != m ||
      (mode == STEP_FULL ? !e->have_full : !e->have_pieces)) {
    cli_error("bench: no %s graphs captured at m = %lld", step_mode_name(mode),
              (long long)m);
    return CLI_FAIL;
  }
  if (mode == STEP_FULL) {
    BENCH_CUDA(cudaGraphLaunch(e->full[copy], stream));
    return CLI_OK;
  }
  int piece = 0;
  for (size_t i = 0; i < e->nops;) {
    if (e->ops[i].layer == STEP_OP_STANDIN) { /* eager */
      if (run_op(e, &e->ops[i], copy, m, stream) != CLI_OK)
        goto done;
      i++;
      continue;
    }
    BENCH_CUDA(cudaGraphLaunch(
        e->pieces[(size_t)copy * (size_t)e->npieces + (size_t)piece], stream));
    i = e->piece_end[piece++];
  }
  r = CLI_OK;
done:
  return r;
}

/* ---- check -------------------------------------------------------------- */

int step_poison(step_engine *e, cudaStream_t stream) {
  const step_model *m = e->model;
  int r = CLI_FAIL;
  for (size_t i = 0; i < m->count; i++)
    BENCH_CUDA(cudaMemsetAsync(
        e->y[i], 0xFF, (size_t)e->max_m * (size_t)m->layers[i].n * 2, stream));
  r = CLI_OK;
done:
  return r;
}

int step_digest_all(step_engine *e, int64_t m, cudaStream_t stream,
                    step_digest *out) {
  const step_model *model = e->model;
  const size_t count = model->count;
  int r = CLI_FAIL;
  BENCH_CUDA(
      cudaMemsetAsync(e->digests, 0, 3 * count * sizeof *e->digests, stream));
  for (size_t i = 0; i < count; i++)
    BENCH_KERNEL(bench_digest(e->y[i], (size_t)m * (size_t)model->layers[i].n,
                              &e->digests[3 * i], stream));
  _Static_assert(sizeof(step_digest) == 3 * sizeof(unsigned long long),
                 "step_digest is three counters");
  BENCH_CUDA(cudaMemcpyAsync(out, e->digests, count * sizeof *out,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  r = CLI_OK;
done:
  return r;
}

int step_check(step_engine *e, step_mode mode, int64_t m, int replays,
               cudaStream_t stream, int *ok, char *detail, size_t size) {
  const step_model *model = e->model;
  const size_t count = model->count;
  const size_t last_bytes = (size_t)m * (size_t)model->layers[count - 1].n * 2;
  step_digest *want = NULL, *got = NULL;
  uint8_t *want_y = NULL, *got_y = NULL;
  int r = CLI_FAIL;
  *ok = 0;
  bench_sfmt(detail, size, "not checked");
  BENCH_ALLOC(want, count);
  BENCH_ALLOC(got, count);
  BENCH_ALLOC(want_y, last_bytes);
  BENCH_ALLOC(got_y, last_bytes);
  /* the reference: the eager step of copy 0, every output poisoned first */
  if (step_poison(e, stream) != CLI_OK ||
      step_enqueue(e, 0, m, stream) != CLI_OK ||
      step_digest_all(e, m, stream, want) != CLI_OK)
    goto done;
  BENCH_CUDA(
      cudaMemcpy(want_y, e->y[count - 1], last_bytes, cudaMemcpyDeviceToHost));
  /* every element written; a synthetic model's activations stay O(1) (a
   * real model's may overflow without its norms: not an error) */
  for (size_t i = 0; i < count; i++)
    if (want[i].poison || (model->from_preset && want[i].nonfinite)) {
      bench_sfmt(detail, size,
                 "the eager step leaves %llu unwritten and %llu non-finite "
                 "values in %s",
                 want[i].poison, want[i].nonfinite, model->layers[i].name);
      r = CLI_OK;
      goto done;
    }
  for (int c = 0; c < e->copies; c++)
    for (int rep = 0; rep < replays; rep++) {
      if (step_poison(e, stream) != CLI_OK ||
          step_launch(e, mode, c, m, stream) != CLI_OK ||
          step_digest_all(e, m, stream, got) != CLI_OK)
        goto done;
      BENCH_CUDA(cudaMemcpy(got_y, e->y[count - 1], last_bytes,
                            cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; i++)
        if (got[i].hash != want[i].hash ||
            got[i].nonfinite != want[i].nonfinite ||
            got[i].poison != want[i].poison) {
          bench_sfmt(detail, size,
                     "%s copy %d replay %d: %s differs from the eager step "
                     "(%llu values unwritten)",
                     step_mode_name(mode), c, rep + 1, model->layers[i].name,
                     got[i].poison);
          r = CLI_OK;
          goto done;
        }
      if (memcmp(got_y, want_y, last_bytes) != 0) {
        bench_sfmt(detail, size,
                   "%s copy %d replay %d: the final output differs from the "
                   "eager step",
                   step_mode_name(mode), c, rep + 1);
        r = CLI_OK;
        goto done;
      }
    }
  *ok = 1;
  bench_sfmt(detail, size, "bit-equal to eager (%d replay%s x %d cop%s)",
             replays, replays == 1 ? "" : "s", e->copies,
             e->copies == 1 ? "y" : "ies");
  r = CLI_OK;
done:
  free(want);
  free(got);
  free(want_y);
  free(got_y);
  return r;
}
