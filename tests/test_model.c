/* SPDX-License-Identifier: Apache-2.0 */
/* Model directories: the toy EXL3 model, single files, broken indexes and
 * config.json parsing. */
#include "testutil.h"

#include "io/model.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const shard1 = "model-00001-of-00002.safetensors";
static const char *const shard2 = "model-00002-of-00002.safetensors";

/* Expected layers of the toy model: name suffix -> (k, n). */
static const struct {
  const char *proj;
  int64_t k, n;
} toy_projs[] = {
    {"mlp.down_proj", 512, 256},    {"mlp.gate_proj", 256, 512},
    {"mlp.up_proj", 256, 512},      {"self_attn.k_proj", 256, 128},
    {"self_attn.o_proj", 256, 256}, {"self_attn.q_proj", 256, 256},
    {"self_attn.v_proj", 256, 128},
};

static void check_toy(trellis_model *m) {
  assert_int_equal(trellis_model_layer_count(m), 14);
  assert_int_equal(trellis_model_other_count(m), 2);
  trellis_tensor t;
  tu_assert_status(trellis_model_other(m, 0, &t), TRELLIS_OK);
  assert_string_equal(t.name, "model.layers.0.input_layernorm.weight");
  assert_int_equal(t.dtype, TRELLIS_T_F16);
  tu_assert_status(trellis_model_other(m, 1, &t), TRELLIS_OK);
  assert_string_equal(t.name, "model.layers.1.input_layernorm.weight");
  tu_assert_status(trellis_model_other(m, 2, &t), TRELLIS_ERR_INVALID_ARGUMENT);

  for (size_t i = 0; i < 14; i++) {
    trellis_layer L, F;
    tu_assert_status(trellis_model_layer(m, i, &L), TRELLIS_OK);
    char want[128];
    snprintf(want, sizeof want, "model.layers.%zu.%s", i / 7,
             toy_projs[i % 7].proj);
    assert_string_equal(L.name, want);
    assert_int_equal(L.weight.struct_size, sizeof(trellis_weight));
    assert_int_equal(L.weight.k, toy_projs[i % 7].k);
    assert_int_equal(L.weight.n, toy_projs[i % 7].n);
    assert_in_range(L.weight.bits, 3, 6);
    assert_int_equal(L.weight.codebook, TRELLIS_CB_MCG);
    assert_int_equal(L.signs, TRELLIS_SIGNS_SCALED);
    assert_int_equal(L.has_bias, 0);
    assert_non_null(L.weight.trellis);
    assert_non_null(L.weight.suh);
    assert_non_null(L.weight.svh);
    assert_null(L.weight.su);
    assert_null(L.weight.sv);
    assert_null(L.weight.bias);
    tu_assert_status(trellis_model_find_layer(m, want, &F), TRELLIS_OK);
    assert_memory_equal(&F, &L, sizeof L);
    /* The layer's pointers are the tensors' data. */
    char tname[160];
    snprintf(tname, sizeof tname, "%s.trellis", want);
    tu_assert_status(trellis_model_find_tensor(m, tname, &t), TRELLIS_OK);
    assert_ptr_equal(t.data, L.weight.trellis);
    assert_int_equal(t.shape[2], 16 * L.weight.bits);
  }
  trellis_layer L;
  tu_assert_status(
      trellis_model_find_layer(m, "model.layers.2.mlp.up_proj", &L),
      TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("model.layers.2.mlp.up_proj");
  tu_assert_status(
      trellis_model_find_layer(m, "model.layers.0.mlp.up_proj.trellis", &L),
      TRELLIS_ERR_NOT_FOUND);
  tu_assert_status(trellis_model_find_layer(m, "", &L), TRELLIS_ERR_NOT_FOUND);
  tu_assert_status(trellis_model_layer(m, 14, &L),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_find_tensor(m, "model.embed_tokens", &t),
                   TRELLIS_ERR_NOT_FOUND);
}

static void test_toy_model(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  check_toy(m);
  /* Tensors of both shards. */
  trellis_tensor t;
  tu_assert_status(
      trellis_model_find_tensor(m, "model.layers.1.input_layernorm.weight", &t),
      TRELLIS_OK);
  tu_assert_status(
      trellis_model_find_tensor(m, "model.layers.0.mlp.up_proj.mcg", &t),
      TRELLIS_OK);
  assert_int_equal(t.dtype, TRELLIS_T_I32);

  const trellis_quant_config *qc = trellis_model_quant_config(m);
  assert_non_null(qc);
  assert_int_equal(qc->present, 1);
  assert_string_equal(qc->quant_method, "exl3");
  assert_string_equal(qc->version, "0.0.32");
  assert_float_equal(qc->bits, 4.4, 1e-12);
  assert_int_equal(qc->head_bits, 16);
  assert_string_equal(qc->codebook, "mcg");
  assert_string_equal(qc->out_scales, "always");
  assert_int_equal(qc->calibration_rows, 250);
  assert_int_equal(qc->calibration_cols, 2048);
  trellis_model_close(m);

  /* With a trailing slash, and through the index file itself (config.json
   * beside it read too). */
  tu_assert_status(trellis_model_open(TU_TOY_MODEL "/", &m), TRELLIS_OK);
  check_toy(m);
  trellis_model_close(m);
  tu_assert_status(
      trellis_model_open(TU_TOY_MODEL "/model.safetensors.index.json", &m),
      TRELLIS_OK);
  check_toy(m);
  assert_int_equal(trellis_model_quant_config(m)->present, 1);
  assert_string_equal(trellis_model_quant_config(m)->quant_method, "exl3");
  trellis_model_close(m);
}

static void test_single_file(void **state) {
  (void)state;
  char *path = tu_tv_path("k6_mcg_512x256_m1_bias.safetensors");
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 1);
  assert_int_equal(trellis_model_other_count(m), 0);
  assert_int_equal(trellis_model_quant_config(m)->present, 0);
  trellis_layer L;
  tu_assert_status(trellis_model_layer(m, 0, &L), TRELLIS_OK);
  assert_string_equal(L.name, "model.layers.0.mlp.proj");
  assert_int_equal(L.has_bias, 1);
  assert_non_null(L.weight.bias);
  trellis_model_close(m);
  free(path);

  /* A directory holding model.safetensors (and no config.json). */
  char *dir = tu_tmp_path("single");
  assert_int_equal(mkdir(dir, 0700), 0);
  size_t size;
  path = tu_tv_path("k2_mul1_256x128.safetensors");
  uint8_t *buf = tu_read_file(path, &size);
  free(path);
  path = tu_join(dir, "model.safetensors");
  tu_write_file(path, buf, size);
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_layer_count(m), 1);
  tu_assert_status(trellis_model_layer(m, 0, &L), TRELLIS_OK);
  assert_int_equal(L.weight.codebook, TRELLIS_CB_MUL1);
  assert_int_equal(L.weight.bits, 2);
  trellis_model_close(m);

  /* A corrupt single file is reported with its path. */
  tu_write_file(path, buf, size / 2);
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_ERR_FORMAT);
  assert_null(m);
  tu_assert_error_has(path);
  free(buf);
  free(path);
  free(dir);
}

