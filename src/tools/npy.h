/* Minimal .npy reader/writer for the CLI and the tests (part of the tools
 * library, never of libtrellis).
 *
 * Reads format versions 1.0, 2.0 and 3.0 with descr '<f2' or '<f4' (also
 * spelled '<e' / '<f'), fortran_order False and up to NPY_MAX_DIMS
 * dimensions; the data must be exactly shape x itemsize bytes. Writes
 * version 1.0 with a header padded to a multiple of 64 bytes, as numpy
 * does. Errors: TRELLIS_ERR_IO (open/read/write), TRELLIS_ERR_NOT_FOUND (no
 * such file), TRELLIS_ERR_DTYPE (another descr), TRELLIS_ERR_UNSUPPORTED
 * (fortran order), TRELLIS_ERR_SHAPE (too many dims, size overflow),
 * TRELLIS_ERR_FORMAT (anything else malformed or truncated). */
#ifndef TOOLS_NPY_H
#define TOOLS_NPY_H

#include "trellis.h"

#include <sys/stat.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NPY_MAX_DIMS 8

typedef struct npy_array {
  trellis_dtype dtype; /* TRELLIS_F16 or TRELLIS_F32 */
  int ndim;            /* 0 for a scalar */
  int64_t shape[NPY_MAX_DIMS];
  void *data; /* malloc'd copy (NULL when nbytes is 0) */
  size_t nbytes;
} npy_array;

/* Parses a whole .npy image; `out->data` is a copy, free with
 * npy_free(). On failure `out` is zeroed. */
trellis_status npy_parse(const void *buf, size_t size, npy_array *out);
/* Reads and parses a file; messages start with the path. */
trellis_status npy_read(const char *path, npy_array *out);
/* Writes `data` (dtype F16 or F32, C order) as a version 1.0 .npy file
 * without ever losing what `path` held: the file is written to a new
 * temporary file beside it (".NAME.PID.N.tmp", created with O_EXCL, with
 * the mode of the file it replaces, or 0666 less the umask), flushed with
 * fsync and renamed over `path`, then the directory is flushed. On any
 * failure the temporary file is removed and `path` is untouched; nothing
 * else is ever removed. A symbolic link stays a link: its target is
 * replaced (other hard links to it keep the old contents). The directory must
 * be writable. A process killed mid-write leaves at most the temporary file.
 * Refused (see npy_output_check): a directory, FIFO, socket or device such as
 * /dev/null, a dangling link, a missing directory. */
trellis_status npy_write(const char *path, trellis_dtype dtype, int ndim,
                         const int64_t *shape, const void *data);
/* Whether npy_write may write `path`: an existing regular file (through
 * links; *exists = 1 and *sb is its stat) or a new name in an existing
 * directory (*exists = 0). Anything else is TRELLIS_ERR_IO (or NOT_FOUND)
 * with a message that says what the path is. Nothing is created. */
trellis_status npy_output_check(const char *path, struct stat *sb, int *exists);
/* Elements of the array (product of the shape). */
size_t npy_count(const npy_array *a);
void npy_free(npy_array *a);

#ifdef __cplusplus
}
#endif

#endif
