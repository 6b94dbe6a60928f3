/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis info PATH`: quantization config, one row per EXL3 layer, totals. */
#include "cli_util.h"

#include <string.h>

static const char usage[] =
    "usage: trellis info PATH [--json] [--plan [--max-m M] [--gpu NAME]]\n"
    "                    [--tp N [--split n|k] [--json]]\n"
    "\n"
    "PATH is a .safetensors file or an EXL3 model directory (config.json plus\n"
    "model.safetensors or model.safetensors.index.json shards). Prints the\n"
    "quantization_config, one row per layer (name, k, n, K or pair kind/rate\n"
    "axis, codebook, payload bits per weight, MB, sign form, bias), a row per\n"
    "Linear kept unquantized (K fp16), the quantized token embeddings and\n"
    "n-gram table ExLlamaV3 1.6 can write, and totals: the bits per weight\n"
    "over every linear layer, scales and fp16 layers included.\n"
    "\n"
    "--json prints the same as one JSON object on stdout (ASCII, names\n"
    "\\u-escaped where not ASCII): path, quantization_config (every field;\n"
    "null where config.json has none), layers (name, k, n, bits, half,\n"
    "rate, pair, rate_axis, codebook, payload_bits_per_weight, bytes,\n"
    "payload_bytes, input_signs, output_signs, bias, correction),\n"
    "fp16_linears, other_tensors (name, kind, dtype, shape, bytes),\n"
    "quantized_embeddings, ngram_table and totals. A rate K is bits (its\n"
    "integer part) and half (true for K = bits + 1/2), and rate the number\n"
    "(2.5; null for a pair, whose payload_bits_per_weight is its average);\n"
    "head_bits and mtp_bits likewise (head_half, head_rate). With --tp the\n"
    "per-rank view is the JSON object instead.\n"
    "\n"
    "--plan prints instead, per layer, the GPU path and the caller buffers'\n"
    "bytes (rotated, input_f16, output_f16, workspace) at m = 1, 8, 16, 32,\n"
    "128 and M (default 256, at most 65536), and what one stream of the\n"
    "model must provision: the weights, and each buffer's largest size over\n"
    "the layers at every m up to M. Plans need a CUDA device: without one it\n"
    "exits with status 1 and says so, unless --gpu NAME is given: then no\n"
    "GPU is used and the sizes are estimates from the library's plan rules\n"
    "for that target (h200, h100 and b200 ... or sms=N,arch=90; see the\n"
    "README), with the defaults the rules take where only a GPU can say\n"
    "(2 decode-GEMM CTAs per SM), for sizing buffers on a build host.\n"
    "\n"
    "--tp N prints instead each layer's bytes on each of N tensor-parallel\n"
    "ranks (payload, scales, bias: what the rank's shard holds) and each\n"
    "rank's total. Layers named o_proj, down_proj, out_proj or dense_4h_to_h\n"
    "are split on k (row-parallel, the bias on rank 0), the others on n\n"
    "(column-parallel), at multiples of 128 as evenly as whole blocks allow;\n"
    "--split n|k splits every layer on that axis. A layer with fewer\n"
    "128-blocks than ranks is counted whole on every rank.\n";

/* Names and strings from the file are printed through cli_escape: a
 * control character in them cannot reach the terminal. */
#define SHOWN(text, buf) cli_escape((text), (buf), sizeof(buf))

static void print_config(const trellis_quant_config *q) {
  char buf[4 * sizeof q->quant_method];
  if (q == NULL || !q->present) {
    printf("quantization_config: none (no config.json with one)\n");
    return;
  }
  printf("quantization_config: quant_method %s",
         q->quant_method[0] ? SHOWN(q->quant_method, buf) : "?");
  if (q->version[0])
    printf(", version %s", SHOWN(q->version, buf));
  if (q->bits > 0)
    printf(", bits %.2f", q->bits);
  char rate[16];
  if (q->head_bits > 0)
    printf(", head_bits %s",
           cli_rate_text(q->head_bits, q->head_half, rate, sizeof rate));
  if (q->mtp_bits > 0)
    printf(", mtp_bits %s",
           cli_rate_text(q->mtp_bits, q->mtp_half, rate, sizeof rate));
  if (q->vision_bits > 0)
    printf(", vision_bits %d", q->vision_bits);
  if (q->codebook[0])
    printf(", codebook %s", SHOWN(q->codebook, buf));
  if (q->out_scales[0])
    printf(", out_scales %s", SHOWN(q->out_scales, buf));
  if (q->calibration_rows > 0 || q->calibration_cols > 0)
    printf(", calibration %lldx%lld", (long long)q->calibration_rows,
           (long long)q->calibration_cols);
  if (q->tie_word_embeddings >= 0)
    printf(", tie_word_embeddings %s",
           q->tie_word_embeddings ? "true" : "false");
  printf("\n");
}

/* Sizes of the rows of the table that are not EXL3 layers. */
typedef struct extra_totals {
  size_t bytes;   /* fp16 linears: weight and bias */
  double weights; /* their k * n */
  size_t count;
} extra_totals;

/* One row per Linear an EXL3 model keeps unquantized (`<p>.weight`
 * [out, in] and its bias): K "fp16", its bytes counted in the totals. */
static void print_fp16_linears(const trellis_model *model, int width,
                               extra_totals *t) {
  const size_t count = trellis_model_other_count(model);
  for (size_t i = 0; i < count; i++) {
    cli_fp16_linear f;
    char shown[4 * 1024 + 1];
    if (!cli_fp16_linear_at(model, i, &f))
      continue;
    const double kn = (double)f.k * (double)f.n;
    printf("%-*s %6lld %6lld %-5s %-8s %5.2f %9.3f %-13s %s\n", width,
           SHOWN(f.name, shown), (long long)f.k, (long long)f.n, "fp16",
           trellis_tensor_dtype_name(f.dtype),
           kn > 0 ? 8.0 * (double)f.weight_bytes / kn : 0.0,
           (double)f.bytes / 1e6, "-", f.bias ? "yes" : "no");
    t->bytes += f.bytes;
    t->weights += kn;
    t->count++;
  }
}

/* ExLlamaV3 1.6's ring tables, listed by name (never linear layers): a
 * quantized token embedding (`<key>.trellis` [vocab, G (1 + 16 K)] with
 * `<key>.signs` [G, 256]) and the n-gram file's shards ([rows, 1 + 10 K]). */
static void print_ring_tables(const trellis_model *model) {
  const size_t count = trellis_model_other_count(model);
  char shown[4 * 1024 + 1];
  for (size_t i = 0; i < count; i++) {
    cli_embedding e;
    if (!cli_embedding_at(model, i, &e))
      continue;
    printf("note: %s is a quantized token embedding (vocab %lld, %lld "
           "group%s of 256",
           SHOWN(e.name, shown), (long long)e.vocab, (long long)e.groups,
           e.groups == 1 ? "" : "s");
    if (e.bits > 0)
      printf(", K %lld", (long long)e.bits);
    printf(", %.3f MB), not a linear layer; decode and forward do not "
           "read it\n",
           (double)e.bytes / 1e6);
  }
  cli_ngram ng;
  if (cli_ngram_of(model, &ng)) {
    printf("note: ngram_embedding.safetensors is a hashed n-gram table (%zu "
           "tensors, %zu ring shard%s, %lld rows",
           ng.tensors, ng.shards, ng.shards == 1 ? "" : "s",
           (long long)ng.rows);
    if (ng.bits > 0)
      printf(" of K %lld", (long long)ng.bits);
    printf(", %.3f MB), outside the index; decode and forward do not read "
           "it\n",
           (double)ng.bytes / 1e6);
  }
}

/* A b12x research layer's rank-16 correction is listed, not applied. */
static void print_corrections(const trellis_model *model, size_t count) {
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    char shown[4 * 1024 + 1];
    if (trellis_model_layer_info(model, i, &l) != TRELLIS_OK ||
        !cli_layer_has_correction(model, &l))
      continue;
    printf("note: %s has a rank-16 correction (qsrt_a, qsrt_b) that "
           "decode and forward do not apply\n",
           SHOWN(l.name, shown));
  }
  trellis_clear_error();
}

int cmd_info(int argc, char **argv) {
  const char *pos[1], *max_m = NULL, *tp_text = NULL, *split_text = NULL;
  const char *gpu = NULL;
  int plan = 0, json = 0;
  static const char *const names[] = {"PATH"};
  const cli_option opts[] = {
      {"--plan", NULL, &plan},  {"--max-m", &max_m, NULL},
      {"--tp", &tp_text, NULL}, {"--split", &split_text, NULL},
      {"--json", NULL, &json},  {"--gpu", &gpu, NULL}};
  int r = cli_parse(argc, argv, usage, opts, 6, pos, names, 1);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);
  cli_tp tp;
  if ((r = cli_tp_parse(tp_text, NULL, split_text, 0, &tp)) != CLI_OK)
    return r;
  if (tp.ranks && plan) {
    cli_error("info: --tp and --plan are separate reports; give one");
    return CLI_USAGE;
  }
  if (tp.ranks)
    return cli_info_tp(pos[0], &tp, json);
  if ((max_m || gpu) && !plan) {
    cli_error("info: %s needs --plan", max_m ? "--max-m" : "--gpu");
    return CLI_USAGE;
  }
  if (plan && json) {
    cli_error("info: --json covers the table and --tp, not --plan");
    return CLI_USAGE;
  }
  if (plan)
    return cli_info_plan(pos[0], max_m, gpu);
  if (json)
    return cli_info_json(pos[0]);

  trellis_model *model = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(pos[0], &model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, pos[0]);

  size_t count = trellis_model_layer_count(model);
  char shown[4 * 4096 + 1]; /* a path or name, escaped (4 bytes a byte) */
  int width = 4;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    if (trellis_model_layer_info(model, i, &l) == TRELLIS_OK &&
        (int)strlen(SHOWN(l.name, shown)) > width)
      width = (int)strlen(shown);
  }
  for (size_t i = 0; i < trellis_model_other_count(model); i++) {
    trellis_other_kind kind;
    trellis_tensor t;
    if (trellis_model_other_kind(model, i, &kind) == TRELLIS_OK &&
        kind == TRELLIS_OTHER_FP16_LINEAR &&
        trellis_model_other(model, i, &t) == TRELLIS_OK &&
        (int)strlen(SHOWN(t.name, shown)) > width)
      width = (int)strlen(shown);
  }
  trellis_clear_error();

  printf("%s\n", SHOWN(pos[0], shown));
  print_config(trellis_model_quant_config(model));
  printf("\n%-*s %6s %6s %-5s %-8s %5s %9s %-13s %s\n", width, "name", "k", "n",
         "K", "codebook", "bpw", "MB", "signs", "bias");

  size_t total_bytes = 0, payload_bytes = 0;
  double weights = 0.0;
  for (size_t i = 0; i < count; i++) {
    /* The header's description: listing never reads or copies payloads. */
    trellis_layer_info l;
    st = trellis_model_layer_info(model, i, &l);
    if (st != TRELLIS_OK) {
      trellis_model_close(model);
      return cli_lib_error(st, pos[0]);
    }
    size_t bytes = cli_layer_bytes(&l);
    total_bytes += bytes;
    payload_bytes += cli_layer_payload_bytes(&l);
    weights += (double)l.k * (double)l.n;
    int legacy = l.input_signs == TRELLIS_SIGNS_LEGACY ||
                 l.output_signs == TRELLIS_SIGNS_LEGACY;
    char bits[16]; /* K, or a pair's kind and rate axis */
    cli_layer_rate_text(&l, bits, sizeof bits);
    printf("%-*s %6lld %6lld %-5s %-8s %5.2f %9.3f %-13s %s\n", width,
           SHOWN(l.name, shown), (long long)l.k, (long long)l.n, bits,
           trellis_codebook_name(l.codebook),
           8.0 * (double)cli_layer_payload_bytes(&l) /
               ((double)l.k * (double)l.n),
           (double)bytes / 1e6, legacy ? "legacy su/sv" : "suh/svh",
           l.has_bias ? "yes" : "no");
  }
  extra_totals fp16 = {0, 0.0, 0};
  print_fp16_linears(model, width, &fp16);
  print_corrections(model, count);
  print_ring_tables(model);

  printf("\ntotals: %zu EXL3 layer%s", count, count == 1 ? "" : "s");
  if (fp16.count > 0)
    printf(" and %zu fp16 linear layer%s", fp16.count,
           fp16.count == 1 ? "" : "s");
  const size_t all_bytes = total_bytes + fp16.bytes;
  const double all_weights = weights + fp16.weights;
  printf(", %zu bytes (%.3f MB)", all_bytes, (double)all_bytes / 1e6);
  if (all_weights > 0)
    printf(", %.3f bits per weight (EXL3 layers %.3f, their trellis "
           "payload %.3f)",
           8.0 * (double)all_bytes / all_weights,
           weights > 0 ? 8.0 * (double)total_bytes / weights : 0.0,
           weights > 0 ? 8.0 * (double)payload_bytes / weights : 0.0);
  printf(", %zu other tensors\n", trellis_model_other_count(model));
  trellis_model_close(model);
  return CLI_OK;
}
