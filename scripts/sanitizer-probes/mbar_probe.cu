/* Correct mbarrier lives that synccheck might misjudge, one per variant
 * (argv[1]); device-check.sh runs each under synccheck and reports which
 * the tool flags. Every grid is far larger than the device holds at once
 * (100 KB of shared memory per CTA), so later CTAs reuse the shared memory
 * of finished ones, as the persistent kernel's do.
 *  - life:  thread 0 initialises a barrier, arrives on it with an expected
 *           transaction count of 0, every thread waits for the phase;
 *  - stale: kernel A's thread 0 arrives on a barrier and exits without
 *           waiting (as a consumer warp's release of a ring stage does:
 *           only the producer waits on it); kernel B, launched next, runs
 *           `life` on the same shared address;
 *  - stale-inval: as stale, but A invalidates its barrier before it exits
 *           (mbarrier.inval, PTX's rule for memory that is repurposed);
 *  - cluster2, cluster8, cluster16: `life` in clusters of that many CTAs
 *           (16: the non-portable size the persistent kernel may take),
 *           with the persistent kernel's start-up order: initialise, arrive
 *           with the expected bytes, fence the initialisation to the
 *           cluster, synchronise the cluster, then wait. */
#include "../../src/cuda/mbarrier.cuh" /* the kernel's own forms */

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

constexpr int kCtas = 2048, kSmem = 100000, kBarOffset = 90000;

__device__ __forceinline__ uint32_t probe_bar() {
  extern __shared__ __align__(16) unsigned char smem[];
  return (uint32_t)__cvta_generic_to_shared(smem + kBarOffset);
}
__device__ __forceinline__ void init_bar(uint32_t bar, unsigned count) {
  if (threadIdx.x == 0) {
    trl::mbar_init(bar, count);
    trl::mbar_init_fence();
  }
  __syncthreads();
}

__global__ void life(int *out) {
  const uint32_t bar = probe_bar();
  init_bar(bar, 1);
  if (threadIdx.x == 0)
    trl::mbar_arrive_tx(bar, 0);
  trl::mbar_wait(bar, 0);
  if (threadIdx.x == 0)
    out[blockIdx.x] = 1;
}

__global__ void cluster_life(int *out) {
  const uint32_t bar = probe_bar();
  if (threadIdx.x == 0) {
    trl::mbar_init(bar, 1);
    trl::mbar_arrive_tx(bar, 0);
    trl::mbar_init_fence();
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n"
               "barrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
  trl::mbar_wait(bar, 0);
  if (threadIdx.x == 0)
    out[blockIdx.x] = 3;
}

/* Threads 0 and 32 arrive; only warp 1 waits (the producer's role). */
__global__ void arrive_only(int *out, int inval) {
  const uint32_t bar = probe_bar();
  init_bar(bar, 2);
  if (threadIdx.x == 0 || threadIdx.x == 32)
    trl::mbar_arrive(bar);
  if (threadIdx.x >= 32 && threadIdx.x < 64)
    trl::mbar_wait(bar, 0);
  if (inval) {
    __syncthreads();
    if (threadIdx.x == 0)
      trl::mbar_inval(bar);
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = 2;
}

int main(int argc, char **argv) {
  const char *v = argc > 1 ? argv[1] : "life";
  int *out;
  if (cudaMalloc(&out, kCtas * sizeof(int)) != cudaSuccess ||
      cudaFuncSetAttribute(life, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           kSmem) != cudaSuccess ||
      cudaFuncSetAttribute(arrive_only,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           kSmem) != cudaSuccess)
    return 2;
  if (!strncmp(v, "cluster", 7)) {
    const int c = atoi(v + 7);
    if (c < 1 || c > 16 ||
        cudaFuncSetAttribute(cluster_life,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kSmem) != cudaSuccess ||
        cudaFuncSetAttribute(cluster_life,
                             cudaFuncAttributeNonPortableClusterSizeAllowed,
                             1) != cudaSuccess)
      return 2;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = (unsigned)c;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(128);
    cfg.blockDim = dim3(128);
    cfg.dynamicSmemBytes = kSmem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, cluster_life, out) != cudaSuccess)
      return 2;
  } else {
    if (!strcmp(v, "stale") || !strcmp(v, "stale-inval"))
      arrive_only<<<kCtas, 128, kSmem>>>(out, !strcmp(v, "stale-inval"));
    else if (strcmp(v, "life"))
      return 2;
    life<<<kCtas, 128, kSmem>>>(out);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  printf("mbarrier probe %s: %s\n", v, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
