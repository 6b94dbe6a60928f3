/* SPDX-License-Identifier: Apache-2.0 */
/* The benchmark's targets: read from targets.json (what each target scores
 * and its limit) and evaluated on the measured rows; the verdicts close the
 * run. Plain C (both builds). */
#include "bench.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- reading --------------------------------------------------------------
 */

static const struct {
  const char *name;
  bench_rule rule;
} rules[] = {
    {"read_peak", BENCH_RULE_READ_PEAK},
    {"floor", BENCH_RULE_FLOOR},
    {"faster_than_cublas", BENCH_RULE_FASTER_CUBLAS},
    {"cublas_ratio", BENCH_RULE_CUBLAS_RATIO},
    {"decode_rate", BENCH_RULE_DECODE_RATE},
    {"launch_overhead", BENCH_RULE_LAUNCH_OVERHEAD},
    {"fp8_ratio", BENCH_RULE_FP8_RATIO},
    {"generic_ratio", BENCH_RULE_GENERIC_RATIO},
    {"growth", BENCH_RULE_GROWTH},
};
#define NRULES ((int)(sizeof rules / sizeof rules[0]))

/* A rule's limit object, every key required (JSON_STRICT: no others). */
static int unpack_limit(json_t *limit, bench_target_def *d, json_error_t *e) {
  switch (d->rule) {
  case BENCH_RULE_READ_PEAK:
    return json_unpack_ex(limit, e, JSON_STRICT, "{s:F}", "pct", &d->pct);
  case BENCH_RULE_FLOOR:
    return json_unpack_ex(limit, e, JSON_STRICT, "{s:F, s:F}", "fraction",
                          &d->fraction, "slack_us", &d->slack_us);
  case BENCH_RULE_FASTER_CUBLAS: {
    json_int_t from = 0;
    int r =
        json_unpack_ex(limit, e, JSON_STRICT, "{s?I}", "growth_from_m", &from);
    d->growth_from_m = (int64_t)from;
    return r;
  }
  case BENCH_RULE_CUBLAS_RATIO:
    return json_unpack_ex(limit, e, JSON_STRICT, "{s:F}", "ratio", &d->ratio);
  case BENCH_RULE_DECODE_RATE: /* no pct: the cap alone */
    d->pct = INFINITY;
    return json_unpack_ex(limit, e, JSON_STRICT, "{s?F, s:F, s?b}", "pct",
                          &d->pct, "cap_tweights", &d->cap_tweights,
                          "monotonic", &d->monotonic);
  case BENCH_RULE_LAUNCH_OVERHEAD:
    return json_unpack_ex(limit, e, JSON_STRICT, "{s:F, s:F}", "ratio",
                          &d->ratio, "slack_us", &d->slack_us);
  case BENCH_RULE_FP8_RATIO:
  case BENCH_RULE_GENERIC_RATIO:
    return json_unpack_ex(limit, e, JSON_STRICT, "{s:F}", "ratio", &d->ratio);
  case BENCH_RULE_GROWTH: {
    json_int_t from = 0;
    int r = json_unpack_ex(limit, e, JSON_STRICT, "{s:I, s:F}", "from_m", &from,
                           "ratio", &d->ratio);
    d->from_m = (int64_t)from;
    if (r == 0 && d->from_m < 1) {
      bench_sfmt(e->text, sizeof e->text, "from_m must be >= 1");
      return -1;
    }
    return r;
  }
  }
  return -1;
}

/* "KxN" into *shape. */
static int parse_target_shape(const char *text, bench_shape *shape) {
  long long k = 0, n = 0;
  char tail = '\0';
  if (sscanf(text, "%lldx%lld%c", &k, &n, &tail) != 2 || k < 1 || n < 1)
    return CLI_FAIL;
  shape->k = k;
  shape->n = n;
  return CLI_OK;
}

