/* SPDX-License-Identifier: Apache-2.0 */
/* trellis-tp-step: the decode step of a model with tensor parallelism, one
 * rank per GPU (one thread each, communicators from ncclCommInitAll): q, k,
 * v, q_b, gate, up, gate_up and the head column-parallel, o and down
 * row-parallel with an NCCL all-reduce of their outputs, every rank's step
 * eager, as one CUDA graph (FULL) and as graphs between attention
 * stand-ins (PIECEWISE), NCCL inside the graphs. Each mode is checked
 * against the rank's eager step bit for bit (as `trellis bench --model`),
 * then the eager step against the single-GPU step: the unsharded model on
 * GPU 0, or, for a preset that is one rank already (glm-tp4), every rank's
 * layers run on GPU 0 in lockstep with the all-reduce as a local sum. The
 * FP16 and FP8 cuBLASLt steps of the same shards, with the same
 * all-reduces, are timed beside it. NCCL is this program's dependency
 * alone. Method: bench/README.md. */
#include "step_bench.h"

#include "kernels.h"

#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RANKS 8
#define DEFAULT_TIMEOUT_S 1800
#define WARMUP_RUNS 10 /* every timer's warm-up: the same on every rank */

static const char usage[] =
    "usage: trellis-tp-step --tp N --model DIR|preset:NAME [--m LIST]\n"
    "                       [--bits B] [--blocks N] [--head-bits H]\n"
    "                       [--codebook C] [--reps N] [--force F]\n"
    "                       [--no-peers] [--no-reference] [--csv FILE]\n"
    "                       [--timeout S]\n"
    "\n"
    "The decode step of `trellis bench --model` on N GPUs (ranks 0..N-1 on\n"
    "devices 0..N-1, one thread each): every column-parallel layer (q, k, v,\n"
    "q_b, gate, up, gate_up, lm_head) holds rank r's output columns, every\n"
    "row-parallel one (o, down) rank r's input rows (trellis_weight_shard,\n"
    "even 128-block splits), and an NCCL all-reduce sums o's and down's\n"
    "partials. A preset that is one rank of a tensor-parallel model already\n"
    "(glm-tp4, --tp 4) runs as that many ranks, each with its own weights.\n"
    "Per M: the eager step, FULL and PIECEWISE graphs (the all-reduces\n"
    "inside), each checked against the eager step bit for bit on every rank;\n"
    "the eager step against the single-GPU step (--no-reference: not); the\n"
    "FP16 and FP8 cuBLASLt steps of the same shards with the same\n"
    "all-reduces (--no-peers: not). Times are rank 0's and the slowest\n"
    "rank's. --timeout S (default 1800) ends a run that hangs (a rank that\n"
    "failed while the others wait in a collective). The other options are\n"
    "`trellis bench --model`'s.\n";

typedef struct tp_shared tp_shared;

/* One rank: its thread's model, results and outputs. */
typedef struct tp_rank {
  tp_shared *sh;
  int rank;
  step_tp hooks;
  step_model model;
  bench_env env;
  step_row *rows;
  peer_result p16, p8;
  step_engine stats;
  size_t mem_used;
  uint16_t **dump; /* [nms * count]: the eager step's outputs */
  int ok;
} tp_rank;

struct tp_shared {
  int ranks;
  const bench_options *o;
  ncclComm_t comms[MAX_RANKS];
  pthread_barrier_t barrier;
  int values[MAX_RANKS];
  tp_rank rank[MAX_RANKS];
};

/* ---- the hooks ---------------------------------------------------------- */

