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
 *           (mbarrier.inval, PTX's rule for memory that is repurposed). */
#include <cstdint>
#include <cstdio>
#include <cstring>

constexpr int kCtas = 2048, kSmem = 100000, kBarOffset = 90000;

__device__ __forceinline__ uint32_t probe_bar() {
  extern __shared__ __align__(16) unsigned char smem[];
  return (uint32_t)__cvta_generic_to_shared(smem + kBarOffset);
}
__device__ __forceinline__ void wait_phase(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT;\n}" ::"r"(bar),
               "r"(parity)
               : "memory");
}
__device__ __forceinline__ void init_bar(uint32_t bar, unsigned count) {
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar),
                 "r"(count));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

__global__ void life(int *out) {
  const uint32_t bar = probe_bar();
  init_bar(bar, 1);
  if (threadIdx.x == 0)
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
        "r"(0)
        : "memory");
  wait_phase(bar, 0);
  if (threadIdx.x == 0)
    out[blockIdx.x] = 1;
}

/* Threads 0 and 32 arrive; only warp 1 waits (the producer's role). */
__global__ void arrive_only(int *out, int inval) {
  const uint32_t bar = probe_bar();
  init_bar(bar, 2);
  if (threadIdx.x == 0 || threadIdx.x == 32)
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar)
                 : "memory");
  if (threadIdx.x >= 32 && threadIdx.x < 64)
    wait_phase(bar, 0);
  if (inval) {
    __syncthreads();
    if (threadIdx.x == 0)
      asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar)
                   : "memory");
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
  if (!strcmp(v, "stale") || !strcmp(v, "stale-inval"))
    arrive_only<<<kCtas, 128, kSmem>>>(out, !strcmp(v, "stale-inval"));
  else if (strcmp(v, "life"))
    return 2;
  life<<<kCtas, 128, kSmem>>>(out);
  const cudaError_t e = cudaDeviceSynchronize();
  printf("mbarrier probe %s: %s\n", v, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
