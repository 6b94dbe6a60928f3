/* SPDX-License-Identifier: Apache-2.0 */
/* `trellis synth` and its generator (tools/synth_model.c), and what runs
 * of `trellis info --plan` without a GPU:
 *   - the presets' shapes and names, the bitrate rule (the full presets
 *     within 0.001 of --bits), the shard plan, bad options;
 *   - a small model written by the CLI round-trips through `trellis info`
 *     (layers, shapes, K, codebook, quantization_config) and `trellis
 *     decode` (W_hat bit for bit against synth_layer_init's words from the
 *     module's seed); every stored byte equals what the generator emits;
 *   - the shards and the index are valid: every weight_map entry is in its
 *     shard and nothing else is, total_size is the tensors' bytes, no
 *     module is split, shards respect the size;
 *   - activations stay O(1) through a chain of the model's layers;
 *   - a refused write leaves the existing directory untouched, a failed
 *     write (RLIMIT_FSIZE) or an interrupted one (SIGINT, SIGKILL) leaves
 *     no model, and --force replaces a model directory only;
 *   - bad command lines exit 2; `info --plan` without a GPU exits 1 (and
 *     `info` without it works). */
#include "testutil.h"

#include "tools/npy.h"
#include "tools/synth.h"
#include "tools/synth_model.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ running -- */

/* Runs TRELLIS_CLI_PATH with `args` (NULL-terminated, without argv[0]);
 * `o` (may be NULL) sets a file-size limit or a signal after a delay. */
static tu_run_result run_cli_opts(const char *const *args,
                                  const tu_run_opts *o) {
  return tu_run_tool(TRELLIS_CLI_PATH, args, o);
}

static tu_run_result run_cli(const char *const *args) {
  return run_cli_opts(args, NULL);
}

static void expect_code(const char *what, tu_run_result *r, int code) {
  if (r->code != code)
    fail_msg("%s: exit %d (expected %d), stderr: %s", what, r->code, code,
             r->err);
}

/* A fresh empty directory under the test's temporary directory. */
static char *fresh_dir(const char *name) {
  char *p = tu_tmp_path(name);
  assert_int_equal(mkdir(p, 0755), 0);
  return p;
}

/* The sorted names in `dir`, comma-separated (malloc'd). */
static char *listing(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  char *names[256];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      assert_true(n < 256);
      names[n++] = strdup(e->d_name);
    }
  closedir(d);
  for (int i = 1; i < n; i++) /* insertion sort */
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  size_t len = 1;
  for (int i = 0; i < n; i++)
    len += strlen(names[i]) + 1;
  char *out = calloc(1, len);
  assert_non_null(out);
  for (int i = 0; i < n; i++) {
    strcat(out, names[i]);
    if (i + 1 < n)
      strcat(out, ",");
    free(names[i]);
  }
  return out;
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

static void plan_or_fail(const synth_options *o, synth_model *m) {
  trellis_status st = synth_model_plan(o, m);
  if (st != TRELLIS_OK)
    fail_msg("synth_model_plan(%s): %s", o->preset, trellis_last_error());
}

/* ------------------------------------------------------------- presets -- */

static const synth_module *find_module(const synth_model *m, const char *name) {
  for (size_t i = 0; i < m->module_count; i++)
    if (strcmp(m->modules[i].name, name) == 0)
      return &m->modules[i];
  fail_msg("no module %s", name);
  return NULL;
}

static void check_linear(const synth_model *m, const char *name, int64_t k,
                         int64_t n) {
  const synth_module *mod = find_module(m, name);
  assert_int_equal(mod->kind, SYNTH_LINEAR);
  assert_int_equal(mod->k, k);
  assert_int_equal(mod->n, n);
}

