/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer entry point over weight validation and the CPU forward.
 *
 * Byte 0 picks the mode:
 *   even: the rest is a safetensors image; every EXL3 layer discovered in
 *         it (at most 2, k x n <= 256 x 256) is realigned, must pass
 *         trellis_weight_check_values (discovery rejects non-finite
 *         values), is decoded and run forward;
 *   odd:  the rest describes a weight as a caller would build it:
 *         k selector, n selector, bits (byte % 10; (byte / 10) odd: a
 *         half rate, K = bits + 1/2), codebook (see kCodebooks), flags
 *         (bit 0 legacy su, bit 1 legacy sv, bit 2 bias, bit 3 NULL
 *         payload), then the payload, the input signs or scales, the output
 *         ones and the bias, in that order. It goes through validation and,
 *         where that passes, the forward.
 * Every forward runs with 1 and with 3 threads; the results must be
 * bit-identical (each output column is computed by one thread in a fixed
 * order). A weight with 256 features on an axis is also cut in two there
 * (trellis_weight_shard): each shard's W_hat must be the slice of the
 * layer's, and a column shard's output the layer's columns bit for bit.
 * Shapes stay small so that one input costs well under a millisecond. */
#include "io/layers.h"
#include "io/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_KN (256 * 256)

static void check(int ok) {
  if (!ok)
    abort();
}

/* Deterministic finite fp16 inputs in [-2, 2). */
static void fill_x(uint16_t *x, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = trellis_f32_to_f16((float)(seed >> 8) / (float)(1u << 24) * 4.0f -
                              2.0f);
  }
}

/* Both halves of w on `split` (256 features there): W_hat slices, and
 * for a column split y's columns. */
static void check_shards(const trellis_weight *w, trellis_split split,
                         const uint16_t *w_hat, const uint16_t *x, int64_t m,
                         const float *y) {
  const size_t n = (size_t)w->n;
  for (int rank = 0; rank < 2; rank++) {
    trellis_shard_desc d;
    trellis_shard_desc_init(&d);
    d.split = split;
    d.ranks = 2;
    d.rank = rank;
    size_t bytes = 0;
    check(trellis_weight_shard_bytes(w, &d, &bytes) == TRELLIS_OK);
    void *memory = bytes ? aligned_alloc(16, (bytes + 15) / 16 * 16) : NULL;
    check(bytes == 0 || memory != NULL);
    trellis_weight s;
    trellis_weight_init(&s);
    check(trellis_weight_shard(w, &d, memory, bytes, &s) == TRELLIS_OK);
    const size_t sk = (size_t)s.k, sn = (size_t)s.n, at = 128 * (size_t)rank;
    uint16_t *part = malloc(sk * sn * 2);
    check(part != NULL);
    check(trellis_decode_weight(&s, part) == TRELLIS_OK);
    for (size_t row = 0; row < sk; row++)
      check(memcmp(part + row * sn,
                   split == TRELLIS_SPLIT_K ? w_hat + (row + at) * n
                                            : w_hat + row * n + at,
                   sn * 2) == 0);
    if (split == TRELLIS_SPLIT_N) {
      float *ys = malloc((size_t)m * sn * 4);
      size_t ws_bytes = trellis_cpu_workspace_size(&s, m, 1);
      void *ws = malloc(ws_bytes ? ws_bytes : 1);
      check(ys && ws);
      check(trellis_cpu_forward(&s, x, TRELLIS_F16, m, ys, TRELLIS_F32, ws,
                                ws_bytes, 1) == TRELLIS_OK);
      for (int64_t row = 0; row < m; row++)
        check(memcmp(ys + (size_t)row * sn, y + (size_t)row * n + at, sn * 4) ==
              0);
      free(ys);
      free(ws);
    }
    free(part);
    free(memory);
  }
}

static void run(const trellis_weight *w, int64_t m, uint32_t seed) {
  if (w->k * w->n > MAX_KN)
    return;
  size_t kn = (size_t)(w->k * w->n);
  uint16_t *w_hat = malloc(kn * 2);
  uint16_t *x = malloc((size_t)(m * w->k) * 2);
  float *y1 = malloc((size_t)(m * w->n) * 4);
  float *y3 = malloc((size_t)(m * w->n) * 4);
  size_t ws_bytes = trellis_cpu_workspace_size(w, m, 1);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  check(w_hat && x && y1 && y3 && ws);
  check(trellis_decode_weight(w, w_hat) == TRELLIS_OK);
  fill_x(x, (size_t)(m * w->k), seed);
  check(trellis_cpu_forward(w, x, TRELLIS_F16, m, y1, TRELLIS_F32, ws, ws_bytes,
                            1) == TRELLIS_OK);
  check(trellis_cpu_forward(w, x, TRELLIS_F16, m, y3, TRELLIS_F32, ws, ws_bytes,
                            3) == TRELLIS_OK);
  check(memcmp(y1, y3, (size_t)(m * w->n) * 4) == 0);
  if (w->n == 256)
    check_shards(w, TRELLIS_SPLIT_N, w_hat, x, m, y1);
  if (w->k == 256)
    check_shards(w, TRELLIS_SPLIT_K, w_hat, x, m, y1);
  free(w_hat);
  free(x);
  free(y1);
  free(y3);
  free(ws);
}

