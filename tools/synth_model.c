/* SPDX-License-Identifier: Apache-2.0 */
/* Synthetic EXL3 model directories (see synth_model.h). */
#include "tools/synth_model.h"
#include "tools/synth.h"

#include "core/internal.h"
#include "format/codebooks.h"
#include "io/posix_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Mean square of the |N(1, 0.1)| magnitudes of synth_scales. */
#define SCALE_MEAN_SQUARE 1.01

/* ------------------------------------------------------------ presets -- */

static const synth_preset presets[] = {
    {"llama-3.1-8b", "LlamaForCausalLM", "llama", SYNTH_LAYOUT_LLAMA, 4096,
     14336, 32, 8, 128, 0, 128256, 32, 1},
    {"llama-3.1-70b", "LlamaForCausalLM", "llama", SYNTH_LAYOUT_LLAMA, 8192,
     28672, 64, 8, 128, 0, 128256, 80, 1},
    {"glm-tp4", "GlmTp4Shard", "glm_tp4_shard", SYNTH_LAYOUT_GLM_TP4, 6144, 512,
     16, 0, 256, 2048, 37888, 78, 4},
};

size_t synth_preset_count(void) { return sizeof presets / sizeof presets[0]; }

const synth_preset *synth_preset_at(size_t i) {
  return i < synth_preset_count() ? &presets[i] : NULL;
}

const synth_preset *synth_preset_find(const char *name) {
  for (size_t i = 0; name && i < synth_preset_count(); i++)
    if (strcmp(presets[i].name, name) == 0)
      return &presets[i];
  return NULL;
}

/* -------------------------------------------------------------- roles -- */

static const struct {
  const char *suffix; /* after "model.layers.N." */
  synth_role role;
} role_suffixes[] = {
    {"self_attn.q_proj", SYNTH_ROLE_Q},
    {"self_attn.k_proj", SYNTH_ROLE_K},
    {"self_attn.v_proj", SYNTH_ROLE_V},
    {"self_attn.o_proj", SYNTH_ROLE_O},
    {"self_attn.q_b_proj", SYNTH_ROLE_Q_B},
    {"mlp.gate_proj", SYNTH_ROLE_GATE},
    {"mlp.up_proj", SYNTH_ROLE_UP},
    {"mlp.gate_up_proj", SYNTH_ROLE_GATE_UP},
    {"mlp.down_proj", SYNTH_ROLE_DOWN},
};

const char *synth_role_name(synth_role role) {
  switch (role) {
  case SYNTH_ROLE_Q:
    return "q";
  case SYNTH_ROLE_K:
    return "k";
  case SYNTH_ROLE_V:
    return "v";
  case SYNTH_ROLE_O:
    return "o";
  case SYNTH_ROLE_Q_B:
    return "q_b";
  case SYNTH_ROLE_GATE:
    return "gate";
  case SYNTH_ROLE_UP:
    return "up";
  case SYNTH_ROLE_GATE_UP:
    return "gate_up";
  case SYNTH_ROLE_DOWN:
    return "down";
  case SYNTH_ROLE_HEAD:
    return "head";
  default:
    return "none";
  }
}

synth_role synth_role_of(const char *name, int *block) {
  static const char prefix[] = "model.layers.";
  if (block)
    *block = -1;
  if (name == NULL)
    return SYNTH_ROLE_NONE;
  if (strcmp(name, "lm_head") == 0)
    return SYNTH_ROLE_HEAD;
  if (strncmp(name, prefix, sizeof prefix - 1) != 0)
    return SYNTH_ROLE_NONE;
  const char *p = name + sizeof prefix - 1;
  long b = 0;
  int digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++)
    b = 10 * b + (*p - '0');
  if (digits == 0 || *p != '.')
    return SYNTH_ROLE_NONE;
  for (size_t i = 0; i < sizeof role_suffixes / sizeof role_suffixes[0]; i++)
    if (strcmp(p + 1, role_suffixes[i].suffix) == 0) {
      if (block)
        *block = (int)b;
      return role_suffixes[i].role;
    }
  return SYNTH_ROLE_NONE;
}

/* ------------------------------------------------------------ options -- */

int synth_exl3_codebook(int cb) {
  return trl_codebook_known(cb) && !trl_codebook_is_sqg(cb);
}

void synth_options_init(synth_options *o) {
  memset(o, 0, sizeof *o);
  o->preset = "llama-3.1-8b";
  o->bits = 4.0;
  o->head_bits = 6;
  o->codebook = TRELLIS_CB_MCG;
  o->odd_block_codebook = -1;
  o->shard_bytes = (uint64_t)8192 << 20;
}

static trellis_status check_options(const synth_options *o,
                                    const synth_preset **preset) {
  *preset = synth_preset_find(o->preset);
  if (*preset == NULL) {
    char names[256] = "";
    for (size_t i = 0; i < synth_preset_count(); i++) {
      size_t used = strlen(names);
      snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
               presets[i].name);
    }
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "unknown preset '%s' (presets: %s)",
                    o->preset ? o->preset : "(null)", names);
  }
  if (!(o->bits >= TRELLIS_MIN_BITS && o->bits <= TRELLIS_MAX_BITS))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "bits %g is outside %d..%d",
                    o->bits, TRELLIS_MIN_BITS, TRELLIS_MAX_BITS);
  char names[96];
  trl_codebook_list(synth_exl3_codebook, names, sizeof names);
  if (!synth_exl3_codebook((int)o->codebook))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "codebook %s is not an EXL3 codebook (%s)",
                    trellis_codebook_name(o->codebook), names);
  if (o->odd_block_codebook != -1 &&
      !synth_exl3_codebook(o->odd_block_codebook))
    return trl_fail(
        TRELLIS_ERR_INVALID_ARGUMENT,
        "odd-block codebook %s is not an EXL3 codebook (%s)",
        trellis_codebook_name((trellis_codebook)o->odd_block_codebook), names);
  if (!(o->head_bits == 16 && !o->head_half) &&
      !(trl_codebook_rate_valid((int)o->codebook, o->head_bits, o->head_half) &&
        o->head_bits >= TRELLIS_MIN_BITS))
    return trl_fail(
        TRELLIS_ERR_INVALID_ARGUMENT,
        "head bits %d%s is not a rate of codebook %s (K %d..%d%s) "
        "or 16 (fp16)",
        o->head_bits, o->head_half ? ".5" : "",
        trellis_codebook_name(o->codebook),
        trl_codebook_min_bits((int)o->codebook),
        trl_codebook_max_bits((int)o->codebook),
        trl_codebook_has_half((int)o->codebook) ? ", or 1.5, 2.5, 3.5" : "");
  if (o->blocks < 0 || o->blocks > (*preset)->blocks)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "blocks %d is outside 1..%d (%s)", o->blocks,
                    (*preset)->blocks, (*preset)->name);
  if (o->vocab < 0 || o->vocab % TRELLIS_HBLOCK != 0 ||
      o->vocab > ((int64_t)1 << 22))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "vocab %lld is not a multiple of %d in %d..%d",
                    (long long)o->vocab, TRELLIS_HBLOCK, TRELLIS_HBLOCK,
                    1 << 22);
  if (o->shard_bytes == 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "shard size is 0");
  return TRELLIS_OK;
}