static void test_presets(void **state) {
  (void)state;
  synth_options o;
  synth_model m;
  synth_options_init(&o);
  o.preset = "llama-3.1-8b";
  plan_or_fail(&o, &m);
  assert_int_equal(m.opt.blocks, 32);
  assert_int_equal(m.linear_count, 32 * 7 + 1);
  check_linear(&m, "model.layers.0.self_attn.q_proj", 4096, 4096);
  check_linear(&m, "model.layers.0.self_attn.k_proj", 4096, 1024);
  check_linear(&m, "model.layers.7.self_attn.v_proj", 4096, 1024);
  check_linear(&m, "model.layers.31.self_attn.o_proj", 4096, 4096);
  check_linear(&m, "model.layers.31.mlp.gate_proj", 4096, 14336);
  check_linear(&m, "model.layers.31.mlp.up_proj", 4096, 14336);
  check_linear(&m, "model.layers.31.mlp.down_proj", 14336, 4096);
  check_linear(&m, "lm_head", 4096, 128256);
  assert_int_equal(find_module(&m, "model.embed_tokens")->n, 128256);
  assert_int_equal(find_module(&m, "model.norm")->kind, SYNTH_NORM);
  assert_int_equal(
      find_module(&m, "model.layers.3.post_attention_layernorm")->n, 4096);
  assert_int_equal(m.shard_count, 1); /* 4 GB in 8192 MiB shards */
  synth_model_free(&m);

  o.preset = "llama-3.1-70b";
  o.head_bits = 16;
  plan_or_fail(&o, &m);
  assert_int_equal(m.opt.blocks, 80);
  assert_int_equal(m.linear_count, 80 * 7);
  check_linear(&m, "model.layers.79.self_attn.q_proj", 8192, 8192);
  check_linear(&m, "model.layers.79.self_attn.k_proj", 8192, 1024);
  check_linear(&m, "model.layers.0.mlp.down_proj", 28672, 8192);
  const synth_module *head = find_module(&m, "lm_head");
  assert_int_equal(head->kind, SYNTH_DENSE);
  const synth_tensor *ht = &m.tensors[head->tensor];
  assert_string_equal(ht->name, "lm_head.weight");
  assert_int_equal(ht->dtype, TRELLIS_T_F16);
  assert_int_equal(ht->shape[0], 128256);
  assert_int_equal(ht->shape[1], 8192);
  assert_true(ht->bytes == (uint64_t)128256 * 8192 * 2);
  assert_true(m.shard_count > 1);
  synth_model_free(&m);

  o.preset = "glm-tp4";
  o.head_bits = 6;
  plan_or_fail(&o, &m);
  assert_int_equal(m.linear_count, 78 * 3 + 1);
  check_linear(&m, "model.layers.0.self_attn.q_b_proj", 2048, 4096);
  check_linear(&m, "model.layers.0.mlp.gate_up_proj", 6144, 1024);
  check_linear(&m, "model.layers.77.mlp.down_proj", 512, 6144);
  check_linear(&m, "lm_head", 6144, 37888);
  synth_model_free(&m);

  /* every EXL3 layer of every preset: multiples of 128, a role by name,
   * the tensors of FORMAT.md §2.1 */
  for (size_t p = 0; p < synth_preset_count(); p++) {
    synth_options_init(&o);
    o.preset = synth_preset_at(p)->name;
    plan_or_fail(&o, &m);
    for (size_t i = 0; i < m.module_count; i++) {
      const synth_module *mod = &m.modules[i];
      if (mod->kind != SYNTH_LINEAR)
        continue;
      assert_int_equal(mod->k % 128, 0);
      assert_int_equal(mod->n % 128, 0);
      int block = -2;
      assert_int_equal(synth_role_of(mod->name, &block), mod->role);
      assert_int_equal(block, mod->block);
      assert_int_equal(mod->tensor_count, 4);
      const synth_tensor *t = &m.tensors[mod->tensor];
      assert_int_equal(t[0].dtype, TRELLIS_T_I16);
      assert_int_equal(t[0].shape[2], 16 * mod->bits);
      assert_non_null(strstr(t[3].name, ".mcg"));
      assert_int_equal(t[3].ndim, 0);
    }
    synth_model_free(&m);
  }
  assert_null(synth_preset_find("llama-2"));
  assert_int_equal(synth_role_of("model.layers.x.mlp.up_proj", NULL),
                   SYNTH_ROLE_NONE);
  assert_int_equal(synth_role_of("model.norm", NULL), SYNTH_ROLE_NONE);
}

static void test_bits_rule(void **state) {
  (void)state;
  static const double asked[] = {2.0, 3.36, 4.0, 4.25, 5.5, 6.0, 7.9};
  for (size_t p = 0; p < synth_preset_count(); p++)
    for (size_t b = 0; b < sizeof asked / sizeof asked[0]; b++) {
      synth_options o;
      synth_options_init(&o);
      o.preset = synth_preset_at(p)->name;
      o.bits = asked[b];
      synth_model m;
      plan_or_fail(&o, &m);
      /* recomputed from the layers, and close to what was asked */
      double bits = 0.0, weights = 0.0;
      const int lo = (int)floor(asked[b]);
      for (size_t i = 0; i < m.module_count; i++) {
        const synth_module *mod = &m.modules[i];
        if (mod->kind != SYNTH_LINEAR || mod->block < 0)
          continue;
        if (mod->bits != lo && mod->bits != lo + 1)
          fail_msg("%s: K%d at bits %g", mod->name, mod->bits, asked[b]);
        bits += (double)mod->bits * (double)mod->k * (double)mod->n;
        weights += (double)mod->k * (double)mod->n;
      }
      assert_true(fabs(bits / weights - m.bits) < 1e-9);
      if (!(fabs(m.bits - asked[b]) <= 0.001))
        fail_msg("%s --bits %g: achieved %.5f", o.preset, asked[b], m.bits);
      if (asked[b] == floor(asked[b]))
        assert_true(m.bits == asked[b]);
      assert_int_equal(find_module(&m, "lm_head")->bits, 6);
      synth_model_free(&m);
    }
  /* a cut model: the best its layers allow (glm-tp4, 2 blocks of 8, 6 and
   * 3 Mi weights: 3.36 wants 12.24 Mi at K4, and 12 Mi is nearest) */
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.blocks = 2;
  o.bits = 3.36;
  synth_model m;
  plan_or_fail(&o, &m);
  assert_true(fabs(m.bits - (3.0 + 12.0 / 34.0)) < 1e-9);
  synth_model_free(&m);
}

/* MUL1 takes ExLlamaV3 1.6's half steps below 4 (1, 1.5, 2, 2.5, 3, 3.5,
 * 4, 5, ..): each layer gets one of the two steps around the asked bits;
 * other codebooks keep the integers. */
