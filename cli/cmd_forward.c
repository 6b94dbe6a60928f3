/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis forward PATH LAYER --input X.npy --output Y.npy ...`. */
#include "cli_util.h"

#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: trellis forward PATH LAYER --input X.npy --output Y.npy|-\n"
    "                       [--device auto|cpu|cuda] [--out-dtype f32|f16]\n"
    "                       [--threads N] [--tp N --rank R --split n|k]\n"
    "\n"
    "y = Hblk(Hblk(x * suh) . W_hat) * svh + bias for one EXL3 layer.\n"
    "X is fp16 or fp32, [m, k] or [k] (then Y is [n]); Y is fp32 unless\n"
    "--out-dtype f16; --output - writes it to stdout (what ran and any\n"
    "error go to stderr). --device auto (default) uses a CUDA GPU when one is\n"
    "present, else the CPU reference (--threads N, 0 = one per core; at\n"
    "most 256 run, and one per 16 columns of n: it prints how many ran).\n"
    "\n"
    "--tp N --rank R runs rank R of N's shard of the layer, split at\n"
    "multiples of 128 (as evenly as whole 128-blocks allow, the first ranks\n"
    "taking one more): --split n writes the rank's output columns [m, n_R];\n"
    "--split k reads the rank's input columns (X as [m, k], or already\n"
    "[m, k_R]) and writes its partial [m, n], rotated and scaled by svh,\n"
    "the bias on rank 0 only: the sum of the N partials is the layer's\n"
    "output.\n";

/* Checks X against the layer; sets m and whether X was 1-D. */
static int check_input(const char *path, const npy_array *x,
                       const trellis_layer *l, int64_t *m) {
  const int64_t k = l->weight.k;
  if (x->dtype != TRELLIS_F16 && x->dtype != TRELLIS_F32) {
    cli_error("%s: dtype %s is not supported; expected float16 or float32",
              path, trellis_dtype_name(x->dtype));
    return CLI_FAIL;
  }
  if (x->ndim == 1 && x->shape[0] == k) {
    *m = 1;
    return CLI_OK;
  }
  if (x->ndim == 2 && x->shape[1] == k && x->shape[0] >= 1) {
    *m = x->shape[0];
    return CLI_OK;
  }
  char shape[160] = "";
  size_t used = 0;
  for (int i = 0; i < x->ndim && used < sizeof shape - 24; i++)
    used += (size_t)snprintf(shape + used, sizeof shape - used, "%s%lld",
                             i ? ", " : "", (long long)x->shape[i]);
  cli_error("%s: shape [%s] does not fit layer %s with k = %lld (expected "
            "[m, %lld] or [%lld])",
            path, shape, l->name, (long long)k, (long long)k, (long long)k);
  return CLI_FAIL;
}

static int parse_out_dtype(const char *text, trellis_dtype *out) {
  if (text == NULL || strcmp(text, "f32") == 0)
    *out = TRELLIS_F32;
  else if (strcmp(text, "f16") == 0)
    *out = TRELLIS_F16;
  else {
    cli_error("--out-dtype: expected f32 or f16, got '%s'", text);
    return CLI_USAGE;
  }
  return CLI_OK;
}

/* Runs on the GPU; `said` gets the report line printed after the output
 * is written (so that a failure stays one line). */
static int run_cuda(const trellis_layer *l, const npy_array *x, int64_t m,
                    void *y, trellis_dtype ydt, char *said, size_t size) {
  char name[256];
  cli_gpu *g = NULL;
  int r = cli_gpu_device_name(name, sizeof name);
  if (r == CLI_OK)
    r = cli_gpu_open(&l->weight, m, x->dtype, ydt, &g);
  if (r != CLI_OK)
    return r;
  trellis_path path = cli_gpu_path(g, m);
  r = path == TRELLIS_PATH_NONE ? CLI_FAIL
                                : cli_gpu_forward(g, x->data, m, y, 0, NULL);
  cli_gpu_close(g);
  if (r == CLI_OK)
    snprintf(said, size, "device: cuda %s, path: %s", name,
             trellis_path_name(path));
  return r;
}

int cmd_forward(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *device = NULL, *out_dtype = NULL;
  const char *threads_text = NULL, *pos[2];
  const char *tp_text = NULL, *rank_text = NULL, *split_text = NULL;
  static const char *const names[] = {"PATH", "LAYER"};
  const cli_option opts[] = {
      {"--input", &input, NULL},          {"--output", &output, NULL},
      {"--device", &device, NULL},        {"--out-dtype", &out_dtype, NULL},
      {"--threads", &threads_text, NULL}, {"--tp", &tp_text, NULL},
      {"--rank", &rank_text, NULL},       {"--split", &split_text, NULL}};
  int r = cli_parse(argc, argv, usage, opts, 8, pos, names, 2);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);
  if (input == NULL || output == NULL) {
    cli_error("forward: missing %s",
              input ? "--output Y.npy (or - for stdout)" : "--input X.npy");
    return CLI_USAGE;
  }
  trellis_dtype ydt;
  cli_device dev;
  long threads = 0;
  cli_tp tp;
  if ((r = cli_tp_parse(tp_text, rank_text, split_text, 1, &tp)) != CLI_OK ||
      (r = parse_out_dtype(out_dtype, &ydt)) != CLI_OK ||
      (r = cli_parse_device(device, &dev)) != CLI_OK ||
      (threads_text && (r = cli_parse_int("--threads", threads_text, 0, 4096,
                                          &threads)) != CLI_OK) ||
      (r = cli_resolve_device(dev, &dev)) != CLI_OK)
    return r;

  trellis_model *model = NULL;
  trellis_layer layer;
  if ((r = cli_open_layer(pos[0], pos[1], &model, &layer)) != CLI_OK)
    return r;
  npy_array x;
  memset(&x, 0, sizeof x);
  int64_t m = 0;
  void *y = NULL;
  if ((r = cli_tp_shard(&tp, &layer)) != CLI_OK ||
      (r = cli_read_npy(input, &x)) != CLI_OK) {
    cli_tp_free(&tp);
    trellis_model_close(model);
    return r;
  }
  if ((r = cli_tp_input(&tp, input, &x)) != CLI_OK ||
      (r = check_input(input, &x, &layer, &m)) != CLI_OK ||
      (r = cli_check_output(output, model, input)) != CLI_OK)
    goto done;

  const int64_t n = layer.weight.n;
  size_t ybytes = (size_t)m * (size_t)n * trellis_dtype_size(ydt);
  if ((y = malloc(ybytes)) == NULL) {
    cli_error("%s: cannot allocate %zu bytes for [%lld, %lld]", output, ybytes,
              (long long)m, (long long)n);
    r = CLI_FAIL;
    goto done;
  }
  char said[512] = "";
  if (dev == CLI_DEV_CUDA) {
    r = run_cuda(&layer, &x, m, y, ydt, said, sizeof said);
  } else {
    char used[128];
    cli_cpu_threads(&layer.weight, (int)threads, used, sizeof used);
    double t0 = cli_now();
    r = cli_cpu_forward(&layer.weight, x.data, x.dtype, m, y, ydt,
                        (int)threads);
    if (r == CLI_OK)
      snprintf(said, sizeof said, "device: cpu (%s), path: cpu, %.3f ms", used,
               1e3 * (cli_now() - t0));
  }
  if (r == CLI_OK) {
    int64_t shape[2] = {m, n};
    r = x.ndim == 1 ? cli_write_npy(output, ydt, 1, &shape[1], y)
                    : cli_write_npy(output, ydt, 2, shape, y);
  }
  if (r == CLI_OK) { /* what ran, once the output is written */
    fprintf(stderr, "%s\n", said);
    cli_tp_report(&tp);
  }
done:
  free(y);
  npy_free(&x);
  cli_tp_free(&tp);
  trellis_model_close(model);
  return r;
}
