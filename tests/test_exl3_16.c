/* SPDX-License-Identifier: Apache-2.0 */
/* Checkpoints as ExLlamaV3 1.6 writes them (EXL3-1.6 §2, §6-§8): the toy
 * 1.6 model (MUL1 at K 2, 2.5, 3.5 and 4, a body Linear kept fp16, an
 * untied 3.5-bit lm_head, head_bits 3.5) opened, listed and decoded; the
 * 1.6 config.json fields; a quantized token embedding and an n-gram file
 * recognised by name and never read as linear layers; `trellis info` on
 * them. */
#include "testutil.h"

#include "io/model.h"

#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include <sys/stat.h>

/* `trellis info PATH --json`, parsed (the test fails on bad JSON). */
static json_t *info_json(const char *path) {
  const char *args[] = {"info", path, "--json", NULL};
  tu_run_result r = tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
  if (r.code != 0)
    fail_msg("info --json: exit %d: %s", r.code, r.err);
  json_error_t err;
  json_t *j = json_loads(r.out, 0, &err);
  if (!j)
    fail_msg("info --json is not JSON (line %d: %s):\n%s", err.line, err.text,
             r.out);
  assert_string_equal(r.err, "");
  tu_run_free(&r);
  return j;
}

static int find_layer(const trellis_model *m, const char *name,
                      trellis_layer_info *out) {
  for (size_t i = 0; i < trellis_model_layer_count(m); i++)
    if (trellis_model_layer_info(m, i, out) == TRELLIS_OK &&
        strcmp(out->name, name) == 0)
      return 1;
  return 0;
}

static void test_toy_model(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY16_MODEL, &m), TRELLIS_OK);
  const trellis_quant_config *q = trellis_model_quant_config(m);
  assert_true(q->present);
  assert_string_equal(q->version, "1.6.5");
  assert_int_equal(q->head_bits, 3);
  assert_int_equal(q->head_half, 1);
  assert_string_equal(q->out_scales, "auto");
  assert_int_equal(q->tie_word_embeddings, 0);
  /* 15 Linears: 14 EXL3 layers and up_proj of block 1 kept fp16 */
  assert_int_equal(trellis_model_layer_count(m), 14);
  static const struct {
    const char *name;
    int bits, half;
  } want[] = {{"lm_head", 3, 1},
              {"model.layers.0.mlp.gate_proj", 2, 1},
              {"model.layers.0.mlp.up_proj", 2, 0},
              {"model.layers.0.mlp.down_proj", 3, 1},
              {"model.layers.0.self_attn.k_proj", 4, 0}};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    trellis_layer_info l;
    assert_true(find_layer(m, want[i].name, &l));
    assert_int_equal(l.bits, want[i].bits);
    assert_int_equal(l.half, want[i].half);
    assert_int_equal(l.codebook, TRELLIS_CB_MUL1);
  }
  trellis_layer_info l;
  assert_false(find_layer(m, "model.layers.1.mlp.up_proj", &l));
  /* the fp16 body Linear is an "other" tensor of its own kind */
  int fp16 = 0;
  for (size_t i = 0; i < trellis_model_other_count(m); i++) {
    trellis_tensor t;
    trellis_other_kind kind;
    tu_assert_status(trellis_model_other(m, i, &t), TRELLIS_OK);
    tu_assert_status(trellis_model_other_kind(m, i, &kind), TRELLIS_OK);
    const int is_up = strcmp(t.name, "model.layers.1.mlp.up_proj.weight") == 0;
    assert_int_equal(kind == TRELLIS_OTHER_FP16_LINEAR, is_up);
    fp16 += is_up;
    if (strcmp(t.name, "model.embed_tokens.weight") == 0)
      assert_int_equal(kind, TRELLIS_OTHER_PLAIN);
  }
  assert_int_equal(fp16, 1);
  /* every layer decodes, and its CPU forward of ones is finite */
  for (size_t i = 0; i < trellis_model_layer_count(m); i++) {
    trellis_layer layer;
    tu_assert_status(trellis_model_layer(m, i, &layer), TRELLIS_OK);
    const trellis_weight *w = &layer.weight;
    uint16_t *w_hat = malloc((size_t)(w->k * w->n) * 2);
    assert_non_null(w_hat);
    tu_assert_status(trellis_decode_weight(w, w_hat), TRELLIS_OK);
    for (int64_t e = 0; e < w->k * w->n; e++)
      assert_true((w_hat[e] & 0x7C00u) != 0x7C00u);
    uint16_t *x = malloc((size_t)w->k * 2);
    assert_non_null(x);
    for (int64_t e = 0; e < w->k; e++)
      x[e] = 0x3C00;
    float *y = tu_cpu_forward_f32(w, x, 1, TRELLIS_F16, TRELLIS_F32, 1);
    assert_true(tu_all_finite(y, (size_t)w->n));
    free(y);
    free(x);
    free(w_hat);
  }
  assert_null(trellis_model_ngram_file(m));
  trellis_model_close(m);
}