/* --------------------------------------------------------------- plan -- */

/* A module's rate in half-bits (format/codebooks.h). */
static int module_rate(const synth_module *mod) {
  return trl_rate_h(mod->bits, mod->half);
}

/* The trellis words of a LINEAR module: k n K / 16 = k n h / 32. */
static uint64_t linear_words(const synth_module *mod) {
  return (uint64_t)mod->k * (uint64_t)mod->n / 32 * (uint64_t)module_rate(mod);
}

typedef struct builder {
  synth_model *m;
  size_t module_cap, tensor_cap;
} builder;

static trellis_status add_module(builder *b, synth_kind kind, synth_role role,
                                 int block, int64_t k, int64_t n,
                                 const char *fmt, ...) TRL_PRINTF(7, 8);

static trellis_status add_module(builder *b, synth_kind kind, synth_role role,
                                 int block, int64_t k, int64_t n,
                                 const char *fmt, ...) {
  synth_model *m = b->m;
  if (m->module_count == b->module_cap) {
    size_t cap = b->module_cap ? 2 * b->module_cap : 64;
    synth_module *grown = realloc(m->modules, cap * sizeof *grown);
    if (!grown)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    m->modules = grown;
    b->module_cap = cap;
  }
  synth_module *mod = &m->modules[m->module_count++];
  memset(mod, 0, sizeof *mod);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mod->name, sizeof mod->name, fmt, ap);
  va_end(ap);
  mod->kind = kind;
  mod->role = role;
  mod->block = block;
  mod->k = k;
  mod->n = n;
  mod->bits = 16;
  return TRELLIS_OK;
}

static trellis_status add_block(builder *b, const synth_preset *p, int i) {
  const int64_t h = p->hidden;
  trellis_status st;
#define ADD(kind, role, k, n, suffix)                                          \
  do {                                                                         \
    if ((st = add_module(b, kind, role, i, k, n, "model.layers.%d.%s", i,      \
                         suffix)) != TRELLIS_OK)                               \
      return st;                                                               \
  } while (0)
  ADD(SYNTH_NORM, SYNTH_ROLE_NONE, h, h, "input_layernorm");
  if (p->layout == SYNTH_LAYOUT_LLAMA) {
    const int64_t q = p->heads * p->head_dim, kv = p->kv_heads * p->head_dim;
    ADD(SYNTH_LINEAR, SYNTH_ROLE_Q, h, q, "self_attn.q_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_K, h, kv, "self_attn.k_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_V, h, kv, "self_attn.v_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_O, q, h, "self_attn.o_proj");
    ADD(SYNTH_NORM, SYNTH_ROLE_NONE, h, h, "post_attention_layernorm");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_GATE, h, p->intermediate, "mlp.gate_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_UP, h, p->intermediate, "mlp.up_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_DOWN, p->intermediate, h, "mlp.down_proj");
  } else {
    ADD(SYNTH_LINEAR, SYNTH_ROLE_Q_B, p->q_lora_rank, p->heads * p->head_dim,
        "self_attn.q_b_proj");
    ADD(SYNTH_NORM, SYNTH_ROLE_NONE, h, h, "post_attention_layernorm");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_GATE_UP, h, 2 * p->intermediate,
        "mlp.gate_up_proj");
    ADD(SYNTH_LINEAR, SYNTH_ROLE_DOWN, p->intermediate, h, "mlp.down_proj");
  }
#undef ADD
  return TRELLIS_OK;
}

static trellis_status add_tensor(builder *b, const char *module,
                                 const char *suffix, trellis_tensor_dtype dt,
                                 int ndim, int64_t d0, int64_t d1, int64_t d2) {
  synth_model *m = b->m;
  if (m->tensor_count == b->tensor_cap) {
    size_t cap = b->tensor_cap ? 2 * b->tensor_cap : 256;
    synth_tensor *grown = realloc(m->tensors, cap * sizeof *grown);
    if (!grown)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    m->tensors = grown;
    b->tensor_cap = cap;
  }
  synth_tensor *t = &m->tensors[m->tensor_count++];
  memset(t, 0, sizeof *t);
  snprintf(t->name, sizeof t->name, "%s%s", module, suffix);
  t->dtype = dt;
  t->ndim = ndim;
  const int64_t d[3] = {d0, d1, d2};
  t->bytes = trellis_tensor_dtype_size(dt);
  for (int i = 0; i < ndim; i++) {
    t->shape[i] = d[i];
    t->bytes *= (uint64_t)d[i];
  }
  return TRELLIS_OK;
}

