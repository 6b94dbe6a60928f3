/* SPDX-License-Identifier: Apache-2.0 */
/* CUDA runtime errors and launcher results as library statuses. Its own
 * unit so that every plan file can report one without depending on the
 * others. */
#ifndef TRL_PLAN_CUDA_STATUS_H
#define TRL_PLAN_CUDA_STATUS_H

#include "trellis.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records why `what` failed and returns the status: `err` is a cudaError_t
 * or a launcher's result (cuda/kernels.h). No kernel image for the device
 * is TRELLIS_ERR_ARCH, a failed allocation TRELLIS_ERR_OUT_OF_MEMORY, a
 * variant this build lacks TRELLIS_ERR_UNSUPPORTED (the launcher has named
 * it), anything else TRELLIS_ERR_CUDA. Clears the runtime's last error. */
trellis_status trl_cuda_fail(int err, const char *what);

#ifdef __cplusplus
}
#endif

#endif
