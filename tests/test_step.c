/* SPDX-License-Identifier: Apache-2.0 */
/* The decode-step benchmark's host side (no GPU needed): the layer list and
 * wiring of presets and of a model directory, the device words' formula
 * against the synth RNG, the scales of synth_linear_scales against what
 * synth writes, and the copies and pool rules (the --model options:
 * test_bench). */
#include "testutil.h"

#include "bench.h"
#include "step.h"
#include "tools/synth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static step_preset_options preset_opts(double bits, int blocks, int head) {
  step_preset_options po;
  step_preset_options_init(&po);
  po.bits = bits;
  po.blocks = blocks;
  po.head_bits = head;
  return po;
}

static const step_layer *find(const step_model *m, const char *name) {
  for (size_t i = 0; i < m->count; i++)
    if (strcmp(m->layers[i].name, name) == 0)
      return &m->layers[i];
  fail_msg("no layer %s", name);
  return NULL;
}

static size_t index_of(const step_model *m, const char *name) {
  return (size_t)(find(m, name) - m->layers);
}

static void test_llama_preset(void **state) {
  (void)state;
  step_preset_options po = preset_opts(4.0, 2, 6);
  step_model m;
  assert_int_equal(step_model_open("preset:llama-3.1-8b", &po, &m), CLI_OK);
  assert_int_equal(m.from_preset, 1);
  assert_int_equal(m.blocks, 2);
  assert_int_equal(m.count, 2 * 7 + 1);
  assert_int_equal(m.block_layers, 7);
  assert_int_equal(m.hidden, 4096);
  assert_int_equal(m.has_head, 1);
  static const synth_role order[7] = {
      SYNTH_ROLE_Q,    SYNTH_ROLE_K,  SYNTH_ROLE_V,   SYNTH_ROLE_O,
      SYNTH_ROLE_GATE, SYNTH_ROLE_UP, SYNTH_ROLE_DOWN};
  double bytes = 0;
  for (size_t i = 0; i < m.count; i++) {
    const step_layer *l = &m.layers[i];
    if (i < 14) {
      assert_int_equal(l->block, (int)(i / 7));
      assert_int_equal(l->role, order[i % 7]);
    } else {
      assert_int_equal(l->role, SYNTH_ROLE_HEAD);
      assert_int_equal(l->block, -1);
      assert_int_equal(l->bits, 6);
    }
    assert_true(l->bits == 4 || l->bits == 5 || l->role == SYNTH_ROLE_HEAD);
    assert_int_equal(l->payload_bytes, (size_t)(l->k * l->n * l->bits / 8));
    bytes += (double)l->payload_bytes;
  }
  assert_true(m.weight_bytes == bytes);
  /* wiring: o reads q, down reads gate, the rest the block input */
  const step_layer *o = find(&m, "model.layers.1.self_attn.o_proj");
  assert_int_equal(o->src, STEP_SRC_LAYER);
  assert_int_equal(o->src_layer,
                   index_of(&m, "model.layers.1.self_attn.q_proj"));
  const step_layer *down = find(&m, "model.layers.0.mlp.down_proj");
  assert_int_equal(down->src, STEP_SRC_LAYER);
  assert_int_equal(down->src_layer,
                   index_of(&m, "model.layers.0.mlp.gate_proj"));
  assert_int_equal(down->k, 14336);
  assert_int_equal(find(&m, "model.layers.1.mlp.up_proj")->src,
                   STEP_SRC_BLOCK_INPUT);
  assert_int_equal(find(&m, "lm_head")->src, STEP_SRC_BLOCK_INPUT);
  assert_int_equal(find(&m, "lm_head")->n, 128256);
  step_model_close(&m);

  /* an fp16 head is not an EXL3 layer: left out */
  po = preset_opts(6.0, 1, 16);
  assert_int_equal(step_model_open("preset:llama-3.1-70b", &po, &m), CLI_OK);
  assert_int_equal(m.count, 7);
  assert_int_equal(m.has_head, 0);
  assert_int_equal(m.hidden, 8192);
  for (size_t i = 0; i < m.count; i++)
    assert_int_equal(m.layers[i].bits, 6);
  step_model_close(&m);
}