/* The tensors of module i, as stored. */
static trellis_status add_tensors(builder *b, size_t i) {
  synth_model *m = b->m;
  synth_module *mod = &m->modules[i];
  mod->tensor = m->tensor_count;
  trellis_status st = TRELLIS_OK;
  switch (mod->kind) {
  case SYNTH_EMBED:
    st = add_tensor(b, mod->name, ".weight", TRELLIS_T_F16, 2, mod->n, mod->k,
                    0);
    break;
  case SYNTH_NORM:
    st = add_tensor(b, mod->name, ".weight", TRELLIS_T_F16, 1, mod->n, 0, 0);
    break;
  case SYNTH_DENSE:
    st = add_tensor(b, mod->name, ".weight", TRELLIS_T_F16, 2, mod->n, mod->k,
                    0);
    break;
  case SYNTH_LINEAR: {
    char marker[16];
    if ((st =
             add_tensor(b, mod->name, ".trellis", TRELLIS_T_I16, 3, mod->k / 16,
                        mod->n / 16, trl_rate_tile_words(module_rate(mod)))) ||
        (st = add_tensor(b, mod->name, ".suh", TRELLIS_T_F16, 1, mod->k, 0,
                         0)) ||
        (st = add_tensor(b, mod->name, ".svh", TRELLIS_T_F16, 1, mod->n, 0, 0)))
      break;
    /* the codebook's marker, I32 0-dim (3INST has none) */
    if (trl_codebook_marker((int)mod->codebook)[0]) {
      snprintf(marker, sizeof marker, ".%s",
               trl_codebook_marker((int)mod->codebook));
      st = add_tensor(b, mod->name, marker, TRELLIS_T_I32, 0, 0, 0, 0);
    }
    break;
  }
  }
  m = b->m; /* add_tensor may have moved the arrays */
  mod = &m->modules[i];
  mod->tensor_count = (int)(m->tensor_count - mod->tensor);
  for (size_t t = mod->tensor; t < m->tensor_count; t++)
    mod->bytes += m->tensors[t].bytes;
  return st;
}

/* The layers of one size (k * n) among the blocks' linear layers. */
typedef struct size_class {
  double weights; /* k * n of each */
  int count;      /* layers of this size */
  int high;       /* how many of them get the higher K */
} size_class;

/* Searches every count of higher-K layers per size class (the last class's
 * count follows from the others) for the sum of higher-K weights nearest
 * `target`; `choice` is the current try, the best goes to classes[].high. */
static void search(size_class *classes, int nclass, int at, int *choice,
                   double sum, double target, double *best) {
  if (at == nclass - 1) {
    const size_class *c = &classes[at];
    double n = floor((target - sum) / c->weights + 0.5);
    n = n < 0 ? 0 : n > c->count ? c->count : n;
    const double err = fabs(sum + n * c->weights - target);
    if (err < *best) {
      *best = err;
      choice[at] = (int)n;
      for (int i = 0; i < nclass; i++)
        classes[i].high = choice[i];
    }
    return;
  }
  for (int n = 0; n <= classes[at].count; n++) {
    choice[at] = n;
    search(classes, nclass, at + 1, choice, sum + n * classes[at].weights,
           target, best);
  }
}

/* 1 when every linear layer's codebook takes rate h (half-bits). */
static int rate_allowed(const synth_options *o, int h) {
  const int bits = trl_rate_bits(h), half = trl_rate_half(h);
  return trl_codebook_rate_valid((int)o->codebook, bits, half) &&
         (o->odd_block_codebook < 0 ||
          trl_codebook_rate_valid(o->odd_block_codebook, bits, half));
}

/* The steps of the bitrate rule around `bits`, in half-bits: the largest
 * rate at most `bits` every layer's codebook takes, and the next one (equal
 * at the top). With MUL1 the steps are 1, 1.5, 2, 2.5, 3, 3.5, 4, 5, 6,
 * 7, 8, as ExLlamaV3 1.6's allocator's (half steps below 4, EXL3-1.6
 * §1.1); otherwise the integers. */
static void rate_steps(const synth_options *o, double bits, int *lo, int *hi) {
  *lo = 2 * TRELLIS_MIN_BITS;
  for (int h = 2 * TRELLIS_MIN_BITS; h <= 2 * TRELLIS_MAX_BITS; h++)
    if (rate_allowed(o, h) && h <= 2.0 * bits)
      *lo = h;
  *hi = *lo;
  for (int h = *lo + 1; h <= 2 * TRELLIS_MAX_BITS && *hi == *lo; h++)
    if (rate_allowed(o, h))
      *hi = h;
}

static void set_rate(synth_module *mod, int h) {
  mod->bits = trl_rate_bits(h);
  mod->half = trl_rate_half(h);
}

/* The bitrate rule (synth_model.h). */
static trellis_status assign_bits(synth_model *m) {
  const double bits = m->opt.bits;
  int lo, hi; /* the two rates, in half-bits */
  rate_steps(&m->opt, bits, &lo, &hi);
  const double k_lo = lo / 2.0, k_step = (hi - lo) / 2.0;
  enum { MOST_CLASSES = 8 };
  size_class classes[MOST_CLASSES];
  int nclass = 0, choice[MOST_CLASSES];
  double total = 0.0, tries = 1.0;
  for (size_t i = 0; i < m->module_count; i++) {
    synth_module *mod = &m->modules[i];
    if (mod->kind != SYNTH_LINEAR || mod->block < 0)
      continue;
    set_rate(mod, lo);
    const double w = (double)mod->k * (double)mod->n;
    total += w;
    int c = 0;
    while (c < nclass && classes[c].weights != w)
      c++;
    if (c == MOST_CLASSES)
      return trl_fail(TRELLIS_ERR_INTERNAL,
                      "synth: more than %d layer sizes in a preset",
                      MOST_CLASSES);
    if (c == nclass)
      classes[nclass++] = (size_class){w, 0, 0};
    classes[c].count++;
  }
  for (int c = 0; c + 1 < nclass; c++)
    tries *= classes[c].count + 1;
  if (hi > lo && nclass > 0 && tries <= 5e7) {
    double best = INFINITY;
    search(classes, nclass, 0, choice, 0.0, (bits - k_lo) / k_step * total,
           &best);
  }
  /* within a class, spread the higher K evenly over the depth */
  double high = 0.0;
  int seen[MOST_CLASSES] = {0};
  for (size_t i = 0; i < m->module_count; i++) {
    synth_module *mod = &m->modules[i];
    if (mod->kind != SYNTH_LINEAR || mod->block < 0)
      continue;
    const double w = (double)mod->k * (double)mod->n;
    int c = 0;
    while (classes[c].weights != w)
      c++;
    const long j = seen[c]++, h = classes[c].high, n = classes[c].count;
    if ((j + 1) * h / n > j * h / n) {
      set_rate(mod, hi);
      high += w;
    }
  }
  m->bits = total > 0 ? k_lo + k_step * high / total : bits;
  return TRELLIS_OK;
}

static void plan_shards(synth_model *m) {
  int shard = 0;
  uint64_t used = 0;
  for (size_t i = 0; i < m->module_count; i++) {
    synth_module *mod = &m->modules[i];
    if (used > 0 && used + mod->bytes > m->opt.shard_bytes) {
      shard++;
      used = 0;
    }
    mod->shard = shard;
    for (int t = 0; t < mod->tensor_count; t++) {
      synth_tensor *ts = &m->tensors[mod->tensor + (size_t)t];
      ts->offset = used;
      used += ts->bytes;
    }
  }
  m->shard_count = shard + 1;
}

static double codebook_rms(trellis_codebook cb) {
  const uint16_t *table = trellis_codebook_table(cb);
  double sum = 0.0;
  for (uint32_t s = 0; table && s < 65536; s++) {
    const double v = trellis_f16_to_f32(table[s]);
    sum += v * v;
  }
  return table ? sqrt(sum / 65536.0) : 1.0;
}

trellis_status synth_model_plan(const synth_options *o, synth_model *out) {
  memset(out, 0, sizeof *out);
  const synth_preset *p = NULL;
  trellis_status st = check_options(o, &p);
  if (st != TRELLIS_OK)
    return st;
  out->preset = p;
  out->opt = *o;
  out->opt.preset = p->name;
  if (out->opt.blocks == 0)
    out->opt.blocks = p->blocks;
  if (out->opt.vocab == 0)
    out->opt.vocab = p->vocab;
  out->codebook_rms = codebook_rms(o->codebook);
  out->odd_block_codebook_rms =
      o->odd_block_codebook < 0
          ? out->codebook_rms
          : codebook_rms((trellis_codebook)o->odd_block_codebook);

  builder b = {out, 0, 0};
  const int64_t h = p->hidden, vocab = out->opt.vocab;
  if ((st = add_module(&b, SYNTH_EMBED, SYNTH_ROLE_NONE, -1, h, vocab,
                       "model.embed_tokens")) != TRELLIS_OK)
    return st;
  for (int i = 0; i < out->opt.blocks; i++)
    if ((st = add_block(&b, p, i)) != TRELLIS_OK)
      return st;
  if ((st = add_module(&b, SYNTH_NORM, SYNTH_ROLE_NONE, -1, h, h,
                       "model.norm")) != TRELLIS_OK ||
      (st = add_module(&b, o->head_bits == 16 ? SYNTH_DENSE : SYNTH_LINEAR,
                       SYNTH_ROLE_HEAD, -1, h, vocab, "lm_head")) != TRELLIS_OK)
    return st;
  if ((st = assign_bits(out)) != TRELLIS_OK)
    return st;
  synth_module *head = &out->modules[out->module_count - 1];
  head->bits = o->head_bits;
  head->half = o->head_bits == 16 ? 0 : o->head_half;
  for (size_t i = 0; i < out->module_count; i++) {
    synth_module *mod = &out->modules[i];
    mod->codebook = o->codebook;
    if (o->odd_block_codebook >= 0 && mod->block >= 0 && mod->block % 2 == 1)
      mod->codebook = (trellis_codebook)o->odd_block_codebook;
    if (out->modules[i].kind == SYNTH_LINEAR)
      out->linear_count++;
    if ((st = add_tensors(&b, i)) != TRELLIS_OK)
      return st;
  }
  plan_shards(out);
  out->shard_data = calloc((size_t)out->shard_count, sizeof *out->shard_data);
  if (!out->shard_data)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
  for (size_t i = 0; i < out->module_count; i++) {
    out->shard_data[out->modules[i].shard] += out->modules[i].bytes;
    out->total_bytes += out->modules[i].bytes;
  }
  return TRELLIS_OK;
}

void synth_model_free(synth_model *m) {
  free(m->modules);
  free(m->tensors);
  free(m->shard_data);
  memset(m, 0, sizeof *m);
}

uint64_t synth_module_seed(uint64_t seed, const char *name) {
  uint64_t h = 0xCBF29CE484222325ull; /* FNV-1a, 64 bits */
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    h = (h ^ *p) * 0x100000001B3ull;
  synth_rng r;
  synth_seed(&r, seed ^ h);
  return synth_next(&r);
}

/* --------------------------------------------------------------- data -- */

typedef enum fill_kind {
  FILL_WORDS,   /* trellis words */
  FILL_SCALES,  /* synth_scales(scale) */
  FILL_UNIFORM, /* fp16 uniform in [-scale, scale), 65536 levels */
  FILL_NORM     /* fp16 |N(1, 0.1)| */
} fill_kind;

