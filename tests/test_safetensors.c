/* SPDX-License-Identifier: Apache-2.0 */
/* safetensors reader: valid files, and every kind of bad file, each built
 * both in memory and on disk. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Opens `buf` from memory and from a file; both must fail with `want` and a
 * message containing `needle` (the on-disk one also names the file). */
static void expect_bad(const uint8_t *buf, size_t size, trellis_status want,
                       const char *needle) {
  trellis_file *f = (trellis_file *)1;
  tu_assert_status(trellis_file_open_memory(buf, size, &f), want);
  assert_null(f);
  if (needle)
    tu_assert_error_has(needle);
  tu_assert_error_has("<memory>");

  char *path = tu_tmp_path("bad.safetensors");
  tu_write_file(path, buf, size);
  f = (trellis_file *)1;
  tu_assert_status(trellis_file_open(path, &f), want);
  assert_null(f);
  if (needle)
    tu_assert_error_has(needle);
  tu_assert_error_has(path);
  free(path);
}

static void expect_bad_header(const char *header, size_t data_size,
                              trellis_status want, const char *needle) {
  size_t size;
  uint8_t *buf = tu_st_raw(header, NULL, data_size, &size);
  expect_bad(buf, size, want, needle);
  free(buf);
}

static void expect_good_header(const char *header, size_t data_size,
                               size_t tensors) {
  size_t size;
  uint8_t *buf = tu_st_raw(header, NULL, data_size, &size);
  trellis_file *f = NULL;
  tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_OK);
  assert_int_equal(trellis_file_tensor_count(f), tensors);
  trellis_file_close(f);
  free(buf);
}

/* ------------------------------------------------------------ valid -- */

static void check_file(trellis_file *f, size_t file_size) {
  size_t n = trellis_file_tensor_count(f);
  assert_true(n > 0);
  const uint8_t *lo = NULL, *hi = NULL;
  for (size_t i = 0; i < n; i++) {
    trellis_tensor t, u;
    tu_assert_status(trellis_file_tensor(f, i, &t), TRELLIS_OK);
    if (i > 0) {
      trellis_tensor prev;
      trellis_file_tensor(f, i - 1, &prev);
      assert_true(strcmp(prev.name, t.name) < 0);
    }
    tu_assert_status(trellis_file_find(f, t.name, &u), TRELLIS_OK);
    assert_ptr_equal(u.data, t.data);
    assert_string_equal(u.name, t.name);
    size_t elems = 1;
    for (int d = 0; d < t.ndim; d++)
      elems *= (size_t)t.shape[d];
    assert_int_equal(elems * trellis_tensor_dtype_size(t.dtype), t.nbytes);
    const uint8_t *p = t.data;
    if (!lo || p < lo)
      lo = p;
    if (!hi || p + t.nbytes > hi)
      hi = p + t.nbytes;
  }
  assert_true((size_t)(hi - lo) < file_size);
}

static void test_open_all_vectors(void **state) {
  (void)state;
  tv_case *cases;
  size_t n = tv_load_manifest(&cases);
  for (size_t i = 0; i < n; i++) {
    for (int ref = 0; ref < 2; ref++) {
      char name[160];
      snprintf(name, sizeof name, "%s%s.safetensors", cases[i].name,
               ref ? ".ref" : "");
      char *path = tu_tv_path(name);
      size_t size;
      uint8_t *buf = tu_read_file(path, &size);
      trellis_file *f = NULL;
      tu_assert_status(trellis_file_open(path, &f), TRELLIS_OK);
      check_file(f, size);
      trellis_file_close(f);
      tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_OK);
      check_file(f, size);
      trellis_tensor t;
      if (ref) {
        tu_assert_status(trellis_file_find(f, "w_hat", &t), TRELLIS_OK);
        assert_int_equal(t.dtype, TRELLIS_T_F16);
        assert_int_equal(t.ndim, 2);
        assert_int_equal(t.shape[0], cases[i].k);
        assert_int_equal(t.shape[1], cases[i].n);
      }
      trellis_file_close(f);
      free(buf);
      free(path);
    }
  }
  free(cases);
}

