#include "io/posix_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

trellis_status trellis_errno_fail(const char *path, const char *what, int e) {
  char buf[128];
  if (strerror_r(e, buf, sizeof buf) != 0)
    buf[0] = '\0';
  return trellis_fail(e == ENOENT ? TRELLIS_ERR_NOT_FOUND : TRELLIS_ERR_IO,
                      "%s: %s: %s", path, what, buf);
}

trellis_status trellis_read_file(const char *path, size_t limit, uint8_t **buf,
                                 size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return trellis_errno_fail(path, "cannot open", errno);
  struct stat sb;
  trellis_status st = TRELLIS_OK;
  if (fstat(fd, &sb) != 0)
    st = trellis_errno_fail(path, "cannot stat", errno);
  else if (!S_ISREG(sb.st_mode))
    st = trellis_fail(TRELLIS_ERR_IO, "%s: not a regular file", path);
  else if ((uintmax_t)sb.st_size > limit || (uintmax_t)sb.st_size >= SIZE_MAX)
    st = trellis_fail(TRELLIS_ERR_FORMAT, "%s: %lld bytes is too large", path,
                      (long long)sb.st_size);
  size_t size = st == TRELLIS_OK ? (size_t)sb.st_size : 0, got = 0;
  uint8_t *p = st == TRELLIS_OK ? malloc(size + 1) : NULL;
  if (st == TRELLIS_OK && !p)
    st = trellis_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  while (st == TRELLIS_OK && got < size) {
    ssize_t r = read(fd, p + got, size - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      st = r < 0 ? trellis_errno_fail(path, "read failed", errno)
                 : trellis_fail(TRELLIS_ERR_IO, "%s: file shrank while read",
                                path);
    else
      got += (size_t)r;
  }
  close(fd);
  if (st != TRELLIS_OK) {
    free(p);
    return st;
  }
  p[size] = 0;
  *buf = p;
  *len = size;
  return TRELLIS_OK;
}