static void test_glm_preset(void **state) {
  (void)state;
  step_preset_options po = preset_opts(3.36, 0, 6);
  step_model m;
  assert_int_equal(step_model_open("preset:glm-tp4", &po, &m), CLI_OK);
  assert_int_equal(m.blocks, 78);
  assert_int_equal(m.count, 78 * 3 + 1);
  assert_int_equal(m.block_layers, 3);
  assert_int_equal(m.hidden, 6144);
  const step_layer *q = find(&m, "model.layers.5.self_attn.q_b_proj");
  assert_int_equal(q->k, 2048); /* a prefix of the block input */
  assert_int_equal(q->src, STEP_SRC_BLOCK_INPUT);
  const step_layer *down = find(&m, "model.layers.77.mlp.down_proj");
  assert_int_equal(down->k, 512);
  assert_int_equal(down->src, STEP_SRC_LAYER);
  assert_int_equal(down->src_layer,
                   index_of(&m, "model.layers.77.mlp.gate_up_proj"));
  /* the synth bitrate rule: within 0.001 of 3.36 over the blocks */
  double w = 0, kb = 0;
  for (size_t i = 0; i < m.count; i++)
    if (m.layers[i].block >= 0) {
      w += (double)(m.layers[i].k * m.layers[i].n);
      kb += (double)(m.layers[i].k * m.layers[i].n) * m.layers[i].bits;
    }
  assert_true(fabs(kb / w - 3.36) < 1e-3);
  /* a model-sized step is cold by itself */
  assert_int_equal(step_copies(m.weight_bytes, 256u << 20), 1);
  step_model_close(&m);
}

/* `bench --model preset:glm-tp4 --bits 3.36 --codebook mul1`: ExLlamaV3
 * 1.6's half steps, K 3 and 3.5 layers (payload k n K / 8), and the same
 * step from a directory synth wrote. */
static void test_glm_preset_half(void **state) {
  (void)state;
  step_preset_options po = preset_opts(3.36, 0, 6);
  po.codebook = TRELLIS_CB_MUL1;
  po.head_bits = 2;
  po.head_half = 1;
  step_model m;
  assert_int_equal(step_model_open("preset:glm-tp4", &po, &m), CLI_OK);
  double w = 0, kb = 0;
  int k3 = 0, k3p5 = 0;
  for (size_t i = 0; i < m.count; i++) {
    const step_layer *l = &m.layers[i];
    const double k = l->bits + 0.5 * l->half;
    assert_int_equal(l->payload_bytes, (size_t)((double)(l->k * l->n) * k / 8));
    if (l->role == SYNTH_ROLE_HEAD) {
      assert_true(k == 2.5);
      continue;
    }
    k3 += k == 3.0;
    k3p5 += k == 3.5;
    w += (double)(l->k * l->n);
    kb += (double)(l->k * l->n) * k;
  }
  assert_true(k3 > 0 && k3p5 > 0);
  assert_int_equal(k3 + k3p5, 78 * 3);
  assert_true(fabs(kb / w - 3.36) < 1e-3);
  step_model_close(&m);

  char *dir =
      tu_write_synth("step-half", "glm-tp4", 2, 3.36, 4, TRELLIS_CB_MUL1, -1);
  step_model a, b;
  assert_int_equal(step_model_open(dir, NULL, &a), CLI_OK);
  po = preset_opts(3.36, 2, 4);
  po.codebook = TRELLIS_CB_MUL1;
  po.vocab = 256;
  assert_int_equal(step_model_open("preset:glm-tp4", &po, &b), CLI_OK);
  assert_int_equal(a.count, b.count);
  int half = 0;
  for (size_t i = 0; i < a.count; i++) {
    assert_int_equal(a.layers[i].bits, b.layers[i].bits);
    assert_int_equal(a.layers[i].half, b.layers[i].half);
    half += a.layers[i].half;
  }
  assert_true(half > 0);
  assert_true(a.weight_bytes == b.weight_bytes);
  step_model_close(&a);
  step_model_close(&b);
  free(dir);
}

/* A directory written by synth lists the same step as the preset. */
static void test_dir_matches_preset(void **state) {
  (void)state;
  char *dir =
      tu_write_synth("step-glm", "glm-tp4", 2, 5.5, 4, TRELLIS_CB_MCG, -1);
  step_model a, b;
  assert_int_equal(step_model_open(dir, NULL, &a), CLI_OK);
  step_preset_options po = preset_opts(5.5, 2, 4);
  po.vocab = 256;
  assert_int_equal(step_model_open("preset:glm-tp4", &po, &b), CLI_OK);
  assert_int_equal(a.from_preset, 0);
  assert_int_equal(a.count, b.count);
  assert_int_equal(a.count, 2 * 3 + 1);
  assert_int_equal(a.hidden, b.hidden);
  int k5 = 0, k6 = 0;
  for (size_t i = 0; i < a.count; i++) {
    assert_string_equal(a.layers[i].name, b.layers[i].name);
    assert_int_equal(a.layers[i].k, b.layers[i].k);
    assert_int_equal(a.layers[i].n, b.layers[i].n);
    assert_int_equal(a.layers[i].bits, b.layers[i].bits);
    assert_int_equal(a.layers[i].codebook, b.layers[i].codebook);
    assert_int_equal(a.layers[i].src, b.layers[i].src);
    assert_int_equal(a.layers[i].src_layer, b.layers[i].src_layer);
    k5 += a.layers[i].bits == 5;
    k6 += a.layers[i].bits == 6;
  }
  assert_true(k5 > 0 && k6 > 0); /* mixed K */
  assert_true(a.weight_bytes == b.weight_bytes);
  step_model_close(&a);
  step_model_close(&b);
  free(dir);
}

