/* SPDX-License-Identifier: Apache-2.0 */
/* The b12x formats on the GPU (FORMAT.md §9): SQG codebooks and pairs on
 * the generic path (split-K decode-GEMM) and the dense path (reconstruct +
 * cuBLASLt):
 *   - W_hat of the GPU decode equals the CPU's bit for bit (fp16, bf16);
 *   - every known-answer case of testvectors/b12x against its float64 y,
 *     fp16 and bf16 compute, m = 1, the case's m and m > 128 (dense, both
 *     folded reconstructs), y poisoned with NaN first;
 *   - random layers at every valid (codebook, K) and every pair kind, axis
 *     and codebook against the CPU reference;
 *   - a CUDA-graph capture of an SQG and of a pair layer replays equal to
 *     the eager run, bit for bit;
 *   - trellis_weight_upload copies a pair's two records into one allocation
 *     (record0 || record1, as in a checkpoint, each repacked into the lane
 *     layout) and reads no more than the caller's struct_size.
 * The fused path stays closed to them (tests/test_gate.c). */
#include "gpu_util.h"

#include "format/pair.h"
#include "plan/plan_internal.h"

/* the CPU test's tolerance against the float64 y (test_b12x_vectors.c);
 * bf16 operands: ~2^-9 relative per product (gpu_generic's bound) */
#define TOL 2e-3
#define TOL_BF16_REL 1e-2
#define TOL_BF16_MAX 2e-2

static void fill(int16_t *p, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i)
    p[i] = (int16_t)(uint16_t)(seed + 0x9E37u * (uint32_t)i);
}

/* ------------------------------------------------------ random pairs -- */

/* A random pair layer like synth_layer_init's: random records, suh =
 * scales(1/sqrt(k)), svh = scales(1). */
typedef struct gpair {
  trellis_weight w;
  int16_t *rec0, *rec1;
  uint16_t *suh, *svh;
} gpair;

static void gpair_random(gpair *p, trellis_pair_kind kind,
                         trellis_rate_axis axis, int64_t orth,
                         trellis_codebook cb, uint64_t seed) {
  memset(p, 0, sizeof *p);
  const int64_t k = axis == TRELLIS_RATE_AXIS_N ? orth : TRL_PAIR_CHANNELS;
  const int64_t n = axis == TRELLIS_RATE_AXIS_N ? TRL_PAIR_CHANNELS : orth;
  const size_t w0 = trl_pair_record_words(orth, trl_pair_bits0(kind));
  const size_t w1 = trl_pair_record_words(orth, trl_pair_bits1(kind));
  p->rec0 = malloc(w0 * 2);
  p->rec1 = malloc(w1 * 2);
  p->suh = malloc((size_t)k * 2);
  p->svh = malloc((size_t)n * 2);
  assert_true(p->rec0 && p->rec1 && p->suh && p->svh);
  synth_rng r;
  synth_seed(&r, seed);
  synth_words(&r, p->rec0, w0);
  synth_words(&r, p->rec1, w1);
  synth_scales(&r, p->suh, (size_t)k, 1.0 / sqrt((double)k));
  synth_scales(&r, p->svh, (size_t)n, 1.0);
  trellis_weight_init(&p->w);
  p->w.k = k;
  p->w.n = n;
  p->w.codebook = cb;
  p->w.pair = kind;
  p->w.rate_axis = axis;
  p->w.bits = trl_pair_bits0(kind);
  p->w.bits1 = trl_pair_bits1(kind);
  p->w.trellis = p->rec0;
  p->w.trellis1 = p->rec1;
  p->w.suh = p->suh;
  p->w.svh = p->svh;
  OK(trellis_weight_validate(&p->w));
}

static void gpair_free(gpair *p) {
  free(p->rec0);
  free(p->rec1);
  free(p->suh);
  free(p->svh);
  memset(p, 0, sizeof *p);
}

/* One forward of weight `w` at m rows (fp16 x, f32 y) with `compute` and
 * `flags`, against the CPU reference; checks the path taken. */
