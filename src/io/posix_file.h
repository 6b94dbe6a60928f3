/* SPDX-License-Identifier: Apache-2.0 */
/* Small POSIX file helpers shared by the readers in src/io (and the .npy
 * reader of the tools). Every file the library reads is opened through
 * trl_open_regular(), so no open can block on a FIFO or touch a
 * device. */
#ifndef TRL_IO_POSIX_FILE_H
#define TRL_IO_POSIX_FILE_H

#include "core/internal.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* TRELLIS_ERR_NOT_FOUND for ENOENT, else TRELLIS_ERR_IO, with the message
 * "PATH: WHAT: strerror(e)". */
trellis_status trl_errno_fail(const char *path, const char *what, int e);

/* What a file of this mode is, for messages: "a regular file", "a
 * directory", "a FIFO (named pipe)", "a socket", "a character device", "a
 * block device", "a symbolic link" or "an unknown kind of file". */
const char *trl_file_kind(mode_t mode);

/* stat() of `path`, with messages that say what is wrong: a dangling
 * symbolic link ("PATH: is a symbolic link to 'T', which does not exist",
 * TRELLIS_ERR_NOT_FOUND), a symbolic-link loop (TRELLIS_ERR_IO), or
 * "PATH: WHAT: strerror" (TRELLIS_ERR_NOT_FOUND for a missing entry). */
trellis_status trl_stat_path(const char *path, const char *what,
                             struct stat *sb);

/* 1 when `path` names a directory entry of any kind, including a dangling
 * symbolic link (lstat), so a broken entry is reported rather than taken
 * for an absent one. */
int trl_path_entry_exists(const char *path);

/* Opens a regular file for reading without ever blocking. The path is
 * stat()ed first, so a FIFO, socket, device or directory is rejected
 * without being opened (opening a device can have side effects); the open
 * itself uses O_NONBLOCK (cleared again) and O_NOCTTY in case the entry was
 * replaced in between, and the descriptor is checked once more. The message
 * says what the path is: "PATH: is a FIFO (named pipe), not a regular
 * file". `*size` gets the file size. Errors as trl_stat_path, plus
 * TRELLIS_ERR_IO for a file that is not regular or cannot be opened. */
trellis_status trl_open_regular(const char *path, int *fd, size_t *size);

/* Reads exactly `len` bytes at `offset`; a short read (the file shrank) is
 * TRELLIS_ERR_IO, as is a read error. */
trellis_status trl_pread_exact(int fd, const char *path, uint64_t offset,
                               void *buf, size_t len);

/* Reads a whole regular file of at most `limit` bytes into a malloc'd
 * buffer (one spare byte past the end, for a terminator). A larger file is
 * TRELLIS_ERR_FORMAT; a FIFO, device or directory is rejected as by
 * trl_open_regular(). */
trellis_status trl_read_file(const char *path, size_t limit, uint8_t **buf,
                             size_t *len);

#endif
