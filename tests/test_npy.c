/* SPDX-License-Identifier: Apache-2.0 */
/* .npy reader/writer: round trips and malformed files. */
#include "testutil.h"

#include "tools/npy.h"
#include "tools/synth.h"

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* An .npy image from a raw header dict and `data_size` bytes of data. */
static uint8_t *make_npy(int major, const char *dict, const void *data,
                         size_t data_size, size_t *size) {
  size_t dlen = strlen(dict), pre = major == 1 ? 10 : 12;
  uint8_t *buf = calloc(pre + dlen + data_size + 1, 1);
  assert_non_null(buf);
  memcpy(buf, "\x93NUMPY", 6);
  buf[6] = (uint8_t)major;
  buf[7] = 0;
  for (size_t i = 0; i < pre - 8; i++)
    buf[8 + i] = (uint8_t)(dlen >> (8 * i));
  memcpy(buf + pre, dict, dlen);
  if (data && data_size)
    memcpy(buf + pre + dlen, data, data_size);
  *size = pre + dlen + data_size;
  return buf;
}

static void expect_parse(int major, const char *dict, size_t data_size,
                         trellis_status want, const char *needle) {
  size_t size;
  uint8_t *buf = make_npy(major, dict, NULL, data_size, &size);
  npy_array a;
  tu_assert_status(npy_parse(buf, size, &a), want);
  if (want != TRELLIS_OK) {
    assert_null(a.data);
    assert_int_equal(a.ndim, 0);
    if (needle)
      tu_assert_error_has(needle);
  }
  npy_free(&a);
  free(buf);
}

/* ---------------------------------------------------------- round trip -- */

static void roundtrip(trellis_dtype dt, int ndim, const int64_t *shape) {
  size_t count = 1;
  for (int i = 0; i < ndim; i++)
    count *= (size_t)shape[i];
  size_t bytes = count * trellis_dtype_size(dt);
  uint8_t *data = malloc(bytes + 1);
  assert_non_null(data);
  synth_rng rng;
  synth_seed(&rng, 42 + (uint64_t)ndim);
  synth_fill_uniform(&rng, data, dt, count, -2, 2);

  char *path = tu_tmp_path("rt.npy");
  tu_assert_status(npy_write(path, dt, ndim, shape, data), TRELLIS_OK);
  size_t size;
  uint8_t *file = tu_read_file(path, &size);
  /* numpy's layout: v1.0, header padded to 64 bytes, ending in '\n'. */
  assert_memory_equal(file, "\x93NUMPY\x01\x00", 8);
  size_t hlen = (size_t)file[8] | (size_t)file[9] << 8;
  assert_int_equal((10 + hlen) % 64, 0);
  assert_int_equal(file[10 + hlen - 1], '\n');
  assert_int_equal(size, 10 + hlen + bytes);
  char want[128];
  int n = snprintf(want, sizeof want,
                   "{'descr': '%s', 'fortran_order': "
                   "False, 'shape': (",
                   dt == TRELLIS_F16 ? "<f2" : "<f4");
  for (int i = 0; i < ndim; i++)
    n += snprintf(want + n, sizeof want - (size_t)n, "%s%lld", i ? ", " : "",
                  (long long)shape[i]);
  snprintf(want + n, sizeof want - (size_t)n, "%s), }", ndim == 1 ? "," : "");
  assert_memory_equal(file + 10, want, strlen(want));

  npy_array a;
  tu_assert_status(npy_read(path, &a), TRELLIS_OK);
  assert_int_equal(a.dtype, dt);
  assert_int_equal(a.ndim, ndim);
  for (int i = 0; i < ndim; i++)
    assert_int_equal(a.shape[i], shape[i]);
  assert_int_equal(a.nbytes, bytes);
  assert_int_equal(npy_count(&a), count);
  if (bytes)
    assert_memory_equal(a.data, data, bytes);
  npy_free(&a);
  assert_null(a.data);
  free(file);
  free(path);
  free(data);
}

static void test_roundtrip(void **state) {
  (void)state;
  const int64_t s1[] = {7}, s2[] = {3, 5}, s3[] = {2, 3, 4};
  const int64_t s0[] = {0, 4}, s8[] = {1, 2, 1, 2, 1, 2, 1, 3};
  const int64_t big[] = {17, 1000};
  for (int f16 = 0; f16 < 2; f16++) {
    trellis_dtype dt = f16 ? TRELLIS_F16 : TRELLIS_F32;
    roundtrip(dt, 1, s1);
    roundtrip(dt, 2, s2);
    roundtrip(dt, 3, s3);
    roundtrip(dt, 0, NULL);
    roundtrip(dt, 2, s0);
    roundtrip(dt, 8, s8);
    roundtrip(dt, 2, big);
  }
}