/* The rows filter; absent keys select every row. */
static int unpack_rows(json_t *rows, bench_target_def *d, const char *path) {
  json_error_t e;
  const char *cb = NULL;
  json_t *shapes = NULL;
  json_int_t m_min = 1, m_max = INT64_MAX;
  d->cb = -1;
  if (rows && json_unpack_ex(rows, &e, JSON_STRICT,
                             "{s?i, s?i, s?i, s?s, s?I, s?I, s?F, s?F, s?o}",
                             "bits", &d->bits, "bits_min", &d->bits_min,
                             "bits_max", &d->bits_max, "codebook", &cb, "m_min",
                             &m_min, "m_max", &m_max, "min_weight_bytes",
                             &d->min_bytes, "max_weight_bytes", &d->max_bytes,
                             "shapes", &shapes) != 0) {
    cli_error("bench: %s: target %d: rows: %s", path, d->id, e.text);
    return CLI_FAIL;
  }
  if (shapes) {
    if (!json_is_array(shapes) || json_array_size(shapes) == 0 ||
        json_array_size(shapes) > BENCH_TARGET_SHAPES) {
      cli_error("bench: %s: target %d: rows: shapes: expected 1..%d \"KxN\" "
                "strings",
                path, d->id, BENCH_TARGET_SHAPES);
      return CLI_FAIL;
    }
    for (size_t i = 0; i < json_array_size(shapes); i++) {
      const char *text = json_string_value(json_array_get(shapes, i));
      if (text == NULL ||
          parse_target_shape(text, &d->shapes[d->nshapes++]) != CLI_OK) {
        cli_error("bench: %s: target %d: rows: shapes[%zu]: expected "
                  "\"KxN\", e.g. \"8192x28672\"",
                  path, d->id, i);
        return CLI_FAIL;
      }
    }
  }
  d->m_min = (int64_t)m_min;
  d->m_max = (int64_t)m_max;
  if (cb) {
    trellis_codebook c;
    if (cli_codebook_lookup(cb, CLI_CODEBOOKS_EXL3, &c))
      d->cb = (int)c;
    if (d->cb < 0) {
      cli_error("bench: %s: target %d: rows: unknown codebook '%s'", path,
                d->id, cb);
      return CLI_FAIL;
    }
  }
  return CLI_OK;
}

