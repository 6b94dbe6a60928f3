/* SPDX-License-Identifier: Apache-2.0 */
/* JSON helpers for untrusted text. Structural counts are taken without
 * parsing: jansson builds the whole tree before a reader can look at it
 * (about 40-100 bytes per value), so the readers check these counts against
 * their limits first: O(bytes), no allocation. */
#ifndef TRL_IO_JSON_BOUNDS_H
#define TRL_IO_JSON_BOUNDS_H

#include <jansson.h>
#include <stddef.h>

/* Deepest nesting of objects and arrays any reader accepts (jansson's own
 * limit is 2048; a safetensors header nests 3 deep). */
#define TRL_JSON_MAX_DEPTH 32

typedef struct trl_json_bounds {
  size_t objects; /* '{' outside strings */
  size_t values;  /* '{', '[', ',' and ':' outside strings: at least the
                     number of values jansson allocates, less one */
  size_t depth;   /* deepest nesting of objects and arrays */
} trl_json_bounds;

/* Counts over `len` bytes. For valid JSON the counts are exact; for invalid
 * JSON they still bound what jansson builds before it stops at the error
 * (it parses a prefix the scan reads the same way). */
void trl_json_scan(const char *text, size_t len, trl_json_bounds *out);

/* jansson's error text without its " near '<token>'" part: the token is the
 * file's own content (the first word of a text file given as JSON). */
void trl_json_error_text(const json_error_t *err, char *buf, size_t cap);

#endif
