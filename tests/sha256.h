/* Minimal SHA-256 (FIPS 180-4) for the known-answer tests, header-only so
 * each test program can include it without a build change. */
#ifndef TRELLIS_TEST_SHA256_H
#define TRELLIS_TEST_SHA256_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct sha256_ctx {
  uint32_t h[8];
  uint8_t block[64];
  size_t fill;
  uint64_t total;
} sha256_ctx;

static inline uint32_t sha256_rotr(uint32_t x, int r) {
  return (x >> r) | (x << (32 - r));
}

static inline void sha256_compress(sha256_ctx *c, const uint8_t p[64]) {
  static const uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
      0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
      0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
      0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
      0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
      0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
      0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
      0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = sha256_rotr(w[i - 15], 7) ^ sha256_rotr(w[i - 15], 18) ^
                  (w[i - 15] >> 3);
    uint32_t s1 = sha256_rotr(w[i - 2], 17) ^ sha256_rotr(w[i - 2], 19) ^
                  (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4],
           f = c->h[5], g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 =
        h + (sha256_rotr(e, 6) ^ sha256_rotr(e, 11) ^ sha256_rotr(e, 25)) +
        ((e & f) ^ (~e & g)) + k[i] + w[i];
    uint32_t t2 =
        (sha256_rotr(a, 2) ^ sha256_rotr(a, 13) ^ sha256_rotr(a, 22)) +
        ((a & b) ^ (a & cc) ^ (b & cc));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = cc;
    cc = b;
    b = a;
    a = t1 + t2;
  }
  c->h[0] += a;
  c->h[1] += b;
  c->h[2] += cc;
  c->h[3] += d;
  c->h[4] += e;
  c->h[5] += f;
  c->h[6] += g;
  c->h[7] += h;
}

static inline void sha256_init(sha256_ctx *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->fill = 0;
  c->total = 0;
}

static inline void sha256_update(sha256_ctx *c, const void *data, size_t len) {
  const uint8_t *p = (const uint8_t *)data;
  c->total += len;
  while (len > 0) {
    size_t take = 64 - c->fill < len ? 64 - c->fill : len;
    memcpy(c->block + c->fill, p, take);
    c->fill += take;
    p += take;
    len -= take;
    if (c->fill == 64) {
      sha256_compress(c, c->block);
      c->fill = 0;
    }
  }
}

/* Writes the digest as 64 lowercase hex digits plus NUL. */
static inline void sha256_final_hex(sha256_ctx *c, char hex[65]) {
  uint64_t bits = c->total * 8;
  uint8_t pad = 0x80;
  sha256_update(c, &pad, 1);
  pad = 0;
  while (c->fill != 56)
    sha256_update(c, &pad, 1);
  uint8_t len_be[8];
  for (int i = 0; i < 8; i++)
    len_be[i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(c, len_be, 8);
  for (int i = 0; i < 8; i++)
    snprintf(hex + 8 * i, 9, "%08x", (unsigned)c->h[i]);
}

/* SHA-256 of `count` uint16 values stored little-endian. */
static inline void sha256_u16_hex(const uint16_t *v, size_t count,
                                  char hex[65]) {
  sha256_ctx c;
  sha256_init(&c);
  for (size_t i = 0; i < count; i++) {
    uint8_t le[2] = {(uint8_t)(v[i] & 0xFF), (uint8_t)(v[i] >> 8)};
    sha256_update(&c, le, 2);
  }
  sha256_final_hex(&c, hex);
}

static inline void sha256_hex(const void *data, size_t len, char hex[65]) {
  sha256_ctx c;
  sha256_init(&c);
  sha256_update(&c, data, len);
  sha256_final_hex(&c, hex);
}

#endif
