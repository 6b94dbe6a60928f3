/* SPDX-License-Identifier: Apache-2.0 */
/* The lane layout on the GPU (FORMAT.md, "The lane layout"):
 *   - trellis_weight_repack equals trellis_weight_repack_host bit for bit,
 *     every K 1..8 and every pair kind on both axes, out of place and in
 *     place, on a stream;
 *   - its errors: NULL, misaligned or host buffers, a weight already in the
 *     lane layout;
 *   - plans refuse the checkpoint layout; a framework's weight repacked on
 *     the device runs exactly as the same weight uploaded;
 *   - W_hat decoded from the lane layout by the reconstruct kernel (the
 *     decode-GEMM's window fetch, cuda/lanes.cuh) equals
 *     trellis_decode_weight bit for bit at every K and procedural codebook,
 *     fp16 and bf16, for a column slice too. */
#include "gpu_util.h"

#include "format/pair.h"

/* `bytes` of device memory equal `host`. */
static void expect_device_bytes(const void *device, const void *host,
                                size_t bytes, const char *what) {
  void *back = malloc(bytes);
  assert_non_null(back);
  CK(cudaMemcpy(back, device, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(back, host, bytes) != 0)
    fail_msg("%s: the device repack differs from the host's", what);
  free(back);
}

/* Device copies of a host weight's payload records and scales, in the
 * checkpoint layout: what a framework holds. */
typedef struct dweight {
  trellis_weight w;
  void *rec[2], *suh, *svh;
  size_t bytes[2];
} dweight;

static void dweight_open(dweight *d, const trellis_weight *host) {
  memset(d, 0, sizeof *d);
  d->w = *host;
  const size_t all = trellis_weight_payload_bytes(host);
  d->bytes[0] =
      host->pair == TRELLIS_PAIR_NONE
          ? all
          : 2 * trl_pair_record_words(
                    host->rate_axis == TRELLIS_RATE_AXIS_N ? host->k : host->n,
                    host->bits);
  d->bytes[1] = all - d->bytes[0];
  d->rec[0] = dev_copy(host->trellis, d->bytes[0]);
  d->w.trellis = d->rec[0];
  if (host->pair != TRELLIS_PAIR_NONE) {
    d->rec[1] = dev_copy(host->trellis1, d->bytes[1]);
    d->w.trellis1 = d->rec[1];
  }
  d->suh = dev_copy(host->suh, (size_t)host->k * 2);
  d->svh = dev_copy(host->svh, (size_t)host->n * 2);
  d->w.suh = d->suh;
  d->w.svh = d->svh;
}

static void dweight_close(dweight *d) {
  for (int r = 0; r < 2; ++r)
    cudaFree(d->rec[r]);
  cudaFree(d->suh);
  cudaFree(d->svh);
  memset(d, 0, sizeof *d);
}

/* The device repack of `host` out of place and in place against the host
 * repack. */
static void check_repack(const trellis_weight *host, cudaStream_t s,
                         const char *what) {
  const size_t all = trellis_weight_payload_bytes(host);
  int16_t *want = malloc(all);
  assert_non_null(want);
  dweight d;
  dweight_open(&d, host);
  const int pair = host->pair != TRELLIS_PAIR_NONE;
  int16_t *want1 = pair ? want + d.bytes[0] / 2 : NULL;
  OK(trellis_weight_repack_host(host, want, want1));
  void *out[2] = {NULL, NULL};
  for (int r = 0; r < 1 + pair; ++r) {
    CK(cudaMalloc(&out[r], d.bytes[r]));
    CK(cudaMemsetAsync(out[r], 0xA5, d.bytes[r], s)); /* ordered on s */
  }
  OK(trellis_weight_repack(&d.w, out[0], out[1], s));
  CK(cudaStreamSynchronize(s));
  char text[96];
  snprintf(text, sizeof text, "%s out of place", what);
  expect_device_bytes(out[0], want, d.bytes[0], text);
  if (pair)
    expect_device_bytes(out[1], want1, d.bytes[1], text);
  /* the source is unchanged; then in place */
  expect_device_bytes(d.rec[0], host->trellis, d.bytes[0], what);
  OK(trellis_weight_repack(&d.w, d.rec[0], pair ? d.rec[1] : NULL, s));
  CK(cudaStreamSynchronize(s));
  snprintf(text, sizeof text, "%s in place", what);
  expect_device_bytes(d.rec[0], want, d.bytes[0], text);
  if (pair)
    expect_device_bytes(d.rec[1], want1, d.bytes[1], text);
  for (int r = 0; r < 2; ++r)
    cudaFree(out[r]);
  dweight_close(&d);
  free(want);
}

static void test_repack_uniform(void **state) {
  (void)state;
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int bits = 1; bits <= 8; ++bits) {
    gw w;
    gw_random(&w, 256, 384, bits, TRELLIS_CB_MCG, 0, 0, 500 + bits);
    char what[32];
    snprintf(what, sizeof what, "K%d", bits);
    check_repack(&w.w, s, what);
    gw_free(&w);
  }
  CK(cudaStreamDestroy(s));
}

