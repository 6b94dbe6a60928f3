/* SPDX-License-Identifier: Apache-2.0 */
#include "plan/cuda_status.h"

#include "core/internal.h"
#include "cuda/kernels.h"

#include <cuda_runtime.h>

trellis_status trl_cuda_fail(int err, const char *what) {
  (void)cudaGetLastError();
  if (err == TRL_KERNEL_UNSUPPORTED)
    return trl_fail_prefix(TRELLIS_ERR_UNSUPPORTED, "%s", what);
  const cudaError_t e = (cudaError_t)err;
  if (e == cudaErrorNoKernelImageForDevice ||
      e == cudaErrorInvalidDeviceFunction)
    return trl_fail(TRELLIS_ERR_ARCH,
                    "%s: libtrellis was not compiled for this GPU's "
                    "architecture (%s)",
                    what, cudaGetErrorString(e));
  if (e == cudaErrorMemoryAllocation)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: %s", what,
                    cudaGetErrorString(e));
  return trl_fail(TRELLIS_ERR_CUDA, "%s: %s", what, cudaGetErrorString(e));
}
