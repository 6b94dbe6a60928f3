/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer entry point over model directories: the input describes the
 * entries of a directory (regular files, symbolic links, FIFOs,
 * subdirectories), which are written into a private temporary directory
 * before trellis_model_open runs on it. Every layer the model then lists is
 * fetched and its data touched, every tensor looked up.
 *
 * Input: byte 0 picks what to open (0: the directory, 1: its index, 2:
 * model.safetensors, 3: a.safetensors); then records of
 *   u8 entry: bits 0-2 name (see `names`; bit 3 set: the ninth,
 *             ngram_embedding.safetensors), bits 4-5 kind (0 regular file,
 *             1 symbolic link, 2 FIFO, 3 directory)
 *   u16 length (little-endian), then `length` bytes: the file's content,
 *             or for a link, byte 0 picks its target (`names`, then
 *             "missing" (dangling) and "/dev/null")
 * A later record of the same name replaces the earlier one. */
#include "io/layers.h"
#include "io/model.h"
#include "io/safetensors.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NAMES 9
static const char *const names[NAMES] = {"config.json",
                                         "model.safetensors.index.json",
                                         "model.safetensors",
                                         "a.safetensors",
                                         "b.safetensors",
                                         "c.safetensors",
                                         "sub",
                                         "blob",
                                         "ngram_embedding.safetensors"};
static const char *const targets[10] = {"config.json",
                                        "model.safetensors.index.json",
                                        "model.safetensors",
                                        "a.safetensors",
                                        "b.safetensors",
                                        "c.safetensors",
                                        "sub",
                                        "blob",
                                        "missing",
                                        "/dev/null"};

static char dir[64];
static volatile uint8_t sink;

static void check(int ok) {
  if (!ok)
    abort();
}

static void touch(const void *p, size_t bytes) {
  if (!p || bytes == 0)
    return;
  sink ^= ((const uint8_t *)p)[0];
  sink ^= ((const uint8_t *)p)[bytes - 1];
}

static void remove_entry(int dfd, const char *name) {
  if (unlinkat(dfd, name, 0) != 0)
    unlinkat(dfd, name, AT_REMOVEDIR);
}

static void remove_dir(void) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    for (size_t i = 0; i < NAMES; i++)
      remove_entry(dfd, names[i]);
    close(dfd);
  }
  rmdir(dir);
}

static int make_dir(void) {
  if (dir[0])
    return 1;
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/trellis-fuzz-XXXXXX",
           tmp && strlen(tmp) < 32 ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    dir[0] = '\0';
    return 0;
  }
  atexit(remove_dir);
  return 1;
}

/* Writes one entry; failures (a name taken by a directory) are ignored. */
static void write_entry(int dfd, uint8_t entry, const uint8_t *p, size_t n) {
  const char *name = names[(entry & 8) ? 8 : entry & 7];
  remove_entry(dfd, name);
  switch ((entry >> 4) & 3) {
  case 0: {
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
      return;
    ssize_t w = n ? write(fd, p, n) : 0;
    (void)w;
    close(fd);
    break;
  }
  case 1:
    if (symlinkat(targets[n ? p[0] % 10 : 8], dfd, name) != 0)
      return;
    break;
  case 2:
    if (mkfifoat(dfd, name, 0600) != 0)
      return;
    break;
  default:
    if (mkdirat(dfd, name, 0700) != 0)
      return;
    break;
  }
}

static void exercise(const trellis_model *m) {
  const trellis_quant_config *qc = trellis_model_quant_config(m);
  check(qc && memchr(qc->quant_method, 0, sizeof qc->quant_method));
  size_t count = trellis_model_layer_count(m);
  for (size_t i = 0; i < count; i++) {
    trellis_layer_info info;
    trellis_layer L;
    check(trellis_model_layer_info(m, i, &info) == TRELLIS_OK);
    check(trellis_model_layer(m, i, &L) == TRELLIS_OK);
    check(info.name == L.name && info.k == L.weight.k && info.n == L.weight.n &&
          info.bits == L.weight.bits && info.half == L.weight.half);
    check(L.weight.half == 0 ||
          trellis_codebook_rate_valid(L.weight.codebook, L.weight.bits, 1));
    check(trellis_weight_check_values(&L.weight) == TRELLIS_OK);
    const trellis_weight *w = &L.weight;
    touch(w->trellis, trellis_weight_payload_bytes(w));
    touch(w->suh, (size_t)w->k * 2);
    touch(w->svh, (size_t)w->n * 2);
    touch(w->su, (size_t)w->k / 8);
    touch(w->sv, (size_t)w->n / 8);
    touch(w->bias, (size_t)w->n * 2);
    trellis_layer F;
    check(trellis_model_find_layer(m, L.name, &F) == TRELLIS_OK);
    check(memcmp(&F, &L, sizeof F) == 0);
  }
  for (size_t i = 0; i < trellis_model_other_count(m); i++) {
    trellis_tensor t, u;
    check(trellis_model_other(m, i, &t) == TRELLIS_OK);
    check(trellis_model_find_tensor(m, t.name, &u) == TRELLIS_OK);
    check(u.data == t.data && u.nbytes == t.nbytes);
    touch(t.data, t.nbytes);
    trellis_other_kind kind;
    check(trellis_model_other_kind(m, i, &kind) == TRELLIS_OK);
    check(kind == TRELLIS_OTHER_PLAIN || kind == TRELLIS_OTHER_FP16_LINEAR ||
          kind == TRELLIS_OTHER_EXL3_EMBEDDING);
  }
  const trellis_file *ng = trellis_model_ngram_file(m);
  for (size_t i = 0; ng && i < trellis_file_tensor_count(ng); i++) {
    trellis_tensor t;
    check(trellis_file_tensor(ng, i, &t) == TRELLIS_OK);
    touch(t.data, t.nbytes);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || !make_dir())
    return 0;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return 0;
  for (size_t i = 0; i < NAMES; i++)
    remove_entry(dfd, names[i]);
  size_t pos = 1;
  while (pos + 3 <= size) {
    uint8_t entry = data[pos];
    size_t len = (size_t)data[pos + 1] | (size_t)data[pos + 2] << 8;
    pos += 3;
    if (len > size - pos)
      len = size - pos;
    write_entry(dfd, entry, data + pos, len);
    pos += len;
  }
  close(dfd);

  static const char *const opened[4] = {NULL, "model.safetensors.index.json",
                                        "model.safetensors", "a.safetensors"};
  char path[128];
  const char *which = opened[data[0] & 3];
  if (which)
    snprintf(path, sizeof path, "%s/%s", dir, which);
  else
    snprintf(path, sizeof path, "%s", dir);
  trellis_model *m = NULL;
  if (trellis_model_open(path, &m) == TRELLIS_OK)
    exercise(m);
  else
    check(m == NULL && trellis_last_error()[0] != '\0');
  trellis_model_close(m);
  return 0;
}