static void test_bits_rule_half(void **state) {
  (void)state;
  static const struct {
    double asked;
    int lo, hi; /* half-bits */
  } cases[] = {{1.25, 2, 3}, {2.25, 4, 5}, {3.36, 6, 7}, {3.5, 7, 7},
               {3.75, 7, 8}, {4.5, 8, 10}, {7.9, 14, 16}};
  for (size_t p = 0; p < synth_preset_count(); p++)
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
      synth_options o;
      synth_options_init(&o);
      o.preset = synth_preset_at(p)->name;
      o.bits = cases[c].asked;
      o.codebook = TRELLIS_CB_MUL1;
      synth_model m;
      plan_or_fail(&o, &m);
      double bits = 0.0, weights = 0.0;
      int seen_lo = 0, seen_hi = 0;
      for (size_t i = 0; i < m.module_count; i++) {
        const synth_module *mod = &m.modules[i];
        if (mod->kind != SYNTH_LINEAR || mod->block < 0)
          continue;
        const int h = 2 * mod->bits + mod->half;
        if (h != cases[c].lo && h != cases[c].hi)
          fail_msg("%s: K%g at bits %g", mod->name, h / 2.0, cases[c].asked);
        seen_lo += h == cases[c].lo;
        seen_hi += h == cases[c].hi;
        bits += h / 2.0 * (double)mod->k * (double)mod->n;
        weights += (double)mod->k * (double)mod->n;
      }
      assert_true(seen_lo > 0 && (cases[c].lo == cases[c].hi || seen_hi > 0));
      assert_true(fabs(bits / weights - m.bits) < 1e-9);
      if (!(fabs(m.bits - cases[c].asked) <= 0.001))
        fail_msg("%s --bits %g mul1: achieved %.5f", o.preset, cases[c].asked,
                 m.bits);
      synth_model_free(&m);
    }
  /* mcg at 3.36: K 3 and 4 only */
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.bits = 3.36;
  synth_model m;
  plan_or_fail(&o, &m);
  for (size_t i = 0; i < m.module_count; i++)
    assert_int_equal(m.modules[i].half, 0);
  synth_model_free(&m);
  /* a half-rate head with mul1 only */
  synth_options_init(&o);
  o.codebook = TRELLIS_CB_MUL1;
  o.head_bits = 3;
  o.head_half = 1;
  plan_or_fail(&o, &m);
  assert_int_equal(find_module(&m, "lm_head")->half, 1);
  synth_model_free(&m);
  o.codebook = TRELLIS_CB_MCG;
  trellis_clear_error();
  tu_assert_status(synth_model_plan(&o, &m), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("head bits 3.5 is not a rate of codebook mcg");
  synth_model_free(&m);
}

static void test_shard_plan(void **state) {
  (void)state;
  synth_options o;
  synth_options_init(&o);
  o.preset = "llama-3.1-70b";
  o.bits = 6.0;
  synth_model m;
  plan_or_fail(&o, &m);
  uint64_t total = 0;
  for (int s = 0; s < m.shard_count; s++) {
    uint64_t used = 0;
    int modules = 0;
    for (size_t i = 0; i < m.module_count; i++) {
      const synth_module *mod = &m.modules[i];
      if (mod->shard != s)
        continue;
      modules++;
      for (int j = 0; j < mod->tensor_count; j++) {
        const synth_tensor *t = &m.tensors[mod->tensor + (size_t)j];
        assert_true(t->offset == used); /* packed, in order */
        used += t->bytes;
      }
    }
    assert_true(used == m.shard_data[s]);
    assert_true(modules > 0);
    assert_true(used <= o.shard_bytes || modules == 1);
    total += used;
  }
  assert_true(total == m.total_bytes);
  /* shards follow model order */
  for (size_t i = 1; i < m.module_count; i++)
    assert_true(m.modules[i].shard >= m.modules[i - 1].shard);
  synth_model_free(&m);
}

static void test_bad_options(void **state) {
  (void)state;
  synth_options o;
  synth_model m;
  struct {
    const char *field, *needle;
  } cases[] = {{"preset", "unknown preset"}, {"bits", "bits"},
               {"bits_nan", "bits"},         {"head", "head bits"},
               {"codebook", "codebook"},     {"blocks", "blocks"},
               {"vocab", "vocab"},           {"shard", "shard size"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    synth_options_init(&o);
    const char *f = cases[i].field;
    if (!strcmp(f, "preset"))
      o.preset = "llama-4";
    else if (!strcmp(f, "bits"))
      o.bits = 8.5;
    else if (!strcmp(f, "bits_nan"))
      o.bits = NAN;
    else if (!strcmp(f, "head"))
      o.head_bits = 12;
    else if (!strcmp(f, "codebook"))
      o.codebook = TRELLIS_CB_SQG_E4M3;
    else if (!strcmp(f, "blocks"))
      o.blocks = 33;
    else if (!strcmp(f, "vocab"))
      o.vocab = 1000;
    else
      o.shard_bytes = 0;
    tu_assert_status(synth_model_plan(&o, &m), TRELLIS_ERR_INVALID_ARGUMENT);
    tu_assert_error_has(cases[i].needle);
    synth_model_free(&m);
  }
}

/* ----------------------------------------------------------- round trip -- */

typedef struct mem_sink {
  uint8_t *data;
  size_t size, cap;
} mem_sink;

static int mem_append(void *ctx, const void *data, size_t bytes) {
  mem_sink *s = ctx;
  if (s->size + bytes > s->cap) {
    s->cap = 2 * (s->size + bytes);
    s->data = realloc(s->data, s->cap);
    assert_non_null(s->data);
  }
  memcpy(s->data + s->size, data, bytes);
  s->size += bytes;
  return 0;
}

/* `trellis synth PRESET DIR OPTIONS...` with options[0] the preset; returns
 * DIR (malloc'd). */
static char *synth_cli(const char *dir_name, const char *const *options) {
  char *dir = tu_tmp_path(dir_name);
  const char *args[24] = {"synth", options[0], dir};
  int n = 3;
  for (int i = 1; options[i]; i++) {
    assert_true(n < 23);
    args[n++] = options[i];
  }
  args[n] = NULL;
  tu_run_result r = run_cli(args);
  expect_code("synth", &r, 0);
  assert_non_null(strstr(r.out, dir));
  assert_string_equal(r.err, ""); /* no progress when not a terminal */
  tu_run_free(&r);
  return dir;
}

/* Removes a directory of regular files. */
static void remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      char *p = tu_join(dir, e->d_name);
      assert_int_equal(unlink(p), 0);
      free(p);
    }
  closedir(d);
  assert_int_equal(rmdir(dir), 0);
}

/* One line, ending in a newline. */
static int one_line(const char *s) {
  const char *nl = strchr(s, '\n');
  return nl != NULL && nl[1] == '\0';
}