/* A random pair of `kind` on `axis` (orth: the other dimension). */
static void pair_random(trellis_weight *w, int16_t **rec, uint16_t **scales,
                        trellis_pair_kind kind, trellis_rate_axis axis,
                        int64_t orth, uint64_t seed) {
  const int64_t k = axis == TRELLIS_RATE_AXIS_N ? orth : TRL_PAIR_CHANNELS;
  const int64_t n = axis == TRELLIS_RATE_AXIS_N ? TRL_PAIR_CHANNELS : orth;
  const size_t w0 = trl_pair_record_words(orth, trl_pair_bits0(kind));
  const size_t w1 = trl_pair_record_words(orth, trl_pair_bits1(kind));
  rec[0] = malloc(w0 * 2);
  rec[1] = malloc(w1 * 2);
  scales[0] = malloc((size_t)k * 2);
  scales[1] = malloc((size_t)n * 2);
  assert_true(rec[0] && rec[1] && scales[0] && scales[1]);
  synth_rng r;
  synth_seed(&r, seed);
  synth_words(&r, rec[0], w0);
  synth_words(&r, rec[1], w1);
  synth_scales(&r, scales[0], (size_t)k, 1.0 / sqrt((double)k));
  synth_scales(&r, scales[1], (size_t)n, 1.0);
  trellis_weight_init(w);
  w->k = k;
  w->n = n;
  w->codebook = TRELLIS_CB_MCG;
  w->pair = kind;
  w->rate_axis = axis;
  w->bits = trl_pair_bits0(kind);
  w->bits1 = trl_pair_bits1(kind);
  w->trellis = rec[0];
  w->trellis1 = rec[1];
  w->suh = scales[0];
  w->svh = scales[1];
  OK(trellis_weight_validate(w));
}

static void test_repack_pairs(void **state) {
  (void)state;
  const trellis_pair_kind kinds[] = {TRELLIS_PAIR_P22, TRELLIS_PAIR_P24,
                                     TRELLIS_PAIR_P33, TRELLIS_PAIR_P43,
                                     TRELLIS_PAIR_P44};
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; ++i)
    for (int axis = 0; axis < 2; ++axis) {
      const trellis_rate_axis ax =
          axis ? TRELLIS_RATE_AXIS_K : TRELLIS_RATE_AXIS_N;
      trellis_weight w;
      int16_t *rec[2];
      uint16_t *scales[2];
      pair_random(&w, rec, scales, kinds[i], ax, 384, 600 + 2 * i + axis);
      char what[48];
      snprintf(what, sizeof what, "%s axis %s",
               trellis_pair_kind_name(kinds[i]), trellis_rate_axis_name(ax));
      check_repack(&w, s, what);
      free(rec[0]);
      free(rec[1]);
      free(scales[0]);
      free(scales[1]);
    }
  CK(cudaStreamDestroy(s));
}

