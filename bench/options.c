/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's command line: options, the modes' defaults (--quick,
 * --sweep) and the usage text. */
#include "bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(BENCH_FP8_ALGOS == 4, "the usage text says up to 4");

static const char usage[] =
    "usage: trellis bench [k n ...] [--shapes k,n[;k,n...]] [--m LIST]\n"
    "                     [--bits K[,K...]] [--codebook CB[,CB...]]\n"
    "                     [--pair P[,P...] [--rate-axis n|k] [--orth N[,N]]]\n"
    "                     [--sweep] [--quick] [--with-generic]\n"
    "                     [--reps N] [--warmup-ms T]\n"
    "                     [--force "
    "generic|decode|dense|legacy|exact|nopdl|kmajor[,...]]\n"
    "                     [--csv FILE] [--json FILE] [--targets FILE]\n"
    "       trellis bench --model DIR|preset:NAME [--m LIST] [--bits B]\n"
    "                     [--blocks N] [--head-bits K] [--codebook CB]\n"
    "                     [--no-peers] [--reps N] [--warmup-ms T] [--force F]\n"
    "                     [--csv FILE] [--json FILE]\n"
    "       (trellis-bench takes the same arguments)\n"
    "\n"
    "GPU benchmark of EXL3 layers (CUDA builds), method of bench/README.md:\n"
    "random layers, weights cold (distinct copies >= max(256 MiB, 4 x L2)\n"
    "rotated), fp16 x/y, every configuration checked against the CPU\n"
    "reference (first min(M, 16) rows, rel L2 <= 2e-3) before it is timed,\n"
    "CUDA-graph replay of L = max(copies, 20) launches (median per launch)\n"
    "and eager launches; in the same run the HBM read peak (16-byte load\n"
    "kernel, 2 GiB), FP16 cuBLASLt (W[k,n] and W[n,k], the better one) and\n"
    "FP8 W8A8 cuBLASLt (E4M3 W[n,k] and x, per-tensor scales, M rounded up\n"
    "to a multiple of 16, activation quantisation not timed; the fastest of\n"
    "up to 4 heuristic algorithms; n/a on GPUs without FP8).\n"
    "Prints a table (one row per shape, K, codebook, M) and the targets\n"
    "(MET / MISSED); exits 1 when a check fails.\n"
    "\n"
    "  k n ... / KxN      shapes (k = in_features, n = out_features; "
    "multiples\n"
    "                     of 128); also --shapes 4096,4096;8192,28672\n"
    "                     default: 4096x4096 4096x14336 14336x4096 8192x8192\n"
    "                     8192x28672 28672x8192 2048x4096 6144x1024 512x6144\n"
    "  --m LIST           rows, default 1,2,4,8,16,32,64,128,4096\n"
    "  --bits K           1..8, or 1.5, 2.5, 3.5 (mul1's half-integer\n"
    "                     rates; a comma list is allowed), default 6\n"
    "  --codebook CB      mcg, 3inst, mul1, sqg_e4m3 or sqg_fp16 (comma list\n"
    "                     allowed), default mcg; an SQG codebook runs at the\n"
    "                     --bits it has (sqg_e4m3 2..6, sqg_fp16 5..6), with\n"
    "                     a vs MCG column (list mcg first)\n"
    "  --pair P           b12x pairs p22, p24, p33, p43, p44 (comma list):\n"
    "                     after the shapes, per --orth size the uniform MCG\n"
    "                     layer at each pair's bits per weight, then each\n"
    "                     pair with the listed codebooks that pair (mcg,\n"
    "                     sqg_e4m3; default both), vs MCG column; without\n"
    "                     shapes only these layers run\n"
    "  --rate-axis A      the pairs' 256-channel axis: n (k = orth, n = 256,\n"
    "                     default) or k (k = 256, n = orth)\n"
    "  --orth N           the pairs' other axis, multiples of 128 (comma\n"
    "                     list), default 7168\n"
    "  --sweep            K = 1..8 x 3inst/mcg/mul1 and mul1 at K = 1.5,\n"
    "                     2.5, 3.5 at M = 1 (decoded weights/s column);\n"
    "                     default shapes 8192x28672 28672x8192\n"
    "  --quick            smoke run: 4096x4096 8192x28672 6144x1024 at\n"
    "                     M = 1,16,128 (with --sweep: 8192x28672, K = "
    "2,2.5,4,6,8)\n"
    "  --with-generic     also time every fused row with FORCE_GENERIC added\n"
    "                     (graph, checked): the generic us column; rows on\n"
    "                     another path already run the generic launches\n"
    "  --reps N           timed graph replays (and eager passes), default 20\n"
    "  --warmup-ms T      warm-up before each timing: >= 3 replays and >= T\n"
    "                     ms of GPU time, default 50 (0: 3 replays only)\n"
    "  --force F          plan flags (comma list): generic =\n"
    "                     TRELLIS_PLAN_FORCE_GENERIC (never fused), decode /\n"
    "                     dense = FORCE_DECODE / FORCE_DENSE, legacy =\n"
    "                     LEGACY_KERNELS, exact = EXACT_WEIGHTS, nopdl =\n"
    "                     NO_DEPENDENT_LAUNCH, kmajor = weights uploaded in\n"
    "                     the k-major layout; forced rows count for no\n"
    "                     target\n"
    "  --csv FILE         write the rows as CSV (+ gpu, date, commit)\n"
    "  --json FILE        write rows, launch overhead and targets as JSON\n"
    "  --targets FILE     the targets to evaluate, default the installed\n"
    "                     share/libtrellis/bench-targets.json, else the\n"
    "                     source tree's bench/targets.json\n"
    "\n"
    "Explicit --shapes/--m/--bits/--codebook override the mode's defaults.\n"
    "\n"
    "Decode step of a model (--model): every EXL3 layer of DIR (a model\n"
    "directory) or of preset:NAME (llama-3.1-8b, llama-3.1-70b, glm-tp4,\n"
    "synthesised on the device as `trellis synth` would write it) uploaded\n"
    "and planned once, one step per block q/k/v, attention stand-in, o,\n"
    "gate/up, down (then the head), timed eager, FULL (one CUDA graph) and\n"
    "PIECEWISE (graphs between attention stand-ins), each checked first\n"
    "against the eager step (NaN-poisoned outputs, bit-equal); per layer\n"
    "kind; beside the same step from FP16 and FP8 cuBLASLt layers.\n"
    "  --m LIST           rows, default 1,8,32,128\n"
    "  --bits B           a preset's average bits per weight, 1..8 (e.g.\n"
    "                     3.36: K mixed per tensor as `trellis synth`),\n"
    "                     default 4\n"
    "  --blocks N         a preset's depth, default the preset's\n"
    "  --head-bits K      a preset's lm_head K (2.5 with mul1; 16: fp16, not\n"
    "                     in the step), default 6\n"
    "  --codebook CB      a preset's codebook, default mcg; with mul1 the\n"
    "                     preset mixes half-integer rates below 4 as\n"
    "                     `trellis synth` does (e.g. --bits 3.36: K 3, 3.5)\n"
    "  --no-peers         leave out the FP16 and FP8 steps\n"
    "The commit comes from $TRELLIS_COMMIT, else from `git describe` when\n"
    "the build was configured.\n";

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
  long long v = cli_plain_number(buf) ? strtoll(buf, &end, 10) : 0;
  if (!cli_plain_number(buf) || errno || end == buf || *end != '\0' ||
      v < min || v > max) {
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

/* Comma-separated codebook names (the rate table's, tools/cli.h). */
static int parse_codebooks(bench_options *o, const char *text) {
  o->ncbs = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    char name[32]; /* longer names are no codebook's */
    bench_sfmt(name, sizeof name, "%.*s", (int)(len < 31 ? len : 31), p);
    trellis_codebook cb;
    int r = cli_parse_codebook("--codebook", name, CLI_CODEBOOKS_ALL, &cb);
    if (r != CLI_OK)
      return r;
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

/* Comma-separated rates, "6" or "2.5" (1..8, half-integer 1.5 .. 7.5;
 * which codebook takes which is the run's: trellis_codebook_rate_valid). */
static int parse_rates(bench_options *o, const char *text) {
  o->nbits = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    char item[16];
    if (o->nbits == COUNT(o->bits)) {
      cli_error("--bits: at most %d values", COUNT(o->bits));
      return CLI_USAGE;
    }
    bench_sfmt(item, sizeof item, "%.*s", (int)(len < 15 ? len : 15), p);
    int r = cli_parse_rate("--bits", item, TRELLIS_MIN_BITS, TRELLIS_MAX_BITS,
                           &o->bits[o->nbits], &o->half[o->nbits]);
    if (r != CLI_OK)
      return r;
    if (o->half[o->nbits] && o->bits[o->nbits] == TRELLIS_MAX_BITS) {
      cli_error("--bits: %s is above K %d", item, TRELLIS_MAX_BITS);
      return CLI_USAGE;
    }
    o->nbits++;
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

/* The --sweep rates: K 1..8 and the half-integer rates a codebook of the
 * table takes (1.5, 2.5, 3.5: MUL1), in increasing order; --quick: 2, 2.5,
 * 4, 6, 8. */
static void sweep_rates(bench_options *o) {
  o->nbits = 0;
  for (int h = 2 * TRELLIS_MIN_BITS; h <= 2 * TRELLIS_MAX_BITS; h++) {
    const int bits = h / 2, half = h % 2;
    int taken = 0;
    for (int cb = 0; cb < cli_codebook_count(); cb++)
      taken |= trellis_codebook_rate_valid((trellis_codebook)cb, bits, half);
    if (!taken || (o->quick && !(h % 4 == 0 || h == 5)))
      continue;
    o->bits[o->nbits] = bits;
    o->half[o->nbits++] = half;
  }
}

/* Comma-separated pair kinds (p24 or P24). */
static int parse_pairs(bench_options *o, const char *text) {
  static const trellis_pair_kind all[] = {TRELLIS_PAIR_P22, TRELLIS_PAIR_P24,
                                          TRELLIS_PAIR_P33, TRELLIS_PAIR_P43,
                                          TRELLIS_PAIR_P44};
  o->npairs = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    int found = -1;
    for (int i = 0; i < COUNT(all) && found < 0; i++)
      if (len == 3 && (p[0] == 'p' || p[0] == 'P') &&
          strncmp(p + 1, trellis_pair_kind_name(all[i]) + 1, 2) == 0)
        found = i;
    if (found < 0) {
      cli_error("--pair: expected p22, p24, p33, p43 or p44, got '%.*s'",
                (int)len, p);
      return CLI_USAGE;
    }
    if (o->npairs == COUNT(o->pairs)) {
      cli_error("--pair: at most %d pairs", COUNT(o->pairs));
      return CLI_USAGE;
    }
    o->pairs[o->npairs++] = all[found];
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

/* Comma-separated names of bench_flags. */
static int parse_force(const char *text, uint32_t *flags) {
  *flags = 0;
  for (const char *p = text;;) {
    size_t len = strcspn(p, ",");
    int found = 0;
    for (int i = 0; i < bench_nflags && !found; i++)
      if (strlen(bench_flags[i].name) == len &&
          strncmp(p, bench_flags[i].name, len) == 0) {
        *flags |= bench_flags[i].bit;
        found = 1;
      }
    if (!found) {
      char names[128] = "";
      for (int i = 0; i < bench_nflags; i++) {
        size_t used = strlen(names);
        bench_sfmt(names + used, sizeof names - used, "%s%s",
                   i == 0                  ? ""
                   : i == bench_nflags - 1 ? " or "
                                           : ", ",
                   bench_flags[i].name);
      }
      cli_error("--force: expected %s, got '%.*s'", names, (int)len, p);
      return CLI_USAGE;
    }
    if (p[len] == '\0')
      return CLI_OK;
    p += len + 1;
  }
}

/* Shapes from the positionals: "k n" pairs or KxN / k,n. */
static int parse_positional_shapes(bench_options *o, const char *const *pos,
                                   int npos) {
  int r;
  for (int i = 0; i < npos; i++) {
    const char *p = pos[i];
    if (strpbrk(p, "xX,")) {
      if ((r = parse_shape(o, "shape", p, strlen(p))) != CLI_OK)
        return r;
      continue;
    }
    int64_t k = 0, n = 0;
    if (i + 1 >= npos || strpbrk(pos[i + 1], "xX,")) {
      cli_error("bench: shape '%s' needs both k and n (k n, or KxN)", p);
      return CLI_USAGE;
    }
    if ((r = parse_i64("shape k", p, strlen(p), TRELLIS_HBLOCK, MAX_DIM, &k)) !=
            CLI_OK ||
        (r = parse_i64("shape n", pos[i + 1], strlen(pos[i + 1]),
                       TRELLIS_HBLOCK, MAX_DIM, &n)) != CLI_OK ||
        (r = add_shape(o, "shape", k, n)) != CLI_OK)
      return r;
    i++;
  }
  return CLI_OK;
}

static const int64_t step_ms[] = {1, 8, 32, 128};

/* The options of --model (the decode-step benchmark); the layer
 * benchmark's own options are refused. */
static int parse_step_options(bench_options *o, int npos, const char *shapes,
                              const char *m, const char *bits,
                              const char *codebook, const char *blocks,
                              const char *head_bits) {
  int r;
  const int preset = strncmp(o->model, "preset:", 7) == 0;
  if (npos > 0 || shapes || o->sweep || o->quick || o->with_generic ||
      o->targets_path) {
    cli_error("--model: shapes, --sweep, --quick, --with-generic and "
              "--targets are options of the layer benchmark");
    return CLI_USAGE;
  }
  if (!preset && (bits || blocks || head_bits || codebook)) {
    cli_error("--model %s: --bits, --blocks, --head-bits and --codebook "
              "build a preset (preset:NAME); a directory has its own",
              o->model);
    return CLI_USAGE;
  }
  if (m) {
    if ((r = parse_int_list("--m", m, 1, MAX_M, o->ms, BENCH_MAX_LIST,
                            &o->nms)) != CLI_OK)
      return r;
  } else {
    o->nms = COUNT(step_ms);
    memcpy(o->ms, step_ms, sizeof step_ms);
  }
  o->model_bits = 4.0;
  if (bits) {
    char *end = NULL;
    errno = 0;
    const double v = cli_plain_number(bits) ? strtod(bits, &end) : 0;
    if (!cli_plain_number(bits) || errno || end == bits || *end != '\0' ||
        !(v >= TRELLIS_MIN_BITS) || !(v <= TRELLIS_MAX_BITS)) {
      cli_error("--bits: expected bits per weight in [%d, %d], got '%s'",
                TRELLIS_MIN_BITS, TRELLIS_MAX_BITS, bits);
      return CLI_USAGE;
    }
    o->model_bits = v;
  }
  long v = 0;
  if (blocks &&
      (r = cli_parse_int("--blocks", blocks, 1, 100000, &v)) != CLI_OK)
    return r;
  o->blocks = (int)v;
  o->head_bits = 6;
  o->head_half = 0;
  if (head_bits && (r = cli_parse_rate("--head-bits", head_bits, 1, 16,
                                       &o->head_bits, &o->head_half)) != CLI_OK)
    return r;
  if ((o->head_bits > TRELLIS_MAX_BITS && o->head_bits != 16) ||
      (o->head_half && o->head_bits >= TRELLIS_MAX_BITS)) {
    cli_error("--head-bits: expected 1..8, 1.5 .. 3.5 (mul1), or 16 (an "
              "fp16 head), got '%s'",
              head_bits);
    return CLI_USAGE;
  }
  o->cbs[0] = TRELLIS_CB_MCG;
  o->ncbs = 1;
  if (codebook && (r = parse_codebooks(o, codebook)) != CLI_OK)
    return r;
  if (o->ncbs != 1) {
    cli_error("--codebook: --model takes one codebook");
    return CLI_USAGE;
  }
  return CLI_PARSED;
}

int bench_parse_options(int argc, char **argv, bench_options *o) {
  const char *shapes = NULL, *m = NULL, *bits = NULL, *codebook = NULL;
  const char *reps_text = NULL, *warmup_text = NULL, *force = NULL;
  const char *blocks = NULL, *head_bits = NULL;
  const char *pair = NULL, *rate_axis = NULL, *orth = NULL;
  const char *pos[2 * BENCH_MAX_LIST];
  int npos = 0;
  memset(o, 0, sizeof *o);
  const cli_option opts[] = {{"--shapes", &shapes, NULL},
                             {"--m", &m, NULL},
                             {"--bits", &bits, NULL},
                             {"--codebook", &codebook, NULL},
                             {"--pair", &pair, NULL},
                             {"--rate-axis", &rate_axis, NULL},
                             {"--orth", &orth, NULL},
                             {"--reps", &reps_text, NULL},
                             {"--warmup-ms", &warmup_text, NULL},
                             {"--force", &force, NULL},
                             {"--csv", &o->csv_path, NULL},
                             {"--json", &o->json_path, NULL},
                             {"--targets", &o->targets_path, NULL},
                             {"--sweep", NULL, &o->sweep},
                             {"--quick", NULL, &o->quick},
                             {"--with-generic", NULL, &o->with_generic},
                             {"--model", &o->model, NULL},
                             {"--blocks", &blocks, NULL},
                             {"--head-bits", &head_bits, NULL},
                             {"--no-peers", NULL, &o->no_peers}};
  int r = cli_parse_list(argc, argv, usage, opts, COUNT(opts), pos, COUNT(pos),
                         &npos);
  if (r != CLI_PARSED)
    return r;
  if (o->model) {
    r = parse_step_options(o, npos, shapes, m, bits, codebook, blocks,
                           head_bits);
    if (r != CLI_PARSED)
      return r;
    goto common; /* the layer benchmark's shapes, rows and K are not used */
  } else if (blocks || head_bits || o->no_peers) {
    cli_error("--blocks, --head-bits and --no-peers go with --model");
    return CLI_USAGE;
  }

  /* Shapes: positionals, then --shapes. */
  if ((r = parse_positional_shapes(o, pos, npos)) != CLI_OK)
    return r;
  if (shapes && (r = parse_shapes(o, shapes)) != CLI_OK)
    return r;
  if (o->nshapes == 0 && !pair) { /* --pair alone: the pair layers only */
    const bench_shape *src = o->sweep   ? sweep_shapes
                             : o->quick ? quick_shapes
                                        : default_shapes;
    int count = o->sweep   ? (o->quick ? 1 : COUNT(sweep_shapes))
                : o->quick ? COUNT(quick_shapes)
                           : COUNT(default_shapes);
    memcpy(o->shapes, src, (size_t)count * sizeof *src);
    o->nshapes = count;
  }

  if (m) {
    if ((r = parse_int_list("--m", m, 1, MAX_M, o->ms, BENCH_MAX_LIST,
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

  if (bits) {
    if ((r = parse_rates(o, bits)) != CLI_OK)
      return r;
  } else if (o->sweep) {
    sweep_rates(o);
  } else {
    o->bits[o->nbits++] = 6;
  }

  if (codebook) {
    if ((r = parse_codebooks(o, codebook)) != CLI_OK)
      return r;
  } else if (o->sweep) { /* the EXL3 codebooks (3inst, mcg, mul1) */
    for (int cb = 0; cb < cli_codebook_count(); cb++)
      if (!cli_codebook_is_sqg((trellis_codebook)cb))
        o->cbs[o->ncbs++] = (trellis_codebook)cb;
  } else {
    o->cbs[0] = TRELLIS_CB_MCG;
    o->ncbs = 1;
  }

  if (pair) {
    if ((r = parse_pairs(o, pair)) != CLI_OK)
      return r;
    if (!codebook) { /* the codebooks that pair (mcg, sqg_e4m3) */
      o->ncbs = 0;
      for (int cb = 0; cb < cli_codebook_count(); cb++)
        if (cli_codebook_pairs((trellis_codebook)cb))
          o->cbs[o->ncbs++] = (trellis_codebook)cb;
    }
  }
  if ((rate_axis || orth) && !pair) {
    cli_error("%s: only with --pair", rate_axis ? "--rate-axis" : "--orth");
    return CLI_USAGE;
  }
  o->rate_axis = TRELLIS_RATE_AXIS_N;
  if (rate_axis && strcmp(rate_axis, "k") == 0)
    o->rate_axis = TRELLIS_RATE_AXIS_K;
  else if (rate_axis && strcmp(rate_axis, "n") != 0) {
    cli_error("--rate-axis: expected n or k, got '%s'", rate_axis);
    return CLI_USAGE;
  }
  if (orth) {
    if ((r = parse_int_list("--orth", orth, TRELLIS_HBLOCK, MAX_DIM, o->orths,
                            BENCH_MAX_LIST, &o->norths)) != CLI_OK)
      return r;
    for (int i = 0; i < o->norths; i++)
      if (o->orths[i] % TRELLIS_HBLOCK) {
        cli_error("--orth: %lld is not a multiple of %d",
                  (long long)o->orths[i], TRELLIS_HBLOCK);
        return CLI_USAGE;
      }
  } else if (pair) {
    o->orths[0] = 7168;
    o->norths = 1;
  }
  for (int i = 0; i < o->ncbs; i++)
    if (cli_codebook_is_sqg(o->cbs[i]))
      o->b12x = 1;
  o->b12x |= o->npairs > 0;

common:;
  long reps = 20;
  if (reps_text &&
      (r = cli_parse_int("--reps", reps_text, 1, 100000, &reps)) != CLI_OK)
    return r;
  o->reps = (int)reps;
  long warmup = (long)BENCH_WARMUP_MS;
  if (warmup_text && (r = cli_parse_int("--warmup-ms", warmup_text, 0, 60000,
                                        &warmup)) != CLI_OK)
    return r;
  o->warmup_ms = (double)warmup;
  if (force && (r = parse_force(force, &o->flags)) != CLI_OK)
    return r;
  if (o->with_generic && (o->flags & TRELLIS_PLAN_FORCE_GENERIC)) {
    cli_error("--with-generic: the rows already run with --force generic");
    return CLI_USAGE;
  }
  return CLI_PARSED;
}
