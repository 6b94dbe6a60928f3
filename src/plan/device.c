/* The public GPU entry points outside the plan: device queries, weight
 * upload and the library's H128 rotation. */
#include "core/internal.h"
#include "cuda/kernels.h"

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

trellis_status trellis_weight_upload(const trellis_weight *host,
                                     trellis_weight *device) {
  if (!device)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT, "device weight is NULL");
  trellis_status st = trellis_weight_validate(host);
  if (st != TRELLIS_OK)
    return st;
  if (trellis_cuda_device_count() == 0)
    return trellis_fail(TRELLIS_ERR_NO_DEVICE, "no CUDA device is available");
  const size_t k = (size_t)host->k, n = (size_t)host->n;
  const size_t payload = trellis_weight_payload_bytes(host);
  const size_t in_bytes = host->suh ? k * 2 : k / 16 * 2;
  const size_t out_bytes = host->svh ? n * 2 : n / 16 * 2;
  const size_t bias_bytes = host->bias ? n * 2 : 0;
  /* one allocation: payload, then the vectors, each 256-byte aligned */
  size_t at = 0, off_payload, off_in, off_out, off_bias;
  if (!trellis_carve_size(&at, payload, 256, &off_payload) ||
      !trellis_carve_size(&at, in_bytes, 256, &off_in) ||
      !trellis_carve_size(&at, out_bytes, 256, &off_out) ||
      !trellis_carve_size(&at, bias_bytes, 256, &off_bias))
    return trellis_fail(TRELLIS_ERR_SHAPE,
                        "weight upload: k = %lld, n = %lld: size overflows",
                        (long long)host->k, (long long)host->n);
  const size_t total = at;
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
  if ((e = cudaMemcpy(base + off_payload, host->trellis, payload,
                      cudaMemcpyHostToDevice)) ||
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
  *device = *host;
  device->trellis = (const int16_t *)(base + off_payload);
  device->suh = host->suh ? (const uint16_t *)(base + off_in) : NULL;
  device->su = host->suh ? NULL : (const int16_t *)(base + off_in);
  device->svh = host->svh ? (const uint16_t *)(base + off_out) : NULL;
  device->sv = host->svh ? NULL : (const int16_t *)(base + off_out);
  device->bias = host->bias ? (const uint16_t *)(base + off_bias) : NULL;
  return TRELLIS_OK;
}

trellis_status trellis_weight_free_device(trellis_weight *device) {
  if (!device || !device->trellis)
    return trellis_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                        "device weight is NULL or was not uploaded");
  cudaError_t e = cudaFree((void *)device->trellis);
  memset(device, 0, sizeof *device);
  device->struct_size = sizeof *device;
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
  int err = trellis_launch_h128(in, in_dtype, out, out_dtype, pre_scale,
                                post_scale, rows, cols, 0, stream);
  if (err)
    return trellis_fail(TRELLIS_ERR_CUDA, "h128 launch failed: %s",
                        cudaGetErrorString((cudaError_t)err));
  return TRELLIS_OK;
}
