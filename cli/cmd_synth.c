/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis synth PRESET OUT_DIR`: a synthetic EXL3 model directory
 * (the generator is tools/synth_model.c). */
#include "cli_util.h"
#include "tools/synth_model.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage[] =
    "usage: trellis synth PRESET OUT_DIR [--bits B] [--head-bits H]\n"
    "          [--codebook 3inst|mcg|mul1] [--blocks N] [--vocab N]\n"
    "          [--seed S] [--shard-size MB] [--force]\n"
    "\n"
    "Writes a synthetic EXL3 model directory laid out like ExLlamaV3's\n"
    "output: config.json with its quantization_config, shards\n"
    "model-XXXXX-of-YYYYY.safetensors and model.safetensors.index.json,\n"
    "the architecture's tensor names, fp16 embedding and norms, and EXL3\n"
    "linear layers with random trellis words. Presets (k x n = in x out):\n"
    "  llama-3.1-8b   hidden 4096, intermediate 14336, 32 blocks, 32 heads,\n"
    "                 8 KV heads of 128, vocab 128256\n"
    "  llama-3.1-70b  hidden 8192, intermediate 28672, 80 blocks, 64 heads,\n"
    "                 8 KV heads of 128, vocab 128256\n"
    "  glm-tp4        one rank of a GLM-style tensor-parallel-4 model,\n"
    "                 hidden 6144, 78 blocks of self_attn.q_b_proj\n"
    "                 2048x4096, mlp.gate_up_proj 6144x1024 and\n"
    "                 mlp.down_proj 512x6144, vocab 37888 (a quarter)\n"
    "\n"
    "  --bits B        average K of the blocks' linear layers, 1..8, weighted\n"
    "                  by size; each layer gets one of the two rates around\n"
    "                  B, from 1, 2, .., 8 and, with mul1, 1.5, 2.5, 3.5\n"
    "                  (ExLlamaV3 1.6's steps; default 4)\n"
    "  --head-bits H   lm_head: 1..8 (EXL3), 1.5, 2.5, 3.5 (mul1) or 16\n"
    "                  (fp16) (default 6)\n"
    "  --codebook C    every EXL3 layer's codebook (default mcg)\n"
    "  --blocks N      the first N blocks only (default: all)\n"
    "  --vocab N       vocabulary size, a multiple of 128 (default: the\n"
    "                  preset's)\n"
    "  --seed S        RNG seed (default 0)\n"
    "  --shard-size MB most MiB of tensors per shard; a module is never\n"
    "                  split (default 8192)\n"
    "  --force         replace an existing OUT_DIR that holds a model\n"
    "\n"
    "The model is written to a temporary directory beside OUT_DIR and\n"
    "renamed into place at the end: an interrupted or failed run leaves\n"
    "nothing. Progress is shown when stderr is a terminal.\n";

/* The signal that interrupted the write, 0 while none did. */
static volatile sig_atomic_t stop_signal = 0;

static void on_signal(int sig) { stop_signal = sig; }

typedef struct progress {
  int shown;
  int last_permille;
  struct timespec last;
} progress;

static void show_progress(void *ctx, uint64_t done, uint64_t total) {
  progress *p = ctx;
  const int permille =
      total ? (int)(1000.0 * (double)done / (double)total) : 1000;
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  const double since = (double)(now.tv_sec - p->last.tv_sec) +
                       1e-9 * (double)(now.tv_nsec - p->last.tv_nsec);
  if (permille == p->last_permille || (since < 0.2 && done < total))
    return;
  p->last_permille = permille;
  p->last = now;
  p->shown = 1;
  fprintf(stderr, "\rtrellis synth: %.3f of %.3f GB (%.1f%%)   ",
          (double)done / 1e9, (double)total / 1e9, permille / 10.0);
  fflush(stderr);
}

static int parse_bits(const char *text, double *out) {
  char *end = NULL;
  errno = 0;
  double v = cli_plain_number(text) ? strtod(text, &end) : 0;
  if (!cli_plain_number(text) || errno != 0 || end == text || *end != '\0' ||
      !isfinite(v) || v < TRELLIS_MIN_BITS || v > TRELLIS_MAX_BITS) {
    cli_error("--bits: expected a number in [1, 8], got '%s'", text);
    return CLI_USAGE;
  }
  *out = v;
  return CLI_OK;
}

static void print_summary(const synth_model *m, const char *dir) {
  int count[2 * TRELLIS_MAX_BITS + 1] = {0}; /* by rate in half-bits */
  int head_bits = 16, head_half = 0;
  char rate[16];
  for (size_t i = 0; i < m->module_count; i++) {
    const synth_module *mod = &m->modules[i];
    if (mod->kind == SYNTH_LINEAR && mod->block >= 0)
      count[2 * mod->bits + mod->half]++;
    if (mod->role == SYNTH_ROLE_HEAD) {
      head_bits = mod->bits;
      head_half = mod->half;
    }
  }
  printf("%s: %s, %d block%s, vocab %lld, codebook %s\n", dir, m->preset->name,
         m->opt.blocks, m->opt.blocks == 1 ? "" : "s", (long long)m->opt.vocab,
         trellis_codebook_name(m->opt.codebook));
  printf("  EXL3 layers: %lld (", (long long)m->linear_count);
  for (int h = 2, first = 1; h <= 2 * TRELLIS_MAX_BITS; h++)
    if (count[h]) {
      printf("%sK%s: %d", first ? "" : ", ",
             cli_rate_text(h / 2, h % 2, rate, sizeof rate), count[h]);
      first = 0;
    }
  if (head_bits == 16)
    printf("; lm_head fp16)\n");
  else
    printf("; lm_head K%s)\n",
           cli_rate_text(head_bits, head_half, rate, sizeof rate));
  printf("  average K of the blocks: %.4f (asked %g)\n", m->bits, m->opt.bits);
  printf("  %d shard%s, %llu bytes of tensors (%.3f GB)\n", m->shard_count,
         m->shard_count == 1 ? "" : "s", (unsigned long long)m->total_bytes,
         (double)m->total_bytes / 1e9);
}

int cmd_synth(int argc, char **argv) {
  const char *bits = NULL, *head_bits = NULL, *codebook = NULL, *blocks = NULL,
             *vocab = NULL, *seed = NULL, *shard = NULL;
  int force = 0;
  const char *pos[2];
  static const char *const names[] = {"PRESET", "OUT_DIR"};
  const cli_option opts[] = {
      {"--bits", &bits, NULL},         {"--head-bits", &head_bits, NULL},
      {"--codebook", &codebook, NULL}, {"--blocks", &blocks, NULL},
      {"--vocab", &vocab, NULL},       {"--seed", &seed, NULL},
      {"--shard-size", &shard, NULL},  {"--force", NULL, &force}};
  int r = cli_parse(argc, argv, usage, opts, sizeof opts / sizeof opts[0], pos,
                    names, 2);
  if (r != CLI_PARSED)
    return cli_parse_exit(r);

  synth_options o;
  synth_options_init(&o);
  o.preset = pos[0];
  long v = 0;
  if (synth_preset_find(o.preset) == NULL) {
    cli_error("synth: unknown preset '%s' (presets: llama-3.1-8b, "
              "llama-3.1-70b, glm-tp4)",
              o.preset);
    return CLI_USAGE;
  }
  if (bits && (r = parse_bits(bits, &o.bits)) != CLI_OK)
    return r;
  if (codebook &&
      (r = cli_parse_codebook("--codebook", codebook, CLI_CODEBOOKS_EXL3,
                              &o.codebook)) != CLI_OK)
    return r;
  if (head_bits) {
    if ((r = cli_parse_rate("--head-bits", head_bits, 1, 16, &o.head_bits,
                            &o.head_half)) != CLI_OK)
      return r;
    if ((o.head_bits > TRELLIS_MAX_BITS || o.head_half) &&
        !(o.head_bits == 16 && !o.head_half) &&
        !trellis_codebook_rate_valid(o.codebook, o.head_bits, o.head_half)) {
      cli_error("--head-bits: expected 1..8 (EXL3), 16 (fp16), or with "
                "mul1 1.5, 2.5, 3.5; got '%s' (codebook %s)",
                head_bits, trellis_codebook_name(o.codebook));
      return CLI_USAGE;
    }
  }
  if (blocks) {
    const int most = synth_preset_find(o.preset)->blocks;
    if ((r = cli_parse_int("--blocks", blocks, 1, most, &v)) != CLI_OK)
      return r;
    o.blocks = (int)v;
  }
  if (vocab) {
    if ((r = cli_parse_int("--vocab", vocab, TRELLIS_HBLOCK, 1L << 22, &v)) !=
        CLI_OK)
      return r;
    if (v % TRELLIS_HBLOCK != 0) {
      cli_error("--vocab: %ld is not a multiple of %d (the lm_head's n)", v,
                TRELLIS_HBLOCK);
      return CLI_USAGE;
    }
    o.vocab = v;
  }
  if (seed) {
    if ((r = cli_parse_int("--seed", seed, 0, 0x7FFFFFFFL, &v)) != CLI_OK)
      return r;
    o.seed = (uint64_t)v;
  }
  if (shard) {
    if ((r = cli_parse_int("--shard-size", shard, 1, 1L << 20, &v)) != CLI_OK)
      return r;
    o.shard_bytes = (uint64_t)v << 20;
  }

  synth_model m;
  trellis_clear_error();
  trellis_status st = synth_model_plan(&o, &m);
  if (st != TRELLIS_OK) {
    synth_model_free(&m);
    return cli_lib_error(st, "synth");
  }

  /* An interrupt stops the write between chunks, so the temporary
   * directory is removed; a file-size limit makes writes fail (EFBIG)
   * instead of killing the process. */
  static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};
  struct sigaction sa, old[4];
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 4; i++) {
    sigaction(caught[i], NULL, &old[i]);
    sa.sa_handler = caught[i] == SIGXFSZ ? SIG_IGN : on_signal;
    if (old[i].sa_handler != SIG_IGN) /* e.g. nohup's SIGHUP stays ignored */
      sigaction(caught[i], &sa, NULL);
  }

  progress p = {0, -1, {0, 0}};
  const int tty = isatty(STDERR_FILENO);
  st = synth_model_write(&m, pos[1], force, &stop_signal,
                         tty ? show_progress : NULL, &p);
  if (p.shown)
    fputc('\n', stderr);
  for (int i = 0; i < 4; i++)
    sigaction(caught[i], &old[i], NULL);

  if (st == TRELLIS_OK)
    print_summary(&m, pos[1]);
  synth_model_free(&m);
  if (st != TRELLIS_OK) {
    r = cli_lib_error(st, pos[1]);
    if (stop_signal) /* die of the signal, as without the handler */
      raise(stop_signal);
    return r;
  }
  return CLI_OK;
}
