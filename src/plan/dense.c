/* SPDX-License-Identifier: Apache-2.0 */
/* Dense path of the generic scheduler for large m: decode W_hat column
 * slices into the workspace and hand the GEMM to cuBLASLt (fp32 compute).
 *  - With an external rotation: W_hat, fp32 output, the caller rotates.
 *  - Otherwise the output rotation is folded into the slice, W' = W_hat .
 *    Hblk . diag(svh) rounded once to fp16/bf16 (FORMAT.md §6.3; exllamav3
 *    does the same for large m), so no rotation pass over the [m, n] output;
 *    when x is in the compute dtype the input rotation is folded too (W =
 *    diag(suh) . Hblk . W') and the GEMM reads x: no pass over [m, k].
 *    "Direct" plans (output dtype = compute dtype or fp32, fp16 bias only on
 *    fp16 output) have cuBLASLt write y and add the bias; the others write
 *    fp32 and one pass adds the bias and converts.
 * Algorithms are chosen once in prepare; run only initialises descriptors
 * and layouts on the stack and launches. */
#include "plan/plan_internal.h"
#include "cuda/kernels.h"
#include "format/pair.h"

#include <string.h>

static trellis_status lt_fail(cublasStatus_t s, const char *what) {
  return trl_fail(TRELLIS_ERR_CUDA, "cuBLASLt %s failed (status %d)", what,
                  (int)s);
}

static cudaDataType_t cuda_type(trellis_dtype t) {
  return t == TRELLIS_BF16  ? CUDA_R_16BF
         : t == TRELLIS_F32 ? CUDA_R_32F
                            : CUDA_R_16F;
}

/* The matmul descriptor of this plan's dense GEMM; `bias` is the epilogue's
 * bias for the slice (direct plans with a bias). */
static cublasStatus_t init_desc(const trellis_plan *p,
                                cublasLtMatmulDescOpaque_t *desc,
                                const void *bias) {
  cublasStatus_t s =
      cublasLtMatmulDescInit(desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s || !(p->lp.dense_direct && p->w.bias))
    return s;
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  if ((s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                          &epi, sizeof epi)))
    return s;
  return cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                        &bias, sizeof bias);
}

typedef struct dense_layouts {
  cublasLtMatrixLayoutOpaque_t a, b, d;
} dense_layouts;

static cublasStatus_t init_layouts(const trellis_plan *p, int64_t m,
                                   int64_t cols, dense_layouts *l) {
  const cudaDataType_t t = cuda_type(p->desc.compute_dtype);
  const cudaDataType_t dt =
      p->lp.dense_direct ? cuda_type(p->desc.output_dtype) : CUDA_R_32F;
  cublasStatus_t s;
  /* Row-major W[k][cols] is column-major [cols x k]; y^T = W^T x^T. */
  if ((s = cublasLtMatrixLayoutInit(&l->a, t, (uint64_t)cols, (uint64_t)p->w.k,
                                    cols)))
    return s;
  if ((s = cublasLtMatrixLayoutInit(&l->b, t, (uint64_t)p->w.k, (uint64_t)m,
                                    p->w.k)))
    return s;
  return cublasLtMatrixLayoutInit(&l->d, dt, (uint64_t)cols, (uint64_t)m,
                                  p->w.n);
}

static trellis_status pick_algo(trellis_plan *p, int64_t m, int64_t cols,
                                cublasLtMatmulAlgo_t *algo, int *valid) {
  dense_layouts l;
  cublasStatus_t s = init_layouts(p, m, cols, &l);
  if (s)
    return lt_fail(s, "layout init");
  cublasLtMatmulPreferenceOpaque_t pref;
  if ((s = cublasLtMatmulPreferenceInit(&pref)))
    return lt_fail(s, "preference init");
  size_t ws = TRL_CUBLAS_WS_BYTES;
  if ((s = cublasLtMatmulPreferenceSetAttribute(
           &pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws)))
    return lt_fail(s, "preference");
  cublasLtMatmulHeuristicResult_t res;
  int found = 0;
  cublasLtMatmulDescOpaque_t desc;
  if ((s = init_desc(p, &desc, p->w.bias)))
    return lt_fail(s, "matmul descriptor");
  s = cublasLtMatmulAlgoGetHeuristic(p->lt, &desc, &l.a, &l.b, &l.d, &l.d,
                                     &pref, 1, &res, &found);
  if (s || found == 0)
    return trl_fail(
        TRELLIS_ERR_UNSUPPORTED,
        "cuBLASLt has no algorithm for the dense GEMM (m %lld, n %lld, k %lld)",
        (long long)m, (long long)cols, (long long)p->w.k);
  *algo = res.algo;
  *valid = 1;
  return TRELLIS_OK;
}

/* One algorithm per bucket of m (trl_layout_dense_bucket), from the
 * plan's first (trl_path_dense_first_bucket) to max_m; none where the
 * plan never takes the dense path. */
