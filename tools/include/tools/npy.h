/* SPDX-License-Identifier: Apache-2.0 */
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
 * through out_file_write (tools/out_file.h): `path` is replaced only by a
 * complete file, and what it held is never lost; the paths it refuses are
 * out_file_check's. */
trellis_status npy_write(const char *path, trellis_dtype dtype, int ndim,
                         const int64_t *shape, const void *data);
/* The same .npy image written to the open descriptor `fd`
 * (out_file_write_fd: stdout for `--output -`); messages start with
 * `label`. */
trellis_status npy_write_fd(int fd, const char *label, trellis_dtype dtype,
                            int ndim, const int64_t *shape, const void *data);
/* Elements of the array (product of the shape). */
size_t npy_count(const npy_array *a);
void npy_free(npy_array *a);

#ifdef __cplusplus
}
#endif

#endif
