/* SPDX-License-Identifier: Apache-2.0 */
/* A correct bulk-copy ring, the pattern of the persistent kernel: one
 * producer warp fills two shared-memory slots with cp.async.bulk completing
 * on a "full" mbarrier; two consumer warps wait on it, read the slot and
 * release it on an "empty" mbarrier the producer waits on before the next
 * copy. Every write is ordered after the reads it replaces, yet racecheck
 * reports hazards between the copies and the reads while it does not model
 * that ordering; device-check.sh runs this probe to know whether it does. */
#include "../../src/cuda/mbarrier.cuh" /* the kernel's own forms */

#include <cstdint>
#include <cstdio>

__device__ static uint32_t smem(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
__device__ static void bulk_copy(uint32_t dst, const void *src, uint32_t bytes,
                                 uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}

__global__ void ring(const uint32_t *src, uint32_t *out, int iters) {
  __shared__ __align__(128) uint32_t slot[2][256];
  __shared__ __align__(8) uint64_t full[2], empty[2];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      trl::mbar_init(smem(&full[s]), 1);
      trl::mbar_init(smem(&empty[s]), 2);
    }
    trl::mbar_init_fence();
  }
  __syncthreads();
  if (warp == 2) { /* the producer */
    for (int it = 0; it < iters; ++it) {
      const int s = it & 1;
      if (it >= 2)
        trl::mbar_wait(smem(&empty[s]), ((it >> 1) & 1) ^ 1);
      if (lane == 0) {
        trl::mbar_arrive_tx(smem(&full[s]), sizeof slot[s]);
        bulk_copy(smem(slot[s]), src + it * 256, sizeof slot[s],
                  smem(&full[s]));
      }
      __syncwarp();
    }
    return;
  }
  uint32_t sum = 0;
  for (int it = 0; it < iters; ++it) {
    const int s = it & 1;
    trl::mbar_wait(smem(&full[s]), (it >> 1) & 1);
    for (int i = 0; i < 4; ++i)
      sum += slot[s][warp * 128 + lane * 4 + i];
    __syncwarp();
    if (lane == 0)
      trl::mbar_arrive(smem(&empty[s]));
  }
  out[threadIdx.x] = sum;
}

int main() {
  const int iters = 16;
  uint32_t *src, *out, host[64];
  if (cudaMalloc(&src, iters * 1024) != cudaSuccess ||
      cudaMalloc(&out, sizeof host) != cudaSuccess)
    return 2;
  cudaMemset(src, 1, iters * 1024);
  ring<<<1, 96>>>(src, out, iters);
  cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost);
  const uint32_t want = iters * 4 * 0x01010101u;
  printf("ring probe: sum %s\n", host[0] == want ? "right" : "WRONG");
  return host[0] == want && cudaGetLastError() == cudaSuccess ? 0 : 1;
}
