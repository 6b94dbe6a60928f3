/* SPDX-License-Identifier: Apache-2.0 */
/* Kernels of the benchmark (C linkage): the HBM read-peak probe and a
 * device-side random fill for benchmark data. Each returns a cudaError_t as
 * int (0 = success), launches on `stream` and never synchronises. */
#ifndef BENCH_KERNELS_H
#define BENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Launch shape of the read kernel on the current device: *threads per block
 * and *blocks = SMs x resident blocks per SM (the whole GPU, one wave). */
int bench_read_grid(int *blocks, int *threads);

/* Reads `bytes` of `buf` (16-byte aligned, multiple of 16) with 16-byte
 * ld.global loads in a grid-stride loop (4 loads in flight per thread) and
 * writes one XOR of everything a thread read to out[blocks * threads], so the
 * loads cannot be optimised away. */
int bench_read(const void *buf, size_t bytes, uint32_t *out, int blocks,
               int threads, void *stream);

/* Fills `count` 16-bit words from a counter-based hash of (seed, index):
 * mode 0 = random bits, mode 1 = fp16 uniform in [-1, 1), mode 2 = two
 * random E4M3 bytes, each finite with |v| <= 1.875 (exponent field <= 7:
 * never a NaN code, and sums of random-sign products stay far inside the
 * fp16 range), mode 3 = the words of the host's synth_words from an RNG
 * whose state is `seed` (word i = bits 16 (i % 4) .. of its draw i / 4),
 * so a layer generated here equals the one tools/synth_model writes. */
int bench_fill(uint16_t *dst, size_t count, uint64_t seed, int mode,
               void *stream);

/* The decode step's stand-in for attention: reads `count` fp16 values of
 * q (a few small blocks, grid-stride) and writes each, scaled by 0.5, to
 * out; a kernel of about attention's launch cost at decode. */
int bench_attention_standin(const uint16_t *q, uint16_t *out, size_t count,
                            void *stream);

/* dst[i] = fp16(dst[i] + src[i]) (the sum in fp32, one rounding) for
 * `count` fp16 values: the tensor-parallel step's all-reduce when every
 * rank runs on one GPU (its reference). */
int bench_add_f16(uint16_t *dst, const uint16_t *src, size_t count,
                  void *stream);

/* Adds a digest of `count` fp16 words at p to out[0..2] (zeroed by the
 * caller): out[0] += sum of a 64-bit mix of (index, word) (order-free, so
 * equal words give equal digests whatever the schedule), out[1] += the
 * number of non-finite values, out[2] += the number of words 0xFFFF (the
 * poison a NaN fill leaves). */
int bench_digest(const uint16_t *p, size_t count, unsigned long long *out,
                 void *stream);

#ifdef __cplusplus
}
#endif

#endif
