/* SPDX-License-Identifier: Apache-2.0 */
/* The layer list of a decode step (step.h): from a model directory or a
 * preset synthesised in memory, in the architecture's order and wired by
 * role. Plain C (both builds). */
#include "step.h"

#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const synth_role kind_roles[STEP_KINDS] = {
    SYNTH_ROLE_Q,    SYNTH_ROLE_K,    SYNTH_ROLE_V,  SYNTH_ROLE_Q_B,
    SYNTH_ROLE_O,    SYNTH_ROLE_GATE, SYNTH_ROLE_UP, SYNTH_ROLE_GATE_UP,
    SYNTH_ROLE_DOWN, SYNTH_ROLE_HEAD};

int step_kind_of(synth_role role) {
  for (int i = 0; i < STEP_KINDS; i++)
    if (kind_roles[i] == role)
      return i;
  return -1;
}

synth_role step_kind_role(int kind) {
  return kind >= 0 && kind < STEP_KINDS ? kind_roles[kind] : SYNTH_ROLE_NONE;
}

void step_preset_options_init(step_preset_options *o) {
  synth_options so;
  synth_options_init(&so);
  memset(o, 0, sizeof *o);
  o->bits = so.bits;
  o->head_bits = so.head_bits;
  o->codebook = so.codebook;
  o->seed = so.seed;
}

int step_copies(double step_bytes, size_t cold_bytes) {
  if (!(step_bytes > 0))
    return 1;
  const double c = ceil((double)cold_bytes / step_bytes);
  return c < 1 ? 1 : (c > 1e6 ? 1000000 : (int)c);
}

int step_pool_blocks(int blocks, double block_bytes, double fixed_bytes,
                     size_t free_bytes, size_t headroom, size_t cold_bytes) {
  if (blocks <= 0 || !(block_bytes > 0))
    return 0;
  const double room = (double)free_bytes - (double)headroom - fixed_bytes;
  if (room < block_bytes)
    return 0;
  const double fit = floor(room / block_bytes);
  const int pool = fit >= blocks ? blocks : (int)fit;
  if (pool < blocks && (double)pool * block_bytes <= (double)cold_bytes)
    return 0; /* a pool within L2's reach would time warm weights */
  return pool;
}

/* Step order: by block (the head last), then by kind. */
static int layer_cmp(const void *pa, const void *pb) {
  const step_layer *a = pa, *b = pb;
  const int ba = a->block < 0 ? 1 << 30 : a->block;
  const int bb = b->block < 0 ? 1 << 30 : b->block;
  if (ba != bb)
    return ba < bb ? -1 : 1;
  const int ka = step_kind_of(a->role), kb = step_kind_of(b->role);
  return ka < kb ? -1 : ka > kb;
}

static int add_layer(step_model *m, size_t *cap, const char *name, int64_t k,
                     int64_t n, int bits, int half, trellis_codebook cb,
                     size_t index) {
  int block = -1;
  const synth_role role = synth_role_of(name, &block);
  if (role == SYNTH_ROLE_NONE) {
    cli_error("bench: %s: layer %s is not a layer of a decode step (names "
              "like model.layers.N.self_attn.q_proj, mlp.down_proj, lm_head)",
              m->source, name);
    return CLI_FAIL;
  }
  if (m->count == *cap) {
    size_t grown_cap = *cap ? 2 * *cap : 64;
    step_layer *grown = realloc(m->layers, grown_cap * sizeof *grown);
    if (grown == NULL) {
      cli_error("bench: out of host memory (layer list)");
      return CLI_FAIL;
    }
    m->layers = grown;
    *cap = grown_cap;
  }
  step_layer *l = &m->layers[m->count++];
  memset(l, 0, sizeof *l);
  bench_sfmt(l->name, sizeof l->name, "%s", name);
  l->role = role;
  l->block = block;
  l->k = k;
  l->n = n;
  l->bits = bits;
  l->half = half;
  l->codebook = cb;
  l->payload_bytes = (size_t)k * (size_t)n * (size_t)(2 * bits + half) / 16;
  l->index = index;
  return CLI_OK;
}

static int list_preset(const char *name, const step_preset_options *po,
                       step_model *m, size_t *cap) {
  synth_options so;
  synth_options_init(&so);
  so.preset = name;
  so.bits = po->bits;
  so.blocks = po->blocks;
  so.head_bits = po->head_bits;
  so.head_half = po->head_half;
  so.codebook = po->codebook;
  so.seed = po->seed;
  so.vocab = po->vocab;
  if (synth_preset_find(name) == NULL) {
    char names[256] = "";
    for (size_t i = 0; i < synth_preset_count(); i++) {
      size_t used = strlen(names);
      bench_sfmt(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                 synth_preset_at(i)->name);
    }
    cli_error("--model: unknown preset '%s' (presets: %s)", name, names);
    return CLI_USAGE;
  }
  trellis_clear_error();
  trellis_status st = synth_model_plan(&so, &m->synth);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, "--model");
  m->from_preset = 1;
  for (size_t i = 0; i < m->synth.module_count; i++) {
    const synth_module *mod = &m->synth.modules[i];
    if (mod->kind != SYNTH_LINEAR) /* an fp16 head is not an EXL3 layer */
      continue;
    if (add_layer(m, cap, mod->name, mod->k, mod->n, mod->bits, mod->half,
                  mod->codebook, i) != CLI_OK)
      return CLI_FAIL;
  }
  return CLI_OK;
}

