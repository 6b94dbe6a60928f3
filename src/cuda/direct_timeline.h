/* SPDX-License-Identifier: Apache-2.0 */
/* The register-direct kernel's timeline, a measurement build's hook
 * (-DTRL_DIRECT_TIMELINE=1; elsewhere the functions return
 * TRL_KERNEL_UNSUPPORTED and NULL). Plain C with nothing else included:
 * the one library header the benchmark reads (bench/timing.c).
 *
 * Thread 0 of every CTA writes a record of TRL_TIMELINE_WORDS words: the
 * payload's address (which layer), k << 32 | n,
 * m << 48 | smid << 32 | blockIdx.x, then %globaltimer (ns) at entry,
 * after griddepcontrol.wait, x staged, the first group's words in, the
 * stream done (thread 0's warp), the cluster met, the end. The first
 * buffer word counts the records (they stop at TRL_TIMELINE_CAP).
 * _reset allocates the buffer once and zeroes the count (synchronises);
 * _read copies up to cap records and the count (synchronises). */
#ifndef TRL_CUDA_DIRECT_TIMELINE_H
#define TRL_CUDA_DIRECT_TIMELINE_H

#ifdef __cplusplus
extern "C" {
#endif

#define TRL_TIMELINE_STAMPS 7
#define TRL_TIMELINE_WORDS (3 + TRL_TIMELINE_STAMPS)
#define TRL_TIMELINE_CAP (1 << 16)
int trl_direct_timeline_reset(void);
int trl_direct_timeline_read(unsigned long long *records, int cap, int *count);
void *trl_direct_timeline_ptr(void);

#ifdef __cplusplus
}
#endif

#endif
