/* SPDX-License-Identifier: Apache-2.0 */
/* The `trellis` tool given hostile files and file systems (fork/exec of
 * TRELLIS_CLI_PATH with a watchdog, files in a temporary directory). Each
 * command must end on its own (no hang), exit 1 with one printable line on
 * stderr that says what is wrong, and lose nothing:
 *   - FIFOs as the model, config.json or --input do not block;
 *   - an output is replaced only by a complete file: a write that fails
 *     part-way (a file-size limit) keeps the previous file and leaves
 *     nothing behind; an output that is the model file, a shard, the
 *     index, config.json or --input (also through a link) is refused, so
 *     are /dev/null, a FIFO and a directory, all left as they were;
 *   - listing a misaligned 256 MiB layer copies nothing;
 *   - NaN scales are refused, naming the tensor and the element;
 *   - names with ESC, newlines and other controls, in `info` output and in
 *     error lines, are escaped;
 *   - dangling and foreign shards are reported without echoing content;
 *   - an oversized header is refused quickly; --threads (forward, demo)
 *     reports the threads that run.
 * A file truncated while the tool has it open is covered at the library
 * level (test_hostile_files): the tool cannot be raced deterministically. */
#include "testutil.h"

#include "tools/npy.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WATCHDOG_S 60 /* a command still running after this is a hang */

static const char *const tv_stem = "k1_mcg_256x128"; /* k = 256, n = 128 */
static const char *const tv_layer = "model.layers.0.mlp.proj";
static const char *const toy_layer = "model.layers.0.mlp.up_proj";

/* ------------------------------------------------------------ running -- */

/* Runs the tool with `args` (NULL-terminated, without argv[0]); with
 * `fsize` > 0 under that file-size limit (RLIMIT_FSIZE, bytes). A command
 * that has not ended after WATCHDOG_S is killed and fails the test. */
static tu_run_result run(const char *const *args, uint64_t fsize) {
  const tu_run_opts o = {.fsize = fsize, .watchdog_s = WATCHDOG_S};
  return tu_run_tool(TRELLIS_CLI_PATH, args, &o);
}

