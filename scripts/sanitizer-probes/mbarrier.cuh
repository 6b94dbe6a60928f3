/* The mbarrier operations the sanitizer probes use, in the forms the
 * persistent kernel issues them (src/cuda/stream_gemm.cuh). Each probe is
 * a program of its own; this header is their one copy. */
#ifndef PROBE_MBARRIER_CUH
#define PROBE_MBARRIER_CUH

#include <cstdint>

__device__ static void bar_init(uint32_t b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(b), "r"(count));
}
__device__ static void bar_arrive(uint32_t b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(b) : "memory");
}
__device__ static void bar_arrive_tx(uint32_t b, uint32_t bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b),
      "r"(bytes)
      : "memory");
}
__device__ static void bar_wait(uint32_t b, uint32_t parity) {
  asm volatile("{\n.reg .pred p;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra WAIT;\n}" ::"r"(b),
               "r"(parity)
               : "memory");
}
__device__ static void bar_inval(uint32_t b) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(b) : "memory");
}
/* the initialisation made visible to the cluster (and the async proxy) */
__device__ static void bar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

#endif
