/* Small POSIX file helpers shared by the readers in src/io. */
#ifndef TRELLIS_IO_POSIX_FILE_H
#define TRELLIS_IO_POSIX_FILE_H

#include "core/internal.h"

#include <stddef.h>
#include <stdint.h>

/* TRELLIS_ERR_NOT_FOUND for ENOENT, else TRELLIS_ERR_IO, with the message
 * "PATH: WHAT: strerror(e)". */
trellis_status trellis_errno_fail(const char *path, const char *what, int e);

/* Reads a whole regular file of at most `limit` bytes into a malloc'd
 * buffer (one spare byte past the end, for a terminator). A larger file is
 * TRELLIS_ERR_FORMAT. */
trellis_status trellis_read_file(const char *path, size_t limit, uint8_t **buf,
                                 size_t *len);

#endif