/* A model of mixed codebooks (synth's odd_block_codebook): each layer's
 * marker decides, and the step lists each layer's own. */
static void test_mixed_codebooks(void **state) {
  (void)state;
  synth_options so;
  synth_options_init(&so);
  so.preset = "glm-tp4";
  so.blocks = 3;
  so.bits = 4.0;
  so.head_bits = 4;
  so.vocab = 256;
  so.odd_block_codebook = TRELLIS_CB_MUL1;
  synth_model sm;
  assert_int_equal(synth_model_plan(&so, &sm), TRELLIS_OK);
  char *dir = tu_tmp_path("step-mixed-cb");
  assert_int_equal(synth_model_write(&sm, dir, 0, NULL, NULL, NULL),
                   TRELLIS_OK);
  step_model m;
  assert_int_equal(step_model_open(dir, NULL, &m), CLI_OK);
  assert_int_equal(m.count, 3 * 3 + 1);
  for (size_t i = 0; i < m.count; i++) {
    const step_layer *l = &m.layers[i];
    const trellis_codebook want =
        l->block == 1 ? TRELLIS_CB_MUL1 : TRELLIS_CB_MCG;
    if (l->codebook != want)
      fail_msg("%s: codebook %s, want %s", l->name,
               trellis_codebook_name(l->codebook), trellis_codebook_name(want));
  }
  /* the scales follow each layer's codebook (its RMS) */
  size_t b = sm.module_count;
  for (size_t i = 0; i < sm.module_count; i++)
    if (strcmp(sm.modules[i].name, "model.layers.1.mlp.down_proj") == 0)
      b = i;
  assert_true(b < sm.module_count);
  assert_int_equal(sm.modules[b].codebook, TRELLIS_CB_MUL1);
  assert_true(sm.odd_block_codebook_rms < sm.codebook_rms); /* 1.0 < 1.24 */
  step_model_close(&m);
  /* not an EXL3 codebook */
  synth_model bad;
  so.odd_block_codebook = TRELLIS_CB_SQG_E4M3;
  tu_assert_status(synth_model_plan(&so, &bad), TRELLIS_ERR_INVALID_ARGUMENT);
  synth_model_free(&bad);
  synth_model_free(&sm);
  free(dir);
}

static void test_bad_models(void **state) {
  (void)state;
  step_preset_options po = preset_opts(4.0, 0, 6);
  step_model m;
  assert_int_equal(step_model_open("preset:nope", &po, &m), CLI_USAGE);
  step_model_close(&m);
  assert_int_equal(step_model_open("", &po, &m), CLI_USAGE);
  step_model_close(&m);
  char *missing = tu_tmp_path("no-such-model");
  assert_int_equal(step_model_open(missing, NULL, &m), CLI_FAIL);
  step_model_close(&m);
  free(missing);
  po.blocks = 81; /* deeper than the preset */
  assert_int_equal(step_model_open("preset:llama-3.1-70b", &po, &m), CLI_FAIL);
  step_model_close(&m);
  /* the toy model's layers are a decode step's only if named like one */
  int r = step_model_open(TU_TOY_MODEL, NULL, &m);
  if (r == CLI_OK) {
    assert_true(m.count > 0);
    for (size_t i = 0; i < m.count; i++)
      assert_int_not_equal(m.layers[i].role, SYNTH_ROLE_NONE);
  }
  step_model_close(&m);
}

/* The device fill's formula (bench_fill mode 3) is the synth RNG's words,
 * and synth_linear_scales the scales synth writes. */
typedef struct sink_buf {
  uint8_t *data;
  size_t size, cap;
} sink_buf;

