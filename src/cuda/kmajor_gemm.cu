/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the k-major decode-GEMM (kmajor_gemm.cuh); its variants
 * live in the register-direct kernel's unit files, direct_u0.cu ..
 * direct_u10.cu, one rate each. */
#include "kmajor_gemm.cuh"

using trl::kmajor::KMajor;

extern "C" int trl_kmajor_prepare(int rate, trellis_codebook cb) {
  KMajor::Args a = {};
  /* every multiply and sub-block count a plan of this codebook may launch
   * (trl_kmajor_shape) */
  const int vars[2] = {trl_direct_var(cb, 1),
                       trl_direct_var(cb, TRL_DIRECT_MAX_M)};
  for (int v = 0; v < 2; ++v) {
    if (v == 1 && vars[1] == vars[0])
      break;
    for (int nb = 1; nb <= TRL_KMAJOR_MAX_BLOCKS; nb *= 2) {
      if (vars[v] == TRL_DIRECT_INT8 && nb > 1)
        break;
      const int err = trl::dispatch::run<KMajor>(
          trl::dispatch::Op::kPrepare, {rate, (int)cb, vars[v], nb}, a);
      if (err)
        return err;
    }
  }
  return 0;
}

extern "C" int trl_launch_kmajor(const trl_direct_launch *l,
                                 const trl_kmajor_grid *g, void *stream) {
  KMajor::Args a = {};
  a.launch = l;
  a.grid = g;
  a.stream = (cudaStream_t)stream;
  const int err = trl::dispatch::run<KMajor>(
      trl::dispatch::Op::kLaunch,
      {l->rate, (int)l->codebook, g->var, g->blocks}, a);
  if (err)
    return err;
  return trl_launch_direct_finish(l->partial, g->splits, l->s_out, l->bias,
                                  l->y, l->out_dtype, l->m, l->n, l->pdl,
                                  stream);
}
