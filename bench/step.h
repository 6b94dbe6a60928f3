/* SPDX-License-Identifier: Apache-2.0 */
/* The decode step of a whole model (`trellis bench --model`): its layer list
 * and wiring (step_model.c, plain C) and the engine that uploads, plans and
 * runs it eagerly, as one CUDA graph (FULL) or one graph per piece between
 * attention calls (PIECEWISE) (step.c, CUDA builds).
 *
 * A step, in order: per block, the layers that read the block input (q, k,
 * v or q_b), the attention stand-in (a small kernel that reads q's output),
 * o (reads q's output), the MLP layers that read the block input (gate, up
 * or gate_up) and down (reads gate's or gate_up's output); down's output is
 * the next block's input; the head (lm_head), if any, reads the last
 * block's output. A layer reading a narrower operand than its source (q_b
 * on the block input, down on gate_up's) reads the source's first m x k
 * elements. Method and output: bench/README.md. */
#ifndef BENCH_STEP_H
#define BENCH_STEP_H

#include "tools/synth_model.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

/* Where a layer reads its input. */
typedef enum step_source {
  STEP_SRC_BLOCK_INPUT = 0, /* the block input (block 0: the step input) */
  STEP_SRC_LAYER = 1        /* the output of layer `src_layer` */
} step_source;

/* One EXL3 linear layer of the step. */
typedef struct step_layer {
  char name[SYNTH_NAME_MAX];
  synth_role role;
  int block;    /* -1: the head */
  int64_t k, n; /* a tensor-parallel rank's: its shard's */
  int bits;
  int half; /* K = bits + 1/2 */
  trellis_codebook codebook;
  size_t payload_bytes; /* k*n*K/8 */
  size_t index;         /* the model's layer index, or the synth module */
  step_source src;
  size_t src_layer; /* STEP_SRC_LAYER: its index in step_model.layers */
  /* a rank's shard (step_model_open_tp): the layer's whole k x n, the axis
   * it is split on and the rank's features [begin, end) there */
  int sharded;
  trellis_split split;
  int64_t full_k, full_n, begin, end;
} step_layer;

/* Tensor parallelism (bench/tp_step.c): one rank of `ranks`. The step's
 * collectives go through these hooks, so that the benchmark library itself
 * never depends on a collectives library. */
typedef struct step_tp {
  int ranks, rank;
  /* sums `count` fp16 values at `buf` over the ranks, in place, enqueued
   * on `stream` (capturable): CLI_OK or one line printed and CLI_FAIL */
  int (*allreduce)(void *ctx, void *buf, size_t count, void *stream);
  /* the smallest of every rank's `value` (every rank calls it at the same
   * point): decisions that change the collectives a rank issues (copies,
   * whether a peer runs) are taken alike on every rank */
  int (*agree_min)(void *ctx, int value);
  void *ctx;
} step_tp;

/* The step of a model directory or of a preset synthesised in memory:
 * metadata only (no payload is read when it is built). */
typedef struct step_model {
  char source[512];     /* the directory, or "preset:NAME" */
  int from_preset;      /* 1: weights come from `synth` */
  trellis_model *model; /* a directory's model, else NULL */
  synth_model synth;    /* a preset's plan (from_preset) */
  step_layer *layers;   /* step order */
  size_t count;
  int blocks;          /* blocks with layers (0..blocks-1) */
  int64_t hidden;      /* width of a block input */
  size_t block_layers; /* layers of one block (every block has as many) */
  double weight_bytes; /* payload bytes of one step */
  double block_bytes;  /* payload bytes of block 0 */
  int has_head;
  /* tensor parallelism (NULL: one GPU): set by the caller after
   * step_model_open_tp; the engine adds an all-reduce after o and down */
  const step_tp *tp;
  int tp_ranks, tp_rank; /* what step_model_open_tp cut (0: nothing) */
  int presharded;        /* a preset that is one rank already (glm-tp4) */
} step_model;

/* What a preset step is built from (--bits, --blocks, --head-bits,
 * --codebook). */
typedef struct step_preset_options {
  double bits;   /* average K of the blocks' layers (synth rule) */
  int blocks;    /* 0: the preset's */
  int head_bits; /* 1..8; 16: an fp16 head, left out of the step */
  int head_half; /* 1: K = head_bits + 1/2 (mul1) */
  trellis_codebook codebook;
  int64_t vocab; /* the head's n; 0: the preset's */
  uint64_t seed;
} step_preset_options;

void step_preset_options_init(step_preset_options *o);

/* "preset:NAME" (a preset of synth_model.h, built with `po`) or a model
 * directory / .safetensors file (`po` unused). Orders the layers, wires
 * them (step_layer.src) and checks that the model is a decode step: every
 * layer named like a block's projection or lm_head, every block with a
 * down projection of the same width, every reader no wider than its
 * source. CLI_OK, else one line printed and CLI_FAIL (CLI_USAGE for an
 * unknown preset). Free with step_model_close whatever the result. */
