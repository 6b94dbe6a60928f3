/* SPDX-License-Identifier: Apache-2.0 */
/* Replays the fuzz corpora without libFuzzer (the ctest `fuzz_replay`
 * test). Every fuzz target is linked in with its entry point renamed to
 * fuzz_one_TARGET. Arguments are TARGET:PATH, PATH a file or a directory
 * walked recursively. Prints the number of inputs per target; exit 1 if a
 * path is unreadable, 2 for a bad argument. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*fuzz_fn)(const uint8_t *data, size_t size);

int fuzz_one_parsers(const uint8_t *data, size_t size);
int fuzz_one_model_dir(const uint8_t *data, size_t size);
int fuzz_one_forward(const uint8_t *data, size_t size);

static const struct {
  const char *name;
  fuzz_fn fn;
} targets[] = {{"parsers", fuzz_one_parsers},
               {"model_dir", fuzz_one_model_dir},
               {"forward", fuzz_one_forward}};

static int replay_file(fuzz_fn one, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap)
      break;
    uint8_t *grown = realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  int bad = ferror(f) || !buf;
  fclose(f);
  if (bad) {
    free(buf);
    return -1;
  }
  /* An exact-size copy, so ASan sees reads past the end of the input. */
  uint8_t *exact = malloc(len ? len : 1);
  if (!exact) {
    free(buf);
    return -1;
  }
  memcpy(exact, buf, len);
  free(buf);
  one(exact, len);
  free(exact);
  return 1;
}

/* Number of inputs replayed under `path`, or -1 on an unreadable path. */
static long replay(fuzz_fn one, const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return -1;
  if (!S_ISDIR(sb.st_mode))
    return S_ISREG(sb.st_mode) ? replay_file(one, path) : 0;
  DIR *d = opendir(path);
  if (!d)
    return -1;
  long count = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    size_t len = strlen(path) + strlen(e->d_name) + 2;
    char *child = malloc(len);
    if (!child) {
      count = -1;
      break;
    }
    snprintf(child, len, "%s/%s", path, e->d_name);
    long got = replay(one, child);
    free(child);
    if (got < 0) {
      count = -1;
      break;
    }
    count += got;
  }
  closedir(d);
  return count;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s TARGET:CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    const char *colon = strchr(argv[i], ':');
    fuzz_fn one = NULL;
    const char *name = "";
    for (size_t t = 0; colon && t < sizeof targets / sizeof *targets; t++) {
      if (strlen(targets[t].name) == (size_t)(colon - argv[i]) &&
          strncmp(argv[i], targets[t].name, (size_t)(colon - argv[i])) == 0) {
        one = targets[t].fn;
        name = targets[t].name;
      }
    }
    if (!one) {
      fprintf(stderr,
              "%s: expected TARGET:PATH, TARGET one of parsers, "
              "model_dir, forward\n",
              argv[i]);
      return 2;
    }
    long got = replay(one, colon + 1);
    if (got < 0) {
      fprintf(stderr, "%s: cannot read\n", colon + 1);
      return 1;
    }
    printf("%s: replayed %ld inputs\n", name, got);
  }
  return 0;
}