static int nccl_allreduce(void *ctx, void *buf, size_t count, void *stream) {
  tp_rank *t = ctx;
  ncclResult_t res = ncclAllReduce(buf, buf, count, ncclHalf, ncclSum,
                                   t->sh->comms[t->rank], (cudaStream_t)stream);
  if (res != ncclSuccess) {
    cli_error("nccl: rank %d: ncclAllReduce of %zu values: %s", t->rank, count,
              ncclGetErrorString(res));
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int agree_min(void *ctx, int value) {
  tp_rank *t = ctx;
  tp_shared *sh = t->sh;
  sh->values[t->rank] = value;
  pthread_barrier_wait(&sh->barrier);
  int least = value;
  for (int r = 0; r < sh->ranks; r++)
    least = sh->values[r] < least ? sh->values[r] : least;
  pthread_barrier_wait(&sh->barrier); /* read by all before the next write */
  return least;
}

/* The single-GPU reference's all-reduce is done by its lockstep loop. */
static int local_allreduce(void *ctx, void *buf, size_t count, void *stream) {
  (void)ctx, (void)buf, (void)count, (void)stream;
  return CLI_OK;
}

/* ---- one rank ----------------------------------------------------------- */

static void preset_options(const bench_options *o, step_preset_options *po) {
  step_preset_options_init(po);
  po->bits = o->model_bits;
  po->blocks = o->blocks;
  po->head_bits = o->head_bits;
  po->codebook = o->cbs[0];
}

/* Every phase ends with the ranks agreeing it went well on all of them, so
 * that no rank starts the collectives of the next one alone. */
static void *rank_main(void *arg) {
  tp_rank *t = arg;
  tp_shared *sh = t->sh;
  const bench_options *o = sh->o;
  cudaStream_t stream = NULL;
  step_preset_options po;
  int r = CLI_FAIL, ok = 0, copies = 1;
  preset_options(o, &po);
  t->hooks = (step_tp){.ranks = sh->ranks,
                       .rank = t->rank,
                       .allreduce = nccl_allreduce,
                       .agree_min = agree_min,
                       .ctx = t};
  ok = cudaSetDevice(t->rank) == cudaSuccess &&
       cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) ==
           cudaSuccess &&
       step_model_open_tp(o->model, &po, sh->ranks, t->rank, &t->model) ==
           CLI_OK;
  if (ok) {
    t->model.tp = &t->hooks;
    bench_stamp(&t->env);
    t->env.max_m = 1;
    for (int j = 0; j < o->nms; j++)
      t->env.max_m = o->ms[j] > t->env.max_m ? o->ms[j] : t->env.max_m;
    ok = bench_query_gpu(&t->env) == CLI_OK &&
         (t->rank != 0 ||
          bench_read_peak(stream, &t->env.read_peak_gbs) == CLI_OK);
    t->rows = calloc((size_t)o->nms, sizeof *t->rows);
    t->dump = calloc((size_t)o->nms * t->model.count + 1, sizeof *t->dump);
    if (t->rows == NULL || t->dump == NULL) {
      cli_error("tp-step: rank %d: out of host memory", t->rank);
      ok = 0;
    }
  }
  if (!agree_min(t, ok))
    goto done;
  for (int j = 0; j < o->nms; j++) {
    t->rows[j].m = o->ms[j];
    t->rows[j].fp16_us = t->rows[j].fp8_us = NAN;
    for (int kd = 0; kd < STEP_KINDS; kd++)
      t->rows[j].kind_us[kd] = NAN;
  }
  /* every rank cycles as many copies (the all-reduces of a timed run) */
  copies = agree_min(t, step_copies(t->model.weight_bytes, t->env.cold_bytes));
  ok = step_bench_ours(o, &t->model, copies, stream, t->rows, &t->mem_used,
                       &t->stats, t->dump) == CLI_OK;
  if (!agree_min(t, ok))
    goto done;
  t->p16.pool = t->p8.pool = -1;
  if (!o->no_peers) {
    ok = step_bench_peer(o, &t->env, &t->model, 0, stream, t->rows, &t->p16) ==
         CLI_OK;
    if (!agree_min(t, ok))
      goto done;
    ok = step_bench_peer(o, &t->env, &t->model, 1, stream, t->rows, &t->p8) ==
         CLI_OK;
    if (!agree_min(t, ok))
      goto done;
  }
  r = CLI_OK;
done:
  if (stream)
    cudaStreamDestroy(stream);
  t->ok = r == CLI_OK;
  return NULL;
}

/* ---- the single-GPU step ------------------------------------------------ */

/* The single-GPU step on device 0 against the ranks' eager steps (their
 * outputs in sh->rank[r].dump): the unsharded model, or for a presharded
 * preset every rank's layers in lockstep with the all-reduce as a local
 * sum. */
static int reference(tp_shared *sh, step_ref *res) {
  const bench_options *o = sh->o;
  const int n = sh->rank[0].model.presharded ? sh->ranks : 1;
  step_model models[MAX_RANKS];
  step_engine engines[MAX_RANKS];
  step_tp local[MAX_RANKS];
  uint16_t **want[MAX_RANKS];
  const step_model *ranks[MAX_RANKS];
  step_preset_options po;
  cudaStream_t stream = NULL;
  int opened = 0, r = CLI_FAIL;
  memset(models, 0, sizeof models);
  memset(engines, 0, sizeof engines);
  memset(want, 0, sizeof want);
  for (int k = 0; k < sh->ranks; k++)
    ranks[k] = &sh->rank[k].model;
  preset_options(o, &po);
  BENCH_CUDA(cudaSetDevice(0));
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int k = 0; k < n; k++) {
    int mr = n > 1 ? step_model_open_tp(o->model, &po, n, k, &models[k])
                   : step_model_open(o->model, &po, &models[k]);
    opened = k + 1;
    if (mr != CLI_OK)
      goto done;
    if (n > 1) { /* all-reduce ops, summed by step_lockstep */
      local[k] = (step_tp){.ranks = n, .rank = k, .allreduce = local_allreduce};
      models[k].tp = &local[k];
    }
    if (step_engine_open(&engines[k], &models[k], 1, o->ms, o->nms, o->flags,
                         stream) != CLI_OK)
      goto done;
    BENCH_ALLOC(want[k], models[k].count);
  }
  for (int j = 0; j < o->nms; j++) {
    const int64_t m = o->ms[j];
    uint16_t *const *got[MAX_RANKS];
    for (int k = 0; k < sh->ranks; k++)
      got[k] = &sh->rank[k].dump[(size_t)j * sh->rank[k].model.count];
    step_ref_init(&res[j]);
    if (step_lockstep(engines, n, m, stream, want) != CLI_OK)
      goto done;
    if (n > 1)
      step_ref_ranks(ranks, n, got, (uint16_t *const *const *)want, m, &res[j]);
    else
      step_ref_unsharded(ranks, sh->ranks, got, &models[0], want[0], m,
                         &res[j]);
    for (int k = 0; k < n; k++)
      for (size_t i = 0; i < models[k].count; i++) {
        free(want[k][i]);
        want[k][i] = NULL;
      }
  }
  r = CLI_OK;
done:
  for (int k = 0; k < opened; k++) {
    step_engine_close(&engines[k]);
    for (size_t i = 0; want[k] && i < models[k].count; i++)
      free(want[k][i]);
    free(want[k]);
    step_model_close(&models[k]);
  }
  if (stream)
    cudaStreamDestroy(stream);
  return r;
}

