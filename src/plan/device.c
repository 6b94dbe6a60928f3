/* SPDX-License-Identifier: Apache-2.0 */
/* The public GPU entry points outside the plan: device queries, weight
 * upload and the library's H128 rotation. */
#include "core/internal.h"
#include "cuda/kernels.h"
#include "format/lanes.h"
#include "format/pair.h"
#include "format/weight.h"
#include "plan/plan_internal.h"

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

int trellis_cuda_built(void) { return 1; }

int trellis_cuda_device_count(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError(); /* clear the sticky "no device" error */
    return 0;
  }
  return count;
}

trellis_status trl_check_device_pointer(const void *p, const char *what) {
  struct cudaPointerAttributes attr;
  cudaError_t e = cudaPointerGetAttributes(&attr, p);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight %s: not a CUDA pointer (%s)", what,
                    cudaGetErrorString(e));
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "weight %s: expected device memory (upload the weight with "
                    "trellis_weight_upload)",
                    what);
  return TRELLIS_OK;
}

/* Repacks each record of `w` (device memory, checkpoint layout) into
 * out/out1 on `stream`, in `layout` (KMAJOR: a uniform layer, out not
 * overlapping the payload). */
static trellis_status repack_records(const trellis_weight *w,
                                     trellis_layout layout, int16_t *out,
                                     int16_t *out1, void *stream) {
  if (layout == TRELLIS_LAYOUT_KMAJOR) {
    int e = trl_launch_repack_kmajor(w->trellis, out, w->k, w->n,
                                     trl_lanes_rate(w->bits, w->half), stream);
    return e ? trl_cuda_fail(e, "weight repack (k-major)") : TRELLIS_OK;
  }
  trl_record rec[2];
  const int count = trl_weight_records(w, rec);
  for (int r = 0; r < count; r++) {
    int e = trl_launch_repack_lanes(
        rec[r].trellis, r == 0 ? out : out1, rec[r].k, rec[r].n,
        trl_lanes_rate(rec[r].bits, w->half), stream);
    if (e)
      return trl_cuda_fail(e, "weight repack");
  }
  return TRELLIS_OK;
}

trellis_status trellis_weight_repack(const trellis_weight *device_w,
                                     int16_t *out, int16_t *out1,
                                     void *stream) {
  return trellis_weight_repack_layout(device_w, TRELLIS_LAYOUT_LANES, out, out1,
                                      stream);
}

trellis_status trellis_weight_repack_layout(const trellis_weight *device_w,
                                            trellis_layout layout, int16_t *out,
                                            int16_t *out1, void *stream) {
  trellis_weight w;
  trellis_status st = trl_weight_load(device_w, &w);
  if (st == TRELLIS_OK)
    st = trl_weight_require_layout(&w, TRELLIS_LAYOUT_CHECKPOINT,
                                   "weight_repack");
  if (st == TRELLIS_OK)
    st = trl_check_target_layout(&w, layout, "weight_repack");
  if (st != TRELLIS_OK)
    return st;
  const int pair = w.pair != TRELLIS_PAIR_NONE;
  if (out == NULL || (pair && out1 == NULL))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "weight_repack: %s is NULL",
                    out == NULL ? "out" : "out1 (a pair's record1)");
  if (trellis_cuda_device_count() == 0)
    return trl_fail(TRELLIS_ERR_NO_DEVICE, "no CUDA device is available");
  const void *ptrs[] = {w.trellis, out, pair ? w.trellis1 : NULL,
                        pair ? out1 : NULL};
  const char *names[] = {"trellis", "out (repack)", "trellis1",
                         "out1 (repack)"};
  for (int i = 0; i < 4; i++) {
    if (ptrs[i] == NULL)
      continue;
    if ((st = trl_check_device_pointer(ptrs[i], names[i])) != TRELLIS_OK)
      return st;
    if ((uintptr_t)ptrs[i] % 16 != 0)
      return trl_fail(TRELLIS_ERR_BUFFER,
                      "weight_repack: %s is not 16-byte aligned", names[i]);
  }
  if (layout == TRELLIS_LAYOUT_KMAJOR &&
      (st = trl_check_kmajor_out(&w, out, "weight_repack")) != TRELLIS_OK)
    return st;
  return repack_records(&w, layout, out, out1, stream);
}

/* Tells a live handle from freed or foreign memory (where it is readable). */
#define DEVICE_WEIGHT_MAGIC 0x74724457u

