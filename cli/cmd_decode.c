/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis decode PATH LAYER --output W.npy|- [--dense]`. */
#include "cli_util.h"

#include <stdlib.h>

static const char usage[] =
    "usage: trellis decode PATH LAYER --output W.npy|- [--dense]\n"
    "\n"
    "Writes the layer's decoded codebook weights W_hat as fp16 [k, n]\n"
    "(bit-exact), or with --dense the original-basis weight\n"
    "diag(suh) . Hblk . W_hat . Hblk . diag(svh) as fp32 [k, n] (no bias).\n"
    "--output - writes the .npy to stdout (errors stay on stderr).\n";

int cmd_decode(int argc, char **argv) {
  const char *output = NULL, *pos[2];
  int dense = 0;
  static const char *const names[] = {"PATH", "LAYER"};
  const cli_option opts[] = {{"--output", &output, NULL},
                             {"--dense", NULL, &dense}};
  int r = cli_parse(argc, argv, usage, opts, 2, pos, names, 2);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);
  if (output == NULL) {
    cli_error("decode: missing --output W.npy (or - for stdout)");
    return CLI_USAGE;
  }

  trellis_model *model = NULL;
  trellis_layer layer;
  if ((r = cli_open_layer(pos[0], pos[1], &model, &layer)) != CLI_OK)
    return r;
  if ((r = cli_check_output(output, model, NULL)) != CLI_OK) {
    trellis_model_close(model);
    return r;
  }

  const trellis_weight *w = &layer.weight;
  trellis_dtype dt = dense ? TRELLIS_F32 : TRELLIS_F16;
  size_t count = (size_t)w->k * (size_t)w->n;
  void *data = malloc(count * trellis_dtype_size(dt));
  if (data == NULL) {
    cli_error("%s: cannot allocate %zu bytes for [%lld, %lld]", layer.name,
              count * trellis_dtype_size(dt), (long long)w->k, (long long)w->n);
    trellis_model_close(model);
    return CLI_FAIL;
  }
  trellis_clear_error();
  trellis_status st =
      dense ? trellis_dense_weight(w, data) : trellis_decode_weight(w, data);
  if (st != TRELLIS_OK)
    r = cli_lib_error(st, layer.name);
  else {
    int64_t shape[2] = {w->k, w->n};
    r = cli_write_npy(output, dt, 2, shape, data);
  }
  free(data);
  trellis_model_close(model);
  return r;
}