/* Every tensor in the files equals the generator's bytes. */
static void check_model_bytes(const synth_model *m, const char *dir) {
  trellis_model *model = NULL;
  tu_assert_status(trellis_model_open(dir, &model), TRELLIS_OK);
  void *buf = malloc(1 << 16);
  assert_non_null(buf);
  for (size_t i = 0; i < m->module_count; i++) {
    mem_sink s = {NULL, 0, 0};
    tu_assert_status(synth_module_emit(m, i, buf, 1 << 16, mem_append, &s),
                     TRELLIS_OK);
    size_t at = 0;
    for (int j = 0; j < m->modules[i].tensor_count; j++) {
      const synth_tensor *t = &m->tensors[m->modules[i].tensor + (size_t)j];
      trellis_tensor ft;
      tu_assert_status(trellis_model_find_tensor(model, t->name, &ft),
                       TRELLIS_OK);
      assert_int_equal(ft.dtype, t->dtype);
      assert_int_equal(ft.ndim, t->ndim);
      assert_true(ft.nbytes == t->bytes);
      if (memcmp(ft.data, s.data + at, ft.nbytes) != 0)
        fail_msg("%s: stored bytes differ from the generator's", t->name);
      at += ft.nbytes;
    }
    assert_true(at == s.size);
    free(s.data);
  }
  free(buf);
  trellis_model_close(model);
}

/* `trellis info DIR` lists every EXL3 layer as planned. */
static void check_info(const synth_model *m, const char *dir) {
  const char *args[] = {"info", dir, NULL};
  tu_run_result r = run_cli(args);
  expect_code("info", &r, 0);
  char line[256];
  snprintf(line, sizeof line,
           "quant_method exl3, version trellis-synth %s, bits %.2f, "
           "head_bits %d%s, codebook %s, out_scales always",
           TRELLIS_VERSION_STRING, m->bits, m->opt.head_bits,
           m->opt.head_half ? ".5" : "",
           trellis_codebook_name(m->opt.codebook));
  if (!strstr(r.out, line))
    fail_msg("info lacks '%s':\n%s", line, r.out);
  snprintf(line, sizeof line, "totals: %lld EXL3 layers",
           (long long)m->linear_count);
  assert_non_null(strstr(r.out, line));
  for (size_t i = 0; i < m->module_count; i++) {
    const synth_module *mod = &m->modules[i];
    if (mod->kind != SYNTH_LINEAR)
      continue;
    snprintf(line, sizeof line, "\n%s ", mod->name);
    const char *row = strstr(r.out, line);
    if (!row)
      fail_msg("info does not list %s:\n%s", mod->name, r.out);
    char name[128], cb[32], bits[16];
    long long k = 0, n = 0;
    assert_int_equal(
        sscanf(row + 1, "%127s %lld %lld %15s %31s", name, &k, &n, bits, cb),
        5);
    assert_int_equal(k, mod->k);
    assert_int_equal(n, mod->n);
    char want[16];
    snprintf(want, sizeof want, mod->half ? "%d.5" : "%d", mod->bits);
    assert_string_equal(bits, want);
    assert_string_equal(cb, trellis_codebook_name(m->opt.codebook));
  }
  tu_run_free(&r);
}

/* `trellis decode DIR LAYER` is W_hat of synth_layer_init's words from the
 * module's seed, bit for bit; the stored words are those words. */
static void check_decode(const synth_model *m, const char *dir,
                         const char *layer) {
  const synth_module *mod = find_module(m, layer);
  char *out = tu_tmp_path("w.npy");
  const char *args[] = {"decode", dir, layer, "--output", out, NULL};
  tu_run_result r = run_cli(args);
  expect_code("decode", &r, 0);
  tu_run_free(&r);
  npy_array w;
  tu_assert_status(npy_read(out, &w), TRELLIS_OK);
  assert_int_equal(w.dtype, TRELLIS_F16);
  assert_int_equal(w.shape[0], mod->k);
  assert_int_equal(w.shape[1], mod->n);

  synth_layer l;
  tu_assert_status(synth_layer_init(&l, mod->k, mod->n, mod->bits,
                                    m->opt.codebook, mod->half ? SYNTH_HALF : 0,
                                    synth_module_seed(m->opt.seed, layer)),
                   TRELLIS_OK);
  const size_t count = (size_t)mod->k * (size_t)mod->n;
  uint16_t *ref = malloc(count * 2);
  assert_non_null(ref);
  tu_assert_status(trellis_decode_weight(&l.w, ref), TRELLIS_OK);
  if (memcmp(w.data, ref, count * 2) != 0)
    fail_msg("%s: decode differs from the regenerated layer", layer);

  trellis_model *model = NULL;
  trellis_tensor t;
  char name[160];
  snprintf(name, sizeof name, "%s.trellis", layer);
  tu_assert_status(trellis_model_open(dir, &model), TRELLIS_OK);
  tu_assert_status(trellis_model_find_tensor(model, name, &t), TRELLIS_OK);
  assert_true(t.nbytes == trellis_weight_payload_bytes(&l.w));
  assert_memory_equal(t.data, l.trellis, t.nbytes);
  trellis_model_close(model);
  free(ref);
  synth_layer_free(&l);
  npy_free(&w);
  free(out);
}

static void test_round_trip_glm(void **state) {
  (void)state;
  static const char *const opts[] = {"glm-tp4", "--blocks", "2",    "--vocab",
                                     "128",     "--bits",   "3.36", "--seed",
                                     "11",      NULL};
  char *dir = synth_cli("glm", opts);
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.blocks = 2;
  o.vocab = 128;
  o.bits = 3.36;
  o.seed = 11;
  synth_model m;
  plan_or_fail(&o, &m);
  check_info(&m, dir);
  check_decode(&m, dir, "model.layers.1.mlp.down_proj");
  check_decode(&m, dir, "lm_head");
  check_model_bytes(&m, dir);
  synth_model_free(&m);
  free(dir);
}

