/* SPDX-License-Identifier: Apache-2.0 */
/* Plan / prepare / query / run of the CUDA build. run() never allocates,
 * never synchronises and never sets attributes: all of that is done once in
 * create/prepare. */
#include "plan/plan_internal.h"
#include "plan/test_hooks.h"
#include "cuda/kernels.h"
#include "format/codebook.h"
#include "format/lanes.h"
#include "format/sqg.h"
#include "format/weight.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* NULL, or not a live plan: destroyed (its magic poisoned) or foreign. */
static trellis_status check_plan(const trellis_plan *plan, const char *what) {
  if (!plan)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s: plan is NULL", what);
  if (plan->magic != TRL_PLAN_MAGIC)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s: not a live plan (%s)",
                    what,
                    plan->magic == TRL_PLAN_POISON
                        ? "it was destroyed"
                        : "not from trellis_plan_create, or destroyed");
  return TRELLIS_OK;
}

#ifdef NDEBUG
#define KEEP_DEFAULT 0
#else
#define KEEP_DEFAULT 1
#endif
static atomic_int keep_destroyed = KEEP_DEFAULT;
static _Atomic(trellis_plan *) kept[TRL_PLAN_KEPT];
static atomic_uint kept_next;

int trl_plan_keep_destroyed(int keep) {
  return atomic_exchange(&keep_destroyed, keep != 0);
}

/* Frees a destroyed plan, or keeps it in the ring and frees the oldest. */
static void free_destroyed(trellis_plan *plan) {
  if (atomic_load(&keep_destroyed)) {
    unsigned slot = atomic_fetch_add(&kept_next, 1u) % TRL_PLAN_KEPT;
    plan = atomic_exchange(&kept[slot], plan);
  }
  free(plan);
}

static trellis_status check_desc(const trellis_plan_desc *d) {
  TRL_CHECK_STRUCT(d, trellis_plan_desc, "plan desc");
  if (d->max_m < 1)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "plan desc: max_m = %lld, expected >= 1",
                    (long long)d->max_m);
  if (trellis_dtype_size(d->input_dtype) == 0)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "plan desc: input_dtype %d is not F16, BF16 or F32",
                    (int)d->input_dtype);
  if (trellis_dtype_size(d->output_dtype) == 0)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "plan desc: output_dtype %d is not F16, BF16 or F32",
                    (int)d->output_dtype);
  if (d->compute_dtype != TRELLIS_F16 && d->compute_dtype != TRELLIS_BF16)
    return trl_fail(TRELLIS_ERR_DTYPE,
                    "plan desc: compute_dtype %d is not F16 or BF16",
                    (int)d->compute_dtype);
  const uint32_t known =
      TRELLIS_PLAN_FORCE_GENERIC | TRELLIS_PLAN_FORCE_DECODE |
      TRELLIS_PLAN_FORCE_DENSE | TRELLIS_PLAN_EXACT_WEIGHTS |
      TRELLIS_PLAN_LEGACY_KERNELS | TRELLIS_PLAN_NO_DEPENDENT_LAUNCH;
  if (d->flags & ~known)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "plan desc: unknown flags 0x%x",
                    (unsigned)(d->flags & ~known));
  if ((d->flags & TRELLIS_PLAN_FORCE_DECODE) &&
      (d->flags & TRELLIS_PLAN_FORCE_DENSE))
    return trl_fail(
        TRELLIS_ERR_INVALID_ARGUMENT,
        "plan desc: FORCE_DECODE and FORCE_DENSE exclude each other");
  if (d->split_k < 0)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "plan desc: split_k %d < 0",
                    d->split_k);
  return TRELLIS_OK;
}

/* What query reports and run executes for m rows: the plan's decision
 * record (rules/decision.h). 0 when the sizes overflow. */
static int plan_decide(const trellis_plan *plan, int64_t m, trl_decision *d) {
  return trl_decide(&plan->pp, &plan->lp, m, d);
}

/* k-splits across clusters the generic path's register-direct launches
 * may take (measurement builds set 1 to time them without: -DCMAKE_C_FLAGS
 * in scripts/device-check.sh's variants). */
#ifndef TRL_DIRECT_SPLITS_LIMIT
#define TRL_DIRECT_SPLITS_LIMIT TRL_DIRECT_MAX_SPLITS
#endif

/* trl_direct_test_clusters's, trl_direct_test_splits's and
 * trl_direct_test_park's (tests only) */
static int test_max_cluster, test_force_cluster, test_max_splits;
static int test_park = -1;

void trl_direct_test_clusters(int max_cluster, int force_cluster) {
  test_max_cluster = max_cluster;
  test_force_cluster = force_cluster;
}

void trl_direct_test_splits(int max_splits) { test_max_splits = max_splits; }

