/* SPDX-License-Identifier: Apache-2.0 */
/* Rotation kernels: the input H128 (x * suh -> fp16), the generic output
 * stage (split-K reduce, H128, * svh, + bias, dtype) and small helpers. One
 * warp rotates one 128-element block; lanes hold 4 consecutive elements. */
#include "common.cuh"
#include "dispatch.cuh"
#include "kernels.h"

#include <cuda_runtime.h>

using namespace trl;

namespace {

constexpr int kWarps = 8; /* warps per block: 8 row-blocks per CTA */

template <int IN, int OUT>
__global__ void h128_kernel(const void *__restrict__ in, void *__restrict__ out,
                            const uint16_t *__restrict__ pre,
                            const uint16_t *__restrict__ post, int64_t rows,
                            int64_t cols) {
  griddep_wait(); /* `in` may come from the previous kernel */
  griddep_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int64_t blocks_per_row = cols / 128;
  const int64_t unit = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (unit >= rows * blocks_per_row)
    return;
  const int64_t row = unit / blocks_per_row;
  const int64_t col0 = (unit % blocks_per_row) * 128 + 4 * lane;
  const int64_t base = row * cols + col0;
  float h[4], sc[4];
  load4_as_float<IN>(in, base, h);
  if (pre) {
    load4_f16(pre, col0, sc);
    /* a = RNE_fp16(x * suh): one rounding (fp16*fp16 is exact in fp32). */
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[e] = __half2float(__float2half_rn(__fmul_rn(h[e], sc[e])));
  }
  h128_warp(h, lane);
  if (post) {
    load4_f16(post, col0, sc);
#pragma unroll
    for (int e = 0; e < 4; ++e)
      h[e] = __fmul_rn(h[e], sc[e]);
  }
  store4_from_float<OUT>(out, base, h);
}

template <int OUT>
__global__ void rot_out_kernel(const float *__restrict__ partial, int splits,
                               const uint16_t *__restrict__ svh,
                               const uint16_t *__restrict__ bias,
                               void *__restrict__ y, int64_t m, int64_t n) {
  griddep_wait(); /* the decode-GEMM's partials */
  griddep_launch_dependents();
  const int lane = threadIdx.x & 31;
  const int64_t blocks_per_row = n / 128;
  const int64_t unit = (int64_t)blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (unit >= m * blocks_per_row)
    return;
  const int64_t row = unit / blocks_per_row;
  const int64_t col0 = (unit % blocks_per_row) * 128 + 4 * lane;
  const int64_t base = row * n + col0;
  const int64_t stride = m * n;
  float h[4];
  float4 v = *reinterpret_cast<const float4 *>(partial + base);
  h[0] = v.x, h[1] = v.y, h[2] = v.z, h[3] = v.w;
  for (int s = 1; s < splits; ++s) { /* fixed order: deterministic */
    float4 p = *reinterpret_cast<const float4 *>(partial + s * stride + base);
    h[0] += p.x, h[1] += p.y, h[2] += p.z, h[3] += p.w;
  }
  h128_warp(h, lane);
  float sc[4], bs[4] = {0.f, 0.f, 0.f, 0.f};
  load4_f16(svh, col0, sc);
  if (bias)
    load4_f16(bias, col0, bs);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    /* explicit _rn: no FMA contraction, so the CPU reference is bit-equal */
    h[e] = __fmul_rn(h[e], sc[e]);
    if (bias)
      h[e] = __fadd_rn(h[e], bs[e]);
  }
  store4_from_float<OUT>(y, base, h);
}

__global__ void reduce_kernel(const float *__restrict__ partial, int splits,
                              float *__restrict__ sums, int64_t count) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  float s = partial[i];
  for (int j = 1; j < splits; ++j)
    s += partial[j * count + i];
  sums[i] = s;
}

template <int OUT>
__global__ void bias_convert_kernel(const float *__restrict__ v,
                                    const uint16_t *__restrict__ bias,
                                    void *__restrict__ y, int64_t m,
                                    int64_t n) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * n)
    return;
  float o = v[i];
  if (bias)
    o += __half2float(__ushort_as_half(bias[i % n]));
  store_from_float<OUT>(y, i, o);
}

__global__ void expand_signs_kernel(const int16_t *__restrict__ packed,
                                    uint16_t *__restrict__ out, int64_t count) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= count)
    return;
  uint32_t word = (uint16_t)packed[i / 16];
  out[i] = ((word >> (i % 16)) & 1u) ? 0xBC00u : 0x3C00u; /* -1.0 : +1.0 */
}

unsigned grid_for(int64_t units, int per_block) {
  return (unsigned)((units + per_block - 1) / per_block);
}