/* Headers numpy (or other writers) emit that must be accepted. */
static void test_header_variants(void **state) {
  (void)state;
  expect_parse(1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
               "      \n",
               24, TRELLIS_OK, NULL);
  expect_parse(1, "{'shape': (2,), 'descr': '<f2', 'fortran_order': False}", 4,
               TRELLIS_OK, NULL);
  expect_parse(1, "{\"descr\":\"<e\",\"fortran_order\":False,\"shape\":(2,)}",
               4, TRELLIS_OK, NULL);
  expect_parse(1, "{'descr': '<f', 'fortran_order': False, 'shape': (3L, 2L)}",
               24, TRELLIS_OK, NULL);
  expect_parse(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
               8, TRELLIS_OK, NULL);
  expect_parse(3, "{'descr': '<f2', 'fortran_order': False, 'shape': (), }", 2,
               TRELLIS_OK, NULL);
  /* Fortran order is the same layout for 0-d and 1-d arrays. */
  expect_parse(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", 8,
               TRELLIS_OK, NULL);
  expect_parse(1,
               "{'descr': '<f4', 'fortran_order': False, 'shape': ( 2 , 3 , "
               ") , }",
               24, TRELLIS_OK, NULL);
}

/* ------------------------------------------------------------ malformed -- */

static void test_bad_headers(void **state) {
  (void)state;
  static const struct {
    const char *dict;
    size_t data;
    trellis_status want;
    const char *needle;
  } bad[] = {
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16,
       TRELLIS_ERR_DTYPE, "descr '<f8' is not supported"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8,
       TRELLIS_ERR_DTYPE, "descr '>f4' is big-endian float32"},
      {"{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", 4,
       TRELLIS_ERR_DTYPE, "big-endian float16; only little-endian"},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 2,
       TRELLIS_ERR_DTYPE, "'|u1'"},
      {"{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", 4,
       TRELLIS_ERR_DTYPE, "'<i2'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8,
       TRELLIS_ERR_FORMAT, "descr is not a simple string"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
       TRELLIS_ERR_UNSUPPORTED, "fortran_order True"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }", 8,
       TRELLIS_ERR_FORMAT, "fortran_order is not True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12,
       TRELLIS_ERR_FORMAT, "needs a trailing comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 0,
       TRELLIS_ERR_FORMAT, "shape entry 0 is not a non-negative integer"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }", 8,
       TRELLIS_ERR_FORMAT, "shape entry 1"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24,
       TRELLIS_ERR_FORMAT, "missing a comma"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", 8,
       TRELLIS_ERR_FORMAT, NULL},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 8,
       TRELLIS_ERR_FORMAT, "shape is not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,", 8,
       TRELLIS_ERR_FORMAT, NULL},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(1,1,1,1,1,1,1,1,1), }",
       4, TRELLIS_ERR_SHAPE, "more than 8 dimensions"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(4611686018427387904, 4611686018427387904), }",
       0, TRELLIS_ERR_SHAPE, "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(4611686018427387904,), }",
       0, TRELLIS_ERR_SHAPE, "overflows"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999999999999,), }",
       0, TRELLIS_ERR_SHAPE,
       "shape entry 0 = 99999999999999999999 is larger than the largest "
       "size, 9223372036854775807"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(2, 9223372036854775808), }",
       0, TRELLIS_ERR_SHAPE, "shape entry 1 = 9223372036854775808 is larger"},
      {"{'descr': '<f4', 'shape': (2,), }", 8, TRELLIS_ERR_FORMAT,
       "missing key 'fortran_order'"},
      {"{'fortran_order': False, 'shape': (2,), }", 8, TRELLIS_ERR_FORMAT,
       "missing key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False}", 4, TRELLIS_ERR_FORMAT,
       "missing key 'shape'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': "
       "(1,)}",
       4, TRELLIS_ERR_FORMAT, "duplicate key 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
       TRELLIS_ERR_FORMAT, "unexpected key 'x'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", 4,
       TRELLIS_ERR_FORMAT, "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4,
       TRELLIS_ERR_FORMAT, "unexpected text after the dict"},
      {"['descr', '<f4']", 4, TRELLIS_ERR_FORMAT, "not a dict"},
      {"", 4, TRELLIS_ERR_FORMAT, "not a dict"},
      {"{'descr: '<f4'}", 4, TRELLIS_ERR_FORMAT, NULL},
      {"{'de\\scr': '<f4'}", 4, TRELLIS_ERR_FORMAT, NULL},
      {"{descr: '<f4'}", 4, TRELLIS_ERR_FORMAT, "expected 'key': value"},
      /* Data length must match the shape exactly. */
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23,
       TRELLIS_ERR_FORMAT,
       "data is 23 bytes but the shape needs 24 "
       "(truncated)"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 5,
       TRELLIS_ERR_FORMAT, "trailing bytes"},
      {"{'descr': '<f2', 'fortran_order': False, 'shape': (), }", 0,
       TRELLIS_ERR_FORMAT, "truncated"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    for (int major = 1; major <= 3; major++)
      expect_parse(major, bad[i].dict, bad[i].data, bad[i].want, bad[i].needle);
}

