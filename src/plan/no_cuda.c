/* SPDX-License-Identifier: Apache-2.0 */
/* GPU entry points of a build without CUDA: each returns
 * TRELLIS_ERR_NO_DEVICE with a message saying why. */
#include "core/internal.h"

static trellis_status no_cuda(void) {
  return trl_fail(TRELLIS_ERR_NO_DEVICE, TRL_NO_CUDA_BUILD
                  "; rebuild it with the CUDA toolkit (nvcc on PATH)");
}

int trellis_cuda_built(void) { return 0; }
int trellis_cuda_device_count(void) { return 0; }

trellis_status trellis_weight_upload(const trellis_weight *host,
                                     trellis_device_weight **out) {
  (void)host;
  if (out)
    *out = NULL;
  return no_cuda();
}

trellis_status trellis_weight_repack(const trellis_weight *device_w,
                                     int16_t *out, int16_t *out1,
                                     void *stream) {
  (void)device_w;
  (void)out;
  (void)out1;
  (void)stream;
  return no_cuda();
}

trellis_status trellis_weight_upload_layout(const trellis_weight *host,
                                            trellis_layout layout,
                                            trellis_device_weight **out) {
  (void)layout;
  return trellis_weight_upload(host, out);
}

trellis_status trellis_weight_repack_layout(const trellis_weight *device_w,
                                            trellis_layout layout, int16_t *out,
                                            int16_t *out1, void *stream) {
  (void)layout;
  return trellis_weight_repack(device_w, out, out1, stream);
}

/* No handle can exist in this build: every non-NULL one is foreign. */
const trellis_weight *
trellis_device_weight_view(const trellis_device_weight *dw) {
  if (!dw)
    trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
             "device weight view: device weight is NULL");
  else
    no_cuda();
  return NULL;
}

void trellis_device_weight_destroy(trellis_device_weight *dw) {
  if (dw)
    no_cuda();
}

trellis_status trellis_cuda_h128(const void *in, trellis_dtype in_dtype,
                                 void *out, trellis_dtype out_dtype,
                                 const uint16_t *pre_scale,
                                 const uint16_t *post_scale, int64_t rows,
                                 int64_t cols, void *stream, void *user_data) {
  (void)in, (void)in_dtype, (void)out, (void)out_dtype, (void)pre_scale;
  (void)post_scale, (void)rows, (void)cols, (void)stream, (void)user_data;
  return no_cuda();
}

trellis_status trellis_plan_create(const trellis_weight *device_w,
                                   const trellis_plan_desc *desc,
                                   trellis_plan **out) {
  (void)device_w;
  (void)desc;
  if (out)
    *out = NULL;
  return no_cuda();
}

void trellis_plan_destroy(trellis_plan *plan) { (void)plan; }

trellis_status trellis_plan_query(const trellis_plan *plan, int64_t m,
                                  trellis_buffer_sizes *out) {
  (void)plan, (void)m, (void)out;
  return no_cuda();
}

trellis_status trellis_plan_prepare(trellis_plan *plan) {
  (void)plan;
  return no_cuda();
}

trellis_status trellis_run(const trellis_plan *plan, const void *x, int64_t m,
                           void *y, const trellis_buffers *buffers,
                           void *stream) {
  (void)plan, (void)x, (void)m, (void)y, (void)buffers, (void)stream;
  return no_cuda();
}
