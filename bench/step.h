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
#ifndef TRELLIS_BENCH_STEP_H
#define TRELLIS_BENCH_STEP_H

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
  int block; /* -1: the head */
  int64_t k, n;
  int bits;
  int half; /* K = bits + 1/2 */
  trellis_codebook codebook;
  size_t payload_bytes; /* k*n*K/8 */
  size_t index;         /* the model's layer index, or the synth module */
  step_source src;
  size_t src_layer; /* STEP_SRC_LAYER: its index in step_model.layers */
} step_layer;

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

#ifdef TRELLIS_HAVE_CUDA
#include <cuda_runtime.h>

typedef enum step_mode {
  STEP_EAGER = 0,
  STEP_FULL = 1,     /* the whole step: one CUDA graph per copy */
  STEP_PIECEWISE = 2 /* one graph per piece, the attention stand-in eager */
} step_mode;

const char *step_mode_name(step_mode mode); /* "eager", "FULL", ... */

/* One launch of the step: a layer (plan, x, y) or the attention stand-in
 * of a block. */
typedef struct step_op {
  int layer; /* index in step_model.layers, -1: the attention stand-in */
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
#endif

#endif