static int parse_target(json_t *t, const char *path, int index,
                        bench_target_def *d) {
  json_error_t e;
  json_t *rows = NULL, *limit = NULL;
  const char *what = NULL, *rule = NULL;
  memset(d, 0, sizeof *d);
  if (json_unpack_ex(t, &e, JSON_STRICT, "{s:i, s?b, s:s, s?o, s:s, s?o}", "id",
                     &d->id, "stretch", &d->stretch, "target", &what, "rows",
                     &rows, "rule", &rule, "limit", &limit) != 0) {
    cli_error("bench: %s: targets[%d]: %s", path, index, e.text);
    return CLI_FAIL;
  }
  bench_sfmt(d->what, sizeof d->what, "%s", what);
  int found = 0;
  for (int i = 0; i < NRULES && !found; i++)
    if (strcmp(rule, rules[i].name) == 0) {
      d->rule = rules[i].rule;
      found = 1;
    }
  if (!found) {
    cli_error("bench: %s: target %d: unknown rule '%s'", path, d->id, rule);
    return CLI_FAIL;
  }
  if (unpack_rows(rows, d, path) != CLI_OK)
    return CLI_FAIL;
  json_t *empty = json_object();
  int r = unpack_limit(limit ? limit : empty, d, &e);
  json_decref(empty);
  if (r != 0) {
    cli_error("bench: %s: target %d: limit of rule %s: %s", path, d->id, rule,
              e.text);
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int parse_root(json_t *root, const char *path, bench_targets *out) {
  json_error_t e;
  json_t *list = NULL;
  const char *source = "targets.json";
  memset(out, 0, sizeof *out);
  bench_sfmt(out->path, sizeof out->path, "%s", path);
  if (json_unpack_ex(root, &e, 0, "{s?s, s:o}", "source", &source, "targets",
                     &list) != 0 ||
      !json_is_array(list)) {
    cli_error("bench: %s: %s", path,
              list ? "\"targets\" is not an array" : e.text);
    return CLI_FAIL;
  }
  bench_sfmt(out->source, sizeof out->source, "%s", source);
  if (json_array_size(list) > BENCH_MAX_TARGETS) {
    cli_error("bench: %s: at most %d targets", path, BENCH_MAX_TARGETS);
    return CLI_FAIL;
  }
  for (size_t i = 0; i < json_array_size(list); i++)
    if (parse_target(json_array_get(list, i), path, (int)i,
                     &out->def[out->count++]) != CLI_OK)
      return CLI_FAIL;
  return CLI_OK;
}

int bench_targets_parse(const char *text, const char *path,
                        bench_targets *out) {
  json_error_t e;
  json_t *root = json_loads(text, 0, &e);
  if (root == NULL) {
    cli_error("bench: %s: line %d: %s", path, e.line, e.text);
    return CLI_FAIL;
  }
  int r = parse_root(root, path, out);
  json_decref(root);
  return r;
}

static int load_file(const char *path, bench_targets *out) {
  json_error_t e;
  json_t *root = json_load_file(path, 0, &e);
  if (root == NULL) {
    if (e.line > 0)
      cli_error("bench: %s: line %d: %s", path, e.line, e.text);
    else /* the text names the file */
      cli_error("bench: targets: %s", e.text);
    return CLI_FAIL;
  }
  int r = parse_root(root, path, out);
  json_decref(root);
  return r;
}

int bench_targets_load(const char *path, bench_targets *out) {
  if (path)
    return load_file(path, out);
  /* The installed file, found from the executable (the install is
   * relocatable), then the source tree's. */
  char exe[4096], installed[4200] = "";
  ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len > 0) {
    exe[len] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash)
      *slash = '\0';
    bench_sfmt(installed, sizeof installed, "%s/%s", exe,
               TRELLIS_BENCH_TARGETS_FROM_EXE);
    if (access(installed, R_OK) == 0)
      return load_file(installed, out);
  }
  if (access(TRELLIS_BENCH_TARGETS, R_OK) == 0)
    return load_file(TRELLIS_BENCH_TARGETS, out);
  cli_error("bench: no targets file (looked for %s and %s; give --targets "
            "FILE)",
            installed[0] ? installed : TRELLIS_BENCH_TARGETS_FROM_EXE,
            TRELLIS_BENCH_TARGETS);
  return CLI_FAIL;
}

/* ---- evaluation -----------------------------------------------------------
 */

static void row_name(const bench_row *r, char *buf, size_t size) {
  bench_sfmt(buf, size, "%lldx%lld K%d %s M=%lld", (long long)r->k,
             (long long)r->n, r->bits, trellis_codebook_name(r->cb),
             (long long)r->m);
}

static int shape_selected(const bench_target_def *d, const bench_row *r) {
  if (d->nshapes == 0)
    return 1;
  for (int i = 0; i < d->nshapes; i++)
    if (d->shapes[i].k == r->k && d->shapes[i].n == r->n)
      return 1;
  return 0;
}

static int row_selected(const bench_target_def *d, const bench_row *r) {
  return r->flags == 0 && !bench_row_b12x(r) && !r->half &&
         (d->bits == 0 || r->bits == d->bits) &&
         (d->bits_min == 0 || r->bits >= d->bits_min) &&
         (d->bits_max == 0 || r->bits <= d->bits_max) &&
         (d->cb < 0 || (int)r->cb == d->cb) && r->m >= d->m_min &&
         r->m <= d->m_max && r->weight_bytes >= d->min_bytes &&
         (d->max_bytes <= 0.0 || r->weight_bytes < d->max_bytes) &&
         shape_selected(d, r);
}

/* The row of the same layer, codebook and flags at M = m and `bits` bits;
 * NULL when it was not run. */
static const bench_row *partner(const bench_results *res, const bench_row *r,
                                int64_t m, int bits) {
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *s = &res->rows[i];
    if (s->k == r->k && s->n == r->n && s->cb == r->cb &&
        s->flags == r->flags && s->m == m && s->bits == bits && !s->half)
      return s;
  }
  return NULL;
}

