/* SPDX-License-Identifier: Apache-2.0 */
/* Hostile files and file systems: FIFOs and other non-regular files,
 * dangling and looping symbolic links, foreign files given as shards,
 * headers beyond the limits, and files truncated while open. */
#include "testutil.h"

#include "io/model.h"
#include "io/posix_file.h"
#include "io/safetensors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static const char *const shard1 = "model-00001-of-00002.safetensors";
static const char *const shard2 = "model-00002-of-00002.safetensors";
static const char *const index_name = "model.safetensors.index.json";
/* A layer of the toy model whose tensors all live in shard 2. */
static const char *const shard2_layer = "model.layers.1.mlp.up_proj";

static void expect_model(const char *path, trellis_status want,
                         const char *needle) {
  trellis_model *m = (trellis_model *)1;
  tu_assert_status(trellis_model_open(path, &m), want);
  if (want != TRELLIS_OK) {
    assert_null(m);
    tu_assert_error_has(needle);
  }
  trellis_model_close(m);
}

/* ------------------------------------------------------------ FIFOs -- */

/* Every file the loader opens may be a FIFO: none may block in open()
 * (the alarm ends the test if one does). */
static void test_fifo_never_blocks(void **state) {
  (void)state;
  alarm(60);
  char *fifo = tu_tmp_path("fifo.safetensors");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const char *what = "is a FIFO (named pipe), not a regular file";
  expect_model(fifo, TRELLIS_ERR_IO, "is a FIFO (named pipe)");
  tu_assert_error_has(fifo);
  trellis_file *f = (trellis_file *)1;
  tu_assert_status(trellis_file_open(fifo, &f), TRELLIS_ERR_IO);
  assert_null(f);
  tu_assert_error_has(what);
  /* The whole-file reader (config.json, the index, .npy inputs). */
  uint8_t *buf = (uint8_t *)1;
  size_t len = 1;
  tu_assert_status(trl_read_file(fifo, 1024, &buf, &len), TRELLIS_ERR_IO);
  assert_null(buf);
  tu_assert_error_has(what);
  free(fifo);

  /* An index path given directly. */
  char *dir = tu_copy_toy();
  char *index = tu_join(dir, index_name);
  tu_replace_entry(dir, index_name, 1, NULL);
  expect_model(index, TRELLIS_ERR_IO, "index.json: is a FIFO (named pipe)");
  /* ... and found in the directory. */
  expect_model(dir, TRELLIS_ERR_IO, what);
  tu_assert_error_has(index_name);
  free(index);
  free(dir);

  dir = tu_copy_toy();
  tu_replace_entry(dir, shard2, 1, NULL);
  expect_model(dir, TRELLIS_ERR_IO, what);
  tu_assert_error_has("shard 'model-00002-of-00002.safetensors'");
  free(dir);

  dir = tu_copy_toy();
  tu_replace_entry(dir, "config.json", 1, NULL);
  expect_model(dir, TRELLIS_ERR_IO, what);
  tu_assert_error_has("config.json");
  free(dir);

  dir = tu_copy_toy();
  char *single = tu_join(dir, "model.safetensors");
  assert_int_equal(mkfifo(single, 0600), 0);
  expect_model(dir, TRELLIS_ERR_IO, what);
  tu_assert_error_has(single);
  free(single);
  free(dir);
  alarm(0);
}

static void test_other_kinds(void **state) {
  (void)state;
  alarm(60);
  expect_model("/dev/null", TRELLIS_ERR_IO, "/dev/null: is a character device");
  trellis_file *f;
  tu_assert_status(trellis_file_open("/dev/zero", &f), TRELLIS_ERR_IO);
  tu_assert_error_has("/dev/zero: is a character device, not a regular file");
  tu_assert_status(trellis_file_open(tu_tmpdir(), &f), TRELLIS_ERR_IO);
  tu_assert_error_has("is a directory, not a regular file");

  /* A socket is rejected before any open(). */
  char *sock = tu_tmp_path("sock.safetensors");
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  assert_true(s >= 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  assert_true(strlen(sock) < sizeof a.sun_path);
  strcpy(a.sun_path, sock);
  assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
  tu_assert_status(trellis_file_open(sock, &f), TRELLIS_ERR_IO);
  tu_assert_error_has("is a socket, not a regular file");
  expect_model(sock, TRELLIS_ERR_IO, "is a socket");
  close(s);
  free(sock);

  /* A directory's config.json that is itself a directory. */
  char *dir = tu_copy_toy();
  char *config = tu_join(dir, "config.json");
  unlink(config);
  assert_int_equal(mkdir(config, 0700), 0);
  expect_model(dir, TRELLIS_ERR_IO, "config.json: is a directory");
  free(config);
  free(dir);
  alarm(0);
}

/* -------------------------------------------------- symbolic links -- */

static void test_symlinks(void **state) {
  (void)state;
  /* A dangling shard link says so (not "No such file"). */
  char *dir = tu_copy_toy();
  tu_replace_entry(dir, shard2, 0, "../blobs/missing-blob");
  expect_model(dir, TRELLIS_ERR_NOT_FOUND,
               "is a symbolic link to '../blobs/missing-blob', which does not "
               "exist (dangling link)");
  tu_assert_error_has("shard 'model-00002-of-00002.safetensors'");

  /* A link loop. */
  tu_replace_entry(dir, shard2, 0, shard2);
  expect_model(dir, TRELLIS_ERR_IO, "symbolic link loop");

  /* A dangling model.safetensors is reported, not "neither ... found". */
  char *index = tu_join(dir, index_name);
  unlink(index);
  tu_replace_entry(dir, "model.safetensors", 0, "nowhere.safetensors");
  expect_model(dir, TRELLIS_ERR_NOT_FOUND, "dangling link");
  assert_null(strstr(trellis_last_error(), "neither"));
  /* So is a looping one, and a dangling index. */
  tu_replace_entry(dir, "model.safetensors", 0, "model.safetensors");
  expect_model(dir, TRELLIS_ERR_IO, "symbolic link loop");
  assert_null(strstr(trellis_last_error(), "neither"));
  char *single = tu_join(dir, "model.safetensors");
  unlink(single);
  free(single);
  tu_replace_entry(dir, index_name, 0, "gone.json");
  expect_model(dir, TRELLIS_ERR_NOT_FOUND, "dangling link");
  assert_null(strstr(trellis_last_error(), "neither"));
  /* The model path itself. */
  char *link = tu_tmp_path("dangling-model");
  assert_int_equal(symlink("no-such-model", link), 0);
  expect_model(link, TRELLIS_ERR_NOT_FOUND, "dangling link");
  free(link);
  free(index);
  free(dir);

  /* A dangling config.json is an error, not a silently absent config. */
  dir = tu_copy_toy();
  tu_replace_entry(dir, "config.json", 0, "missing-config.json");
  expect_model(dir, TRELLIS_ERR_NOT_FOUND, "config.json: is a symbolic link");
  free(dir);

  /* Shard links may leave the directory (the Hugging Face cache links
   * snapshots into blobs/): allowed. */
  dir = tu_copy_toy();
  char *blobs = tu_tmp_path("blobs");
  mkdir(blobs, 0700);
  char *blob = tu_join(blobs, "shard2-blob");
  char *path = tu_join(dir, shard2);
  assert_int_equal(rename(path, blob), 0);
  tu_replace_entry(dir, shard2, 0, blob);
  expect_model(dir, TRELLIS_OK, NULL);
  free(path);
  free(blob);
  free(blobs);
  free(dir);
}

/* ---------------------------------------------------- foreign files -- */

/* A text file given as a shard: the message must not show its first 8
 * bytes (as a number or otherwise). */
static void test_foreign_shard(void **state) {
  (void)state;
  const char *text = "root:x:0:0:root:/root:/bin/bash\n"
                     "daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n";
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = v << 8 | (uint8_t)text[i];
  char echoed[32], hex[32];
  snprintf(echoed, sizeof echoed, "%llu", (unsigned long long)v);
  snprintf(hex, sizeof hex, "%llx", (unsigned long long)v);
  char *dir = tu_copy_toy();
  char *path = tu_join(dir, shard2);
  tu_write_file(path, text, strlen(text));
  expect_model(dir, TRELLIS_ERR_FORMAT, "not a safetensors file");
  tu_assert_error_has("shard 'model-00002-of-00002.safetensors'");
  char size_note[64];
  snprintf(size_note, sizeof size_note, "(the file is %zu bytes)",
           strlen(text));
  tu_assert_error_has(size_note);
  assert_null(strstr(trellis_last_error(), echoed));
  assert_null(strstr(trellis_last_error(), hex));
  assert_null(strstr(trellis_last_error(), "root"));
  free(path);
  free(dir);

  /* The same text as the index or config.json: the JSON error names the
   * position, not the token found there. */
  const char *texts[] = {index_name, "config.json"};
  for (size_t i = 0; i < 2; i++) {
    dir = tu_copy_toy();
    path = tu_join(dir, texts[i]);
    tu_write_file(path, text, strlen(text));
    expect_model(dir, TRELLIS_ERR_FORMAT,
                 "invalid JSON at line 1, column 4: '[' or '{' expected");
    assert_null(strstr(trellis_last_error(), "root"));
    free(path);
    free(dir);
  }
}

/* ----------------------------------------------------------- limits -- */

static void expect_header(const char *header, trellis_status want,
                          const char *needle) {
  size_t size;
  uint8_t *buf = tu_st_raw(header, NULL, 0, &size);
  trellis_file *f = (trellis_file *)1;
  tu_assert_status(trellis_file_open_memory(buf, size, &f), want);
  if (want == TRELLIS_OK) {
    trellis_file_close(f);
  } else {
    assert_null(f);
    tu_assert_error_has(needle);
  }
  free(buf);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void test_header_limits(void **state) {
  (void)state;
  /* The audit's header: ~1.8M tensors in ~100 MB, rejected before it is
   * parsed (a parse took 12 s and 2.2 GB). */
  size_t len;
  char *h = tu_many_tensors_header(1700000, &len);
  assert_true(len < 100000000);
  double t0 = seconds();
  expect_header(h, TRELLIS_ERR_FORMAT,
                "JSON objects, more than the limit of 262144 tensors per "
                "file");
  double took = seconds() - t0;
  print_message("1.7M-tensor header rejected in %.3f s\n", took);
  free(h);
  /* Just past the limit, and at it (both a few MB). */
  h = tu_many_tensors_header(262145, &len);
  expect_header(h, TRELLIS_ERR_FORMAT, "more than the limit of 262144");
  free(h);
  h = tu_many_tensors_header(262144, &len);
  expect_header(h, TRELLIS_OK, NULL);
  free(h);

  /* Nesting. */
  char deep[256];
  size_t used = (size_t)snprintf(deep, sizeof deep, "{\"__metadata__\":");
  for (int i = 0; i < 40; i++)
    deep[used++] = '[';
  for (int i = 0; i < 40; i++)
    deep[used++] = ']';
  deep[used++] = '}';
  deep[used] = '\0';
  expect_header(deep, TRELLIS_ERR_FORMAT, "nests 41 levels deep (limit 32");

  /* JSON values: one shape of 5M dimensions. */
  size_t n = 5000000, cap = 2 * n + 128;
  h = malloc(cap);
  assert_non_null(h);
  used = (size_t)snprintf(h, cap, "{\"a\":{\"dtype\":\"U8\",\"shape\":[");
  for (size_t i = 0; i < n; i++) {
    h[used++] = i ? ',' : '0';
    if (i)
      h[used++] = '0';
  }
  used += (size_t)snprintf(h + used, cap - used, "],\"data_offsets\":[0,0]}}");
  expect_header(h, TRELLIS_ERR_FORMAT,
                "JSON values, more than the limit of 4194304");
  free(h);

  /* Name length. */
  char name[1100];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  char *big = malloc(2048);
  assert_non_null(big);
  snprintf(big, 2048,
           "{\"%s\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
           name);
  expect_header(big, TRELLIS_ERR_FORMAT,
                "a tensor name of 1099 bytes exceeds the limit of 1024 bytes");
  name[1024] = '\0';
  snprintf(big, 2048,
           "{\"%s\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}",
           name);
  expect_header(big, TRELLIS_OK, NULL);
  free(big);
}

static void test_text_limits(void **state) {
  (void)state;
  /* A 65 MiB config.json (sparse) is refused by its size, unread. */
  char *dir = tu_copy_toy();
  char *config = tu_join(dir, "config.json");
  FILE *fp = fopen(config, "r+b");
  assert_non_null(fp);
  assert_int_equal(ftruncate(fileno(fp), (off_t)65 << 20), 0);
  fclose(fp);
  expect_model(dir, TRELLIS_ERR_FORMAT, "is too large (limit 67108864)");
  free(config);
  free(dir);

  /* Index: 2M+ JSON values, nesting, a long name. */
  size_t count = 1100000, cap = count * 24 + 64, used = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  used += (size_t)snprintf(text, cap, "{\"weight_map\":{");
  for (size_t i = 0; i < count; i++)
    used += (size_t)snprintf(text + used, cap - used, "%s\"t%zu\":\"s\"",
                             i ? "," : "", i);
  used += (size_t)snprintf(text + used, cap - used, "}}");
  trl_index idx;
  tu_assert_status(trl_index_parse(text, used, "idx", &idx),
                   TRELLIS_ERR_FORMAT);
  tu_assert_error_has("JSON values, more than the limit of 2097152");
  free(text);

  char deep[128];
  used = (size_t)snprintf(deep, sizeof deep, "{\"metadata\":");
  for (int i = 0; i < 33; i++)
    deep[used++] = '[';
  for (int i = 0; i < 33; i++)
    deep[used++] = ']';
  deep[used++] = '}';
  tu_assert_status(trl_index_parse(deep, used, "idx", &idx),
                   TRELLIS_ERR_FORMAT);
  tu_assert_error_has("idx: JSON nests 34 levels deep (limit 32)");
  trellis_quant_config qc;
  tu_assert_status(trl_quant_config_parse(deep, used, "cfg", &qc),
                   TRELLIS_ERR_FORMAT);
  tu_assert_error_has("cfg: JSON nests 34 levels deep");

  char name[1100];
  memset(name, 'n', sizeof name - 1);
  name[sizeof name - 1] = '\0';
  char body[1200];
  used = (size_t)snprintf(body, sizeof body, "{\"weight_map\":{\"%s\":\"s\"}}",
                          name);
  tu_assert_status(trl_index_parse(body, used, "idx", &idx),
                   TRELLIS_ERR_FORMAT);
  tu_assert_error_has("a weight_map name of 1099 bytes exceeds the limit");
}

/* -------------------------------------------- truncated while open -- */

static void truncate_file(const char *path, off_t size) {
  FILE *fp = fopen(path, "r+b");
  assert_non_null(fp);
  assert_int_equal(ftruncate(fileno(fp), size), 0);
  fclose(fp);
}

/* A shard truncated after open: handing out its layers or tensors is
 * TRELLIS_ERR_IO, never a pointer whose use would raise SIGBUS. Layers of
 * the other shard stay usable. */
static void test_truncated_after_open(void **state) {
  (void)state;
  char *dir = tu_copy_toy();
  char *path = tu_join(dir, shard2);
  trellis_model *m;
  tu_assert_status(trellis_model_open(dir, &m), TRELLIS_OK);
  truncate_file(path, 4096);

  trellis_layer L;
  tu_assert_status(trellis_model_find_layer(m, shard2_layer, &L),
                   TRELLIS_ERR_IO);
  tu_assert_error_has("the file is now 4096 bytes, 306500 when it was "
                      "opened (truncated while open?)");
  tu_assert_error_has(shard2_layer);
  tu_assert_error_has(shard2);
  size_t count = trellis_model_layer_count(m), failed = 0;
  for (size_t i = 0; i < count; i++) {
    trellis_status st = trellis_model_layer(m, i, &L);
    if (st == TRELLIS_OK) {
      uint16_t *w_hat = malloc((size_t)L.weight.k * (size_t)L.weight.n * 2);
      assert_non_null(w_hat);
      tu_assert_status(trellis_decode_weight(&L.weight, w_hat), TRELLIS_OK);
      free(w_hat);
    } else {
      tu_assert_status(st, TRELLIS_ERR_IO);
      failed++;
    }
    /* Listing still works: it reads no data. */
    trellis_layer_info info;
    tu_assert_status(trellis_model_layer_info(m, i, &info), TRELLIS_OK);
  }
  assert_int_equal(failed, 7); /* layer 1's seven projections */
  trellis_tensor t;
  tu_assert_status(
      trellis_model_find_tensor(m, "model.layers.1.input_layernorm.weight", &t),
      TRELLIS_ERR_IO);
  tu_assert_status(
      trellis_model_find_tensor(m, "model.layers.0.input_layernorm.weight", &t),
      TRELLIS_OK);
  trellis_model_close(m);

  /* The same for a lone file. */
  trellis_file *f;
  char *one = tu_join(dir, shard1);
  tu_assert_status(trellis_file_open(one, &f), TRELLIS_OK);
  truncate_file(one, 100);
  tu_assert_status(trellis_file_tensor(f, 0, &t), TRELLIS_ERR_IO);
  tu_assert_status(trellis_file_find(f, "model.layers.0.mlp.up_proj.suh", &t),
                   TRELLIS_ERR_IO);
  tu_assert_error_has("truncated while open");
  trellis_file_close(f);
  /* Opening a truncated file: an error from the header read, not SIGBUS. */
  tu_assert_status(trellis_file_open(one, &f), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("runs past the end of the file");
  free(one);
  free(path);
  free(dir);
}

/* ---------------------------------------- memory across many shards -- */

/* Only the __metadata__ keys the library reads are kept: a shard with
 * 200,000 entries (all inside the per-file limits) kept every one of them
 * for the model's life, so memory grew with the shard count. */
static void test_metadata_keeps_what_is_read(void **state) {
  (void)state;
  const size_t entries = 200000;
  size_t cap = entries * 24 + 256, used = 0;
  char *h = malloc(cap);
  assert_non_null(h);
  used += (size_t)snprintf(h, cap, "{\"__metadata__\":{");
  for (size_t i = 0; i < entries; i++)
    used +=
        (size_t)snprintf(h + used, cap - used, "\"junk%zu\":\"v%zu\",", i, i);
  used += (size_t)snprintf(h + used, cap - used,
                           "\"codebook\":\"mcg\",\"bits\":\"3\","
                           "\"format\":\"b12x-trellis\"}}");
  size_t size;
  uint8_t *buf = tu_st_raw(h, NULL, 0, &size);
  trellis_file *f = NULL;
  tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_OK);
  assert_int_equal(f->meta.count, 2);
  assert_string_equal(trl_st_meta_get(&f->meta, "codebook"), "mcg");
  assert_string_equal(trl_st_meta_get(&f->meta, "bits"), "3");
  assert_null(trl_st_meta_get(&f->meta, "format"));
  assert_null(trl_st_meta_get(&f->meta, "junk7"));
  trellis_file_close(f);
  free(buf);
  free(h);
  /* A NUL inside a value would cut it short: the header is refused. */
  const char *nul = "{\"__metadata__\":{\"codebook\":\"mcg\\u0000x\"}}";
  buf = tu_st_raw(nul, NULL, 0, &size);
  tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("\\u0000 is not allowed");
  free(buf);
  /* So is one inside a tensor name (it would end the C string there). */
  const char *nul_name = "{\"a\\u0000b\":{\"dtype\":\"U8\",\"shape\":[0],"
                         "\"data_offsets\":[0,0]}}";
  buf = tu_st_raw(nul_name, NULL, 0, &size);
  tu_assert_status(trellis_file_open_memory(buf, size, &f), TRELLIS_ERR_FORMAT);
  tu_assert_error_has("NUL byte in object key not supported");
  free(buf);
}

/* A whole model's headers are bounded, not only each file's: the limits
 * (lowered here through the test hook) name themselves. */
static void test_model_header_budget(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  trellis_model_close(m);
  trl_model_set_limits(4000, 0);
  expect_model(TU_TOY_MODEL, TRELLIS_ERR_FORMAT,
               "more than the limit of 4000 bytes of safetensors headers for "
               "a whole model");
  tu_assert_error_has("shard 'model-0000");
  trl_model_set_limits(0, 20);
  expect_model(TU_TOY_MODEL, TRELLIS_ERR_FORMAT,
               "more than the limit of 20 tensors for a whole model");
  trl_model_set_limits(0, 0); /* the defaults */
  assert_int_equal(trl_model_limits().header_bytes, TRL_MODEL_MAX_HEADER_BYTES);
  assert_int_equal(trl_model_limits().tensors, TRL_MODEL_MAX_TENSORS);
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  trellis_model_close(m);
}

/* ------------------------------------------------ many shards, few fds -- */

/* A model of `shards` shards under tu_tmpdir()/name, shard i holding one
 * F16 tensor "t.<i>" of 4 elements of value i; its malloc'd directory. */
static char *write_many_shards(const char *name, int shards) {
  char *dir = tu_tmp_path(name);
  assert_int_equal(mkdir(dir, 0700), 0);
  size_t cap = (size_t)shards * 64 + 64, used = 0;
  char *index = malloc(cap);
  assert_non_null(index);
  used += (size_t)snprintf(index, cap, "{\"weight_map\":{");
  for (int i = 0; i < shards; i++) {
    char tname[32], fname[64];
    snprintf(tname, sizeof tname, "t.%d", i);
    snprintf(fname, sizeof fname, "s%05d.safetensors", i);
    uint16_t v[4];
    for (int j = 0; j < 4; j++)
      v[j] = (uint16_t)i;
    tu_st_tensor t = {tname, "F16", 1, {4}, v, sizeof v};
    size_t size;
    uint8_t *buf = tu_st_build(&t, 1, &size);
    char *path = tu_join(dir, fname);
    tu_write_file(path, buf, size);
    free(path);
    free(buf);
    used += (size_t)snprintf(index + used, cap - used, "%s\"%s\":\"%s\"",
                             i ? "," : "", tname, fname);
  }
  used += (size_t)snprintf(index + used, cap - used, "}}");
  char *ipath = tu_join(dir, index_name);
  tu_write_file(ipath, index, used);
  free(ipath);
  free(index);
  return dir;
}

/* A model holds no descriptor per shard: 300 shards open under a limit of
 * 64 open files (a 2000-shard model could not be opened under the usual
 * 1024), and every tensor stays readable and checked for truncation. */
static void test_many_shards_few_fds(void **state) {
  (void)state;
  const int shards = 300;
  char *dir = write_many_shards("many-shards", shards);
  struct rlimit old, low;
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  low = old;
  low.rlim_cur = 64;
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  trellis_model *m = NULL;
  trellis_status st = trellis_model_open(dir, &m);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  tu_assert_status(st, TRELLIS_OK);
  for (int i = 0; i < shards; i += 37) {
    char tname[32];
    snprintf(tname, sizeof tname, "t.%d", i);
    trellis_tensor t;
    tu_assert_status(trellis_model_find_tensor(m, tname, &t), TRELLIS_OK);
    uint16_t v;
    memcpy(&v, t.data, 2);
    assert_int_equal(v, i);
  }
  /* Truncation is still noticed, by the path. */
  char *path = tu_join(dir, "s00007.safetensors");
  truncate_file(path, 16);
  trellis_tensor t;
  tu_assert_status(trellis_model_find_tensor(m, "t.7", &t), TRELLIS_ERR_IO);
  tu_assert_error_has("truncated while open");
  tu_assert_status(trellis_model_find_tensor(m, "t.8", &t), TRELLIS_OK);
  trellis_model_close(m);
  free(path);

  /* Out of descriptors: the message names the limit. */
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  int fds[64], nfd = 0;
  while (nfd < 64 && (fds[nfd] = open("/dev/null", O_RDONLY)) >= 0)
    nfd++;
  st = trellis_model_open(dir, &m);
  for (int i = 0; i < nfd; i++)
    close(fds[i]);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  tu_assert_status(st, TRELLIS_ERR_IO);
  tu_assert_error_has("the process's limit of 64 open files (RLIMIT_NOFILE) "
                      "is reached");
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fifo_never_blocks),
      cmocka_unit_test(test_other_kinds),
      cmocka_unit_test(test_symlinks),
      cmocka_unit_test(test_foreign_shard),
      cmocka_unit_test(test_header_limits),
      cmocka_unit_test(test_text_limits),
      cmocka_unit_test(test_truncated_after_open),
      cmocka_unit_test(test_many_shards_few_fds),
      cmocka_unit_test(test_metadata_keeps_what_is_read),
      cmocka_unit_test(test_model_header_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