static void check_random(const trellis_weight *w, int64_t m,
                         trellis_dtype compute, uint32_t flags,
                         trellis_path path, uint64_t seed, const char *what) {
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F32, flags);
  d.compute_dtype = compute;
  float *ref;
  trellis_buffer_sizes sz;
  float *y = gu_forward_vs_ref(w, &d, m, seed, TRELLIS_F32, &ref, &sz);
  char text[192];
  snprintf(text, sizeof text, "%s m%lld %s (%s)", what, (long long)m,
           trellis_dtype_name(compute), trellis_path_name(sz.path));
  assert_int_equal(sz.path, path);
  /* generic path: the reference's fp16 W_hat (1e-4, as gpu_generic);
   * dense: the folded weight rounded once (gpu_generic's kDense bounds);
   * bf16: bf16 operands */
  const int dense = path == TRELLIS_PATH_DENSE;
  const double rel = compute == TRELLIS_BF16 ? 1e-2 : dense ? 6e-4 : 1e-4;
  const double mx = compute == TRELLIS_BF16 ? 2e-2 : dense ? 3e-3 : 1e-3;
  check_close(y, ref, (size_t)(m * w->n), rel, mx, text);
  printf("  ok %s rel %.2e\n", text, tu_rel_l2(y, ref, (size_t)(m * w->n)));
  free(y);
  free(ref);
}

/* Every valid (codebook, K) of the SQG codebooks on random layers: the
 * generic path at one and at four m-blocks (k-splits on the larger k),
 * the dense path with both folded forms, bf16 compute. */
static void test_sqg_random(void **state) {
  (void)state;
  const trellis_codebook cbs[2] = {TRELLIS_CB_SQG_E4M3, TRELLIS_CB_SQG_FP16};
  const uint32_t generic = TRELLIS_PLAN_FORCE_GENERIC;
  for (int c = 0; c < 2; ++c)
    for (int bits = c ? 5 : 2; bits <= 6; ++bits) {
      char what[64];
      snprintf(what, sizeof what, "%s K%d", trellis_codebook_name(cbs[c]),
               bits);
      gw w;
      gw_random(&w, 2048, 384, bits, cbs[c], 0, bits & 1, 40 + bits + 8 * c);
      check_random(&w.w, 1, TRELLIS_F16, generic, TRELLIS_PATH_GENERIC,
                   500 + bits, what);
      check_random(&w.w, 57, TRELLIS_F16, generic | TRELLIS_PLAN_FORCE_DECODE,
                   TRELLIS_PATH_GENERIC, 510 + bits, what);
      check_random(&w.w, 6, TRELLIS_BF16, generic, TRELLIS_PATH_GENERIC,
                   520 + bits, what);
      gw_free(&w);
      /* 256 x 384: m = 260 folds both rotations, m = 3 (forced) only the
       * output one */
      gw_random(&w, 256, 384, bits, cbs[c], 0, 0, 60 + bits + 8 * c);
      check_random(&w.w, 260, TRELLIS_F16, 0, TRELLIS_PATH_DENSE, 530 + bits,
                   what);
      check_random(&w.w, 3, TRELLIS_F16, generic | TRELLIS_PLAN_FORCE_DENSE,
                   TRELLIS_PATH_DENSE, 540 + bits, what);
      check_random(&w.w, 200, TRELLIS_BF16, generic | TRELLIS_PLAN_FORCE_DENSE,
                   TRELLIS_PATH_DENSE, 550 + bits, what);
      gw_free(&w);
    }
}

/* Every pair kind, rate axis and codebook on random layers: the generic
 * path (one and four m-blocks; on the n axis with k-splits over a larger
 * k), the dense path with both folded forms, bf16 compute. */
