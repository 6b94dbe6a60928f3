/* SPDX-License-Identifier: Apache-2.0 */
/* Internal view of an open safetensors file (the public API only hands out
 * an opaque trellis_file). */
#ifndef TRL_IO_SAFETENSORS_H
#define TRL_IO_SAFETENSORS_H

#include "core/internal.h"

#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits on a header (README "Limits"). They bound what a hostile header
 * costs to parse (jansson allocates its whole tree first) far above what
 * any real file needs: a shard holds a few thousand tensors. */
/* Largest accepted JSON header, as in the reference safetensors library. */
#define TRL_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)
/* Tensors per file. */
#define TRL_ST_MAX_TENSORS ((size_t)1 << 18)
/* JSON values per header: 16 per tensor on average (a tensor uses 13 with a
 * 2-D shape). */
#define TRL_ST_MAX_VALUES (16 * TRL_ST_MAX_TENSORS)
/* Bytes of a tensor name. */
#define TRL_ST_MAX_NAME 1024

/* A file's __metadata__: the string pairs the library reads ("codebook",
 * "bits", "pair_kind", "rate_axis"); every other entry is dropped at open. */
typedef struct trl_st_meta {
  size_t count;
  char **kv; /* kv[2i] = key, kv[2i + 1] = value */
} trl_st_meta;

/* The value of `key` (NULL when absent, or when `m` is NULL). */
const char *trl_st_meta_get(const trl_st_meta *m, const char *key);

struct trellis_file {
  char *label; /* path, or "<memory>", used in messages */
  /* The mapped file's identity, to notice by its path that it shrank: no
   * descriptor is kept (a model of many shards would hold one each). */
  dev_t dev;
  ino_t ino;
  void *map; /* mmap base (NULL for caller memory) */
  size_t map_size;
  const uint8_t *data; /* start of the data region */
  size_t data_size;
  trellis_tensor *tensors; /* sorted by name (strcmp) */
  size_t count;
  char *names; /* one block holding every tensor name */
  trl_st_meta meta;
};

/* TRELLIS_ERR_IO when the file is now shorter than when it was opened (its
 * mapping would raise SIGBUS past the new end); TRELLIS_OK for memory. The
 * file is found again by its path: when the path no longer names the
 * mapped file (removed, or replaced by another), the mapping keeps the
 * original alive and nothing can be checked, so that is TRELLIS_OK too. */
trellis_status trl_file_check_size(const trellis_file *f);

/* A whole model's share of header memory (io/model.c): what its shards
 * have used so far and the limits of the whole. */
typedef struct trl_st_budget {
  uint64_t header_bytes, header_limit; /* sum of header lengths */
  size_t tensors, tensor_limit;
} trl_st_budget;

/* trellis_file_open for one file of a model: its header length and its
 * tensors are added to *budget, and a file that would bring either past
 * its limit is TRELLIS_ERR_FORMAT naming the limit (its header is not read
 * when its length alone is too much). */
trellis_status trl_file_open_within(const char *path, trl_st_budget *budget,
                                    trellis_file **out);

/* Index of `name` in the sorted tensor array, or -1. */
ptrdiff_t trl_file_index(const trellis_file *f, const char *name);

/* `t`'s shape for a message, "[d0, d1, ...]", cut to `cap` bytes. */
void trl_shape_text(const trellis_tensor *t, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
