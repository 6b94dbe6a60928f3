/* Decode-GEMM dispatch by bitrate to the per-K translation units. */
#include "decode_gemm.cuh"

using trellis::gemm::Params;

#define DECLARE_K(K)                                                           \
  extern "C" int trellis_gemm_prepare_k##K(int cb, int bf);                    \
  extern "C" int trellis_gemm_launch_k##K(                                     \
      int cb, int bf, int mb, const void *p, dim3 grid, cudaStream_t s);       \
  extern "C" size_t trellis_gemm_smem_k##K(int mb);                            \
  extern "C" int trellis_gemm_regs_k##K(int cb, int bf, int mb);
DECLARE_K(1)
DECLARE_K(2)
DECLARE_K(3)
DECLARE_K(4)
DECLARE_K(5)
DECLARE_K(6)
DECLARE_K(7)
DECLARE_K(8)

typedef int (*prepare_fn)(int, int);
typedef int (*launch_fn)(int, int, int, const void *, dim3, cudaStream_t);
typedef size_t (*smem_fn)(int);

static const prepare_fn kPrepare[8] = {
    trellis_gemm_prepare_k1, trellis_gemm_prepare_k2, trellis_gemm_prepare_k3,
    trellis_gemm_prepare_k4, trellis_gemm_prepare_k5, trellis_gemm_prepare_k6,
    trellis_gemm_prepare_k7, trellis_gemm_prepare_k8};
static const launch_fn kLaunch[8] = {
    trellis_gemm_launch_k1, trellis_gemm_launch_k2, trellis_gemm_launch_k3,
    trellis_gemm_launch_k4, trellis_gemm_launch_k5, trellis_gemm_launch_k6,
    trellis_gemm_launch_k7, trellis_gemm_launch_k8};
static const smem_fn kSmem[8] = {trellis_gemm_smem_k1, trellis_gemm_smem_k2,
                                 trellis_gemm_smem_k3, trellis_gemm_smem_k4,
                                 trellis_gemm_smem_k5, trellis_gemm_smem_k6,
                                 trellis_gemm_smem_k7, trellis_gemm_smem_k8};

typedef int (*regs_fn)(int, int, int);
static const regs_fn kRegs[8] = {trellis_gemm_regs_k1, trellis_gemm_regs_k2,
                                 trellis_gemm_regs_k3, trellis_gemm_regs_k4,
                                 trellis_gemm_regs_k5, trellis_gemm_regs_k6,
                                 trellis_gemm_regs_k7, trellis_gemm_regs_k8};

/* CTAs of one variant resident per SM, from its registers and shared memory
 * (independent of attributes, so plan create can use it before prepare). */
extern "C" int trellis_gemm_ctas_per_sm(int bits, int codebook,
                                        int compute_bf16, int m_blocks) {
  const int regs = kRegs[bits - 1](codebook, compute_bf16, m_blocks);
  if (regs <= 0) {
    (void)cudaGetLastError();
    return 0;
  }
  int dev = 0, regs_sm = 0, smem_sm = 0;
  if (cudaGetDevice(&dev) ||
      cudaDeviceGetAttribute(&regs_sm, cudaDevAttrMaxRegistersPerMultiprocessor,
                             dev) ||
      cudaDeviceGetAttribute(&smem_sm,
                             cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev))
    return 0;
  const int warp_regs = (regs * 32 + 255) / 256 * 256; /* allocation unit */
  const int threads = trellis::gemm::kThreads;
  const int by_regs = regs_sm / (warp_regs * (threads / 32));
  const int by_smem = smem_sm / (int)(kSmem[bits - 1](m_blocks) + 1024);
  const int by_threads = 2048 / threads;
  int n = by_regs < by_smem ? by_regs : by_smem;
  return n < by_threads ? n : by_threads;
}

extern "C" size_t trellis_gemm_smem_bytes(int bits, int m_blocks) {
  return kSmem[bits - 1](m_blocks);
}

extern "C" int trellis_gemm_prepare(int bits, int codebook, int compute_bf16) {
  return kPrepare[bits - 1](codebook, compute_bf16);
}

extern "C" int trellis_launch_gemm(const trellis_gemm_args *a, void *stream) {
  Params p;
  p.trellis = a->trellis;
  p.rotated = a->rotated;
  p.partial = a->partial;
  p.m = a->m;
  p.k = a->k;
  p.n = a->n;
  p.kt_per_split = a->kt_per_split;
  p.pdl = a->pdl;
  trellis::gemm::init_shifts(p.shifts);
  const int rows_per_cta = 16 * a->m_blocks;
  dim3 grid((unsigned)(a->n / 128), (unsigned)a->splits,
            (unsigned)((a->m + rows_per_cta - 1) / rows_per_cta));
  return kLaunch[a->bits - 1](a->codebook, a->compute_bf16, a->m_blocks, &p,
                              grid, (cudaStream_t)stream);
}