struct trellis_device_weight {
  uint32_t magic; /* DEVICE_WEIGHT_MAGIC while alive */
  trellis_weight view;
  void *base; /* the one device allocation */
};

static int live(const trellis_device_weight *dw, const char *what) {
  if (!dw) {
    trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s: device weight is NULL", what);
    return 0;
  }
  if (dw->magic != DEVICE_WEIGHT_MAGIC) {
    trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
             "%s: not a device weight from trellis_weight_upload (or "
             "already destroyed)",
             what);
    return 0;
  }
  return 1;
}

trellis_status trellis_weight_upload(const trellis_weight *host,
                                     trellis_device_weight **out) {
  return trellis_weight_upload_layout(host, TRELLIS_LAYOUT_LANES, out);
}

trellis_status trellis_weight_upload_layout(const trellis_weight *host,
                                            trellis_layout layout,
                                            trellis_device_weight **out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "device weight output pointer is NULL");
  *out = NULL;
  trellis_weight w; /* the caller's weight at any accepted struct_size */
  trellis_status st = trl_weight_load(host, &w);
  if (st == TRELLIS_OK)
    st = trl_weight_require_layout(&w, TRELLIS_LAYOUT_CHECKPOINT,
                                   "weight_upload");
  if (st == TRELLIS_OK)
    st = trl_check_target_layout(&w, layout, "weight_upload");
  if (st != TRELLIS_OK)
    return st;
  host = &w;
  if (trellis_cuda_device_count() == 0)
    return trl_fail(TRELLIS_ERR_NO_DEVICE, "no CUDA device is available");
  trellis_device_weight *dw = calloc(1, sizeof *dw);
  if (!dw)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "device weight allocation failed");
  const size_t k = (size_t)host->k, n = (size_t)host->n;
  const size_t payload = trellis_weight_payload_bytes(host);
  /* a pair's records go one after the other, as in a checkpoint */
  const size_t record0 =
      host->pair == TRELLIS_PAIR_NONE
          ? payload
          : 2 * (size_t)trl_pair_record_words(
                    host->rate_axis == TRELLIS_RATE_AXIS_N ? host->k : host->n,
                    host->bits);
  const size_t in_bytes = host->suh ? k * 2 : k / 16 * 2;
  const size_t out_bytes = host->svh ? n * 2 : n / 16 * 2;
  const size_t bias_bytes = host->bias ? n * 2 : 0;
  /* one allocation: payload, then the vectors, each 256-byte aligned */
  size_t at = 0, off_payload, off_in, off_out, off_bias;
  if (!trl_carve_size(&at, payload, 256, &off_payload) ||
      !trl_carve_size(&at, in_bytes, 256, &off_in) ||
      !trl_carve_size(&at, out_bytes, 256, &off_out) ||
      !trl_carve_size(&at, bias_bytes, 256, &off_bias)) {
    free(dw);
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "weight upload: k = %lld, n = %lld: size overflows",
                    (long long)host->k, (long long)host->n);
  }
  const size_t total = at;
  char *base = NULL;
  cudaError_t e = cudaMalloc((void **)&base, total);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    free(dw);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "cudaMalloc of %zu bytes for the weight failed: %s", total,
                    cudaGetErrorString(e));
  }
  /* the k-major layout is a permutation across groups, never written in
   * place: the checkpoint layout goes to a staging allocation, which the
   * device repack reads (the host's repack of a large layer takes seconds;
   * the device's, microseconds) */
  int16_t *staging = NULL;
  if (layout == TRELLIS_LAYOUT_KMAJOR &&
      (e = cudaMalloc((void **)&staging, payload)) != cudaSuccess) {
    (void)cudaGetLastError();
    cudaFree(base);
    free(dw);
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                    "cudaMalloc of %zu bytes for the k-major upload's staging "
                    "copy failed: %s",
                    payload, cudaGetErrorString(e));
  }
  const void *src_in =
      host->suh ? (const void *)host->suh : (const void *)host->su;
  const void *src_out =
      host->svh ? (const void *)host->svh : (const void *)host->sv;
  e = cudaMemcpy(staging ? (void *)staging : (void *)(base + off_payload),
                 host->trellis, record0, cudaMemcpyHostToDevice);
  if (e ||
      (payload > record0 &&
       (e = cudaMemcpy(base + off_payload + record0, host->trellis1,
                       payload - record0, cudaMemcpyHostToDevice))) ||
      (e = cudaMemcpy(base + off_in, src_in, in_bytes,
                      cudaMemcpyHostToDevice)) ||
      (e = cudaMemcpy(base + off_out, src_out, out_bytes,
                      cudaMemcpyHostToDevice)) ||
      (bias_bytes && (e = cudaMemcpy(base + off_bias, host->bias, bias_bytes,
                                     cudaMemcpyHostToDevice)))) {
    cudaFree(staging);
    cudaFree(base);
    free(dw);
    return trl_fail(TRELLIS_ERR_CUDA,
                    "copying the weight to the device failed: %s",
                    cudaGetErrorString(e));
  }
  trellis_weight *v = &dw->view;
  *v = *host;
  v->struct_size = sizeof *v;
  v->trellis = (const int16_t *)(base + off_payload);
  v->trellis1 = host->pair != TRELLIS_PAIR_NONE
                    ? (const int16_t *)(base + off_payload + record0)
                    : NULL;
  /* the lane layout in place, the k-major one from the staging copy (the
   * legacy stream orders the kernel after the copies); then everything
   * complete before the handle is returned: a copy from pageable memory
   * may still be in flight when cudaMemcpy returns, and the caller's
   * streams may be non-blocking ones */
  if (layout == TRELLIS_LAYOUT_LANES) {
    st = repack_records(v, layout, (int16_t *)v->trellis,
                        (int16_t *)v->trellis1, NULL);
  } else {
    trellis_weight sw = *v;
    sw.trellis = staging;
    st = repack_records(&sw, layout, (int16_t *)v->trellis, NULL, NULL);
  }
  if (st == TRELLIS_OK && (e = cudaDeviceSynchronize()) != cudaSuccess)
    st = trl_cuda_fail(e, "weight repack");
  cudaFree(staging);
  if (st != TRELLIS_OK) {
    cudaFree(base);
    free(dw);
    return st;
  }
  v->layout = layout;
  v->suh = host->suh ? (const uint16_t *)(base + off_in) : NULL;
  v->su = host->suh ? NULL : (const int16_t *)(base + off_in);
  v->svh = host->svh ? (const uint16_t *)(base + off_out) : NULL;
  v->sv = host->svh ? NULL : (const int16_t *)(base + off_out);
  v->bias = host->bias ? (const uint16_t *)(base + off_bias) : NULL;
  dw->base = base;
  dw->magic = DEVICE_WEIGHT_MAGIC;
  *out = dw;
  return TRELLIS_OK;
}

