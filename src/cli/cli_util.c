/* Shared helpers of the `trellis` CLI: one-line errors, option parsing,
 * model/layer and .npy access, CPU forward, metrics, RNG. */
#include "cli_util.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------ */

void cli_error(const char *fmt, ...) {
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  /* One line, whatever the message holds. */
  for (char *p = line; *p; p++)
    if (*p == '\n' || *p == '\r')
      *p = ' ';
  fprintf(stderr, "trellis: %s\n", line);
}

int cli_lib_error(trellis_status status, const char *context) {
  const char *detail = trellis_last_error();
  if (detail == NULL || detail[0] == '\0')
    detail = trellis_status_string(status);
  if (context && context[0] && strstr(detail, context) == NULL)
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

int cli_parse(int argc, char **argv, const char *usage, const cli_option *opts,
              size_t nopts, const char **pos, const char *const *pos_names,
              int npos) {
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
      *o->value = v;
      continue;
    }
    if (a[0] == '-' && a[1] != '\0') {
      cli_error("%s: unknown option '%s' (try 'trellis %s --help')", argv[0], a,
                argv[0]);
      return CLI_USAGE;
    }
    if (got >= npos) {
      cli_error("%s: unexpected argument '%s' (try 'trellis %s --help')",
                argv[0], a, argv[0]);
      return CLI_USAGE;
    }
    pos[got++] = a;
  }
  if (got < npos) {
    cli_error("%s: missing argument %s (try 'trellis %s --help')", argv[0],
              pos_names[got], argv[0]);
    return CLI_USAGE;
  }
  return CLI_PARSED;
}

int cli_parse_exit(int parse_result) {
  return parse_result == CLI_HELP_SHOWN ? CLI_OK : CLI_USAGE;
}

int cli_parse_int(const char *option, const char *text, long min, long max,
                  long *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) {
    cli_error("%s: expected an integer in [%ld, %ld], got '%s'", option, min,
              max, text);
    return CLI_USAGE;
  }
  *out = v;
  return CLI_OK;
}

/* ---- models and layers -------------------------------------------------- */

int cli_open_layer(const char *path, const char *layer_name,
                   trellis_model **model, trellis_layer *layer) {
  trellis_model *m = NULL;
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &m);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  st = trellis_model_find_layer(m, layer_name, layer);
  if (st == TRELLIS_ERR_NOT_FOUND) {
    size_t count = trellis_model_layer_count(m);
    cli_error("%s: no EXL3 layer named '%s' (%zu layer%s; list them with "
              "'trellis info %s')",
              path, layer_name, count, count == 1 ? "" : "s", path);
    trellis_model_close(m);
    return CLI_FAIL;
  }
  if (st != TRELLIS_OK) {
    char ctx[1024];
    snprintf(ctx, sizeof ctx, "%s: layer '%s'", path, layer_name);
    trellis_model_close(m);
    return cli_lib_error(st, ctx);
  }
  *model = m;
  return CLI_OK;
}

/* ---- .npy --------------------------------------------------------------- */

int cli_read_npy(const char *path, trellis_npy *out) {
  memset(out, 0, sizeof *out);
  trellis_clear_error();
  trellis_status st = trellis_npy_read(path, out);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, path);
}

int cli_write_npy(const char *path, trellis_dtype dtype, int ndim,
                  const int64_t *shape, const void *data) {
  trellis_clear_error();
  trellis_status st = trellis_npy_write(path, dtype, ndim, shape, data);
  return st == TRELLIS_OK ? CLI_OK : cli_lib_error(st, path);
}

/* ---- devices --------------------------------------------------------------
 */

int cli_parse_device(const char *text, cli_device *out) {
  if (text == NULL || strcmp(text, "auto") == 0)
    *out = CLI_DEV_AUTO;
  else if (strcmp(text, "cpu") == 0)
    *out = CLI_DEV_CPU;
  else if (strcmp(text, "cuda") == 0)
    *out = CLI_DEV_CUDA;
  else {
    cli_error("--device: expected auto, cpu or cuda, got '%s'", text);
    return CLI_USAGE;
  }
  return CLI_OK;
}

int cli_resolve_device(cli_device requested, cli_device *out) {
  int count = trellis_cuda_device_count();
  if (requested == CLI_DEV_AUTO) {
    *out = count > 0 ? CLI_DEV_CUDA : CLI_DEV_CPU;
    return CLI_OK;
  }
  if (requested == CLI_DEV_CUDA && !trellis_cuda_built()) {
    cli_error("--device cuda: this trellis was built without CUDA (install "
              "the CUDA toolkit and rebuild, or use --device cpu)");
    return CLI_FAIL;
  }
  if (requested == CLI_DEV_CUDA && count <= 0) {
    cli_error("--device cuda: no usable CUDA device found (use --device cpu)");
    return CLI_FAIL;
  }
  *out = requested;
  return CLI_OK;
}

int cli_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
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

/* ---- numbers ------------------------------------------------------------ */

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

uint64_t cli_rng_next(cli_rng *r) {
  uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double cli_rng_uniform(cli_rng *r) {
  return (double)(cli_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double cli_rng_normal(cli_rng *r) {
  /* Box-Muller; u1 in (0, 1] keeps log finite. */
  double u1 = 1.0 - cli_rng_uniform(r);
  double u2 = cli_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