/* No byte that could drive a terminal (text is escaped UTF-8 lines). */
static void assert_printable(const char *what, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++)
    if ((*p < 0x20 && *p != '\n') || *p == 0x7f ||
        (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
      fail_msg("%s: byte 0x%02x at %zu is not printable:\n%s", what, *p,
               (size_t)(p - (const unsigned char *)text), text);
}

/* Exit 1 (not a crash, not success), exactly one printable line on
 * stderr, containing `needle`. */
static void expect_error(tu_run_result *r, const char *needle) {
  size_t lines = 0;
  for (const char *p = r->err; *p; p++)
    lines += *p == '\n';
  if (r->code != 1 || lines != 1 || !strstr(r->err, needle))
    fail_msg("expected exit 1 and one stderr line with \"%s\"; got exit %d, "
             "%zu lines:\n%s",
             needle, r->code, lines, r->err);
  assert_printable("stderr", r->err);
}

static void expect_ok(tu_run_result *r) {
  if (r->code != 0)
    fail_msg("expected success; exit %d:\n%s", r->code, r->err);
  assert_printable("stdout", r->out);
  assert_printable("stderr", r->err);
}

/* ------------------------------------------------------------- files -- */

/* A new directory in tu_tmpdir(); malloc'd. */
static char *new_dir(const char *name) {
  char *dir = tu_tmp_path(name);
  assert_int_equal(mkdir(dir, 0700), 0);
  return dir;
}

/* Copies a file; returns its contents (malloc'd) for a later compare. */
static uint8_t *copy_file(const char *src, const char *dst, size_t *size) {
  uint8_t *buf = tu_read_file(src, size);
  tu_write_file(dst, buf, *size);
  return buf;
}

/* Asserts that `path` holds exactly `size` bytes of `want`. */
static void assert_unchanged(const char *path, const uint8_t *want,
                             size_t size) {
  size_t got_size;
  uint8_t *got = tu_read_file(path, &got_size);
  if (got_size != size || memcmp(got, want, size) != 0)
    fail_msg("%s was changed (%zu bytes, %zu before)", path, got_size, size);
  free(got);
}

/* Entries of `dir` other than "." and "..". */
static int entries(const char *dir) {
  int n = 0;
  DIR *d = opendir(dir);
  assert_non_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* An X of zeros, fp16 [1, k]. */
static void write_x(const char *path, int64_t k) {
  uint16_t *x = calloc((size_t)k, 2);
  assert_non_null(x);
  const int64_t shape[2] = {1, k};
  tu_assert_status(npy_write(path, TRELLIS_F16, 2, shape, x), TRELLIS_OK);
  free(x);
}

/* A 128 x 128 K2 layer named by `prefix_json` (JSON string content, so it
 * may spell control characters as \uXXXX); with `nan_at` >= 0 its suh holds
 * a NaN there. */
static void write_layer(const char *path, const char *prefix_json, int nan_at) {
  static uint16_t suh[128], svh[128];
  for (int i = 0; i < 128; i++)
    suh[i] = svh[i] = 0x3C00;
  if (nan_at >= 0)
    suh[nan_at] = 0x7E00;
  char names[3][160];
  snprintf(names[0], sizeof names[0], "%s.suh", prefix_json);
  snprintf(names[1], sizeof names[1], "%s.svh", prefix_json);
  snprintf(names[2], sizeof names[2], "%s.trellis", prefix_json);
  tu_st_tensor t[3] = {
      {names[0], "F16", 1, {128}, suh, sizeof suh},
      {names[1], "F16", 1, {128}, svh, sizeof svh},
      {names[2], "I16", 3, {8, 8, 32}, NULL, 8 * 8 * 32 * 2},
  };
  size_t size;
  uint8_t *buf = tu_st_build(t, 3, &size);
  tu_write_file(path, buf, size);
  free(buf);
}

static char *tv_file(void) {
  char stem[64];
  snprintf(stem, sizeof stem, "%s.safetensors", tv_stem);
  return tu_tv_path(stem);
}

/* ------------------------------------------------------------ FIFOs -- */

static void test_fifos_do_not_block(void **state) {
  (void)state;
  char *fifo = tu_tmp_path("fifo.safetensors");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const char *info[] = {"info", fifo, NULL};
  tu_run_result r = run(info, 0);
  expect_error(&r, "is a FIFO (named pipe)");
  tu_run_free(&r);

  char *dir = tu_copy_toy();
  tu_replace_entry(dir, "config.json", 1, NULL);
  const char *info_dir[] = {"info", dir, NULL};
  r = run(info_dir, 0);
  expect_error(&r, "config.json: is a FIFO");
  tu_run_free(&r);

  char *model = tv_file();
  char *xfifo = tu_tmp_path("x-fifo.npy");
  char *y = tu_tmp_path("y-fifo.npy");
  assert_int_equal(mkfifo(xfifo, 0600), 0);
  const char *fwd[] = {"forward", model, tv_layer,   "--device", "cpu",
                       "--input", xfifo, "--output", y,          NULL};
  r = run(fwd, 0);
  expect_error(&r, "x-fifo.npy: is a FIFO");
  tu_run_free(&r);
  free(y);
  free(xfifo);
  free(model);
  free(dir);
  free(fifo);
}

/* ----------------------------------------------------------- outputs -- */

/* A decode whose write fails part-way (file-size limit) keeps the old
 * file and leaves no temporary; a new output is not created. */
static void test_failed_write_keeps_file(void **state) {
  (void)state;
  char *dir = new_dir("out");
  char *model = tu_join(dir, "m.safetensors");
  char *src = tv_file();
  size_t msize;
  uint8_t *mbytes = copy_file(src, model, &msize);
  char *w = tu_join(dir, "w.npy");
  tu_write_file(w, "precious", 8);
  assert_int_equal(chmod(w, 0640), 0);

  /* W_hat is 256 x 128 fp16 = 64 KiB: the limit stops it after 8 KiB */
  const char *args[] = {"decode", model, tv_layer, "--output", w, NULL};
  tu_run_result r = run(args, 8192);
  expect_error(&r, "w.npy: write failed: File too large (the existing file "
                   "is unchanged)");
  tu_run_free(&r);
  assert_unchanged(w, (const uint8_t *)"precious", 8);
  assert_int_equal(entries(dir), 2); /* m.safetensors, w.npy */

  char *fresh = tu_join(dir, "fresh.npy");
  const char *args2[] = {"decode", model, tv_layer, "--output", fresh, NULL};
  r = run(args2, 8192);
  expect_error(&r, "(nothing was written)");
  tu_run_free(&r);
  assert_int_equal(entries(dir), 2);

  /* Without the limit: replaced whole, the mode kept. */
  r = run(args, 0);
  expect_ok(&r);
  tu_run_free(&r);
  npy_array a;
  tu_assert_status(npy_read(w, &a), TRELLIS_OK);
  assert_int_equal(a.nbytes, 256 * 128 * 2);
  npy_free(&a);
  struct stat sb;
  assert_int_equal(stat(w, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0640);
  assert_int_equal(entries(dir), 2);
  assert_unchanged(model, mbytes, msize);
  free(fresh);
  free(w);
  free(src);
  free(mbytes);
  free(model);
  free(dir);
}

/* Outputs that are the command's inputs, by any spelling: refused, and
 * every input stays as it was. */
static void test_output_is_an_input(void **state) {
  (void)state;
  char *dir = new_dir("inputs");
  char *model = tu_join(dir, "m.safetensors");
  char *src = tv_file();
  size_t msize;
  uint8_t *mbytes = copy_file(src, model, &msize);
  char *sym = tu_join(dir, "link.npy");
  assert_int_equal(symlink("m.safetensors", sym), 0);
  char *hard = tu_join(dir, "hard.npy");
  assert_int_equal(link(model, hard), 0);

  const char *self[] = {"decode", model, tv_layer, "--output", model, NULL};
  tu_run_result r = run(self, 0);
  expect_error(&r, "m.safetensors: is an input of this command");
  tu_run_free(&r);
  const char *via_link[] = {"decode", model, tv_layer, "--output", sym, NULL};
  r = run(via_link, 0);
  expect_error(&r, "link.npy: is the same file as");
  tu_run_free(&r);
  const char *via_hard[] = {"decode", model, tv_layer, "--output", hard, NULL};
  r = run(via_hard, 0);
  expect_error(&r, "an input of this command");
  tu_run_free(&r);
  assert_unchanged(model, mbytes, msize);

  /* forward: --input as --output */
  char *x = tu_join(dir, "x.npy");
  write_x(x, 256);
  size_t xsize;
  uint8_t *xbytes = tu_read_file(x, &xsize);
  const char *fwd[] = {"forward", model, tv_layer,   "--device", "cpu",
                       "--input", x,     "--output", x,          NULL};
  r = run(fwd, 0);
  expect_error(&r, "x.npy: is an input of this command");
  tu_run_free(&r);
  assert_unchanged(x, xbytes, xsize);

  /* a model directory: a shard, the index, config.json */
  char *toy = tu_copy_toy();
  const char *files[] = {"model-00002-of-00002.safetensors",
                         "model.safetensors.index.json", "config.json"};
  for (size_t i = 0; i < 3; i++) {
    char *path = tu_join(toy, files[i]);
    size_t size;
    uint8_t *before = tu_read_file(path, &size);
    const char *args[] = {"decode", toy, toy_layer, "--output", path, NULL};
    r = run(args, 0);
    expect_error(&r, ": is an input of this command");
    if (!strstr(r.err, files[i]))
      fail_msg("the refusal does not name %s: %s", files[i], r.err);
    tu_run_free(&r);
    assert_unchanged(path, before, size);
    free(before);
    free(path);
  }
  free(toy);
  free(xbytes);
  free(x);
  free(hard);
  free(sym);
  free(mbytes);
  free(src);
  free(model);
  free(dir);
}

/* Not regular files: refused with what they are, left alone, no hang. */
static void test_output_not_a_file(void **state) {
  (void)state;
  char *model = tv_file();
  char *fifo = tu_tmp_path("out-fifo.npy");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  char *dir = new_dir("out-dir");
  const char *outs[] = {"/dev/null", fifo, dir};
  const char *what[] = {"/dev/null: is a character device",
                        "out-fifo.npy: is a FIFO", "out-dir: is a directory"};
  for (size_t i = 0; i < 3; i++) {
    const char *args[] = {"decode", model, tv_layer, "--output", outs[i], NULL};
    tu_run_result r = run(args, 0);
    expect_error(&r, what[i]);
    tu_run_free(&r);
  }
  struct stat sb;
  assert_int_equal(stat("/dev/null", &sb), 0);
  assert_true(S_ISCHR(sb.st_mode));
  assert_int_equal(lstat(fifo, &sb), 0);
  assert_true(S_ISFIFO(sb.st_mode));
  assert_int_equal(entries(dir), 0);
  free(dir);
  free(fifo);
  free(model);
}

/* ------------------------------------------------------------ layers -- */

/* Listing a misaligned 256 MiB layer reads its header, not its payload. */
static void test_info_misaligned_copies_nothing(void **state) {
  (void)state;
  char *path = tu_tmp_path("huge-odd.safetensors");
  tu_write_odd_sparse_layer(path, "model.layers.3.mlp.up_proj", 16384, 16384);
  /* the tool's own footprint (a CUDA build loads cuBLASLt: ~200 MiB) */
  const char *version[] = {"--version", NULL};
  tu_run_result base = run(version, 0);
  expect_ok(&base);
  const char *args[] = {"info", path, NULL};
  tu_run_result r = run(args, 0);
  expect_ok(&r);
  assert_non_null(strstr(r.out, "model.layers.3.mlp.up_proj"));
  assert_non_null(strstr(r.out, "1 EXL3 layer,"));
  print_message("trellis info of a misaligned 256 MiB layer: %.2f s, peak "
                "RSS %ld KiB (--version: %ld KiB)\n",
                r.secs, r.maxrss_kb, base.maxrss_kb);
  if (r.maxrss_kb > base.maxrss_kb + 64 * 1024)
    fail_msg("info used %ld KiB more than --version: it copied the layer",
             r.maxrss_kb - base.maxrss_kb);
  tu_run_free(&base);
  tu_run_free(&r);
  free(path);
}

static void test_nonfinite_scales(void **state) {
  (void)state;
  char *dir = new_dir("nan");
  char *model = tu_join(dir, "nan.safetensors");
  write_layer(model, "model.layers.0.mlp.proj", 5);
  char *x = tu_join(dir, "x.npy"), *y = tu_join(dir, "y.npy");
  write_x(x, 128);
  const char *fwd[] = {"forward", model, tv_layer,   "--device", "cpu",
                       "--input", x,     "--output", y,          NULL};
  tu_run_result r = run(fwd, 0);
  expect_error(&r, "tensor 'model.layers.0.mlp.proj.suh' element 5 is NaN");
  tu_run_free(&r);
  const char *dec[] = {"decode", model, tv_layer, "--output", y, NULL};
  r = run(dec, 0);
  expect_error(&r, "element 5 is NaN");
  tu_run_free(&r);
  assert_int_equal(entries(dir), 2); /* no y.npy */
  free(x);
  free(y);
  free(model);
  free(dir);
}

/* ------------------------------------------------------------- names -- */

static const char *const evil_json = "model.\\u001b[2J\\u001b]0;owned\\u0007"
                                     "evil\\nline\\r\\u202e\\u009b.proj";
static const char *const evil_shown = "model.\\x1b[2J\\x1b]0;owned\\x07"
                                      "evil\\x0aline\\x0d\\xe2\\x80\\xae"
                                      "\\xc2\\x9b.proj";

static void test_names_escaped(void **state) {
  (void)state;
  /* info: the row shows the name escaped and the table keeps its lines */
  char *dir = new_dir("names");
  char *good = tu_join(dir, "model.safetensors");
  write_layer(good, evil_json, -1);
  const char *config = "{\"quantization_config\": {\"quant_method\": "
                       "\"exl3\\u001b[31m\", \"codebook\": \"mcg\\n\"}}";
  char *config_path = tu_join(dir, "config.json");
  tu_write_file(config_path, config, strlen(config));
  const char *info[] = {"info", dir, NULL};
  tu_run_result r = run(info, 0);
  expect_ok(&r);
  if (!strstr(r.out, evil_shown))
    fail_msg("info does not show the name escaped:\n%s", r.out);
  assert_non_null(strstr(r.out, "quant_method exl3\\x1b[31m"));
  assert_non_null(strstr(r.out, "codebook mcg\\x0a"));
  size_t lines = 0;
  for (const char *p = r.out; *p; p++)
    lines += *p == '\n';
  /* path, config, blank, header, one row, blank, totals */
  assert_int_equal(lines, 7);
  tu_run_free(&r);

  /* error lines: a NaN in the evil layer, named escaped */
  char *bad = tu_join(dir, "bad\x1b[1m.safetensors");
  write_layer(bad, evil_json, 3);
  char *y = tu_tmp_path("names-y.npy");
  const char *dec[] = {"decode", bad, "x", "--output", y, NULL};
  r = run(dec, 0);
  expect_error(&r, evil_shown);
  assert_non_null(strstr(r.err, "bad\\x1b[1m.safetensors"));
  tu_run_free(&r);

  /* a layer name from the command line */
  const char *missing[] = {"decode",   good, "no\x1b[31mpe\nlayer",
                           "--output", y,    NULL};
  r = run(missing, 0);
  expect_error(&r, "no EXL3 layer named 'no\\x1b[31mpe\\x0alayer'");
  tu_run_free(&r);
  free(y);
  free(bad);
  free(config_path);
  free(good);
  free(dir);
}

/* ------------------------------------------------------------ shards -- */

static void test_dangling_and_foreign_shards(void **state) {
  (void)state;
  char *dir = tu_copy_toy();
  tu_replace_entry(dir, "model-00002-of-00002.safetensors", 0,
                   "../blobs/missing");
  const char *info[] = {"info", dir, NULL};
  tu_run_result r = run(info, 0);
  expect_error(&r, "which does not exist (dangling link)");
  tu_run_free(&r);
  free(dir);

  dir = tu_copy_toy();
  char *shard = tu_join(dir, "model-00002-of-00002.safetensors");
  const char *text = "root:x:0:0:root:/root:/bin/bash\n";
  tu_write_file(shard, text, strlen(text));
  const char *info2[] = {"info", dir, NULL};
  r = run(info2, 0);
  expect_error(&r, "not a safetensors file");
  assert_null(strstr(r.err, "root"));
  tu_run_free(&r);
  free(shard);
  free(dir);
}

/* ------------------------------------------------------------ limits -- */

static void test_limits(void **state) {
  (void)state;
  size_t len;
  char *h = tu_many_tensors_header(262145, &len);
  size_t size;
  uint8_t *buf = tu_st_raw(h, NULL, 0, &size);
  char *path = tu_tmp_path("many.safetensors");
  tu_write_file(path, buf, size);
  const char *info[] = {"info", path, NULL};
  tu_run_result r = run(info, 0);
  expect_error(&r, "more than the limit of 262144 tensors per file");
  print_message("a header of 262145 tensors (%zu bytes) refused in %.2f s\n",
                len, r.secs);
  tu_run_free(&r);
  free(path);
  free(buf);
  free(h);

  /* --threads: the count that runs (n = 128: 8 tiles of 16 columns) */
  char *model = tv_file();
  char *x = tu_tmp_path("threads-x.npy"), *y = tu_tmp_path("threads-y.npy");
  write_x(x, 256);
  const char *fwd[] = {"forward", model,       tv_layer, "--device",
                       "cpu",     "--input",   x,        "--output",
                       y,         "--threads", "4096",   NULL};
  r = run(fwd, 0);
  expect_ok(&r);
  if (!strstr(r.err, "device: cpu (8 threads; --threads 4096 asked: at most "
                     "256 run, one per 16 columns of n = 128)") ||
      strstr(r.err, "4096 threads"))
    fail_msg("forward does not say how many threads ran: %s", r.err);
  tu_run_free(&r);
  const char *three[] = {"forward", model,       tv_layer, "--device",
                         "cpu",     "--input",   x,        "--output",
                         y,         "--threads", "3",      NULL};
  r = run(three, 0);
  expect_ok(&r);
  assert_non_null(strstr(r.err, "device: cpu (3 threads), path: cpu"));
  tu_run_free(&r);
  /* demo: a 4096-column layer runs at most 256 */
  const char *demo[] = {"demo", "--device",  "cpu",  "--reps",
                        "1",    "--threads", "4096", NULL};
  r = run(demo, 0);
  expect_ok(&r);
  if (!strstr(r.out, "device: cpu (256 threads; --threads 4096 asked"))
    fail_msg("demo does not say how many threads ran:\n%s", r.out);
  tu_run_free(&r);
  free(x);
  free(y);
  free(model);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fifos_do_not_block),
      cmocka_unit_test(test_failed_write_keeps_file),
      cmocka_unit_test(test_output_is_an_input),
      cmocka_unit_test(test_output_not_a_file),
      cmocka_unit_test(test_info_misaligned_copies_nothing),
      cmocka_unit_test(test_nonfinite_scales),
      cmocka_unit_test(test_names_escaped),
      cmocka_unit_test(test_dangling_and_foreign_shards),
      cmocka_unit_test(test_limits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
