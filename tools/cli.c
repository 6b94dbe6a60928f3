/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line support: one-line errors and the option parser (see cli.h). */
#include "tools/cli.h"
#include "core/internal.h"
#include "format/codebooks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------ */

const char *cli_escape(const char *text, char *buf, size_t size) {
  trl_escape_text(text, buf, size);
  return buf;
}

void cli_error(const char *fmt, ...) {
  char line[2048], shown[4 * sizeof line];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* One line, whatever the message holds: nothing in it reaches the
   * terminal raw. */
  fprintf(stderr, "trellis: %s\n", cli_escape(line, shown, sizeof shown));
}

int cli_lib_error(trellis_status status, const char *context) {
  const char *detail = trellis_last_error();
  if (detail == NULL || detail[0] == '\0')
    detail = trellis_status_string(status);
  char shown[4 * 1024]; /* the detail quotes names escaped: compare alike */
  if (context && context[0] &&
      strstr(detail, cli_escape(context, shown, sizeof shown)) == NULL)
    cli_error("%s: %s", context, detail);
  else
    cli_error("%s", detail);
  return CLI_FAIL;
}

/* ---- command-line options ---------------------------------------------- */

static const cli_option *find_option(const cli_option *opts, size_t nopts,
                                     const char *name, size_t len) {
  for (size_t i = 0; i < nopts; i++)
    if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
      return &opts[i];
  return NULL;
}

/* "-x" or "--x": an option, not a value ("-5" and "-" are values). */
static int looks_like_option(const char *v) {
  return v[0] == '-' && v[1] != '\0' && !(v[1] >= '0' && v[1] <= '9');
}

/* Options and up to max_pos positionals; `exact` names the error for one
 * positional too many (a fixed count, or a list's limit). */
static int parse_args(int argc, char **argv, const char *usage,
                      const cli_option *opts, size_t nopts, const char **pos,
                      int max_pos, int exact, int *npos) {
  int got = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage, stdout);
      return CLI_HELP_SHOWN;
    }
    if (strncmp(a, "--", 2) == 0 && a[2] != '\0') {
      const char *eq = strchr(a, '=');
      size_t len = eq ? (size_t)(eq - a) : strlen(a);
      const cli_option *o = find_option(opts, nopts, a, len);
      if (o == NULL) {
        cli_error("%s: unknown option '%.*s' (try 'trellis %s --help')",
                  argv[0], (int)len, a, argv[0]);
        return CLI_USAGE;
      }
      if (o->flag) {
        if (eq) {
          cli_error("%s: option %s takes no value", argv[0], o->name);
          return CLI_USAGE;
        }
        *o->flag = 1;
        continue;
      }
      const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (v == NULL || v[0] == '\0') {
        cli_error("%s: option %s needs a value", argv[0], o->name);
        return CLI_USAGE;
      }
      /* "--output --dense": the value forgotten, the next option taken for
       * it. A value that must start with '-' is written --output=-x. */
      if (!eq && looks_like_option(v)) {
        cli_error("%s: option %s needs a value, got the option '%s' (write "
                  "%s=%s if that is the value)",
                  argv[0], o->name, v, o->name, v);
        return CLI_USAGE;
      }
      *o->value = v;
      continue;
    }
    if (a[0] == '-' && a[1] != '\0') {
      cli_error("%s: unknown option '%s' (try 'trellis %s --help')", argv[0], a,
                argv[0]);
      return CLI_USAGE;
    }
    if (got >= max_pos) {
      if (exact)
        cli_error("%s: unexpected argument '%s' (try 'trellis %s --help')",
                  argv[0], a, argv[0]);
      else
        cli_error("%s: too many arguments at '%s' (at most %d)", argv[0], a,
                  max_pos);
      return CLI_USAGE;
    }
    pos[got++] = a;
  }
  *npos = got;
  return CLI_PARSED;
}

