/* `trellis info PATH`: quantization config, one row per EXL3 layer, totals. */
#include "cli_util.h"

#include <string.h>

static const char usage[] =
    "usage: trellis info PATH\n"
    "\n"
    "PATH is a .safetensors file or an EXL3 model directory (config.json plus\n"
    "model.safetensors or model.safetensors.index.json shards). Prints the\n"
    "quantization_config, one row per EXL3 layer (name, k, n, bits, codebook,\n"
    "MB, sign form, bias) and totals.\n";

/* Bytes of the trellis payload: k*n*bits/8. */
static size_t payload_bytes_of(const trellis_layer_info *l) {
  return (size_t)l->k * (size_t)l->n * (size_t)l->bits / 8;
}

/* Bytes the layer occupies in the checkpoint: payload, scales, bias. */
static size_t layer_bytes(const trellis_layer_info *l) {
  size_t bytes = payload_bytes_of(l);
  bytes += l->input_signs == TRELLIS_SIGNS_SCALED ? (size_t)l->k * 2
                                                  : (size_t)l->k / 8;
  bytes += l->output_signs == TRELLIS_SIGNS_SCALED ? (size_t)l->n * 2
                                                   : (size_t)l->n / 8;
  if (l->has_bias)
    bytes += (size_t)l->n * 2;
  return bytes;
}

static void print_config(const trellis_quant_config *q) {
  if (q == NULL || !q->present) {
    printf("quantization_config: none (no config.json with one)\n");
    return;
  }
  printf("quantization_config: quant_method %s",
         q->quant_method[0] ? q->quant_method : "?");
  if (q->version[0])
    printf(", version %s", q->version);
  if (q->bits > 0)
    printf(", bits %.2f", q->bits);
  if (q->head_bits > 0)
    printf(", head_bits %d", q->head_bits);
  if (q->codebook[0])
    printf(", codebook %s", q->codebook);
  if (q->out_scales[0])
    printf(", out_scales %s", q->out_scales);
  if (q->calibration_rows > 0 || q->calibration_cols > 0)
    printf(", calibration %lldx%lld", (long long)q->calibration_rows,
           (long long)q->calibration_cols);
  printf("\n");
}

int cmd_info(int argc, char **argv) {
  const char *pos[1];
  static const char *const names[] = {"PATH"};
  int r = cli_parse(argc, argv, usage, NULL, 0, pos, names, 1);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);

  trellis_model *model = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(pos[0], &model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, pos[0]);

  size_t count = trellis_model_layer_count(model);
  int width = 4;
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    if (trellis_model_layer_info(model, i, &l) == TRELLIS_OK &&
        (int)strlen(l.name) > width)
      width = (int)strlen(l.name);
  }

  printf("%s\n", pos[0]);
  print_config(trellis_model_quant_config(model));
  printf("\n%-*s %6s %6s %4s %-8s %9s %-13s %s\n", width, "name", "k", "n",
         "bits", "codebook", "MB", "signs", "bias");

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
    size_t bytes = layer_bytes(&l);
    total_bytes += bytes;
    payload_bytes += payload_bytes_of(&l);
    weights += (double)l.k * (double)l.n;
    int legacy = l.input_signs == TRELLIS_SIGNS_LEGACY ||
                 l.output_signs == TRELLIS_SIGNS_LEGACY;
    printf("%-*s %6lld %6lld %4d %-8s %9.3f %-13s %s\n", width, l.name,
           (long long)l.k, (long long)l.n, l.bits,
           trellis_codebook_name(l.codebook), (double)bytes / 1e6,
           legacy ? "legacy su/sv" : "suh/svh", l.has_bias ? "yes" : "no");
  }

  printf("\ntotals: %zu EXL3 layer%s, %zu bytes (%.3f MB)", count,
         count == 1 ? "" : "s", total_bytes, (double)total_bytes / 1e6);
  if (weights > 0)
    printf(", %.3f bits per weight (%.3f trellis payload only)",
           8.0 * (double)total_bytes / weights,
           8.0 * (double)payload_bytes / weights);
  printf(", %zu other tensors\n", trellis_model_other_count(model));
  trellis_model_close(model);
  return CLI_OK;
}
