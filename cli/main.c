/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis`: the command-line tool of libtrellis. Dispatches to one
 * subcommand per file (cmd_*.c); `bench` is the benchmark's entry point
 * (bench/, also the trellis-bench program). */
#include "cli_util.h"
#include "bench_main.h"

#include <signal.h>
#include <string.h>

static const char usage_text[] =
    "usage: trellis <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  info PATH                      quantization config and EXL3 layers of\n"
    "                                 a .safetensors file or model directory\n"
    "  info PATH --plan [--max-m M]   per layer the GPU path and buffer bytes\n"
    "                                 for m = 1..M, and what one stream of\n"
    "                                 the model must provision (needs CUDA)\n"
    "  info PATH --tp N [--split n|k] each layer's bytes on N tensor-parallel\n"
    "                                 ranks, and each rank's total\n"
    "  decode PATH LAYER --output W.npy [--dense]\n"
    "                                 W_hat fp16 [k, n] (bit-exact), or with\n"
    "                                 --dense the original-basis weight fp32\n"
    "  forward PATH LAYER --input X.npy --output Y.npy\n"
    "          [--device auto|cpu|cuda] [--out-dtype f32|f16] [--threads N]\n"
    "                                 y = layer(x); X fp16/fp32 [m, k] or [k]\n"
    "          [--tp N --rank R --split n|k]\n"
    "                                 rank R's column slice or row partial\n"
    "  demo [--device auto|cpu|cuda] [--reps N] [--threads N]\n"
    "                                 synthetic K6/MCG 4096x4096 layer on the\n"
    "                                 best device, checked against a "
    "reference\n"
    "  synth PRESET OUT_DIR [--bits B] [--head-bits H] [--codebook C]\n"
    "          [--blocks N] [--vocab N] [--seed S] [--shard-size MB]\n"
    "          [--force]\n"
    "                                 a synthetic EXL3 model directory\n"
    "                                 (llama-3.1-8b, llama-3.1-70b, glm-tp4)\n"
    "  bench [...]                    GPU benchmark (CUDA builds; the same as\n"
    "                                 the trellis-bench program)\n"
    "  help [COMMAND]                 this text, or what COMMAND --help says\n"
    "  --version                      library version and CUDA support\n"
    "\n"
    "'trellis <command> --help' describes one command.\n";

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"info", cmd_info}, {"decode", cmd_decode}, {"forward", cmd_forward},
    {"demo", cmd_demo}, {"synth", cmd_synth},   {"bench", bench_main},
};

int main(int argc, char **argv) {
  /* A file-size limit (ulimit -f) makes an output write fail with EFBIG,
   * reported and cleaned up, instead of killing the tool mid-write. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) {
    cli_error("missing command (try 'trellis help')");
    return CLI_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "help") == 0 && argc >= 3) {
    /* `trellis help CMD` is `trellis CMD --help` */
    if (argc > 3) {
      cli_error("help: one command at a time, got %d", argc - 2);
      return CLI_USAGE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
      if (strcmp(argv[2], commands[i].name) == 0) {
        char help_flag[] = "--help";
        char *args[] = {argv[2], help_flag, NULL};
        return commands[i].run(2, args);
      }
    char shown[256];
    cli_error("help: unknown command '%s' (commands: info, decode, forward, "
              "demo, synth, bench)",
              cli_escape(argv[2], shown, sizeof shown));
    return CLI_USAGE;
  }
  if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 ||
      strcmp(name, "-h") == 0) {
    fputs(usage_text, stdout);
    return CLI_OK;
  }
  if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
    printf("trellis %s (libtrellis %s, CUDA %s)\n", TRELLIS_VERSION_STRING,
           trellis_version_string(),
           trellis_cuda_built() ? "enabled" : "not built");
    return CLI_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(name, commands[i].name) == 0)
      return commands[i].run(argc - 1, argv + 1);
  cli_error("unknown command '%s' (try 'trellis help')", name);
  return CLI_USAGE;
}
