/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's peers, measured in the same run: the device facts, the HBM
 * read peak (a 16-byte-load read kernel over 2 GiB), FP16 cuBLASLt with
 * both weight layouts and FP8 W8A8 cuBLASLt, timed by the same cold
 * graph-replay method as ours. */
#include "bench.h"

#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int bench_query_gpu(bench_env *env) {
  int dev = 0, sms = 0, l2 = 0, r = CLI_FAIL;
  struct cudaDeviceProp p;
  BENCH_CUDA(cudaGetDevice(&dev));
  BENCH_CUDA(cudaGetDeviceProperties(&p, dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  snprintf(env->gpu, sizeof env->gpu, "%s (sm_%d%d)", p.name, p.major, p.minor);
  env->sm_count = sms;
  env->l2_bytes = (size_t)l2;
  env->mem_bytes = p.totalGlobalMem;
  env->cold_bytes =
      4 * env->l2_bytes > BENCH_COLD_MIN ? 4 * env->l2_bytes : BENCH_COLD_MIN;
  r = CLI_OK;
done:
  return r;
}

int bench_read_peak(cudaStream_t stream, double *gbs) {
  void *buf = NULL;
  uint32_t *out = NULL;
  cudaEvent_t ev[2] = {NULL, NULL};
  double t[BENCH_READ_REPS];
  int blocks = 0, threads = 0, r = CLI_FAIL;
  const size_t bytes = BENCH_READ_BYTES;
  BENCH_KERNEL(bench_read_grid(&blocks, &threads));
  BENCH_CUDA(cudaMalloc(&buf, bytes));
  BENCH_CUDA(cudaMalloc((void **)&out,
                        (size_t)blocks * (size_t)threads * sizeof *out));
  BENCH_CUDA(cudaEventCreate(&ev[0]));
  BENCH_CUDA(cudaEventCreate(&ev[1]));
  BENCH_KERNEL(bench_fill(buf, bytes / 2, 0x7ead, 0, stream));
  for (int i = 0; i < 2; i++) /* warm-up */
    BENCH_KERNEL(bench_read(buf, bytes, out, blocks, threads, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (int i = 0; i < BENCH_READ_REPS; i++) {
    float ms = 0.0f;
    BENCH_CUDA(cudaEventRecord(ev[0], stream));
    BENCH_KERNEL(bench_read(buf, bytes, out, blocks, threads, stream));
    BENCH_CUDA(cudaEventRecord(ev[1], stream));
    BENCH_CUDA(cudaEventSynchronize(ev[1]));
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    t[i] = 1e-3 * (double)ms;
  }
  *gbs = (double)bytes / cli_median(t, BENCH_READ_REPS) / 1e9;
  r = CLI_OK;
done:
  for (int i = 0; i < 2; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  cudaFree(out);
  cudaFree(buf);
  return r;
}

/* ---- FP16 cuBLASLt ------------------------------------------------------ */

/* y[M][n] = x[M][k] . W, all row-major. In cuBLASLt's column-major terms
 * D (n x M, ld n) = op(A) . B with B = x (k x M, ld k) and A the weight:
 * W[k][n] row-major is A (n x k, ld n), op N; W[n][k] row-major is
 * A (k x n, ld k), op T. */
typedef struct lt_ctx {
  cublasLtHandle_t h;
  bench_lt_desc l;
  cublasLtMatmulAlgo_t algo;
  void **w; /* `copies` weight copies, past 4x L2 together */
  int copies;
  void *x, *y, *ws;
  size_t ws_bytes;
  float one, zero;
} lt_ctx;

static cublasStatus_t lt_matmul(const lt_ctx *c, int index,
                                cudaStream_t stream) {
  return cublasLtMatmul(c->h, c->l.desc, &c->one, c->w[index % c->copies],
                        c->l.a, c->x, c->l.b, &c->zero, c->y, c->l.d, c->y,
                        c->l.d, &c->algo, c->ws, c->ws_bytes, stream);
}

static int lt_enqueue(void *ctx, int index, cudaStream_t stream) {
  cublasStatus_t s = lt_matmul(ctx, index, stream);
  if (s != CUBLAS_STATUS_SUCCESS) {
    cli_error("cuBLASLt: cublasLtMatmul: %s", cublasLtGetStatusName(s));
    return CLI_FAIL;
  }
  return CLI_OK;
}

void bench_lt_desc_release(bench_lt_desc *l) {
  if (l->a)
    cublasLtMatrixLayoutDestroy(l->a);
  if (l->b)
    cublasLtMatrixLayoutDestroy(l->b);
  if (l->d)
    cublasLtMatrixLayoutDestroy(l->d);
  if (l->desc)
    cublasLtMatmulDescDestroy(l->desc);
  memset(l, 0, sizeof *l);
}

/* The descriptors of one (M, layout), released (NULL ones skipped). */
static void lt_release(lt_ctx *c) { bench_lt_desc_release(&c->l); }

int bench_lt_fp16_desc(cublasLtHandle_t h, int transposed, int64_t k, int64_t n,
                       int64_t m, uint64_t ws, bench_lt_desc *l,
                       cublasLtMatmulHeuristicResult_t *heur, int want,
                       int *count) {
  cublasLtMatmulPreference_t pref = NULL;
  const int32_t op = transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  int r = CLI_FAIL;
  memset(l, 0, sizeof *l);
  *count = 0;
  BENCH_LT(cublasLtMatmulDescCreate(&l->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  BENCH_LT(cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &op, sizeof op));
  if (transposed)
    BENCH_LT(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_16F, (uint64_t)k,
                                        (uint64_t)n, k));
  else
    BENCH_LT(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_16F, (uint64_t)n,
                                        (uint64_t)k, n));
  BENCH_LT(cublasLtMatrixLayoutCreate(&l->b, CUDA_R_16F, (uint64_t)k,
                                      (uint64_t)m, k));
  BENCH_LT(cublasLtMatrixLayoutCreate(&l->d, CUDA_R_16F, (uint64_t)n,
                                      (uint64_t)m, n));
  BENCH_LT(cublasLtMatmulPreferenceCreate(&pref));
  BENCH_LT(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  BENCH_LT(cublasLtMatmulAlgoGetHeuristic(h, l->desc, l->a, l->b, l->d, l->d,
                                          pref, want, heur, count));
  r = CLI_OK;
done:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  return r;
}

int bench_lt_fp8_desc(cublasLtHandle_t h, const float *one, int64_t k,
                      int64_t n, int64_t m, trellis_dtype out, uint64_t ws,
                      bench_lt_desc *l, cublasLtMatmulHeuristicResult_t *heur,
                      int want, int *count, const char **why) {
  cublasLtMatmulPreference_t pref = NULL;
  const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  const cudaDataType_t dt = out == TRELLIS_BF16 ? CUDA_R_16BF : CUDA_R_16F;
  int r = CLI_FAIL;
  memset(l, 0, sizeof *l);
  *count = 0;
  BENCH_LT(cublasLtMatmulDescCreate(&l->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  BENCH_LT(cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                          &op_t, sizeof op_t));
  BENCH_LT(cublasLtMatmulDescSetAttribute(l->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                          &op_n, sizeof op_n));
  BENCH_LT(cublasLtMatmulDescSetAttribute(
      l->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &one, sizeof one));
  BENCH_LT(cublasLtMatmulDescSetAttribute(
      l->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &one, sizeof one));
  BENCH_LT(cublasLtMatrixLayoutCreate(&l->a, CUDA_R_8F_E4M3, (uint64_t)k,
                                      (uint64_t)n, k));
  BENCH_LT(cublasLtMatrixLayoutCreate(&l->b, CUDA_R_8F_E4M3, (uint64_t)k,
                                      (uint64_t)m, k));
  BENCH_LT(cublasLtMatrixLayoutCreate(&l->d, dt, (uint64_t)n, (uint64_t)m, n));
  BENCH_LT(cublasLtMatmulPreferenceCreate(&pref));
  BENCH_LT(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  /* A GPU without FP8 kernels answers NOT_SUPPORTED (or no result). */
  cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(
      h, l->desc, l->a, l->b, l->d, l->d, pref, want, heur, count);
  if (s != CUBLAS_STATUS_SUCCESS) {
    *count = 0;
    *why = cublasLtGetStatusName(s);
  } else if (*count == 0) {
    *why = "no algorithm";
  }
  r = CLI_OK;
done:
  if (pref)
    cublasLtMatmulPreferenceDestroy(pref);
  return r;
}

/* The handle and the operands a peer times: `copies` weights of `wbytes`
 * (seeds from `wseed`), x of `xbytes`, y of `ybytes` and the workspace, the
 * weights and x filled by bench_fill with `kind`, the fills finished.
 * lt_free releases what was made, also after a failure. */
static int lt_alloc(lt_ctx *c, int copies, size_t wbytes, uint64_t wseed,
                    size_t xbytes, uint64_t xseed, size_t ybytes, int kind,
                    cudaStream_t stream) {
  int r = CLI_FAIL;
  BENCH_ALLOC(c->w, copies);
  c->copies = copies;
  BENCH_LT(cublasLtCreate(&c->h));
  for (int i = 0; i < copies; i++) {
    BENCH_CUDA(cudaMalloc(&c->w[i], wbytes));
    BENCH_KERNEL(bench_fill(c->w[i], wbytes / 2, wseed * 1000003u + (uint64_t)i,
                            kind, stream));
  }
  BENCH_CUDA(cudaMalloc(&c->x, xbytes));
  BENCH_CUDA(cudaMalloc(&c->y, ybytes));
  BENCH_CUDA(cudaMalloc(&c->ws, c->ws_bytes));
  BENCH_KERNEL(bench_fill(c->x, xbytes / 2, xseed, kind, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  r = CLI_OK;
done:
  return r;
}

static void lt_free(lt_ctx *c) {
  if (c->h)
    cublasLtDestroy(c->h);
  if (c->w)
    for (int i = 0; i < c->copies; i++)
      cudaFree(c->w[i]);
  free(c->w);
  cudaFree(c->x);
  cudaFree(c->y);
  cudaFree(c->ws);
}

/* One (M, layout): heuristic algorithm (once), then graph replay. */
static int lt_time(lt_ctx *c, int transposed, int64_t k, int64_t n, int64_t m,
                   int launches, int reps, cudaStream_t stream, double *us) {
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0, r = CLI_FAIL;
  if (bench_lt_fp16_desc(c->h, transposed, k, n, m, c->ws_bytes, &c->l, &heur,
                         1, &found) != CLI_OK)
    goto done;
  if (found == 0) {
    fprintf(stderr,
            "trellis: bench: note: cuBLASLt has no algorithm for %lldx%lld "
            "M=%lld W[%s]\n",
            (long long)k, (long long)n, (long long)m,
            transposed ? "n,k" : "k,n");
    *us = NAN;
    r = CLI_OK;
    goto done;
  }
  c->algo = heur.algo;
  /* One eager launch first: loads the kernel and surfaces errors outside
   * the capture. */
  if (lt_enqueue(c, 0, stream) != CLI_OK)
    goto done;
  BENCH_CUDA(cudaStreamSynchronize(stream));
  r = bench_time_graph(lt_enqueue, c, launches, reps, stream, us);
done:
  lt_release(c);
  return r;
}

int bench_cublas_shape(int64_t k, int64_t n, const int64_t *ms, int nms,
                       size_t cold_bytes, int reps, cudaStream_t stream,
                       double *kn_us, double *nk_us) {
  const size_t wbytes = (size_t)k * (size_t)n * 2;
  const int copies = (int)((cold_bytes + wbytes - 1) / wbytes);
  const int launches =
      copies > BENCH_MIN_LAUNCHES ? copies : BENCH_MIN_LAUNCHES;
  int64_t max_m = 1;
  for (int i = 0; i < nms; i++)
    max_m = ms[i] > max_m ? ms[i] : max_m;
  lt_ctx c = {.one = 1.0f, .zero = 0.0f, .ws_bytes = BENCH_LT_WORKSPACE};
  int r = CLI_FAIL;
  if (lt_alloc(&c, copies, wbytes, 0xc0b1a5ull, (size_t)max_m * (size_t)k * 2,
               0x5eedull, (size_t)max_m * (size_t)n * 2, 1, stream) != CLI_OK)
    goto done;
  for (int i = 0; i < nms; i++) {
    if (lt_time(&c, 0, k, n, ms[i], launches, reps, stream, &kn_us[i]) !=
            CLI_OK ||
        lt_time(&c, 1, k, n, ms[i], launches, reps, stream, &nk_us[i]) !=
            CLI_OK)
      goto done;
  }
  r = CLI_OK;
done:
  lt_free(&c);
  return r;
}

/* ---- FP8 W8A8 cuBLASLt --------------------------------------------------- */

/* y[M][n] = x[M][k] . W^T with W[n][k] row-major, E4M3 both. cuBLASLt's
 * FP8 kernels take only "TN" (both operands K-major): D (n x M, ld n) =
 * op(A) . B, A = W as (k x n, ld k) with op T, B = x as (k x M, ld k). */

static float e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(8.0f + m, e - 10);
  return (b & 0x80) ? -v : v;
}

/* y's first `rows` rows, first BENCH_FP8_CHECK_COLS columns against the
 * fp64 product of the decoded E4M3 values: relative L2 (INFINITY for
 * non-finite output). */
static int fp8_check(lt_ctx *c, int64_t k, int64_t n, int64_t rows,
                     trellis_dtype out, cudaStream_t stream, double *rel_l2) {
  const int64_t cols = n < BENCH_FP8_CHECK_COLS ? n : BENCH_FP8_CHECK_COLS;
  uint8_t *hw = NULL, *hx = NULL;
  uint16_t *hy = NULL;
  float *got = NULL, *ref = NULL, *fw = NULL, *fx = NULL, lut[256];
  int r = CLI_FAIL;
  BENCH_ALLOC(hw, (size_t)cols * (size_t)k);
  BENCH_ALLOC(hx, (size_t)rows * (size_t)k);
  BENCH_ALLOC(fw, (size_t)cols * (size_t)k);
  BENCH_ALLOC(fx, (size_t)rows * (size_t)k);
  BENCH_ALLOC(hy, (size_t)rows * (size_t)n);
  BENCH_ALLOC(got, (size_t)rows * (size_t)n);
  BENCH_ALLOC(ref, (size_t)rows * (size_t)cols);
  BENCH_CUDA(cudaMemsetAsync(c->y, 0xFF, (size_t)rows * (size_t)n * 2, stream));
  if (lt_enqueue(c, 0, stream) != CLI_OK)
    goto done;
  BENCH_CUDA(cudaMemcpyAsync(hw, c->w[0], (size_t)cols * (size_t)k,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaMemcpyAsync(hx, c->x, (size_t)rows * (size_t)k,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaMemcpyAsync(hy, c->y, (size_t)rows * (size_t)n * 2,
                             cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (int v = 0; v < 256; v++)
    lut[v] = e4m3_value((uint8_t)v);
  for (size_t i = 0; i < (size_t)cols * (size_t)k; i++)
    fw[i] = lut[hw[i]];
  for (size_t i = 0; i < (size_t)rows * (size_t)k; i++)
    fx[i] = lut[hx[i]];
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      double acc = 0.0;
      for (int64_t t = 0; t < k; t++)
        acc += (double)fx[i * k + t] * (double)fw[j * k + t];
      ref[i * cols + j] = (float)acc;
    }
  cli_to_f32(hy, out, (size_t)rows * (size_t)n, got);
  for (int64_t i = 0; i < rows; i++) /* the checked columns, packed */
    for (int64_t j = 0; j < cols; j++)
      got[i * cols + j] = got[i * n + j];
  cli_error_stats st = cli_compare(got, ref, (size_t)rows * (size_t)cols);
  *rel_l2 = st.nonfinite ? INFINITY : st.rel_l2;
  r = CLI_OK;
done:
  free(hw);
  free(hx);
  free(fw);
  free(fx);
  free(hy);
  free(got);
  free(ref);
  return r;
}

/* The descriptors of one rounded M with output dtype `out`, then up to
 * BENCH_FP8_ALGOS heuristic candidates. *count = 0 (and a reason in `why`)
 * when cuBLASLt has none. */
static int fp8_describe(lt_ctx *c, const float *one, int64_t k, int64_t n,
                        int64_t m, trellis_dtype out,
                        cublasLtMatmulHeuristicResult_t *heur, int *count,
                        const char **why) {
  return bench_lt_fp8_desc(c->h, one, k, n, m, out, c->ws_bytes, &c->l, heur,
                           BENCH_FP8_ALGOS, count, why);
}

/* One rounded M: fp16 output, else bf16; each candidate launched once
 * eagerly (one cuBLASLt refuses is left out), then timed; the fastest
 * kept, and with `check` set checked. */
static int fp8_time(lt_ctx *c, const float *one, int64_t k, int64_t n,
                    int64_t m, int launches, int reps, int check,
                    cudaStream_t stream, bench_fp8 *f, const char **why) {
  cublasLtMatmulHeuristicResult_t heur[BENCH_FP8_ALGOS];
  const trellis_dtype outs[2] = {TRELLIS_F16, TRELLIS_BF16};
  int count = 0, best = -1, r = CLI_FAIL;
  *why = "no algorithm";
  for (int o = 0; o < 2 && count == 0; o++) {
    lt_release(c);
    if (fp8_describe(c, one, k, n, m, outs[o], heur, &count, why) != CLI_OK)
      goto done;
    if (count > 0)
      f->out = outs[o];
  }
  for (int i = 0; i < count; i++) {
    double us = NAN;
    if (heur[i].state != CUBLAS_STATUS_SUCCESS)
      continue;
    c->algo = heur[i].algo;
    cublasStatus_t s = lt_matmul(c, 0, stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
      *why = cublasLtGetStatusName(s);
      (void)cudaGetLastError();
      continue;
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    if (bench_time_graph(lt_enqueue, c, launches, reps, stream, &us) != CLI_OK)
      goto done;
    f->algos++;
    if (best < 0 || us < f->us) {
      f->us = us;
      best = i;
    }
  }
  if (best < 0) { /* the caller notes it */
    r = CLI_OK;
    goto done;
  }
  c->algo = heur[best].algo;
  if (check) {
    const int64_t rows = m < BENCH_CHECK_ROWS ? m : BENCH_CHECK_ROWS;
    if (fp8_check(c, k, n, rows, f->out, stream, &f->rel_l2) != CLI_OK)
      goto done;
  }
  r = CLI_OK;
done:
  lt_release(c);
  return r;
}

int bench_fp8_shape(int64_t k, int64_t n, const int64_t *ms, int nms,
                    size_t cold_bytes, int reps, cudaStream_t stream,
                    bench_fp8 *fp8) {
  const size_t wbytes = (size_t)k * (size_t)n;
  const int copies = (int)((cold_bytes + wbytes - 1) / wbytes);
  const int launches =
      copies > BENCH_MIN_LAUNCHES ? copies : BENCH_MIN_LAUNCHES;
  const int64_t q = BENCH_FP8_M_MULTIPLE;
  const float host_one = 1.0f;
  int64_t max_m = q;
  for (int i = 0; i < nms; i++) {
    const int64_t m = (ms[i] + q - 1) / q * q;
    fp8[i] = (bench_fp8){.us = NAN, .m = m, .out = TRELLIS_F16, .rel_l2 = NAN};
    max_m = m > max_m ? m : max_m;
  }
  lt_ctx c = {.one = 1.0f, .zero = 0.0f, .ws_bytes = BENCH_LT_WORKSPACE};
  float *one = NULL;
  const char *why = NULL;
  int checked = 0, noted = 0, r = CLI_FAIL;
  if (lt_alloc(&c, copies, wbytes, 0xf8e4a3ull, (size_t)max_m * (size_t)k,
               0xf8f8ull, (size_t)max_m * (size_t)n * 2, 2, stream) != CLI_OK)
    goto done;
  BENCH_CUDA(cudaMalloc((void **)&one, sizeof *one));
  BENCH_CUDA(cudaMemcpyAsync(one, &host_one, sizeof host_one,
                             cudaMemcpyHostToDevice, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  for (int i = 0; i < nms; i++) {
    int same = -1;
    for (int j = 0; j < i && same < 0; j++)
      if (fp8[j].m == fp8[i].m)
        same = j;
    if (same >= 0) {
      fp8[i] = fp8[same];
      continue;
    }
    if (fp8_time(&c, one, k, n, fp8[i].m, launches, reps, !checked, stream,
                 &fp8[i], &why) != CLI_OK)
      goto done;
    if (isnan(fp8[i].us) && !noted) {
      fprintf(stderr,
              "trellis: bench: note: cuBLASLt has no FP8 (E4M3) algorithm "
              "for %lldx%lld M=%lld (%s): the FP8 column is n/a\n",
              (long long)k, (long long)n, (long long)fp8[i].m, why);
      noted = 1;
    }
    if (isnan(fp8[i].rel_l2))
      continue;
    checked = 1;
    if (!(fp8[i].rel_l2 <= BENCH_FP8_CHECK_TOL)) {
      cli_error("bench: FP8 peer %lldx%lld M=%lld: relative L2 %.2e against "
                "the CPU (limit %.0e): its times are left out",
                (long long)k, (long long)n, (long long)fp8[i].m, fp8[i].rel_l2,
                BENCH_FP8_CHECK_TOL);
      for (int j = 0; j < nms; j++) {
        fp8[j].us = NAN;
        fp8[j].rel_l2 = fp8[i].rel_l2;
      }
      break;
    }
  }
  r = CLI_OK;
done:
  lt_free(&c);
  cudaFree(one);
  return r;
}
