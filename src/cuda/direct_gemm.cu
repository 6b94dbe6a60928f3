/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the register-direct decode-GEMM (direct_gemm.cuh); its
 * variants live in the unit files direct_u0.cu .. direct_u10.cu, one rate
 * each. */
#include "direct_gemm.cuh"

using trl::direct::Direct;

namespace {
int key_run(trl::dispatch::Op op, int rate, trellis_codebook cb, int var,
            Direct::Args &a) {
  return trl::dispatch::run<Direct>(op, {rate, (int)cb, var}, a);
}
} // namespace

extern "C" int trl_direct_prepare(int rate, trellis_codebook cb, int var) {
  Direct::Args a = {};
  return key_run(trl::dispatch::Op::kPrepare, rate, cb, var, a);
}

extern "C" int trl_direct_regs(int rate, trellis_codebook cb, int var,
                               int *regs) {
  Direct::Args a = {};
  const int err = key_run(trl::dispatch::Op::kQuery, rate, cb, var, a);
  *regs = a.regs;
  return err;
}

namespace trl {
namespace direct {

struct FinishParams {
  const float *partial; /* [splits][m][n] */
  const uint16_t *s_out, *bias;
  void *y;
  int64_t m, n;
  int splits, out_dtype;
};

/* The k-splits of a grid split across clusters: their sums added in split
 * order (a fixed order: replays stay bit-identical), rotated, scaled,
 * biased and stored, a warp per token of one 128-column group. A dependent
 * launch of the decode-GEMM: nothing is read before griddep_wait. It lets
 * the next launch start at once, so that launch's CTAs can decode their
 * weights (the parked form) while the decode-GEMM and this kernel run:
 * nothing of theirs before their own wait reads what these write. */
__global__ void __launch_bounds__(256) direct_finish_kernel(FinishParams f) {
  griddep_launch_dependents();
  griddep_wait();
  const int lane = threadIdx.x & 31;
  const int64_t tok = 8 * (int64_t)blockIdx.y + (threadIdx.x >> 5);
  if (tok >= f.m)
    return;
  const int64_t col = (int64_t)blockIdx.x * 128 + 4 * lane;
  const int64_t stride = f.m * f.n;
  const float *at = f.partial + tok * f.n + col;
  float h[4] = {0.f, 0.f, 0.f, 0.f};
  for (int s0 = 0; s0 < f.splits; s0 += 4) {
    float4 v[4]; /* four splits' loads in flight, added in order */
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s0 + s < f.splits)
        v[s] = *reinterpret_cast<const float4 *>(at + (s0 + s) * stride);
#pragma unroll
    for (int s = 0; s < 4; ++s)
      if (s0 + s < f.splits)
        h[0] += v[s].x, h[1] += v[s].y, h[2] += v[s].z, h[3] += v[s].w;
  }
  float sc[4], bs[4] = {0.f, 0.f, 0.f, 0.f};
  load4_f16(f.s_out, col, sc);
  if (f.bias)
    load4_f16(f.bias, col, bs);
  store_cols(f.y, f.out_dtype, f.n, f.bias != nullptr, h, sc, bs, tok, col,
             lane);
}

} // namespace direct
} // namespace trl

extern "C" int trl_launch_direct(const trl_direct_launch *l, void *stream) {
  Direct::Args a = {};
  a.launch = l;
  a.stream = (cudaStream_t)stream;
  int err =
      key_run(trl::dispatch::Op::kLaunch, l->rate, l->codebook, l->grid.var, a);
  if (err || l->grid.splits <= 1)
    return err;
  return trl_launch_direct_finish(l->partial, l->grid.splits, l->s_out, l->bias,
                                  l->y, l->out_dtype, l->m, l->n, l->pdl,
                                  stream);
}

extern "C" int trl_launch_direct_finish(const float *partial, int splits,
                                        const uint16_t *s_out,
                                        const uint16_t *bias, void *y,
                                        int out_dtype, int64_t m, int64_t n,
                                        int pdl, void *stream) {
  trl::direct::FinishParams f;
  f.partial = partial;
  f.s_out = s_out;
  f.bias = bias;
  f.y = y;
  f.m = m;
  f.n = n;
  f.splits = splits;
  f.out_dtype = out_dtype;
  const int warps = m < 8 ? (int)m : 8;
  return (int)trl::launch_dependent(
      trl::direct::direct_finish_kernel,
      dim3((unsigned)(n / 128), (unsigned)((m + 7) / 8)), dim3(32 * warps), 0,
      (cudaStream_t)stream, pdl != 0, f);
}

#if TRL_DIRECT_TIMELINE
static unsigned long long *timeline_buf; /* count, then the records */

extern "C" void *trl_direct_timeline_ptr(void) { return timeline_buf; }

extern "C" int trl_direct_timeline_reset(void) {
  cudaError_t e = cudaSuccess;
  if (!timeline_buf)
    e = cudaMalloc((void **)&timeline_buf, sizeof(unsigned long long) *
                                               TRL_TIMELINE_WORDS *
                                               (1 + (size_t)TRL_TIMELINE_CAP));
  if (e == cudaSuccess)
    e = cudaMemset(timeline_buf, 0, sizeof(unsigned long long));
  if (e == cudaSuccess)
    e = cudaDeviceSynchronize();
  return (int)e;
}

extern "C" int trl_direct_timeline_read(unsigned long long *records, int cap,
                                        int *count) {
  unsigned long long n = 0;
  *count = 0;
  if (!timeline_buf)
    return TRL_KERNEL_UNSUPPORTED;
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess)
    e = cudaMemcpy(&n, timeline_buf, sizeof n, cudaMemcpyDeviceToHost);
  n &= 0xFFFFFFFFu;
  if (n > TRL_TIMELINE_CAP)
    n = TRL_TIMELINE_CAP;
  if (n > (unsigned long long)cap)
    n = (unsigned long long)cap;
  if (e == cudaSuccess && n)
    e = cudaMemcpy(records, timeline_buf + TRL_TIMELINE_WORDS,
                   sizeof(unsigned long long) * TRL_TIMELINE_WORDS * n,
                   cudaMemcpyDeviceToHost);
  *count = (int)n;
  return (int)e;
}
#else
extern "C" void *trl_direct_timeline_ptr(void) { return NULL; }
extern "C" int trl_direct_timeline_reset(void) {
  return TRL_KERNEL_UNSUPPORTED;
}
extern "C" int trl_direct_timeline_read(unsigned long long *records, int cap,
                                        int *count) {
  (void)records, (void)cap;
  *count = 0;
  return TRL_KERNEL_UNSUPPORTED;
}
#endif

extern "C" int trl_direct_active_clusters(int rate, trellis_codebook cb,
                                          int var, int cluster, size_t smem,
                                          int *active) {
  Direct::Args a = {};
  a.cluster = cluster;
  a.smem = smem;
  const int err = key_run(trl::dispatch::Op::kQuery, rate, cb, var, a);
  *active = a.active;
  return err;
}