void trl_direct_test_park(int park) { test_park = park; }

/* The register-direct kernel, where the plan may run it
 * (trl_path_direct_eligible): its variants' attributes are set here, and
 * their registers and how many clusters of each size fit the GPU read, so
 * query and run shape it the same before and after prepare. */
static trellis_status plan_direct(trellis_plan *p) {
  const trellis_codebook cb = p->w.codebook;
  p->lp.codebook = cb;
  p->lp.rate = trl_lanes_rate(p->w.bits, p->w.half);
  p->lp.direct = trl_path_direct_eligible(&p->pp);
  if (!p->lp.direct)
    return TRELLIS_OK;
  p->lp.direct_max_cluster =
      test_max_cluster > 0 ? test_max_cluster : TRL_DIRECT_MAX_CLUSTER;
  p->lp.direct_force_cluster = test_force_cluster;
  p->lp.direct_max_splits =
      test_max_splits > 0 ? test_max_splits : TRL_DIRECT_SPLITS_LIMIT;
  p->lp.direct_park = test_park >= 0 ? test_park : TRL_DIRECT_PARK;
  /* the variants of 1 and of TRL_DIRECT_MAX_M rows (one for 3INST/MCG,
   * MUL1's int8 and affine forms) */
  const int vars[2] = {trl_direct_var(cb, 1),
                       trl_direct_var(cb, TRL_DIRECT_MAX_M)};
  for (int v = 0; v < 2; ++v) {
    const int var = vars[v];
    if (!trl_direct_variant_exists(p->lp.rate, cb, var) ||
        (v == 1 && var == vars[0]))
      continue;
    int err = trl_direct_prepare(p->lp.rate, cb, var);
    if (!err)
      err = trl_direct_regs(p->lp.rate, cb, var, &p->lp.direct_regs[var]);
    for (int c = 1; !err && c <= p->lp.direct_max_cluster; ++c) {
      /* shared memory of a share of k for c CTAs, in the rounds of a grid
       * of two CTAs per SM, at the variant's widest m (a smaller m takes
       * less: at least as many clusters fit) */
      const int kt = (int)(8 * ((p->w.k / 128 + c - 1) / c));
      int64_t q = (int64_t)p->sm_count * TRL_DIRECT_CTAS_PER_SM / c;
      q = q < 1 ? 1 : q > p->w.n / 128 ? p->w.n / 128 : q;
      const int rounds = (int)((p->w.n / 128 + q - 1) / q);
      const int m_max =
          var == TRL_DIRECT_INT8 ? TRL_DIRECT_INT8_MAX_M : TRL_DIRECT_MAX_M;
      const size_t smem =
          trl_direct_smem_layout(var, m_max, kt, rounds, 0).bytes;
      if (smem > TRL_DIRECT_MAX_SMEM)
        continue;
      int *active = &p->lp.direct_active[var][c];
      err = trl_direct_active_clusters(p->lp.rate, cb, var, c, smem, active);
      if (*active == 0)
        *active = -1; /* this size does not fit */
      else if (*active == -2)
        *active = 0; /* the query failed: assume it fits */
    }
    if (err)
      return trl_cuda_fail(err, "plan create (register-direct kernel)");
  }
  return TRELLIS_OK;
}

/* The decode-GEMM's record1 K: 0 for a uniform layer. */
static int plan_bits1(const trellis_plan *p) {
  return p->w.pair != TRELLIS_PAIR_NONE ? p->w.bits1 : 0;
}