static void test_build_roundtrip(void **state) {
  (void)state;
  int32_t marker = -877912083;
  uint16_t half[6] = {1, 2, 3, 4, 5, 6};
  double dbl[2] = {1.5, -2.5};
  tu_st_tensor ts[] = {
      {"zeta", "F16", 2, {2, 3}, half, sizeof half},
      {"alpha.mcg", "I32", 0, {0}, &marker, 4},
      {"empty", "BF16", 2, {0, 7}, NULL, 0},
      {"m.d", "F64", 1, {2}, dbl, sizeof dbl},
      {"b", "BOOL", 1, {3}, "\1\0\1", 3},
      {"e4", "F8_E4M3", 1, {1}, "x", 1},
  };
  size_t size;
  uint8_t *buf = tu_st_build(ts, 6, &size);
  trellis_file *f = NULL;
  tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_OK);
  assert_int_equal(trellis_file_tensor_count(f), 6);
  const char *sorted[] = {"alpha.mcg", "b", "e4", "empty", "m.d", "zeta"};
  for (size_t i = 0; i < 6; i++) {
    trellis_tensor t;
    tu_assert_status(trellis_file_tensor(f, i, &t), TRELLIS_OK);
    assert_string_equal(t.name, sorted[i]);
  }
  trellis_tensor t;
  tu_assert_status(trellis_file_find(f, "zeta", &t), TRELLIS_OK);
  assert_int_equal(t.dtype, TRELLIS_T_F16);
  assert_int_equal(t.ndim, 2);
  assert_int_equal(t.shape[1], 3);
  assert_memory_equal(t.data, half, sizeof half);
  tu_assert_status(trellis_file_find(f, "alpha.mcg", &t), TRELLIS_OK);
  assert_int_equal(t.ndim, 0);
  assert_int_equal(t.nbytes, 4);
  assert_memory_equal(t.data, &marker, 4);
  tu_assert_status(trellis_file_find(f, "empty", &t), TRELLIS_OK);
  assert_int_equal(t.nbytes, 0);
  tu_assert_status(trellis_file_find(f, "m.d", &t), TRELLIS_OK);
  assert_memory_equal(t.data, dbl, sizeof dbl);
  trellis_file_close(f);
  free(buf);
}

static void test_edge_valid(void **state) {
  (void)state;
  expect_good_header("{}", 0, 0);
  expect_good_header("{}      ", 0, 0);
  expect_good_header("  {} \n", 0, 0);
  /* Unpadded header: legal, the data region just starts unaligned. */
  expect_good_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[3],"
                     "\"data_offsets\":[0,3]}}",
                     3, 1);
  expect_good_header("{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},"
                     "\"a\":{\"shape\":[2],\"data_offsets\":[0,4],"
                     "\"dtype\":\"I16\"}}",
                     4, 1);
  /* Zero-size tensors may share an offset. */
  expect_good_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],"
                     "\"data_offsets\":[2,2]},\"b\":{\"dtype\":\"U8\","
                     "\"shape\":[2],\"data_offsets\":[0,2]},"
                     "\"c\":{\"dtype\":\"F32\",\"shape\":[0,5],"
                     "\"data_offsets\":[2,2]}}",
                     2, 3);
  /* Eight dimensions is the maximum. */
  expect_good_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,2],"
                     "\"data_offsets\":[0,2]}}",
                     2, 1);
}

/* ------------------------------------------------------- truncation -- */

