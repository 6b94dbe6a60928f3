/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the `trellis` subcommands: opening layers and their sizes,
 * .npy files with one-line errors, devices and the GPU side. Exit codes, errors
 * and the option parser come from the tools library (tools/cli.h). */
#ifndef CLI_UTIL_H
#define CLI_UTIL_H

#include "tools/cli.h"
#include "tools/measure.h"
#include "tools/npy.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Subcommands (one file each). argv[0] is the subcommand's name. */
int cmd_info(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_synth(int argc, char **argv);
/* `info PATH --plan [--gpu TARGET]` (cmd_info_plan.c); max_m_text and
 * gpu_text may be NULL (then plans on the CUDA device). */
int cli_info_plan(const char *path, const char *max_m_text,
                  const char *gpu_text);

/* ---- plan sizes for a named GPU, without one (cli_gpu_target.c) -------- */

typedef struct cli_gpu_target {
  char name[40]; /* as given: "h200", "sms=132,arch=90" */
  char what[96]; /* "NVIDIA H200 (SXM): 132 SMs, sm_90" */
  int sm_count, cc_major, cc_minor;
} cli_gpu_target;
/* Parses --gpu NAME (one of cli_gpu_target_names()); prints an error
 * naming --gpu and returns CLI_USAGE on an unknown one. */
int cli_gpu_target_parse(const char *text, cli_gpu_target *out);
const char *cli_gpu_target_names(void);
/* What trellis_plan_create would decide for layer `l` with the default
 * desc and max_m on the target, from the library's pure rules: the path
 * and buffer sizes per m are estimates (see cli_gpu_target.c). NULL when
 * out of memory; free() it. */
typedef struct cli_target_plan cli_target_plan;
cli_target_plan *cli_target_plan_make(const cli_gpu_target *t,
                                      const trellis_layer_info *l,
                                      int64_t max_m);
/* trellis_plan_query's answer for m rows (1..max_m); 0 when m is out of
 * range or the sizes overflow. */
int cli_target_plan_query(const cli_target_plan *p, int64_t m,
                          trellis_buffer_sizes *out);
/* `info PATH --json` (cmd_info_json.c): the table as one JSON object. */
int cli_info_json(const char *path);
/* Writes `root` (a jansson json_t, taken) to stdout, indented and ASCII;
 * ok 0 (or root NULL): it could not be built, an out-of-memory error.
 * Returns the exit code. */
struct json_t;
int cli_json_print(struct json_t *root, const char *path, int ok);

/* ---- what info lists besides the EXL3 layers (info_rows.c) -------------- */

/* A Linear an EXL3 model keeps unquantized: `<name>.weight` [n, k] and
 * its `<name>.bias`. */
typedef struct cli_fp16_linear {
  char name[1024];
  int64_t k, n;
  trellis_tensor_dtype dtype;
  size_t weight_bytes, bytes; /* the weight; weight and bias */
  int bias;
} cli_fp16_linear;
/* 1 when other tensor i is the weight of one (then *out is filled). */
int cli_fp16_linear_at(const trellis_model *model, size_t i,
                       cli_fp16_linear *out);
/* ExLlamaV3 1.6's quantized token embedding: `<key>.trellis` [vocab,
 * groups (1 + 16 K)] with `<key>.signs` [groups, 256]. */
typedef struct cli_embedding {
  const char *name;            /* the .trellis tensor's (the model's) */
  int64_t vocab, groups, bits; /* groups, bits: 0 when unknown */
  size_t bytes;
} cli_embedding;
int cli_embedding_at(const trellis_model *model, size_t i, cli_embedding *out);
/* ngram_embedding.safetensors (0 when the model has none): its tensors,
 * ring shards ([rows, 1 + 10 K]) and bytes. */
typedef struct cli_ngram {
  size_t tensors, shards, bytes;
  int64_t rows, bits; /* bits: 0 when unknown */
} cli_ngram;
int cli_ngram_of(const trellis_model *model, cli_ngram *out);
/* Whether a b12x layer has a rank-16 correction (`<name>.qsrt_a`). */
int cli_layer_has_correction(const trellis_model *model,
                             const trellis_layer_info *l);
/* K as info prints it ("3", "2.5"), or a pair's kind and rate axis
 * ("P24/n"). */
const char *cli_layer_rate_text(const trellis_layer_info *l, char *buf,
                                size_t size);

/* ---- models and layers -------------------------------------------------- */

/* Opens PATH (a .safetensors file or a model directory) and finds LAYER. On
 * success *model must be closed with trellis_model_close(). */
int cli_open_layer(const char *path, const char *layer_name,
                   trellis_model **model, trellis_layer *layer);
/* Sizes from a layer's header description alone (`info` and `info --plan`
 * never read payloads): the trellis payload, k*n*K/8 or a pair's two
 * records; and all its tensors, payload, scales or signs and bias (what
 * the checkpoint holds and an upload copies). */
size_t cli_layer_payload_bytes(const trellis_layer_info *l);
size_t cli_layer_bytes(const trellis_layer_info *l);

/* ---- tensor-parallel shards (cli_tp.c) ----------------------------------- */

/* --tp N --rank R --split n|k of `forward`, and --tp N [--split] of `info`. */
typedef struct cli_tp {
  int ranks; /* 0: no --tp */
  int rank;
  trellis_split split; /* n unless --split says otherwise */
  int split_given;
  /* forward, after cli_tp_shard: the unsharded layer, the rank's range on
   * the split axis, the shard's copied payload (NULL for a view) */
  trellis_weight full;
  int64_t begin, end;
  void *memory;
  char said[256]; /* what the rank holds (cli_tp_report) */
} cli_tp;

/* Parses the options (any may be NULL); `forward` needs --rank and --split
 * with --tp (need_rank), `info` takes no --rank. Prints an error naming the
 * option. */
int cli_tp_parse(const char *tp_text, const char *rank_text,
                 const char *split_text, int need_rank, cli_tp *out);
/* With --tp: replaces layer->weight by the rank's shard. Free with
 * cli_tp_free. */
int cli_tp_shard(cli_tp *tp, trellis_layer *layer);
/* With --tp, one line on stderr saying what the rank holds (after the run,
 * so that a failure stays one line). */
void cli_tp_report(const cli_tp *tp);
/* A row split reads the rank's inputs: X with the layer's whole k is cut
 * to them in place; X already as wide as the rank's part is kept. */
int cli_tp_input(const cli_tp *tp, const char *path, npy_array *x);
void cli_tp_free(cli_tp *tp);
/* The split `info --tp` gives a layer without --split: k (row-parallel)
 * for names ending in o_proj, down_proj, out_proj or dense_4h_to_h, else n
 * (column-parallel). */
trellis_split cli_tp_role_split(const char *name);
/* The header description of the shard [begin, end) of layer `l` (for
 * cli_layer_bytes): the split axis cut, the bias on the rank that starts at
 * 0 of a row split only, one record of a pair split on its rate axis. */
void cli_shard_info(const trellis_layer_info *l, trellis_split split,
                    int64_t begin, int64_t end, trellis_layer_info *s);
/* `info PATH --tp N [--split n|k] [--json]`: each layer's bytes on every
 * rank, as a table or (json) one JSON object. */
int cli_info_tp(const char *path, const cli_tp *tp, int json);

/* ---- .npy --------------------------------------------------------------- */

int cli_read_npy(const char *path, npy_array *out);
/* Writes through npy_write: `path` is replaced only by a complete file;
 * "-" writes the .npy image to stdout (npy_write_fd). */
int cli_write_npy(const char *path, trellis_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);
/* Before any work: refuses an --output that npy_write refuses (a
 * directory, FIFO, device, dangling link, missing directory) or that is a
 * file the command reads: one of the model's files
 * (trellis_model_file_path) or `input` (may be NULL), compared by device
 * and inode, so links and other spellings of a path count. "-" (stdout)
 * is always accepted. */
int cli_check_output(const char *output, const trellis_model *model,
                     const char *input);

/* ---- devices --------------------------------------------------------------
 */

typedef enum cli_device { CLI_DEV_AUTO, CLI_DEV_CPU, CLI_DEV_CUDA } cli_device;

/* Parses --device; prints an error naming the option on a bad value. */
int cli_parse_device(const char *text, cli_device *out);
/* Resolves auto to cuda or cpu; checks that cuda is usable (else an error
 * line naming --device and CLI_FAIL). */
int cli_resolve_device(cli_device requested, cli_device *out);

/* GPU helpers (cli_cuda.c; stubs in a CPU-only build). A cli_gpu holds a
 * device copy of one weight and a prepared plan for up to max_m rows. */
typedef struct cli_gpu cli_gpu;

/* Fills `out` with e.g. "NVIDIA H200 (sm_90)". */
int cli_gpu_device_name(char *out, size_t size);
int cli_gpu_open(const trellis_weight *host, int64_t max_m,
                 trellis_dtype x_dtype, trellis_dtype y_dtype, cli_gpu **out);
/* Path the plan takes for m rows (TRELLIS_PATH_NONE on error, printed). */
trellis_path cli_gpu_path(const cli_gpu *g, int64_t m);
/* y = layer(x) for m rows; x and y are host memory. When reps > 0 the run is
 * then repeated `reps` times and the median time per run (seconds, measured
 * with CUDA events) is stored in *median_s. */
int cli_gpu_forward(cli_gpu *g, const void *x, int64_t m, void *y, int reps,
                    double *median_s);
void cli_gpu_close(cli_gpu *g);

#endif
