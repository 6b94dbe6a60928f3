/* SPDX-License-Identifier: Apache-2.0 */
/* Timing, CPU reference and accuracy helpers (see measure.h). */
#include "tools/measure.h"
#include "tools/cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double cli_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *values, int count) {
  if (count <= 0)
    return 0.0;
  qsort(values, (size_t)count, sizeof *values, cmp_double);
  if (count % 2)
    return values[count / 2];
  return 0.5 * (values[count / 2 - 1] + values[count / 2]);
}

int cli_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int cli_cpu_threads(const trellis_weight *w, int requested, char *desc,
                    size_t size) {
  int used = trellis_cpu_forward_threads(w, requested);
  if (requested > used)
    snprintf(desc, size,
             "%d thread%s; --threads %d asked: at most 256 run, one per 16 "
             "columns of n = %lld",
             used, used == 1 ? "" : "s", requested, (long long)w->n);
  else
    snprintf(desc, size, "%d thread%s", used, used == 1 ? "" : "s");
  return used;
}

int cli_cpu_forward(const trellis_weight *w, const void *x, trellis_dtype xd,
                    int64_t m, void *y, trellis_dtype yd, int threads) {
  size_t ws_bytes = trellis_cpu_workspace_size(w, m, threads);
  void *ws = ws_bytes ? malloc(ws_bytes) : NULL;
  if (ws_bytes && ws == NULL) {
    cli_error("cpu forward: cannot allocate %zu bytes of workspace", ws_bytes);
    return CLI_FAIL;
  }
  trellis_clear_error();
  trellis_status st =
      trellis_cpu_forward(w, x, xd, m, y, yd, ws, ws_bytes, threads);
  free(ws);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, "cpu forward");
}

void cli_to_f32(const void *src, trellis_dtype dt, size_t count, float *dst) {
  const uint16_t *h = src;
  switch (dt) {
  case TRELLIS_F16:
    for (size_t i = 0; i < count; i++)
      dst[i] = trellis_f16_to_f32(h[i]);
    break;
  case TRELLIS_BF16:
    for (size_t i = 0; i < count; i++)
      dst[i] = trellis_bf16_to_f32(h[i]);
    break;
  case TRELLIS_F32:
    memcpy(dst, src, count * sizeof(float));
    break;
  }
}

cli_error_stats cli_compare(const float *got, const float *ref, size_t count) {
  cli_error_stats s = {0};
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < count; i++) {
    double g = got[i], r = ref[i], d = fabs(g - r);
    if (!isfinite(g)) {
      s.nonfinite++;
      continue;
    }
    num += d * d;
    den += r * r;
    if (d > s.max_abs)
      s.max_abs = d;
    if (fabs(r) > s.max_ref)
      s.max_ref = fabs(r);
  }
  s.rel_l2 = den > 0.0 ? sqrt(num / den) : sqrt(num);
  s.max_rel = s.max_ref > 0.0 ? s.max_abs / s.max_ref : s.max_abs;
  if (s.nonfinite) /* never let NaN or inf pass a check */
    s.rel_l2 = s.max_rel = INFINITY;
  return s;
}
