/* SPDX-License-Identifier: Apache-2.0 */
/* Host-callable launchers of the CUDA kernels (C linkage). Each launches on
 * `stream` and returns a cudaError_t as int (0 = success), or
 * TRL_KERNEL_UNSUPPORTED when this build has no kernel variant for the
 * combination asked (the detail message names it). None allocates or
 * synchronises. */
#ifndef TRL_CUDA_KERNELS_H
#define TRL_CUDA_KERNELS_H

#include "plan/direct_rules.h"
#include "rules/kernel_config.h"
#include "trellis.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRL_KERNEL_UNSUPPORTED (-1)

/* The architecture this build's kernel image for the current device was
 * compiled for (cudaFuncAttributes::binaryVersion: 90 for sm_90/sm_90a),
 * 0 when none loads. Every kernel is built for the same architectures, so
 * one stands for all. An older image (sm_80 running on Hopper) loads but
 * lacks what the newer kernels need: the fused kernel's body is compiled
 * out and there is no griddepcontrol.wait. */
int trl_image_arch(void);

/* Launchers taking `pdl` launch with programmatic stream serialisation when
 * it is set (only on an sm_90 device running an sm_90 image): the kernel
 * waits for the stream's previous kernel before touching its data. */

/* out[r][c] = RNE(H128blk(in[r][:] * pre)[c] * post[c]). pre/post fp16 or
 * NULL. cols % 128 == 0. */
int trl_launch_h128(const void *in, trellis_dtype in_dtype, void *out,
                    trellis_dtype out_dtype, const uint16_t *pre,
                    const uint16_t *post, int64_t rows, int64_t cols, int pdl,
                    void *stream);

/* y[r][c] = RNE(H128blk(sum_s partial[s][r][:])[c] * svh[c] + bias[c]) --
 * the generic path's output stage: reduces split-K partials (fixed order),
 * rotates, scales and converts. bias may be NULL. */
int trl_launch_rot_out(const float *partial, int splits, const uint16_t *svh,
                       const uint16_t *bias, void *y, trellis_dtype y_dtype,
                       int64_t m, int64_t n, int pdl, void *stream);

/* sums[r][c] = sum_s partial[s][r][c]  (before an external rotation). */
int trl_launch_reduce(const float *partial, int splits, float *sums, int64_t m,
                      int64_t n, void *stream);

/* y = RNE(v + bias), v fp32 [m][n] (after an external rotation). */
int trl_launch_bias_convert(const float *v, const uint16_t *bias, void *y,
                            trellis_dtype y_dtype, int64_t m, int64_t n,
                            void *stream);

/* One record's tile array [k/16][n/16][8 h] (h half-bits per weight, in
 * 2..16) from the checkpoint layout to the lane layout (format/lanes.h);
 * dst may equal src. Used by the upload and trellis_weight_repack. */
int trl_launch_repack_lanes(const int16_t *src, int16_t *dst, int64_t k,
                            int64_t n, int h, void *stream);
/* Checkpoint -> the k-major lane layout (dst must not overlap src). */
int trl_launch_repack_kmajor(const int16_t *src, int16_t *dst, int64_t k,
                             int64_t n, int h, void *stream);

/* The register-direct decode-GEMM (direct_gemm.cuh) of one variant: the
 * key is (rate in half-bits, codebook, TRL_DIRECT_* multiply). prepare
 * sets its attributes (once, at plan prepare); regs reports its registers
 * per thread (plan create's occupancy rule). */
int trl_direct_prepare(int rate, trellis_codebook cb, int var);
int trl_direct_regs(int rate, trellis_codebook cb, int var, int *regs);
/* How many clusters of `cluster` CTAs with `smem` bytes of dynamic shared
 * memory each fit the current device at once (after prepare). */
int trl_direct_active_clusters(int rate, trellis_codebook cb, int var,
                               int cluster, size_t smem, int *active);
int trl_launch_direct(const trl_direct_launch *launch, void *stream);

/* The finishing launch of a decode-GEMM whose k-splits' fp32 partials are
 * [splits][m][n]: their sum in split order, rotated, scaled by svh (s_out),
 * biased, stored as out_dtype (direct_gemm.cu); a dependent launch where
 * `pdl`. */
int trl_launch_direct_finish(const float *partial, int splits,
                             const uint16_t *s_out, const uint16_t *bias,
                             void *y, int out_dtype, int64_t m, int64_t n,
                             int pdl, void *stream);

/* The k-major decode-GEMM (kmajor_gemm.cuh) of a k-major payload: the
 * attributes of the plan's variants (once, at prepare), and the launch of
 * `l` (its grid unused; partial: g's [splits][m][n] of workspace) with the
 * finishing launch. */
int trl_kmajor_prepare(int rate, trellis_codebook cb);
int trl_launch_kmajor(const trl_direct_launch *l, const trl_kmajor_grid *g,
                      void *stream);

/* Legacy packed signs -> fp16 +-1 (used once at prepare). */
int trl_launch_expand_signs(const int16_t *packed, uint16_t *out, int64_t count,
                            void *stream);

/* The SQG tables as a plan uploads them once (prepare) for the kernels of
 * an SQG codebook, which stage them in shared memory: T12 as fp16 bits and
 * the D3L segments as fp32 (base, slope), both exact (format/sqg.h), in
 * the slots the kernels' closed form indexes (sqg_fp16_value in
 * cuda/common.cuh): descriptor i >= 8 at slot i + 24, descriptor v / 2 of
 * an odd v < 16 at slot (bits(fp32(v)) >> 20) - 1016, the rest zero. */
