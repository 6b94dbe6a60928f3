/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the decode-GEMM. The variants themselves are compiled in
 * gemm_k1.cu .. gemm_k8.cu (this file does not include dispatch_unit.cuh). */
#include "decode_gemm.cuh"

using trl::dispatch::Op;
using trl::gemm::Gemm;
using trl::gemm::Params;

/* CTAs of one variant resident per SM, from its registers and shared memory
 * (independent of attributes, so plan create can use it before prepare). */
extern "C" int trl_gemm_ctas_per_sm(int bits, int half, int bits1,
                                    trellis_codebook codebook,
                                    trellis_dtype compute, int m_blocks) {
  Gemm::Args a = {};
  const int err = trl::dispatch::run<Gemm>(
      Op::kQuery, {bits, (int)codebook, (int)compute, m_blocks, bits1, half},
      a);
  if (err || a.regs <= 0) {
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
  const int warp_regs = (a.regs * 32 + 255) / 256 * 256; /* allocation unit */
  const int threads = trl::gemm::kThreads;
  const int by_regs = regs_sm / (warp_regs * (threads / 32));
  const int by_smem = smem_sm / (int)(a.smem + 1024);
  const int by_threads = 2048 / threads;
  int n = by_regs < by_smem ? by_regs : by_smem;
  return n < by_threads ? n : by_threads;
}

extern "C" int trl_gemm_prepare(int bits, int half, int bits1,
                                trellis_codebook codebook,
                                trellis_dtype compute) {
  Gemm::Args a = {};
  return trl::dispatch::for_each_value<trl::dispatch::MBlocksAxis>(
      [&](auto mb) {
        return trl::dispatch::run<Gemm>(
            Op::kPrepare,
            {bits, (int)codebook, (int)compute, mb.value, bits1, half}, a);
      });
}

extern "C" int trl_launch_gemm(const trl_gemm_args *a, void *stream) {
  Params p;
  p.trellis = a->trellis;
  p.trellis1 = a->trellis1;
  p.rotated = a->rotated;
  p.partial = a->partial;
  p.sqg_state[0] = a->sqg_state[0];
  p.sqg_state[1] = a->sqg_state[1];
  p.rate_axis = (int)a->rate_axis;
  p.m = a->m;
  p.k = a->k;
  p.n = a->n;
  p.kt_per_split = a->kt_per_split;
  p.pdl = a->pdl;
  trl::init_shifts(p.shifts);
  /* an m_blocks this build lacks is rejected by the dispatch below */
  const int rows_per_cta = 16 * (a->m_blocks > 0 ? a->m_blocks : 1);
  Gemm::Args g = {};
  g.p = &p;
  g.grid = dim3((unsigned)(a->n / 128), (unsigned)a->splits,
                (unsigned)((a->m + rows_per_cta - 1) / rows_per_cta));
  g.stream = (cudaStream_t)stream;
  return trl::dispatch::run<Gemm>(Op::kLaunch,
                                  {a->bits, (int)a->codebook, (int)a->compute,
                                   a->m_blocks, a->bits1, a->half},
                                  g);
}