trellis_status trl_dense_prepare(trellis_plan *p) {
  const int64_t first = trl_path_dense_first_bucket(&p->pp);
  if (first == 0 || first > p->desc.max_m)
    return TRELLIS_OK;
  cublasStatus_t s = cublasLtCreate(&p->lt);
  if (s)
    return lt_fail(s, "handle creation");
  trl_layout lay;
  if (!trl_layout_compute(&p->lp, TRELLIS_PATH_DENSE, p->desc.max_m, &lay))
    return trl_fail(TRELLIS_ERR_SHAPE, "dense layout overflows");
  const int64_t tail = p->w.n % lay.slice_n;
  p->algo_count = 0;
  for (int i = 0;; ++i) {
    if (i == TRL_DENSE_BUCKETS)
      return trl_fail(TRELLIS_ERR_INTERNAL, "too many dense buckets");
    dense_algo *d = &p->algos[p->algo_count++];
    memset(d, 0, sizeof *d);
    const int64_t b = trl_layout_dense_bucket_m(first, i);
    d->m = b < p->desc.max_m ? b : p->desc.max_m;
    trellis_status st =
        pick_algo(p, d->m, lay.slice_n, &d->full, &d->valid_full);
    if (st == TRELLIS_OK && tail)
      st = pick_algo(p, d->m, tail, &d->tail, &d->valid_tail);
    if (st != TRELLIS_OK)
      return st;
    if (d->m >= p->desc.max_m)
      break;
  }
  return TRELLIS_OK;
}

/* Decodes the slice of columns [n0, n0 + cols) of the weight into `what`
 * ([k][cols]) in `form`. A pair's records are reconstructed one after the
 * other, each as the tile array it is, into its sub-block: on the n axis
 * (n = 256) record r is columns 128 r .. of W_hat (slices are whole
 * 128-column blocks, so a record is in a slice or not), on the k axis
 * (k = 256) rows 128 r ..; each Hadamard block lies inside one record, so
 * the folded rotations and scales stay per record. */
static int reconstruct(const trellis_plan *p, trl_recon_form form, int64_t n0,
                       int64_t cols, uint16_t *what, cudaStream_t stream) {
  trl_reconstruct_args a;
  memset(&a, 0, sizeof a);
  a.trellis = p->w.trellis;
  a.bits = p->w.bits;
  a.codebook = p->w.codebook;
  a.sqg = p->sqg;
  a.k = p->w.k;
  a.n = p->w.n;
  a.n0 = n0;
  a.n_cols = cols;
  a.ldd = cols;
  a.pre = p->s_in;
  a.post = p->s_out;
  a.dst = what;
  a.dst_dtype = p->desc.compute_dtype;
  a.half = p->w.half;
  a.kmajor = p->w.layout == TRELLIS_LAYOUT_KMAJOR;
  /* plain W_hat; the run rotates before and after */
  if (p->w.half || a.kmajor)
    return trl_launch_reconstruct_rate(&a, stream);
  if (p->w.pair == TRELLIS_PAIR_NONE)
    return trl_launch_reconstruct(form, &a, stream);
  const int64_t rec = TRL_PAIR_RECORD;
  for (int r = 0; r < 2; ++r) {
    trl_reconstruct_args b = a;
    b.trellis = r ? p->w.trellis1 : p->w.trellis;
    b.bits = r ? p->w.bits1 : p->w.bits;
    if (p->w.rate_axis == TRELLIS_RATE_AXIS_N) {
      if (rec * r < n0 || rec * r >= n0 + cols)
        continue;
      b.n = rec;
      b.n0 = 0;
      b.n_cols = rec;
      b.post = p->s_out + rec * r;
      b.dst = what + (rec * r - n0);
    } else {
      b.k = rec;
      b.pre = p->s_in + rec * r;
      b.dst = what + rec * r * cols;
    }
    const int err = trl_launch_reconstruct(form, &b, stream);
    if (err)
      return err;
  }
  return 0;
}

/* `a` is the GEMM's activation: x when the input rotation is folded into
 * the weight (the record's input NONE), else the rotated copy. */
trellis_status trl_dense_gemm(const trellis_plan *p, const trl_decision *dec,
                              const void *a, char *ws, int64_t m, void *y,
                              cudaStream_t stream) {
  const trl_layout *lay = &dec->layout;
  if (dec->dense.bucket >= p->algo_count)
    return trl_fail(TRELLIS_ERR_INTERNAL, "no dense algorithm for m = %lld",
                    (long long)m);
  const dense_algo *d = &p->algos[dec->dense.bucket];
  uint16_t *what = (uint16_t *)(ws + lay->what_off);
  float *partial = (float *)(ws + lay->partial_off);
  void *lt_ws = ws + lay->cublas_off;
  const float one = 1.0f, zero = 0.0f;
  for (int64_t n0 = 0; n0 < p->w.n; n0 += lay->slice_n) {
    const int64_t cols =
        p->w.n - n0 < lay->slice_n ? p->w.n - n0 : lay->slice_n;
    const int err = reconstruct(p, dec->dense.form, n0, cols, what, stream);
    if (err)
      return trl_cuda_fail(err, "W_hat reconstruction");
    dense_layouts l;
    cublasStatus_t s = init_layouts(p, m, cols, &l);
    if (s)
      return lt_fail(s, "layout init");
    cublasLtMatmulDescOpaque_t desc;
    if ((s = init_desc(p, &desc, p->w.bias ? p->w.bias + n0 : NULL)))
      return lt_fail(s, "matmul descriptor");
    void *out =
        p->lp.dense_direct
            ? (char *)y + (size_t)n0 * trellis_dtype_size(p->desc.output_dtype)
            : (void *)(partial + n0);
    const cublasLtMatmulAlgo_t *algo =
        cols == lay->slice_n ? &d->full : &d->tail;
    s = cublasLtMatmul(p->lt, &desc, &one, what, &l.a, a, &l.b, &zero, out,
                       &l.d, out, &l.d, algo, lt_ws, lay->cublas_bytes, stream);
    if (s)
      return lt_fail(s, "matmul");
  }
  return TRELLIS_OK;
}
