/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's shared types and functions (internal to trellis_bench):
 *   bench.c    the entry point and the order of the work;
 *   options.c  the command line;
 *   peers.c    device facts, the HBM read peak, FP16 cuBLASLt;
 *   layers.c   our layers: cold copies, check, graph/eager timing;
 *   timing.c   CUDA-graph and eager timing of a launch sequence;
 *   report.c   derived numbers, the headline and table, date and commit;
 *   targets.c  the targets (targets.json) and their evaluation;
 *   files.c    the CSV and JSON files.
 * peers, layers and timing need CUDA (built only then); the rest is plain
 * C. Method: bench/README.md. */
#ifndef BENCH_H
#define BENCH_H

#include "tools/cli.h"
#include "tools/measure.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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
#define BENCH_OVERHEAD_LAUNCHES 100 /* the launch-overhead graph */
#define BENCH_TIME_BUDGET_S 10.0 /* per row: fewer replays past this (rare) */
#define BENCH_MAX_TARGETS 32
/* The FP8 peer: cuBLASLt E4M3 x E4M3 needs m, n, k multiples of 16 (M is
 * rounded up), the "TN" layout and 16-byte aligned operands. */
#define BENCH_FP8_M_MULTIPLE 16
#define BENCH_FP8_ALGOS 4        /* heuristic candidates timed, fastest kept */
#define BENCH_FP8_CHECK_COLS 256 /* output columns checked against the CPU */
#define BENCH_FP8_CHECK_TOL 1e-2 /* relative L2: catches a wrong layout */

typedef struct bench_shape {
  int64_t k, n;
} bench_shape;

typedef struct bench_options {
  bench_shape shapes[BENCH_MAX_LIST];
  int nshapes;
  int64_t ms[BENCH_MAX_LIST];
  int nms;
  /* the rates: K = bits[i] (+ 1/2 where half[i]), in increasing order */
  int bits[2 * TRELLIS_MAX_BITS], half[2 * TRELLIS_MAX_BITS];
  int nbits;
  trellis_codebook cbs[BENCH_MAX_LIST];
  int ncbs;
  /* --pair: pair kinds on --rate-axis, layers of 256 x --orth sizes, with
   * the codebooks of cbs that pair (MCG, SQG_E4M3) */
  trellis_pair_kind pairs[5];
  int npairs;
  trellis_rate_axis rate_axis;
  int64_t orths[BENCH_MAX_LIST];
  int norths;
  int b12x; /* SQG or pair rows: the vs MCG column */
  int sweep, quick, reps;
  int with_generic; /* --with-generic: fused rows also timed forced generic */
  double warmup_ms; /* --warmup-ms: the timers' warm-up floor */
  uint32_t flags;   /* TRELLIS_PLAN_* from --force */
  const char *csv_path, *json_path;
  const char *targets_path; /* --targets, or NULL for the default file */
  /* --model: the decode-step benchmark (step_bench.c) */
  const char *model; /* a model directory or preset:NAME; NULL: layers */
  double model_bits; /* --bits of a preset: an average (e.g. 3.36) */
  int blocks;        /* --blocks of a preset, 0: the preset's */
  int head_bits;     /* --head-bits of a preset */
  int head_half;     /* ... + 1/2 (a half-integer rate, mul1) */
  int no_peers;      /* --no-peers: no FP16 / FP8 step */
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
  char commit[48];      /* $TRELLIS_COMMIT, the configured one, "unknown" */
} bench_env;

/* The FP8 W8A8 peer at one M (bench_fp8_shape): cuBLASLt, E4M3 weight
 * W[n,k] and activations, per-tensor scales 1.0, fp32 compute, fp16 out;
 * the activation quantisation is not timed. */
