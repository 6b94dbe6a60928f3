/* SPDX-License-Identifier: Apache-2.0 */
/* Messages are safe to print: control characters, bytes that are not UTF-8
 * and invisible line-reordering marks are escaped as "\xHH" wherever they
 * come from (a tensor name in a file, a path given by the caller), so
 * trellis_last_error() never carries a terminal escape or a line break. */
#include "testutil.h"

#include "core/internal.h"
#include "tools/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *escaped(const char *in) {
  static char buf[256];
  trl_escape_text(in, buf, sizeof buf);
  return buf;
}

/* Nothing that could drive a terminal: no C0 control, DEL or C1 byte
 * sequence, and well-formed UTF-8 throughout. */
static void assert_printable(const char *s) {
  char again[4096];
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f)
      fail_msg("control byte 0x%02x in \"%s\"", *p, s);
  /* escaping is idempotent, so escaped text escapes to itself */
  trl_escape_text(s, again, sizeof again);
  assert_string_equal(again, s);
}

static void test_escape_text(void **state) {
  (void)state;
  assert_string_equal(escaped("plain.name_1"), "plain.name_1");
  assert_string_equal(escaped("a\x1b[2Jb"), "a\\x1b[2Jb");
  assert_string_equal(escaped("line\nbreak\r\t"), "line\\x0abreak\\x0d\\x09");
  assert_string_equal(escaped("del\x7f"), "del\\x7f");
  /* well-formed UTF-8 stays: é, 日本, an emoji */
  assert_string_equal(escaped("caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac "
                              "\xf0\x9f\x98\x80"),
                      "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80");
  /* C1 CSI (U+009B) raw and as UTF-8; RLO (U+202E); LRI (U+2066); U+2028 */
  assert_string_equal(escaped("x\x9by"), "x\\x9by");
  assert_string_equal(escaped("x\xc2\x9by"), "x\\xc2\\x9by");
  assert_string_equal(escaped("\xe2\x80\xae"), "\\xe2\\x80\\xae");
  assert_string_equal(escaped("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");
  assert_string_equal(escaped("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");
  /* ALM (U+061C), like LRM (U+200E), in a name */
  assert_string_equal(escaped("a\xd8\x9c"
                              "b"),
                      "a\\xd8\\x9cb");
  /* not UTF-8: a stray byte, overlong '/', a surrogate, past U+10FFFF, a
   * sequence cut short by the end or by an ASCII byte */
  assert_string_equal(escaped("\xff"), "\\xff");
  assert_string_equal(escaped("\xc0\xaf"), "\\xc0\\xaf");
  assert_string_equal(escaped("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  assert_string_equal(escaped("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  assert_string_equal(escaped("\xe6\x97"), "\\xe6\\x97");
  assert_string_equal(escaped("\xe6\x97z"), "\\xe6\\x97z");
  /* a backslash is kept, so escaping twice changes nothing */
  assert_string_equal(escaped("a\\x1b"), "a\\x1b");

  /* Cut at the end of the buffer: never inside an escape or a sequence. */
  char small[6];
  assert_int_equal(trl_escape_text("ab\x1b", small, sizeof small), 2);
  assert_string_equal(small, "ab");
  assert_int_equal(trl_escape_text("abc\xe6\x97\xa5", small, sizeof small), 3);
  assert_string_equal(small, "abc");
  assert_int_equal(trl_escape_text("\x1b", small, sizeof small), 4);
  assert_string_equal(small, "\\x1b");
  assert_int_equal(trl_escape_text("x", small, 0), 0);
  assert_int_equal(trl_escape_text(NULL, small, sizeof small), 0);
  assert_string_equal(small, "");
}

/* The code points above U+009F the escaper must escape, and no other:
 * Unicode's Bidi_Control set (PropList.txt: the marks and embeddings that
 * reorder text invisibly) and the line and paragraph separators. Keep it
 * in step with safe_sequence() in src/core/error.c. */
static const struct {
  unsigned lo, hi;
  const char *what;
} escaped_marks[] = {
    {0x061C, 0x061C, "ARABIC LETTER MARK"},
    {0x200E, 0x200F, "LEFT-TO-RIGHT and RIGHT-TO-LEFT MARK"},
    {0x2028, 0x2029, "LINE and PARAGRAPH SEPARATOR"},
    {0x202A, 0x202E, "LRE, RLE, PDF, LRO, RLO"},
    {0x2066, 0x2069, "LRI, RLI, FSI, PDI"},
};

static size_t utf8_encode(unsigned cp, char *out) {
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* Every code point from U+00A0 to U+10FFFF (surrogates aside) is kept as
 * it is, except those of escaped_marks, which become \xHH per byte. */
static void test_escaped_marks_table(void **state) {
  (void)state;
  size_t count = 0;
  for (unsigned cp = 0xa0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff)
      continue;
    char in[8] = {0}, out[32];
    size_t len = utf8_encode(cp, in);
    int want = 0;
    for (size_t i = 0; i < sizeof escaped_marks / sizeof *escaped_marks; i++)
      want |= cp >= escaped_marks[i].lo && cp <= escaped_marks[i].hi;
    trl_escape_text(in, out, sizeof out);
    if (want) {
      char expect[32];
      for (size_t i = 0; i < len; i++)
        snprintf(expect + 4 * i, 5, "\\x%02x", (unsigned char)in[i]);
      if (strcmp(out, expect) != 0)
        fail_msg("U+%04X: escaped as \"%s\", expected \"%s\"", cp, out, expect);
      count++;
    } else if (strcmp(out, in) != 0) {
      fail_msg("U+%04X: escaped as \"%s\", expected it kept", cp, out);
    }
  }
  assert_int_equal(count, 14); /* the 12 Bidi_Control marks + 2 separators */
}

/* A layer whose name holds ESC, a newline, RLO and a C1 CSI (all legal in
 * a JSON string), and whose suh holds a NaN: opening it fails with a
 * message that names the tensor, escaped. */
static void test_names_from_files(void **state) {
  (void)state;
  const char *prefix_json = "model.\\u001b[2Jevil\\nline\\u202e\\u009b.proj";
  const char *prefix_shown =
      "model.\\x1b[2Jevil\\x0aline\\xe2\\x80\\xae\\xc2\\x9b.proj";
  const int64_t k = 128, n = 128;
  static uint16_t suh[128], svh[128];
  for (int i = 0; i < 128; i++)
    suh[i] = svh[i] = 0x3C00;
  suh[5] = 0x7E00; /* NaN */
  char names[3][128];
  snprintf(names[0], sizeof names[0], "%s.suh", prefix_json);
  snprintf(names[1], sizeof names[1], "%s.svh", prefix_json);
  snprintf(names[2], sizeof names[2], "%s.trellis", prefix_json);
  tu_st_tensor t[3] = {
      {names[0], "F16", 1, {k}, suh, sizeof suh},
      {names[1], "F16", 1, {n}, svh, sizeof svh},
      {names[2],
       "I16",
       3,
       {k / 16, n / 16, 32},
       NULL,
       (size_t)(k / 16 * n / 16 * 32 * 2)},
  };
  size_t size;
  uint8_t *buf = tu_st_build(t, 3, &size);
  char *path = tu_tmp_path("evil\x1b]0;title\x07.safetensors");
  tu_write_file(path, buf, size);
  free(buf);

  trellis_model *m;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_ERR_FORMAT);
  const char *msg = trellis_last_error();
  assert_printable(msg);
  tu_assert_error_has(prefix_shown);
  tu_assert_error_has("evil\\x1b]0;title\\x07.safetensors");
  tu_assert_error_has("element 5 is NaN");

  /* A name looked up by the caller is escaped too (not found). */
  trellis_file *f;
  tu_assert_status(trellis_file_open(path, &f), TRELLIS_OK);
  trellis_tensor tensor;
  tu_assert_status(trellis_file_find(f, "no\x1b[31mpe\n", &tensor),
                   TRELLIS_ERR_NOT_FOUND);
  assert_printable(trellis_last_error());
  tu_assert_error_has("no\\x1b[31mpe\\x0a");
  trellis_file_close(f);

  /* A path that is not UTF-8. */
  char *bad = tu_tmp_path("missing-\xff\xfe.safetensors");
  tu_assert_status(trellis_model_open(bad, &m), TRELLIS_ERR_NOT_FOUND);
  assert_printable(trellis_last_error());
  tu_assert_error_has("missing-\\xff\\xfe.safetensors");
  free(bad);
  free(path);
}

/* A prefix added to an escaped message escapes the prefix alone. */
static void test_prefix_keeps_escapes(void **state) {
  (void)state;
  trl_fail(TRELLIS_ERR_FORMAT, "inner '%s'",
           "a\x1b"
           "b");
  trl_fail_prefix(TRELLIS_ERR_FORMAT, "outer '%s'", "c\nd");
  assert_string_equal(trellis_last_error(), "outer 'c\\x0ad': inner 'a\\x1bb'");
  trellis_clear_error();
}

/* One wording for missing CUDA: the library's status text and messages,
 * and the CLI's (tools/cli.h) agree; Python's (_core.NO_CUDA_BUILD) are
 * held to them by python/tests/test_numpy.py. */
static void test_no_cuda_wording(void **state) {
  (void)state;
  assert_string_equal(CLI_NO_CUDA_BUILD, TRL_NO_CUDA_BUILD);
  assert_string_equal(CLI_NO_CUDA_DEVICE, TRL_NO_CUDA_DEVICE);
  assert_non_null(
      strstr(trellis_status_string(TRELLIS_ERR_NO_DEVICE), TRL_NO_CUDA_DEVICE));
  trellis_plan *plan = (trellis_plan *)1;
  trellis_plan_desc desc;
  trellis_plan_desc_init(&desc);
  trellis_clear_error();
  const trellis_status st = trellis_plan_create(NULL, &desc, &plan);
  if (trellis_cuda_built())
    return; /* a NULL weight fails before the device check there */
  tu_assert_status(st, TRELLIS_ERR_NO_DEVICE);
  assert_null(plan);
  tu_assert_error_has(TRL_NO_CUDA_BUILD);
  trellis_clear_error();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_text),
      cmocka_unit_test(test_escaped_marks_table),
      cmocka_unit_test(test_names_from_files),
      cmocka_unit_test(test_prefix_keeps_escapes),
      cmocka_unit_test(test_no_cuda_wording),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
