/* `trellis bench`: the GPU benchmark of issue 5 (method and targets in
 * PERFORMANCE.md). Shared types of the bench_*.c files:
 *   cmd_bench.c    options, the order of the work, exit code;
 *   bench_peers.c  device facts, the HBM read peak, FP16 cuBLASLt;
 *   bench_run.c    our layers: cold copies, check, graph/eager timing;
 *   bench_time.c   CUDA-graph and eager timing of a launch sequence;
 *   bench_report.c the table, CSV, JSON, the targets block, git commit.
 * bench_peers/run/time need CUDA; report is plain C (both builds). */
#ifndef TRELLIS_CLI_BENCH_H
#define TRELLIS_CLI_BENCH_H

#include "cli_util.h"

#include <stddef.h>
#include <stdint.h>

#define BENCH_MAX_LIST 64
#define BENCH_CHECK_ROWS 16   /* rows of y checked against the CPU */
#define BENCH_CHECK_TOL 2e-3  /* relative L2 */
#define BENCH_WARMUP 3        /* graph replays before timing, at least */
#define BENCH_WARMUP_MS 50.0  /* ... and this much GPU time (default) */
#define BENCH_MIN_LAUNCHES 20 /* L = max(copies, 20) launches per graph */
#define BENCH_COLD_MIN (256ull << 20) /* cold set >= max(256 MiB, 4 x L2) */
#define BENCH_LT_WORKSPACE (32ull << 20)
#define BENCH_READ_BYTES (2ull << 30) /* read-peak buffer */
#define BENCH_READ_REPS 20
#define BENCH_OVERHEAD_LAUNCHES 100 /* target 6 */
#define BENCH_BIG_LAYER 32e6        /* "layers >= 32 MB" of the targets */
#define BENCH_TIME_BUDGET_S 10.0 /* per row: fewer replays past this (rare) */

typedef struct bench_shape {
  int64_t k, n;
} bench_shape;

typedef struct bench_options {
  bench_shape shapes[BENCH_MAX_LIST];
  int nshapes;
  int64_t ms[BENCH_MAX_LIST];
  int nms;
  int bits[TRELLIS_MAX_BITS];
  int nbits;
  trellis_codebook cbs[3];
  int ncbs;
  int sweep, quick, reps;
  double warmup_ms; /* --warmup-ms: the timers' warm-up floor */
  uint32_t flags;   /* TRELLIS_PLAN_* from --force */
  const char *csv_path, *json_path;
} bench_options;

/* The machine and the run. */
typedef struct bench_env {
  char gpu[300]; /* "NVIDIA H200 (sm_90)" */
  int sm_count;
  size_t l2_bytes, mem_bytes;
  double read_peak_gbs; /* GB/s = 1e9 bytes/s */
  size_t cold_bytes;    /* max(256 MiB, 4 x L2) */
  int64_t max_m;        /* plan desc max_m: the largest M of the run */
  char date[32];        /* UTC, ISO 8601 */
  char commit[48];      /* short hash, or "unknown" */
} bench_env;

/* One measured row: (shape, M, bits, codebook). Times in microseconds per
 * launch; NAN where not measured. */
typedef struct bench_row {
  int64_t k, n, m;
  int bits;
  trellis_codebook cb;
  uint32_t flags;
  int sweep;
  trellis_path path;
  int copies, launches, replays;
  double weight_bytes; /* k*n*bits/8 */
  double graph_us, eager_us;
  double cublas_kn_us, cublas_nk_us; /* W[k,n] and W[n,k] row-major */
  double rel_l2;
  int check_rows, check_ok;
} bench_row;

/* Target 6: 100 launches in one graph. */
typedef struct bench_overhead {
  int measured;
  int64_t k, n;
  int bits;
  trellis_codebook cb;
  int copies, lrun_launches;
  double cycled_us; /* 100 launches cycling the cold copies, per launch */
  double single_us; /* 100 launches of copy 0's plan, per launch */
  double lrun_us;   /* the same layer's L-launch graph number (M = 1) */
  double eager_us;  /* its eager number */
} bench_overhead;

typedef struct bench_results {
  bench_row *rows;
  size_t count, cap;
  bench_overhead overhead;
  int failed_checks;
  int complete; /* 0 when an error stopped the run */
} bench_results;

enum { BENCH_NA = 0, BENCH_MET = 1, BENCH_MISSED = 2 };
typedef struct bench_target {
  int id;
  int status; /* BENCH_NA / MET / MISSED */
  char what[160];
  char detail[512];
} bench_target;
#define BENCH_TARGETS 6

/* ---- derived numbers (bench_report.c) ---------------------------------- */
double bench_row_gbs(const bench_row *r); /* weight GB/s */
double bench_row_pct(const bench_row *r, double peak_gbs);
double bench_row_tws(const bench_row *r);    /* T decoded weights/s */
double bench_row_cublas(const bench_row *r); /* better layout, or NAN */
const char *bench_row_cublas_layout(const bench_row *r); /* "kn"/"nk"/"" */
double bench_row_speedup(const bench_row *r); /* cuBLAS us / ours us */

