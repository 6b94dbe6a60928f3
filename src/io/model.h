/* SPDX-License-Identifier: Apache-2.0 */
/* Model-directory parsing steps, exposed for tests and the fuzzer. */
#ifndef TRL_IO_MODEL_H
#define TRL_IO_MODEL_H

#include "core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parses config.json text. A missing "quantization_config" leaves `out`
 * zeroed (present = 0); missing fields (or JSON null) stay zero/empty; a
 * field of the wrong JSON type, or a string longer than its buffer, is
 * TRELLIS_ERR_FORMAT naming the field. `label` prefixes messages. */
trellis_status trl_quant_config_parse(const char *json, size_t len,
                                      const char *label,
                                      trellis_quant_config *out);

/* model.safetensors.index.json: weight_map entries sorted by tensor name. */
typedef struct trl_index {
  size_t count;
  char **tensors; /* tensor names, sorted (strcmp) and unique */
  size_t *shard;  /* shards[shard[i]] holds tensors[i] */
  size_t shard_count;
  char **shards; /* unique shard file names, sorted */
} trl_index;

/* Parses index text. Requires an object "weight_map" of name -> file name;
 * file names must stay inside the directory (no '/', '\\' or ".."). */
trellis_status trl_index_parse(const char *json, size_t len, const char *label,
                               trl_index *out);
void trl_index_free(trl_index *idx);

/* A whole model's limits, above each file's (README "Limits"): the sum of
 * its shards' header lengths and its tensor count. Ten to twenty times
 * what the largest checkpoints need (a 1T-parameter MoE in EXL3 has some
 * 300,000 tensors in about 50 MB of headers); what the model keeps of its
 * headers is proportional to them. */
#define TRL_MODEL_MAX_HEADER_BYTES ((uint64_t)1000 * 1000 * 1000)
#define TRL_MODEL_MAX_TENSORS ((size_t)1 << 22)

typedef struct trl_model_limits {
  uint64_t header_bytes;
  size_t tensors;
} trl_model_limits_t;

/* Test hook: the limits trellis_model_open applies from now on (0: the
 * default of that limit). Not for use while models open on other threads. */
void trl_model_set_limits(uint64_t header_bytes, size_t tensors);
trl_model_limits_t trl_model_limits(void);

/* Bytes of tensor data the model has copied so far (realigned tensors,
 * converted F32 biases): listing layers must leave it unchanged. */
size_t trl_model_copied_bytes(const trellis_model *m);

#ifdef __cplusplus
}
#endif

#endif