static void discovered(const uint8_t *data, size_t size) {
  trellis_file *f = NULL;
  if (trellis_file_open_memory(data, size, &f) != TRELLIS_OK)
    return;
  trl_layer_set s;
  if (trl_layers_discover(f->tensors, f->count, "<fuzz>", &s) == TRELLIS_OK) {
    for (size_t i = 0; i < s.count && i < 2; i++) {
      check(trl_layers_realign(&s, i, "<fuzz>") == TRELLIS_OK);
      const trellis_weight *w = &s.layers[i].weight;
      check(trellis_weight_check_values(w) == TRELLIS_OK);
      run(w, 1 + (int64_t)(size % 3), (uint32_t)size);
    }
    trl_layers_free(&s);
  }
  trellis_file_close(f);
}

/* Takes `bytes` from the input into a fresh aligned buffer (NULL when the
 * input is too short). */
static void *take(const uint8_t **p, size_t *left, size_t bytes) {
  if (bytes > *left)
    return NULL;
  void *b = malloc(bytes ? bytes : 1);
  check(b != NULL);
  memcpy(b, *p, bytes);
  *p += bytes;
  *left -= bytes;
  return b;
}

/* The codebook byte modulo 6: EXL3's three, an invalid value, then the SQG
 * ones (3 stays the invalid one it was before SQG existed). */
static const trellis_codebook kCodebooks[6] = {
    TRELLIS_CB_3INST,    TRELLIS_CB_MCG,      TRELLIS_CB_MUL1,
    (trellis_codebook)5, TRELLIS_CB_SQG_E4M3, TRELLIS_CB_SQG_FP16};

static void built(const uint8_t *data, size_t size) {
  if (size < 5)
    return;
  trellis_weight w;
  trellis_weight_init(&w);
  w.k = 128 * (1 + data[0] % 2);
  w.n = 128 * (1 + data[1] % 2);
  w.bits = data[2] % 10; /* 0 and 9 are invalid */
  w.half = (data[2] / 10) % 2;
  w.codebook = kCodebooks[data[3] % 6];
  uint8_t flags = data[4];
  const uint8_t *p = data + 5;
  size_t left = size - 5;
  int bits = w.bits >= 1 && w.bits <= 8 ? w.bits : 1;
  void *payload =
      (flags & 8)
          ? NULL
          : take(&p, &left,
                 (size_t)(w.k * w.n) * (size_t)(2 * bits + w.half) / 16);
  void *in = take(&p, &left, (flags & 1) ? (size_t)w.k / 8 : (size_t)w.k * 2);
  void *out = take(&p, &left, (flags & 2) ? (size_t)w.n / 8 : (size_t)w.n * 2);
  void *bias = (flags & 4) ? take(&p, &left, (size_t)w.n * 2) : NULL;
  if ((!payload && !(flags & 8)) || !in || !out || ((flags & 4) && !bias))
    goto done;
  w.trellis = payload;
  if (flags & 1)
    w.su = in;
  else
    w.suh = in;
  if (flags & 2)
    w.sv = out;
  else
    w.svh = out;
  w.bias = bias;
  if (trellis_weight_validate(&w) != TRELLIS_OK) {
    check(trellis_weight_check_values(&w) != TRELLIS_OK);
    goto done;
  }
  check(w.trellis != NULL && w.bits >= 1 && w.bits <= 8 &&
        trellis_codebook_rate_valid(w.codebook, w.bits, w.half));
  if (trellis_weight_check_values(&w) == TRELLIS_OK)
    run(&w, 1 + (int64_t)(flags >> 4) % 3, (uint32_t)size);
done:
  free(payload);
  free(in);
  free(out);
  free(bias);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  if (data[0] % 2)
    built(data + 1, size - 1);
  else
    discovered(data + 1, size - 1);
  return 0;
}