const trellis_weight *
trellis_device_weight_view(const trellis_device_weight *dw) {
  return live(dw, "device weight view") ? &dw->view : NULL;
}

void trellis_device_weight_destroy(trellis_device_weight *dw) {
  if (!dw || !live(dw, "device weight destroy"))
    return;
  dw->magic = 0;
  if (cudaFree(dw->base) != cudaSuccess)
    (void)cudaGetLastError(); /* nothing to report it to */
  free(dw);
}

trellis_status trellis_cuda_h128(const void *in, trellis_dtype in_dtype,
                                 void *out, trellis_dtype out_dtype,
                                 const uint16_t *pre_scale,
                                 const uint16_t *post_scale, int64_t rows,
                                 int64_t cols, void *stream, void *user_data) {
  (void)user_data;
  if (!in || !out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "h128: %s is NULL",
                    in ? "out" : "in");
  if (trellis_dtype_size(in_dtype) == 0 || trellis_dtype_size(out_dtype) == 0)
    return trl_fail(TRELLIS_ERR_DTYPE, "h128: invalid dtype (in %d, out %d)",
                    (int)in_dtype, (int)out_dtype);
  if (rows < 0 || cols <= 0 || cols % 128 != 0)
    return trl_fail(
        TRELLIS_ERR_SHAPE,
        "h128: rows %lld, cols %lld: cols must be a positive multiple of 128",
        (long long)rows, (long long)cols);
  /* rows are read and written 4 elements per lane, scales 4 at a time */
  if ((uintptr_t)in % 16 || (uintptr_t)out % 16 || (uintptr_t)pre_scale % 8 ||
      (uintptr_t)post_scale % 8)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "h128: in and out must be 16-byte aligned and the "
                    "scales 8-byte aligned");
  /* an ordinary launch: the caller's stream order is not ours to relax */
  int err = trl_launch_h128(in, in_dtype, out, out_dtype, pre_scale, post_scale,
                            rows, cols, 0, stream);
  if (err)
    return trl_fail(TRELLIS_ERR_CUDA, "h128 launch failed: %s",
                    cudaGetErrorString((cudaError_t)err));
  return TRELLIS_OK;
}