static void test_truncated_vectors(void **state) {
  (void)state;
  const char *names[] = {"k1_mcg_256x128.safetensors",
                         "k6_mcg_512x256_m1_bias.safetensors",
                         "k3_3inst_256x256_legacy.safetensors"};
  for (size_t k = 0; k < 3; k++) {
    char *path = tu_tv_path(names[k]);
    size_t size;
    uint8_t *buf = tu_read_file(path, &size);
    free(path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
      hlen = hlen << 8 | buf[i];
    size_t data_start = 8 + (size_t)hlen;
    /* Every cut in the length field and the header, every cut near the
     * data start and the end, and a stride through the data. */
    for (size_t cut = 0; cut < size; cut++) {
      int near = cut <= data_start + 64 || cut + 64 >= size;
      if (!near && cut % 61 != 0)
        continue;
      trellis_file *f = (trellis_file *)1;
      trellis_status st = trellis_file_open_memory(buf, cut, &f);
      if (st != TRELLIS_ERR_FORMAT)
        fail_msg("%s cut at %zu: %s (%s)", names[k], cut,
                 trellis_status_name(st), trellis_last_error());
      assert_null(f);
      const char *want = cut == 0           ? "empty"
                         : cut < 8          ? "too small"
                         : cut < data_start ? "runs past the end"
                                            : "model.layers.0.mlp.proj";
      tu_assert_error_has(want);
    }
    /* A few of them on disk too. */
    size_t cuts[] = {
        0,        3,       8, 9, data_start - 1, data_start, data_start + 1,
        size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++)
      expect_bad(buf, cuts[i], TRELLIS_ERR_FORMAT, NULL);
    free(buf);
  }
}

/* ------------------------------------------------------- bad headers -- */

static void test_header_length(void **state) {
  (void)state;
  size_t size;
  uint8_t *buf = tu_st_raw_len(1000, "{}", NULL, 0, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "runs past the end");
  free(buf);
  buf = tu_st_raw_len(UINT64_MAX, "{}", NULL, 0, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "exceeds the limit");
  free(buf);
  buf = tu_st_raw_len((uint64_t)100000001, "{}", NULL, 0, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "exceeds the limit");
  free(buf);
  buf = tu_st_raw_len(0, "", NULL, 0, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "not valid JSON");
  free(buf);
  /* A header length that swallows the data: the JSON gets trailing bytes. */
  buf = tu_st_raw_len(6, "{}", "abcd", 4, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "not valid JSON");
  free(buf);
  expect_bad((const uint8_t *)"", 0, TRELLIS_ERR_FORMAT, "empty");
  expect_bad((const uint8_t *)"\2\0\0\0", 4, TRELLIS_ERR_FORMAT, "too small");
}

static void test_bad_json(void **state) {
  (void)state;
  expect_bad_header("{\"a\":", 0, TRELLIS_ERR_FORMAT, "not valid JSON");
  expect_bad_header("{\"a\":{}} x", 0, TRELLIS_ERR_FORMAT, "not valid JSON");
  expect_bad_header("{}\n{}", 0, TRELLIS_ERR_FORMAT, "not valid JSON");
  expect_bad_header("{'a': 1}", 0, TRELLIS_ERR_FORMAT, "not valid JSON");
  expect_bad_header("\"just a string\"", 0, TRELLIS_ERR_FORMAT,
                    "not valid JSON");
  expect_bad_header("\xff\xfe{}", 0, TRELLIS_ERR_FORMAT, "not valid JSON");
  expect_bad_header("[1, 2]", 0, TRELLIS_ERR_FORMAT, "not a JSON object");
  expect_bad_header("[]", 0, TRELLIS_ERR_FORMAT, "not a JSON object");
  /* A NUL inside the header region is not whitespace. */
  size_t size;
  uint8_t *buf = tu_st_raw_len(4, "{}", NULL, 2, &size);
  expect_bad(buf, size, TRELLIS_ERR_FORMAT, "not valid JSON");
  free(buf);
}

#define T(name, body) "\"" name "\":{" body "}"

static void test_bad_entries(void **state) {
  (void)state;
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[2]") "}", 4,
                    TRELLIS_ERR_FORMAT,
                    "tensor 'w': missing field "
                    "'data_offsets'");
  expect_bad_header("{" T("w", "\"shape\":[2],\"data_offsets\":[0,4]") "}", 4,
                    TRELLIS_ERR_FORMAT, "tensor 'w': missing field 'dtype'");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT, "tensor 'w': missing field 'shape'");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[2],"
                               "\"data_offsets\":[0,4],\"extra\":1") "}",
                    4, TRELLIS_ERR_FORMAT,
                    "tensor 'w': unexpected field "
                    "'extra'");
  expect_bad_header("{\"w\":[1,2,3]}", 0, TRELLIS_ERR_FORMAT,
                    "tensor 'w': entry is not a JSON object");
  expect_bad_header("{\"w\":null}", 0, TRELLIS_ERR_FORMAT,
                    "tensor 'w': entry is not a JSON object");
}