trellis_status trellis_plan_create(const trellis_weight *device_w,
                                   const trellis_plan_desc *desc,
                                   trellis_plan **out) {
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "plan output pointer is NULL");
  *out = NULL;
  trellis_weight full; /* the caller's weight at any accepted struct_size */
  trellis_status st = trl_weight_load(device_w, &full);
  if (st == TRELLIS_OK && full.layout != TRELLIS_LAYOUT_KMAJOR)
    st = trl_weight_require_layout(&full, TRELLIS_LAYOUT_LANES, "plan_create");
  if (st != TRELLIS_OK)
    return st;
  device_w = &full;
  if (trl_codebook_is_sqg(full.codebook) &&
      (st = trl_sqg_tables_status()) != TRELLIS_OK)
    return st;
  if ((st = check_desc(desc)) != TRELLIS_OK)
    return st;
  if (trellis_cuda_device_count() == 0)
    return trl_fail(TRELLIS_ERR_NO_DEVICE, "no CUDA device is available");
  const void *ptrs[] = {
      device_w->trellis,
      device_w->suh ? (const void *)device_w->suh : (const void *)device_w->su,
      device_w->svh ? (const void *)device_w->svh : (const void *)device_w->sv,
      device_w->bias};
  const char *names[] = {"trellis", device_w->suh ? "suh" : "su",
                         device_w->svh ? "svh" : "sv", "bias"};
  for (int i = 0; i < 4; ++i)
    if (ptrs[i] &&
        (st = trl_check_device_pointer(ptrs[i], names[i])) != TRELLIS_OK)
      return st;
  if (((uintptr_t)device_w->trellis) % 16 != 0)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "weight trellis pointer is not 16-byte aligned");
  if (device_w->pair != TRELLIS_PAIR_NONE) {
    if ((st = trl_check_device_pointer(device_w->trellis1, "trellis1")) !=
        TRELLIS_OK)
      return st;
    if (((uintptr_t)device_w->trellis1) % 16 != 0)
      return trl_fail(TRELLIS_ERR_BUFFER,
                      "weight trellis1 pointer is not 16-byte aligned");
  }
  /* fp16 scales and bias: the kernels read them four at a time */
  const void *vecs[] = {device_w->suh, device_w->svh, device_w->bias};
  const char *vec_names[] = {"suh", "svh", "bias"};
  for (int i = 0; i < 3; ++i)
    if ((uintptr_t)vecs[i] % 8 != 0)
      return trl_fail(TRELLIS_ERR_BUFFER,
                      "weight %s pointer is not 8-byte aligned", vec_names[i]);

  trellis_plan *p = calloc(1, sizeof *p);
  if (!p)
    return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY, "plan allocation failed");
  p->w = *device_w;
  p->desc = *desc;
  p->desc.struct_size = sizeof p->desc;
  cudaError_t e;
  if ((e = cudaGetDevice(&p->device)) ||
      (e = cudaDeviceGetAttribute(&p->sm_count, cudaDevAttrMultiProcessorCount,
                                  p->device)) ||
      (e = cudaDeviceGetAttribute(
           &p->cc_major, cudaDevAttrComputeCapabilityMajor, p->device)) ||
      (e = cudaDeviceGetAttribute(
           &p->cc_minor, cudaDevAttrComputeCapabilityMinor, p->device))) {
    free(p);
    return trl_cuda_fail(e, "querying the device");
  }
  /* Is there a kernel image for this GPU at all? (a pair: both Ks) */
  int err = trl_reconstruct_prepare(p->w.bits, p->w.codebook);
  if (!err && p->w.pair != TRELLIS_PAIR_NONE)
    err = trl_reconstruct_prepare(p->w.bits1, p->w.codebook);
  if (err) {
    free(p);
    return trl_cuda_fail(err, "plan create");
  }
  /* The fused kernel (clusters, distributed shared memory) and dependent
   * launches (griddepcontrol) need sm_90 in the device and in the image
   * that runs on it: the gate's "compiled for this arch". */
  const int sm90_image = p->cc_major >= 9 && trl_image_arch() >= 90;
  p->fused_image = sm90_image;
  p->pp.k = p->w.k;
  p->pp.bits = p->w.bits;
  p->pp.half = p->w.half;
  p->pp.codebook = p->w.codebook;
  p->pp.paired = p->w.pair != TRELLIS_PAIR_NONE;
  p->pp.kmajor = p->w.layout == TRELLIS_LAYOUT_KMAJOR;
  p->pp.has_bias = p->w.bias != NULL;
  p->pp.input_dtype = desc->input_dtype;
  p->pp.output_dtype = desc->output_dtype;
  p->pp.compute_dtype = desc->compute_dtype;
  p->pp.has_h128 = desc->h128 != NULL;
  p->pp.split_k = desc->split_k;
  p->pp.flags = desc->flags;
  p->pp.cc_major = p->cc_major;
  p->pp.fused_image = sm90_image;
  p->pp.pdl = sm90_image && !(desc->flags & TRELLIS_PLAN_NO_DEPENDENT_LAUNCH);
  p->lp.k = p->w.k;
  p->lp.n = p->w.n;
  p->lp.sm_count = p->sm_count;
  p->lp.split_k = desc->split_k;
  p->lp.has_h128 = desc->h128 != NULL;
  p->lp.dense_direct = trl_path_dense_direct(&p->pp);
  p->lp.dense_fold_input = trl_path_dense_fold_input(&p->pp);
  p->lp.pair_k =
      p->w.pair != TRELLIS_PAIR_NONE && p->w.rate_axis == TRELLIS_RATE_AXIS_K;
  for (int i = 0; i < TRL_M_BLOCK_COUNT; ++i)
    p->lp.ctas_per_sm[i] =
        trl_gemm_ctas_per_sm(p->w.bits, p->w.half, plan_bits1(p), p->w.codebook,
                             desc->compute_dtype, trl_m_block_at(i));
  const char *refusal = p->pp.kmajor ? trl_path_kmajor_refusal(&p->pp) : NULL;
  if (refusal) {
    free(p);
    return trl_fail(TRELLIS_ERR_LAYOUT,
                    "plan_create: a k-major payload runs on the k-major "
                    "kernel only, and %s; upload the weight in the lane "
                    "layout for this plan",
                    refusal);
  }
  p->lp.kmajor = p->pp.kmajor;
  if ((st = plan_direct(p)) != TRELLIS_OK) {
    free(p);
    return st;
  }
  p->magic = TRL_PLAN_MAGIC;
  *out = p;
  return TRELLIS_OK;
}