static void test_pair_random(void **state) {
  (void)state;
  const trellis_pair_kind kinds[5] = {TRELLIS_PAIR_P22, TRELLIS_PAIR_P24,
                                      TRELLIS_PAIR_P33, TRELLIS_PAIR_P43,
                                      TRELLIS_PAIR_P44};
  const trellis_codebook cbs[2] = {TRELLIS_CB_MCG, TRELLIS_CB_SQG_E4M3};
  const uint32_t generic = TRELLIS_PLAN_FORCE_GENERIC;
  uint64_t seed = 700;
  for (int i = 0; i < 5; ++i)
    for (int a = 0; a < 2; ++a)
      for (int c = 0; c < 2; ++c) {
        const trellis_rate_axis axis =
            a ? TRELLIS_RATE_AXIS_K : TRELLIS_RATE_AXIS_N;
        char what[64];
        snprintf(what, sizeof what, "%s axis %s %s",
                 trellis_pair_kind_name(kinds[i]), trellis_rate_axis_name(axis),
                 trellis_codebook_name(cbs[c]));
        gpair p;
        gpair_random(&p, kinds[i], axis, a ? 384 : 1536, cbs[c], seed++);
        check_random(&p.w, 1, TRELLIS_F16, generic, TRELLIS_PATH_GENERIC,
                     seed++, what);
        check_random(&p.w, 50, TRELLIS_F16, generic | TRELLIS_PLAN_FORCE_DECODE,
                     TRELLIS_PATH_GENERIC, seed++, what);
        check_random(&p.w, 5, TRELLIS_BF16, generic, TRELLIS_PATH_GENERIC,
                     seed++, what);
        check_random(&p.w, 3, TRELLIS_F16, generic | TRELLIS_PLAN_FORCE_DENSE,
                     TRELLIS_PATH_DENSE, seed++, what);
        gpair_free(&p);
        /* n x k small enough that m = 260 folds both rotations */
        gpair_random(&p, kinds[i], axis, 256, cbs[c], seed++);
        check_random(&p.w, 260, TRELLIS_F16, 0, TRELLIS_PATH_DENSE, seed++,
                     what);
        check_random(&p.w, 150, TRELLIS_BF16,
                     generic | TRELLIS_PLAN_FORCE_DENSE, TRELLIS_PATH_DENSE,
                     seed++, what);
        gpair_free(&p);
      }
}

/* A pair on the k axis runs one k-split per record whatever split_k asks;
 * on the n axis split_k applies. Both give the reference's y. */
static void test_pair_split_k(void **state) {
  (void)state;
  gpair p;
  gpair_random(&p, TRELLIS_PAIR_P24, TRELLIS_RATE_AXIS_K, 640,
               TRELLIS_CB_SQG_E4M3, 77);
  for (int s = 1; s <= 2; ++s) {
    trellis_plan_desc d = gu_desc(9, TRELLIS_F16, TRELLIS_F32, 0);
    d.split_k = s;
    float *ref;
    float *y = gu_forward_vs_ref(&p.w, &d, 9, 78, TRELLIS_F32, &ref, NULL);
    check_close(y, ref, (size_t)(9 * p.w.n), 1e-4, 1e-3, "P24 k split_k");
    free(y);
    free(ref);
  }
  gpair_free(&p);
  gpair_random(&p, TRELLIS_PAIR_P43, TRELLIS_RATE_AXIS_N, 2048, TRELLIS_CB_MCG,
               79);
  for (int s = 1; s <= 16; s *= 4) {
    trellis_plan_desc d = gu_desc(9, TRELLIS_F16, TRELLIS_F32, 0);
    d.split_k = s;
    float *ref;
    float *y = gu_forward_vs_ref(&p.w, &d, 9, 80, TRELLIS_F32, &ref, NULL);
    check_close(y, ref, (size_t)(9 * p.w.n), 1e-4, 1e-3, "P43 n split_k");
    free(y);
    free(ref);
  }
  gpair_free(&p);
}

/* W_hat from the GPU decode (the reconstruct kernel's plain form, whose
 * per-lane decode is the decode-GEMM's) equals trellis_decode_weight bit
 * for bit at every valid (codebook, K), as fp16 and as bf16 (the fp16
 * value rounded), on layers of 2^16 random states. */