/* Generates `count` elements of one tensor in chunks. */
static trellis_status fill(synth_rng *r, fill_kind kind, uint64_t count,
                           double scale, void *buf, size_t cap, synth_sink sink,
                           void *ctx) {
  /* elements per chunk: 2 bytes each, a multiple of 4 so that the words
   * of synth_words (four per draw) do not depend on the chunking */
  const uint64_t per = (cap / 2) & ~(uint64_t)3;
  uint16_t *v = buf, *levels = NULL;
  if (kind == FILL_UNIFORM) { /* the midpoints of 65536 equal steps */
    if ((levels = malloc(65536 * sizeof *levels)) == NULL)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    for (uint32_t i = 0; i < 65536; i++)
      levels[i] = trellis_f32_to_f16(
          (float)(scale * ((2.0 * i + 1.0) / 65536.0 - 1.0)));
  }
  while (count > 0) {
    const size_t c = (size_t)(count < per ? count : per);
    switch (kind) {
    case FILL_WORDS:
      synth_words(r, (int16_t *)buf, c);
      break;
    case FILL_SCALES:
      synth_scales(r, v, c, scale);
      break;
    case FILL_UNIFORM: /* four values per draw (count is a multiple of 4:
                          every dimension is a multiple of 128) */
      for (size_t i = 0; i < c; i += 4) {
        const uint64_t bits = synth_next(r);
        for (size_t j = 0; j < 4; j++)
          v[i + j] = levels[(bits >> (16 * j)) & 0xFFFF];
      }
      break;
    case FILL_NORM:
      for (size_t i = 0; i < c; i++)
        v[i] = trellis_f32_to_f16((float)fabs(1.0 + 0.1 * synth_normal(r)));
      break;
    }
    if (sink(ctx, buf, 2 * c)) {
      free(levels);
      return trl_fail(TRELLIS_ERR_IO, "synth: generation stopped");
    }
    count -= c;
  }
  free(levels);
  return TRELLIS_OK;
}

/* The magnitudes of a linear module's suh and svh (synth_model.h). */
static void linear_scales(const synth_model *m, const synth_module *mod,
                          double *in_scale, double *out_scale) {
  *in_scale =
      1.0 / ((mod->codebook == m->opt.codebook ? m->codebook_rms
                                               : m->odd_block_codebook_rms) *
             sqrt(SCALE_MEAN_SQUARE * (double)mod->k));
  *out_scale = 1.0 / sqrt(SCALE_MEAN_SQUARE);
}

trellis_status synth_linear_scales(const synth_model *m, size_t index,
                                   uint16_t *suh, uint16_t *svh) {
  if (index >= m->module_count || m->modules[index].kind != SYNTH_LINEAR ||
      suh == NULL || svh == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "synth: scales of module %zu (of %zu), which is not an "
                    "EXL3 linear layer",
                    index, m->module_count);
  const synth_module *mod = &m->modules[index];
  double in_scale, out_scale;
  linear_scales(m, mod, &in_scale, &out_scale);
  synth_rng r;
  synth_seed(&r, synth_module_seed(m->opt.seed, mod->name));
  synth_skip(&r, linear_words(mod) / 4); /* four words per draw */
  synth_scales(&r, suh, (size_t)mod->k, in_scale);
  synth_scales(&r, svh, (size_t)mod->n, out_scale);
  return TRELLIS_OK;
}

trellis_status synth_module_emit(const synth_model *m, size_t index, void *buf,
                                 size_t cap, synth_sink sink, void *ctx) {
  if (index >= m->module_count || buf == NULL || cap < 4096 || sink == NULL)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "synth: emit of module %zu (of %zu) with a %zu-byte "
                    "buffer",
                    index, m->module_count, cap);
  const synth_module *mod = &m->modules[index];
  synth_rng r;
  synth_seed(&r, synth_module_seed(m->opt.seed, mod->name));
  const uint64_t k = (uint64_t)mod->k, n = (uint64_t)mod->n;
  trellis_status st = TRELLIS_OK;
  switch (mod->kind) {
  case SYNTH_EMBED:
    return fill(&r, FILL_UNIFORM, k * n, sqrt(3.0), buf, cap, sink, ctx);
  case SYNTH_NORM:
    return fill(&r, FILL_NORM, n, 0.0, buf, cap, sink, ctx);
  case SYNTH_DENSE:
    return fill(&r, FILL_UNIFORM, k * n, sqrt(3.0 / (double)k), buf, cap, sink,
                ctx);
  case SYNTH_LINEAR:
    break;
  }
  /* the order of synth_layer_init: words, suh, svh */
  double in_scale, out_scale;
  linear_scales(m, mod, &in_scale, &out_scale);
  if ((st = fill(&r, FILL_WORDS, linear_words(mod), 0.0, buf, cap, sink,
                 ctx)) != TRELLIS_OK ||
      (st = fill(&r, FILL_SCALES, k, in_scale, buf, cap, sink, ctx)) !=
          TRELLIS_OK ||
      (st = fill(&r, FILL_SCALES, n, out_scale, buf, cap, sink, ctx)) !=
          TRELLIS_OK)
    return st;
  if (!trl_codebook_marker((int)mod->codebook)[0])
    return TRELLIS_OK;
  const uint32_t marker = trl_codebook_marker_value((int)mod->codebook);
  uint8_t *b = buf;
  for (int i = 0; i < 4; i++)
    b[i] = (uint8_t)(marker >> (8 * i)); /* little-endian I32 */
  if (sink(ctx, b, 4))
    return trl_fail(TRELLIS_ERR_IO, "synth: generation stopped");
  return TRELLIS_OK;
}

/* --------------------------------------------------------------- JSON -- */

void synth_shard_name(const synth_model *m, int shard, char *out, size_t cap) {
  snprintf(out, cap, "model-%05d-of-%05d.safetensors", shard + 1,
           m->shard_count);
}