typedef struct bench_fp8 {
  double us;         /* per launch; NAN: no FP8 algorithm, or check failed */
  int64_t m;         /* the M it ran: M rounded up to BENCH_FP8_M_MULTIPLE */
  int algos;         /* heuristic algorithms timed (the fastest is kept) */
  trellis_dtype out; /* F16, or BF16 where cuBLASLt has no fp16 output */
  double rel_l2;     /* the shape's check against the CPU; NAN: none */
} bench_fp8;

/* One measured row: (shape, M, bits, codebook). Times in microseconds per
 * launch; NAN where not measured. */
typedef struct bench_row {
  int64_t k, n, m;
  int bits;
  int half; /* K = bits + 1/2: a half-integer rate (no target selects it) */
  trellis_codebook cb;
  uint32_t flags;
  int sweep;
  trellis_path path;
  int copies, launches, replays;
  double weight_bytes; /* k*n*bits/8 */
  double graph_us, eager_us;
  double cublas_kn_us, cublas_nk_us; /* W[k,n] and W[n,k] row-major */
  bench_fp8 fp8;
  double rel_l2;
  int check_rows, check_ok;
  /* --with-generic: the same launches with FORCE_GENERIC added (graph
   * time, checked like the row); a row whose path is not fused already
   * runs the generic launches and gets its own figures. */
  double generic_us, generic_rel_l2;
  int generic_ok;
  /* b12x formats: a pair (NONE: uniform) and its axis; mcg_us is the graph
   * time of the MCG row of the same shape, M and flags at K = the row's
   * bits per weight (uniform MCG run earlier in the same run), else NAN */
  trellis_pair_kind pair;
  trellis_rate_axis rate_axis;
  double mcg_us;
} bench_row;

/* BENCH_OVERHEAD_LAUNCHES launches in one graph. */
typedef struct bench_overhead {
  int measured;
  int64_t k, n;
  int bits;
  trellis_codebook cb;
  int copies, lrun_launches;
  double cycled_us; /* the launches cycling the cold copies, per launch */
  double single_us; /* the launches of copy 0's plan, per launch */
  double lrun_us;   /* the same layer's L-launch graph number (M = 1) */
  double eager_us;  /* its eager number */
} bench_overhead;

typedef struct bench_results {
  bench_row *rows;
  size_t count, cap;
  bench_overhead overhead;
  int failed_checks;
  int fp8_failed_checks; /* shapes whose FP8 peer failed its check */
  int complete;          /* 0 when an error stopped the run */
} bench_results;

/* ---- options (options.c) ----------------------------------------------- */
/* Parses argv (cli_parse conventions) into *o with the modes' defaults.
 * CLI_PARSED, CLI_HELP_SHOWN or CLI_USAGE (one line printed). */
int bench_parse_options(int argc, char **argv, bench_options *o);

/* The decode-step benchmark of o->model (step_bench.c): the exit code. */
int bench_step_run(const bench_options *o);

/* ---- derived numbers (report.c) ---------------------------------------- */
double bench_row_gbs(const bench_row *r); /* weight GB/s */
double bench_row_pct(const bench_row *r, double peak_gbs);
double bench_row_tws(const bench_row *r);    /* T decoded weights/s */
double bench_row_cublas(const bench_row *r); /* better layout, or NAN */
const char *bench_row_cublas_layout(const bench_row *r); /* "kn"/"nk"/"" */
double bench_row_speedup(const bench_row *r);    /* cuBLAS us / ours us */
double bench_row_vs_fp8(const bench_row *r);     /* FP8 us / ours us */
double bench_row_vs_generic(const bench_row *r); /* generic us / ours us */
double bench_row_vs_mcg(const bench_row *r);     /* MCG us / ours us */
/* Whether a row is of a b12x format (an SQG codebook or a pair): such rows
 * count for no target. */
int bench_row_b12x(const bench_row *r);
/* A row's K as text: "6", "2.5" (buf of at least 8 bytes). */
const char *bench_row_rate(const bench_row *r, char *buf, size_t size);
/* "mcg", "sqg_e4m3", "sqg_e4m3/P24n": the codebook and a pair's kind and
 * axis. */