static void release_prepared(trellis_plan *plan);

void trellis_plan_destroy(trellis_plan *plan) {
  if (!plan || check_plan(plan, "plan destroy") != TRELLIS_OK)
    return; /* not a live plan: left alone */
  release_prepared(plan);
  plan->magic = TRL_PLAN_POISON;
  free_destroyed(plan);
}

trellis_status trellis_plan_query(const trellis_plan *plan, int64_t m,
                                  trellis_buffer_sizes *out) {
  trellis_status st = check_plan(plan, "plan query");
  if (st != TRELLIS_OK)
    return st;
  if (!out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "buffer sizes output is NULL");
  if (m < 1 || m > plan->desc.max_m)
    return trl_fail(TRELLIS_ERR_SHAPE, "m = %lld is outside 1..max_m (%lld)",
                    (long long)m, (long long)plan->desc.max_m);
  trl_decision d;
  if (!plan_decide(plan, m, &d))
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "buffer sizes overflow size_t at m = %lld", (long long)m);
  trl_decision_sizes(&d, out);
  return TRELLIS_OK;
}

trellis_status trl_sqg_tables_fill(trl_sqg_tables *t) {
  const uint16_t *t12 = trl_sqg_t12_f16(), *d3l = trl_sqg_d3l();
  if (!t12 || !d3l)
    return trl_sqg_tables_status();
  memcpy(t->t12, t12, sizeof t->t12);
  memset(t->d3l, 0, sizeof t->d3l);
  for (int i = 0; i < TRL_SQG_D3L_COUNT; ++i) {
    /* odd v < 16 is descriptor v / 2 (single values); i >= 8 sit at
     * i + 24 (see trl_sqg_tables) */
    int slot = i + 24;
    if (i < 8) {
      const float v = (float)(2 * i + 1);
      uint32_t bits;
      memcpy(&bits, &v, sizeof bits);
      slot = (int)(bits >> 20) - 1016;
    }
    t->d3l[slot][0] = trellis_f16_to_f32(d3l[2 * i]);
    t->d3l[slot][1] = trellis_f16_to_f32(d3l[2 * i + 1]);
  }
  return TRELLIS_OK;
}

/* The state tables' host copy (record0's, then record1's) to their places
 * in the plan memory. */
static cudaError_t copy_state_tables(char *base, const size_t off[2],
                                     const size_t bytes[2], const void *host,
                                     cudaStream_t s) {
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < 2 && e == cudaSuccess; ++r)
    if (bytes[r])
      e = cudaMemcpyAsync(base + off[r],
                          (const char *)host + (r ? bytes[0] : 0), bytes[r],
                          cudaMemcpyHostToDevice, s);
  return e;
}

/* Plan-owned device memory: expanded legacy signs, the fused path's
 * counters, zeroed once here (they reset themselves after each launch),
 * and the SQG tables of an SQG codebook. The zeroing, the copies and the
 * expansions run on a stream of prepare's own, and only that stream is
 * waited for: other work on the device goes on. */