static int sink(void *ctx, const void *data, size_t bytes) {
  sink_buf *b = ctx;
  assert_true(b->size + bytes <= b->cap);
  memcpy(b->data + b->size, data, bytes);
  b->size += bytes;
  return 0;
}

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void test_device_words_are_synth_words(void **state) {
  (void)state;
  synth_options so;
  synth_options_init(&so);
  so.preset = "glm-tp4";
  so.blocks = 1;
  so.bits = 3.0;
  so.vocab = 256;
  so.seed = 7;
  synth_model sm;
  assert_int_equal(synth_model_plan(&so, &sm), TRELLIS_OK);
  size_t idx = sm.module_count;
  for (size_t i = 0; i < sm.module_count; i++)
    if (strcmp(sm.modules[i].name, "model.layers.0.mlp.down_proj") == 0)
      idx = i;
  assert_true(idx < sm.module_count);
  const synth_module *mod = &sm.modules[idx];
  sink_buf b = {malloc(mod->bytes), 0, mod->bytes};
  assert_non_null(b.data);
  uint8_t *chunk = malloc(1 << 16);
  assert_int_equal(synth_module_emit(&sm, idx, chunk, 1 << 16, sink, &b),
                   TRELLIS_OK);
  const size_t words = (size_t)(mod->k * mod->n / 16 * mod->bits);
  const uint64_t seed = synth_module_seed(so.seed, mod->name);
  const uint16_t *w = (const uint16_t *)b.data;
  for (size_t i = 0; i < words; i++) {
    const uint16_t want =
        (uint16_t)(mix64(seed + (i / 4 + 1) * 0x9E3779B97F4A7C15ull) >>
                   (16 * (i % 4)));
    if (w[i] != want)
      fail_msg("word %zu: %04x, the device formula %04x", i, w[i], want);
  }
  uint16_t *suh = malloc((size_t)mod->k * 2), *svh = malloc((size_t)mod->n * 2);
  assert_int_equal(synth_linear_scales(&sm, idx, suh, svh), TRELLIS_OK);
  assert_memory_equal(suh, b.data + 2 * words, (size_t)mod->k * 2);
  assert_memory_equal(svh, b.data + 2 * words + 2 * (size_t)mod->k,
                      (size_t)mod->n * 2);
  /* not a linear layer */
  tu_assert_status(synth_linear_scales(&sm, 0, suh, svh),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  /* synth_skip is synth_next's count */
  synth_rng r1, r2;
  synth_seed(&r1, 99);
  synth_seed(&r2, 99);
  for (int i = 0; i < 1000; i++)
    (void)synth_next(&r1);
  synth_skip(&r2, 1000);
  assert_true(synth_next(&r1) == synth_next(&r2));
  free(suh);
  free(svh);
  free(chunk);
  free(b.data);
  synth_model_free(&sm);
}

static void test_rules(void **state) {
  (void)state;
  const size_t mib = 1u << 20, cold = 256 * mib;
  assert_int_equal(step_copies(0, cold), 1);
  assert_int_equal(step_copies(4096.0 * mib, cold), 1);
  assert_int_equal(step_copies(256.0 * mib, cold), 1);
  assert_int_equal(step_copies(100.0 * mib, cold), 3);
  /* the whole model fits: every block */
  assert_int_equal(
      step_pool_blocks(80, 1e9, 2e9, (size_t)100e9, 2 * 1024 * mib, cold), 80);
  /* 80 blocks of 1.7 GB do not fit in 130 GB: as many as fit */
  const int pool =
      step_pool_blocks(80, 1.7e9, 2.1e9, (size_t)130e9, (size_t)2 << 30, cold);
  assert_int_equal(pool, (int)floor((130e9 - 2.1e9 - 2147483648.0) / 1.7e9));
  assert_true(pool < 80);
  /* not one block: none; a pool within 4 x L2's reach: none */
  assert_int_equal(step_pool_blocks(80, 1.7e9, 0, (size_t)1e9, 0, cold), 0);
  assert_int_equal(step_pool_blocks(80, 100.0 * mib, 0, 250 * mib, 0, cold), 0);
  assert_int_equal(step_pool_blocks(80, 100.0 * mib, 0, 300 * mib, 0, cold), 3);
  assert_int_equal(step_pool_blocks(0, 1e9, 0, (size_t)1e12, 0, cold), 0);
  /* layer kinds */
  for (int k = 0; k < STEP_KINDS; k++)
    assert_int_equal(step_kind_of(step_kind_role(k)), k);
  assert_int_equal(step_kind_of(SYNTH_ROLE_NONE), -1);
}

/* step_model_open_tp: every rank's layers cut as trellis_shard_range says,
 * widths that line up (o's k is q's n, down's k gate's n), the ranks'
 * payloads adding up to the model's; glm-tp4 is four ranks already. */
static void test_tensor_parallel(void **state) {
  (void)state;
  step_preset_options po = preset_opts(4.0, 0, 6);
  step_model full;
  assert_int_equal(step_model_open("preset:llama-3.1-70b", &po, &full), CLI_OK);
  for (int ranks = 2; ranks <= 4; ranks += 2) {
    double bytes = 0;
    for (int rank = 0; rank < ranks; rank++) {
      step_model m;
      assert_int_equal(
          step_model_open_tp("preset:llama-3.1-70b", &po, ranks, rank, &m),
          CLI_OK);
      assert_int_equal(m.count, full.count);
      assert_int_equal(m.hidden, 8192);
      assert_false(m.presharded);
      bytes += m.weight_bytes;
      for (size_t i = 0; i < m.count; i++) {
        const step_layer *l = &m.layers[i], *f = &full.layers[i];
        assert_string_equal(l->name, f->name);
        assert_true(l->sharded);
        assert_int_equal(l->bits, f->bits);
        const int row = l->role == SYNTH_ROLE_O || l->role == SYNTH_ROLE_DOWN;
        assert_int_equal(l->split, row ? TRELLIS_SPLIT_K : TRELLIS_SPLIT_N);
        trellis_shard_desc d = {sizeof d, l->split, ranks, rank, NULL};
        int64_t b, e;
        tu_assert_status(trellis_shard_range(row ? f->k : f->n, &d, &b, &e),
                         TRELLIS_OK);
        assert_int_equal(l->begin, b);
        assert_int_equal(l->end, e);
        assert_int_equal(l->k, row ? e - b : f->k);
        assert_int_equal(l->n, row ? f->n : e - b);
        if (l->src == STEP_SRC_LAYER) /* reads its source's whole slice */
          assert_int_equal(l->k, m.layers[l->src_layer].n);
      }
      step_model_close(&m);
    }
    assert_true(fabs(bytes - full.weight_bytes) < 1.0);
  }
  step_model_close(&full);

  /* four glm-tp4 ranks: uncut, each its own seed */
  po = preset_opts(3.36, 2, 6);
  po.vocab = 256;
  step_model a, b;
  assert_int_equal(step_model_open_tp("preset:glm-tp4", &po, 4, 3, &a), CLI_OK);
  step_preset_options po3 = po;
  po3.seed = po.seed + 3;
  assert_int_equal(step_model_open("preset:glm-tp4", &po3, &b), CLI_OK);
  assert_true(a.presharded);
  assert_int_equal(a.synth.opt.seed, b.synth.opt.seed);
  for (size_t i = 0; i < a.count; i++) {
    assert_false(a.layers[i].sharded);
    assert_int_equal(a.layers[i].k, b.layers[i].k);
    assert_int_equal(a.layers[i].n, b.layers[i].n);
  }
  step_model_close(&a);
  step_model_close(&b);
  assert_int_equal(step_model_open_tp("preset:glm-tp4", &po, 2, 0, &a),
                   CLI_USAGE);
  step_model_close(&a);

  /* a layer without a block of 128 for every rank */
  po = preset_opts(4.0, 1, 6);
  po.vocab = 256;
  assert_int_equal(step_model_open_tp("preset:llama-3.1-8b", &po, 4, 0, &a),
                   CLI_FAIL);
  step_model_close(&a);
  assert_int_equal(step_model_open_tp("preset:llama-3.1-8b", &po, 2, 2, &a),
                   CLI_USAGE);
  step_model_close(&a);

  /* a directory's layers cut alike */
  char *dir =
      tu_write_synth("step-tp", "llama-3.1-8b", 1, 4.0, 6, TRELLIS_CB_MCG, -1);
  assert_int_equal(step_model_open_tp(dir, NULL, 2, 1, &a), CLI_OK);
  assert_int_equal(step_model_open_tp("preset:llama-3.1-8b", &po, 2, 1, &b),
                   CLI_OK);
  assert_int_equal(a.count, b.count);
  for (size_t i = 0; i < a.count; i++) {
    assert_int_equal(a.layers[i].k, b.layers[i].k);
    assert_int_equal(a.layers[i].n, b.layers[i].n);
    assert_int_equal(a.layers[i].begin, b.layers[i].begin);
  }
  step_model_close(&a);
  step_model_close(&b);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_llama_preset),
      cmocka_unit_test(test_glm_preset),
      cmocka_unit_test(test_glm_preset_half),
      cmocka_unit_test(test_dir_matches_preset),
      cmocka_unit_test(test_mixed_codebooks),
      cmocka_unit_test(test_bad_models),
      cmocka_unit_test(test_device_words_are_synth_words),
      cmocka_unit_test(test_rules),
      cmocka_unit_test(test_tensor_parallel),
  };
  return cmocka_run_group_tests_name("step", tests, NULL, NULL);
}
