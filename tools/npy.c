/* SPDX-License-Identifier: Apache-2.0 */
/* .npy reading and writing (see npy.h). The header is a Python dict literal;
 * it is parsed with a small strict scanner, never evaluated. */
#include "tools/npy.h"
#include "tools/out_file.h"
#include "io/posix_file.h"

#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

/* ------------------------------------------------------ header scanner -- */

typedef struct scanner {
  const char *p, *end;
} scanner;

static void skip_ws(scanner *s) {
  while (s->p < s->end &&
         (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
    s->p++;
}

static int accept(scanner *s, char c) {
  skip_ws(s);
  if (s->p < s->end && *s->p == c) {
    s->p++;
    return 1;
  }
  return 0;
}

/* A quoted string without escapes, copied into buf (cap bytes). */
static int scan_string(scanner *s, char *buf, size_t cap) {
  skip_ws(s);
  if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
    return 0;
  char q = *s->p++;
  size_t n = 0;
  while (s->p < s->end && *s->p != q) {
    if (*s->p == '\\' || *s->p == '\0' || n + 1 >= cap)
      return 0;
    buf[n++] = *s->p++;
  }
  if (s->p >= s->end)
    return 0;
  s->p++;
  buf[n] = '\0';
  return 1;
}

static int scan_word(scanner *s, const char *word) {
  skip_ws(s);
  size_t len = strlen(word);
  if ((size_t)(s->end - s->p) < len || memcmp(s->p, word, len) != 0)
    return 0;
  s->p += len;
  return 1;
}

/* A non-negative integer (Python 2 headers may add an 'L'): 1, or 0 when
 * there is none, or -1 when its digits exceed INT64_MAX (s->p is left at
 * them, for the message). */
static int scan_int(scanner *s, int64_t *out) {
  skip_ws(s);
  if (s->p >= s->end || *s->p < '0' || *s->p > '9')
    return 0;
  const char *start = s->p;
  int64_t v = 0;
  while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
    int d = *s->p++ - '0';
    if (v > (INT64_MAX - d) / 10) {
      s->p = start;
      return -1;
    }
    v = v * 10 + d;
  }
  if (s->p < s->end && *s->p == 'L')
    s->p++;
  *out = v;
  return 1;
}

/* The run of digits at p, for a message. */
static int digits_at(const scanner *s) {
  const char *q = s->p;
  while (q < s->end && *q >= '0' && *q <= '9' && q - s->p < 64)
    q++;
  return (int)(q - s->p);
}

/* "()", "(3,)" or "(3, 4)" with an optional trailing comma. */
static trellis_status scan_shape(scanner *s, npy_array *a) {
  if (!accept(s, '('))
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header: shape is not a tuple");
  int n = 0, comma = 0;
  while (!accept(s, ')')) {
    int64_t v;
    if (n > 0 && !comma)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "npy header: shape tuple is missing a comma");
    int got = scan_int(s, &v);
    if (got < 0)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "npy header: shape entry %d = %.*s is larger than "
                      "the largest size, %lld",
                      n, digits_at(s), s->p, (long long)INT64_MAX);
    if (got == 0)
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "npy header: shape entry %d is not a non-negative "
                      "integer",
                      n);
    if (n == NPY_MAX_DIMS)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "npy header: shape has more than %d dimensions",
                      NPY_MAX_DIMS);
    a->shape[n++] = v;
    comma = accept(s, ',');
  }
  if (n == 1 && !comma)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "npy header: shape (%lld) is not a tuple (a 1-tuple "
                    "needs a trailing comma)",
                    (long long)a->shape[0]);
  a->ndim = n;
  return TRELLIS_OK;
}

static trellis_status parse_descr(const char *d, trellis_dtype *out) {
  if (!strcmp(d, "<f2") || !strcmp(d, "<e"))
    *out = TRELLIS_F16;
  else if (!strcmp(d, "<f4") || !strcmp(d, "<f"))
    *out = TRELLIS_F32;
  else if (!strcmp(d, ">f2") || !strcmp(d, ">e") || !strcmp(d, ">f4") ||
           !strcmp(d, ">f"))
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "npy header: descr '%s' is big-endian float%d; only "
                    "little-endian '<f2' and '<f4' are supported "
                    "(numpy: a.astype(a.dtype.newbyteorder('<')))",
                    d, d[2] == '2' || d[1] == 'e' ? 16 : 32);
  else
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "npy header: descr '%s' is not supported (only '<f2' "
                    "and '<f4')",
                    d);
  return TRELLIS_OK;
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4 };