const char *bench_row_format(const bench_row *r, char *buf, size_t size);
/* The plan flags --force names: one table for the parser and the reports
 * (bench_flags_name). BENCH_FLAG_KMAJOR is the benchmark's own: weights
 * uploaded in the k-major layout (TRELLIS_LAYOUT_KMAJOR), never passed to
 * a plan (bench_plan_flags). */
#define BENCH_FLAG_KMAJOR (1u << 30)
static inline uint32_t bench_plan_flags(uint32_t flags) {
  return flags & ~BENCH_FLAG_KMAJOR;
}
static inline trellis_layout bench_layout(uint32_t flags) {
  return flags & BENCH_FLAG_KMAJOR ? TRELLIS_LAYOUT_KMAJOR
                                   : TRELLIS_LAYOUT_LANES;
}
typedef struct bench_flag {
  uint32_t bit; /* TRELLIS_PLAN_* */
  const char *name;
} bench_flag;
extern const bench_flag bench_flags[];
extern const int bench_nflags;
/* "default", "generic", "generic+dense", ... in the table's order. */
const char *bench_flags_name(uint32_t flags, char *buf, size_t size);

/* ---- report (report.c) ------------------------------------------------- */
/* snprintf that truncates quietly (names, details): the buffers are sized
 * for normal use and a cut line is harmless. */
void bench_sfmt(char *out, size_t size, const char *fmt, ...) CLI_PRINTF(3, 4);
/* The commit the build was configured from, "" when unknown (commit.c,
 * generated by CMake). */
extern const char bench_configured_commit[];
int bench_results_add(bench_results *res, const bench_row *row);
void bench_results_free(bench_results *res);
/* Date (UTC) and commit: $TRELLIS_COMMIT, else the commit the build was
 * configured from (git describe), else "unknown". */
void bench_stamp(bench_env *env);
/* The first lines of a report: the command, version, commit and date, the
 * GPU, and the read peak measured in the run. */
void bench_print_env(const bench_env *env, const char *command);
void bench_print_headline(const bench_env *env, const bench_options *o);
void bench_print_table_header(const bench_options *o);
void bench_print_row(const bench_env *env, const bench_options *o,
                     const bench_row *r);

/* ---- targets (targets.c) ----------------------------------------------- */
/* How a target scores rows (targets.json "rule"). */
typedef enum bench_rule {
  BENCH_RULE_READ_PEAK,       /* weight GB/s >= pct % of the read peak */
  BENCH_RULE_FLOOR,           /* time <= max(floor / fraction, floor + slack) */
  BENCH_RULE_FASTER_CUBLAS,   /* time < cuBLAS */
  BENCH_RULE_CUBLAS_RATIO,    /* time <= ratio x cuBLAS */
  BENCH_RULE_DECODE_RATE,     /* weights/s >= min(pct % of peak, cap); and
                                 with monotonic >= the next bitrate's */
  BENCH_RULE_LAUNCH_OVERHEAD, /* overhead graph <= max(ratio x, + slack) */
  BENCH_RULE_FP8_RATIO,       /* time <= ratio x FP8 (rows with FP8) */
  BENCH_RULE_GENERIC_RATIO,   /* time <= ratio x forced generic (rows with
                                 --with-generic figures) */
  BENCH_RULE_GROWTH,          /* time <= ratio x time(from_m), same layer */
} bench_rule;

#define BENCH_TARGET_SHAPES 8

/* One target of targets.json: which rows it scores (forced rows never
 * count) and its limit. */
