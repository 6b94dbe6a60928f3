/* `trellis bench`: the GPU benchmark of issue 5 (method and targets in
 * PERFORMANCE.md). This file parses the options and orders the work: device
 * facts and the HBM read peak, then per shape FP16 cuBLAS and our layer for
 * each (bits, codebook) and M, then the targets block, CSV and JSON. The
 * pieces live in bench_peers.c, bench_run.c, bench_time.c, bench_report.c. */
#include "bench.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: trellis bench [k n ...] [--shapes k,n[;k,n...]] [--m LIST]\n"
    "                     [--bits K[,K...]] [--codebook mcg|3inst|mul1[,...]]\n"
    "                     [--sweep] [--quick] [--reps N] [--warmup-ms T]\n"
    "                     [--force generic|decode|dense[,...]]\n"
    "                     [--csv FILE] [--json FILE]\n"
    "\n"
    "GPU benchmark of EXL3 layers (CUDA builds), method of PERFORMANCE.md:\n"
    "random layers, weights cold (distinct copies >= max(256 MiB, 4 x L2)\n"
    "rotated), fp16 x/y, every configuration checked against the CPU\n"
    "reference (first min(M, 16) rows, rel L2 <= 2e-3) before it is timed,\n"
    "CUDA-graph replay of L = max(copies, 20) launches (median per launch)\n"
    "and eager launches; in the same run the HBM read peak (16-byte load\n"
    "kernel, 2 GiB) and FP16 cuBLASLt (W[k,n] and W[n,k], the better one).\n"
    "Prints a table (one row per shape, K, codebook, M) and the targets of\n"
    "PERFORMANCE.md (MET / MISSED); exits 1 when a check fails.\n"
    "\n"
    "  k n ... / KxN      shapes (k = in_features, n = out_features; "
    "multiples\n"
    "                     of 128); also --shapes 4096,4096;8192,28672\n"
    "                     default: 4096x4096 4096x14336 14336x4096 8192x8192\n"
    "                     8192x28672 28672x8192 2048x4096 6144x1024 512x6144\n"
    "  --m LIST           rows, default 1,2,4,8,16,32,64,128,4096\n"
    "  --bits K           1..8 (a comma list is allowed), default 6\n"
    "  --codebook CB      mcg, 3inst or mul1 (comma list allowed), default "
    "mcg\n"
    "  --sweep            K = 1..8 x 3inst/mcg/mul1 at M = 1 (decoded "
    "weights/s\n"
    "                     column); default shapes 8192x28672 28672x8192\n"
    "  --quick            smoke run: 4096x4096 8192x28672 6144x1024 at\n"
    "                     M = 1,16,128 (with --sweep: 8192x28672, K = "
    "2,4,6,8)\n"
    "  --reps N           timed graph replays (and eager passes), default 20\n"
    "  --warmup-ms T      warm-up before each timing: >= 3 replays and >= T\n"
    "                     ms of GPU time, default 50 (0: 3 replays only)\n"
    "  --force F          plan flags: generic = TRELLIS_PLAN_FORCE_GENERIC\n"
    "                     (never fused), decode / dense = FORCE_DECODE / "
    "DENSE\n"
    "  --csv FILE         write the rows as CSV (+ gpu, date, commit)\n"
    "  --json FILE        write rows, launch overhead and targets as JSON\n"
    "\n"
    "Explicit --shapes/--m/--bits/--codebook override the mode's defaults.\n"
    "The commit comes from $TRELLIS_COMMIT, else from .git.\n";

static const bench_shape default_shapes[] = {
    {4096, 4096},  {4096, 14336}, {14336, 4096}, {8192, 8192}, {8192, 28672},
    {28672, 8192}, {2048, 4096},  {6144, 1024},  {512, 6144}};
static const bench_shape quick_shapes[] = {
    {4096, 4096}, {8192, 28672}, {6144, 1024}};
static const bench_shape sweep_shapes[] = {{8192, 28672}, {28672, 8192}};
static const int64_t default_ms[] = {1, 2, 4, 8, 16, 32, 64, 128, 4096};
static const int64_t quick_ms[] = {1, 16, 128};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAX_DIM (1 << 20)
#define MAX_M (1 << 20)

/* ---- option parsing -------------------------------------------------------
 */

static int parse_i64(const char *opt, const char *text, size_t len, int64_t min,
                     int64_t max, int64_t *out) {
  char buf[32];
  if (len == 0 || len >= sizeof buf) {
    cli_error("%s: expected an integer in [%lld, %lld], got '%.*s'", opt,
              (long long)min, (long long)max, (int)len, text);
    return CLI_USAGE;
  }
  memcpy(buf, text, len);
  buf[len] = '\0';
  char *end = NULL;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (errno || end == buf || *end != '\0' || v < min || v > max) {
    cli_error("%s: expected an integer in [%lld, %lld], got '%s'", opt,
              (long long)min, (long long)max, buf);
    return CLI_USAGE;
  }
  *out = v;
  return CLI_OK;
}

