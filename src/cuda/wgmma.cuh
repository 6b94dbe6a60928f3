/* SPDX-License-Identifier: Apache-2.0 */
/* Warpgroup MMA (sm_90a): D[64 x N] += A[64 x 16] . B[16 x N], fp32
 * accumulators in registers, A from registers (one 16x16 slice per warp in
 * the mma.m16n8k16 A layout), B from shared memory through a descriptor.
 * Compiled only where the arch-specific sm_90a features exist; everywhere
 * else TRL_WGMMA is 0 and the kernels use mma.sync. */
#ifndef TRL_CUDA_WGMMA_CUH
#define TRL_CUDA_WGMMA_CUH

#include <stdint.h>

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TRL_WGMMA 1
#else
#define TRL_WGMMA 0
#endif

namespace trl {

#if TRL_WGMMA
/* Shared-memory matrix descriptor of a K-major operand in the 128-byte
 * swizzle layout (rows of 128 B, 16-byte chunk j of row r stored at chunk
 * j ^ (r % 8), 8-row groups 1024-byte aligned): start address and the byte
 * offset between 8-row groups; the leading offset is unused there (1). */
__device__ __forceinline__ uint64_t wgmma_desc_sw128(uint32_t addr,
                                                     uint32_t sbo) {
  return (uint64_t)((addr >> 4) & 0x3FFFu) | (1ull << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}
/* desc with its start address advanced by `bytes` (a multiple of 16 that
 * keeps the address inside shared memory, so the 14-bit field does not
 * carry): one 32-bit add, where building each descriptor afresh from the
 * address cost five uniform-datapath instructions per wgmma. */
__device__ __forceinline__ uint64_t wgmma_desc_advance(uint64_t desc,
                                                       uint32_t bytes) {
  const uint32_t lo = (uint32_t)desc + (bytes >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
/* Makes this thread's shared-memory writes (cp.async included) visible to
 * the async proxy that wgmma reads through. */
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
/* Keeps the compiler from moving accumulator accesses across a wait. */
__device__ __forceinline__ void wgmma_pin(float &r) {
  asm volatile("" : "+f"(r)::"memory");
}

/* One m64nNk16 with fp32 accumulators d (N/2 per thread) += A(a) . B(desc);
 * T is the element type's PTX name. scale-d is a predicate set from 1. */
#define TRL_WGMMA_ASM(N, T, DREGS, AREGS, DESC, ONE, ...)                      \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " ONE ", 0;\n"                \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." T "." T " "   \
               "{" DREGS "}, {" AREGS "}, " DESC ", p, 1, 1, 0;\n}\n"          \
               : __VA_ARGS__                                                   \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(1) \
               : "memory")

template <int N, bool BF16> struct Wgmma;
template <bool BF16> struct Wgmma<8, BF16> {
  __device__ __forceinline__ static void
  run(float (&d)[4], const uint32_t (&a)[4], uint64_t desc) {
#define TRL_WGMMA_8(T)                                                         \
  TRL_WGMMA_ASM(8, T, "%0,%1,%2,%3", "%4,%5,%6,%7", "%8", "%9", "+f"(d[0]),    \
                "+f"(d[1]), "+f"(d[2]), "+f"(d[3]))
    if constexpr (BF16)
      TRL_WGMMA_8("bf16");
    else
      TRL_WGMMA_8("f16");
#undef TRL_WGMMA_8
  }
};
template <bool BF16> struct Wgmma<16, BF16> {
  __device__ __forceinline__ static void
  run(float (&d)[8], const uint32_t (&a)[4], uint64_t desc) {
#define TRL_WGMMA_16(T)                                                        \
  TRL_WGMMA_ASM(16, T, "%0,%1,%2,%3,%4,%5,%6,%7", "%8,%9,%10,%11", "%12",      \
                "%13", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]),         \
                "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]))
    if constexpr (BF16)
      TRL_WGMMA_16("bf16");
    else
      TRL_WGMMA_16("f16");
#undef TRL_WGMMA_16
  }
};
template <bool BF16> struct Wgmma<32, BF16> {
  __device__ __forceinline__ static void
  run(float (&d)[16], const uint32_t (&a)[4], uint64_t desc) {
#define TRL_WGMMA_32(T)                                                        \
  TRL_WGMMA_ASM(32, T,                                                         \
                "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15",       \
                "%16,%17,%18,%19", "%20", "%21", "+f"(d[0]), "+f"(d[1]),       \
                "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),    \
                "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),  \
                "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]))
    if constexpr (BF16)
      TRL_WGMMA_32("bf16");
    else
      TRL_WGMMA_32("f16");
#undef TRL_WGMMA_32
  }
};
template <bool BF16> struct Wgmma<64, BF16> {
  __device__ __forceinline__ static void
  run(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
#define TRL_WGMMA_64(T)                                                        \
  TRL_WGMMA_ASM(                                                               \
      64, T,                                                                   \
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19," \
      "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31",                       \
      "%32,%33,%34,%35", "%36", "%37", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]),     \
      "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),          \
      "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
      "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),         \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),         \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]))
    if constexpr (BF16)
      TRL_WGMMA_64("bf16");
    else
      TRL_WGMMA_64("f16");
#undef TRL_WGMMA_64
  }
};
template <bool BF16> struct Wgmma<128, BF16> {
  __device__ __forceinline__ static void
  run(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
#define TRL_WGMMA_128(T)                                                       \
  TRL_WGMMA_ASM(                                                               \
      128, T,                                                                  \
      "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19," \
      "%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%"  \
      "37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%"   \
      "54,%55,%56,%57,%58,%59,%60,%61,%62,%63",                                \
      "%64,%65,%66,%67", "%68", "%69", "+f"(d[0]), "+f"(d[1]), "+f"(d[2]),     \
      "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),  \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),          \
      "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]),         \
      "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),         \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),         \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]),         \
      "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]),         \
      "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]),         \
      "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),         \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),         \
      "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]),         \
      "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]))
    if constexpr (BF16)
      TRL_WGMMA_128("bf16");
    else
      TRL_WGMMA_128("f16");
#undef TRL_WGMMA_128
  }
};
#undef TRL_WGMMA_ASM
#endif /* TRL_WGMMA */

} // namespace trl

#endif
