/* mbarrier operations (sm_90): the persistent kernel's (stream_gemm.cuh)
 * and the sanitizer probes' one copy (scripts/sanitizer-probes), so a probe
 * issues exactly the forms the kernel does. They exist for sm_90 and later
 * and in the host pass, so a kernel body that calls them unguarded (a
 * probe's) compiles in every pass of its -arch=sm_90a build. */
#ifndef TRL_CUDA_MBARRIER_CUH
#define TRL_CUDA_MBARRIER_CUH

#include <stdint.h>

namespace trl {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar),
               "r"(count));
}
/* the initialisations made visible to the cluster (and the async proxy) */
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_inval(uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\n"
               "WAIT_%=:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT_%=;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}

#endif

} // namespace trl

#endif
