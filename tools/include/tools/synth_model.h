/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic EXL3 model directories (`trellis synth`): the presets, the
 * per-tensor bitrate rule, the shard plan and the tensor data, laid out as
 * ExLlamaV3 writes a model (FORMAT.md §2.6): config.json with its
 * quantization_config, model-XXXXX-of-YYYYY.safetensors shards with
 * model.safetensors.index.json, the architecture's tensor names, fp16 norms
 * and embeddings, EXL3 linear layers with random trellis words.
 *
 * A plan (synth_model_plan) is metadata only. Data is generated one module
 * at a time in chunks (synth_module_emit), so writing a 70B model never
 * holds more than one chunk in memory, and a test can regenerate any module
 * bit for bit.
 *
 * Determinism: module `name` draws from its own RNG, seeded with
 * synth_module_seed(seed, name); an EXL3 linear draws its words, then suh,
 * then svh, in the order of synth_layer_init, so synth_layer_init(k, n, K,
 * cb, 0, synth_module_seed(seed, name)) has the same trellis words.
 *
 * Scales (activations stay O(1) through any depth): the codebook's values
 * have an RMS c (1.2437 for 3INST and MCG, 1.0003 for MUL1, over all 65536
 * states), and synth_scales magnitudes |N(1, 0.1)| have mean square 1.01.
 * suh = synth_scales(1 / (c * sqrt(1.01 k))) and svh =
 * synth_scales(1 / sqrt(1.01)), so y = layer(x) has, in expectation, the
 * per-element mean square of x (the Hadamard rotations are orthonormal):
 * a chain of layers neither grows nor decays. Embeddings are uniform with
 * unit variance, norms |N(1, 0.1)|, an fp16 head uniform with variance
 * 1 / hidden (unit-variance logits for unit-variance input).
 *
 * Bitrates: --bits B (1..8) is the average K over the blocks' linear
 * layers weighted by their size (k * n), which is also their payload bits
 * per weight. Each layer gets one of the two rates around B among the steps
 * 1, 2, .., 8, with MUL1 also 1.5, 2.5 and 3.5 as ExLlamaV3 1.6's
 * allocator (its half-integer rates, below 4: EXL3-1.6 §1.1), so B = 3.36
 * mixes K 3 and 3.5 and B = 4.5 mixes 4 and 5. How many layers of
 * each size get the higher K is searched exhaustively (over every count
 * per size) for the average nearest B; within a size the higher K goes to
 * layers spread evenly over the depth (Bresenham over model order). The
 * full presets land within 0.001 of B; a cut model (--blocks 1) within
 * what its few layers allow. The head has head_bits and is not part of the
 * average. */
#ifndef TOOLS_SYNTH_MODEL_H
#define TOOLS_SYNTH_MODEL_H

#include "trellis.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

/* How a preset's decoder block is built. */
typedef enum synth_layout {
  /* Llama: input_layernorm, self_attn.{q,k,v,o}_proj,
   * post_attention_layernorm, mlp.{gate,up,down}_proj */
  SYNTH_LAYOUT_LLAMA = 0,
  /* One tensor-parallel rank (of 4) of a GLM-style block, built from the
   * shapes 2048x4096, 6144x1024 and 512x6144 (k x n):
   *   self_attn.q_b_proj  2048 x 4096: the q LoRA (rank 2048) up to 16 of
   *                       64 heads of 256 (column-parallel)
   *   mlp.gate_up_proj    6144 x 1024: gate and up of a 2048-wide MLP,
   *                       fused, a quarter each (2 x 512, column-parallel)
   *   mlp.down_proj        512 x 6144: that MLP's down (row-parallel)
   * with input_layernorm before q_b_proj and post_attention_layernorm
   * before gate_up_proj; the embedding and lm_head are vocab-parallel
   * (a quarter of 151552 rows). */
  SYNTH_LAYOUT_GLM_TP4 = 1
} synth_layout;

typedef struct synth_preset {
  const char *name;         /* "llama-3.1-8b" */
  const char *architecture; /* config.json "architectures"[0] */
  const char *model_type;
  synth_layout layout;
  int64_t hidden, intermediate;      /* GLM_TP4: intermediate of this rank */
  int64_t heads, kv_heads, head_dim; /* of this rank; GLM_TP4: kv 0 */
  int64_t q_lora_rank;               /* GLM_TP4 only */
  int64_t vocab;                     /* of this rank */
  int blocks;
  int tensor_parallel; /* 1, or the ranks a GLM_TP4 shard is one of */
} synth_preset;