static int add_shape(bench_options *o, const char *opt, int64_t k, int64_t n) {
  if (k % TRELLIS_HBLOCK || n % TRELLIS_HBLOCK) {
    cli_error("%s: %lldx%lld: k and n must be multiples of %d", opt,
              (long long)k, (long long)n, TRELLIS_HBLOCK);
    return CLI_USAGE;
  }
  if (o->nshapes == BENCH_MAX_LIST) {
    cli_error("%s: at most %d shapes", opt, BENCH_MAX_LIST);
    return CLI_USAGE;
  }
  o->shapes[o->nshapes].k = k;
  o->shapes[o->nshapes].n = n;
  o->nshapes++;
  return CLI_OK;
}

/* "k,n" or "kxn", `len` characters of `text`. */
static int parse_shape(bench_options *o, const char *opt, const char *text,
                       size_t len) {
  const char *sep = NULL;
  for (size_t i = 0; i < len; i++)
    if (text[i] == ',' || text[i] == 'x' || text[i] == 'X') {
      sep = text + i;
      break;
    }
  int64_t k = 0, n = 0;
  if (sep == NULL) {
    cli_error("%s: expected k,n or KxN, got '%.*s'", opt, (int)len, text);
    return CLI_USAGE;
  }
  int r =
      parse_i64(opt, text, (size_t)(sep - text), TRELLIS_HBLOCK, MAX_DIM, &k);
  if (r == CLI_OK)
    r = parse_i64(opt, sep + 1, len - (size_t)(sep - text) - 1, TRELLIS_HBLOCK,
                  MAX_DIM, &n);
  return r == CLI_OK ? add_shape(o, opt, k, n) : r;
}