/* ---- report ------------------------------------------------------------- */

static double slowest(const tp_shared *sh, int j, int md) {
  double us = 0;
  for (int r = 0; r < sh->ranks; r++)
    us = sh->rank[r].rows[j].us[md] > us ? sh->rank[r].rows[j].us[md] : us;
  return us;
}

static void print_tp(const tp_shared *sh, const step_ref *ref, int have_ref) {
  const bench_options *o = sh->o;
  const tp_rank *t0 = &sh->rank[0];
  int version = 0;
  ncclGetVersion(&version);
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  printf("tensor parallel: %d ranks on devices 0..%d, NCCL %d.%d.%d "
         "(NCCL_NVLS_ENABLE=%s), all-reduce (fp16 sum) after o and down, "
         "inside the FULL and PIECEWISE graphs; %s\n",
         sh->ranks, sh->ranks - 1, version / 10000, version / 100 % 100,
         version % 100, nvls ? nvls : "unset",
         t0->model.presharded
             ? "each rank a preset of its own (one rank of the model each)"
             : "column-parallel q/k/v/gate/up/head, row-parallel o/down "
               "(trellis_weight_shard)");
  for (int r = 0; r < sh->ranks; r++)
    printf("rank %d: %s, %.1f MiB of trellis payload per step, engine %.2f "
           "GiB\n",
           r, sh->rank[r].env.gpu, sh->rank[r].model.weight_bytes / (1 << 20),
           (double)sh->rank[r].mem_used / (1 << 30));
  printf("\n| %4s | %12s | %12s | %12s | %-5s | %-34s |\n", "M", "FULL us max",
         "PIECE us max", "eager us max", "ranks",
         "single-GPU step (worst / tol)");
  printf("|------|--------------|--------------|--------------|-------|-----"
         "-------------------------------|\n");
  for (int j = 0; j < o->nms; j++) {
    int ok = 1;
    for (int r = 0; r < sh->ranks; r++)
      for (int md = 0; md < 3; md++)
        ok &= sh->rank[r].rows[j].ok[md];
    char refs[64] = "not run";
    if (have_ref)
      bench_sfmt(refs, sizeof refs, "%s %.2f of tol%s",
                 step_ref_pass(&ref[j]) ? "PASS" : "FAIL", ref[j].worst_ratio,
                 ref[j].same_sums ? "" : ", sums differ");
    printf("| %4lld | %12.1f | %12.1f | %12.1f | %-5s | %-34s |\n",
           (long long)o->ms[j], slowest(sh, j, 1), slowest(sh, j, 2),
           slowest(sh, j, 0), ok ? "PASS" : "FAIL", refs);
  }
  if (have_ref)
    for (int j = 0; j < o->nms; j++)
      printf("single-GPU check at M=%lld: block 0 worst %.3g, last block's "
             "down %.3g, worst against its tolerance %s (tolerance %.0e x "
             "sqrt(block + 1))\n",
             (long long)o->ms[j], ref[j].block0, ref[j].final_rel, ref[j].worst,
             STEP_REF_TOL);
  printf("\nrank 0:\n");
  fflush(stdout);
}

