/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers of the `trellis` CLI: model/layer and .npy access with
 * one-line errors, devices. */
#include "cli_util.h"
#include "tools/out_file.h"

#include <string.h>
#include <sys/stat.h>

/* ---- models and layers -------------------------------------------------- */

int cli_open_layer(const char *path, const char *layer_name,
                   trellis_model **model, trellis_layer *layer) {
  trellis_model *m = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &m);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  st = trellis_model_find_layer(m, layer_name, layer);
  if (st == TRELLIS_ERR_NOT_FOUND) {
    size_t count = trellis_model_layer_count(m);
    cli_error("%s: no EXL3 layer named '%s' (%zu layer%s; list them with "
              "'trellis info %s')",
              path, layer_name, count, count == 1 ? "" : "s", path);
    trellis_model_close(m);
    return CLI_FAIL;
  }
  if (st != TRELLIS_OK) {
    char ctx[1024];
    snprintf(ctx, sizeof ctx, "%s: layer '%s'", path, layer_name);
    trellis_model_close(m);
    return cli_lib_error(st, ctx);
  }
  *model = m;
  return CLI_OK;
}

size_t cli_layer_payload_bytes(const trellis_layer_info *l) {
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = l->k;
  w.n = l->n;
  w.bits = l->bits;
  w.half = l->half;
  w.codebook = l->codebook;
  w.pair = l->pair;
  w.rate_axis = l->rate_axis;
  return trellis_weight_payload_bytes(&w);
}

size_t cli_layer_bytes(const trellis_layer_info *l) {
  size_t bytes = cli_layer_payload_bytes(l);
  bytes += l->input_signs == TRELLIS_SIGNS_SCALED ? (size_t)l->k * 2
                                                  : (size_t)l->k / 8;
  bytes += l->output_signs == TRELLIS_SIGNS_SCALED ? (size_t)l->n * 2
                                                   : (size_t)l->n / 8;
  if (l->has_bias)
    bytes += (size_t)l->n * 2;
  return bytes;
}

/* ---- .npy --------------------------------------------------------------- */

int cli_read_npy(const char *path, npy_array *out) {
  memset(out, 0, sizeof *out);
  trellis_clear_error();
  trellis_status st = npy_read(path, out);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, path);
}

int cli_write_npy(const char *path, trellis_dtype dtype, int ndim,
                  const int64_t *shape, const void *data) {
  trellis_clear_error();
  if (strcmp(path, "-") == 0) {
    fflush(stdout); /* the bytes go to its descriptor, after what it holds */
    trellis_status st =
        npy_write_fd(1, "--output - (stdout)", dtype, ndim, shape, data);
    return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, "--output -");
  }
  trellis_status st = npy_write(path, dtype, ndim, shape, data);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, path);
}

/* The same file as `sb`: the same device and inode, whatever the path. */
static int same_file(const char *path, const struct stat *sb) {
  struct stat other;
  return path && stat(path, &other) == 0 && other.st_dev == sb->st_dev &&
         other.st_ino == sb->st_ino;
}

int cli_check_output(const char *output, const trellis_model *model,
                     const char *input) {
  struct stat sb;
  int exists = 0;
  if (strcmp(output, "-") == 0)
    return CLI_OK; /* stdout: whatever it is, it is written as it is */
  trellis_clear_error();
  trellis_status st = out_file_check(output, &sb, &exists);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, output);
  if (!exists)
    return CLI_OK;
  const char *read = NULL;
  for (size_t i = 0; !read && trellis_model_file_path(model, i); i++)
    if (same_file(trellis_model_file_path(model, i), &sb))
      read = trellis_model_file_path(model, i);
  if (!read && same_file(input, &sb))
    read = input;
  if (!read)
    return CLI_OK;
  if (strcmp(read, output) == 0)
    cli_error("%s: is an input of this command; choose another --output",
              output);
  else
    cli_error("%s: is the same file as %s, an input of this command; choose "
              "another --output",
              output, read);
  return CLI_FAIL;
}

/* ---- devices --------------------------------------------------------------
 */

int cli_parse_device(const char *text, cli_device *out) {
  if (text == NULL || strcmp(text, "auto") == 0)
    *out = CLI_DEV_AUTO;
  else if (strcmp(text, "cpu") == 0)
    *out = CLI_DEV_CPU;
  else if (strcmp(text, "cuda") == 0)
    *out = CLI_DEV_CUDA;
  else {
    cli_error("--device: expected auto, cpu or cuda, got '%s'", text);
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_resolve_device(cli_device requested, cli_device *out) {
  int count = trellis_cuda_device_count();
  if (requested == CLI_DEV_AUTO) {
    *out = count > 0 ? CLI_DEV_CUDA : CLI_DEV_CPU;
    return CLI_OK;
  }
  if (requested == CLI_DEV_CUDA && !trellis_cuda_built()) {
    cli_error("--device cuda: " CLI_NO_CUDA_BUILD " (install the CUDA "
              "toolkit and rebuild, or use --device cpu)");
    return CLI_FAIL;
  }
  if (requested == CLI_DEV_CUDA && count <= 0) {
    cli_error("--device cuda: " CLI_NO_CUDA_DEVICE " (use --device cpu)");
    return CLI_FAIL;
  }
  *out = requested;
  return CLI_OK;
}