size_t synth_preset_count(void);
const synth_preset *synth_preset_at(size_t i);
/* NULL when no preset has this name. */
const synth_preset *synth_preset_find(const char *name);

/* What a module is. */
typedef enum synth_kind {
  SYNTH_EMBED,  /* fp16 [vocab, hidden] `<name>.weight` */
  SYNTH_NORM,   /* fp16 [dim] `<name>.weight` */
  SYNTH_LINEAR, /* EXL3: `.trellis`, `.suh`, `.svh` and a codebook marker */
  SYNTH_DENSE   /* fp16 [n, k] `<name>.weight` (an unquantized head) */
} synth_kind;

/* What a linear layer computes in a decode step: what it reads and who
 * reads its output (the decode-step benchmark chains layers by role). */
typedef enum synth_role {
  SYNTH_ROLE_NONE = 0,
  SYNTH_ROLE_Q,       /* reads the block input */
  SYNTH_ROLE_K,       /* reads the block input */
  SYNTH_ROLE_V,       /* reads the block input */
  SYNTH_ROLE_O,       /* reads the attention output (q's width) */
  SYNTH_ROLE_Q_B,     /* reads the q LoRA (the block input's first k) */
  SYNTH_ROLE_GATE,    /* reads the block input */
  SYNTH_ROLE_UP,      /* reads the block input */
  SYNTH_ROLE_GATE_UP, /* reads the block input; gate and up fused */
  SYNTH_ROLE_DOWN,    /* reads the MLP product (gate's width); its output
                         is the next block's input */
  SYNTH_ROLE_HEAD     /* lm_head: reads the last block's output */
} synth_role;

/* "q", "k", ..., "gate_up", "down", "head"; "none". */
const char *synth_role_name(synth_role role);
/* The role of a linear layer named like the presets' (and ExLlamaV3's
 * Llama, Qwen, Mistral ...) modules: "model.layers.N.self_attn.q_proj"
 * etc. (*block = N) or "lm_head" (*block = -1); SYNTH_ROLE_NONE for any
 * other name. */
synth_role synth_role_of(const char *layer_name, int *block);

typedef struct synth_options {
  const char *preset;        /* a preset's name */
  double bits;               /* 1..8: average K of the blocks' linear layers */
  int head_bits;             /* 1..8: an EXL3 lm_head; 16: fp16 */
  int head_half;             /* 1: the head's K is head_bits + 1/2 */
  trellis_codebook codebook; /* 3INST, MCG or MUL1, every linear layer */
  /* -1 (the default), or a second EXL3 codebook for the linear layers of
   * odd-numbered blocks (a model of mixed codebooks; config.json names
   * `codebook`, each layer's marker tensor its own) */
  int odd_block_codebook;
  int blocks;    /* 1..the preset's; 0 = the preset's */
  int64_t vocab; /* a multiple of 128; 0 = the preset's */
  uint64_t seed;
  uint64_t shard_bytes; /* most tensor bytes per shard (one module more
                           only when it alone is larger) */
} synth_options;

/* Defaults: bits 4, head_bits 6, MCG (no second codebook), the preset's
 * blocks and vocab, seed 0, shards of 8192 MiB (ExLlamaV3's default). */
void synth_options_init(synth_options *o);
/* 1 for a codebook a synthetic EXL3 model can use: the table's EXL3 kind
 * (format/codebooks.h), not SQG. */
int synth_exl3_codebook(int cb);

#define SYNTH_NAME_MAX 96

typedef struct synth_tensor {
  char name[SYNTH_NAME_MAX + 16]; /* the module's name and a suffix */
  trellis_tensor_dtype dtype;     /* I16, F16 or I32 */
  int ndim;
  int64_t shape[3];
  uint64_t bytes;
  uint64_t offset; /* in its shard's data section */
} synth_tensor;