int cli_parse(int argc, char **argv, const char *usage, const cli_option *opts,
              size_t nopts, const char **pos, const char *const *pos_names,
              int npos) {
  int got = 0;
  int r = parse_args(argc, argv, usage, opts, nopts, pos, npos, 1, &got);
  if (r == CLI_PARSED && got < npos) {
    cli_error("%s: missing argument %s (try 'trellis %s --help')", argv[0],
              pos_names[got], argv[0]);
    return CLI_USAGE;
  }
  return r;
}

int cli_parse_list(int argc, char **argv, const char *usage,
                   const cli_option *opts, size_t nopts, const char **pos,
                   int max_pos, int *npos) {
  *npos = 0;
  return parse_args(argc, argv, usage, opts, nopts, pos, max_pos, 0, npos);
}

int cli_parse_exit(int parse_result) {
  return parse_result == CLI_HELP_SHOWN ? CLI_OK : CLI_USAGE;
}

int cli_plain_number(const char *text) {
  const char *digits = text + (text[0] == '-');
  return digits[0] >= '0' && digits[0] <= '9';
}

static int codebook_in(int which, int cb) {
  return trl_codebook_known(cb) &&
         (which != CLI_CODEBOOKS_EXL3 || !trl_codebook_is_sqg(cb));
}

const char *cli_codebook_names(int which, char *buf, size_t cap) {
  size_t used = 0;
  if (cap > 0)
    buf[0] = '\0';
  for (int cb = 0; cb < TRL_CB_COUNT && used < cap; cb++) {
    if (!codebook_in(which, cb))
      continue;
    const int r = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
                           trl_codebook_name_of(cb));
    if (r < 0)
      break;
    used += (size_t)r;
  }
  return buf;
}

int cli_codebook_lookup(const char *text, int which, trellis_codebook *out) {
  for (int cb = 0; cb < TRL_CB_COUNT; cb++) {
    const char *alias = trl_codebook_alias(cb);
    if (codebook_in(which, cb) &&
        (strcmp(text, trl_codebook_name_of(cb)) == 0 ||
         (alias[0] && strcmp(text, alias) == 0))) {
      *out = (trellis_codebook)cb;
      return 1;
    }
  }
  return 0;
}

int cli_parse_codebook(const char *option, const char *text, int which,
                       trellis_codebook *out) {
  if (cli_codebook_lookup(text, which, out))
    return CLI_OK;
  char names[128];
  cli_error("%s: expected one of %s, got '%s'", option,
            cli_codebook_names(which, names, sizeof names), text);
  return CLI_USAGE;
}

int cli_codebook_count(void) { return TRL_CB_COUNT; }

int cli_codebook_is_sqg(trellis_codebook cb) {
  return trl_codebook_is_sqg((int)cb);
}

int cli_codebook_pairs(trellis_codebook cb) {
  return trl_codebook_pairs((int)cb);
}

int cli_parse_rate(const char *option, const char *text, int min, int max,
                   int *bits, int *half) {
  char *end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  int h = 0;
  if (end != text && strcmp(end, ".5") == 0)
    h = 1;
  else if (end != text && (strcmp(end, ".0") == 0 || *end == '\0'))
    h = 0;
  else
    end = NULL;
  if (errno != 0 || end == NULL || !cli_plain_number(text) || text[0] == '-' ||
      v < min || v > max) {
    cli_error("%s: expected a rate N or N.5 with N in [%d, %d], got '%s'",
              option, min, max, text);
    return CLI_USAGE;
  }
  *bits = (int)v;
  *half = h;
  return CLI_OK;
}

const char *cli_rate_text(int bits, int half, char *buf, size_t cap) {
  snprintf(buf, cap, half ? "%d.5" : "%d", bits);
  return buf;
}

int cli_parse_int(const char *option, const char *text, long min, long max,
                  long *out) {
  char *end = NULL;
  errno = 0;
  const int plain = cli_plain_number(text);
  long v = plain ? strtol(text, &end, 10) : 0;
  if (!plain || errno != 0 || end == text || *end != '\0' || v < min ||
      v > max) {
    cli_error("%s: expected an integer in [%ld, %ld], got '%s'", option, min,
              max, text);
    return CLI_USAGE;
  }
  *out = v;
  return CLI_OK;
}