static int parse_shapes(bench_options *o, const char *text) {
  for (const char *p = text;;) {
    size_t len = strcspn(p, ";");
    int r = parse_shape(o, "--shapes", p, len);
    if (r != CLI_OK)
      return r;
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

/* Comma-separated integers in [min, max] into out[cap]. */
static int parse_int_list(const char *opt, const char *text, int64_t min,
                          int64_t max, int64_t *out, int cap, int *count) {
  *count = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    if (*count == cap) {
      cli_error("%s: at most %d values", opt, cap);
      return CLI_USAGE;
    }
    int r = parse_i64(opt, p, len, min, max, &out[*count]);
    if (r != CLI_OK)
      return r;
    (*count)++;
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

static int parse_codebooks(bench_options *o, const char *text) {
  o->ncbs = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    trellis_codebook cb;
    if (len == 3 && strncmp(p, "mcg", 3) == 0)
      cb = TRELLIS_CB_MCG;
    else if (len == 5 && strncmp(p, "3inst", 5) == 0)
      cb = TRELLIS_CB_3INST;
    else if (len == 4 && strncmp(p, "mul1", 4) == 0)
      cb = TRELLIS_CB_MUL1;
    else {
      cli_error("--codebook: expected mcg, 3inst or mul1, got '%.*s'", (int)len,
                p);
      return CLI_USAGE;
    }
    if (o->ncbs == COUNT(o->cbs)) {
      cli_error("--codebook: at most %d codebooks", COUNT(o->cbs));
      return CLI_USAGE;
    }
    o->cbs[o->ncbs++] = cb;
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

static int parse_force(const char *text, uint32_t *flags) {
  *flags = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    if (len == 7 && strncmp(p, "generic", 7) == 0)
      *flags |= TRELLIS_PLAN_FORCE_GENERIC;
    else if (len == 6 && strncmp(p, "decode", 6) == 0)
      *flags |= TRELLIS_PLAN_FORCE_DECODE;
    else if (len == 5 && strncmp(p, "dense", 5) == 0)
      *flags |= TRELLIS_PLAN_FORCE_DENSE;
    else {
      cli_error("--force: expected generic, decode or dense, got '%.*s'",
                (int)len, p);
      return CLI_USAGE;
    }
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

typedef struct raw_args {
  const char *shapes, *m, *bits, *codebook, *reps, *warmup, *force;
  const char *pos[2 * BENCH_MAX_LIST];
  int npos;
} raw_args;

/* argv -> raw option values and positionals. */
static int scan_args(int argc, char **argv, raw_args *a, bench_options *o) {
  struct {
    const char *name;
    const char **value;
    int *flag;
  } opts[] = {
      {"--shapes", &a->shapes, NULL},  {"--m", &a->m, NULL},
      {"--bits", &a->bits, NULL},      {"--codebook", &a->codebook, NULL},
      {"--reps", &a->reps, NULL},      {"--warmup-ms", &a->warmup, NULL},
      {"--force", &a->force, NULL},    {"--csv", &o->csv_path, NULL},
      {"--json", &o->json_path, NULL}, {"--sweep", NULL, &o->sweep},
      {"--quick", NULL, &o->quick}};
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      fputs(usage, stdout);
      return CLI_HELP_SHOWN;
    }
    if (strncmp(s, "--", 2) == 0 && s[2] != '\0') {
      const char *eq = strchr(s, '=');
      size_t len = eq ? (size_t)(eq - s) : strlen(s);
      int found = 0;
      for (int j = 0; j < COUNT(opts) && !found; j++) {
        if (strlen(opts[j].name) != len || strncmp(opts[j].name, s, len))
          continue;
        found = 1;
        if (opts[j].flag) {
          if (eq) {
            cli_error("bench: option %s takes no value", opts[j].name);
            return CLI_USAGE;
          }
          *opts[j].flag = 1;
          continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (v == NULL || v[0] == '\0') {
          cli_error("bench: option %s needs a value", opts[j].name);
          return CLI_USAGE;
        }
        *opts[j].value = v;
      }
      if (!found) {
        cli_error("bench: unknown option '%.*s' (try 'trellis bench --help')",
                  (int)len, s);
        return CLI_USAGE;
      }
      continue;
    }
    if (s[0] == '-' && s[1] != '\0') {
      cli_error("bench: unknown option '%s' (try 'trellis bench --help')", s);
      return CLI_USAGE;
    }
    if (a->npos == COUNT(a->pos)) {
      cli_error("bench: too many shape arguments (at most %d shapes)",
                BENCH_MAX_LIST);
      return CLI_USAGE;
    }
    a->pos[a->npos++] = s;
  }
  return CLI_PARSED;
}

static int parse_options(int argc, char **argv, bench_options *o) {
  raw_args a;
  memset(&a, 0, sizeof a);
  memset(o, 0, sizeof *o);
  int r = scan_args(argc, argv, &a, o);
  if (r != CLI_PARSED)
    return r;

  /* Shapes: positionals ("k n" pairs or KxN), then --shapes. */
  for (int i = 0; i < a.npos; i++) {
    const char *p = a.pos[i];
    if (strpbrk(p, "xX,")) {
      if ((r = parse_shape(o, "shape", p, strlen(p))) != CLI_OK)
        return r;
      continue;
    }
    int64_t k = 0, n = 0;
    if (i + 1 >= a.npos || strpbrk(a.pos[i + 1], "xX,")) {
      cli_error("bench: shape '%s' needs both k and n (k n, or KxN)", p);
      return CLI_USAGE;
    }
    if ((r = parse_i64("shape k", p, strlen(p), TRELLIS_HBLOCK, MAX_DIM, &k)) !=
            CLI_OK ||
        (r = parse_i64("shape n", a.pos[i + 1], strlen(a.pos[i + 1]),
                       TRELLIS_HBLOCK, MAX_DIM, &n)) != CLI_OK ||
        (r = add_shape(o, "shape", k, n)) != CLI_OK)
      return r;
    i++;
  }
  if (a.shapes && (r = parse_shapes(o, a.shapes)) != CLI_OK)
    return r;
  if (o->nshapes == 0) {
    const bench_shape *src = o->sweep   ? sweep_shapes
                             : o->quick ? quick_shapes
                                        : default_shapes;
    int count = o->sweep   ? (o->quick ? 1 : COUNT(sweep_shapes))
                : o->quick ? COUNT(quick_shapes)
                           : COUNT(default_shapes);
    memcpy(o->shapes, src, (size_t)count * sizeof *src);
    o->nshapes = count;
  }

  if (a.m) {
    if ((r = parse_int_list("--m", a.m, 1, MAX_M, o->ms, BENCH_MAX_LIST,
                            &o->nms)) != CLI_OK)
      return r;
  } else if (o->sweep) {
    o->ms[0] = 1;
    o->nms = 1;
  } else {
    const int64_t *src = o->quick ? quick_ms : default_ms;
    o->nms = o->quick ? COUNT(quick_ms) : COUNT(default_ms);
    memcpy(o->ms, src, (size_t)o->nms * sizeof *src);
  }

  if (a.bits) {
    int64_t v[TRELLIS_MAX_BITS];
    if ((r = parse_int_list("--bits", a.bits, TRELLIS_MIN_BITS,
                            TRELLIS_MAX_BITS, v, TRELLIS_MAX_BITS,
                            &o->nbits)) != CLI_OK)
      return r;
    for (int i = 0; i < o->nbits; i++)
      o->bits[i] = (int)v[i];
  } else if (o->sweep) {
    for (int b = TRELLIS_MIN_BITS; b <= TRELLIS_MAX_BITS; b++)
      if (!o->quick || b % 2 == 0)
        o->bits[o->nbits++] = b;
  } else {
    o->bits[o->nbits++] = 6;
  }

  if (a.codebook) {
    if ((r = parse_codebooks(o, a.codebook)) != CLI_OK)
      return r;
  } else if (o->sweep) {
    o->cbs[0] = TRELLIS_CB_3INST;
    o->cbs[1] = TRELLIS_CB_MCG;
    o->cbs[2] = TRELLIS_CB_MUL1;
    o->ncbs = 3;
  } else {
    o->cbs[0] = TRELLIS_CB_MCG;
    o->ncbs = 1;
  }

  long reps = 20;
  if (a.reps &&
      (r = cli_parse_int("--reps", a.reps, 1, 100000, &reps)) != CLI_OK)
    return r;
  o->reps = (int)reps;
  long warmup = (long)BENCH_WARMUP_MS;
  if (a.warmup &&
      (r = cli_parse_int("--warmup-ms", a.warmup, 0, 60000, &warmup)) != CLI_OK)
    return r;
  o->warmup_ms = (double)warmup;
  if (a.force && (r = parse_force(a.force, &o->flags)) != CLI_OK)
    return r;
  return CLI_PARSED;
}

/* ---- the run --------------------------------------------------------------
 */

#ifdef TRELLIS_HAVE_CUDA

/* Target 6 is measured on the first shape, with K6/MCG when it is run. */
static void overhead_config(const bench_options *o, int *bits,
                            trellis_codebook *cb) {
  *bits = o->bits[0];
  *cb = o->cbs[0];
  for (int i = 0; i < o->nbits; i++)
    for (int j = 0; j < o->ncbs; j++)
      if (o->bits[i] == 6 && o->cbs[j] == TRELLIS_CB_MCG) {
        *bits = 6;
        *cb = TRELLIS_CB_MCG;
      }
}

static int bench_main(const bench_options *o) {
  bench_env env;
  bench_results res;
  bench_target targets[BENCH_TARGETS];
  cudaStream_t stream = NULL;
  double *kn = NULL, *nk = NULL;
  int r = CLI_FAIL, started = 0;
  memset(&env, 0, sizeof env);
  memset(&res, 0, sizeof res);

  if (trellis_cuda_device_count() <= 0) {
    cli_error("bench: no usable CUDA device found");
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
  for (int s = 0; s < o->nshapes; s++) {
    const int64_t k = o->shapes[s].k, n = o->shapes[s].n;
    if (bench_cublas_shape(k, n, o->ms, o->nms, env.cold_bytes, o->reps, stream,
                           kn, nk) != CLI_OK)
      goto done;
    for (int bi = 0; bi < o->nbits; bi++)
      for (int ci = 0; ci < o->ncbs; ci++) {
        const int bits = o->bits[bi];
        const trellis_codebook cb = o->cbs[ci];
        const int overhead =
            s == 0 && !res.overhead.measured && bits == ov_bits && cb == ov_cb;
        if (bench_run_config(o, &env, k, n, bits, cb, kn, nk, overhead, stream,
                             &res) != CLI_OK)
          goto done;
      }
  }
  r = CLI_OK;
done:
  if (started) {
    res.complete = r == CLI_OK;
    bench_eval_targets(&env, o, &res, targets);
    if (r == CLI_OK)
      bench_print_targets(&env, targets);
    else
      printf("\n(incomplete run: %zu rows measured before the error)\n",
             res.count);
    /* Files get what was measured, even after an error. */
    if (o->csv_path && bench_write_csv(o->csv_path, &env, &res) != CLI_OK)
      r = CLI_FAIL;
    if (o->json_path &&
        bench_write_json(o->json_path, &env, o, &res, targets) != CLI_OK)
      r = CLI_FAIL;
  }
  if (r == CLI_OK && res.failed_checks) {
    cli_error("bench: %d row%s failed the check against the CPU reference",
              res.failed_checks, res.failed_checks == 1 ? "" : "s");
    r = CLI_FAIL;
  }
  free(kn);
  free(nk);
  if (stream)
    cudaStreamDestroy(stream);
  bench_results_free(&res);
  return r;
}

#endif

int cmd_bench(int argc, char **argv) {
  bench_options o;
  int r = parse_options(argc, argv, &o);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);
#ifdef TRELLIS_HAVE_CUDA
  return bench_main(&o);
#else
  cli_error("bench: this trellis was built without CUDA (the benchmark needs "
            "a GPU build: configure with -DTRELLIS_CUDA=ON)");
  return CLI_USAGE;
#endif
}
