/* SPDX-License-Identifier: Apache-2.0 */
/* Launchers of the register-direct decode-GEMM (direct_gemm.cuh); its
 * variants live in the unit files direct_u0.cu .. direct_u10.cu, one rate
 * each. */
#include "direct_gemm.cuh"

using trl::direct::Direct;

namespace {
int key_run(trl::dispatch::Op op, int rate, trellis_codebook cb, int var,
            int tb, Direct::Args &a) {
  return trl::dispatch::run<Direct>(op, {rate, (int)cb, var, tb}, a);
}
} // namespace

extern "C" int trl_direct_prepare(int rate, trellis_codebook cb, int var,
                                  int tb) {
  Direct::Args a = {};
  return key_run(trl::dispatch::Op::kPrepare, rate, cb, var, tb, a);
}

extern "C" int trl_direct_regs(int rate, trellis_codebook cb, int var, int tb,
                               int *regs) {
  Direct::Args a = {};
  const int err = key_run(trl::dispatch::Op::kQuery, rate, cb, var, tb, a);
  *regs = a.regs;
  return err;
}

extern "C" int trl_launch_direct(const trl_direct_launch *l, void *stream) {
  Direct::Args a = {};
  a.launch = l;
  a.stream = (cudaStream_t)stream;
  return key_run(trl::dispatch::Op::kLaunch, l->rate, l->codebook, l->grid.var,
                 l->grid.tb, a);
}

extern "C" int trl_direct_active_clusters(int rate, trellis_codebook cb,
                                          int var, int tb, int cluster,
                                          size_t smem, int *active) {
  Direct::Args a = {};
  a.cluster = cluster;
  a.smem = smem;
  const int err = key_run(trl::dispatch::Op::kQuery, rate, cb, var, tb, a);
  *active = a.active;
  return err;
}
