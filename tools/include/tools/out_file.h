/* SPDX-License-Identifier: Apache-2.0 */
/* Output files written without ever losing what their path held: the bytes
 * go to a new temporary file beside the path (".NAME.PID.N.tmp", created
 * with O_EXCL, with the mode of the file it replaces, or 0666 less the
 * umask), which is flushed with fsync and renamed over the path, then the
 * directory is flushed. On any failure the temporary file is removed and
 * the path is untouched; nothing else is ever removed. A symbolic link
 * stays a link: its target is replaced (other hard links to it keep the old
 * contents). The directory must be writable. A process killed mid-write
 * leaves at most the temporary file. Used by npy_write and the benchmark's
 * report files. */
#ifndef TOOLS_OUT_FILE_H
#define TOOLS_OUT_FILE_H

#include "trellis.h"

#include <stddef.h>
#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether `path` may be written: an existing regular file (through links;
 * *exists = 1 and *sb is its stat) or a new name in an existing directory
 * (*exists = 0). Anything else (a directory, FIFO, socket or device such
 * as /dev/null, a dangling link, a missing directory) is TRELLIS_ERR_IO
 * (or NOT_FOUND) with a message that says what the path is. Nothing is
 * created. */
trellis_status out_file_check(const char *path, struct stat *sb, int *exists);
/* Replaces `path` (see the top) with `head` followed by `data` (either may
 * be empty); messages start with the path and say whether the existing
 * file is unchanged. */
trellis_status out_file_write(const char *path, const void *head, size_t hsize,
                              const void *data, size_t bytes);
/* Writes `head` then `data` to the open descriptor `fd` (a pipe, a
 * terminal, a file: whatever it is; `--output -` is stdout), retrying
 * short writes and EINTR; messages start with `label`. Nothing is
 * replaced atomically: a failure may leave part of the bytes written. */
trellis_status out_file_write_fd(int fd, const char *label, const void *head,
                                 size_t hsize, const void *data, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif
