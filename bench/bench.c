/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's entry point and the order of the work: device facts and
 * the HBM read peak, then per shape FP16 and FP8 cuBLASLt and our layer for
 * each (bits, codebook) and M, then the targets block, CSV and JSON. */
#include "bench.h"
#include "bench_main.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRELLIS_HAVE_CUDA

/* The launch-overhead graph runs on the first shape, with K6/MCG when it
 * is run. */
static void overhead_config(const bench_options *o, int *bits,
                            trellis_codebook *cb) {
  *bits = o->bits[0];
  *cb = o->cbs[0];
  for (int i = 0; i < o->nbits; i++)
    for (int j = 0; j < o->ncbs; j++)
      if (o->bits[i] == 6 && !o->half[i] && o->cbs[j] == TRELLIS_CB_MCG) {
        *bits = 6;
        *cb = TRELLIS_CB_MCG;
      }
}

/* --pair: per orth size, the uniform MCG layer at each pair's bits per
 * weight (the vs MCG reference, once per K), then the pairs with each
 * codebook that pairs. */
static int run_pairs(const bench_options *o, const bench_env *env,
                     cudaStream_t stream, bench_results *res) {
  for (int s = 0; s < o->norths; s++) {
    const int64_t orth = o->orths[s];
    const int64_t k = o->rate_axis == TRELLIS_RATE_AXIS_N ? orth : 256;
    const int64_t n = o->rate_axis == TRELLIS_RATE_AXIS_N ? 256 : orth;
    int done_bits = 0; /* bit K set: the MCG K row ran */
    for (int i = 0; i < o->npairs; i++) {
      const int sum = (o->pairs[i] >> 4) + (o->pairs[i] & 15);
      if (sum % 2 || (done_bits >> (sum / 2)) & 1)
        continue;
      done_bits |= 1 << (sum / 2);
      if (bench_run_config(o, env, k, n, sum / 2, 0, TRELLIS_CB_MCG, NULL, NULL,
                           NULL, 0, stream, res) != CLI_OK)
        return CLI_FAIL;
    }
    for (int i = 0; i < o->npairs; i++)
      for (int c = 0; c < o->ncbs; c++) {
        const trellis_codebook cb = o->cbs[c];
        if (!cli_codebook_pairs(cb))
          continue; /* the codebooks that pair (MCG, SQG_E4M3) */
        if (bench_run_pair(o, env, orth, o->pairs[i], cb, stream, res) !=
            CLI_OK)
          return CLI_FAIL;
      }
  }
  return CLI_OK;
}