/* `trellis synth glm-tp4 --bits 3.36 --codebook mul1` as ExLlamaV3 1.6
 * would allocate it: K 3 and 3.5 layers, a 2.5-bit head, stored, listed
 * and decoded bit for bit. */
static void test_round_trip_half(void **state) {
  (void)state;
  static const char *const opts[] = {
      "glm-tp4", "--blocks", "2",          "--vocab", "128",
      "--bits",  "3.36",     "--codebook", "mul1",    "--head-bits",
      "2.5",     "--seed",   "5",          NULL};
  char *dir = synth_cli("glm-half", opts);
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.blocks = 2;
  o.vocab = 128;
  o.bits = 3.36;
  o.codebook = TRELLIS_CB_MUL1;
  o.head_bits = 2;
  o.head_half = 1;
  o.seed = 5;
  synth_model m;
  plan_or_fail(&o, &m);
  int half = 0;
  for (size_t i = 0; i < m.module_count; i++)
    half += m.modules[i].kind == SYNTH_LINEAR && m.modules[i].half;
  assert_true(half >= 2);
  check_info(&m, dir);
  for (size_t i = 0; i < m.module_count; i++)
    if (m.modules[i].kind == SYNTH_LINEAR && m.modules[i].half)
      check_decode(&m, dir, m.modules[i].name);
  check_model_bytes(&m, dir);
  synth_model_free(&m);
  free(dir);
}

static void test_round_trip_llama(void **state) {
  (void)state;
  /* one block of llama-3.1-8b at 1.5 bits (~41 MB), 3INST (no marker),
   * an fp16 head */
  static const char *const opts[] = {
      "llama-3.1-8b", "--blocks",   "1",     "--vocab",     "256", "--bits",
      "1.5",          "--codebook", "3inst", "--head-bits", "16",  NULL};
  char *dir = synth_cli("llama", opts);
  synth_options o;
  synth_options_init(&o);
  o.preset = "llama-3.1-8b";
  o.blocks = 1;
  o.vocab = 256;
  o.bits = 1.5;
  o.codebook = TRELLIS_CB_3INST;
  o.head_bits = 16;
  synth_model m;
  plan_or_fail(&o, &m);
  check_info(&m, dir);
  check_decode(&m, dir, "model.layers.0.self_attn.k_proj");
  trellis_model *model = NULL;
  trellis_tensor t;
  tu_assert_status(trellis_model_open(dir, &model), TRELLIS_OK);
  tu_assert_status(trellis_model_find_tensor(model, "lm_head.weight", &t),
                   TRELLIS_OK);
  assert_int_equal(t.dtype, TRELLIS_T_F16);
  assert_int_equal(t.shape[0], 256);
  assert_int_equal(t.shape[1], 4096);
  tu_assert_status(trellis_model_find_tensor(model,
                                             "model.layers.0.mlp."
                                             "up_proj.mcg",
                                             &t),
                   TRELLIS_ERR_NOT_FOUND);
  assert_int_equal(trellis_model_layer_count(model), 7);
  trellis_model_close(model);
  synth_model_free(&m);
  free(dir);
}

/* ---------------------------------------------------------- shards/index -- */

static void check_shards(const char *dir, uint64_t shard_bytes,
                         int expect_shards) {
  char *index_path = tu_join(dir, "model.safetensors.index.json");
  json_error_t jerr;
  json_t *index = json_load_file(index_path, 0, &jerr);
  if (!index)
    fail_msg("%s: %s", index_path, jerr.text);
  json_t *map = json_object_get(index, "weight_map");
  json_t *total =
      json_object_get(json_object_get(index, "metadata"), "total_size");
  assert_true(json_is_object(map) && json_is_integer(total));

  /* the shard files: model-XXXXX-of-YYYYY, all of them, nothing else */
  char *files = listing(dir);
  char expect[4096] = "config.json";
  for (int s = 0; s < expect_shards; s++) {
    size_t used = strlen(expect);
    snprintf(expect + used, sizeof expect - used,
             ",model-%05d-of-%05d.safetensors", s + 1, expect_shards);
  }
  strcat(expect, ",model.safetensors.index.json");
  assert_string_equal(files, expect);
  free(files);

  uint64_t sum = 0;
  size_t tensors = 0;
  for (int s = 0; s < expect_shards; s++) {
    char name[64];
    snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1,
             expect_shards);
    char *path = tu_join(dir, name);
    trellis_file *f = NULL;
    tu_assert_status(trellis_file_open(path, &f), TRELLIS_OK);
    uint64_t data = 0;
    int modules = 0;
    char last_module[160] = "";
    for (size_t i = 0; i < trellis_file_tensor_count(f); i++) {
      trellis_tensor t;
      tu_assert_status(trellis_file_tensor(f, i, &t), TRELLIS_OK);
      /* every tensor of the shard is mapped to this shard */
      json_t *v = json_object_get(map, t.name);
      if (!json_is_string(v) || strcmp(json_string_value(v), name) != 0)
        fail_msg("%s: %s is not mapped to it", name, t.name);
      data += t.nbytes;
      tensors++;
      /* modules (the name without its last component), counted; names
       * are sorted, so one module's tensors are adjacent */
      char module[160];
      snprintf(module, sizeof module, "%s", t.name);
      *strrchr(module, '.') = '\0';
      if (strcmp(module, last_module) != 0) {
        modules++;
        strcpy(last_module, module);
      }
    }
    assert_true(data <= shard_bytes || modules == 1);
    sum += data;
    trellis_file_close(f);
    free(path);
  }
  /* every weight_map entry is in its shard (counted above, names unique),
   * total_size is the tensors' bytes */
  assert_int_equal(tensors, json_object_size(map));
  assert_true((uint64_t)json_integer_value(total) == sum);

  /* no module split across shards */
  const char *key;
  json_t *v;
  json_object_foreach(map, key, v) {
    char module[160];
    snprintf(module, sizeof module, "%s", key);
    *strrchr(module, '.') = '\0';
    const char *key2;
    json_t *v2;
    json_object_foreach(map, key2, v2) {
      if (strncmp(key2, module, strlen(module)) == 0 &&
          key2[strlen(module)] == '.' &&
          strchr(key2 + strlen(module) + 1, '.') == NULL &&
          strcmp(json_string_value(v), json_string_value(v2)) != 0)
        fail_msg("module %s is split: %s and %s", module, key, key2);
    }
  }
  json_decref(index);
  free(index_path);
}