static void expect_config(const char *text, trellis_status want,
                          const char *needle, trellis_quant_config *qc) {
  trellis_clear_error();
  tu_assert_status(trl_quant_config_parse(text, strlen(text), "c", qc), want);
  if (needle)
    tu_assert_error_has(needle);
}

static void test_config_fields(void **state) {
  (void)state;
  trellis_quant_config qc;
  expect_config("{\"tie_word_embeddings\": false, \"quantization_config\": "
                "{\"head_bits\": 2.5, \"mtp_bits\": 3.5, \"vision_bits\": 6, "
                "\"out_scales\": \"auto\", \"bits\": 3.36}}",
                TRELLIS_OK, NULL, &qc);
  assert_int_equal(qc.head_bits, 2);
  assert_int_equal(qc.head_half, 1);
  assert_int_equal(qc.mtp_bits, 3);
  assert_int_equal(qc.mtp_half, 1);
  assert_int_equal(qc.vision_bits, 6);
  assert_int_equal(qc.tie_word_embeddings, 0);
  assert_string_equal(qc.out_scales, "auto");
  /* integer-valued floats are integers; 16 is an unquantized head */
  expect_config("{\"quantization_config\": {\"head_bits\": 6.0, "
                "\"mtp_bits\": 16}}",
                TRELLIS_OK, NULL, &qc);
  assert_int_equal(qc.head_bits, 6);
  assert_int_equal(qc.head_half, 0);
  assert_int_equal(qc.mtp_bits, 16);
  assert_int_equal(qc.tie_word_embeddings, -1);
  expect_config("{\"quantization_config\": {\"head_bits\": 4.5}}",
                TRELLIS_ERR_FORMAT, "head_bits is not an integer or", &qc);
  expect_config("{\"quantization_config\": {\"mtp_bits\": 2.7}}",
                TRELLIS_ERR_FORMAT, "mtp_bits", &qc);
  expect_config("{\"quantization_config\": {\"vision_bits\": 6.5}}",
                TRELLIS_ERR_FORMAT, "vision_bits is not an integer", &qc);
  expect_config("{\"tie_word_embeddings\": 1}", TRELLIS_ERR_FORMAT,
                "tie_word_embeddings is not true or false", &qc);
  expect_config("{\"tie_word_embeddings\": true}", TRELLIS_OK, NULL, &qc);
  assert_int_equal(qc.tie_word_embeddings, 1);
}

/* A directory with a half-rate layer, an fp16 body Linear with a bias, a
 * quantized token embedding (K 4, hidden 512: G = 2 groups) and an n-gram
 * file (K 3, rows of 1 + 30 words). */
