/* A correct mbarrier life in every CTA of a grid far larger than the device
 * holds at once (100 KB of shared memory each: later CTAs reuse the shared
 * memory of finished ones): thread 0 initialises the barrier and arrives
 * on it with an expected transaction count of 0, every thread waits for
 * the phase. device-check.sh runs it under synccheck and reports whether
 * the tool flags it (the persistent kernel's remaining "Missing wait" is
 * in such a grid); nothing is discounted on its account. */
#include <cstdint>
#include <cstdio>

__global__ void life(int *out) {
  extern __shared__ __align__(16) unsigned char smem[];
  const uint32_t bar = (uint32_t)__cvta_generic_to_shared(smem + 90000);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(1));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0)
    asm volatile(
        "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
        "r"(0)
        : "memory");
  asm volatile("{\n.reg .pred p;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT;\n}" ::"r"(bar),
               "r"(0)
               : "memory");
  if (threadIdx.x == 0)
    out[blockIdx.x] = 1;
}

int main() {
  const int ctas = 2048, smem = 100000;
  int *out;
  if (cudaMalloc(&out, ctas * sizeof(int)) != cudaSuccess ||
      cudaFuncSetAttribute(life, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem) != cudaSuccess)
    return 2;
  life<<<ctas, 128, smem>>>(out);
  const cudaError_t e = cudaDeviceSynchronize();
  printf("mbarrier probe: %s\n", cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
