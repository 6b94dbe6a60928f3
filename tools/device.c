/* SPDX-License-Identifier: Apache-2.0 */
/* Device buffers of a plan (see device.h). */
#include "tools/device.h"
#include "tools/cli.h"

#include <cuda_runtime.h>

/* cudaMalloc that leaves *p NULL for zero bytes. */
static cudaError_t dev_alloc(void **p, size_t bytes) {
  *p = NULL;
  return bytes ? cudaMalloc(p, bytes) : cudaSuccess;
}

int cli_buffers_alloc(const trellis_buffer_sizes *sz, trellis_buffers *b) {
  trellis_buffers_init(b);
  b->rotated_bytes = sz->rotated_bytes;
  b->input_f16_bytes = sz->input_f16_bytes;
  b->output_f16_bytes = sz->output_f16_bytes;
  b->workspace_bytes = sz->workspace_bytes;
  cudaError_t e = dev_alloc(&b->rotated, b->rotated_bytes);
  if (e == cudaSuccess)
    e = dev_alloc(&b->input_f16, b->input_f16_bytes);
  if (e == cudaSuccess)
    e = dev_alloc(&b->output_f16, b->output_f16_bytes);
  if (e == cudaSuccess)
    e = dev_alloc(&b->workspace, b->workspace_bytes);
  if (e != cudaSuccess) {
    cli_error("cuda: plan buffers: %s", cudaGetErrorString(e));
    cli_buffers_free(b);
    return CLI_FAIL;
  }
  return CLI_OK;
}

void cli_buffers_free(trellis_buffers *b) {
  cudaFree(b->rotated);
  cudaFree(b->input_f16);
  cudaFree(b->output_f16);
  cudaFree(b->workspace);
  trellis_buffers_init(b);
}
