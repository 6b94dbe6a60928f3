/* SPDX-License-Identifier: Apache-2.0 */
/* The plan object, shared by the plan/prepare/run files of the CUDA build. */
#ifndef TRL_PLAN_INTERNAL_H
#define TRL_PLAN_INTERNAL_H

#include "core/internal.h"
#include "plan/cuda_status.h"
#include "rules/decision.h"
#include "plan/plan_check.h"
#include "plan/prepare_fault.h"
#include "cuda/kernels.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

/* TRELLIS_OK when `p` is device (or managed) memory, else
 * TRELLIS_ERR_INVALID_ARGUMENT naming the weight's field `what`. */
trellis_status trl_check_device_pointer(const void *p, const char *what);

typedef struct dense_algo {
  int64_t m; /* largest m this entry serves */
  int valid_full, valid_tail;
  cublasLtMatmulAlgo_t full,
      tail; /* slice_n columns; the last, narrower slice */
} dense_algo;

/* trellis_plan.magic of a live plan, and of a destroyed one (plan_check.h) */
#define TRL_PLAN_MAGIC 0x74726c50u
#define TRL_PLAN_POISON 0xdeadd1e5u

struct trellis_plan {
  uint32_t magic;   /* TRL_PLAN_MAGIC from create to destroy */
  trellis_weight w; /* device pointers */
  trellis_plan_desc desc;
  int device; /* current device at create: prepare and run check it */
  int sm_count, cc_major, cc_minor;
  int prepared;
  int fused_image; /* fused kernel image runs on this device */
  int fused_waves[TRL_M_BLOCK_COUNT]; /* waves of the fused kernel's
                                       * clusters per m-block variant */
  /* the path rules' inputs: weight, desc and device, among them whether
   * kernels may be dependent launches (pp.pdl) (rules/path.h) */
  trl_path_plan pp;
  /* the layout rules' inputs: shape, SM count, the register-direct
   * kernel's variants and the fused kernel's clusters (rules/layout.h).
   * With pp, what trl_decide makes each (plan, m)'s record from. */
  trl_layout_params lp;
  const uint16_t *s_in, *s_out; /* fp16 scales: suh/svh or expanded signs */
  void *owned;                  /* plan-owned device memory (signs, locks) */
  unsigned *locks;              /* fused path: self-resetting counters */
  const trl_sqg_tables *sqg;    /* SQG codebooks: the kernels' tables */
  const void *sqg_state[2];     /* and the decode-GEMM's, per record K */
  size_t lock_count;
  cublasLtHandle_t lt;
  dense_algo algos[TRL_DENSE_BUCKETS];
  int algo_count;
  trl_prepare_step inject_failure; /* tests: see plan/prepare_fault.h */
};

/* The SQG tables in the kernels' layout (trl_sqg_tables), from the checked
 * host tables (plan/plan.c); the status of trl_sqg_tables_status. */
trellis_status trl_sqg_tables_fill(trl_sqg_tables *t);

/* Fused path (plan/fused.c). */
size_t trl_fused_lock_count(const trellis_weight *w);
trellis_status trl_fused_prepare(trellis_plan *plan);
/* Runs the record `d` (family FUSED). */
trellis_status trl_fused_run(const trellis_plan *plan, const trl_decision *d,
                             const void *x, int64_t m, void *y, void *rotated,
                             cudaStream_t stream);

/* Dense path (plan/dense.c). With the plan's own rotations the output
 * rotation is folded into the decoded weight (W' = W_hat . Hblk . diag(svh),
 * as exllamav3's reconstruct_had); "direct" plans also let cuBLASLt write y
 * (and add the bias) so no fp32 output pass is needed, and when x is already
 * in the compute dtype the input rotation is folded too:
 * W = diag(suh) . Hblk . W_hat . Hblk . diag(svh), and the GEMM takes x
 * (trl_path_dense_direct, trl_path_dense_fold_input: rules/path.h). */
trellis_status trl_dense_prepare(trellis_plan *plan);
/* The record `d`'s (family DENSE) W_hat slices and GEMMs: `a` is x where
 * it folds the input rotation (input NONE), else the rotated buffer. */
trellis_status trl_dense_gemm(const trellis_plan *plan, const trl_decision *d,
                              const void *a, char *ws, int64_t m, void *y,
                              cudaStream_t stream);

#endif