static int write_csv(const char *path, const tp_shared *sh, const step_ref *ref,
                     int have_ref) {
  const bench_options *o = sh->o;
  const tp_rank *t0 = &sh->rank[0];
  bench_out out;
  if (bench_out_open(&out, "--csv", path) != CLI_OK)
    return CLI_FAIL;
  FILE *f = out.f;
  fprintf(f, "gpu,date,commit,model,ranks,m,rank0_eager_us,rank0_full_us,"
             "rank0_piecewise_us,max_eager_us,max_full_us,max_piecewise_us,"
             "fp16_us,fp8_us,check,reference_worst_ratio,reference_block0,"
             "reference_final\n");
  for (int j = 0; j < o->nms; j++) {
    int ok = 1;
    for (int r = 0; r < sh->ranks; r++)
      for (int md = 0; md < 3; md++)
        ok &= sh->rank[r].rows[j].ok[md];
    bench_csv_str(f, t0->env.gpu);
    fprintf(f, ",%s,%s,", t0->env.date, t0->env.commit);
    bench_csv_str(f, t0->model.source);
    fprintf(f, ",%d,%lld", sh->ranks, (long long)o->ms[j]);
    for (int md = 0; md < 3; md++) {
      fputc(',', f);
      bench_csv_num(f, "%.3f", t0->rows[j].us[md]);
    }
    for (int md = 0; md < 3; md++) {
      fputc(',', f);
      bench_csv_num(f, "%.3f", slowest(sh, j, md));
    }
    fputc(',', f);
    bench_csv_num(f, "%.3f", t0->rows[j].fp16_us);
    fputc(',', f);
    bench_csv_num(f, "%.3f", t0->rows[j].fp8_us);
    fprintf(f, ",%s", ok ? "PASS" : "FAIL");
    fputc(',', f);
    bench_csv_num(f, "%.4f", have_ref ? ref[j].worst_ratio : NAN);
    fputc(',', f);
    bench_csv_num(f, "%.3g", have_ref ? ref[j].block0 : NAN);
    fputc(',', f);
    bench_csv_num(f, "%.3g", have_ref ? ref[j].final_rel : NAN);
    fputc('\n', f);
  }
  return bench_out_close(&out);
}

/* ---- main --------------------------------------------------------------- */

static void *watchdog(void *arg) {
  const long seconds = *(const long *)arg;
  sleep((unsigned)seconds);
  fprintf(stderr,
          "trellis: tp-step: still running after %ld s (--timeout): a rank "
          "waits in a collective that another one never reached\n",
          seconds);
  fflush(NULL);
  _exit(CLI_FAIL);
  return NULL;
}

/* Takes --tp, --timeout and --no-reference out of argv (the rest are the
 * step benchmark's options). */
static int own_options(int *argc, char **argv, long *ranks, long *timeout,
                       int *no_reference) {
  int kept = 1, r;
  const char *tp = NULL, *to = NULL;
  for (int i = 1; i < *argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage, stdout);
      return CLI_HELP_SHOWN;
    }
    if (strcmp(argv[i], "--no-reference") == 0) {
      *no_reference = 1;
      continue;
    }
    const char **slot = strcmp(argv[i], "--tp") == 0        ? &tp
                        : strcmp(argv[i], "--timeout") == 0 ? &to
                                                            : NULL;
    if (slot == NULL) {
      argv[kept++] = argv[i];
      continue;
    }
    if (i + 1 >= *argc) {
      cli_error("tp-step: option %s needs a value", argv[i]);
      return CLI_USAGE;
    }
    *slot = argv[++i];
  }
  *argc = kept;
  if (tp == NULL) {
    cli_error("tp-step: missing --tp N (2..%d ranks, one GPU each)", MAX_RANKS);
    return CLI_USAGE;
  }
  if ((r = cli_parse_int("--tp", tp, 2, MAX_RANKS, ranks)) != CLI_OK)
    return r;
  *timeout = DEFAULT_TIMEOUT_S;
  if (to && (r = cli_parse_int("--timeout", to, 1, 86400, timeout)) != CLI_OK)
    return r;
  return CLI_PARSED;
}