static void test_bad_dtype(void **state) {
  (void)state;
  const char *bad[] = {"F17", "f16", "Q4_K", "", "float16", "I4"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char h[256];
    snprintf(h, sizeof h,
             "{\"w.trellis\":{\"dtype\":\"%s\",\"shape\":[2],"
             "\"data_offsets\":[0,4]}}",
             bad[i]);
    expect_bad_header(h, 4, TRELLIS_ERR_DTYPE, "tensor 'w.trellis': dtype");
  }
  expect_bad_header("{" T("w", "\"dtype\":16,\"shape\":[2],"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT, "tensor 'w': dtype is not a string");
}

static void test_bad_shape(void **state) {
  (void)state;
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[-2],"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_SHAPE,
                    "tensor 'w': shape[0] = -2 is "
                    "negative");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[1.5],"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT,
                    "tensor 'w': shape[0] is not an "
                    "integer");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[2,\"2\"],"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT, "shape[1] is not an integer");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":2,"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT, "tensor 'w': shape is not an array");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                               "\"data_offsets\":[0,1]") "}",
                    1, TRELLIS_ERR_SHAPE, "9 dimensions");
  /* shape x dtype != byte span */
  expect_bad_header("{" T("w", "\"dtype\":\"F32\",\"shape\":[3],"
                               "\"data_offsets\":[0,8]") "}",
                    8, TRELLIS_ERR_FORMAT,
                    "tensor 'w': shape x F32 is 12 "
                    "bytes but data_offsets [0, 8] "
                    "span 8");
  expect_bad_header("{" T("w", "\"dtype\":\"F16\",\"shape\":[],"
                               "\"data_offsets\":[0,4]") "}",
                    4, TRELLIS_ERR_FORMAT, "tensor 'w': shape x F16 is 2");
  /* The product overflows size_t. */
  expect_bad_header("{" T("w",
                          "\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
                          "\"data_offsets\":[0,8]") "}",
                    8, TRELLIS_ERR_FORMAT, "overflows");
  expect_bad_header("{" T("w",
                          "\"dtype\":\"U8\",\"shape\":[99999999999999999999],"
                          "\"data_offsets\":[0,8]") "}",
                    8, TRELLIS_ERR_FORMAT, "not valid JSON");
}

static void test_bad_offsets(void **state) {
  (void)state;
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":[0,16]") "}",
                    8, TRELLIS_ERR_FORMAT,
                    "tensor 'w': data_offsets [0, 16] "
                    "run past the data region (8 "
                    "bytes)");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":[8,0]") "}",
                    8, TRELLIS_ERR_FORMAT,
                    "tensor 'w': data_offsets [8, 0] "
                    "has begin > end");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":[-8,0]") "}",
                    8, TRELLIS_ERR_FORMAT, "non-negative");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":[0,8,9]") "}",
                    8, TRELLIS_ERR_FORMAT, "tensor 'w': data_offsets is not");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":[0.0,8]") "}",
                    8, TRELLIS_ERR_FORMAT, "non-negative integers");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"shape\":[8],"
                               "\"data_offsets\":{}") "}",
                    8, TRELLIS_ERR_FORMAT, "tensor 'w': data_offsets is not");
  /* Overlap, gap, trailing bytes. */
  expect_bad_header(
      "{" T("a",
            "\"dtype\":\"U8\",\"shape\":[8],"
            "\"data_offsets\":[0,8]") "," T("b",
                                            "\"dtype\":\"U8\",\"shape\":[8],"
                                            "\"data_offsets\":[4,12]") "}",
      12, TRELLIS_ERR_FORMAT,
      "tensors 'a' [0, 8] and 'b' [4, "
      "12] overlap");
  expect_bad_header(
      "{" T("a",
            "\"dtype\":\"U8\",\"shape\":[8],"
            "\"data_offsets\":[0,8]") "," T("b",
                                            "\"dtype\":\"U8\",\"shape\":[8],"
                                            "\"data_offsets\":[0,8]") "}",
      8, TRELLIS_ERR_FORMAT, "overlap");
  expect_bad_header(
      "{" T("a",
            "\"dtype\":\"U8\",\"shape\":[4],"
            "\"data_offsets\":[0,4]") "," T("b",
                                            "\"dtype\":\"U8\",\"shape\":[4],"
                                            "\"data_offsets\":[6,10]") "}",
      10, TRELLIS_ERR_FORMAT, "tensor 'b': 2-byte gap");
  expect_bad_header("{" T("a", "\"dtype\":\"U8\",\"shape\":[4],"
                               "\"data_offsets\":[4,8]") "}",
                    8, TRELLIS_ERR_FORMAT, "tensor 'a': 4-byte gap");
  expect_bad_header("{" T("a", "\"dtype\":\"U8\",\"shape\":[4],"
                               "\"data_offsets\":[0,4]") "}",
                    9, TRELLIS_ERR_FORMAT, "5 trailing bytes");
  expect_bad_header("{}", 3, TRELLIS_ERR_FORMAT, "3 trailing bytes");
}