static trellis_status scan_entry(scanner *s, npy_array *a, unsigned *seen,
                                 int *fortran) {
  char key[32], descr[32];
  if (!scan_string(s, key, sizeof key) || !accept(s, ':'))
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header: expected 'key': value");
  unsigned bit = !strcmp(key, "descr")           ? KEY_DESCR
                 : !strcmp(key, "fortran_order") ? KEY_FORTRAN
                 : !strcmp(key, "shape")         ? KEY_SHAPE
                                                 : 0;
  if (!bit)
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header: unexpected key '%s'", key);
  if (*seen & bit)
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header: duplicate key '%s'", key);
  *seen |= bit;
  if (bit == KEY_DESCR) {
    if (!scan_string(s, descr, sizeof descr))
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "npy header: descr is not a simple string");
    return parse_descr(descr, &a->dtype);
  }
  if (bit == KEY_FORTRAN) {
    if (scan_word(s, "True"))
      *fortran = 1;
    else if (scan_word(s, "False"))
      *fortran = 0;
    else
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "npy header: fortran_order is not True or False");
    return TRELLIS_OK;
  }
  return scan_shape(s, a);
}

static trellis_status scan_header(const char *text, size_t len, npy_array *a) {
  scanner s = {text, text + len};
  unsigned seen = 0;
  int fortran = 0;
  if (!accept(&s, '{'))
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header is not a dict");
  while (!accept(&s, '}')) {
    trellis_status st = scan_entry(&s, a, &seen, &fortran);
    if (st != TRELLIS_OK)
      return st;
    if (!accept(&s, ',')) {
      if (accept(&s, '}'))
        break;
      return trl_fail(TRELLIS_ERR_FORMAT,
                      "npy header: expected ',' or '}' in the dict");
    }
  }
  skip_ws(&s);
  if (s.p != s.end)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "npy header: unexpected text after the dict");
  if (seen != (KEY_DESCR | KEY_FORTRAN | KEY_SHAPE))
    return trl_fail(TRELLIS_ERR_FORMAT, "npy header: missing key '%s'",
                    !(seen & KEY_DESCR)     ? "descr"
                    : !(seen & KEY_FORTRAN) ? "fortran_order"
                                            : "shape");
  /* Fortran order only changes the layout of 2+ dimensional arrays. */
  if (fortran && a->ndim > 1)
    return trl_fail(TRELLIS_ERR_UNSUPPORTED,
                    "npy: fortran_order True is not supported (save a "
                    "C-contiguous array)");
  return TRELLIS_OK;
}

/* ------------------------------------------------------------- parsing -- */

size_t npy_count(const npy_array *a) {
  size_t n = 1;
  for (int i = 0; i < a->ndim; i++)
    if (!trl_mul_size(n, (size_t)a->shape[i], &n))
      return SIZE_MAX;
  return n;
}

void npy_free(npy_array *a) {
  if (!a)
    return;
  free(a->data);
  memset(a, 0, sizeof *a);
}

static trellis_status parse(const uint8_t *b, size_t size, npy_array *a) {
  if (size < 10 || memcmp(b, npy_magic, 6) != 0)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    size < 10 ? "npy: file too short (%zu bytes)"
                              : "npy: bad magic (not a .npy file, %zu "
                                "bytes)",
                    size);
  unsigned major = b[6];
  size_t start, hlen;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      return trl_fail(TRELLIS_ERR_FORMAT, "npy: file too short");
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
           (size_t)b[11] << 24;
    start = 12;
  } else {
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "npy: format version %u.%u is not supported", major,
                    (unsigned)b[7]);
  }
  if (hlen > size - start)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "npy: header length %zu runs past the end of the file "
                    "(%zu bytes)",
                    hlen, size);
  trellis_status st = scan_header((const char *)b + start, hlen, a);
  if (st != TRELLIS_OK)
    return st;
  size_t bytes = npy_count(a);
  if (bytes == SIZE_MAX ||
      !trl_mul_size(bytes, trellis_dtype_size(a->dtype), &bytes))
    return trl_fail(TRELLIS_ERR_SHAPE, "npy: shape size overflows");
  size_t have = size - start - hlen;
  if (have != bytes)
    return trl_fail(TRELLIS_ERR_FORMAT,
                    "npy: data is %zu bytes but the shape needs %zu (%s)", have,
                    bytes, have < bytes ? "truncated" : "trailing bytes");
  if (bytes > 0) {
    if (!(a->data = malloc(bytes)))
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                      "npy: cannot allocate %zu bytes", bytes);
    memcpy(a->data, b + start + hlen, bytes);
  }
  a->nbytes = bytes;
  return TRELLIS_OK;
}