static void test_bad_preamble(void **state) {
  (void)state;
  const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}";
  size_t size;
  uint8_t *buf = make_npy(1, dict, NULL, 4, &size);
  npy_array a;
  /* Every truncation fails cleanly. */
  for (size_t cut = 0; cut < size; cut++) {
    trellis_status st = npy_parse(buf, cut, &a);
    assert_int_equal(st, TRELLIS_ERR_FORMAT);
    assert_null(a.data);
  }
  buf[0] = 'x';
  tu_assert_status(npy_parse(buf, size, &a), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("bad magic");
  buf[0] = 0x93;
  buf[6] = 4;
  tu_assert_status(npy_parse(buf, size, &a), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("version 4.0");
  buf[6] = 0;
  tu_assert_status(npy_parse(buf, size, &a), TRELLIS_ERR_FORMAT);
  buf[6] = 1;
  buf[8] = 0xff;
  buf[9] = 0xff;
  tu_assert_status(npy_parse(buf, size, &a), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("runs past the end");
  free(buf);
  buf = make_npy(2, dict, NULL, 4, &size);
  buf[11] = 0x80; /* 2 GB header */
  tu_assert_status(npy_parse(buf, size, &a), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("runs past the end");
  free(buf);
  tu_assert_status(npy_parse(NULL, 0, &a), TRELLIS_ERR_FORMAT);
  tu_assert_status(npy_parse(NULL, 4, &a), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(npy_parse("x", 1, NULL), TRELLIS_ERR_INVALID_ARGUMENT);
}

static void test_files(void **state) {
  (void)state;
  npy_array a;
  tu_assert_status(npy_read("/nonexistent/x.npy", &a), TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("/nonexistent/x.npy");
  tu_assert_status(npy_read(tu_tmpdir(), &a), TRELLIS_ERR_IO);
  tu_assert_status(npy_read(NULL, &a), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(npy_read("", &a), TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("path is empty: cannot open");

  /* Errors from a file name it. */
  char *path = tu_tmp_path("bad.npy");
  size_t size;
  uint8_t *buf =
      make_npy(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (1,)}",
               NULL, 8, &size);
  tu_write_file(path, buf, size);
  tu_assert_status(npy_read(path, &a), TRELLIS_ERR_DTYPE);
  tu_assert_error_has(path);
  tu_assert_error_has("'<f8'");
  free(buf);

  float v[2] = {1, 2};
  const int64_t shape[9] = {2, 1, 1, 1, 1, 1, 1, 1, 1};
  const int64_t neg[1] = {-2};
  tu_assert_status(npy_write(path, TRELLIS_BF16, 1, shape, v),
                   TRELLIS_ERR_DTYPE);
  tu_assert_status(npy_write(path, TRELLIS_F32, 9, shape, v),
                   TRELLIS_ERR_SHAPE);
  tu_assert_status(npy_write(path, TRELLIS_F32, -1, shape, v),
                   TRELLIS_ERR_SHAPE);
  tu_assert_status(npy_write(path, TRELLIS_F32, 1, neg, v), TRELLIS_ERR_SHAPE);
  tu_assert_status(npy_write(path, TRELLIS_F32, 1, shape, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(npy_write(path, TRELLIS_F32, 1, NULL, v), TRELLIS_ERR_SHAPE);
  tu_assert_status(npy_write(NULL, TRELLIS_F32, 1, shape, v),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(
      npy_write("/nonexistent/dir/x.npy", TRELLIS_F32, 1, shape, v),
      TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("/nonexistent/dir/x.npy");
  free(path);
  npy_free(NULL);
}

/* Entries of tu_tmpdir()/sub other than "." and "..". */
static int entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* npy_write in a child whose file-size limit is `limit` bytes, so the
 * write fails with EFBIG part-way; returns the child's status. */
static trellis_status write_limited(const char *path, rlim_t limit) {
  static float big[16384];
  const int64_t shape[1] = {16384};
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {limit, limit};
    signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
      _exit(100);
    _exit((int)npy_write(path, TRELLIS_F32, 1, shape, big));
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return (trellis_status)WEXITSTATUS(status);
}

/* A write replaces the file only when complete: a failure part-way
 * leaves the old file (or no file) and no temporary behind; the mode of
 * a replaced file is kept, a link stays a link; outputs that are not
 * regular files are refused, never written through or removed. */
static void test_write_replaces_atomically(void **state) {
  (void)state;
  char *dir = tu_tmp_path("atomic");
  assert_int_equal(mkdir(dir, 0700), 0);
  char *path = tu_join(dir, "y.npy");
  tu_write_file(path, "precious", 8);
  assert_int_equal(chmod(path, 0640), 0);

  tu_assert_status(write_limited(path, 4096), TRELLIS_ERR_IO);
  size_t size;
  uint8_t *kept = tu_read_file(path, &size);
  assert_int_equal(size, 8);
  assert_memory_equal(kept, "precious", 8);
  free(kept);
  assert_int_equal(entries(dir), 1); /* the temporary file is gone */
  char *fresh = tu_join(dir, "new.npy");
  tu_assert_status(write_limited(fresh, 4096), TRELLIS_ERR_IO);
  assert_int_equal(entries(dir), 1); /* nothing created */

  /* A complete write replaces it, with the old mode. */
  float v[3] = {1, 2, 3};
  const int64_t shape[1] = {3};
  tu_assert_status(npy_write(path, TRELLIS_F32, 1, shape, v), TRELLIS_OK);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0640);
  npy_array a;
  tu_assert_status(npy_read(path, &a), TRELLIS_OK);
  assert_int_equal(a.nbytes, sizeof v);
  npy_free(&a);

  /* Through a link: the link stays, its target is replaced. */
  char *link = tu_join(dir, "link.npy");
  assert_int_equal(symlink("y.npy", link), 0);
  v[0] = 7;
  tu_assert_status(npy_write(link, TRELLIS_F32, 1, shape, v), TRELLIS_OK);
  assert_int_equal(lstat(link, &sb), 0);
  assert_true(S_ISLNK(sb.st_mode));
  tu_assert_status(npy_read(path, &a), TRELLIS_OK);
  assert_true(((float *)a.data)[0] == 7.0f);
  npy_free(&a);
  assert_int_equal(entries(dir), 2);

  /* Not regular files: refused, left alone. */
  char *fifo = tu_join(dir, "fifo.npy");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  alarm(30); /* an open of the FIFO would block */
  tu_assert_status(npy_write(fifo, TRELLIS_F32, 1, shape, v), TRELLIS_ERR_IO);
  tu_assert_error_has("is a FIFO (named pipe); an output must be a regular");
  alarm(0);
  assert_int_equal(lstat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  tu_assert_status(npy_write("/dev/null", TRELLIS_F32, 1, shape, v),
                   TRELLIS_ERR_IO);
  tu_assert_error_has("/dev/null: is a character device");
  assert_int_equal(stat("/dev/null", &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  tu_assert_status(npy_write(dir, TRELLIS_F32, 1, shape, v), TRELLIS_ERR_IO);
  tu_assert_error_has("is a directory");
  char *dangling = tu_join(dir, "dangling.npy");
  assert_int_equal(symlink("missing.npy", dangling), 0);
  tu_assert_status(npy_write(dangling, TRELLIS_F32, 1, shape, v),
                   TRELLIS_ERR_NOT_FOUND);
  tu_assert_error_has("dangling link");
  assert_int_equal(lstat(dangling, &sb), 0);
  assert_int_equal(entries(dir), 4); /* y, link, fifo, dangling */

  free(dangling);
  free(fifo);
  free(link);
  free(fresh);
  free(path);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_replaces_atomically),
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_header_variants),
      cmocka_unit_test(test_bad_headers),
      cmocka_unit_test(test_bad_preamble),
      cmocka_unit_test(test_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