static void test_decode_exact(void **state) {
  (void)state;
  trl_sqg_tables *tables = malloc(sizeof *tables);
  assert_non_null(tables);
  OK(trl_sqg_tables_fill(tables));
  void *dtables = dev_copy(tables, sizeof *tables);
  const trellis_codebook cbs[2] = {TRELLIS_CB_SQG_E4M3, TRELLIS_CB_SQG_FP16};
  const int64_t k = 256, n = 256;
  uint16_t *want = malloc((size_t)(k * n) * 2),
           *got = malloc((size_t)(k * n) * 2);
  assert_true(want && got);
  void *dst = NULL;
  CK(cudaMalloc(&dst, (size_t)(k * n) * 2));
  for (int c = 0; c < 2; ++c)
    for (int bits = c ? 5 : 2; bits <= 6; ++bits) {
      gw w;
      gw_random(&w, k, n, bits, cbs[c], 0, 0, 300 + bits + 8 * c);
      OK(trellis_decode_weight(&w.w, want));
      void *dtr = dev_copy(w.trellis, trellis_weight_payload_bytes(&w.w));
      trellis_weight dev = w.w; /* the kernels read the lane layout */
      dev.trellis = dtr;
      OK(trellis_weight_repack(&dev, dtr, NULL, NULL));
      for (int bf = 0; bf < 2; ++bf) {
        trl_reconstruct_args r;
        memset(&r, 0, sizeof r);
        r.trellis = dtr;
        r.bits = bits;
        r.codebook = cbs[c];
        r.sqg = dtables;
        r.k = k;
        r.n = n;
        r.n0 = 0;
        r.n_cols = r.ldd = n;
        r.dst = dst;
        r.dst_dtype = bf ? TRELLIS_BF16 : TRELLIS_F16;
        CK(cudaMemset(dst, 0xFF, (size_t)(k * n) * 2));
        assert_int_equal(trl_launch_reconstruct(TRL_RECON_PLAIN, &r, NULL), 0);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got, dst, (size_t)(k * n) * 2, cudaMemcpyDeviceToHost));
        for (int64_t i = 0; i < k * n; ++i) {
          const uint16_t ref =
              bf ? trellis_f32_to_bf16(trellis_f16_to_f32(want[i])) : want[i];
          if (got[i] != ref)
            fail_msg("%s K%d %s: W_hat[%lld][%lld] = 0x%04x, want 0x%04x",
                     trellis_codebook_name(cbs[c]), bits, bf ? "bf16" : "fp16",
                     (long long)(i / n), (long long)(i % n), got[i], ref);
        }
      }
      cudaFree(dtr);
      gw_free(&w);
    }
  cudaFree(dst);
  cudaFree(dtables);
  free(tables);
  free(want);
  free(got);
}

/* ----------------------------------------------------- known answers -- */

static tv_b12x_case *cases;
static size_t ncases;

/* rows x cols of src (count_rows rows) repeated cyclically to `rows`. */
static void *repeat_rows(const void *src, int64_t src_rows, int64_t rows,
                         size_t row_bytes) {
  char *out = malloc((size_t)rows * row_bytes);
  assert_non_null(out);
  for (int64_t r = 0; r < rows; ++r)
    memcpy(out + (size_t)r * row_bytes,
           (const char *)src + (size_t)(r % src_rows) * row_bytes, row_bytes);
  return out;
}

/* Every case: y on the GPU against the case's float64 y at m = 1, its m
 * and 260 (dense: both rotations folded for fp16 compute), and forced
 * dense at its m (the output rotation folded), fp16 and bf16 compute. */