static void test_repack_errors(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 256, 256, 3, TRELLIS_CB_MCG, 0, 0, 700);
  dweight d;
  dweight_open(&d, &w.w);
  void *out = NULL;
  CK(cudaMalloc(&out, d.bytes[0] + 16));
  trellis_clear_error();
  tu_assert_status(trellis_weight_repack(NULL, out, NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_weight_repack(&d.w, NULL, NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("out");
  tu_assert_status(trellis_weight_repack(&d.w, (int16_t *)out + 4, NULL, NULL),
                   TRELLIS_ERR_BUFFER);
  tu_assert_error_has("16-byte aligned");
  trellis_weight mis = d.w;
  mis.trellis = (const int16_t *)d.rec[0] + 4;
  tu_assert_status(trellis_weight_repack(&mis, out, NULL, NULL),
                   TRELLIS_ERR_BUFFER);
  /* host memory is not device memory */
  tu_assert_status(trellis_weight_repack(&w.w, out, NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  int16_t *host_out = malloc(d.bytes[0]);
  tu_assert_status(trellis_weight_repack(&d.w, host_out, NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  free(host_out);
  /* a weight already in the lane layout */
  trellis_weight lanes = d.w;
  lanes.layout = TRELLIS_LAYOUT_LANES;
  tu_assert_status(trellis_weight_repack(&lanes, out, NULL, NULL),
                   TRELLIS_ERR_LAYOUT);
  tu_assert_error_has("checkpoint layout");
  /* nothing was written by the refused calls */
  expect_device_bytes(d.rec[0], w.trellis, d.bytes[0], "refused repacks");
  cudaFree(out);
  dweight_close(&d);
  gw_free(&w);

  /* a pair needs out1 */
  trellis_weight p;
  int16_t *rec[2];
  uint16_t *scales[2];
  pair_random(&p, rec, scales, TRELLIS_PAIR_P24, TRELLIS_RATE_AXIS_N, 256, 701);
  dweight dp;
  dweight_open(&dp, &p);
  tu_assert_status(trellis_weight_repack(&dp.w, dp.rec[0], NULL, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("out1");
  tu_assert_status(
      trellis_weight_repack(&dp.w, dp.rec[0], (int16_t *)dp.rec[1] + 2, NULL),
      TRELLIS_ERR_BUFFER);
  dweight_close(&dp);
  for (int r = 0; r < 2; ++r) {
    free(rec[r]);
    free(scales[r]);
  }
}

/* Runs `plan` once on x (fp16, m rows) into a fresh fp32 y (host copy). */
static float *run_once(trellis_plan *plan, const trellis_weight *w,
                       const void *x, int64_t m) {
  trellis_buffer_sizes sz;
  OK(trellis_plan_query(plan, m, &sz));
  trellis_buffers b;
  trellis_buffers_init(&b);
  b.rotated_bytes = sz.rotated_bytes;
  b.workspace_bytes = sz.workspace_bytes;
  CK(cudaMalloc(&b.rotated, sz.rotated_bytes ? sz.rotated_bytes : 16));
  if (sz.workspace_bytes)
    CK(cudaMalloc(&b.workspace, sz.workspace_bytes));
  void *dx = dev_copy(x, (size_t)(m * w->k) * 2), *dy = NULL;
  const size_t yb = (size_t)(m * w->n) * 4;
  CK(cudaMalloc(&dy, yb));
  CK(cudaMemset(dy, 0xFF, yb));
  OK(trellis_run(plan, dx, m, dy, &b, NULL));
  CK(cudaDeviceSynchronize());
  float *y = malloc(yb);
  CK(cudaMemcpy(y, dy, yb, cudaMemcpyDeviceToHost));
  cudaFree(b.rotated);
  cudaFree(b.workspace);
  cudaFree(dx);
  cudaFree(dy);
  return y;
}

/* A framework's flow: its tensors (checkpoint layout) are refused by the
 * plan, repacked in place on the device they run exactly as the upload,
 * on the split-K decode-GEMM and on the dense path (within the bounds of
 * gpu_generic against the CPU reference). */
static void test_plan_reads_lanes(void **state) {
  (void)state;
  gw w;
  gw_random(&w, 512, 384, 4, TRELLIS_CB_3INST, 0, 0, 800);
  dweight d;
  dweight_open(&d, &w.w);
  trellis_plan *plan = NULL;
  const uint32_t flags[] = {TRELLIS_PLAN_FORCE_GENERIC |
                                TRELLIS_PLAN_LEGACY_KERNELS,
                            TRELLIS_PLAN_FORCE_DENSE};
  trellis_plan_desc desc = gu_desc(24, TRELLIS_F16, TRELLIS_F32, flags[0]);
  trellis_clear_error();
  tu_assert_status(trellis_plan_create(&d.w, &desc, &plan), TRELLIS_ERR_LAYOUT);
  assert_null(plan);
  tu_assert_error_has("trellis_weight_repack");
  OK(trellis_weight_repack(&d.w, d.rec[0], NULL, NULL));
  d.w.layout = TRELLIS_LAYOUT_LANES;
  trellis_device_weight *dwh = NULL;
  OK(trellis_weight_upload(&w.w, &dwh));
  void *x = rand_input(24, w.w.k, TRELLIS_F16, 801);
  float *ref = cpu_ref(&w.w, x, TRELLIS_F16, 24, TRELLIS_F32);
  for (int f = 0; f < 2; ++f) {
    desc.flags = flags[f];
    trellis_plan *mine = NULL, *up = NULL;
    OK(trellis_plan_create(&d.w, &desc, &mine));
    OK(trellis_plan_create(trellis_device_weight_view(dwh), &desc, &up));
    OK(trellis_plan_prepare(mine));
    OK(trellis_plan_prepare(up));
    float *a = run_once(mine, &w.w, x, 24), *b = run_once(up, &w.w, x, 24);
    check_close(a, ref, (size_t)(24 * w.w.n), f ? 6e-4 : 1e-4, f ? 3e-3 : 1e-3,
                f ? "dense" : "generic");
    assert_memory_equal(a, b, (size_t)(24 * w.w.n) * 4);
    free(a);
    free(b);
    trellis_plan_destroy(mine);
    trellis_plan_destroy(up);
  }
  free(x);
  free(ref);
  trellis_device_weight_destroy(dwh);
  dweight_close(&d);
  gw_free(&w);
}

/* W_hat from the lane layout, every K and procedural codebook: the whole
 * matrix and the slice of columns [128, 256), fp16 and bf16. */
static void test_reconstruct_exact(void **state) {
  (void)state;
  const trellis_codebook cbs[] = {TRELLIS_CB_3INST, TRELLIS_CB_MCG,
                                  TRELLIS_CB_MUL1};
  const int64_t k = 256, n = 384;
  uint16_t *want = malloc((size_t)(k * n) * 2),
           *got = malloc((size_t)(k * n) * 2);
  assert_true(want && got);
  void *dst = NULL;
  CK(cudaMalloc(&dst, (size_t)(k * n) * 2));
  for (size_t c = 0; c < sizeof cbs / sizeof cbs[0]; ++c)
    for (int bits = 1; bits <= 8; ++bits) {
      gw w;
      gw_random(&w, k, n, bits, cbs[c], 0, 0, 900 + 8 * c + (uint64_t)bits);
      OK(trellis_decode_weight(&w.w, want));
      trellis_device_weight *dwh = NULL;
      OK(trellis_weight_upload(&w.w, &dwh));
      const trellis_weight *v = trellis_device_weight_view(dwh);
      for (int slice = 0; slice < 2; ++slice)
        for (int bf = 0; bf < 2; ++bf) {
          trl_reconstruct_args r;
          memset(&r, 0, sizeof r);
          r.trellis = v->trellis;
          r.bits = bits;
          r.codebook = cbs[c];
          r.k = k;
          r.n = n;
          r.n0 = slice ? 128 : 0;
          r.n_cols = r.ldd = slice ? 128 : n;
          r.dst = dst;
          r.dst_dtype = bf ? TRELLIS_BF16 : TRELLIS_F16;
          CK(cudaMemset(dst, 0xFF, (size_t)(k * n) * 2));
          assert_int_equal(trl_launch_reconstruct(TRL_RECON_PLAIN, &r, NULL),
                           0);
          CK(cudaDeviceSynchronize());
          CK(cudaMemcpy(got, dst, (size_t)(k * r.n_cols) * 2,
                        cudaMemcpyDeviceToHost));
          for (int64_t i = 0; i < k * r.n_cols; ++i) {
            const int64_t row = i / r.n_cols, col = r.n0 + i % r.n_cols;
            const uint16_t h = want[row * n + col];
            const uint16_t ref =
                bf ? trellis_f32_to_bf16(trellis_f16_to_f32(h)) : h;
            if (got[i] != ref)
              fail_msg("%s K%d %s cols %lld..: W_hat[%lld][%lld] = 0x%04x, "
                       "want 0x%04x",
                       trellis_codebook_name(cbs[c]), bits,
                       bf ? "bf16" : "fp16", (long long)r.n0, (long long)row,
                       (long long)col, got[i], ref);
          }
        }
      trellis_device_weight_destroy(dwh);
      gw_free(&w);
    }
  cudaFree(dst);
  free(want);
  free(got);
}

int main(void) {
  TU_REQUIRE_GPU();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_repack_uniform),
      cmocka_unit_test(test_repack_pairs),
      cmocka_unit_test(test_repack_errors),
      cmocka_unit_test(test_plan_reads_lanes),
      cmocka_unit_test(test_reconstruct_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