static trellis_status prepare_memory(trellis_plan *plan) {
  const size_t k = (size_t)plan->w.k, n = (size_t)plan->w.n;
  const size_t in_bytes = plan->w.suh ? 0 : k * 2,
               out_bytes = plan->w.svh ? 0 : n * 2;
  const size_t lock_count =
      plan->fused_image ? trl_fused_lock_count(&plan->w) : 0;
  const size_t sqg_bytes =
      trl_codebook_is_sqg(plan->w.codebook) ? sizeof(trl_sqg_tables) : 0;
  /* the decode-GEMM's state tables: record0's K, a pair's record1 K */
  const int state_bits[2] = {plan->w.bits, plan_bits1(plan)};
  size_t state_bytes[2], off_state[2];
  for (int r = 0; r < 2; ++r)
    state_bytes[r] = state_bits[r] ? trl_sqg_kernel_table(plan->w.codebook,
                                                          state_bits[r], NULL)
                                   : 0;
  size_t at = 0, off_in, off_out, off_locks, off_sqg;
  if (!trl_carve_size(&at, in_bytes, 256, &off_in) ||
      !trl_carve_size(&at, out_bytes, 256, &off_out) ||
      !trl_carve_size(&at, lock_count * sizeof(unsigned), 256, &off_locks) ||
      !trl_carve_size(&at, sqg_bytes, 256, &off_sqg) ||
      !trl_carve_size(&at, state_bytes[0], 256, &off_state[0]) ||
      !trl_carve_size(&at, state_bytes[1], 256, &off_state[1]))
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "plan prepare: plan memory size overflows");
  plan->s_in = plan->w.suh;
  plan->s_out = plan->w.svh;
  if (at == 0)
    return TRELLIS_OK;
  trl_sqg_tables host_sqg; /* copied before cudaMemcpyAsync returns */
  trellis_status st = TRELLIS_OK;
  if (sqg_bytes && (st = trl_sqg_tables_fill(&host_sqg)) != TRELLIS_OK)
    return st;
  /* the state tables' host copy, kept until prepare's stream has been
   * synchronised below */
  void *host_state = NULL;
  if (state_bytes[0] + state_bytes[1]) {
    host_state = malloc(state_bytes[0] + state_bytes[1]);
    if (!host_state)
      return trl_fail(TRELLIS_ERR_OUT_OF_MEMORY,
                      "plan prepare: host memory for the SQG state tables");
    for (int r = 0; r < 2; ++r)
      if (state_bytes[r])
        trl_sqg_kernel_table(plan->w.codebook, state_bits[r],
                             (char *)host_state + (r ? state_bytes[0] : 0));
  }
  char *base = NULL;
  cudaError_t e = cudaMalloc((void **)&base, at);
  if (e != cudaSuccess) {
    free(host_state);
    return trl_cuda_fail(e, "plan prepare: allocating plan memory");
  }
  plan->owned = base;
  cudaStream_t s = NULL;
  if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) !=
      cudaSuccess) {
    free(host_state);
    return trl_cuda_fail(e, "plan prepare: creating its stream");
  }
  int err;
  if ((e = cudaMemsetAsync(base, 0, at, s)) != cudaSuccess)
    st = trl_cuda_fail(e, "plan prepare: zeroing plan memory");
  else if (sqg_bytes &&
           (e = cudaMemcpyAsync(base + off_sqg, &host_sqg, sqg_bytes,
                                cudaMemcpyHostToDevice, s)) != cudaSuccess)
    st = trl_cuda_fail(e, "plan prepare: copying the SQG tables");
  else if ((e = copy_state_tables(base, off_state, state_bytes, host_state,
                                  s)) != cudaSuccess)
    st = trl_cuda_fail(e, "plan prepare: copying the SQG state tables");
  else if (in_bytes &&
           (err = trl_launch_expand_signs(
                plan->w.su, (uint16_t *)(base + off_in), (int64_t)k, s)))
    st = trl_cuda_fail(err, "plan prepare: expanding su");
  else if (out_bytes &&
           (err = trl_launch_expand_signs(
                plan->w.sv, (uint16_t *)(base + off_out), (int64_t)n, s)))
    st = trl_cuda_fail(err, "plan prepare: expanding sv");
  /* waited for even after a failed launch: nothing of ours stays queued */
  e = cudaStreamSynchronize(s);
  if (st == TRELLIS_OK && e != cudaSuccess)
    st = trl_cuda_fail(e, "plan prepare");
  cudaStreamDestroy(s);
  free(host_state); /* its copies have completed */
  if (st != TRELLIS_OK)
    return st;
  if (in_bytes)
    plan->s_in = (const uint16_t *)(base + off_in);
  if (out_bytes)
    plan->s_out = (const uint16_t *)(base + off_out);
  plan->locks = lock_count ? (unsigned *)(base + off_locks) : NULL;
  plan->lock_count = lock_count;
  plan->sqg = sqg_bytes ? (const trl_sqg_tables *)(base + off_sqg) : NULL;
  for (int r = 0; r < 2; ++r)
    plan->sqg_state[r] = state_bytes[r] ? base + off_state[r] : NULL;
  return TRELLIS_OK;
}

/* A failure injected after `step` (trl_plan_inject_prepare_failure),
 * once. */
static trellis_status injected(trellis_plan *plan, trl_prepare_step step,
                               const char *what) {
  if (plan->inject_failure != step)
    return TRELLIS_OK;
  plan->inject_failure = TRL_PREPARE_STEP_NONE;
  return trl_fail(TRELLIS_ERR_INTERNAL,
                  "plan prepare: failure injected after %s", what);
}