int main(int argc, char **argv) {
  long ranks = 0, timeout = 0;
  int no_reference = 0, r = CLI_FAIL, comms = 0;
  tp_shared *sh = NULL;
  step_ref *ref = NULL;
  bench_options o;
  int pr = own_options(&argc, argv, &ranks, &timeout, &no_reference);
  if (pr != CLI_PARSED)
    return pr == CLI_HELP_SHOWN ? CLI_OK : CLI_USAGE;
  argv[0] = "tp-step";
  if ((pr = bench_parse_options(argc, argv, &o)) != CLI_PARSED)
    return cli_parse_exit(pr);
  if (o.model == NULL) {
    cli_error("tp-step: missing --model DIR|preset:NAME");
    return CLI_USAGE;
  }
  if (o.json_path) {
    cli_error("tp-step: --json is not written by this program (use --csv)");
    return CLI_USAGE;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < ranks) {
    cli_error("tp-step: --tp %ld needs %ld CUDA devices, found %d", ranks,
              ranks, devices);
    return CLI_FAIL;
  }
  pthread_t dog;
  if (pthread_create(&dog, NULL, watchdog, &timeout) == 0)
    pthread_detach(dog);
  bench_time_set_warmup_ms(0.0); /* warm-up by count: alike on every rank */
  bench_time_set_warmup_runs(WARMUP_RUNS);
  BENCH_ALLOC(sh, 1);
  BENCH_ALLOC(ref, o.nms);
  sh->ranks = (int)ranks;
  sh->o = &o;
  int devs[MAX_RANKS];
  for (int k = 0; k < sh->ranks; k++)
    devs[k] = k;
  ncclResult_t nr = ncclCommInitAll(sh->comms, sh->ranks, devs);
  if (nr != ncclSuccess) {
    cli_error("nccl: ncclCommInitAll on %d devices: %s", sh->ranks,
              ncclGetErrorString(nr));
    goto done;
  }
  comms = 1;
  if (pthread_barrier_init(&sh->barrier, NULL, (unsigned)sh->ranks) != 0) {
    cli_error("tp-step: pthread_barrier_init failed");
    goto done;
  }
  pthread_t threads[MAX_RANKS];
  int started = 0, all_ok = 1;
  for (int k = 0; k < sh->ranks; k++) {
    sh->rank[k].sh = sh;
    sh->rank[k].rank = k;
    if (pthread_create(&threads[k], NULL, rank_main, &sh->rank[k]) != 0) {
      cli_error("tp-step: cannot start rank %d's thread", k);
      _exit(CLI_FAIL); /* the started ranks wait for it at a barrier */
    }
    started++;
  }
  for (int k = 0; k < started; k++)
    pthread_join(threads[k], NULL);
  for (int k = 0; k < sh->ranks; k++)
    all_ok &= sh->rank[k].ok;
  pthread_barrier_destroy(&sh->barrier);
  if (!all_ok)
    goto done;
  const int have_ref = !no_reference;
  if (have_ref && reference(sh, ref) != CLI_OK)
    goto done;
  bench_print_env(&sh->rank[0].env, "trellis-tp-step");
  print_tp(sh, ref, have_ref);
  step_bench_print(&sh->rank[0].env, &o, &sh->rank[0].model, sh->rank[0].rows,
                   &sh->rank[0].stats, sh->rank[0].mem_used, &sh->rank[0].p16,
                   &sh->rank[0].p8);
  if (o.csv_path && write_csv(o.csv_path, sh, ref, have_ref) != CLI_OK)
    goto done;
  int failed = 0;
  for (int j = 0; j < o.nms; j++) {
    for (int k = 0; k < sh->ranks; k++)
      for (int md = 0; md < 3; md++)
        failed += !sh->rank[k].rows[j].ok[md];
    failed += have_ref && !step_ref_pass(&ref[j]);
  }
  if (failed) {
    cli_error("tp-step: %d check%s failed", failed, failed == 1 ? "" : "s");
    goto done;
  }
  r = CLI_OK;
done:
  if (sh) {
    for (int k = 0; k < sh->ranks; k++) {
      tp_rank *t = &sh->rank[k];
      for (size_t i = 0; t->dump && i < (size_t)o.nms * t->model.count; i++)
        free(t->dump[i]);
      free(t->dump);
      free(t->rows);
      step_model_close(&t->model);
      if (comms)
        ncclCommDestroy(sh->comms[k]);
    }
  }
  free(sh);
  free(ref);
  return r;
}