char *synth_shard_header(const synth_model *m, int shard, size_t *len) {
  json_t *root = json_object();
  int ok = root != NULL;
  for (size_t i = 0; ok && i < m->module_count; i++) {
    const synth_module *mod = &m->modules[i];
    if (mod->shard != shard)
      continue;
    for (int j = 0; ok && j < mod->tensor_count; j++) {
      const synth_tensor *t = &m->tensors[mod->tensor + (size_t)j];
      json_t *shape = json_array();
      ok = shape != NULL;
      for (int d = 0; ok && d < t->ndim; d++)
        ok = json_array_append_new(shape, json_integer(t->shape[d])) == 0;
      json_t *entry = json_pack("{s:s, s:o, s:[I, I]}", "dtype",
                                trellis_tensor_dtype_name(t->dtype), "shape",
                                shape, "data_offsets", (json_int_t)t->offset,
                                (json_int_t)(t->offset + t->bytes));
      ok = ok && entry && json_object_set_new(root, t->name, entry) == 0;
    }
  }
  char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
  json_decref(root);
  if (!text)
    return NULL;
  const size_t raw = strlen(text), padded = (raw + 7) & ~(size_t)7;
  char *out = realloc(text, padded + 1);
  if (!out) {
    free(text);
    return NULL;
  }
  memset(out + raw, ' ', padded - raw);
  out[padded] = '\0';
  *len = padded;
  return out;
}

char *synth_config_json(const synth_model *m) {
  const synth_preset *p = m->preset;
  const synth_options *o = &m->opt;
  /* head_bits: an integer, or 1.5 / 2.5 / 3.5 as ExLlamaV3 1.6 writes a
   * half rate (EXL3-1.6 §2) */
  json_t *head = o->head_half && o->head_bits != 16
                     ? json_real(o->head_bits + 0.5)
                     : json_integer(o->head_bits);
  json_t *q =
      json_pack("{s:s, s:s, s:f, s:o, s:{s:i, s:i}, s:s, s:s}", "quant_method",
                "exl3", "version", "trellis-synth " TRELLIS_VERSION_STRING,
                "bits", round(m->bits * 1e4) / 1e4, "head_bits", head,
                "calibration", "rows", 0, "cols", 0, "out_scales", "always",
                "codebook", trellis_codebook_name(o->codebook));
  json_t *synth = json_pack("{s:s, s:I, s:f, s:i, s:i, s:s}", "preset", p->name,
                            "seed", (json_int_t)o->seed, "bits_requested",
                            o->bits, "blocks_of_preset", p->blocks,
                            "tensor_parallel_size", p->tensor_parallel, "note",
                            "synthetic: random trellis words, no calibration");
  json_t *root = json_pack(
      "{s:[s], s:s, s:I, s:I, s:i, s:I, s:I, s:I, s:f, s:b, s:s}",
      "architectures", p->architecture, "model_type", p->model_type,
      "hidden_size", (json_int_t)p->hidden, "intermediate_size",
      (json_int_t)p->intermediate, "num_hidden_layers", o->blocks,
      "num_attention_heads", (json_int_t)p->heads, "head_dim",
      (json_int_t)p->head_dim, "vocab_size", (json_int_t)o->vocab,
      "rms_norm_eps", 1e-5, "tie_word_embeddings", 0, "torch_dtype", "float16");
  int ok = q && synth && root;
  if (ok && p->layout == SYNTH_LAYOUT_LLAMA)
    ok = json_object_set_new(root, "num_key_value_heads",
                             json_integer(p->kv_heads)) == 0 &&
         json_object_set_new(root, "hidden_act", json_string("silu")) == 0 &&
         json_object_set_new(root, "rope_theta", json_real(500000.0)) == 0 &&
         json_object_set_new(root, "max_position_embeddings",
                             json_integer(131072)) == 0;
  if (ok && p->layout == SYNTH_LAYOUT_GLM_TP4)
    ok = json_object_set_new(root, "q_lora_rank",
                             json_integer(p->q_lora_rank)) == 0;
  if (ok) {
    ok = json_object_set_new(root, "quantization_config", q) == 0;
    q = NULL;
  }
  if (ok) {
    ok = json_object_set_new(root, "trellis_synth", synth) == 0;
    synth = NULL;
  }
  char *text =
      ok ? json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(10)) : NULL;
  json_decref(q);
  json_decref(synth);
  json_decref(root);
  return text;
}

char *synth_index_json(const synth_model *m) {
  json_t *map = json_object();
  int ok = map != NULL;
  for (size_t i = 0; ok && i < m->module_count; i++) {
    const synth_module *mod = &m->modules[i];
    char file[64];
    synth_shard_name(m, mod->shard, file, sizeof file);
    for (int j = 0; ok && j < mod->tensor_count; j++)
      ok = json_object_set_new(map, m->tensors[mod->tensor + (size_t)j].name,
                               json_string(file)) == 0;
  }
  json_t *root = ok ? json_pack("{s:{s:I}, s:o}", "metadata", "total_size",
                                (json_int_t)m->total_bytes, "weight_map", map)
                    : NULL;
  if (!root)
    json_decref(map);
  char *text = root ? json_dumps(root, JSON_INDENT(1)) : NULL;
  json_decref(root);
  return text;
}

/* -------------------------------------------------------------- write -- */

/* Files a model directory may hold; --force replaces nothing else. */
static int model_file_name(const char *name) {
  static const char *const exact[] = {"config.json", "quantization_config.json",
                                      "model.safetensors",
                                      "model.safetensors.index.json"};
  for (size_t i = 0; i < sizeof exact / sizeof exact[0]; i++)
    if (strcmp(name, exact[i]) == 0)
      return 1;
  const size_t len = strlen(name);
  return strncmp(name, "model-", 6) == 0 && len > 18 &&
         strcmp(name + len - 12, ".safetensors") == 0 &&
         strchr(name, '/') == NULL;
}

static char *path_join(const char *dir, const char *name) {
  const size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (p) {
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
  }
  return p;
}

/* Removes the regular files in `dir` (which has no subdirectories) and
 * then `dir`; only_model: leave it all when anything is not a model file. */
