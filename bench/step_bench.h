/* SPDX-License-Identifier: Apache-2.0 */
/* The parts of `trellis bench --model` (step_bench.c) that the
 * tensor-parallel step (tp_step.c) runs on every rank: our step timed and
 * checked, the FP16 and FP8 cuBLASLt peers, the table. With a model's
 * step_tp set, every collective and every decision that changes them is
 * taken alike on all ranks (step_tp.agree_min). */
#ifndef BENCH_STEP_BENCH_H
#define BENCH_STEP_BENCH_H

#include "bench.h"
#include "step.h"

#define STEP_HEADROOM (2ull << 30) /* device memory a peer leaves free */

/* One m of the run. Times in microseconds per step; NAN: not measured. */
typedef struct step_row {
  int64_t m;
  double us[3]; /* eager, FULL, PIECEWISE */
  int ok[3];
  char detail[3][200];
  double kind_us[STEP_KINDS];
  double fp16_us, fp8_us;
  int64_t fp8_m;
} step_row;

/* A peer's step: FP16 (W[n,k]) or FP8 W8A8 cuBLASLt layers. */
typedef struct peer_result {
  int pool;   /* distinct blocks held (blocks: the whole model) */
  int copies; /* cycled copies of what is held */
  double weight_bytes;
  const char *note; /* why not measured, or NULL */
} peer_result;

#ifdef TRELLIS_HAVE_CUDA
/* Our step: the engine of `copies` copies, for each m of o->ms (rows[j],
 * rows[j].m set) the FULL and PIECEWISE graphs, each mode's check against
 * the eager step and its time, each layer kind's time. With `dump`, first
 * the outputs of the eager step at m: dump[j * count + i] receives layer i's
 * m x n fp16 output (malloc'd). The engine's statistics in *stats. */
int step_bench_ours(const bench_options *o, const step_model *model, int copies,
                    cudaStream_t stream, step_row *rows, size_t *mem_used,
                    step_engine *stats, uint16_t **dump);
/* A peer's FULL step at every m into rows[].fp16_us or fp8_us. */
int step_bench_peer(const bench_options *o, const bench_env *env,
                    const step_model *model, int fp8, cudaStream_t stream,
                    step_row *rows, peer_result *res);
/* The table of the rows, per-kind times, memory and peers. */
void step_bench_print(const bench_env *env, const bench_options *o,
                      const step_model *model, const step_row *rows,
                      const step_engine *st, size_t mem_used,
                      const peer_result *p16, const peer_result *p8);
#endif

#endif
