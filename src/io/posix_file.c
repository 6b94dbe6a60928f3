/* SPDX-License-Identifier: Apache-2.0 */
#include "io/posix_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

trellis_status trl_errno_fail(const char *path, const char *what, int e) {
  char buf[128];
  if (strerror_r(e, buf, sizeof buf) != 0)
    buf[0] = '\0';
  return trl_fail(e == ENOENT ? TRELLIS_ERR_NOT_FOUND : TRELLIS_ERR_IO,
                  "%s: %s: %s", path, what, buf);
}

const char *trl_file_kind(mode_t mode) {
  if (S_ISREG(mode))
    return "a regular file";
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISLNK(mode))
    return "a symbolic link";
  return "an unknown kind of file";
}

/* stat() failed with `e`: say whether a symbolic link is the reason. */
static trellis_status stat_fail(const char *path, const char *what, int e) {
  struct stat lsb;
  if (e == ELOOP)
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: symbolic link loop (too many levels of symbolic "
                    "links)",
                    path);
  if (e == ENOENT && lstat(path, &lsb) == 0 && S_ISLNK(lsb.st_mode)) {
    char target[256];
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
      n = 0;
    target[n] = '\0';
    return trl_fail(TRELLIS_ERR_NOT_FOUND,
                    "%s: is a symbolic link to '%s', which does not exist "
                    "(dangling link)",
                    path, target);
  }
  return trl_errno_fail(path, what, e);
}

trellis_status trl_stat_path(const char *path, const char *what,
                             struct stat *sb) {
  if (!path[0]) /* stat("") fails with ENOENT: say what is wrong */
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "path is empty: %s", what);
  if (stat(path, sb) != 0)
    return stat_fail(path, what, errno);
  return TRELLIS_OK;
}

int trl_path_entry_exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* EMFILE: which limit was hit, and its value. */
static trellis_status no_descriptor(const char *path) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return trl_fail(TRELLIS_ERR_IO,
                    "%s: cannot open: the process's limit of open files "
                    "(RLIMIT_NOFILE) is reached",
                    path);
  return trl_fail(TRELLIS_ERR_IO,
                  "%s: cannot open: the process's limit of %llu open files "
                  "(RLIMIT_NOFILE) is reached (raise it with ulimit -n, or "
                  "close files)",
                  path, (unsigned long long)rl.rlim_cur);
}

static trellis_status not_regular(const char *path, mode_t mode) {
  return trl_fail(TRELLIS_ERR_IO, "%s: is %s, not a regular file", path,
                  trl_file_kind(mode));
}

trellis_status trl_open_regular(const char *path, int *fd, size_t *size) {
  *fd = -1;
  *size = 0;
  struct stat sb;
  trellis_status st = trl_stat_path(path, "cannot open", &sb);
  if (st != TRELLIS_OK)
    return st;
  if (!S_ISREG(sb.st_mode))
    return not_regular(path, sb.st_mode);
  int d = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (d < 0 && errno == EMFILE)
    return no_descriptor(path);
  if (d < 0)
    return stat_fail(path, "cannot open", errno);
  int flags = fcntl(d, F_GETFL);
  if (fstat(d, &sb) != 0)
    st = trl_errno_fail(path, "cannot stat", errno);
  else if (!S_ISREG(sb.st_mode))
    st = not_regular(path, sb.st_mode);
  else if ((uintmax_t)sb.st_size >= SIZE_MAX)
    st = trl_fail(TRELLIS_ERR_IO, "%s: file too large (%lld bytes)", path,
                  (long long)sb.st_size);
  else if (flags < 0 || fcntl(d, F_SETFL, flags & ~O_NONBLOCK) != 0)
    st = trl_errno_fail(path, "cannot clear O_NONBLOCK", errno);
  if (st != TRELLIS_OK) {
    close(d);
    return st;
  }
  *fd = d;
  *size = (size_t)sb.st_size;
  return TRELLIS_OK;
}

trellis_status trl_pread_exact(int fd, const char *path, uint64_t offset,
                               void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    if (offset + got > (uint64_t)INT64_MAX)
      return trl_fail(TRELLIS_ERR_IO, "%s: offset out of range", path);
    ssize_t r =
        pread(fd, (uint8_t *)buf + got, len - got, (off_t)(offset + got));
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return trl_errno_fail(path, "read failed", errno);
    if (r == 0)
      return trl_fail(TRELLIS_ERR_IO,
                      "%s: file shrank while being read (%llu of %zu "
                      "bytes at offset %llu; truncated or rewritten?)",
                      path, (unsigned long long)got, len,
                      (unsigned long long)offset);
    got += (size_t)r;
  }
  return TRELLIS_OK;
}

trellis_status trl_read_file(const char *path, size_t limit, uint8_t **buf,
                             size_t *len) {
  *buf = NULL;
  *len = 0;
  int fd;
  size_t size;
  trellis_status st = trl_open_regular(path, &fd, &size);
  if (st != TRELLIS_OK)
    return st;
  if (size > limit)
    st = trl_fail(TRELLIS_ERR_FORMAT, "%s: %zu bytes is too large (limit %zu)",
                  path, size, limit);
  uint8_t *p = st == TRELLIS_OK ? malloc(size + 1) : NULL;
  if (st == TRELLIS_OK && !p)
    st = trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  if (st == TRELLIS_OK)
    st = trl_pread_exact(fd, path, 0, p, size);
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