static char *write_ring_model(void) {
  char *dir = tu_tmp_path("ring-model");
  assert_int_equal(mkdir(dir, 0755), 0);
  static int16_t words[32 * 8 * 40], emb[256 * 130], ng[64 * 31];
  static uint16_t suh[512], svh[128], signs[2 * 256], w16[128 * 512], bias[128],
      head_bias[2 * 160];
  static int64_t offsets[2] = {0, 32};
  for (int i = 0; i < 512; i++)
    suh[i] = 0x3C00;
  for (int i = 0; i < 128; i++)
    svh[i] = 0x3C00;
  for (int i = 0; i < 512; i++)
    signs[i] = (i & 1) ? 0xBC00 : 0x3C00;
  const int32_t mul1 = (int32_t)0x83DCD12Du;
  tu_st_tensor t[] = {
      {"model.embed_tokens.signs", "F16", 2, {2, 256}, signs, sizeof signs},
      {"model.embed_tokens.trellis", "I16", 2, {256, 130}, emb, sizeof emb},
      {"model.layers.0.mlp.down_proj.mul1", "I32", 0, {0}, &mul1, 4},
      {"model.layers.0.mlp.down_proj.suh", "F16", 1, {512}, suh, sizeof suh},
      {"model.layers.0.mlp.down_proj.svh", "F16", 1, {128}, svh, sizeof svh},
      {"model.layers.0.mlp.down_proj.trellis",
       "I16",
       3,
       {32, 8, 40},
       words,
       sizeof words},
      {"model.layers.0.mlp.up_proj.bias", "F16", 1, {128}, bias, sizeof bias},
      {"model.layers.0.mlp.up_proj.weight",
       "F16",
       2,
       {128, 512},
       w16,
       sizeof w16},
  };
  size_t size;
  uint8_t *img = tu_st_build(t, sizeof t / sizeof *t, &size);
  char *p = tu_join(dir, "model.safetensors");
  tu_write_file(p, img, size);
  free(p);
  free(img);
  const tu_st_tensor n[] = {
      {"ple.ngram.head_bias", "F16", 2, {2, 160}, head_bias, sizeof head_bias},
      {"ple.ngram.head_offsets", "I64", 1, {2}, offsets, sizeof offsets},
      {"ple.ngram.shard_0.trellis", "I16", 2, {64, 31}, ng, sizeof ng},
  };
  img = tu_st_build(n, sizeof n / sizeof *n, &size);
  p = tu_join(dir, "ngram_embedding.safetensors");
  tu_write_file(p, img, size);
  free(p);
  free(img);
  p = tu_join(dir, "config.json");
  const char cfg[] = "{\"tie_word_embeddings\": false, \"quantization_config\":"
                     " {\"quant_method\": \"exl3\", \"head_bits\": 16}}";
  tu_write_file(p, cfg, sizeof cfg - 1);
  free(p);
  return dir;
}