/* Whether a selected row has what its rule compares it with. */
static int row_scorable(const bench_target_def *d, const bench_results *res,
                        const bench_row *r) {
  switch (d->rule) {
  case BENCH_RULE_FP8_RATIO:
    return !isnan(r->fp8.us);
  case BENCH_RULE_GENERIC_RATIO:
    return !isnan(r->generic_us);
  case BENCH_RULE_GROWTH:
    return partner(res, r, d->from_m, r->bits) != NULL;
  default:
    return 1;
  }
}

/* A target over rows: each row gets a score, <= 1 meets it (bigger = worse);
 * failed checks always miss. Selected rows without the figure the rule
 * needs are `skipped`. */
typedef struct tally {
  int rows, missed, skipped;
  const bench_row *worst;
  double worst_score;
} tally;

static void tally_add(tally *t, const bench_row *r, double score) {
  if (!r->check_ok || isnan(score))
    score = INFINITY;
  t->rows++;
  if (!(score <= 1.0))
    t->missed++;
  if (t->worst == NULL || score > t->worst_score) {
    t->worst = r;
    t->worst_score = score;
  }
}

/* Floor of a row in microseconds: its weight bytes at the read peak. */
static double floor_us(const bench_row *r, double peak) {
  return r->weight_bytes / (peak * 1e9) * 1e6;
}

static double floor_limit(const bench_target_def *d, const bench_row *r,
                          double peak) {
  const double f = floor_us(r, peak);
  return fmax(f / d->fraction, f + d->slack_us);
}

/* The decode_rate rule's need in T decoded weights/s at K bits. */
static double decode_need(const bench_target_def *d, double peak, int bits) {
  return fmin(d->pct / 100.0 * peak * 1e9 * 8.0 / bits / 1e12, d->cap_tweights);
}

static double row_score(const bench_target_def *d, const bench_results *res,
                        const bench_row *r, double peak) {
  switch (d->rule) {
  case BENCH_RULE_READ_PEAK:
    return d->pct / bench_row_pct(r, peak);
  case BENCH_RULE_FLOOR:
    return r->graph_us / floor_limit(d, r, peak);
  case BENCH_RULE_FASTER_CUBLAS: /* a tie is not faster */
    return r->graph_us / bench_row_cublas(r) * (1.0 + 1e-12);
  case BENCH_RULE_CUBLAS_RATIO:
    return r->graph_us / bench_row_cublas(r) / d->ratio;
  case BENCH_RULE_DECODE_RATE: {
    double score = decode_need(d, peak, r->bits) / bench_row_tws(r);
    const bench_row *next =
        d->monotonic ? partner(res, r, r->m, r->bits + 1) : NULL;
    if (next)
      score = fmax(score, bench_row_tws(next) / bench_row_tws(r));
    return score;
  }
  case BENCH_RULE_FP8_RATIO:
    return r->graph_us / r->fp8.us / d->ratio;
  case BENCH_RULE_GENERIC_RATIO:
    return r->generic_ok ? r->graph_us / r->generic_us / d->ratio : INFINITY;
  case BENCH_RULE_GROWTH: {
    const bench_row *from = partner(res, r, d->from_m, r->bits);
    return from->check_ok ? r->graph_us / from->graph_us / d->ratio : INFINITY;
  }
  case BENCH_RULE_LAUNCH_OVERHEAD:
    break;
  }
  return NAN;
}

/* The largest time(M) / time(growth_from_m) over the selected rows, with the
 * row it was found on (NULL when no pair was run). */
static const bench_row *worst_growth(const bench_target_def *d,
                                     const bench_results *res, double *ratio) {
  const bench_row *at = NULL;
  *ratio = 0.0;
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (!row_selected(d, r))
      continue;
    for (size_t j = 0; j < res->count; j++) {
      const bench_row *s = &res->rows[j];
      if (s->m == d->growth_from_m && s->k == r->k && s->n == r->n &&
          s->bits == r->bits && s->cb == r->cb && s->flags == r->flags &&
          r->graph_us / s->graph_us > *ratio) {
        *ratio = r->graph_us / s->graph_us;
        at = r;
      }
    }
  }
  return at;
}