#define TRL_SQG_D3L_SLOTS 128
typedef struct trl_sqg_tables {
  uint16_t t12[4096];
  float d3l[TRL_SQG_D3L_SLOTS][2];
} trl_sqg_tables;

/* Decode-GEMM of the generic path. Partial sums for k-split s go to
 * partial[s][m][n] (fp32). rotated is [m][k] in the compute dtype.
 * A pair (bits1 != 0) runs in one launch, each CTA on one record: rate axis
 * n (n = 256): CTA column r is record r (its own 128 columns); rate axis k
 * (k = 256, splits = 2, kt_per_split = 8): split r is record r, so the
 * output stage's split sum adds the two records' products. */
typedef struct trl_gemm_args {
  const int16_t *trellis;
  const int16_t *trellis1; /* a pair's record1 */
  const uint16_t *rotated;
  float *partial;
  /* an SQG codebook's state -> value tables of record0's K and record1's
   * (a uniform layer: [0] only): 65536 E4M3 codes (sqg_e4m3) or fp16
   * bits (sqg_fp16), the value of each 16-bit state (trl_sqg_value) */
  const void *sqg_state[2];
  int64_t m, k, n;
  int bits;                    /* K; a pair: K of record0 */
  int half;                    /* 1: the half-integer rate bits + 1/2 */
  int bits1;                   /* 0, or a pair's K of record1 */
  trellis_rate_axis rate_axis; /* a pair's */
  trellis_codebook codebook;
  trellis_dtype compute; /* F16 or BF16 */
  int splits;            /* k-splits (grid.y) */
  int kt_per_split;      /* tile rows per split, multiple of 8 */
  int m_blocks;          /* 16-row blocks per CTA: TRL_GPU_M_BLOCKS */
  int pdl;               /* dependent launch (see the launchers above) */
} trl_gemm_args;

/* Sets the kernel attributes of every m-block variant of (bits, half,
 * bits1, codebook, compute) (half: the rate bits + 1/2; bits1: 0, or a
 * pair's K of record1) and returns 0, or the CUDA error
 * (cudaErrorNoKernelImageForDevice when this build has no image for the
 * device). */
int trl_gemm_prepare(int bits, int half, int bits1, trellis_codebook codebook,
                     trellis_dtype compute);
int trl_launch_gemm(const trl_gemm_args *a, void *stream);
/* Resident CTAs per SM of one decode-GEMM variant (0 when unknown). */
int trl_gemm_ctas_per_sm(int bits, int half, int bits1,
                         trellis_codebook codebook, trellis_dtype compute,
                         int m_blocks);

/* The reconstruct kernels: W_hat columns [n0, n0 + n_cols) of a tile array
 * [k/16][n/16][16*bits] into dst [k][n_cols] (row pitch ldd elements) of
 * dst_dtype (F16 or BF16); n0 and n_cols multiples of 128. A pair's records
 * are two such arrays, reconstructed one after the other into their
 * sub-blocks. The forms (trl_recon_form, rules/kernel_config.h):
 *  TRL_RECON_PLAIN  dst = W_hat[:, n0..]
 *  TRL_RECON_HAD    dst = RNE(W_hat[:, n0..] . H128blk . diag(post)) (the
 *                   dense path with its own rotations; post[c] for column
 *                   n0 + c)
 *  TRL_RECON_FULL   dst = RNE(diag(pre) . H128blk . W_hat[:, n0..] . H128blk
 *                   . diag(post)), so the GEMM takes x itself (pre[r] for
 *                   row r). */
typedef struct trl_reconstruct_args {
  const int16_t *trellis;
  int bits;
  int half;   /* K = bits + 1/2 (trl_launch_reconstruct_rate) */
  int kmajor; /* the k-major layout (trl_launch_reconstruct_rate) */
  trellis_codebook codebook;
  const trl_sqg_tables *sqg; /* device tables of an SQG codebook */
  int64_t k, n, n0, n_cols, ldd;
  const uint16_t *pre, *post;
  uint16_t *dst;
  trellis_dtype dst_dtype;
} trl_reconstruct_args;
int trl_launch_reconstruct(trl_recon_form form, const trl_reconstruct_args *a,
                           void *stream);
/* The plain form for a half-integer rate (K = bits + 1/2, MUL1) from the
 * lane layout, or for any rate of an EXL3 codebook from the k-major layout
 * (reconstruct_rate.cu). */
int trl_launch_reconstruct_rate(const trl_reconstruct_args *a, void *stream);
/* Checks the images and sets the attributes of the reconstruct kernels of
 * (bits, codebook), every form and dst dtype. */
int trl_reconstruct_prepare(int bits, trellis_codebook codebook);

/* Fused K6/MCG path (fused_k6.cu); its limits and the rotation modes are
 * in rules/kernel_config.h. With `pdl` it is launched with programmatic
 * stream serialisation. */
/* Sets the attributes of every variant and picks the cluster size of each
 * m-block variant (cluster_out[i] for trl_m_block_at(i)) and the waves of
 * clusters its grid makes (waves_out[i], 0 where unknown). */
int trl_fused_prepare_kernels(int64_t k, int64_t n,
                              int cluster_out[TRL_M_BLOCK_COUNT],
                              int waves_out[TRL_M_BLOCK_COUNT]);
int trl_launch_fused(const int16_t *trellis, const void *x,
                     trellis_dtype in_dtype, const uint16_t *s_in,
                     const uint16_t *s_out, const uint16_t *bias,
                     uint16_t *rotated, void *y, trellis_dtype out_dtype,
                     unsigned *flags, int64_t m, int64_t k, int64_t n,
                     int m_blocks, int cluster, trl_fused_rotation rotation,
                     int pdl, void *stream);

#ifdef __cplusplus
}
#endif

#endif