/* ---- report (bench_report.c) ------------------------------------------- */
int bench_results_add(bench_results *res, const bench_row *row);
void bench_results_free(bench_results *res);
/* Date (UTC) and commit: $TRELLIS_COMMIT, else .git found from the working
 * directory or the executable upwards, else "unknown". */
void bench_stamp(bench_env *env);
void bench_print_headline(const bench_env *env, const bench_options *o);
void bench_print_table_header(const bench_options *o);
void bench_print_row(const bench_env *env, const bench_options *o,
                     const bench_row *r);
void bench_eval_targets(const bench_env *env, const bench_options *o,
                        const bench_results *res,
                        bench_target out[BENCH_TARGETS]);
void bench_print_targets(const bench_env *env,
                         const bench_target t[BENCH_TARGETS]);
int bench_write_csv(const char *path, const bench_env *env,
                    const bench_results *res);
int bench_write_json(const char *path, const bench_env *env,
                     const bench_options *o, const bench_results *res,
                     const bench_target t[BENCH_TARGETS]);

#ifdef TRELLIS_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

/* Checked calls: on failure print one line naming the call and `goto done`
 * (every function using them has a `done:` cleanup label and sets its result
 * only on success). */
#define BENCH_CUDA(call)                                                       \
  do {                                                                         \
    cudaError_t e_ = (call);                                                   \
    if (e_ != cudaSuccess) {                                                   \
      cli_error("cuda: %s: %s", #call, cudaGetErrorString(e_));                \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define BENCH_KERNEL(call)                                                     \
  do {                                                                         \
    int e_ = (call);                                                           \
    if (e_ != 0) {                                                             \
      cli_error("cuda: %s: %s", #call, cudaGetErrorString((cudaError_t)e_));   \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define BENCH_TRELLIS(call)                                                    \
  do {                                                                         \
    trellis_clear_error();                                                     \
    trellis_status s_ = (call);                                                \
    if (s_ != TRELLIS_OK) {                                                    \
      cli_lib_error(s_, #call);                                                \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define BENCH_LT(call)                                                         \
  do {                                                                         \
    cublasStatus_t s_ = (call);                                                \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
      cli_error("cuBLASLt: %s: %s", #call, cublasLtGetStatusName(s_));         \
      goto done;                                                               \
    }                                                                          \
  } while (0)
#define BENCH_ALLOC(ptr, count)                                                \
  do {                                                                         \
    size_t n_ = (size_t)(count);                                               \
    if (((ptr) = calloc(n_ ? n_ : 1, sizeof *(ptr))) == NULL) {                \
      cli_error("bench: out of host memory (%s)", #ptr);                       \
      goto done;                                                               \
    }                                                                          \
  } while (0)

/* ---- timing (bench_time.c) --------------------------------------------- */
/* Enqueues launch number `index` on `stream`; prints its own error line. */
typedef int (*bench_enqueue_fn)(void *ctx, int index, cudaStream_t stream);
/* Warm-up floor of both timers in GPU milliseconds (--warmup-ms; default
 * BENCH_WARMUP_MS): a CLI-wide setting, set once before any timing. */
void bench_time_set_warmup_ms(double ms);
/* Captures launches 0..launches-1 into one graph on `stream` (non-blocking),
 * replays it at least BENCH_WARMUP times and for at least the warm-up floor,
 * then `reps` times, each between two events; *us = median over replays of
 * elapsed / launches. */
int bench_time_graph(bench_enqueue_fn fn, void *ctx, int launches, int reps,
                     cudaStream_t stream, double *us);
/* The same launches issued eagerly between two events (untimed passes
 * first: at least one, for the warm-up floor); *us = median over `reps`
 * passes of elapsed / launches. */
int bench_time_eager(bench_enqueue_fn fn, void *ctx, int launches, int reps,
                     cudaStream_t stream, double *us);

/* ---- peers (bench_peers.c) --------------------------------------------- */
/* Name, SMs, L2, memory of the current device; cold_bytes. */
int bench_query_gpu(bench_env *env);
/* Median of BENCH_READ_REPS read-kernel launches over BENCH_READ_BYTES. */
int bench_read_peak(cudaStream_t stream, double *gbs);
/* FP16 cuBLASLt y[M,n] = x[M,k] . W (fp32 compute, fp16 out) for each M of
 * ms, with cold fp16 weight copies totalling >= cold_bytes, both layouts,
 * graph replay as for our rows: kn_us[i] / nk_us[i] per launch (NAN when
 * cuBLASLt offers no algorithm). */
int bench_cublas_shape(int64_t k, int64_t n, const int64_t *ms, int nms,
                       size_t cold_bytes, int reps, cudaStream_t stream,
                       double *kn_us, double *nk_us);

/* ---- ours (bench_run.c) ------------------------------------------------ */
/* One (shape, bits, codebook): cold copies and plans, then for each M of
 * o->ms the CPU check and the timings; rows are added to `res` and printed.
 * cublas_kn/nk hold the peers per M (index as o->ms). With `overhead` set,
 * also measures target 6 at M = 1 into res->overhead. */
int bench_run_config(const bench_options *o, const bench_env *env, int64_t k,
                     int64_t n, int bits, trellis_codebook cb,
                     const double *cublas_kn, const double *cublas_nk,
                     int overhead, cudaStream_t stream, bench_results *res);
#endif

#endif