/* What a skipped row lacks (row_scorable). */
static const char *skipped_what(const bench_target_def *d) {
  switch (d->rule) {
  case BENCH_RULE_FP8_RATIO:
    return "an FP8 time";
  case BENCH_RULE_GENERIC_RATIO:
    return "a forced-generic time";
  case BENCH_RULE_GROWTH:
    return "a row of the same layer at the M compared with";
  default:
    return "a figure";
  }
}

/* decode_rate: the rate part's worst row (as without `monotonic`), then
 * the rows slower than the next bitrate's row. */
static void decode_detail(const bench_target_def *d, const bench_options *o,
                          const bench_results *res, double peak,
                          bench_target *t) {
  const bench_row *worst = NULL, *slow = NULL, *slow_next = NULL;
  double worst_score = 0.0, slow_score = 0.0;
  int rows = 0, below = 0, pairs = 0, slower = 0;
  for (size_t i = 0; i < res->count; i++) {
    const bench_row *r = &res->rows[i];
    if (!row_selected(d, r))
      continue;
    double score = decode_need(d, peak, r->bits) / bench_row_tws(r);
    if (!r->check_ok || isnan(score))
      score = INFINITY;
    rows++;
    below += !(score <= 1.0);
    if (worst == NULL || score > worst_score) {
      worst = r;
      worst_score = score;
    }
    const bench_row *next =
        d->monotonic ? partner(res, r, r->m, r->bits + 1) : NULL;
    if (next == NULL)
      continue;
    const double ratio = bench_row_tws(next) / bench_row_tws(r);
    pairs++;
    slower += ratio > 1.0;
    if (slow == NULL || ratio > slow_score) {
      slow = r;
      slow_next = next;
      slow_score = ratio;
    }
  }
  char name[96];
  row_name(worst, name, sizeof name);
  bench_sfmt(t->detail, sizeof t->detail,
             "%d of %d rows below; worst %s: %.2f T weights/s (%.1f%% of "
             "peak) vs %.2f T/s needed%s",
             below, rows, name, bench_row_tws(worst),
             bench_row_pct(worst, peak), decode_need(d, peak, worst->bits),
             worst->check_ok ? "" : ", check FAIL");
  size_t len = strlen(t->detail);
  if (d->monotonic && slow && slow_score > 1.0) {
    row_name(slow, name, sizeof name);
    bench_sfmt(t->detail + len, sizeof t->detail - len,
               "; %d of %d slower than the next bitrate, worst %s: %.2f T/s "
               "vs K%d %.2f T/s",
               slower, pairs, name, bench_row_tws(slow), slow_next->bits,
               bench_row_tws(slow_next));
  } else if (d->monotonic) {
    bench_sfmt(t->detail + len, sizeof t->detail - len,
               "; %d of %d slower than the next bitrate", slower, pairs);
  }
  len = strlen(t->detail);
  bench_sfmt(t->detail + len, sizeof t->detail - len, "%s",
             o->sweep ? "" : " (partial: run --sweep for every K/codebook)");
}

