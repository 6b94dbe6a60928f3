/* SPDX-License-Identifier: Apache-2.0 */
/* GPU side of the CLI: device buffers, copies and timing around the
 * plan/prepare/query/run API. Only this file touches the CUDA runtime, and
 * only when the library was built with CUDA (TRELLIS_HAVE_CUDA comes from the
 * trellis_static target); otherwise every entry point reports that the build
 * has no CUDA. */
#include "cli_util.h"

#include <stdlib.h>

#ifdef TRELLIS_HAVE_CUDA
#include "tools/device.h"

#include <cuda_runtime.h>

struct cli_gpu {
  trellis_device_weight *dev_w; /* device copy of the weight */
  trellis_plan *plan;
  cudaStream_t stream;
  trellis_dtype x_dtype, y_dtype;
  int64_t k, n, max_m;
};

static int cuda_error(cudaError_t e, const char *what) {
  cli_error("cuda: %s: %s", what, cudaGetErrorString(e));
  return CLI_FAIL;
}

int cli_gpu_device_name(char *out, size_t size) {
  int dev = 0;
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaGetDeviceProperties(&prop, dev);
  if (e != cudaSuccess)
    return cuda_error(e, "device properties");
  snprintf(out, size, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
  return CLI_OK;
}

int cli_gpu_open(const trellis_weight *host, int64_t max_m,
                 trellis_dtype x_dtype, trellis_dtype y_dtype, cli_gpu **out) {
  cli_gpu *g = calloc(1, sizeof *g);
  if (g == NULL) {
    cli_error("cuda: out of host memory");
    return CLI_FAIL;
  }
  g->x_dtype = x_dtype;
  g->y_dtype = y_dtype;
  g->k = host->k;
  g->n = host->n;
  g->max_m = max_m;
  trellis_clear_error();
  trellis_status st = trellis_weight_upload(host, &g->dev_w);
  if (st != TRELLIS_OK) {
    free(g);
    return cli_lib_error(st, "cuda: weight upload");
  }
  trellis_plan_desc desc;
  trellis_plan_desc_init(&desc);
  desc.max_m = max_m;
  desc.input_dtype = x_dtype;
  desc.output_dtype = y_dtype;
  st = trellis_plan_create(trellis_device_weight_view(g->dev_w), &desc,
                           &g->plan);
  if (st == TRELLIS_OK)
    st = trellis_plan_prepare(g->plan);
  if (st != TRELLIS_OK) {
    int r = cli_lib_error(st, "cuda: plan");
    cli_gpu_close(g);
    return r;
  }
  cudaError_t e = cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking);
  if (e != cudaSuccess) {
    g->stream = NULL;
    cli_gpu_close(g);
    return cuda_error(e, "stream");
  }
  *out = g;
  return CLI_OK;
}

trellis_path cli_gpu_path(const cli_gpu *g, int64_t m) {
  trellis_buffer_sizes sz = {.struct_size = sizeof sz};
  trellis_clear_error();
  trellis_status st = trellis_plan_query(g->plan, m, &sz);
  if (st != TRELLIS_OK) {
    cli_lib_error(st, "cuda: plan query");
    return TRELLIS_PATH_NONE;
  }
  return sz.path;
}

int cli_gpu_forward(cli_gpu *g, const void *x, int64_t m, void *y, int reps,
                    double *median_s) {
  trellis_buffer_sizes sz = {.struct_size = sizeof sz};
  trellis_buffers b;
  void *dx = NULL, *dy = NULL;
  cudaEvent_t ev[2] = {NULL, NULL};
  double *times = NULL;
  int r = CLI_FAIL;
  size_t xbytes = (size_t)m * (size_t)g->k * trellis_dtype_size(g->x_dtype);
  size_t ybytes = (size_t)m * (size_t)g->n * trellis_dtype_size(g->y_dtype);

  trellis_clear_error();
  trellis_status st = trellis_plan_query(g->plan, m, &sz);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, "cuda: plan query");
  /* Every buffer is sized by the plan's own query: run() never allocates. */
  if (cli_buffers_alloc(&sz, &b) != CLI_OK)
    return CLI_FAIL;
  cudaError_t e = cudaMalloc(&dx, xbytes);
  if (e == cudaSuccess)
    e = cudaMalloc(&dy, ybytes);
  if (e == cudaSuccess)
    e = cudaMemcpy(dx, x, xbytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cuda_error(e, "buffers");
    goto done;
  }

  st = trellis_run(g->plan, dx, m, dy, &b, g->stream);
  if (st != TRELLIS_OK) {
    cli_lib_error(st, "cuda: run");
    goto done;
  }
  if ((e = cudaStreamSynchronize(g->stream)) != cudaSuccess ||
      (e = cudaMemcpy(y, dy, ybytes, cudaMemcpyDeviceToHost)) != cudaSuccess) {
    cuda_error(e, "run");
    goto done;
  }

  if (reps > 0 && median_s) {
    times = malloc((size_t)reps * sizeof *times);
    if (times == NULL || cudaEventCreate(&ev[0]) != cudaSuccess ||
        cudaEventCreate(&ev[1]) != cudaSuccess) {
      cli_error("cuda: cannot set up timing");
      goto done;
    }
    for (int i = 0; i < reps; i++) {
      float ms = 0.0f;
      cudaEventRecord(ev[0], g->stream);
      st = trellis_run(g->plan, dx, m, dy, &b, g->stream);
      cudaEventRecord(ev[1], g->stream);
      if (st != TRELLIS_OK) {
        cli_lib_error(st, "cuda: run");
        goto done;
      }
      if ((e = cudaEventSynchronize(ev[1])) != cudaSuccess ||
          (e = cudaEventElapsedTime(&ms, ev[0], ev[1])) != cudaSuccess) {
        cuda_error(e, "timed run");
        goto done;
      }
      times[i] = 1e-3 * (double)ms;
    }
    *median_s = cli_median(times, reps);
  }
  r = CLI_OK;
done:
  free(times);
  for (int i = 0; i < 2; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  cudaFree(dx);
  cudaFree(dy);
  cli_buffers_free(&b);
  return r;
}

void cli_gpu_close(cli_gpu *g) {
  if (g == NULL)
    return;
  if (g->stream)
    cudaStreamDestroy(g->stream);
  trellis_plan_destroy(g->plan);
  trellis_device_weight_destroy(g->dev_w);
  free(g);
}

#else /* CPU-only build: the GPU entry points only explain themselves. */

static int no_cuda(void) {
  cli_error("--device cuda: " CLI_NO_CUDA_BUILD " (install the CUDA toolkit "
            "and rebuild, or use --device cpu)");
  return CLI_FAIL;
}

int cli_gpu_device_name(char *out, size_t size) {
  if (size)
    out[0] = '\0';
  return no_cuda();
}

int cli_gpu_open(const trellis_weight *host, int64_t max_m,
                 trellis_dtype x_dtype, trellis_dtype y_dtype, cli_gpu **out) {
  (void)host, (void)max_m, (void)x_dtype, (void)y_dtype;
  *out = NULL;
  return no_cuda();
}

trellis_path cli_gpu_path(const cli_gpu *g, int64_t m) {
  (void)g, (void)m;
  return TRELLIS_PATH_NONE;
}

int cli_gpu_forward(cli_gpu *g, const void *x, int64_t m, void *y, int reps,
                    double *median_s) {
  (void)g, (void)x, (void)m, (void)y, (void)reps, (void)median_s;
  return no_cuda();
}

void cli_gpu_close(cli_gpu *g) { (void)g; }

#endif