static trellis_status remove_dir(const char *dir, int only_model) {
  DIR *d = opendir(dir);
  if (!d)
    return trl_errno_fail(dir, "cannot open directory", errno);
  trellis_status st = TRELLIS_OK;
  for (int pass = only_model ? 0 : 1; pass < 2 && st == TRELLIS_OK; pass++) {
    rewinddir(d);
    struct dirent *e;
    while (st == TRELLIS_OK && (e = readdir(d)) != NULL) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
        continue;
      char *p = path_join(dir, e->d_name);
      struct stat sb;
      if (!p)
        st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
      else if (pass == 0 && (!model_file_name(e->d_name) ||
                             lstat(p, &sb) != 0 || !S_ISREG(sb.st_mode)))
        st = trl_fail(TRELLIS_ERR_IO,
                      "%s: holds '%s', which is not a model file; --force "
                      "replaces only a model directory",
                      dir, e->d_name);
      else if (pass == 1 && unlink(p) != 0)
        st = trl_errno_fail(p, "cannot remove", errno);
      free(p);
    }
  }
  closedir(d);
  if (st == TRELLIS_OK && rmdir(dir) != 0)
    st = trl_errno_fail(dir, "cannot remove directory", errno);
  return st;
}

/* The checks of remove_dir(dir, 1) without removing anything. */
static trellis_status check_replaceable(const char *dir) {
  struct stat sb;
  if (lstat(dir, &sb) != 0)
    return trl_errno_fail(dir, "cannot stat", errno);
  if (!S_ISDIR(sb.st_mode))
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: is %s; --force replaces only a model directory", dir,
                    trl_file_kind(sb.st_mode));
  DIR *d = opendir(dir);
  if (!d)
    return trl_errno_fail(dir, "cannot open directory", errno);
  trellis_status st = TRELLIS_OK;
  struct dirent *e;
  while (st == TRELLIS_OK && (e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    char *p = path_join(dir, e->d_name);
    if (!p)
      st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    else if (!model_file_name(e->d_name) || lstat(p, &sb) != 0 ||
             !S_ISREG(sb.st_mode))
      st = trl_fail(TRELLIS_ERR_IO,
                    "%s: holds '%s', which is not a model file; --force "
                    "replaces only a model directory",
                    dir, e->d_name);
    free(p);
  }
  closedir(d);
  return st;
}

typedef struct writer {
  int fd;
  const char *path;
  int err; /* errno of a failed write */
  const volatile sig_atomic_t *stop;
  uint64_t done, total;
  synth_progress progress;
  void *ctx;
} writer;

static int write_sink(void *ctx, const void *data, size_t bytes) {
  writer *w = ctx;
  const char *p = data;
  while (bytes > 0) {
    ssize_t got = write(w->fd, p, bytes);
    if (got < 0 && errno == EINTR && !(w->stop && *w->stop))
      continue;
    if (got <= 0) {
      w->err = got < 0 ? errno : EIO;
      return 1;
    }
    p += got;
    bytes -= (size_t)got;
    w->done += (uint64_t)got;
  }
  if (w->progress)
    w->progress(w->ctx, w->done, w->total);
  return w->stop && *w->stop;
}

/* The failure of a stopped or failed sink. */
static trellis_status writer_fail(const writer *w) {
  if (w->err)
    return trl_errno_fail(w->path, "write failed", w->err);
  return trl_fail(TRELLIS_ERR_IO, "%s: interrupted", w->path);
}

static trellis_status write_file(writer *w, const char *path, const char *text,
                                 size_t len) {
  w->path = path;
  w->err = 0;
  w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (w->fd < 0)
    return trl_errno_fail(path, "cannot create", errno);
  trellis_status st = TRELLIS_OK;
  if (write_sink(w, text, len))
    st = writer_fail(w);
  else if (fsync(w->fd) != 0)
    st = trl_errno_fail(path, "fsync failed", errno);
  if (close(w->fd) != 0 && st == TRELLIS_OK)
    st = trl_errno_fail(path, "close failed", errno);
  w->fd = -1;
  return st;
}

static trellis_status write_shard(const synth_model *m, int shard,
                                  const char *path, const char *header,
                                  size_t hlen, void *buf, size_t cap,
                                  writer *w) {
  w->path = path;
  w->err = 0;
  w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (w->fd < 0)
    return trl_errno_fail(path, "cannot create", errno);
  uint8_t len8[8];
  for (int i = 0; i < 8; i++)
    len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
  trellis_status st = TRELLIS_OK;
  if (write_sink(w, len8, 8) || write_sink(w, header, hlen))
    st = writer_fail(w);
  for (size_t i = 0; st == TRELLIS_OK && i < m->module_count; i++)
    if (m->modules[i].shard == shard &&
        synth_module_emit(m, i, buf, cap, write_sink, w) != TRELLIS_OK)
      st = writer_fail(w);
  if (st == TRELLIS_OK && fsync(w->fd) != 0)
    st = trl_errno_fail(path, "fsync failed", errno);
  if (close(w->fd) != 0 && st == TRELLIS_OK)
    st = trl_errno_fail(path, "close failed", errno);
  w->fd = -1;
  return st;
}

static void sync_dir(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    (void)fsync(fd); /* best effort: some filesystems refuse */
    close(fd);
  }
}

/* Everything but the rename: the shards, the index and config.json in
 * `tmp`. */
static trellis_status write_all(const synth_model *m, const char *tmp,
                                char **headers, const size_t *hlens,
                                const char *index, const char *config,
                                writer *w) {
  const size_t cap = (size_t)4 << 20;
  void *buf = malloc(cap);
  if (!buf)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
  trellis_status st = TRELLIS_OK;
  for (int s = 0; st == TRELLIS_OK && s < m->shard_count; s++) {
    char name[64];
    synth_shard_name(m, s, name, sizeof name);
    char *path = path_join(tmp, name);
    st = path ? write_shard(m, s, path, headers[s], hlens[s], buf, cap, w)
              : trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    free(path);
  }
  free(buf);
  const char *names[2] = {"model.safetensors.index.json", "config.json"};
  const char *texts[2] = {index, config};
  for (int i = 0; st == TRELLIS_OK && i < 2; i++) {
    char *path = path_join(tmp, names[i]);
    st = path ? write_file(w, path, texts[i], strlen(texts[i]))
              : trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    free(path);
  }
  if (st == TRELLIS_OK)
    sync_dir(tmp);
  return st;
}