static void test_duplicates_and_metadata(void **state) {
  (void)state;
  expect_bad_header(
      "{" T("w",
            "\"dtype\":\"U8\",\"shape\":[2],"
            "\"data_offsets\":[0,2]") "," T("w",
                                            "\"dtype\":\"U8\",\"shape\":[2],"
                                            "\"data_offsets\":[2,4]") "}",
      4, TRELLIS_ERR_FORMAT, "duplicate tensor name");
  expect_bad_header("{" T("w", "\"dtype\":\"U8\",\"dtype\":\"U8\","
                               "\"shape\":[2],\"data_offsets\":[0,2]") "}",
                    2, TRELLIS_ERR_FORMAT, "duplicate");
  expect_bad_header("{\"__metadata__\":{\"a\":1}}", 0, TRELLIS_ERR_FORMAT,
                    "__metadata__ value of 'a' is not a string");
  expect_bad_header("{\"__metadata__\":[\"a\"]}", 0, TRELLIS_ERR_FORMAT,
                    "__metadata__ is not a JSON object");
  expect_good_header("{\"__metadata__\":{}}", 0, 0);
}

/* ----------------------------------------------------------- the API -- */

static void test_api_misuse(void **state) {
  (void)state;
  trellis_file *f = NULL;
  tu_assert_status(trellis_file_open(NULL, &f), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_open("x", NULL), TRELLIS_ERR_INVALID_ARGUMENT);
  /* An empty path says so (it said ": cannot open: No such file ..."). */
  tu_assert_status(trellis_file_open("", &f), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("path is empty");
  tu_assert_status(trellis_file_open_memory(NULL, 5, &f),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_open_memory(NULL, 0, &f), TRELLIS_ERR_FORMAT);
  tu_assert_status(trellis_file_open("/nonexistent/dir/x.safetensors", &f),
                   TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("/nonexistent/dir/x.safetensors");
  tu_assert_status(trellis_file_open(tu_tmpdir(), &f), TRELLIS_ERR_IO);
  tu_assert_error_has("directory");
  char *empty = tu_tmp_path("empty.safetensors");
  tu_write_file(empty, "", 0);
  tu_assert_status(trellis_file_open(empty, &f), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("empty");
  free(empty);

  char *path = tu_tv_path("k1_mcg_256x128.safetensors");
  tu_assert_status(trellis_file_open(path, &f), TRELLIS_OK);
  trellis_tensor t;
  size_t n = trellis_file_tensor_count(f);
  assert_int_equal(n, 4);
  tu_assert_status(trellis_file_tensor(f, n, &t), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_tensor(f, 0, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_tensor(NULL, 0, &t),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_find(f, "nope", &t), TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("nope");
  tu_assert_error_has(path);
  tu_assert_status(trellis_file_find(f, NULL, &t),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_file_find(f, "model.layers.0.mlp.proj.mcg", &t),
                   TRELLIS_OK);
  assert_int_equal(t.dtype, TRELLIS_T_I32);
  assert_memory_equal(t.data, "\xed\x1f\xac\xcb", 4);
  trellis_file_close(f);
  free(path);
  assert_int_equal(trellis_file_tensor_count(NULL), 0);
  trellis_file_close(NULL);
}

static void test_dtype_table(void **state) {
  (void)state;
  const char *names[] = {"BOOL", "U8",  "I8",  "I16",     "U16",
                         "I32",  "U32", "I64", "U64",     "F16",
                         "BF16", "F32", "F64", "F8_E4M3", "F8_E5M2"};
  const size_t sizes[] = {1, 1, 1, 2, 2, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
  for (int i = 0; i <= TRELLIS_T_F8_E5M2; i++) {
    assert_string_equal(trellis_tensor_dtype_name((trellis_tensor_dtype)i),
                        names[i]);
    assert_int_equal(trellis_tensor_dtype_size((trellis_tensor_dtype)i),
                     sizes[i]);
  }
  assert_int_equal(trellis_tensor_dtype_size((trellis_tensor_dtype)99), 0);
  assert_string_equal(trellis_tensor_dtype_name((trellis_tensor_dtype)-1),
                      "invalid");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_open_all_vectors),
      cmocka_unit_test(test_build_roundtrip),
      cmocka_unit_test(test_edge_valid),
      cmocka_unit_test(test_truncated_vectors),
      cmocka_unit_test(test_header_length),
      cmocka_unit_test(test_bad_json),
      cmocka_unit_test(test_bad_entries),
      cmocka_unit_test(test_bad_dtype),
      cmocka_unit_test(test_bad_shape),
      cmocka_unit_test(test_bad_offsets),
      cmocka_unit_test(test_duplicates_and_metadata),
      cmocka_unit_test(test_api_misuse),
      cmocka_unit_test(test_dtype_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