/* --------------------------------------------------- broken toy copies -- */

static json_t *load_index(const char *dir) {
  char *path = tu_join(dir, "model.safetensors.index.json");
  json_t *root = json_load_file(path, 0, NULL);
  assert_non_null(root);
  free(path);
  return root;
}

static void save_json(const char *dir, const char *file, json_t *root) {
  char *path = tu_join(dir, file);
  assert_int_equal(json_dump_file(root, path, JSON_INDENT(1)), 0);
  free(path);
  json_decref(root);
}

static void write_text(const char *dir, const char *file, const char *text) {
  char *path = tu_join(dir, file);
  tu_write_file(path, text, strlen(text));
  free(path);
}

static void expect_open(const char *dir, trellis_status want,
                        const char *needle) {
  trellis_model *m = (trellis_model *)1;
  tu_assert_status(trellis_model_open(dir, &m), want);
  if (want != TRELLIS_OK) {
    assert_null(m);
    if (needle)
      tu_assert_error_has(needle);
  }
  trellis_model_close(m);
}

/* Points one weight_map entry at `shard`. */
static void remap(const char *dir, const char *tensor, const char *shard) {
  json_t *root = load_index(dir);
  json_object_set_new(json_object_get(root, "weight_map"), tensor,
                      json_string(shard));
  save_json(dir, "model.safetensors.index.json", root);
}