typedef struct bench_target_def {
  int id;      /* ids may repeat: a target scored by two rules */
  int stretch; /* a stretch goal, beyond the target of the same id */
  char what[160];
  bench_rule rule;
  /* The rows filter: bits (0: any), bits_min/bits_max (0: any), codebook
   * (a trellis_codebook, -1: any), m_min <= M <= m_max, weight bytes >=
   * min_bytes and < max_bytes (0: any), the layers shapes[0..nshapes-1]
   * (none: any). */
  int bits, bits_min, bits_max;
  int cb;
  int64_t m_min, m_max;
  double min_bytes, max_bytes;
  bench_shape shapes[BENCH_TARGET_SHAPES];
  int nshapes;
  /* The limit. */
  double pct, fraction, slack_us, ratio, cap_tweights;
  int64_t growth_from_m; /* FASTER_CUBLAS: also time(M)/time(this M); 0 */
  int64_t from_m;        /* GROWTH: the M compared with */
  int monotonic;         /* DECODE_RATE: not slower than the next bitrate */
} bench_target_def;

typedef struct bench_targets {
  char path[4096];  /* the file they came from */
  char source[160]; /* where the figures come from (printed) */
  int count;
  bench_target_def def[BENCH_MAX_TARGETS];
} bench_targets;

enum { BENCH_NA = 0, BENCH_MET = 1, BENCH_MISSED = 2 };
/* A target's verdict on a run. */
typedef struct bench_target {
  int id;
  int stretch;
  int status; /* BENCH_NA / MET / MISSED */
  char what[160];
  char detail[512];
} bench_target;

/* Reads the targets from `path`, or when NULL from the first file found of
 * <executable dir>/TRELLIS_BENCH_TARGETS_FROM_EXE (an installed tree) and
 * TRELLIS_BENCH_TARGETS (the source tree). CLI_OK, or CLI_FAIL with one line
 * naming the file. */
int bench_targets_load(const char *path, bench_targets *out);
/* Parses a targets document held in `text`; `path` names it in messages. */
int bench_targets_parse(const char *text, const char *path, bench_targets *out);
/* Verdicts out[0..defs->count-1] on the rows and overhead of `res`. */
void bench_eval_targets(const bench_env *env, const bench_options *o,
                        const bench_results *res, const bench_targets *defs,
                        bench_target *out);
void bench_print_targets(const bench_env *env, const bench_targets *defs,
                         const bench_target *t);
const char *bench_status_name(int status); /* "MET", "MISSED", "n/a" */

/* ---- files (files.c) --------------------------------------------------- */
/* A report file built in memory and written once complete
 * (tools/out_file.h: an existing file is replaced only by a whole new one,
 * never truncated or left half-written). bench_out_open: `f` takes the
 * text; `option` ("--csv") prefixes the messages. bench_out_close writes
 * it unless `f` saw an error or the writer set `failed`, and frees the
 * buffer either way. */
typedef struct bench_out {
  FILE *f;
  char *buf;
  size_t len;
  int failed;
  const char *option, *path;
} bench_out;
int bench_out_open(bench_out *out, const char *option, const char *path);
int bench_out_close(bench_out *out);
/* CSV fields (bench/files.c): a string quoted, its quotes doubled; a
 * number in `fmt`, empty where it is not finite (not measured). */
void bench_csv_str(FILE *f, const char *s);
void bench_csv_num(FILE *f, const char *fmt, double v);
int bench_write_csv(const char *path, const bench_env *env,
                    const bench_results *res);
int bench_write_json(const char *path, const bench_env *env,
                     const bench_options *o, const bench_results *res,
                     const bench_targets *defs, const bench_target *t);

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

/* ---- timing (timing.c) ------------------------------------------------- */
/* Enqueues launch number `index` on `stream`; prints its own error line. */
typedef int (*bench_enqueue_fn)(void *ctx, int index, cudaStream_t stream);
/* Warm-up floor of both timers in GPU milliseconds (--warmup-ms; default
 * BENCH_WARMUP_MS): a run-wide setting, set once before any timing. */
void bench_time_set_warmup_ms(double ms);
/* At least this many warm-up runs before every timing (0: the timers' own
 * minimum). The tensor-parallel step sets the floor to 0 and a count, so
 * that every rank issues the same number of collectives. */