static void test_vectors(void **state) {
  (void)state;
  ncases = tv_load_b12x_manifest(&cases);
  assert_true(ncases >= 15);
  for (size_t i = 0; i < ncases; ++i) {
    const tv_b12x_case *c = &cases[i];
    tv_loaded t;
    tv_open(&c->base, &t);
    const trellis_tensor tx = t.x, ty = t.y;
    const trellis_weight *w = &t.layer.weight;
    const int64_t cm = tx.shape[0];
    assert_int_equal(tx.shape[1], w->k);
    uint16_t *x16 = tu_copy_tensor(&tx);
    float *y64 = tu_copy_tensor(&ty);
    const int64_t ms[4] = {1, cm, 260, cm};
    for (int j = 0; j < 4; ++j)
      for (int dt = 0; dt < 2; ++dt) {
        const int64_t m = ms[j];
        const trellis_dtype compute = dt ? TRELLIS_BF16 : TRELLIS_F16;
        const uint32_t flags = j == 3 ? TRELLIS_PLAN_FORCE_DENSE : 0;
        trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F32, flags);
        d.compute_dtype = compute;
        uint16_t *x = repeat_rows(x16, cm, m, (size_t)w->k * 2);
        float *yref = repeat_rows(y64, cm, m, (size_t)w->n * sizeof(float));
        grun g;
        grun_open(&g, w, &d);
        trellis_buffer_sizes sz;
        OK(trellis_plan_query(g.plan, m, &sz));
        assert_int_equal(sz.path,
                         j >= 2 ? TRELLIS_PATH_DENSE : TRELLIS_PATH_GENERIC);
        float *y = grun_forward(&g, x, m, 0); /* y poisoned with NaN first */
        char what[96];
        snprintf(what, sizeof what, "m %lld %s compute (%s)", (long long)m,
                 trellis_dtype_name(compute), trellis_path_name(sz.path));
        const size_t count = (size_t)(m * w->n);
        if (dt)
          check_close(y, yref, count, TOL_BF16_REL, TOL_BF16_MAX, what);
        else
          tu_assert_close(c->base.name, what, y, yref, count, TOL);
        printf("  ok %s %s rel %.2e\n", c->base.name, what,
               tu_rel_l2(y, yref, count));
        free(y);
        free(yref);
        free(x);
        grun_close(&g);
      }
    free(x16);
    free(y64);
    tv_close(&t);
  }
  free(cases);
  cases = NULL;
}

/* ---------------------------------------------------------- capture -- */

/* trellis_run captured once and replayed into a NaN-poisoned y equals the
 * eager run bit for bit. */
static void check_capture(const trellis_weight *w, int64_t m,
                          trellis_path path) {
  void *x = rand_input(m, w->k, TRELLIS_F16, 600);
  trellis_plan_desc d = gu_desc(m, TRELLIS_F16, TRELLIS_F16, 0);
  grun g;
  grun_open(&g, w, &d);
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(g.plan, m, &sz));
  assert_int_equal(sz.path, path);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  float *eager = grun_forward(&g, x, m, s);
  assert_true(tu_all_finite(eager, (size_t)(m * w->n)));
  grun_capture_replay(&g, m, &g.b, s, eager, 3, 1, 1);
  free(eager);
  free(x);
  CK(cudaStreamDestroy(s));
  grun_close(&g);
}

static void test_capture(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 1024, 512, 5, TRELLIS_CB_SQG_FP16, 0, 1, 90);
  check_capture(&w.w, 7, TRELLIS_PATH_GENERIC);
  gw_free(&w);
  gw_random(&w, 256, 384, 3, TRELLIS_CB_SQG_E4M3, 0, 0, 91);
  check_capture(&w.w, 300, TRELLIS_PATH_DENSE);
  gw_free(&w);
  gpair p;
  gpair_random(&p, TRELLIS_PAIR_P24, TRELLIS_RATE_AXIS_K, 768,
               TRELLIS_CB_SQG_E4M3, 92);
  check_capture(&p.w, 5, TRELLIS_PATH_GENERIC);
  gpair_free(&p);
  gpair_random(&p, TRELLIS_PAIR_P33, TRELLIS_RATE_AXIS_N, 512, TRELLIS_CB_MCG,
               93);
  check_capture(&p.w, 300, TRELLIS_PATH_DENSE);
  gpair_free(&p);
}

/* ----------------------------------------------------------- upload -- */

/* Runs a weight's plan once at m = 2 against the CPU reference. */
static void expect_runs(const trellis_weight *host) {
  trellis_plan_desc d = gu_desc(2, TRELLIS_F16, TRELLIS_F32, 0);
  float *ref;
  float *y = gu_forward_vs_ref(host, &d, 2, 31, TRELLIS_F32, &ref, NULL);
  check_close(y, ref, (size_t)(2 * host->n), 1e-4, 1e-3, "uploaded");
  free(y);
  free(ref);
}