static trellis_status prepare_once(trellis_plan *plan) {
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return trl_cuda_fail(e, "plan prepare");
  if (dev != plan->device)
    return trl_fail(
        TRELLIS_ERR_INVALID_ARGUMENT,
        "plan prepare: current device %d is not the plan's device %d", dev,
        plan->device);
  int err = trl_gemm_prepare(plan->w.bits, plan->w.half, plan_bits1(plan),
                             plan->w.codebook, plan->desc.compute_dtype);
  if (err)
    return trl_cuda_fail(err, "plan prepare (decode-GEMM attributes)");
  trellis_status st;
  if ((st = prepare_memory(plan)) != TRELLIS_OK ||
      (st = injected(plan, TRL_PREPARE_AFTER_MEMORY, "the plan memory")) !=
          TRELLIS_OK)
    return st;
  if (plan->fused_image && (st = trl_fused_prepare(plan)) != TRELLIS_OK)
    return st;
  if ((st = injected(plan, TRL_PREPARE_AFTER_FUSED, "the fused kernel")) !=
      TRELLIS_OK)
    return st;
  if (plan->lp.kmajor &&
      (err = trl_kmajor_prepare(plan->lp.rate, plan->w.codebook)))
    return trl_cuda_fail(err, "plan prepare (k-major kernel attributes)");
  if ((st = trl_dense_prepare(plan)) != TRELLIS_OK)
    return st;
  return injected(plan, TRL_PREPARE_AFTER_DENSE, "the dense path");
}

/* Returns the plan to its state after create: frees what prepare acquired
 * (plan memory, the cuBLASLt handle). */
static void release_prepared(trellis_plan *plan) {
  if (plan->owned)
    cudaFree(plan->owned);
  if (plan->lt)
    cublasLtDestroy(plan->lt);
  plan->owned = NULL;
  plan->lt = NULL;
  plan->locks = NULL;
  plan->lock_count = 0;
  plan->sqg = NULL;
  plan->sqg_state[0] = plan->sqg_state[1] = NULL;
  plan->s_in = plan->s_out = NULL;
  plan->algo_count = 0;
  plan->prepared = 0;
}

trellis_status trellis_plan_prepare(trellis_plan *plan) {
  trellis_status st = check_plan(plan, "plan prepare");
  if (st != TRELLIS_OK)
    return st;
  if (plan->prepared)
    return TRELLIS_OK; /* idempotent */
  st = prepare_once(plan);
  if (st != TRELLIS_OK) {
    /* nothing of a failed attempt stays: a retry starts from create */
    release_prepared(plan);
    return st;
  }
  plan->prepared = 1;
  return TRELLIS_OK;
}

void trl_plan_inject_prepare_failure(trellis_plan *plan,
                                     trl_prepare_step step) {
  if (plan)
    plan->inject_failure = step;
}

static trellis_status check_buffer(const void *p, size_t have, size_t need,
                                   const char *what) {
  if (need == 0)
    return TRELLIS_OK;
  if (!p)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "buffers.%s is NULL; this run needs %zu bytes", what, need);
  if (have < need)
    return trl_fail(TRELLIS_ERR_BUFFER,
                    "buffers.%s holds %zu bytes; this run needs %zu", what,
                    have, need);
  if ((uintptr_t)p % 16 != 0)
    return trl_fail(TRELLIS_ERR_BUFFER, "buffers.%s is not 16-byte aligned",
                    what);
  return TRELLIS_OK;
}

static trellis_status workspace_error(const trl_layout *lay,
                                      const trellis_buffers *b,
                                      cudaStream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) {
    (void)cudaGetLastError();
    cs = cudaStreamCaptureStatusNone;
  }
  const char *state = b->workspace ? "too small" : "missing";
  if (cs == cudaStreamCaptureStatusActive)
    return trl_fail(
        TRELLIS_ERR_WORKSPACE,
        "generic GEMM scratch is not initialized for CUDA graph capture: "
        "the %s path needs a workspace of %zu bytes, %zu given (%s); size it "
        "with trellis_plan_query before capture",
        trellis_path_name(lay->path), lay->workspace_bytes,
        b->workspace ? b->workspace_bytes : 0, state);
  return trl_fail(
      TRELLIS_ERR_WORKSPACE,
      "workspace %s: the %s path needs %zu bytes, %zu given (size it with "
      "trellis_plan_query)",
      state, trellis_path_name(lay->path), lay->workspace_bytes,
      b->workspace ? b->workspace_bytes : 0);
}

static trellis_status launch_error(int err, const char *what) {
  return trl_cuda_fail(err, what);
}

/* The record's output step (generic and dense paths): the GEMM's fp32
 * output in the workspace -> y. */
static trellis_status output_step(const trellis_plan *p, const trl_decision *d,
                                  char *ws, int64_t m, void *y,
                                  cudaStream_t s) {
  const trl_layout *lay = &d->layout;
  const float *partial = (const float *)(ws + lay->partial_off);
  const trellis_dtype ydt = p->desc.output_dtype;
  int err;
  switch (d->output) {
  case TRL_OUTPUT_NONE:
    return TRELLIS_OK;
  case TRL_OUTPUT_ROTATE:
    err = trl_launch_rot_out(partial, lay->splits, p->s_out, p->w.bias, y, ydt,
                             m, p->w.n, p->pp.pdl, s);
    return err ? launch_error(err, "output rotation") : TRELLIS_OK;
  case TRL_OUTPUT_BIAS: /* rotation folded into W': bias and dtype */
    err = trl_launch_bias_convert(partial, p->w.bias, y, ydt, m, p->w.n, s);
    return err ? launch_error(err, "bias and output conversion") : TRELLIS_OK;
  case TRL_OUTPUT_EXTERNAL:
    break;
  }
  const float *sums = partial;
  if (lay->splits > 1) {
    float *dst = (float *)(ws + lay->sums_off);
    if ((err = trl_launch_reduce(partial, lay->splits, dst, m, p->w.n, s)))
      return launch_error(err, "split-K reduction");
    sums = dst;
  }
  float *rot = (float *)(ws + lay->rotout_off);
  trellis_status st =
      p->desc.h128(sums, TRELLIS_F32, rot, TRELLIS_F32, NULL, p->s_out, m,
                   p->w.n, s, p->desc.h128_user_data);
  if (st != TRELLIS_OK)
    return trl_fail_prefix(st, "external H128 (output rotation)");
  err = trl_launch_bias_convert(rot, p->w.bias, y, ydt, m, p->w.n, s);
  return err ? launch_error(err, "bias and output conversion") : TRELLIS_OK;
}

/* The register-direct kernel: the whole layer in one launch (and, where
 * the record splits k across clusters, the finishing launch). */
/* The launch's layer, rows, x and y (no grid, partials or PDL yet). */
static void direct_args(const trellis_plan *p, const void *x, int64_t m,
                        void *y, trl_direct_launch *l) {
  memset(l, 0, sizeof *l);
  l->payload = p->w.trellis;
  l->x = x;
  l->s_in = p->s_in;
  l->s_out = p->s_out;
  l->bias = p->w.bias;
  l->y = y;
  l->m = m;
  l->k = p->w.k;
  l->n = p->w.n;
  l->rate = p->lp.rate;
  l->codebook = p->w.codebook;
  l->in_dtype = p->desc.input_dtype;
  l->out_dtype = p->desc.output_dtype;
}

static trellis_status direct_run(const trellis_plan *p, const trl_decision *d,
                                 const void *x, int64_t m, void *y, char *ws,
                                 cudaStream_t s) {
  trl_direct_launch l;
  direct_args(p, x, m, y, &l);
  l.grid = d->layout.direct_grid;
  l.partial =
      d->layout.partial_bytes ? (float *)(ws + d->layout.partial_off) : NULL;
  l.pdl = d->pdl;
  const int err = trl_launch_direct(&l, s);
  return err ? launch_error(err, "register-direct decode-GEMM") : TRELLIS_OK;
}

/* The k-major kernel and its finishing launch (a k-major payload's generic
 * path). */
static trellis_status kmajor_run(const trellis_plan *p, const trl_decision *d,
                                 const void *x, int64_t m, void *y, char *ws,
                                 cudaStream_t s) {
  trl_direct_launch l;
  direct_args(p, x, m, y, &l);
  l.partial = (float *)(ws + d->layout.partial_off);
  l.pdl = d->pdl;
  const int err = trl_launch_kmajor(&l, &d->layout.kmajor_grid, s);
  return err ? launch_error(err, "k-major decode-GEMM") : TRELLIS_OK;
}

/* The split-K decode-GEMM of the record: rotated x -> fp32 partials. */
static trellis_status gemm_run(const trellis_plan *plan, const trl_decision *d,
                               const void *rotated, char *ws, int64_t m,
                               cudaStream_t s) {
  trl_gemm_args a;
  memset(&a, 0, sizeof a);
  a.trellis = plan->w.trellis;
  a.trellis1 = plan->w.trellis1;
  a.rotated = (const uint16_t *)rotated;
  a.partial = (float *)(ws + d->layout.partial_off);
  a.sqg_state[0] = plan->sqg_state[0];
  a.sqg_state[1] = plan->sqg_state[1];
  a.m = m;
  a.k = plan->w.k;
  a.n = plan->w.n;
  a.bits = plan->w.bits;
  a.half = plan->w.half;
  a.bits1 = plan_bits1(plan);
  a.rate_axis = plan->w.rate_axis;
  a.codebook = plan->w.codebook;
  a.compute = plan->desc.compute_dtype;
  a.splits = d->layout.splits;
  a.kt_per_split = d->layout.kt_per_split;
  a.m_blocks = d->layout.m_blocks;
  a.pdl = d->pdl;
  const int err = trl_launch_gemm(&a, s);
  return err ? launch_error(err, "decode-GEMM") : TRELLIS_OK;
}

/* Validates, takes the plan's decision record for m (plan_decide, the one
 * call into the rules) and executes it: the input step, the family's
 * launch, the output step. */
trellis_status trellis_run(const trellis_plan *plan, const void *x, int64_t m,
                           void *y, const trellis_buffers *buffers,
                           void *stream) {
  trellis_status st = check_plan(plan, "trellis_run");
  if (st != TRELLIS_OK)
    return st;
  if (!plan->prepared)
    return trl_fail(TRELLIS_ERR_NOT_PREPARED,
                    "trellis_run before trellis_plan_prepare on this plan");
  /* kernels, the plan's memory and its cuBLASLt handle live on the plan's
   * device (a thread-local read; legal during stream capture) */
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess)
    return trl_cuda_fail(e, "trellis_run (current device)");
  if (dev != plan->device)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "trellis_run: the current CUDA device is %d but the plan "
                    "was created on device %d (cudaSetDevice(%d) first)",
                    dev, plan->device, plan->device);
  TRL_CHECK_STRUCT(buffers, trellis_buffers, "buffers");
  if (m < 1 || m > plan->desc.max_m)
    return trl_fail(TRELLIS_ERR_SHAPE,
                    "m = %lld is outside 1..max_m (%lld) of the plan",
                    (long long)m, (long long)plan->desc.max_m);
  if (!x || !y)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL", x ? "y" : "x");
  if ((uintptr_t)x % 16 || (uintptr_t)y % 16)
    return trl_fail(TRELLIS_ERR_BUFFER, "%s is not 16-byte aligned",
                    (uintptr_t)x % 16 ? "x" : "y");
  cudaStream_t s = (cudaStream_t)stream;
  trl_decision d;
  if (!plan_decide(plan, m, &d))
    return trl_fail(TRELLIS_ERR_SHAPE, "buffer sizes overflow at m = %lld",
                    (long long)m);
  st = check_buffer(buffers->rotated, buffers->rotated_bytes,
                    d.layout.rotated_bytes, "rotated");
  if (st != TRELLIS_OK)
    return st;
  /* scratch: the generic and dense paths, and the register-direct
   * kernel's k-splits across clusters (the fused path needs none) */
  char *ws = NULL;
  if (d.layout.workspace_bytes > 0) {
    if (!buffers->workspace ||
        buffers->workspace_bytes < d.layout.workspace_bytes)
      return workspace_error(&d.layout, buffers, s);
    if ((uintptr_t)buffers->workspace % TRL_WS_ALIGN)
      return trl_fail(TRELLIS_ERR_BUFFER,
                      "buffers.workspace is not %d-byte aligned", TRL_WS_ALIGN);
    ws = (char *)buffers->workspace;
  }
  if (d.family == TRL_FAMILY_DIRECT)
    return direct_run(plan, &d, x, m, y, ws, s);
  if (d.family == TRL_FAMILY_KMAJOR)
    return kmajor_run(plan, &d, x, m, y, ws, s);
  if (d.family == TRL_FAMILY_FUSED)
    return trl_fused_run(plan, &d, x, m, y, buffers->rotated, s);

  /* the generic and dense paths: input step, GEMM, output step */
  const trellis_dtype rot_dt = plan->desc.compute_dtype; /* F16 or BF16 */
  int err;
  if (d.input == TRL_INPUT_EXTERNAL) {
    st = plan->desc.h128(x, plan->desc.input_dtype, buffers->rotated, rot_dt,
                         plan->s_in, NULL, m, plan->w.k, stream,
                         plan->desc.h128_user_data);
    if (st != TRELLIS_OK)
      return trl_fail_prefix(st, "external H128 (input rotation)");
  } else if (d.input == TRL_INPUT_ROTATE &&
             (err = trl_launch_h128(x, plan->desc.input_dtype, buffers->rotated,
                                    rot_dt, plan->s_in, NULL, m, plan->w.k,
                                    plan->pp.pdl, s))) {
    return launch_error(err, "input rotation");
  }
  if (d.family == TRL_FAMILY_DENSE)
    st = trl_dense_gemm(plan, &d,
                        d.input == TRL_INPUT_NONE ? x : buffers->rotated, ws, m,
                        y, s);
  else
    st = gemm_run(plan, &d, buffers->rotated, ws, m, s);
  if (st != TRELLIS_OK)
    return st;
  return output_step(plan, &d, ws, m, y, s);
}