static void test_shards_and_index(void **state) {
  (void)state;
  /* 1 MiB shards: every layer over 1 MiB has one to itself, norms share */
  static const char *const small[] = {
      "glm-tp4", "--blocks",     "2", "--vocab", "128", "--bits",
      "2",       "--shard-size", "1", NULL};
  char *dir = synth_cli("sharded", small);
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.blocks = 2;
  o.vocab = 128;
  o.bits = 2;
  o.shard_bytes = 1 << 20;
  synth_model m;
  plan_or_fail(&o, &m);
  assert_true(m.shard_count > 4);
  check_shards(dir, o.shard_bytes, m.shard_count);
  synth_model_free(&m);
  free(dir);

  static const char *const one[] = {"glm-tp4", "--blocks", "1",
                                    "--vocab", "128",      NULL};
  dir = synth_cli("one-shard", one);
  check_shards(dir, (uint64_t)8192 << 20, 1);
  free(dir);
}

/* --------------------------------------------------------- activations -- */

static void forward(const trellis_model *model, const char *name,
                    const float *x, float *y, int64_t k_used, int64_t n) {
  trellis_layer l;
  tu_assert_status(trellis_model_find_layer(model, name, &l), TRELLIS_OK);
  assert_int_equal(l.weight.n, n);
  float *xk = calloc((size_t)l.weight.k, sizeof *xk);
  assert_non_null(xk);
  memcpy(xk, x, (size_t)k_used * sizeof *xk);
  size_t ws = trellis_cpu_workspace_size(&l.weight, 1, 1);
  void *w = malloc(ws ? ws : 1);
  tu_assert_status(trellis_cpu_forward(&l.weight, xk, TRELLIS_F32, 1, y,
                                       TRELLIS_F32, w, ws, 1),
                   TRELLIS_OK);
  free(w);
  free(xk);
}

static double rms(const float *v, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; i++)
    s += (double)v[i] * v[i];
  return sqrt(s / (double)n);
}

/* The decode step's chain (gate_up, then down on gate's half; the next
 * block reads down's output) keeps the RMS of a unit input near 1. */
static void test_activations_stay_o1(void **state) {
  (void)state;
  static const char *const opts[] = {"glm-tp4", "--blocks", "4",   "--vocab",
                                     "128",     "--bits",   "2.5", "--codebook",
                                     "mul1",    NULL};
  char *dir = synth_cli("chain", opts);
  trellis_model *model = NULL;
  tu_assert_status(trellis_model_open(dir, &model), TRELLIS_OK);
  float x[6144], mid[1024];
  synth_rng r;
  synth_seed(&r, 5);
  for (int i = 0; i < 6144; i++)
    x[i] = (float)synth_normal(&r);
  for (int b = 0; b < 4; b++) {
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate_up_proj", b);
    forward(model, name, x, mid, 6144, 1024);
    const double a = rms(mid, 1024);
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj", b);
    forward(model, name, mid, x, 512, 6144);
    const double c = rms(x, 6144);
    if (!(a > 0.7 && a < 1.4 && c > 0.7 && c < 1.4))
      fail_msg("block %d: RMS %.3f after gate_up, %.3f after down", b, a, c);
  }
  trellis_model_close(model);
  free(dir);
}

/* -------------------------------------------------------- atomic writes -- */

static void test_refuses_existing(void **state) {
  (void)state;
  char *parent = fresh_dir("refuse");
  char *dir = tu_join(parent, "out");
  assert_int_equal(mkdir(dir, 0755), 0);
  char *keep = tu_join(dir, "notes.txt");
  tu_write_file(keep, "mine", 4);

  const char *args[] = {"synth", "glm-tp4", dir,   "--blocks",
                        "1",     "--vocab", "128", NULL};
  tu_run_result r = run_cli(args);
  expect_code("synth onto a directory", &r, 1);
  assert_non_null(strstr(r.err, "exists"));
  assert_non_null(strstr(r.err, "--force"));
  tu_run_free(&r);

  const char *forced[] = {"synth",   "glm-tp4", dir,       "--blocks", "1",
                          "--vocab", "128",     "--force", NULL};
  r = run_cli(forced);
  expect_code("--force onto a non-model directory", &r, 1);
  assert_non_null(strstr(r.err, "notes.txt"));
  tu_run_free(&r);
  /* untouched, and nothing beside it */
  char *list = listing(dir);
  assert_string_equal(list, "notes.txt");
  free(list);
  size_t size = 0;
  uint8_t *data = tu_read_file(keep, &size);
  assert_memory_equal(data, "mine", 4);
  free(data);
  list = listing(parent);
  assert_string_equal(list, "out");
  free(list);

  /* a regular file is refused too */
  char *file = tu_join(parent, "file");
  tu_write_file(file, "x", 1);
  const char *onto_file[] = {"synth",   "glm-tp4", file,      "--blocks", "1",
                             "--vocab", "128",     "--force", NULL};
  r = run_cli(onto_file);
  expect_code("--force onto a file", &r, 1);
  assert_non_null(strstr(r.err, "regular file"));
  tu_run_free(&r);
  unlink(file);
  free(file);

  /* a model directory: refused without --force, replaced with it */
  char *model = tu_join(parent, "model");
  const char *first[] = {"synth",   "glm-tp4", model,    "--blocks", "1",
                         "--vocab", "128",     "--seed", "1",        NULL};
  r = run_cli(first);
  expect_code("synth", &r, 0);
  tu_run_free(&r);
  char *config_path = tu_join(model, "config.json");
  char *config1 = tu_read_text(config_path);
  const char *again[] = {"synth",   "glm-tp4", model,    "--blocks", "1",
                         "--vocab", "128",     "--seed", "2",        NULL};
  r = run_cli(again);
  expect_code("synth onto a model", &r, 1);
  tu_run_free(&r);
  char *config = tu_read_text(config_path);
  assert_string_equal(config, config1);
  free(config);
  const char *replace[] = {"synth", "glm-tp4", model, "--blocks",
                           "1",     "--vocab", "128", "--seed",
                           "2",     "--force", NULL};
  r = run_cli(replace);
  expect_code("synth --force onto a model", &r, 0);
  tu_run_free(&r);
  config = tu_read_text(config_path);
  assert_non_null(strstr(config, "\"seed\": 2"));
  free(config);
  list = listing(parent);
  assert_string_equal(list, "model,out");
  free(list);

  free(config1);
  free(config_path);
  free(model);
  free(keep);
  free(dir);
  free(parent);
}