static void test_pair_upload(void **state) {
  (void)state;
  const int64_t orth = 256;
  const size_t w0 = trl_pair_record_words(orth, 2);
  const size_t w1 = trl_pair_record_words(orth, 4);
  int16_t *rec0 = malloc(w0 * 2), *rec1 = malloc(w1 * 2);
  uint16_t *suh = malloc((size_t)orth * 2), *svh = malloc(256 * 2);
  assert_true(rec0 && rec1 && suh && svh);
  fill(rec0, w0, 0x1234);
  fill(rec1, w1, 0xBEEF);
  for (int64_t i = 0; i < orth; ++i)
    suh[i] = 0x3C00;
  for (int i = 0; i < 256; ++i)
    svh[i] = 0x2C00;
  trellis_weight h;
  trellis_weight_init(&h);
  h.k = orth;
  h.n = 256;
  h.codebook = TRELLIS_CB_SQG_E4M3;
  h.pair = TRELLIS_PAIR_P24;
  h.rate_axis = TRELLIS_RATE_AXIS_N;
  h.bits = 2;
  h.bits1 = 4;
  h.trellis = rec0; /* two separate host arrays */
  h.trellis1 = rec1;
  h.suh = suh;
  h.svh = svh;
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&h, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  assert_non_null(dw);
  assert_int_equal(dw->pair, TRELLIS_PAIR_P24);
  assert_ptr_equal(dw->trellis1, dw->trellis + w0);
  gu_expect_lanes_payload(&h, dw); /* repacked into the lane layout */
  trellis_device_weight_destroy(dwh);
  expect_runs(&h);
  free(rec0);
  free(rec1);
  free(suh);
  free(svh);
}

static void test_sqg_v1_struct(void **state) {
  (void)state;
  gw g;
  gw_random(&g, 256, 256, 3, TRELLIS_CB_SQG_E4M3, 0, 0, 7);
  /* a caller of the first version: nothing past its struct is read (the
   * bytes after it would be an invalid pair kind), and the handle's view is
   * a full-size uniform weight */
  struct {
    trellis_weight w;
    unsigned char tail[64];
  } host;
  memset(&host, 0xA5, sizeof host);
  memcpy(&host.w, &g.w, TRELLIS_WEIGHT_SIZE_V1);
  host.w.struct_size = (uint32_t)TRELLIS_WEIGHT_SIZE_V1;
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&host.w, &dwh));
  const trellis_weight *dw = trellis_device_weight_view(dwh);
  assert_non_null(dw);
  assert_int_equal(dw->struct_size, sizeof(trellis_weight));
  assert_int_equal(dw->pair, TRELLIS_PAIR_NONE);
  assert_null(dw->trellis1);
  gu_expect_lanes_payload(&g.w, dw);
  trellis_plan_desc d = gu_desc(4, TRELLIS_F16, TRELLIS_F32, 0);
  trellis_plan *plan = NULL;
  OK(trellis_plan_create(dw, &d, &plan));
  trellis_plan_destroy(plan);
  trellis_device_weight_destroy(dwh);
  const unsigned char *bytes = (const unsigned char *)&host;
  for (size_t i = TRELLIS_WEIGHT_SIZE_V1; i < sizeof host; ++i)
    assert_int_equal(bytes[i], 0xA5);
  expect_runs(&g.w);

  g.w.codebook = TRELLIS_CB_SQG_FP16;
  g.w.bits = 5;
  g.w.k = 128; /* 8 x 16 tiles of 80 words fit in the K3 payload */
  expect_runs(&g.w);
  gw_free(&g);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pair_upload),  cmocka_unit_test(test_sqg_v1_struct),
      cmocka_unit_test(test_vectors),      cmocka_unit_test(test_capture),
      cmocka_unit_test(test_sqg_random),   cmocka_unit_test(test_pair_random),
      cmocka_unit_test(test_pair_split_k),
  };
  return TU_RUN_TESTS("gpu_b12x", tests);
}