static void test_ring_tables(void **state) {
  (void)state;
  char *dir = write_ring_model();
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 1);
  trellis_layer_info l;
  assert_true(find_layer(m, "model.layers.0.mlp.down_proj", &l));
  assert_int_equal(l.half, 1);
  static const struct {
    const char *name;
    trellis_other_kind kind;
  } want[] = {
      {"model.embed_tokens.signs", TRELLIS_OTHER_EXL3_EMBEDDING},
      {"model.embed_tokens.trellis", TRELLIS_OTHER_EXL3_EMBEDDING},
      {"model.layers.0.mlp.up_proj.bias", TRELLIS_OTHER_FP16_LINEAR},
      {"model.layers.0.mlp.up_proj.weight", TRELLIS_OTHER_FP16_LINEAR},
  };
  assert_int_equal(trellis_model_other_count(m), 4);
  for (size_t i = 0; i < 4; i++) {
    trellis_tensor t;
    trellis_other_kind kind;
    tu_assert_status(trellis_model_other(m, i, &t), TRELLIS_OK);
    tu_assert_status(trellis_model_other_kind(m, i, &kind), TRELLIS_OK);
    assert_string_equal(t.name, want[i].name);
    assert_int_equal(kind, want[i].kind);
  }
  trellis_other_kind kind;
  tu_assert_status(trellis_model_other_kind(m, 4, &kind),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  assert_string_equal(trellis_other_kind_name(TRELLIS_OTHER_EXL3_EMBEDDING),
                      "exl3_embedding");
  assert_string_equal(trellis_other_kind_name((trellis_other_kind)9),
                      "invalid");
  const trellis_file *ng = trellis_model_ngram_file(m);
  assert_non_null(ng);
  assert_int_equal(trellis_file_tensor_count(ng), 3);
  /* its path is one of the model's files */
  int listed = 0;
  for (size_t i = 0; trellis_model_file_path(m, i); i++)
    listed += strstr(trellis_model_file_path(m, i),
                     "ngram_embedding.safetensors") != NULL;
  assert_int_equal(listed, 1);
  trellis_model_close(m);

  const char *args[] = {"info", dir, NULL};
  tu_run_result r = tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
  if (r.code != 0)
    fail_msg("info: exit %d: %s", r.code, r.err);
  static const char *const lines[] = {
      "model.layers.0.mlp.down_proj",
      " 2.5 ",
      "mul1",
      "model.layers.0.mlp.up_proj ",
      " fp16 ",
      "F16",
      "model.embed_tokens.trellis is a quantized token embedding (vocab "
      "256, 2 groups of 256, K 4",
      "ngram_embedding.safetensors is a hashed n-gram table (3 tensors, 1 "
      "ring shard, 64 rows of K 3",
      "1 EXL3 layer and 1 fp16 linear layer",
      "tie_word_embeddings false"};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    if (!strstr(r.out, lines[i]))
      fail_msg("info output lacks '%s':\n%s", lines[i], r.out);
  tu_run_free(&r);

  /* --json: the same rows */
  json_t *j = info_json(dir);
  json_t *e = json_array_get(json_object_get(j, "quantized_embeddings"), 0);
  assert_string_equal(json_string_value(json_object_get(e, "name")),
                      "model.embed_tokens.trellis");
  assert_int_equal(json_integer_value(json_object_get(e, "vocab")), 256);
  assert_int_equal(json_integer_value(json_object_get(e, "groups")), 2);
  assert_int_equal(json_integer_value(json_object_get(e, "bits")), 4);
  json_t *ng_json = json_object_get(j, "ngram_table");
  assert_int_equal(json_integer_value(json_object_get(ng_json, "tensors")), 3);
  assert_int_equal(json_integer_value(json_object_get(ng_json, "shards")), 1);
  assert_int_equal(json_integer_value(json_object_get(ng_json, "rows")), 64);
  assert_int_equal(json_integer_value(json_object_get(ng_json, "bits")), 3);
  /* every other tensor, with its kind */
  json_t *others = json_object_get(j, "other_tensors");
  int kinds[3] = {0, 0, 0};
  for (size_t i = 0; i < json_array_size(others); i++) {
    const char *what =
        json_string_value(json_object_get(json_array_get(others, i), "kind"));
    kinds[0] += strcmp(what, "plain") == 0;
    kinds[1] += strcmp(what, "fp16_linear") == 0;
    kinds[2] += strcmp(what, "exl3_embedding") == 0;
  }
  assert_int_equal(kinds[1], 2); /* up_proj.weight and .bias */
  assert_int_equal(kinds[2], 2); /* the embedding's trellis and signs */
  json_t *fp16 = json_array_get(json_object_get(j, "fp16_linears"), 0);
  assert_string_equal(json_string_value(json_object_get(fp16, "name")),
                      "model.layers.0.mlp.up_proj");
  assert_true(json_is_true(json_object_get(fp16, "bias")));
  json_decref(j);
  free(dir);
}

/* `trellis info` on the toy 1.6 model: K 2.5, fp16, head_bits 3.5 and the
 * average over every linear layer (fp16 up_proj included). */
