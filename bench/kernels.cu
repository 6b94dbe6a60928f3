/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels of the benchmark: the HBM read-peak probe (the denominator of
 * every "% of read peak") and a random fill for weight copies and inputs
 * (fp16, and E4M3 for the FP8 peer). */
#include "kernels.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

constexpr int kReadThreads = 512;
constexpr int kReadUnroll = 4;

__device__ __forceinline__ uint32_t fold(uint4 v) {
  return v.x ^ v.y ^ v.z ^ v.w;
}

__global__ void __launch_bounds__(kReadThreads)
    read_kernel(const uint4 *__restrict__ p, size_t count,
                uint32_t *__restrict__ out) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
  for (; i + (kReadUnroll - 1) * stride < count; i += kReadUnroll * stride) {
    uint4 v[kReadUnroll];
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u)
      v[u] = p[i + u * stride];
#pragma unroll
    for (int u = 0; u < kReadUnroll; ++u)
      acc ^= fold(v[u]);
  }
  for (; i < count; i += stride)
    acc ^= fold(p[i]);
  out[(size_t)blockIdx.x * blockDim.x + threadIdx.x] = acc;
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void fill_kernel(uint16_t *__restrict__ dst, size_t count,
                            uint64_t seed, int mode) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const uint64_t h = mix64(seed + (i + 1) * 0x9E3779B97F4A7C15ull);
    if (mode == 3) { /* splitmix64 draw i / 4 of state `seed` */
      dst[i] = (uint16_t)(mix64(seed + (i / 4 + 1) * 0x9E3779B97F4A7C15ull) >>
                          (16 * (i % 4)));
    } else if (mode == 0) {
      dst[i] = (uint16_t)(h >> 24);
    } else if (mode == 2) { /* bit 6 of a byte: the exponent's top bit */
      dst[i] = (uint16_t)((h >> 24) & 0xBFBFu);
    } else {
      const float u =
          (float)(uint32_t)(h >> 40) * (1.0f / 16777216.0f); /* [0, 1) */
      dst[i] = __half_as_ushort(__float2half_rn(2.0f * u - 1.0f));
    }
  }
}

__global__ void standin_kernel(const __half *__restrict__ q,
                               __half *__restrict__ out, size_t count) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = __hmul(q[i], __float2half(0.5f));
}

// dst = fp16(float(dst) + float(src)), grid-stride.
__global__ void add_kernel(__half *__restrict__ dst,
                           const __half *__restrict__ src, size_t count) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
       i += (size_t)gridDim.x * blockDim.x)
    dst[i] = __float2half_rn(__half2float(dst[i]) + __half2float(src[i]));
}

__global__ void digest_kernel(const uint16_t *__restrict__ p, size_t count,
                              unsigned long long *__restrict__ out) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  unsigned long long sum = 0, bad = 0, poison = 0;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const uint16_t v = p[i];
    sum += mix64(((uint64_t)i << 16) ^ v ^ 0x5851F42D4C957F2Dull);
    bad += (v & 0x7C00u) == 0x7C00u; /* exponent all ones: inf or NaN */
    poison += v == 0xFFFFu;
  }
  atomicAdd(&out[0], sum);
  atomicAdd(&out[1], bad);
  atomicAdd(&out[2], poison);
}

} // namespace

extern "C" int bench_read_grid(int *blocks, int *threads) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, read_kernel,
                                                      kReadThreads, 0);
  if (e != cudaSuccess)
    return (int)e;
  *threads = kReadThreads;
  *blocks = sms * (per_sm > 0 ? per_sm : 1);
  return 0;
}

extern "C" int bench_read(const void *buf, size_t bytes, uint32_t *out,
                          int blocks, int threads, void *stream) {
  if (bytes % 16 != 0 || ((uintptr_t)buf & 15) != 0 || blocks <= 0 ||
      threads <= 0)
    return (int)cudaErrorInvalidValue;
  read_kernel<<<blocks, threads, 0, (cudaStream_t)stream>>>((const uint4 *)buf,
                                                            bytes / 16, out);
  return (int)cudaGetLastError();
}

extern "C" int bench_fill(uint16_t *dst, size_t count, uint64_t seed, int mode,
                          void *stream) {
  if (count == 0)
    return 0;
  size_t blocks = (count + 255) / 256;
  if (blocks > 8192)
    blocks = 8192;
  fill_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(dst, count,
                                                                  seed, mode);
  return (int)cudaGetLastError();
}

extern "C" int bench_attention_standin(const uint16_t *q, uint16_t *out,
                                       size_t count, void *stream) {
  if (count == 0)
    return 0;
  size_t blocks = (count + 255) / 256;
  if (blocks > 132)
    blocks = 132;
  standin_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
      (const __half *)q, (__half *)out, count);
  return (int)cudaGetLastError();
}

extern "C" int bench_add_f16(uint16_t *dst, const uint16_t *src, size_t count,
                             void *stream) {
  if (count == 0)
    return 0;
  size_t blocks = (count + 255) / 256;
  if (blocks > 1024)
    blocks = 1024;
  add_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(
      (__half *)dst, (const __half *)src, count);
  return (int)cudaGetLastError();
}

extern "C" int bench_digest(const uint16_t *p, size_t count,
                            unsigned long long *out, void *stream) {
  if (count == 0)
    return 0;
  size_t blocks = (count + 255) / 256;
  if (blocks > 1024)
    blocks = 1024;
  digest_kernel<<<(unsigned)blocks, 256, 0, (cudaStream_t)stream>>>(p, count,
                                                                    out);
  return (int)cudaGetLastError();
}