/* The detail line of a row target from its worst row. */
static void row_detail(const bench_target_def *d, const bench_options *o,
                       const bench_results *res, const tally *y, double peak,
                       bench_target *t) {
  const bench_row *w = y->worst;
  const char *fail = w->check_ok ? "" : ", check FAIL";
  char name[96];
  row_name(w, name, sizeof name);
  switch (d->rule) {
  case BENCH_RULE_READ_PEAK:
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows below; worst %s: %.1f%% of peak (%.2f us; "
               "%g%% is %.2f us)%s",
               y->missed, y->rows, name, bench_row_pct(w, peak), w->graph_us,
               d->pct, w->weight_bytes / (d->pct / 100.0 * peak * 1e9) * 1e6,
               fail);
    break;
  case BENCH_RULE_FLOOR:
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows over; worst %s: %.2f us vs limit %.2f us "
               "(floor %.2f us)%s",
               y->missed, y->rows, name, w->graph_us, floor_limit(d, w, peak),
               floor_us(w, peak), fail);
    break;
  case BENCH_RULE_FASTER_CUBLAS: {
    char growth[256] = "";
    double ratio = 0.0;
    const bench_row *g =
        d->growth_from_m > 0 ? worst_growth(d, res, &ratio) : NULL;
    if (g) {
      char gname[96];
      row_name(g, gname, sizeof gname);
      bench_sfmt(growth, sizeof growth,
                 "; time(M=%lld)/time(M=%lld) at most %.2f (%s; ~%lld would "
                 "mean one weight pass per %lld rows)",
                 (long long)g->m, (long long)d->growth_from_m, ratio, gname,
                 (long long)(g->m / d->growth_from_m),
                 (long long)d->growth_from_m);
    }
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows not faster; worst %s: %.2f us vs cuBLAS %.2f us "
               "(%.2fx)%s%s",
               y->missed, y->rows, name, w->graph_us, bench_row_cublas(w),
               bench_row_speedup(w), fail, growth);
    break;
  }
  case BENCH_RULE_CUBLAS_RATIO:
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows over; worst %s: %.1f us vs cuBLAS %.1f us "
               "(%.2fx of cuBLAS time)%s",
               y->missed, y->rows, name, w->graph_us, bench_row_cublas(w),
               w->graph_us / bench_row_cublas(w), fail);
    break;
  case BENCH_RULE_DECODE_RATE:
    decode_detail(d, o, res, peak, t);
    break;
  case BENCH_RULE_FP8_RATIO:
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows over; worst %s: %.2f us vs FP8 %.2f us at M=%lld "
               "(%.2fx of FP8 time, limit %.2fx)%s",
               y->missed, y->rows, name, w->graph_us, w->fp8.us,
               (long long)w->fp8.m, w->graph_us / w->fp8.us, d->ratio, fail);
    break;
  case BENCH_RULE_GENERIC_RATIO:
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows over; worst %s: %.2f us vs forced generic %.2f "
               "us (%.3fx, limit %.2fx)%s%s",
               y->missed, y->rows, name, w->graph_us, w->generic_us,
               w->graph_us / w->generic_us, d->ratio, fail,
               w->generic_ok ? "" : ", generic check FAIL");
    break;
  case BENCH_RULE_GROWTH: {
    const bench_row *from = partner(res, w, d->from_m, w->bits);
    bench_sfmt(t->detail, sizeof t->detail,
               "%d of %d rows over; worst %s: %.2f us vs %.2f us at M=%lld "
               "(%.2fx, limit %.2fx)%s%s",
               y->missed, y->rows, name, w->graph_us, from->graph_us,
               (long long)d->from_m, w->graph_us / from->graph_us, d->ratio,
               fail, from->check_ok ? "" : ", check FAIL at that M");
    break;
  }
  case BENCH_RULE_LAUNCH_OVERHEAD:
    break;
  }
  if (y->skipped) {
    const size_t len = strlen(t->detail);
    bench_sfmt(t->detail + len, sizeof t->detail - len,
               "; %d row%s without %s left out", y->skipped,
               y->skipped == 1 ? "" : "s", skipped_what(d));
  }
}

static void eval_overhead(const bench_target_def *d, const bench_results *res,
                          bench_target *t) {
  const bench_overhead *ov = &res->overhead;
  if (!ov->measured) {
    t->status = BENCH_NA;
    bench_sfmt(t->detail, sizeof t->detail, "not measured");
    return;
  }
  double lim = fmax(d->ratio * ov->lrun_us, ov->lrun_us + d->slack_us);
  t->status = ov->cycled_us <= lim ? BENCH_MET : BENCH_MISSED;
  bench_sfmt(t->detail, sizeof t->detail,
             "%lldx%lld K%d %s: %.2f us/launch cycling %d cold copies (L=%d "
             "run: %.2f us; limit %.2f us); same plan %dx (L2-warm when it "
             "fits): %.2f us/launch; eager: %.2f us/launch",
             (long long)ov->k, (long long)ov->n, ov->bits,
             trellis_codebook_name(ov->cb), ov->cycled_us, ov->copies,
             ov->lrun_launches, ov->lrun_us, lim, BENCH_OVERHEAD_LAUNCHES,
             ov->single_us, ov->eager_us);
}

