/* Host side of the persistent small-m decode-GEMM (stream_gemm.cuh): the
 * choice of cluster size and the launch. Its variants are compiled in the
 * unit files stream_k<K>.cu (dispatch.cuh). */
#include "stream_gemm.cuh"

#include <stdint.h>
#include <string.h>

using trl::stream::Params;
using trl::stream::Stream;

/* Costs in eighths of a stage (one k-block of a strip): the ring's first
 * fill, the end of a strip (partial sums out, the owner's reduce), and the
 * input rotation, tokens / 32 of a stage per k-block (~80 instructions per
 * row against ~2500 for a stage's decode). */
static const int64_t kFillCost = 24;
static const int64_t kStripCost = 4;

static int run(trl::dispatch::Op op, const trl_stream_config *c,
               Stream::Args &a) {
  return trl::dispatch::run<Stream>(
      op, {c->bits, (int)c->codebook, c->tokens, c->halves, c->sync}, a);
}

/* trl_stream_limit_cluster's (tests only) */
static int cluster_limit = trl::stream::kMaxCluster;

extern "C" void trl_stream_limit_cluster(int max_cluster) {
  cluster_limit = max_cluster < 1 ? 1
                  : max_cluster > trl::stream::kMaxCluster
                      ? trl::stream::kMaxCluster
                      : max_cluster;
}

extern "C" int trl_stream_plan(int bits, trellis_codebook codebook, int64_t k,
                               int64_t n, int tokens, int halves, int sync,
                               int force_cluster, trl_stream_config *out) {
  using trl::dispatch::Op;
  memset(out, 0, sizeof *out);
  out->bits = bits;
  out->codebook = codebook;
  out->tokens = tokens;
  out->halves = halves && codebook != TRELLIS_CB_MUL1;
  out->sync = sync;
  Stream::Args a = {};
  int err = run(Op::kPrepare, out, a);
  if (err)
    return err;
  int dev = 0, optin = 0;
  cudaError_t e;
  if ((e = cudaGetDevice(&dev)) ||
      (e = cudaDeviceGetAttribute(
           &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)))
    return (int)e;
  const int64_t kblocks = k / 128, strips = n / 128;
  int64_t best_cost = INT64_MAX;
  trl_stream_config best = *out;
  for (int c = 1; c <= cluster_limit && c <= kblocks; ++c) {
    const int64_t per = (kblocks + c - 1) / c;
    if ((int64_t)(c - 1) * per >= kblocks)
      continue; /* a rank would get no k-block */
    if (force_cluster > 0 && c != force_cluster)
      continue;
    a.cluster = c;
    a.chunk_blocks = (int)per;
    if ((err = run(Op::kQuery, out, a)))
      return err;
    if (a.smem > (size_t)optin)
      continue;
    /* The attribute is the kernel's, process-wide, not the plan's: every
     * plan sets the device's opt-in limit, so a plan prepared later (with
     * a smaller chunk) never lowers what an earlier one launches with. */
    if ((e = cudaFuncSetAttribute(
             a.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin)))
      return (int)e;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = (unsigned)c;
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3((unsigned)c);
    cfg.blockDim = dim3(trl::stream::kThreads);
    cfg.dynamicSmemBytes = a.smem;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int active = 0;
    if (cudaOccupancyMaxActiveClusters(&active, a.kernel, &cfg) !=
            cudaSuccess ||
        active < 1) {
      (void)cudaGetLastError();
      continue;
    }
    const int64_t clusters = active < strips ? active : strips;
    const int64_t rounds = (strips + clusters - 1) / clusters;
    const int64_t cost =
        rounds * (8 * per + kStripCost) + kFillCost + (int64_t)tokens * per / 4;
    if (cost < best_cost) {
      best_cost = cost;
      best = *out;
      best.cluster = c;
      best.clusters = (int)clusters;
      best.chunk_blocks = (int)per;
      best.smem = a.smem;
    }
  }
  if (best_cost == INT64_MAX)
    return (int)cudaErrorInvalidConfiguration;
  *out = best; /* the attribute (set above) allows its shared memory */
  return 0;
}

extern "C" int trl_launch_stream(const trl_stream_config *c,
                                 const trl_stream_args *x, void *stream) {
  if (x->m < 1 || x->m > c->tokens || c->cluster < 1)
    return (int)cudaErrorInvalidValue;
  Params p;
  p.trellis = x->trellis;
  p.x = x->x;
  p.s_in = x->s_in;
  p.s_out = x->s_out;
  p.bias = x->bias;
  p.y = x->y;
  p.m = x->m;
  p.k = x->k;
  p.n = x->n;
  p.chunk_blocks = c->chunk_blocks;
  p.clusters = c->clusters;
  p.in_dtype = x->in_dtype;
  p.out_dtype = x->out_dtype;
  trl::init_shifts(p.shifts);
  Stream::Args a = {};
  a.p = &p;
  a.cluster = c->cluster;
  a.smem = c->smem;
  a.stream = (cudaStream_t)stream;
  a.pdl = x->pdl;
  return run(trl::dispatch::Op::kLaunch, c, a);
}