int step_model_open(const char *spec, const step_preset_options *po,
                    step_model *out);
void step_model_close(step_model *m);
/* Rank `rank` of `ranks` of the same step: q, k, v, q_b, gate, up, gate_up
 * and the head split on n (column-parallel), o and down on k (row-parallel,
 * reading the rank's slice of q's or gate's output), each as
 * trellis_shard_range's even split (the step's widths line up because o's
 * k is q's n and down's k gate's n). A preset that is one rank of a
 * tensor-parallel model already (glm-tp4, tensor_parallel = ranks) is not
 * cut: rank r is the preset with seed + r, the r-th rank's own weights
 * (`presharded`). Errors as step_model_open; a layer with fewer 128-blocks
 * than ranks on its axis is CLI_FAIL naming it. */
int step_model_open_tp(const char *spec, const step_preset_options *po,
                       int ranks, int rank, step_model *out);

/* Layer kinds in report order: q, k, v, q_b, o, gate, up, gate_up, down,
 * head. */
#define STEP_KINDS 10
int step_kind_of(synth_role role); /* 0..STEP_KINDS-1, -1 for NONE */
synth_role step_kind_role(int kind);

/* Copies of the whole step's weights that a timed run cycles so that
 * every launch reads its weights from HBM: ceil(cold_bytes / step_bytes),
 * at least 1 (a model-sized step is cold by itself). */
int step_copies(double step_bytes, size_t cold_bytes);

/* Distinct blocks of weights a variant holds when the whole model does not
 * fit: `blocks` when blocks x block_bytes + fixed_bytes + headroom fits in
 * free_bytes, else the most that fit; 0 when even a pool past cold_bytes
 * (and at least one block) does not. Block b then runs on the weights of
 * block b % pool. */
int step_pool_blocks(int blocks, double block_bytes, double fixed_bytes,
                     size_t free_bytes, size_t headroom, size_t cold_bytes);

/* ---- a tensor-parallel step against the single-GPU step (step_tp.c) ---- */

/* Layers of block b (the head: b = blocks) must be within STEP_REF_TOL x
 * sqrt(b + 1) (relative L2) of the single-GPU step's: one layer's
 * tolerance (FORMAT.md §7.2), grown as the independent roundings of the
 * two steps add up through the blocks. */
#define STEP_REF_TOL 2e-3

/* One m's comparison. */
typedef struct step_ref {
  double worst_ratio; /* the largest rel L2 / tolerance over the layers */
  int nonfinite;      /* a difference that is not finite (or not compared) */
  double block0;      /* the worst rel L2 of block 0's layers */
  double final_rel;   /* the last block's down */
  char worst[SYNTH_NAME_MAX + 64]; /* the worst layer and its rel L2 */
  int same_sums; /* every rank holds the same o and down outputs */
} step_ref;

void step_ref_init(step_ref *r);
int step_ref_pass(const step_ref *r);
double step_ref_tol(const step_model *m, const step_layer *l);
/* got[r][i]: rank r's output of layer i at m rows (ranks[r], cut by
 * step_model_open_tp) against want[i], the unsharded model `full`'s: the
 * column layers' slices side by side, the row layers' (all-reduced)
 * outputs as they are. */
void step_ref_unsharded(const step_model *const *ranks, int n,
                        uint16_t *const *const *got, const step_model *full,
                        uint16_t *const *want, int64_t m, step_ref *res);
/* The same against want[r][i] of a run of the same ranks elsewhere (the
 * ranks of a presharded preset run on one GPU). */
void step_ref_ranks(const step_model *const *ranks, int n,
                    uint16_t *const *const *got, uint16_t *const *const *want,
                    int64_t m, step_ref *res);

#ifdef TRELLIS_HAVE_CUDA
#include <cuda_runtime.h>

typedef enum step_mode {
  STEP_EAGER = 0,
  STEP_FULL = 1,     /* the whole step: one CUDA graph per copy */
  STEP_PIECEWISE = 2 /* one graph per piece, the attention stand-in eager */
} step_mode;

const char *step_mode_name(step_mode mode); /* "eager", "FULL", ... */

/* One launch of the step: a layer (plan, x, y), the attention stand-in of a
 * block, or (tensor parallel) the all-reduce of o's or down's output. */
#define STEP_OP_STANDIN (-1)
#define STEP_OP_ALLREDUCE (-2)
typedef struct step_op {
  int layer;   /* index in step_model.layers, or STEP_OP_* */
  int reduced; /* STEP_OP_ALLREDUCE: the layer whose output it sums */
  const void *x;
  void *y;
  int64_t count_k; /* stand-in: elements per row it reads (q's n) */
} step_op;

