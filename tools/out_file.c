/* SPDX-License-Identifier: Apache-2.0 */
/* Output files that never lose what their path held (see out_file.h). */
#define _XOPEN_SOURCE 700 /* realpath */
#include "tools/out_file.h"
#include "io/posix_file.h"

#include "core/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The directory part of `path` ("." when there is none); malloc'd. */
static char *dir_part(const char *path) {
  const char *slash = strrchr(path, '/');
  size_t len = !slash ? 1 : slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(len + 1);
  if (d) {
    memcpy(d, slash ? path : ".", len);
    d[len] = '\0';
  }
  return d;
}

trellis_status out_file_check(const char *path, struct stat *sb, int *exists) {
  *exists = 0;
  if (!path || !path[0])
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "output path is empty");
  if (stat(path, sb) == 0) {
    if (!S_ISREG(sb->st_mode))
      return trl_fail(TRELLIS_ERR_IO,
                      "%s: is %s; an output must be a regular file or a new "
                      "name (it is never written through or removed)",
                      path, trl_file_kind(sb->st_mode));
    *exists = 1;
    return TRELLIS_OK;
  }
  int e = errno;
  struct stat lsb;
  if (e != ENOENT || lstat(path, &lsb) == 0) /* a dangling link says so */
    return trl_stat_path(path, "cannot write", sb);
  char *dir = dir_part(path);
  if (!dir)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  struct stat dsb;
  trellis_status st = TRELLIS_OK;
  if (stat(dir, &dsb) != 0)
    st = trl_errno_fail(path, "cannot create", errno);
  else if (!S_ISDIR(dsb.st_mode))
    st = trl_fail(TRELLIS_ERR_IO, "%s: cannot create: '%s' is %s", path, dir,
                  trl_file_kind(dsb.st_mode));
  free(dir);
  return st;
}

static int write_all(int fd, const void *buf, size_t len);

trellis_status out_file_write_fd(int fd, const char *label, const void *head,
                                 size_t hsize, const void *data, size_t bytes) {
  if (!write_all(fd, head, hsize) || (bytes > 0 && !write_all(fd, data, bytes)))
    return trl_errno_fail(label, "cannot write", errno);
  return TRELLIS_OK;
}

static int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len < ((size_t)1 << 30) ? len : (size_t)1 << 30);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      if (n == 0)
        errno = EIO;
      return 0;
    }
    p += n;
    len -= (size_t)n;
  }
  return 1;
}

/* Creates a new temporary file beside `target` (O_EXCL: never an existing
 * file); *tmp gets its malloc'd name. */
static int create_temp(const char *dir, const char *target, mode_t mode,
                       char **tmp) {
  static atomic_uint counter;
  const char *base = strrchr(target, '/');
  base = base ? base + 1 : target;
  int blen = (int)(strlen(base) < 200 ? strlen(base) : 200); /* NAME_MAX */
  size_t cap = strlen(dir) + (size_t)blen + 64;
  char *name = malloc(cap);
  if (!name) {
    errno = ENOMEM;
    return -1;
  }
  for (int attempt = 0; attempt < 100; attempt++) {
    snprintf(name, cap, "%s/.%.*s.%ld.%u.tmp", dir, blen, base, (long)getpid(),
             atomic_fetch_add(&counter, 1u));
    int fd =
        open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd >= 0) {
      *tmp = name;
      return fd;
    }
    if (errno != EEXIST)
      break;
  }
  int e = errno;
  free(name);
  errno = e;
  return -1;
}

static const char *error_text(int e, char *buf, size_t size) {
  if (strerror_r(e, buf, size) != 0)
    snprintf(buf, size, "error %d", e);
  return buf;
}

/* The temporary file is written, flushed and renamed over `target`, so a
 * failure anywhere leaves `target` as it was; the directory is flushed
 * after the rename where the file system allows it. */
static trellis_status write_replace(const char *path, const char *target,
                                    int exists, mode_t mode, const void *head,
                                    size_t hsize, const void *data,
                                    size_t bytes) {
  const char *kept =
      exists ? " (the existing file is unchanged)" : " (nothing was written)";
  char *dir = dir_part(target), *tmp = NULL, reason[128];
  if (!dir)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
  int fd = create_temp(dir, target, exists ? 0600 : 0666, &tmp);
  if (fd < 0) {
    int e = errno;
    trellis_status st =
        trl_fail(e == ENOENT ? TRELLIS_ERR_NOT_FOUND : TRELLIS_ERR_IO,
                 "%s: cannot create a temporary file in '%s': %s%s", path, dir,
                 error_text(e, reason, sizeof reason), kept);
    free(dir);
    return st;
  }
  const char *what = NULL;
  if (exists && fchmod(fd, mode) != 0)
    what = "cannot set the mode";
  else if (!write_all(fd, head, hsize) ||
           (bytes > 0 && !write_all(fd, data, bytes)))
    what = "write failed";
  else if (fsync(fd) != 0)
    what = "fsync failed";
  int e = errno;
  if (close(fd) != 0 && !what) {
    what = "close failed";
    e = errno;
  }
  if (!what && rename(tmp, target) != 0) {
    what = "rename failed";
    e = errno;
  }
  trellis_status st = TRELLIS_OK;
  if (what) {
    unlink(tmp); /* ours: created above with O_EXCL */
    st = trl_fail(TRELLIS_ERR_IO, "%s: %s: %s%s", path, what,
                  error_text(e, reason, sizeof reason), kept);
  } else {
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)fsync(dfd); /* not every file system flushes directories */
      close(dfd);
    }
  }
  free(tmp);
  free(dir);
  return st;
}

trellis_status out_file_write(const char *path, const void *head, size_t hsize,
                              const void *data, size_t bytes) {
  struct stat sb;
  int exists = 0;
  trellis_status st = out_file_check(path, &sb, &exists);
  if (st != TRELLIS_OK)
    return st;
  /* An existing file is replaced where it lives: through a symbolic link,
   * the link stays and its target is replaced. */
  char *target = exists ? realpath(path, NULL) : NULL;
  if (exists && !target)
    return trl_errno_fail(path, "cannot resolve", errno);
  st = write_replace(path, target ? target : path, exists,
                     exists ? sb.st_mode & 0777 : 0666, head, hsize, data,
                     bytes);
  free(target);
  return st;
}