/* Why a target has no verdict. */
static void na_detail(const bench_target_def *d, const tally *y,
                      bench_target *t) {
  if (y->skipped == 0) {
    bench_sfmt(t->detail, sizeof t->detail, "no rows of this kind were run");
    return;
  }
  switch (d->rule) {
  case BENCH_RULE_FP8_RATIO:
    bench_sfmt(t->detail, sizeof t->detail,
               "no FP8 time for its %d rows (cuBLASLt has no FP8 algorithm "
               "on this GPU, or the FP8 check failed): skipped",
               y->skipped);
    break;
  case BENCH_RULE_GENERIC_RATIO:
    bench_sfmt(t->detail, sizeof t->detail,
               "forced-generic times not measured for its %d rows (run with "
               "--with-generic)",
               y->skipped);
    break;
  case BENCH_RULE_GROWTH:
    bench_sfmt(t->detail, sizeof t->detail,
               "its %d rows have no M=%lld row of the same layer to compare "
               "with",
               y->skipped, (long long)d->from_m);
    break;
  default:
    bench_sfmt(t->detail, sizeof t->detail, "no rows of this kind were run");
    break;
  }
}

void bench_eval_targets(const bench_env *env, const bench_options *o,
                        const bench_results *res, const bench_targets *defs,
                        bench_target *out) {
  const double peak = env->read_peak_gbs;
  for (int i = 0; i < defs->count; i++) {
    const bench_target_def *d = &defs->def[i];
    bench_target *t = &out[i];
    memset(t, 0, sizeof *t);
    t->id = d->id;
    t->stretch = d->stretch;
    bench_sfmt(t->what, sizeof t->what, "%s", d->what);
    if (d->rule == BENCH_RULE_LAUNCH_OVERHEAD) {
      eval_overhead(d, res, t);
      continue;
    }
    tally y = {0};
    for (size_t j = 0; j < res->count; j++) {
      const bench_row *r = &res->rows[j];
      if (!row_selected(d, r))
        continue;
      if (row_scorable(d, res, r))
        tally_add(&y, r, row_score(d, res, r, peak));
      else
        y.skipped++;
    }
    if (y.rows == 0) {
      t->status = BENCH_NA;
      na_detail(d, &y, t);
      continue;
    }
    t->status = y.missed ? BENCH_MISSED : BENCH_MET;
    row_detail(d, o, res, &y, peak, t);
  }
}

const char *bench_status_name(int s) {
  return s == BENCH_MET ? "MET" : s == BENCH_MISSED ? "MISSED" : "n/a";
}

void bench_print_targets(const bench_env *env, const bench_targets *defs,
                         const bench_target *t) {
  printf("\ntargets (%s; %s, read peak %.1f GB/s, commit %s):\n", defs->source,
         env->gpu, env->read_peak_gbs, env->commit);
  int count[2][3] = {{0}}; /* [stretch][status] */
  for (int i = 0; i < defs->count; i++) {
    printf("  %d. %-6s %s\n            %s\n", t[i].id,
           bench_status_name(t[i].status), t[i].what, t[i].detail);
    count[t[i].stretch != 0][t[i].status]++;
  }
  printf("  targets: %d MET, %d MISSED, %d n/a; stretch goals: %d MET, %d "
         "MISSED, %d n/a\n",
         count[0][BENCH_MET], count[0][BENCH_MISSED], count[0][BENCH_NA],
         count[1][BENCH_MET], count[1][BENCH_MISSED], count[1][BENCH_NA]);
  fflush(stdout);
}