typedef struct synth_module {
  char name[SYNTH_NAME_MAX]; /* "model.layers.3.mlp.up_proj", "lm_head" */
  synth_kind kind;
  synth_role role;
  int block;    /* -1 outside the blocks */
  int64_t k, n; /* LINEAR, DENSE: in, out features; EMBED: k = hidden,
                   n = vocab; NORM: k = n = its length */
  int bits;     /* LINEAR: K (its integer part); else 16 */
  int half;     /* LINEAR: 1 when K = bits + 1/2 (EXL3-1.6 §1) */
  trellis_codebook codebook; /* LINEAR: its codebook */
  int shard;                 /* 0-based */
  size_t tensor;             /* its first tensor in synth_model.tensors */
  int tensor_count;
  uint64_t bytes; /* its tensors' bytes */
} synth_module;

typedef struct synth_model {
  const synth_preset *preset;
  synth_options opt;     /* blocks and vocab resolved */
  synth_module *modules; /* model order */
  size_t module_count;
  synth_tensor *tensors; /* module order */
  size_t tensor_count;
  int shard_count;
  uint64_t *shard_data;          /* tensor bytes per shard */
  uint64_t total_bytes;          /* tensor bytes of all shards (the index's
                                    metadata.total_size) */
  double bits;                   /* achieved average K (the bitrate rule) */
  int64_t linear_count;          /* EXL3 layers, the head included */
  double codebook_rms;           /* RMS of the codebook's 65536 values */
  double odd_block_codebook_rms; /* the same of odd_block_codebook */
} synth_model;

/* Checks the options and plans the model (names, shapes, K per layer,
 * shards). TRELLIS_ERR_INVALID_ARGUMENT names a bad option. Free with
 * synth_model_free() whatever the result. */
trellis_status synth_model_plan(const synth_options *o, synth_model *out);
void synth_model_free(synth_model *m);

/* The RNG seed of module `name` (FNV-1a of the name, mixed with `seed`). */
uint64_t synth_module_seed(uint64_t seed, const char *name);

/* Receives generated bytes in order; returns 0 to go on, else stops the
 * generation (synth_module_emit then returns TRELLIS_ERR_IO). */
typedef int (*synth_sink)(void *ctx, const void *data, size_t bytes);

/* Generates the tensors of module `index` in order (each tensor's bytes
 * exactly as stored), in chunks of at most `cap` bytes of `buf` (cap at
 * least 4096). */
trellis_status synth_module_emit(const synth_model *m, size_t index, void *buf,
                                 size_t cap, synth_sink sink, void *ctx);

/* The scales of LINEAR module `index`, suh[k] and svh[n], exactly as
 * synth_module_emit writes them, without generating its words: its RNG
 * skips the words' draws (synth_skip), so a caller can generate the words
 * elsewhere (word i is bits 16 (i % 4) .. of draw i / 4 of the module's
 * RNG, seeded with synth_module_seed) and get the module bit for bit.
 * TRELLIS_ERR_INVALID_ARGUMENT for any other module. */
trellis_status synth_linear_scales(const synth_model *m, size_t index,
                                   uint16_t *suh, uint16_t *svh);

/* "model-00002-of-00005.safetensors" for shard 1 of 5 (0-based). */
void synth_shard_name(const synth_model *m, int shard, char *out, size_t cap);
/* The safetensors header of a shard (JSON padded with spaces to a multiple
 * of 8), its config.json and its index, NUL-terminated, malloc'd; NULL when
 * out of memory. */
char *synth_shard_header(const synth_model *m, int shard, size_t *len);
char *synth_config_json(const synth_model *m);
char *synth_index_json(const synth_model *m);

/* Progress of synth_model_write: bytes written of `total`. */
typedef void (*synth_progress)(void *ctx, uint64_t done, uint64_t total);

/* Writes the model directory `out_dir` atomically: everything goes to a
 * fresh temporary directory beside it (".NAME.synth-XXXXXX" in its
 * parent), is synced, and is renamed to `out_dir` at the end; on any
 * failure the temporary directory is removed and nothing appears at
 * `out_dir`. An existing `out_dir` is an error unless `force`, and even
 * then it is replaced only when it holds nothing but a model's files
 * (config.json, quantization_config.json, model.safetensors,
 * model.safetensors.index.json, model-*.safetensors). The parent must
 * exist and have room for the whole model (checked first). `stop`, when
 * set, is read between chunks: non-zero abandons the write (an interrupt).
 * `progress` may be NULL. */
trellis_status synth_model_write(const synth_model *m, const char *out_dir,
                                 int force, const volatile sig_atomic_t *stop,
                                 synth_progress progress, void *ctx);

#endif
