/* Device queries, weight upload and the public H128 entry point. */
#include "core/internal.h"
#include "cuda/kernels.h"
#include "format/pair.h"
#include "format/weight.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <string.h>

int trellis_cuda_built(void) { return 1; }

int trellis_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return count;
}

static size_t align256(size_t v) { return (v + 255) / 256 * 256; }

trellis_status trellis_weight_upload(const trellis_weight *host,
                                     trellis_weight *device) {
  if (!device)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT, "device weight is NULL");
  trellis_weight w; /* the caller's weight at any accepted struct_size */
  trellis_status st = trellis_weight_load(host, &w);
  if (st != TRELLIS_OK)
    return st;
  const uint32_t struct_size = host->struct_size;
  host = &w;
  if (trellis_cuda_device_count() == 0)
    return trellis_fail(TRELLIS_ERR_NO_DEVICE, "no CUDA device is available");
  const size_t k = (size_t)host->k, n = (size_t)host->n;
  const size_t payload = trellis_weight_payload_bytes(host);
  /* a pair's records go one after the other, as in a checkpoint */
  const size_t record0 =
      host->pair == TRELLIS_PAIR_NONE
          ? payload
          : 2 * (size_t)trellis_pair_record_words(
                    host->rate_axis == TRELLIS_RATE_AXIS_N ? host->k : host->n,
                    host->bits);
  const size_t in_bytes = host->suh ? k * 2 : k / 16 * 2;
  const size_t out_bytes = host->svh ? n * 2 : n / 16 * 2;
  const size_t bias_bytes = host->bias ? n * 2 : 0;
  size_t off_in = align256(payload);
  size_t off_out = off_in + align256(in_bytes);
  size_t off_bias = off_out + align256(out_bytes);
  size_t total = off_bias + align256(bias_bytes);
  char *base = NULL;
  cudaError_t e = cudaMalloc((void **)&base, total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return trellis_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                        "cudaMalloc of %zu bytes for the weight failed: %s",
                        total, cudaGetErrorString(e));
  }
  const void *src_in =
      host->suh ? (const void *)host->suh : (const void *)host->su;
  const void *src_out =
      host->svh ? (const void *)host->svh : (const void *)host->sv;
  if ((e = cudaMemcpy(base, host->trellis, record0, cudaMemcpyHostToDevice)) ||
      (payload > record0 &&
       (e = cudaMemcpy(base + record0, host->trellis1, payload - record0,
                       cudaMemcpyHostToDevice))) ||
      (e = cudaMemcpy(base + off_in, src_in, in_bytes,
                      cudaMemcpyHostToDevice)) ||
      (e = cudaMemcpy(base + off_out, src_out, out_bytes,
                      cudaMemcpyHostToDevice)) ||
      (bias_bytes && (e = cudaMemcpy(base + off_bias, host->bias, bias_bytes,
                                     cudaMemcpyHostToDevice)))) {
    cudaFree(base);
    return trellis_fail(TRELLIS_ERR_CUDA,
                        "copying the weight to the device failed: %s",
                        cudaGetErrorString(e));
  }
  trellis_weight d = *host;
  d.trellis = (const int16_t *)base;
  d.trellis1 = host->pair != TRELLIS_PAIR_NONE
                   ? (const int16_t *)(base + record0)
                   : NULL;
  d.suh = host->suh ? (const uint16_t *)(base + off_in) : NULL;
  d.su = host->suh ? NULL : (const int16_t *)(base + off_in);
  d.svh = host->svh ? (const uint16_t *)(base + off_out) : NULL;
  d.sv = host->svh ? NULL : (const int16_t *)(base + off_out);
  d.bias = host->bias ? (const uint16_t *)(base + off_bias) : NULL;
  /* `device` is a struct of the caller's version: write no more than it */
  d.struct_size = struct_size < sizeof d ? struct_size : (uint32_t)sizeof d;
  memcpy(device, &d, d.struct_size);
  return TRELLIS_OK;
}

trellis_status trellis_weight_free_device(trellis_weight *device) {
  if (!device || !device->trellis)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "device weight is NULL or was not uploaded");
  cudaError_t e = cudaFree((void *)device->trellis);
  const uint32_t size = device->struct_size == TRELLIS_WEIGHT_SIZE_V1
                            ? (uint32_t)TRELLIS_WEIGHT_SIZE_V1
                            : (uint32_t)sizeof *device;
  memset(device, 0, size);
  device->struct_size = size;
  if (e != cudaSuccess)
    return trellis_fail(TRELLIS_ERR_CUDA, "cudaFree failed: %s",
                        cudaGetErrorString(e));
  return TRELLIS_OK;
}

trellis_status trellis_cuda_h128(const void *in, trellis_dtype in_dtype,
                                 void *out, trellis_dtype out_dtype,
                                 const uint16_t *pre_scale,
                                 const uint16_t *post_scale, int64_t rows,
                                 int64_t cols, void *stream, void *user_data) {
  (void)user_data;
  if (!in || !out)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT, "h128: %s is NULL",
                        in ? "out" : "in");
  if (trellis_dtype_size(in_dtype) == 0 || trellis_dtype_size(out_dtype) == 0)
    return trellis_fail(TRELLIS_ERR_DTYPE,
                        "h128: invalid dtype (in %d, out %d)", (int)in_dtype,
                        (int)out_dtype);
  if (rows < 0 || cols <= 0 || cols % 128 != 0)
    return trellis_fail(
        TRELLIS_ERR_SHAPE,
        "h128: rows %lld, cols %lld: cols must be a positive multiple of 128",
        (long long)rows, (long long)cols);
  /* rows are read and written 4 elements per lane, scales 4 at a time */
  if ((uintptr_t)in % 16 || (uintptr_t)out % 16 || (uintptr_t)pre_scale % 8 ||
      (uintptr_t)post_scale % 8)
    return trellis_fail(TRELLIS_ERR_BUFFER,
                        "h128: in and out must be 16-byte aligned and the "
                        "scales 8-byte aligned");
  /* an ordinary launch: the caller's stream order is not ours to relax */
  int err = trellis_launch_h128(in, (int)in_dtype, out, (int)out_dtype,
                                pre_scale, post_scale, rows, cols, 0, stream);
  if (err)
    return trellis_fail(TRELLIS_ERR_CUDA, "h128 launch failed: %s",
                        cudaGetErrorString((cudaError_t)err));
  return TRELLIS_OK;
}