static void test_bad_index(void **state) {
  (void)state;
  const char *tensor = "model.layers.1.mlp.up_proj.svh";
  char *dir = tu_copy_toy();
  expect_open(dir, TRELLIS_OK, NULL);

  remap(dir, tensor, "model-00003-of-00002.safetensors");
  expect_open(dir, TRELLIS_ERR_NOT_FOUND, "model-00003-of-00002.safetensors");

  remap(dir, tensor, "../toy0/model-00002-of-00002.safetensors");
  expect_open(dir, TRELLIS_ERR_FORMAT, "leaves the model directory");
  tu_assert_error_has(tensor);
  remap(dir, tensor, "..");
  expect_open(dir, TRELLIS_ERR_FORMAT, "leaves the model directory");
  remap(dir, tensor, "/etc/passwd");
  expect_open(dir, TRELLIS_ERR_FORMAT, "leaves the model directory");
  remap(dir, tensor, "sub/x.safetensors");
  expect_open(dir, TRELLIS_ERR_FORMAT, "leaves the model directory");
  remap(dir, tensor, "");
  expect_open(dir, TRELLIS_ERR_FORMAT, "empty");

  /* Listed in the wrong shard: missing there. */
  remap(dir, tensor, shard1);
  expect_open(dir, TRELLIS_ERR_NOT_FOUND,
              "tensor 'model.layers.1.mlp.up_proj.svh' is listed in the "
              "index but missing from shard "
              "'model-00001-of-00002.safetensors'");
  remap(dir, "model.layers.0.no_such_tensor", shard1);
  json_t *root = load_index(dir);
  json_object_set_new(json_object_get(root, "weight_map"), tensor,
                      json_string(shard2));
  save_json(dir, "model.safetensors.index.json", root);
  expect_open(dir, TRELLIS_ERR_NOT_FOUND, "no_such_tensor");

  /* Structure errors. */
  root = load_index(dir);
  json_object_set_new(json_object_get(root, "weight_map"), tensor,
                      json_integer(2));
  save_json(dir, "model.safetensors.index.json", root);
  expect_open(dir, TRELLIS_ERR_FORMAT, "is not a string");
  write_text(dir, "model.safetensors.index.json", "{\"metadata\": {}}");
  expect_open(dir, TRELLIS_ERR_FORMAT, "no \"weight_map\"");
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": []}");
  expect_open(dir, TRELLIS_ERR_FORMAT, "weight_map is not an object");
  write_text(dir, "model.safetensors.index.json", "{\"weight_map\": {");
  expect_open(dir, TRELLIS_ERR_FORMAT, "invalid JSON");
  write_text(dir, "model.safetensors.index.json",
             "{\"weight_map\": {\"a\": \"x\", \"a\": \"y\"}}");
  expect_open(dir, TRELLIS_ERR_FORMAT, "duplicate");
  write_text(dir, "model.safetensors.index.json", "[]");
  expect_open(dir, TRELLIS_ERR_FORMAT, "not a JSON object");
  free(dir);
}

static void test_bad_shard(void **state) {
  (void)state;
  char *dir = tu_copy_toy();
  char *path = tu_join(dir, shard2);
  size_t size;
  uint8_t *buf = tu_read_file(path, &size);
  tu_write_file(path, buf, size - 1);
  expect_open(dir, TRELLIS_ERR_FORMAT, path);
  tu_assert_error_has("shard 'model-00002-of-00002.safetensors'");
  /* Missing shard file. */
  remove(path);
  expect_open(dir, TRELLIS_ERR_NOT_FOUND, shard2);
  free(buf);
  free(path);

  /* No model files at all. */
  path = tu_join(dir, "model.safetensors.index.json");
  remove(path);
  free(path);
  expect_open(dir, TRELLIS_ERR_NOT_FOUND, "neither model.safetensors");
  expect_open("/nonexistent/model", TRELLIS_ERR_NOT_FOUND,
              "/nonexistent/model");
  free(dir);
}

