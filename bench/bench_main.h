/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's entry points, for the programs that run it:
 * `trellis-bench` (bench/main.c) and the `trellis bench` subcommand of the
 * CLI, which behave the same. Part of the trellis_bench library, never of
 * libtrellis. */
#ifndef BENCH_MAIN_H
#define BENCH_MAIN_H

#include <stdint.h>

/* Runs the benchmark: argv[0] is the command's name in messages ("bench"),
 * argv[1..] its options (see `trellis bench --help`). Returns the exit code:
 * 0 when every row passed its check, 1 when a check or a call failed, 2 for
 * a bad command line or a build without CUDA. */
int bench_main(int argc, char **argv);

/* FP16 cuBLASLt y[m,n] = x[m,k] W timed as the benchmark times its peers
 * (cold weight copies, graph replay, 20 replays): the faster weight layout's
 * microseconds per launch in *us (NAN when cuBLASLt has no algorithm).
 * Returns 0, or 1 after printing one line (also in a build without CUDA). */
int bench_cublas_us(int64_t k, int64_t n, int64_t m, double *us);

#endif