static void test_info_toy(void **state) {
  (void)state;
  const char *args[] = {"info", TU_TOY16_MODEL, NULL};
  tu_run_result r = tu_run_tool(TRELLIS_CLI_PATH, args, NULL);
  if (r.code != 0)
    fail_msg("info: exit %d: %s", r.code, r.err);
  static const char *const lines[] = {
      "head_bits 3.5",
      "model.layers.0.mlp.gate_proj         256    512 2.5   mul1      2.50",
      "model.layers.1.mlp.up_proj           256    512 fp16  F16      16.00",
      "14 EXL3 layers and 1 fp16 linear layer, 714496 bytes",
      "4.473 bits per weight (EXL3 layers 3.155"};
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
    if (!strstr(r.out, lines[i]))
      fail_msg("info output lacks '%s':\n%s", lines[i], r.out);
  tu_run_free(&r);

  /* --json: K 2.5 as bits 2 + half (and rate 2.5), the 1.6 config
   * fields, the fp16 Linear, the totals of the table */
  json_t *j = info_json(TU_TOY16_MODEL);
  json_t *q = json_object_get(j, "quantization_config");
  assert_int_equal(json_integer_value(json_object_get(q, "head_bits")), 3);
  assert_true(json_is_true(json_object_get(q, "head_half")));
  assert_true(json_real_value(json_object_get(q, "head_rate")) == 3.5);
  assert_true(json_is_false(json_object_get(q, "tie_word_embeddings")));
  assert_string_equal(json_string_value(json_object_get(q, "version")),
                      "1.6.5");
  assert_true(json_is_null(json_object_get(q, "mtp_bits")));
  json_t *layers = json_object_get(j, "layers");
  assert_int_equal(json_array_size(layers), 14);
  int found = 0;
  for (size_t i = 0; i < json_array_size(layers); i++) {
    json_t *l = json_array_get(layers, i);
    if (strcmp(json_string_value(json_object_get(l, "name")),
               "model.layers.0.mlp.gate_proj") != 0)
      continue;
    found = 1;
    assert_int_equal(json_integer_value(json_object_get(l, "k")), 256);
    assert_int_equal(json_integer_value(json_object_get(l, "n")), 512);
    assert_int_equal(json_integer_value(json_object_get(l, "bits")), 2);
    assert_true(json_is_true(json_object_get(l, "half")));
    assert_true(json_real_value(json_object_get(l, "rate")) == 2.5);
    assert_string_equal(json_string_value(json_object_get(l, "codebook")),
                        "mul1");
    assert_true(json_is_null(json_object_get(l, "pair")));
  }
  assert_true(found);
  json_t *fp16 = json_array_get(json_object_get(j, "fp16_linears"), 0);
  assert_string_equal(json_string_value(json_object_get(fp16, "name")),
                      "model.layers.1.mlp.up_proj");
  assert_string_equal(json_string_value(json_object_get(fp16, "dtype")), "F16");
  assert_true(json_real_value(json_object_get(fp16, "bits_per_weight")) ==
              16.0);
  json_t *t = json_object_get(j, "totals");
  assert_int_equal(json_integer_value(json_object_get(t, "bytes")), 714496);
  assert_int_equal(json_integer_value(json_object_get(t, "exl3_layers")), 14);
  assert_int_equal(json_integer_value(json_object_get(t, "fp16_linears")), 1);
  assert_int_equal(json_integer_value(json_object_get(t, "other_tensors")), 7);
  const double bpw = json_real_value(json_object_get(t, "bits_per_weight"));
  assert_true(bpw > 4.4725 && bpw < 4.4735);
  assert_int_equal(json_array_size(json_object_get(j, "other_tensors")), 7);
  json_decref(j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_toy_model),
      cmocka_unit_test(test_config_fields),
      cmocka_unit_test(test_ring_tables),
      cmocka_unit_test(test_info_toy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
