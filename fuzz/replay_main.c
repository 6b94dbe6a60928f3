/* Replays a corpus through LLVMFuzzerTestOneInput without libFuzzer (the
 * ctest `fuzz_replay` test). Arguments are files or directories, walked
 * recursively. Prints the number of inputs; exit 1 if a path is unreadable. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
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
  LLVMFuzzerTestOneInput(exact, len);
  free(exact);
  return 1;
}

/* Number of inputs replayed under `path`, or -1 on an unreadable path. */
static long replay(const char *path) {
  struct stat sb;
  if (stat(path, &sb) != 0)
    return -1;
  if (!S_ISDIR(sb.st_mode))
    return S_ISREG(sb.st_mode) ? replay_file(path) : 0;
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
    long got = replay(child);
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
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  long total = 0;
  for (int i = 1; i < argc; i++) {
    long got = replay(argv[i]);
    if (got < 0) {
      fprintf(stderr, "%s: cannot read\n", argv[i]);
      return 1;
    }
    total += got;
  }
  printf("replayed %ld inputs\n", total);
  return 0;
}