static int list_dir(const char *path, step_model *m, size_t *cap) {
  trellis_clear_error();
  trellis_status st = trellis_model_open(path, &m->model);
  if (st != TRELLIS_OK)
    return cli_lib_error(st, path);
  const size_t count = trellis_model_layer_count(m->model);
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info l;
    trellis_clear_error();
    if ((st = trellis_model_layer_info(m->model, i, &l)) != TRELLIS_OK)
      return cli_lib_error(st, path);
    if (l.pair != TRELLIS_PAIR_NONE || cli_codebook_is_sqg(l.codebook)) {
      cli_error("bench: %s: layer %s (%s) runs on the CPU only in this "
                "version",
                path, l.name, trellis_codebook_name(l.codebook));
      return CLI_FAIL;
    }
    if (add_layer(m, cap, l.name, l.k, l.n, l.bits, l.half, l.codebook, i) !=
        CLI_OK)
      return CLI_FAIL;
  }
  return CLI_OK;
}

/* The layer of `role` in the block starting at `first` (count layers), or
 * -1. */
static long find_role(const step_model *m, size_t first, size_t count,
                      synth_role role) {
  for (size_t i = first; i < first + count; i++)
    if (m->layers[i].role == role)
      return (long)i;
  return -1;
}

/* Wires one layer to its source; checks the widths. */
static int wire(step_model *m, size_t i, size_t first, size_t count) {
  step_layer *l = &m->layers[i];
  int64_t width = m->hidden;
  l->src = STEP_SRC_BLOCK_INPUT;
  if (l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN) {
    const synth_role want =
        l->role == SYNTH_ROLE_O ? SYNTH_ROLE_Q : SYNTH_ROLE_GATE;
    long src = find_role(m, first, count, want);
    if (src < 0 && l->role == SYNTH_ROLE_DOWN)
      src = find_role(m, first, count, SYNTH_ROLE_GATE_UP);
    if (src < 0) {
      cli_error("bench: %s: block %d has %s but no %s projection to read",
                m->source, l->block, l->name, synth_role_name(want));
      return CLI_FAIL;
    }
    l->src = STEP_SRC_LAYER;
    l->src_layer = (size_t)src;
    width = m->layers[src].n;
  }
  if (l->k > width) {
    cli_error("bench: %s: %s reads %lld features but its input has %lld",
              m->source, l->name, (long long)l->k, (long long)width);
    return CLI_FAIL;
  }
  return CLI_OK;
}

static int wire_all(step_model *m) {
  qsort(m->layers, m->count, sizeof *m->layers, layer_cmp);
  if (m->count == 0 || m->layers[0].block < 0) {
    cli_error("bench: %s: no decoder block layers", m->source);
    return CLI_FAIL;
  }
  /* blocks 0..B-1, each with a down projection as wide as the others */
  size_t first = 0;
  int expect = 0;
  m->hidden = 0;
  m->weight_bytes = 0;
  while (first < m->count && m->layers[first].block >= 0) {
    const int block = m->layers[first].block;
    size_t count = 0;
    while (first + count < m->count && m->layers[first + count].block == block)
      count++;
    if (block != expect) {
      cli_error("bench: %s: block %d has no layers", m->source, expect);
      return CLI_FAIL;
    }
    for (size_t i = first; i + 1 < first + count; i++)
      if (m->layers[i].role == m->layers[i + 1].role) {
        cli_error("bench: %s: block %d has two %s layers", m->source, block,
                  synth_role_name(m->layers[i].role));
        return CLI_FAIL;
      }
    long down = find_role(m, first, count, SYNTH_ROLE_DOWN);
    if (down < 0) {
      cli_error("bench: %s: block %d has no mlp.down_proj (its output is the "
                "next block's input)",
                m->source, block);
      return CLI_FAIL;
    }
    if (m->hidden == 0)
      m->hidden = m->layers[down].n;
    if (m->layers[down].n != m->hidden) {
      cli_error("bench: %s: %s writes %lld features, block 0's down %lld",
                m->source, m->layers[down].name, (long long)m->layers[down].n,
                (long long)m->hidden);
      return CLI_FAIL;
    }
    for (size_t i = first; i < first + count; i++)
      if (wire(m, i, first, count) != CLI_OK)
        return CLI_FAIL;
    if (block == 0) {
      m->block_layers = count;
      for (size_t i = first; i < first + count; i++)
        m->block_bytes += (double)m->layers[i].payload_bytes;
    } else if (count != m->block_layers) {
      m->block_layers = 0; /* blocks differ: no pool of blocks */
    } else {
      for (size_t j = 0; j < count; j++) {
        const step_layer *a = &m->layers[j], *b = &m->layers[first + j];
        if (a->role != b->role || a->k != b->k || a->n != b->n)
          m->block_layers = 0;
      }
    }
    first += count;
    expect++;
  }
  m->blocks = expect;
  for (size_t i = first; i < m->count; i++) { /* the head */
    if (wire(m, i, first, m->count - first) != CLI_OK)
      return CLI_FAIL;
    m->has_head = 1;
  }
  if (m->count - first > 1) {
    cli_error("bench: %s: more than one head layer", m->source);
    return CLI_FAIL;
  }
  for (size_t i = 0; i < m->count; i++)
    m->weight_bytes += (double)m->layers[i].payload_bytes;
  return CLI_OK;
}