static void test_bad_config(void **state) {
  (void)state;
  char *dir = tu_copy_toy();
  static const struct {
    const char *json;
    const char *needle;
  } bad[] = {
      {"{\"quantization_config\": {\"bits\": \"4.4\"}}",
       "quantization_config.bits is not a number"},
      {"{\"quantization_config\": {\"head_bits\": 6.5}}",
       "quantization_config.head_bits is not an integer"},
      {"{\"quantization_config\": {\"head_bits\": -1}}",
       "quantization_config.head_bits = -1 is out of range"},
      {"{\"quantization_config\": {\"quant_method\": 3}}",
       "quantization_config.quant_method is not a string"},
      {"{\"quantization_config\": {\"codebook\": [\"mcg\"]}}",
       "quantization_config.codebook is not a string"},
      {"{\"quantization_config\": {\"codebook\": \"a-very-long-codebook\"}}",
       "quantization_config.codebook is longer than 15"},
      {"{\"quantization_config\": {\"version\": {}}}",
       "quantization_config.version is not a string"},
      {"{\"quantization_config\": {\"out_scales\": true}}",
       "quantization_config.out_scales is not a string"},
      {"{\"quantization_config\": {\"calibration\": 5}}",
       "quantization_config.calibration is not an object"},
      {"{\"quantization_config\": {\"calibration\": {\"rows\": \"250\"}}}",
       "quantization_config.calibration.rows is not an integer"},
      {"{\"quantization_config\": {\"calibration\": {\"cols\": 1.5}}}",
       "quantization_config.calibration.cols is not an integer"},
      {"{\"quantization_config\": \"exl3\"}",
       "quantization_config is not an object"},
      {"{\"quantization_config\": {}", "invalid JSON"},
      {"[1]", "not a JSON object"},
  };
  char *cfg = tu_join(dir, "config.json");
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    write_text(dir, "config.json", bad[i].json);
    expect_open(dir, TRELLIS_ERR_FORMAT, bad[i].needle);
    tu_assert_error_has(cfg);
  }
  free(cfg);

  /* Absent fields stay zero; null counts as absent. */
  write_text(dir, "config.json",
             "{\"quantization_config\": {\"quant_method\": \"exl3\", "
             "\"codebook\": null, \"bits\": 3}}");
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  const trellis_quant_config *qc = trellis_model_quant_config(m);
  assert_int_equal(qc->present, 1);
  assert_string_equal(qc->quant_method, "exl3");
  assert_string_equal(qc->codebook, "");
  assert_string_equal(qc->version, "");
  assert_float_equal(qc->bits, 3.0, 0);
  assert_int_equal(qc->head_bits, 0);
  assert_int_equal(qc->calibration_rows, 0);
  trellis_model_close(m);

  write_text(dir, "config.json", "{\"hidden_size\": 256}");
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  assert_int_equal(trellis_model_quant_config(m)->present, 0);
  trellis_model_close(m);
  free(dir);
}

/* ---------------------------------------------------- internal parsers -- */

static void test_index_parse(void **state) {
  (void)state;
  const char *text = "{\"metadata\": {\"total_size\": 5}, \"weight_map\": {"
                     "\"c\": \"s2\", \"a\": \"s1\", \"b\": \"s2\"}}";
  trl_index idx;
  tu_assert_status(trl_index_parse(text, strlen(text), "idx", &idx),
                   TRELLIS_OK);
  assert_int_equal(idx.count, 3);
  assert_int_equal(idx.shard_count, 2);
  assert_string_equal(idx.tensors[0], "a");
  assert_string_equal(idx.tensors[2], "c");
  assert_string_equal(idx.shards[idx.shard[0]], "s1");
  assert_string_equal(idx.shards[idx.shard[1]], "s2");
  assert_string_equal(idx.shards[idx.shard[2]], "s2");
  trl_index_free(&idx);

  text = "{\"weight_map\": {}}";
  tu_assert_status(trl_index_parse(text, strlen(text), "idx", &idx),
                   TRELLIS_OK);
  assert_int_equal(idx.count, 0);
  trl_index_free(&idx);

  text = "{\"weight_map\": {\"a\": \"x\\\\..\\\\y\"}}";
  tu_assert_status(trl_index_parse(text, strlen(text), "idx", &idx),
                   TRELLIS_ERR_FORMAT);
  text = "{\"weight_map\": {}, \"metadata\": 3}";
  tu_assert_status(trl_index_parse(text, strlen(text), "idx", &idx),
                   TRELLIS_ERR_FORMAT);
  tu_assert_error_has("metadata is not an object");
}

