/* Kernels of the benchmark (C linkage): the HBM read-peak probe and a
 * device-side random fill for benchmark data. Each returns a cudaError_t as
 * int (0 = success), launches on `stream` and never synchronises. */
#ifndef TRELLIS_BENCH_KERNELS_H
#define TRELLIS_BENCH_KERNELS_H

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
 * fp16 range). */
int bench_fill(uint16_t *dst, size_t count, uint64_t seed, int mode,
               void *stream);

#ifdef __cplusplus
}
#endif

#endif