static int bench_run(const bench_options *o, const bench_targets *defs) {
  bench_env env;
  bench_results res;
  bench_target targets[BENCH_MAX_TARGETS];
  cudaStream_t stream = NULL;
  double *kn = NULL, *nk = NULL;
  bench_fp8 *fp8 = NULL;
  int r = CLI_FAIL, started = 0;
  memset(&env, 0, sizeof env);
  memset(&res, 0, sizeof res);

  if (trellis_cuda_device_count() <= 0) {
    cli_error("bench: " CLI_NO_CUDA_DEVICE);
    return CLI_FAIL;
  }
  bench_stamp(&env);
  env.max_m = 1;
  for (int i = 0; i < o->nms; i++)
    env.max_m = o->ms[i] > env.max_m ? o->ms[i] : env.max_m;
  int ov_bits;
  trellis_codebook ov_cb;
  overhead_config(o, &ov_bits, &ov_cb);

  bench_time_set_warmup_ms(o->warmup_ms);
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  if (bench_query_gpu(&env) != CLI_OK ||
      bench_read_peak(stream, &env.read_peak_gbs) != CLI_OK)
    goto done;
  bench_print_headline(&env, o);
  bench_print_table_header(o);
  started = 1;
  BENCH_ALLOC(kn, o->nms);
  BENCH_ALLOC(nk, o->nms);
  BENCH_ALLOC(fp8, o->nms);
  for (int s = 0; s < o->nshapes; s++) {
    const int64_t k = o->shapes[s].k, n = o->shapes[s].n;
    if (bench_cublas_shape(k, n, o->ms, o->nms, env.cold_bytes, o->reps, stream,
                           kn, nk) != CLI_OK ||
        bench_fp8_shape(k, n, o->ms, o->nms, env.cold_bytes, o->reps, stream,
                        fp8) != CLI_OK)
      goto done;
    for (int i = 0; i < o->nms; i++)
      if (!isnan(fp8[i].rel_l2) && !(fp8[i].rel_l2 <= BENCH_FP8_CHECK_TOL)) {
        res.fp8_failed_checks++;
        break;
      }
    for (int bi = 0; bi < o->nbits; bi++)
      for (int ci = 0; ci < o->ncbs; ci++) {
        const int bits = o->bits[bi], half = o->half[bi];
        const trellis_codebook cb = o->cbs[ci];
        if (!trellis_codebook_rate_valid(cb, bits, half))
          continue; /* a codebook outside its rates (SQG K, half: mul1) */
        const int overhead = s == 0 && !res.overhead.measured &&
                             bits == ov_bits && !half && cb == ov_cb;
        if (bench_run_config(o, &env, k, n, bits, half, cb, kn, nk, fp8,
                             overhead, stream, &res) != CLI_OK)
          goto done;
      }
  }
  if (run_pairs(o, &env, stream, &res) != CLI_OK)
    goto done;
  r = CLI_OK;
done:
  if (started) {
    res.complete = r == CLI_OK;
    bench_eval_targets(&env, o, &res, defs, targets);
    if (r == CLI_OK)
      bench_print_targets(&env, defs, targets);
    else
      printf("\n(incomplete run: %zu rows measured before the error)\n",
             res.count);
    /* Files get what was measured, even after an error. */
    if (o->csv_path && bench_write_csv(o->csv_path, &env, &res) != CLI_OK)
      r = CLI_FAIL;
    if (o->json_path &&
        bench_write_json(o->json_path, &env, o, &res, defs, targets) != CLI_OK)
      r = CLI_FAIL;
  }
  if (r == CLI_OK && res.failed_checks) {
    cli_error("bench: %d row%s failed the check against the CPU reference",
              res.failed_checks, res.failed_checks == 1 ? "" : "s");
    r = CLI_FAIL;
  }
  if (r == CLI_OK && res.fp8_failed_checks) {
    cli_error("bench: the FP8 peer failed its check against the CPU on %d "
              "shape%s",
              res.fp8_failed_checks, res.fp8_failed_checks == 1 ? "" : "s");
    r = CLI_FAIL;
  }
  free(kn);
  free(nk);
  free(fp8);
  if (stream)
    cudaStreamDestroy(stream);
  bench_results_free(&res);
  return r;
}

int bench_cublas_us(int64_t k, int64_t n, int64_t m, double *us) {
  cudaStream_t s = NULL;
  double kn = NAN, nk = NAN;
  int r = CLI_FAIL;
  BENCH_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (bench_cublas_shape(k, n, &m, 1, BENCH_COLD_MIN, 20, s, &kn, &nk) !=
      CLI_OK)
    goto done;
  *us = isnan(kn) ? nk : (isnan(nk) ? kn : fmin(kn, nk));
  r = CLI_OK;
done:
  if (s)
    cudaStreamDestroy(s);
  return r;
}

#else /* CPU-only build: the benchmark only explains itself. */

static int bench_run(const bench_options *o, const bench_targets *defs) {
  (void)o, (void)defs;
  cli_error("bench: " CLI_NO_CUDA_BUILD " (the benchmark needs "
            "a GPU build: configure with -DTRELLIS_CUDA=ON)");
  return CLI_USAGE;
}

int bench_cublas_us(int64_t k, int64_t n, int64_t m, double *us) {
  (void)k, (void)n, (void)m, (void)us;
  cli_error("bench: " CLI_NO_CUDA_BUILD);
  return CLI_FAIL;
}

#endif

int bench_main(int argc, char **argv) {
  bench_options o;
  int r = bench_parse_options(argc, argv, &o);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);
  if (o.model)
    return bench_step_run(&o);
  bench_targets *defs = malloc(sizeof *defs);
  if (defs == NULL) {
    cli_error("bench: out of host memory (targets)");
    return CLI_FAIL;
  }
  r = bench_targets_load(o.targets_path, defs);
  if (r == CLI_OK)
    r = bench_run(&o, defs);
  free(defs);
  return r;
}