static void test_config_parse(void **state) {
  (void)state;
  trellis_quant_config qc;
  const char *text = "{\"quantization_config\": {\"bits\": 2, \"head_bits\": "
                     "6, \"calibration\": {\"rows\": 1, \"cols\": 2}}}";
  tu_assert_status(trl_quant_config_parse(text, strlen(text), "c", &qc),
                   TRELLIS_OK);
  assert_int_equal(qc.present, 1);
  assert_float_equal(qc.bits, 2.0, 0);
  assert_int_equal(qc.head_bits, 6);
  assert_int_equal(qc.calibration_rows, 1);
  assert_int_equal(qc.calibration_cols, 2);
  /* quant_method fills its 32-byte buffer at most to 31 characters. */
  text = "{\"quantization_config\": {\"quant_method\": "
         "\"0123456789012345678901234567890\"}}";
  tu_assert_status(trl_quant_config_parse(text, strlen(text), "c", &qc),
                   TRELLIS_OK);
  text = "{\"quantization_config\": {\"quant_method\": "
         "\"01234567890123456789012345678901\"}}";
  tu_assert_status(trl_quant_config_parse(text, strlen(text), "c", &qc),
                   TRELLIS_ERR_FORMAT);
  assert_int_equal(qc.present, 0);
}

static void test_api_misuse(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(NULL, &m), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_open("", &m), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("path is empty (expected a model file or directory)");
  assert_null(trellis_model_quant_config(NULL));
  assert_int_equal(trellis_model_layer_count(NULL), 0);
  assert_int_equal(trellis_model_other_count(NULL), 0);
  trellis_layer L;
  trellis_tensor t;
  tu_assert_status(trellis_model_layer(NULL, 0, &L),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_find_layer(NULL, "x", &L),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_find_tensor(NULL, "x", &t),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_other(NULL, 0, &t),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  tu_assert_status(trellis_model_find_layer(m, NULL, &L),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_model_find_tensor(m, "x", NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_model_close(m);
  trellis_model_close(NULL);
}

/* The files a model read: data files first, then the index and config. */
static void test_file_paths(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  const char *want[] = {shard1, shard2, "model.safetensors.index.json",
                        "config.json"};
  for (size_t i = 0; i < 4; i++) {
    char *path = tu_join(TU_TOY_MODEL, want[i]);
    assert_non_null(trellis_model_file_path(m, i));
    assert_string_equal(trellis_model_file_path(m, i), path);
    free(path);
  }
  assert_null(trellis_model_file_path(m, 4));
  assert_null(trellis_model_file_path(m, (size_t)-1));
  trellis_model_close(m);

  /* Through the index: config.json beside it is read too. */
  const char *index = TU_TOY_MODEL "/model.safetensors.index.json";
  tu_assert_status(trellis_model_open(index, &m), TRELLIS_OK);
  assert_string_equal(trellis_model_file_path(m, 2), index);
  assert_string_equal(trellis_model_file_path(m, 3),
                      TU_TOY_MODEL "/config.json");
  assert_null(trellis_model_file_path(m, 4));
  trellis_model_close(m);

  char *single = tu_tv_path("k2_mul1_256x128.safetensors");
  tu_assert_status(trellis_model_open(single, &m), TRELLIS_OK);
  assert_string_equal(trellis_model_file_path(m, 0), single);
  assert_null(trellis_model_file_path(m, 1));
  trellis_model_close(m);
  free(single);
  assert_null(trellis_model_file_path(NULL, 0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_paths),  cmocka_unit_test(test_toy_model),
      cmocka_unit_test(test_single_file), cmocka_unit_test(test_bad_index),
      cmocka_unit_test(test_bad_shard),   cmocka_unit_test(test_bad_config),
      cmocka_unit_test(test_index_parse), cmocka_unit_test(test_config_parse),
      cmocka_unit_test(test_api_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