void bench_time_set_warmup_runs(int runs);
/* Captures launches 0..launches-1 on `stream` into *exec; a failed launch
 * ends the capture and drops the partial graph (*exec stays NULL). */
int bench_capture(bench_enqueue_fn fn, void *ctx, int launches,
                  cudaStream_t stream, cudaGraphExec_t *exec);
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

/* ---- peers (peers.c) --------------------------------------------------- */
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
/* The FP8 peer for each M of ms into fp8[i]: cold E4M3 weight copies
 * totalling >= cold_bytes, W[n,k] row-major (cuBLASLt's A, transposed) and
 * x[M,k] row-major (B, not transposed), M rounded up to a multiple of 16
 * (each rounded M timed once), up to BENCH_FP8_ALGOS heuristic algorithms
 * timed by graph replay as our rows, the fastest kept; the first M that
 * runs is checked against the CPU (BENCH_FP8_CHECK_COLS columns, rel L2
 * <= BENCH_FP8_CHECK_TOL; on failure one line, the shape's times NAN). No
 * FP8 algorithm (a GPU before sm_89): a note on stderr, times NAN, CLI_OK.
 * CLI_FAIL only for a failed CUDA call. */
int bench_fp8_shape(int64_t k, int64_t n, const int64_t *ms, int nms,
                    size_t cold_bytes, int reps, cudaStream_t stream,
                    bench_fp8 *fp8);

/* The descriptors of one cuBLASLt GEMM of the peers, shared by the layer
 * and the decode-step benchmarks. */
typedef struct bench_lt_desc {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
} bench_lt_desc;
/* FP16 y[M,n] = x[M,k] W (fp32 compute, fp16 out): W[k,n] row-major, or
 * W[n,k] row-major when `transposed`; up to `want` heuristic candidates
 * for a workspace of `ws` bytes into heur[0..*count-1]. Release *l with
 * bench_lt_desc_release whatever the result. CLI_FAIL (one line) for a
 * failed cuBLASLt call. */
int bench_lt_fp16_desc(cublasLtHandle_t h, int transposed, int64_t k, int64_t n,
                       int64_t m, uint64_t ws, bench_lt_desc *l,
                       cublasLtMatmulHeuristicResult_t *heur, int want,
                       int *count);
/* FP8 W8A8 (the FP8 peer's TN layout and scale pointers `one`, a device
 * fp32 1.0) with output `out` (F16 or BF16); *count = 0 and a reason in
 * *why when cuBLASLt has no algorithm (a GPU without FP8). */
int bench_lt_fp8_desc(cublasLtHandle_t h, const float *one, int64_t k,
                      int64_t n, int64_t m, trellis_dtype out, uint64_t ws,
                      bench_lt_desc *l, cublasLtMatmulHeuristicResult_t *heur,
                      int want, int *count, const char **why);
void bench_lt_desc_release(bench_lt_desc *l);

/* ---- ours (layers.c) --------------------------------------------------- */
/* One (shape, bits, codebook): cold copies and plans, then for each M of
 * o->ms the CPU check and the timings; rows are added to `res` and printed.
 * cublas_kn/nk and fp8 hold the peers per M (index as o->ms). With
 * o->with_generic, fused rows are also timed with FORCE_GENERIC added (a
 * second set of plans on the same weights). With `overhead` set,
 * also measures the launch-overhead graphs at M = 1 into res->overhead. */
int bench_run_config(const bench_options *o, const bench_env *env, int64_t k,
                     int64_t n, int bits, int half, trellis_codebook cb,
                     const double *cublas_kn, const double *cublas_nk,
                     const bench_fp8 *fp8, int overhead, cudaStream_t stream,
                     bench_results *res);
/* The same for a pair of `kind` on o->rate_axis with the other axis `orth`
 * (no cuBLAS or FP8 peers). */
int bench_run_pair(const bench_options *o, const bench_env *env, int64_t orth,
                   trellis_pair_kind kind, trellis_codebook cb,
                   cudaStream_t stream, bench_results *res);
#endif

#endif