int step_model_open(const char *spec, const step_preset_options *po,
                    step_model *out) {
  static const char prefix[] = "preset:";
  size_t cap = 0;
  int r;
  memset(out, 0, sizeof *out);
  bench_sfmt(out->source, sizeof out->source, "%s", spec ? spec : "");
  if (spec == NULL || spec[0] == '\0') {
    cli_error("--model: expected a model directory or preset:NAME");
    return CLI_USAGE;
  }
  if (strncmp(spec, prefix, sizeof prefix - 1) == 0)
    r = list_preset(spec + sizeof prefix - 1, po, out, &cap);
  else
    r = list_dir(spec, out, &cap);
  return r == CLI_OK ? wire_all(out) : r;
}

/* Cuts layer `l` to rank `rank` of `ranks` (step_model_open_tp). */
static int shard_layer(step_model *m, step_layer *l, int ranks, int rank) {
  const int row = l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN;
  trellis_shard_desc d;
  trellis_shard_desc_init(&d);
  d.split = row ? TRELLIS_SPLIT_K : TRELLIS_SPLIT_N;
  d.ranks = ranks;
  d.rank = rank;
  l->full_k = l->k;
  l->full_n = l->n;
  trellis_clear_error();
  trellis_status st =
      trellis_shard_range(row ? l->k : l->n, &d, &l->begin, &l->end);
  if (st != TRELLIS_OK) {
    char ctx[SYNTH_NAME_MAX + 600];
    bench_sfmt(ctx, sizeof ctx, "bench: %s: %s", m->source, l->name);
    return cli_lib_error(st, ctx);
  }
  l->sharded = 1;
  l->split = d.split;
  if (row)
    l->k = l->end - l->begin;
  else
    l->n = l->end - l->begin;
  l->payload_bytes = (size_t)l->k * (size_t)l->n * (size_t)l->bits / 8;
  return CLI_OK;
}

int step_model_open_tp(const char *spec, const step_preset_options *po,
                       int ranks, int rank, step_model *out) {
  static const char prefix[] = "preset:";
  memset(out, 0, sizeof *out);
  if (ranks < 1 || rank < 0 || rank >= ranks) {
    cli_error("bench: rank %d of %d", rank, ranks);
    return CLI_USAGE;
  }
  const synth_preset *preset =
      spec && strncmp(spec, prefix, sizeof prefix - 1) == 0
          ? synth_preset_find(spec + sizeof prefix - 1)
          : NULL;
  if (preset && preset->tensor_parallel > 1) {
    if (preset->tensor_parallel != ranks) {
      cli_error("--model %s: one rank of a tensor-parallel-%d model, so "
                "--tp %d",
                spec, preset->tensor_parallel, preset->tensor_parallel);
      return CLI_USAGE;
    }
    step_preset_options rank_po = *po;
    rank_po.seed = po->seed + (uint64_t)rank; /* the rank's own weights */
    int r = step_model_open(spec, &rank_po, out);
    out->tp_ranks = ranks;
    out->tp_rank = rank;
    out->presharded = 1;
    return r;
  }
  size_t cap = 0;
  int r;
  bench_sfmt(out->source, sizeof out->source, "%s", spec ? spec : "");
  if (spec == NULL || spec[0] == '\0') {
    cli_error("--model: expected a model directory or preset:NAME");
    return CLI_USAGE;
  }
  if (strncmp(spec, prefix, sizeof prefix - 1) == 0)
    r = list_preset(spec + sizeof prefix - 1, po, out, &cap);
  else
    r = list_dir(spec, out, &cap);
  out->tp_ranks = ranks;
  out->tp_rank = rank;
  for (size_t i = 0; r == CLI_OK && i < out->count; i++)
    r = shard_layer(out, &out->layers[i], ranks, rank);
  return r == CLI_OK ? wire_all(out) : r;
}

void step_model_close(step_model *m) {
  if (m->model)
    trellis_model_close(m->model);
  synth_model_free(&m->synth);
  free(m->layers);
  memset(m, 0, sizeof *m);
}