/* The kernel families of this file with variants (see dispatch.cuh). */
struct H128 {
  static constexpr const char *kName = "H128 rotation";
  using Axes = dispatch::Axes<dispatch::InDtypeAxis, dispatch::OutDtypeAxis>;
  struct Args {
    const void *in;
    void *out;
    const uint16_t *pre, *post;
    int64_t rows, cols;
    int pdl;
    cudaStream_t stream;
  };
  template <int IN, int OUT> static int launch(Args &a) {
    const dim3 grid(grid_for(a.rows * (a.cols / 128), kWarps)),
        block(32 * kWarps);
    return (int)launch_dependent(&h128_kernel<IN, OUT>, grid, block, 0,
                                 a.stream, a.pdl != 0, a.in, a.out, a.pre,
                                 a.post, a.rows, a.cols);
  }
};

struct RotOut {
  static constexpr const char *kName = "output rotation";
  using Axes = dispatch::Axes<dispatch::OutDtypeAxis>;
  struct Args {
    const float *partial;
    int splits;
    const uint16_t *svh, *bias;
    void *y;
    int64_t m, n;
    int pdl;
    cudaStream_t stream;
  };
  template <int OUT> static int launch(Args &a) {
    const dim3 grid(grid_for(a.m * (a.n / 128), kWarps)), block(32 * kWarps);
    return (int)launch_dependent(&rot_out_kernel<OUT>, grid, block, 0, a.stream,
                                 a.pdl != 0, a.partial, a.splits, a.svh, a.bias,
                                 a.y, a.m, a.n);
  }
};

struct BiasConvert {
  static constexpr const char *kName = "bias and conversion";
  using Axes = dispatch::Axes<dispatch::OutDtypeAxis>;
  struct Args {
    const float *v;
    const uint16_t *bias;
    void *y;
    int64_t m, n;
    cudaStream_t stream;
  };
  template <int OUT> static int launch(Args &a) {
    bias_convert_kernel<OUT><<<grid_for(a.m * a.n, 256), 256, 0, a.stream>>>(
        a.v, a.bias, a.y, a.m, a.n);
    return (int)cudaGetLastError();
  }
};

} // namespace

extern "C" int trl_image_arch(void) {
  cudaFuncAttributes attr;
  if (cudaFuncGetAttributes(&attr, &h128_kernel<TRELLIS_F16, TRELLIS_F16>) !=
      cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  /* every kernel of the library is built for the same architectures, so
   * this one's image stands for all of them */
  return attr.binaryVersion;
}

extern "C" int trl_launch_h128(const void *in, trellis_dtype in_dtype,
                               void *out, trellis_dtype out_dtype,
                               const uint16_t *pre, const uint16_t *post,
                               int64_t rows, int64_t cols, int pdl,
                               void *stream) {
  if (rows <= 0)
    return 0;
  H128::Args a = {in, out, pre, post, rows, cols, pdl, (cudaStream_t)stream};
  return dispatch::run<H128>(dispatch::Op::kLaunch,
                             {(int)in_dtype, (int)out_dtype}, a);
}

extern "C" int trl_launch_rot_out(const float *partial, int splits,
                                  const uint16_t *svh, const uint16_t *bias,
                                  void *y, trellis_dtype y_dtype, int64_t m,
                                  int64_t n, int pdl, void *stream) {
  RotOut::Args a = {
      partial, splits, svh, bias, y, m, n, pdl, (cudaStream_t)stream};
  return dispatch::run<RotOut>(dispatch::Op::kLaunch, {(int)y_dtype}, a);
}

extern "C" int trl_launch_reduce(const float *partial, int splits, float *sums,
                                 int64_t m, int64_t n, void *stream) {
  reduce_kernel<<<grid_for(m * n, 256), 256, 0, (cudaStream_t)stream>>>(
      partial, splits, sums, m * n);
  return (int)cudaGetLastError();
}

extern "C" int trl_launch_bias_convert(const float *v, const uint16_t *bias,
                                       void *y, trellis_dtype y_dtype,
                                       int64_t m, int64_t n, void *stream) {
  BiasConvert::Args a = {v, bias, y, m, n, (cudaStream_t)stream};
  return dispatch::run<BiasConvert>(dispatch::Op::kLaunch, {(int)y_dtype}, a);
}

extern "C" int trl_launch_expand_signs(const int16_t *packed, uint16_t *out,
                                       int64_t count, void *stream) {
  expand_signs_kernel<<<grid_for(count, 256), 256, 0, (cudaStream_t)stream>>>(
      packed, out, count);
  return (int)cudaGetLastError();
}
