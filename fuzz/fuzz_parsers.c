/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer entry point over every parser that reads untrusted bytes: the
 * safetensors header (plus EXL3 layer discovery on what it accepts), .npy
 * files, config.json's quantization_config and the shard index. Each input
 * goes to all of them; the wrong ones reject it within a few bytes.
 *
 * Accepted results are checked for internal consistency and every byte they
 * point at is read, so ASan reports any pointer outside the input. */
#include "io/layers.h"
#include "io/model.h"
#include "tools/npy.h"
#include "io/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint8_t sink;

/* Reads the first and last byte of a region. */
static void touch(const void *p, size_t bytes) {
  if (!p || bytes == 0)
    return;
  sink ^= ((const uint8_t *)p)[0];
  sink ^= ((const uint8_t *)p)[bytes - 1];
}

static void check(int ok) {
  if (!ok)
    abort();
}

static void fuzz_layers(const trellis_file *f) {
  trl_layer_set s;
  const trl_layer_hints hints = {.meta = &f->meta};
  if (trl_layers_discover_hinted(f->tensors, f->count, &hints, "<fuzz>", &s) !=
      TRELLIS_OK)
    return;
  check(s.count + s.other_count <= f->count);
  for (size_t i = 0; i < s.count; i++) {
    check(!s.extra[i].pending == !s.extra[i].lazy);
    check(trl_layers_realign(&s, i, "<fuzz>") == TRELLIS_OK);
    check(s.extra[i].pending == 0);
    const trellis_weight *w = &s.layers[i].weight;
    check((uintptr_t)w->trellis % 2 == 0 && (uintptr_t)w->suh % 2 == 0 &&
          (uintptr_t)w->svh % 2 == 0 && (uintptr_t)w->bias % 2 == 0);
    check(w->bits >= 1 && w->bits <= 8 && w->k % 128 == 0 && w->n % 128 == 0);
    check(!w->suh != !w->su && !w->svh != !w->sv);
    /* a half rate is MUL1 at K 1.5 .. 3.5, never a pair */
    check(w->half == 0 || (w->half == 1 && w->codebook == TRELLIS_CB_MUL1 &&
                           w->bits <= 3 && w->pair == TRELLIS_PAIR_NONE));
    if (w->pair == TRELLIS_PAIR_NONE)
      touch(w->trellis, (size_t)(w->k * w->n * (2 * w->bits + w->half) / 16));
    else { /* two records of k*n/2 weights */
      touch(w->trellis, (size_t)(w->k * w->n / 2 * w->bits / 8));
      touch(w->trellis1, (size_t)(w->k * w->n / 2 * w->bits1 / 8));
    }
    touch(w->suh, (size_t)w->k * 2);
    touch(w->svh, (size_t)w->n * 2);
    touch(w->su, (size_t)w->k / 8);
    touch(w->sv, (size_t)w->n / 8);
    touch(w->bias, (size_t)w->n * 2);
    touch(s.layers[i].name, strlen(s.layers[i].name) + 1);
  }
  trl_layers_free(&s);
}

static void fuzz_safetensors(const uint8_t *data, size_t size) {
  trellis_file *f = NULL;
  if (trellis_file_open_memory(data, size, &f) != TRELLIS_OK) {
    check(f == NULL);
    return;
  }
  size_t n = trellis_file_tensor_count(f);
  for (size_t i = 0; i < n; i++) {
    trellis_tensor t, u;
    check(trellis_file_tensor(f, i, &t) == TRELLIS_OK);
    check(trellis_file_find(f, t.name, &u) == TRELLIS_OK);
    check(u.data == t.data && u.nbytes == t.nbytes);
    const uint8_t *p = t.data;
    check(p >= data && p + t.nbytes <= data + size);
    touch(t.data, t.nbytes);
  }
  fuzz_layers(f);
  trellis_file_close(f);
}

static void fuzz_npy(const uint8_t *data, size_t size) {
  npy_array a;
  if (npy_parse(data, size, &a) != TRELLIS_OK)
    return;
  check(a.nbytes == npy_count(&a) * trellis_dtype_size(a.dtype));
  touch(a.data, a.nbytes);
  npy_free(&a);
}

static void fuzz_json(const uint8_t *data, size_t size) {
  trellis_quant_config qc;
  if (trl_quant_config_parse((const char *)data, size, "<fuzz>", &qc) ==
      TRELLIS_OK)
    check(memchr(qc.quant_method, 0, sizeof qc.quant_method) &&
          memchr(qc.codebook, 0, sizeof qc.codebook));
  trl_index idx;
  if (trl_index_parse((const char *)data, size, "<fuzz>", &idx) != TRELLIS_OK)
    return;
  for (size_t i = 0; i < idx.count; i++) {
    check(idx.shard[i] < idx.shard_count);
    check(!strchr(idx.shards[idx.shard[i]], '/'));
  }
  trl_index_free(&idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_safetensors(data, size);
  fuzz_npy(data, size);
  fuzz_json(data, size);
  return 0;
}
