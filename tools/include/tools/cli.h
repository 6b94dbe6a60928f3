/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line support shared by the `trellis` and `trellis-bench`
 * programs: exit codes, one-line errors and the option parser.
 *
 * Error convention: every helper that fails prints exactly ONE line to stderr
 * ("trellis: <what>: <why>", naming the file, tensor or argument) and returns
 * a non-zero exit code, so callers only propagate the code. */
#ifndef TOOLS_CLI_H
#define TOOLS_CLI_H

#include "trellis.h"

#include <stddef.h>

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* Exit codes. */
#define CLI_OK 0
#define CLI_FAIL 1  /* the request was valid but could not be done */
#define CLI_USAGE 2 /* bad command line */

/* The library's wording of the two ways CUDA can be missing
 * (core/internal.h's TRL_NO_CUDA_BUILD and TRL_NO_CUDA_DEVICE, the same
 * text: tests/test_messages.c holds them equal). */
#define CLI_NO_CUDA_BUILD "libtrellis was built without CUDA"
#define CLI_NO_CUDA_DEVICE "no CUDA device is available"

/* ---- errors ------------------------------------------------------------ */

/* Prints "trellis: <message>" as one line on stderr. Control characters,
 * bytes that are not UTF-8 and invisible line-reordering marks in the
 * message (a newline included) are printed as "\xHH" (cli_escape). */
void cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* `text` made safe for a terminal into `buf` (`size` bytes, cut at a
 * character boundary when it does not fit): the library's escaping of its
 * own messages (trellis_last_error). Returns buf. For names and strings
 * read from files that a command prints. */
const char *cli_escape(const char *text, char *buf, size_t size);
/* Prints "trellis: <context>: <library detail>" for a failed library call
 * and returns CLI_FAIL. The context is left out when the detail already
 * names it. */
int cli_lib_error(trellis_status status, const char *context);

/* ---- command-line options ---------------------------------------------- */

typedef struct cli_option {
  const char *name;   /* "--output" */
  const char **value; /* receives the value; NULL for a flag */
  int *flag;          /* set to 1 for a flag; NULL for a valued option */
} cli_option;

/* Result of cli_parse besides CLI_USAGE. */
#define CLI_PARSED 0
#define CLI_HELP_SHOWN (-1)

/* Parses argv[1..] into options ("--name value" or "--name=value") and
 * positionals; argv[0] is the subcommand's name, used in messages ("try
 * 'trellis NAME --help'"). "--help"/"-h" prints `usage` to stdout and
 * returns CLI_HELP_SHOWN. A value given as the next argument must not look
 * like an option ("-x", "--x"; "--name=-x" passes one). Exactly `npos`
 * positionals are required;
 * `pos_names` names them for the error message. Returns CLI_PARSED or
 * CLI_USAGE. */
int cli_parse(int argc, char **argv, const char *usage, const cli_option *opts,
              size_t nopts, const char **pos, const char *const *pos_names,
              int npos);
/* The same for a command that takes any number of positionals, at most
 * `max_pos`: pos[0..*npos-1] receives them. */
int cli_parse_list(int argc, char **argv, const char *usage,
                   const cli_option *opts, size_t nopts, const char **pos,
                   int max_pos, int *npos);
/* Exit code for a non-CLI_PARSED parse result. */
int cli_parse_exit(int parse_result);

/* 1 when `text` starts as a plain number does: a digit, or '-' and a
 * digit. strtol and strtod alone also take leading spaces and a '+', which
 * an option value must not have. */
int cli_plain_number(const char *text);

/* Parses an integer option value in [min, max]: decimal digits with an
 * optional leading '-', nothing else (no spaces, no '+'); prints an error
 * naming `option`. */
int cli_parse_int(const char *option, const char *text, long min, long max,
                  long *out);

/* ---- codebooks and rates (the one table, format/codebooks.h) ----------- */

/* Which codebooks a parser takes: all, or the EXL3 ones (no SQG). */
#define CLI_CODEBOOKS_ALL 0
#define CLI_CODEBOOKS_EXL3 1

/* "mcg, mul1, ..." : the names of `which`, in table order, into buf. */
const char *cli_codebook_names(int which, char *buf, size_t cap);
/* The codebook named `text` (a name of the table, or a b12x alias) among
 * `which` into *out: 1, or 0 (nothing printed) when none has the name. */
int cli_codebook_lookup(const char *text, int which, trellis_codebook *out);
/* cli_codebook_lookup, printing "<option>: expected one of ..., got '...'"
 * when it fails. */
int cli_parse_codebook(const char *option, const char *text, int which,
                       trellis_codebook *out);
/* The number of codebooks of the table; codebook i (0 <= i < count) is
 * (trellis_codebook)i. */
int cli_codebook_count(void);
/* 1 for a codebook whose value depends on K (SQG). */
int cli_codebook_is_sqg(trellis_codebook cb);
/* 1 for a codebook b12x pairs use. */
int cli_codebook_pairs(trellis_codebook cb);
/* A rate K = "3" or "2.5": *bits its integer part, *half 1 for a
 * half-integer K. Only the forms N and N.5 (N in min..max); whether the
 * codebook takes it is trellis_codebook_rate_valid's. */
int cli_parse_rate(const char *option, const char *text, int min, int max,
                   int *bits, int *half);
/* "3" or "2.5" into buf (at least 8 bytes); returns buf. */
const char *cli_rate_text(int bits, int half, char *buf, size_t cap);

#endif