/* parent and base name of `dir` (trailing slashes removed); malloc'd. */
static trellis_status split_path(const char *dir, char **parent, char **base) {
  *parent = *base = NULL;
  size_t len = strlen(dir);
  while (len > 1 && dir[len - 1] == '/')
    len--;
  size_t cut = len;
  while (cut > 0 && dir[cut - 1] != '/')
    cut--;
  const size_t blen = len - cut;
  if (blen == 0 || (blen == 1 && dir[cut] == '.') ||
      (blen == 2 && dir[cut] == '.' && dir[cut + 1] == '.'))
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "%s: not a new directory's name", dir);
  *base = malloc(blen + 1);
  *parent = malloc(cut > 0 ? cut + 1 : 2);
  if (!*base || !*parent) {
    free(*base);
    free(*parent);
    *parent = *base = NULL;
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
  }
  memcpy(*base, dir + cut, blen);
  (*base)[blen] = '\0';
  if (cut == 0)
    strcpy(*parent, ".");
  else if (cut == 1)
    strcpy(*parent, "/");
  else {
    memcpy(*parent, dir, cut - 1);
    (*parent)[cut - 1] = '\0';
  }
  return TRELLIS_OK;
}

static trellis_status check_space(const char *parent, uint64_t need) {
  struct statvfs vfs;
  if (statvfs(parent, &vfs) != 0)
    return TRELLIS_OK; /* unknown: the writes will tell */
  const double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
  if (avail < (double)need)
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: the model needs %.3f GB, the filesystem has %.3f GB "
                    "free",
                    parent, (double)need / 1e9, avail / 1e9);
  return TRELLIS_OK;
}

trellis_status synth_model_write(const synth_model *m, const char *out_dir,
                                 int force, const volatile sig_atomic_t *stop,
                                 synth_progress progress, void *ctx) {
  char *parent = NULL, *base = NULL, *tmp = NULL, *old = NULL;
  char **headers = NULL, *index = NULL, *config = NULL;
  size_t *hlens = NULL;
  int made_tmp = 0;
  trellis_status st = split_path(out_dir, &parent, &base);
  if (st != TRELLIS_OK)
    return st;
  struct stat sb;
  if (stat(parent, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    st = trl_fail(TRELLIS_ERR_NOT_FOUND,
                  "%s: its parent directory '%s' does not exist", out_dir,
                  parent);
    goto done;
  }
  if (trl_path_entry_exists(out_dir)) {
    if (!force) {
      st = trl_fail(TRELLIS_ERR_IO, "%s: exists (replace it with --force)",
                    out_dir);
      goto done;
    }
    if ((st = check_replaceable(out_dir)) != TRELLIS_OK)
      goto done;
  }

  headers = calloc((size_t)m->shard_count, sizeof *headers);
  hlens = calloc((size_t)m->shard_count, sizeof *hlens);
  index = synth_index_json(m);
  config = synth_config_json(m);
  int ok = headers && hlens && index && config;
  for (int s = 0; ok && s < m->shard_count; s++)
    ok = (headers[s] = synth_shard_header(m, s, &hlens[s])) != NULL;
  if (!ok) {
    st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    goto done;
  }
  uint64_t total = strlen(index) + strlen(config);
  for (int s = 0; s < m->shard_count; s++)
    total += 8 + hlens[s] + m->shard_data[s];
  if ((st = check_space(parent, total)) != TRELLIS_OK)
    goto done;

  const size_t tlen = strlen(parent) + strlen(base) + 32;
  tmp = malloc(tlen);
  old = malloc(tlen + 8);
  if (!tmp || !old) {
    st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "synth: out of memory");
    goto done;
  }
  snprintf(tmp, tlen, "%s/.%s.synth-XXXXXX", parent, base);
  if (mkdtemp(tmp) == NULL) {
    st = trl_errno_fail(tmp, "cannot create a temporary directory", errno);
    goto done;
  }
  made_tmp = 1;
  snprintf(old, tlen + 8, "%s.old", tmp);
  /* mkdtemp's 0700 becomes what mkdir would have made */
  const mode_t mask = umask(0);
  umask(mask);
  if (chmod(tmp, 0777 & ~mask) != 0) {
    st = trl_errno_fail(tmp, "cannot set permissions", errno);
    goto done;
  }

  writer w = {-1, NULL, 0, stop, 0, total, progress, ctx};
  if ((st = write_all(m, tmp, headers, hlens, index, config, &w)) != TRELLIS_OK)
    goto done;
  if (stop && *stop) {
    st = trl_fail(TRELLIS_ERR_IO, "%s: interrupted", out_dir);
    goto done;
  }
  /* in place: move an old model aside (it was checked above; check again
   * for one that appeared meanwhile), rename, then remove the old one */
  int moved = 0;
  if (trl_path_entry_exists(out_dir)) {
    if (!force)
      st = trl_fail(TRELLIS_ERR_IO, "%s: exists (replace it with --force)",
                    out_dir);
    else if ((st = check_replaceable(out_dir)) == TRELLIS_OK) {
      if (rename(out_dir, old) != 0)
        st = trl_errno_fail(out_dir, "cannot move the old model aside", errno);
      else
        moved = 1;
    }
    if (st != TRELLIS_OK)
      goto done;
  }
  if (rename(tmp, out_dir) != 0) {
    st = trl_errno_fail(out_dir, "cannot rename the new model into place",
                        errno);
    if (moved)
      (void)rename(old, out_dir);
    goto done;
  }
  made_tmp = 0;
  sync_dir(parent);
  if (moved)
    st = remove_dir(old, 1);

done:
  if (made_tmp) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", trellis_last_error());
    if (remove_dir(tmp, 0) != TRELLIS_OK)
      trl_fail(st, "%s (and the temporary directory %s could not be removed)",
               msg, tmp);
  }
  for (int s = 0; headers && s < m->shard_count; s++)
    free(headers[s]);
  free(headers);
  free(hlens);
  free(index);
  free(config);
  free(tmp);
  free(old);
  free(parent);
  free(base);
  return st;
}