trellis_status npy_parse(const void *buf, size_t size, npy_array *out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  if (!buf && size > 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "buf is NULL but size is %zu",
                    size);
  trellis_status st = parse(buf, size, out);
  if (st != TRELLIS_OK)
    npy_free(out);
  return st;
}

/* ------------------------------------------------------------ file I/O -- */

trellis_status npy_read(const char *path, npy_array *out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "out is NULL");
  memset(out, 0, sizeof *out);
  if (!path)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "path is NULL");
  uint8_t *buf = NULL;
  size_t len = 0;
  trellis_status st = trl_read_file(path, SIZE_MAX - 1, &buf, &len);
  if (st != TRELLIS_OK)
    return st;
  st = npy_parse(buf, len, out);
  free(buf);
  if (st != TRELLIS_OK)
    return trl_fail_prefix(st, "%s", path);
  return TRELLIS_OK;
}

/* The v1.0 header: magic, version, length, dict padded with spaces to a
 * multiple of 64 bytes, ending in '\n'. Returns the total header size. */
static size_t format_header(char *h, size_t cap, trellis_dtype dtype, int ndim,
                            const int64_t *shape) {
  char dict[400];
  int n = snprintf(dict, sizeof dict,
                   "{'descr': '%s', 'fortran_order': "
                   "False, 'shape': (",
                   dtype == TRELLIS_F16 ? "<f2" : "<f4");
  for (int i = 0; i < ndim; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                  (long long)shape[i]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }",
                ndim == 1 ? "," : "");
  size_t total = 10 + (size_t)n + 1;
  total = (total + 63) / 64 * 64;
  if (total > cap)
    return 0;
  memcpy(h, npy_magic, 6);
  h[6] = 1;
  h[7] = 0;
  size_t hlen = total - 10;
  h[8] = (char)(hlen & 0xff);
  h[9] = (char)(hlen >> 8);
  memcpy(h + 10, dict, (size_t)n);
  memset(h + 10 + n, ' ', total - 10 - (size_t)n - 1);
  h[total - 1] = '\n';
  return total;
}

/* The header of an array about to be written, and its data's bytes. */
static trellis_status write_header(trellis_dtype dtype, int ndim,
                                   const int64_t *shape, const void *data,
                                   char *header, size_t hcap, size_t *hsize,
                                   size_t *data_bytes) {
  if (dtype != TRELLIS_F16 && dtype != TRELLIS_F32)
    return trl_fail(TRELLIS_ERR_DTYPE, "npy write: dtype %d is not F16 or F32",
                    (int)dtype);
  if (ndim < 0 || ndim > NPY_MAX_DIMS || (ndim > 0 && !shape))
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "npy write: ndim %d is not in 0..%d (or shape is "
                    "NULL)",
                    ndim, NPY_MAX_DIMS);
  npy_array a = {.dtype = dtype, .ndim = ndim};
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0)
      return trl_fail(TRELLIS_ERR_SHAPE,
                      "npy write: shape[%d] = %lld is negative", i,
                      (long long)shape[i]);
    a.shape[i] = shape[i];
  }
  size_t bytes = npy_count(&a);
  if (bytes == SIZE_MAX ||
      !trl_mul_size(bytes, trellis_dtype_size(dtype), &bytes))
    return trl_fail(TRELLIS_ERR_SHAPE, "npy write: size overflows");
  if (bytes > 0 && !data)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "data is NULL");
  *hsize = format_header(header, hcap, dtype, ndim, shape);
  if (*hsize == 0)
    return trl_fail(TRELLIS_ERR_INTERNAL, "npy write: header too long");
  *data_bytes = bytes;
  return TRELLIS_OK;
}

trellis_status npy_write(const char *path, trellis_dtype dtype, int ndim,
                         const int64_t *shape, const void *data) {
  if (!path)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "path is NULL");
  char header[512];
  size_t hsize = 0, bytes = 0;
  trellis_status st = write_header(dtype, ndim, shape, data, header,
                                   sizeof header, &hsize, &bytes);
  return st != TRELLIS_OK ? st
                          : out_file_write(path, header, hsize, data, bytes);
}

trellis_status npy_write_fd(int fd, const char *label, trellis_dtype dtype,
                            int ndim, const int64_t *shape, const void *data) {
  char header[512];
  size_t hsize = 0, bytes = 0;
  trellis_status st = write_header(dtype, ndim, shape, data, header,
                                   sizeof header, &hsize, &bytes);
  return st != TRELLIS_OK ? st
                          : out_file_write_fd(fd, label ? label : "output",
                                              header, hsize, data, bytes);
}
