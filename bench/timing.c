/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's timing of a launch sequence, by CUDA-graph replay and
 * eagerly (cudaEvents around each replay or pass; medians). */
#include "bench.h"

#include "cuda/direct_timeline.h" /* records only with TRL_DIRECT_TIMELINE=1 */

#include <stdio.h>
#include <stdlib.h>

static double warmup_floor_ms = BENCH_WARMUP_MS;
static int warmup_runs = 0;
void bench_time_set_warmup_ms(double ms) { warmup_floor_ms = ms; }
void bench_time_set_warmup_runs(int runs) { warmup_runs = runs; }

/* One graph replay (exec) or eager pass (fn, launches) between the two
 * events; *ms receives its GPU time. */
static int timed_run(cudaGraphExec_t exec, bench_enqueue_fn fn, void *ctx,
                     int launches, cudaStream_t stream, cudaEvent_t *ev,
                     float *ms) {
  int r = CLI_FAIL;
  BENCH_CUDA(cudaEventRecord(ev[0], stream));
  if (exec)
    BENCH_CUDA(cudaGraphLaunch(exec, stream));
  else
    for (int i = 0; i < launches; i++)
      if (fn(ctx, i, stream) != CLI_OK)
        goto done;
  BENCH_CUDA(cudaEventRecord(ev[1], stream));
  BENCH_CUDA(cudaEventSynchronize(ev[1]));
  BENCH_CUDA(cudaEventElapsedTime(ms, ev[0], ev[1]));
  r = CLI_OK;
done:
  return r;
}

/* With $TRELLIS_TIMELINE_OUT set: one more replay of exec (or the first
 * unit of fn: one copy of a step) whose register-direct CTAs' records are
 * appended to that file, a "# replay" line (its time) and one line of
 * words per record (bench/README.md, "Timeline"). A build without the
 * hook writes a line that says so. */
static int timeline_replay(cudaGraphExec_t exec, bench_enqueue_fn fn, void *ctx,
                           cudaStream_t stream, cudaEvent_t *ev) {
  const char *path = getenv("TRELLIS_TIMELINE_OUT");
  static unsigned long long rec[TRL_TIMELINE_WORDS * (size_t)TRL_TIMELINE_CAP];
  static int replays;
  if (!path)
    return CLI_OK;
  FILE *f = fopen(path, "a");
  if (!f) {
    cli_error("TRELLIS_TIMELINE_OUT: cannot open %s", path);
    return CLI_FAIL;
  }
  float ms = 0.0f;
  int count = 0, r = CLI_FAIL;
  if (trl_direct_timeline_reset() != 0) {
    fprintf(f, "# no timeline: a build without TRL_DIRECT_TIMELINE=1\n");
    r = CLI_OK;
  } else if (timed_run(exec, fn, ctx, 1, stream, ev, &ms) == CLI_OK &&
             trl_direct_timeline_read(rec, TRL_TIMELINE_CAP, &count) == 0) {
    fprintf(f, "# replay %d: %.3f us, %d records\n", ++replays, 1e3 * ms,
            count);
    for (int i = 0; i < count; i++)
      for (int w = 0; w < TRL_TIMELINE_WORDS; w++)
        fprintf(f, "%llu%c", rec[(size_t)i * TRL_TIMELINE_WORDS + w],
                w + 1 < TRL_TIMELINE_WORDS ? ' ' : '\n');
    r = CLI_OK;
  }
  fclose(f);
  return r;
}

/* Warm-up, then `reps` timed runs of a graph replay (exec) or an eager
 * pass (fn, launches); *us receives the median per launch. Warm-up by
 * count (at least min_warm runs) and by time: a row that follows an idle
 * GPU (the CPU reference runs between layers) starts at a low clock. */
static int warm_and_time(cudaGraphExec_t exec, bench_enqueue_fn fn, void *ctx,
                         int launches, int reps, int min_warm,
                         cudaStream_t stream, double *us) {
  cudaEvent_t ev[2] = {NULL, NULL};
  double *t = NULL;
  int r = CLI_FAIL;
  BENCH_ALLOC(t, reps);
  BENCH_CUDA(cudaEventCreate(&ev[0]));
  BENCH_CUDA(cudaEventCreate(&ev[1]));
  double warm_ms = 0.0;
  if (min_warm < warmup_runs)
    min_warm = warmup_runs;
  for (int i = 0; i < min_warm || warm_ms < warmup_floor_ms; i++) {
    float ms = 0.0f;
    if (timed_run(exec, fn, ctx, launches, stream, ev, &ms) != CLI_OK)
      goto done;
    warm_ms += (double)ms;
  }
  for (int i = 0; i < reps; i++) {
    float ms = 0.0f;
    if (timed_run(exec, fn, ctx, launches, stream, ev, &ms) != CLI_OK)
      goto done;
    t[i] = 1e3 * (double)ms / launches;
  }
  *us = cli_median(t, reps);
  r = timeline_replay(exec, fn, ctx, stream, ev);
done:
  for (int i = 0; i < 2; i++)
    if (ev[i])
      cudaEventDestroy(ev[i]);
  free(t);
  return r;
}

int bench_capture(bench_enqueue_fn fn, void *ctx, int launches,
                  cudaStream_t stream, cudaGraphExec_t *exec) {
  cudaGraph_t graph = NULL;
  int r = CLI_FAIL, capturing = 0;
  *exec = NULL;
  if (getenv("TRELLIS_TIMELINE_OUT")) /* the buffer a capture records */
    (void)trl_direct_timeline_reset();
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  capturing = 1;
  for (int i = 0; i < launches; i++)
    if (fn(ctx, i, stream) != CLI_OK)
      goto done;
  capturing = 0;
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(exec, graph, 0));
  r = CLI_OK;
done:
  if (capturing) { /* a launch failed mid-capture: end it, drop the graph */
    cudaGraph_t partial = NULL;
    if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial)
      cudaGraphDestroy(partial);
    (void)cudaGetLastError();
  }
  if (graph)
    cudaGraphDestroy(graph);
  return r;
}

int bench_time_graph(bench_enqueue_fn fn, void *ctx, int launches, int reps,
                     cudaStream_t stream, double *us) {
  cudaGraphExec_t exec = NULL;
  int r = bench_capture(fn, ctx, launches, stream, &exec);
  if (r == CLI_OK)
    r = warm_and_time(exec, NULL, NULL, launches, reps, BENCH_WARMUP, stream,
                      us);
  if (exec)
    cudaGraphExecDestroy(exec);
  return r;
}

int bench_time_eager(bench_enqueue_fn fn, void *ctx, int launches, int reps,
                     cudaStream_t stream, double *us) {
  return warm_and_time(NULL, fn, ctx, launches, reps, 1, stream, us);
}
