/* SPDX-License-Identifier: Apache-2.0 */
/* Timing, the CPU reference and accuracy figures, as the `trellis` and
 * `trellis-bench` programs report them. Failing helpers print one line (see
 * cli.h) and return CLI_FAIL. */
#ifndef TOOLS_MEASURE_H
#define TOOLS_MEASURE_H

#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

double cli_now(void); /* monotonic seconds */
/* Median of `count` values (sorts them in place); 0 for none. */
double cli_median(double *values, int count);

/* Number of online CPU cores (at least 1). */
int cli_cpu_count(void);
/* The threads trellis_cpu_forward runs on `w` for `requested` (0 = one per
 * core; it runs at most 256, and one per 16 output columns), and in `desc`
 * the tool's words for it: "8 threads", or when fewer run than asked
 * "8 threads; --threads 4096 asked: at most 256 run, one per 16 columns of
 * n = 128". */
int cli_cpu_threads(const trellis_weight *w, int requested, char *desc,
                    size_t size);
/* CPU forward with its own workspace (threads: 0 = one per core). */
int cli_cpu_forward(const trellis_weight *w, const void *x, trellis_dtype xd,
                    int64_t m, void *y, trellis_dtype yd, int threads);

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

#endif