static void test_failed_write_leaves_nothing(void **state) {
  (void)state;
  char *parent = fresh_dir("fsize");
  char *dir = tu_join(parent, "out");
  const char *args[] = {"synth", "glm-tp4", dir,   "--blocks",
                        "2",     "--vocab", "128", NULL};
  /* writes past 1 MiB fail (the CLI ignores SIGXFSZ, so EFBIG) */
  tu_run_opts o = {.fsize = 1 << 20};
  tu_run_result r = run_cli_opts(args, &o);
  expect_code("synth under RLIMIT_FSIZE", &r, 1);
  assert_non_null(strstr(r.err, "File too large"));
  tu_run_free(&r);
  char *list = listing(parent);
  assert_string_equal(list, "");
  free(list);

  /* an interrupt at any time: a whole model, or nothing */
  const char *big[] = {"synth", "glm-tp4", dir,   "--blocks",
                       "8",     "--vocab", "128", NULL};
  static const int delays[] = {2, 4, 8};
  for (int i = 0; i < 3; i++) {
    tu_run_opts sig = {.sig = SIGINT, .signal_after_ms = delays[i]};
    r = run_cli_opts(big, &sig);
    list = listing(parent);
    if (r.code == 0) { /* finished first: a whole model */
      assert_string_equal(list, "out");
      const char *info[] = {"info", dir, NULL};
      tu_run_result ri = run_cli(info);
      expect_code("info of the finished model", &ri, 0);
      tu_run_free(&ri);
      remove_flat_dir(dir);
    } else {
      if (r.code != 128 + SIGINT)
        fail_msg("interrupted synth: exit %d, stderr %s", r.code, r.err);
      assert_string_equal(list, "");
    }
    free(list);
    tu_run_free(&r);
  }

  /* SIGKILL cannot be caught: the temporary directory may stay, but no
   * model appears at OUT_DIR */
  tu_run_opts kill9 = {.sig = SIGKILL, .signal_after_ms = 20};
  r = run_cli_opts(big, &kill9);
  if (r.code == 128 + SIGKILL)
    assert_false(exists(dir));
  tu_run_free(&r);
  free(dir);
  free(parent);
}

/* The stop flag an interrupt sets, raised halfway through the write (a
 * second shard is under way): an error, and nothing left. */
static volatile sig_atomic_t stop_flag;

static void stop_halfway(void *ctx, uint64_t done, uint64_t total) {
  int *calls = ctx;
  ++*calls;
  if (done > total / 2)
    stop_flag = 1;
}

static void test_stopped_write_leaves_nothing(void **state) {
  (void)state;
  synth_options o;
  synth_options_init(&o);
  o.preset = "glm-tp4";
  o.blocks = 2;
  o.vocab = 128;
  o.shard_bytes = 4 << 20;
  synth_model m;
  plan_or_fail(&o, &m);
  assert_true(m.shard_count > 2);
  char *parent = fresh_dir("stopped");
  char *dir = tu_join(parent, "out");
  int calls = 0;
  stop_flag = 0;
  tu_assert_status(
      synth_model_write(&m, dir, 0, &stop_flag, stop_halfway, &calls),
      TRELLIS_ERR_IO);
  tu_assert_error_has("interrupted");
  assert_true(calls > 2);
  char *list = listing(parent);
  assert_string_equal(list, "");
  free(list);
  /* the same write without a stop: the model */
  stop_flag = 0;
  tu_assert_status(synth_model_write(&m, dir, 0, &stop_flag, NULL, NULL),
                   TRELLIS_OK);
  list = listing(parent);
  assert_string_equal(list, "out");
  free(list);
  check_model_bytes(&m, dir);
  synth_model_free(&m);
  free(dir);
  free(parent);
}

/* ----------------------------------------------------- command lines -- */