/* The engine: `copies` uploads of every layer, one prepared plan each
 * (max_m), one shared set of caller buffers sized with
 * trellis_plans_buffer_sizes for every m of the run, the step input, one
 * output buffer per layer (max_m rows) and the stand-in's output. Nothing
 * is allocated, synchronised or set once it is open: the step's launches
 * are trellis_run and the stand-in kernel only. */
typedef struct step_engine {
  const step_model *model;
  int copies;
  int64_t max_m;
  trellis_layout layout;      /* the weights' (BENCH_FLAG_KMAJOR: k-major) */
  trellis_device_weight **dw; /* [copies * count] (a directory's layers) */
  void **raw;                 /* [copies * count] (a preset's layers) */
  trellis_weight *views;      /* [copies * count] device views */
  trellis_plan **plans;       /* [copies * count] */
  size_t nplans;
  trellis_buffers b;         /* shared; a test may change it before a capture */
  trellis_buffers owned;     /* what was allocated (freed at close) */
  trellis_buffer_sizes need; /* the largest size over the run's m */
  void *x0;                  /* step input [max_m][hidden], random fp16 */
  void **y;                  /* [count] layer outputs [max_m][n] */
  void *attn;                /* the stand-in's output */
  step_op *ops;              /* [nops] one step (plans by copy) */
  size_t nops;
  size_t *piece_first, *piece_end; /* [npieces] ops of each piece */
  unsigned long long *digests;     /* device [count][3] (step_digest_all) */
  size_t weight_bytes;             /* device bytes of the weights */
  size_t buffer_bytes;             /* shared buffers */
  size_t activation_bytes;         /* x0, outputs, stand-in, digests */
  /* graphs of one m (step_capture): FULL [copies], PIECEWISE
   * [copies * npieces] */
  cudaGraphExec_t *full, *pieces;
  int npieces;
  int64_t graph_m;
  int have_full, have_pieces;
  /* the trellis status of the call that failed last (TRELLIS_OK if none) */
  trellis_status last_status;
} step_engine;

/* Uploads and plans the model (`flags`: TRELLIS_PLAN_*), sizes and
 * allocates the buffers for every m of ms[0..nms-1] (max_m = the largest),
 * fills the step input; all finished when it returns. CLI_OK, or one line
 * printed and CLI_FAIL; close whatever the result. */
int step_engine_open(step_engine *e, const step_model *model, int copies,
                     const int64_t *ms, int nms, uint32_t flags,
                     cudaStream_t stream);
void step_engine_close(step_engine *e);

/* Enqueues one step of copy `copy` at m rows eagerly (every launch). */
int step_enqueue(step_engine *e, int copy, int64_t m, cudaStream_t stream);
/* Enqueues op `i` alone (the lockstep of several ranks on one GPU). */
int step_run_op(step_engine *e, size_t i, int copy, int64_t m,
                cudaStream_t stream);
/* Captures the graphs of `mode` (FULL or PIECEWISE) for every copy at m,
 * replacing those of another m. A launch that fails during a capture ends
 * it (the partial graph is dropped, the stream is usable), prints one line
 * and returns CLI_FAIL with e->last_status set. */
int step_capture(step_engine *e, step_mode mode, int64_t m,
                 cudaStream_t stream);
/* One step of copy `copy` in `mode` (graphs captured at m). */
int step_launch(step_engine *e, step_mode mode, int copy, int64_t m,
                cudaStream_t stream);
/* Fills every layer output and the stand-in's output with NaN (0xFFFF). */
int step_poison(step_engine *e, cudaStream_t stream);
/* A digest of every layer's output (its first m rows) into out[count]: a
 * 64-bit hash of the fp16 words, their count of non-finite values and of
 * the poison word 0xFFFF (unwritten by the step). Waits for the stream. */
typedef struct step_digest {
  unsigned long long hash, nonfinite, poison;
} step_digest;
int step_digest_all(step_engine *e, int64_t m, cudaStream_t stream,
                    step_digest *out);
/* The check of `mode` at m (graphs captured): the eager step of copy 0
 * with every output poisoned first is the reference (every element of
 * every layer's output written; finite for a preset); then `replays` times for
 * each copy: poison, one step in `mode`, every digest and the final output's
 * bytes equal to the reference's. *ok = 1 when all were; *detail says what
 * differed first. CLI_FAIL only for a failed call. */
int step_check(step_engine *e, step_mode mode, int64_t m, int replays,
               cudaStream_t stream, int *ok, char *detail, size_t size);
/* The eager step at m of the engines e[0..n-1] of n ranks on one GPU, op
 * by op in lockstep (their ops alike: the ranks of one model); at an
 * all-reduce op rank 0's output becomes the sum over the ranks in rank
 * order (fp32 add, one rounding each) and the others copies of it. Every
 * output poisoned first; out[k][i] receives rank k's output of layer i
 * (malloc'd, m x n fp16). */
int step_lockstep(step_engine *e, int n, int64_t m, cudaStream_t stream,
                  uint16_t ***out);
#endif

#endif
