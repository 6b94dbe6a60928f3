/* Helpers shared by the `trellis` subcommands.
 *
 * Error convention: every helper that fails prints exactly ONE line to stderr
 * ("trellis: <what>: <why>", naming the file, tensor or argument) and returns
 * a non-zero exit code, so callers only propagate the code. */
#ifndef TRELLIS_CLI_UTIL_H
#define TRELLIS_CLI_UTIL_H

#include "io/npy.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* Exit codes. */
#define CLI_OK 0
#define CLI_FAIL 1  /* the request was valid but could not be done */
#define CLI_USAGE 2 /* bad command line */

/* Subcommands (one file each). argv[0] is the subcommand's name. */
int cmd_info(int argc, char **argv);
int cmd_decode(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* ---- errors ------------------------------------------------------------ */

/* Prints "trellis: <message>" as one line on stderr (newlines in the message
 * become spaces). */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* Prints "trellis: <context>: <library detail>" for a failed library call
 * and returns CLI_FAIL. The context is left out when the detail already
 * names it. */
int cli_lib_error(trellis_status status, const char *context);

/* ---- command-line options ---------------------------------------------- */

typedef struct cli_option {
  const char *name;   /* "--output" */
  const char **value; /* receives the value; NULL for a flag */
  int *flag;          /* set to 1 for a flag; NULL for a valued option */
} cli_option;

/* Result of cli_parse besides CLI_USAGE. */
#define CLI_PARSED 0
#define CLI_HELP_SHOWN (-1)

/* Parses argv[1..] into options ("--name value" or "--name=value") and
 * positionals. "--help"/"-h" prints `usage` to stdout and returns
 * CLI_HELP_SHOWN. Exactly `npos` positionals are required; `pos_names` names
 * them for the error message. Returns CLI_PARSED or CLI_USAGE. */
int cli_parse(int argc, char **argv, const char *usage, const cli_option *opts,
              size_t nopts, const char **pos, const char *const *pos_names,
              int npos);
/* Exit code for a non-CLI_PARSED parse result. */
int cli_parse_exit(int parse_result);

/* Parses a positive integer option value; prints an error naming `option`. */
int cli_parse_int(const char *option, const char *text, long min, long max,
                  long *out);

/* ---- models and layers -------------------------------------------------- */

/* Opens PATH (a .safetensors file or a model directory) and finds LAYER. On
 * success *model must be closed with trellis_model_close(). */
int cli_open_layer(const char *path, const char *layer_name,
                   trellis_model **model, trellis_layer *layer);

/* ---- .npy --------------------------------------------------------------- */

int cli_read_npy(const char *path, trellis_npy *out);
int cli_write_npy(const char *path, trellis_dtype dtype, int ndim,
                  const int64_t *shape, const void *data);

/* ---- devices --------------------------------------------------------------
 */

typedef enum cli_device { CLI_DEV_AUTO, CLI_DEV_CPU, CLI_DEV_CUDA } cli_device;

/* Parses --device; prints an error naming the option on a bad value. */
int cli_parse_device(const char *text, cli_device *out);
/* Resolves auto to cuda or cpu; checks that cuda is usable (else an error
 * line naming --device and CLI_FAIL). */
int cli_resolve_device(cli_device requested, cli_device *out);

/* CPU forward with its own workspace (threads: 0 = one per core). */
int cli_cpu_forward(const trellis_weight *w, const void *x, trellis_dtype xd,
                    int64_t m, void *y, trellis_dtype yd, int threads);
/* Number of online CPU cores (at least 1). */
int cli_cpu_count(void);

/* GPU helpers (cli_cuda.c; stubs in a CPU-only build). A cli_gpu holds a
 * device copy of one weight and a prepared plan for up to max_m rows. */
typedef struct cli_gpu cli_gpu;

/* Fills `out` with e.g. "NVIDIA H200 (sm_90)". */
int cli_gpu_device_name(char *out, size_t size);
int cli_gpu_open(const trellis_weight *host, int64_t max_m,
                 trellis_dtype x_dtype, trellis_dtype y_dtype, cli_gpu **out);
/* Path the plan takes for m rows (TRELLIS_PATH_NONE on error, printed). */
trellis_path cli_gpu_path(const cli_gpu *g, int64_t m);
/* y = layer(x) for m rows; x and y are host memory. When reps > 0 the run is
 * then repeated `reps` times and the median time per run (seconds, measured
 * with CUDA events) is stored in *median_s. */
int cli_gpu_forward(cli_gpu *g, const void *x, int64_t m, void *y, int reps,
                    double *median_s);
void cli_gpu_close(cli_gpu *g);

/* ---- numbers ------------------------------------------------------------ */

double cli_now(void); /* monotonic seconds */
double cli_median(double *values, int count);

/* Converts `count` elements of dtype `dt` to float. */
void cli_to_f32(const void *src, trellis_dtype dt, size_t count, float *dst);

/* Error metrics of `got` against `ref` (both f32). */
typedef struct cli_error_stats {
  double rel_l2;    /* ||got - ref|| / ||ref|| */
  double max_abs;   /* max |got - ref| */
  double max_ref;   /* max |ref| */
  double max_rel;   /* max_abs / max_ref */
  size_t nonfinite; /* non-finite values in got */
} cli_error_stats;
cli_error_stats cli_compare(const float *got, const float *ref, size_t count);

/* Deterministic RNG (splitmix64). */
typedef struct cli_rng {
  uint64_t state;
} cli_rng;
uint64_t cli_rng_next(cli_rng *r);
double cli_rng_uniform(cli_rng *r); /* [0, 1) */
double cli_rng_normal(cli_rng *r);  /* N(0, 1) */

#endif