static void test_bad_command_lines(void **state) {
  (void)state;
  char *dir = tu_tmp_path("never");
  struct {
    const char *args[8];
    const char *needle;
  } cases[] = {
      {{"synth", "llama-4", dir}, "unknown preset"},
      {{"synth", "glm-tp4", dir, "--bits", "9"}, "--bits"},
      {{"synth", "glm-tp4", dir, "--bits", "3x"}, "--bits"},
      {{"synth", "glm-tp4", dir, "--head-bits", "12"}, "--head-bits"},
      {{"synth", "glm-tp4", dir, "--codebook", "sqg_e4m3"}, "--codebook"},
      {{"synth", "glm-tp4", dir, "--vocab", "1000"}, "--vocab"},
      {{"synth", "glm-tp4", dir, "--blocks", "0"}, "--blocks"},
      {{"synth", "glm-tp4", dir, "--blocks", "79"}, "--blocks"},
      {{"synth", "glm-tp4", dir, "--shard-size", "0"}, "--shard-size"},
      {{"synth", "glm-tp4", dir, "--seed", "-1"}, "--seed"},
      {{"synth", "glm-tp4"}, "OUT_DIR"},
      {{"info", TU_TOY_MODEL, "--max-m", "4"}, "--plan"},
      {{"info", TU_TOY_MODEL, "--plan", "--max-m", "0"}, "--max-m"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    tu_run_result r = run_cli(cases[i].args);
    if (r.code != 2 || !strstr(r.err, cases[i].needle))
      fail_msg("%s %s: exit %d, stderr: %s", cases[i].args[0],
               cases[i].args[2] ? cases[i].args[2] : "", r.code, r.err);
    assert_true(one_line(r.err));
    tu_run_free(&r);
  }
  assert_false(exists(dir));
  free(dir);

  const char *help[] = {"synth", "--help", NULL};
  tu_run_result r = run_cli(help);
  expect_code("synth --help", &r, 0);
  assert_non_null(strstr(r.out, "llama-3.1-70b"));
  tu_run_free(&r);
}

/* ---------------------------------------------------------- info --plan -- */

static void test_info_plan_without_gpu(void **state) {
  (void)state;
  const char *plain[] = {"info", TU_TOY_MODEL, NULL};
  tu_run_result r = run_cli(plain);
  expect_code("info", &r, 0);
  tu_run_free(&r);
  if (tu_gpu_available()) /* the GPU side is gpu_model_plan's */
    skip();
  const char *args[] = {"info", TU_TOY_MODEL, "--plan", NULL};
  r = run_cli(args);
  expect_code("info --plan without a GPU", &r, 1);
  assert_non_null(strstr(r.err, trellis_cuda_built()
                                    ? "no CUDA device is available"
                                    : "libtrellis was built without CUDA"));
  assert_non_null(strstr(r.err, "--gpu NAME")); /* what to do instead */
  assert_string_equal(r.out, "");
  tu_run_free(&r);
}

/* The m column, path and four sizes of every row of info --plan's
 * per-layer table, one line each ("m path rotated in out ws"). */
static char *plan_rows(const char *out) {
  const char *at = strstr(out, "\nlayer ");
  assert_non_null(at);
  at = strchr(at + 1, '\n') + 1;
  char *rows = calloc(strlen(out) + 1, 1);
  assert_non_null(rows);
  while (*at && *at != '\n') {
    const char *end = strchr(at, '\n');
    char line[512], *tok[16];
    int n = 0;
    snprintf(line, sizeof line, "%.*s", (int)(end - at), at);
    for (char *s = NULL, *t = strtok_r(line, " ", &s); t && n < 16;
         t = strtok_r(NULL, " ", &s))
      tok[n++] = t;
    assert_true(n >= 6);
    for (int i = n - 6; i < n; i++)
      strcat(strcat(rows, tok[i]), i + 1 < n ? " " : "\n");
    at = end + 1;
  }
  return rows;
}

/* info --plan --gpu NAME: the rules' plans without a GPU, said to be
 * estimates; the K6/MCG layer takes the fused path (no workspace) up to
 * m = 128 on sm_90 and never on sm_80; a target by name and by its
 * numbers report the same. */
static void test_info_plan_for_a_target(void **state) {
  (void)state;
  const char *h200[] = {"info", TU_TOY_MODEL, "--plan", "--gpu", "h200", NULL};
  tu_run_result a = run_cli(h200);
  expect_code("info --plan --gpu h200", &a, 0);
  assert_non_null(strstr(a.out, "estimates for NVIDIA H200"));
  assert_non_null(strstr(a.out, "no GPU was used"));
  assert_non_null(strstr(a.out, "provision for every m in 1..256:"));
  assert_non_null(strstr(a.out, "one stream: EXL3 weights"));
  char *rows = plan_rows(a.out);
  assert_non_null(strstr(rows, "1 fused 512 0 0 0\n"));
  assert_non_null(strstr(rows, "128 fused 65536 0 0 0\n"));
  assert_null(strstr(rows, "256 fused"));
  const char *custom[] = {"info",  TU_TOY_MODEL,      "--plan",
                          "--gpu", "sms=132,arch=90", NULL};
  tu_run_result b = run_cli(custom);
  expect_code("info --plan --gpu sms=132,arch=90", &b, 0);
  char *rows_b = plan_rows(b.out);
  assert_string_equal(rows, rows_b);
  assert_string_equal(strstr(a.out, "\nshared buffers"),
                      strstr(b.out, "\nshared buffers"));
  free(rows_b);
  tu_run_free(&b);
  const char *a100[] = {"info", TU_TOY_MODEL, "--plan", "--max-m",
                        "64",   "--gpu",      "a100",   NULL};
  b = run_cli(a100);
  expect_code("info --plan --gpu a100", &b, 0);
  rows_b = plan_rows(b.out);
  assert_null(strstr(rows_b, "fused"));
  assert_non_null(strstr(b.out, "108 SMs, sm_80"));
  free(rows_b);
  tu_run_free(&b);
  free(rows);
  tu_run_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_presets),
      cmocka_unit_test(test_info_plan_for_a_target),
      cmocka_unit_test(test_bits_rule),
      cmocka_unit_test(test_bits_rule_half),
      cmocka_unit_test(test_shard_plan),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_round_trip_glm),
      cmocka_unit_test(test_round_trip_half),
      cmocka_unit_test(test_round_trip_llama),
      cmocka_unit_test(test_shards_and_index),
      cmocka_unit_test(test_activations_stay_o1),
      cmocka_unit_test(test_refuses_existing),
      cmocka_unit_test(test_failed_write_leaves_nothing),
      cmocka_unit_test(test_stopped_write_leaves_nothing),
      cmocka_unit_test(test_bad_command_lines),
      cmocka_unit_test(test_info_plan_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
