/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers for the cmocka test programs.
 *
 * Include order in a test file:
 *     #include <stdarg.h> / <stddef.h> / <setjmp.h> / <stdint.h>
 *     #include <cmocka.h>
 *     #include "testutil.h"
 * (testutil.h includes those four headers and cmocka.h itself, so including
 * only "testutil.h" is enough.)
 *
 * Helpers that "assert" use cmocka's assertions: call them from inside a
 * running test. Every pointer returned as "malloc'd" is freed by the caller
 * with free().
 *
 * Compile definitions (set by tests/CMakeLists.txt):
 *   TRELLIS_TEST_DATA  tests/data (TU_TV_DIR is its testvectors folder)
 *   TRELLIS_CLI_PATH   the built `trellis` command-line tool
 */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "trellis.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TU_TV_DIR TRELLIS_TEST_DATA "/testvectors"
#define TU_TOY_MODEL TU_TV_DIR "/toy-exl3-model"
/* ExLlamaV3 1.6's half-integer rates (EXL3-1.6 §1) and its toy model */
#define TU_TV_HALF "half"
#define TU_TOY16_MODEL TU_TV_DIR "/half/toy-exl3-1.6-model"
/* six layers ExLlamaV3 1.6.5's own quantizer wrote (y_exact references) */
#define TU_TV_REAL "exl3-real"
/* testvectors/b12x: the b12x formats (tv_load_b12x_manifest) */
#define TU_TV_B12X "b12x"

/* ------------------------------------------------------------- paths -- */

/* "a/b" (no doubled '/'); malloc'd. */
char *tu_join(const char *a, const char *b);
/* TU_TV_DIR "/" name; malloc'd. */
char *tu_tv_path(const char *name);

/* A per-process temporary directory (mkdtemp under /tmp), created on first
 * use and removed with its contents at exit. */
const char *tu_tmpdir(void);
/* tu_tmpdir() "/" name; malloc'd. */
char *tu_tmp_path(const char *name);

/* SHA-256 (the library's, core/sha256.h) of `count` uint16 values as
 * little-endian bytes, as 64 hex digits. */
void tu_sha256_u16_hex(const uint16_t *v, size_t count, char hex[65]);

/* Writes (creates/truncates) a file; asserts on failure. */
void tu_write_file(const char *path, const void *data, size_t size);
/* Reads a whole file; asserts on failure. malloc'd; *size gets the length. */
uint8_t *tu_read_file(const char *path, size_t *size);
/* tu_read_file as a NUL-terminated string; malloc'd. */
char *tu_read_text(const char *path);

/* ------------------------------------------------------ test vectors -- */

typedef struct tv_case {
  char set[32];    /* "" (testvectors/), TU_TV_HALF, TU_TV_REAL or TU_TV_B12X */
  char name[96];   /* file stem: NAME.safetensors, NAME.ref.safetensors */
  char layer[128]; /* layer prefix inside NAME.safetensors */
  int64_t k, n, m;
  int bits;
  int half; /* 1: K = bits + 1/2 (the manifest says e.g. 2.5) */
  trellis_codebook codebook;
  int legacy_signs, bias; /* 0 or 1 */
} tv_case;

/* Loads testvectors/manifest.json; *cases is malloc'd. Asserts on failure. */
size_t tv_load_manifest(tv_case **cases);
/* The same for the set testvectors/SET/manifest.json ("" is the top). */
size_t tv_load_manifest_set(const char *set, tv_case **cases);
/* Every case of the three sets (top, half, exl3-real), malloc'd. */
size_t tv_load_all(tv_case **cases);

typedef struct tv_loaded {
  trellis_model *model;   /* NAME.safetensors */
  trellis_layer layer;    /* c->layer, host pointers into the model */
  trellis_file *ref;      /* NAME.ref.safetensors */
  trellis_tensor x;       /* F16 [m, k] */
  trellis_tensor w_hat;   /* F16 [k, n] */
  trellis_tensor w_dense; /* F32 [k, n]; nbytes 0 when the set has none */
  trellis_tensor y;       /* F32 [m, n]: y, or y_exact where the set has it
                             (exl3-real: ExLlamaV3's own y is not exact) */
} tv_loaded;

/* Opens one case (asserts on failure, printing trellis_last_error()). */
void tv_open(const tv_case *c, tv_loaded *out);
void tv_close(tv_loaded *t);

/* A case of testvectors/b12x/manifest.json: `base` as a tv_case of the set
 * TU_TV_B12X (tv_open opens it; bits: a uniform layer's K, 0 for a pair),
 * and a pair's kind and rate axis (TRELLIS_PAIR_NONE for a uniform layer). */
typedef struct tv_b12x_case {
  tv_case base;
  trellis_pair_kind pair;
  trellis_rate_axis axis;
} tv_b12x_case;

/* Loads testvectors/b12x/manifest.json; *cases is malloc'd. Asserts on
 * failure. */
size_t tv_load_b12x_manifest(tv_b12x_case **cases);

/* The checks every set's cases take (c->name in the messages):
 * trellis_decode_weight equals w_hat bit for bit; trellis_dense_weight and
 * trellis_cpu_forward (fp16 and fp32 x, fp32 and fp16 y, 1 and 2 threads)
 * match w_dense and y within tu_assert_close's `tol`. */
void tv_check_w_hat(const tv_case *c, const tv_loaded *t);
void tv_check_w_dense(const tv_case *c, const tv_loaded *t, double tol);
void tv_check_cpu_forward(const tv_case *c, const tv_loaded *t, double tol);

/* ------------------------------------------------------------ metrics -- */

/* ||got - ref|| / ||ref|| in double (||got - ref|| when ref is all zero). */
double tu_rel_l2(const float *got, const float *ref, size_t n);
double tu_max_abs_diff(const float *got, const float *ref, size_t n);
double tu_max_abs(const float *v, size_t n);
int tu_all_finite(const float *v, size_t n);
/* fp16/bf16 bit arrays -> float (dst may not alias src). */
void tu_f16_to_f32(const uint16_t *src, float *dst, size_t n);
void tu_bf16_to_f32(const uint16_t *src, float *dst, size_t n);
/* Asserts `got` is finite, rel L2 <= tol and max|got - ref| <= tol *
 * max|ref|; the failure names `name` and `what`. */
void tu_assert_close(const char *name, const char *what, const float *got,
                     const float *ref, size_t count, double tol);

/* A mapped tensor copied into malloc'd memory (mapped data need not be
 * aligned for its dtype). */
void *tu_copy_tensor(const trellis_tensor *t);
/* trellis_cpu_forward of x (fp16 bits, m rows of w->k; converted when `xdt`
 * is f32) into a NaN-filled y of `ydt`, asserted TRELLIS_OK; y as float
 * (m * w->n), malloc'd. */
float *tu_cpu_forward_f32(const trellis_weight *w, const uint16_t *x16,
                          int64_t m, trellis_dtype xdt, trellis_dtype ydt,
                          int threads);

/* ---------------------------------------------- safetensors builders -- */

/* One tensor to serialise; dtype is the safetensors string ("F16", ...). */
typedef struct tu_st_tensor {
  const char *name;
  const char *dtype;
  int ndim;
  int64_t shape[TRELLIS_MAX_DIMS];
  const void *data; /* nbytes bytes, or NULL for zeros */
  size_t nbytes;
} tu_st_tensor;

/* A valid safetensors image of `count` tensors laid out in order, header
 * padded with spaces to a multiple of 8. malloc'd; *size gets the length. */
uint8_t *tu_st_build(const tu_st_tensor *t, size_t count, size_t *size);
/* A raw image: 8-byte length of `header` (strlen), header, then `data_size`
 * bytes of `data` (zeros when data is NULL). For hand-made bad headers. */
uint8_t *tu_st_raw(const char *header, const void *data, size_t data_size,
                   size_t *size);
/* Same with an explicit header length field (may lie about the header). */
uint8_t *tu_st_raw_len(uint64_t length_field, const char *header,
                       const void *data, size_t data_size, size_t *size);

/* A synthetic model directory (tools/synth_model.h) of `blocks` blocks of
 * `preset` at `bits` (its head at head_bits, a 256-token vocabulary) under
 * tu_tmpdir(): `odd_cb` >= 0 gives the odd blocks that codebook. The caller
 * frees the path. */
char *tu_write_synth(const char *name, const char *preset, int blocks,
                     double bits, int head_bits, trellis_codebook cb,
                     int odd_cb);

/* ------------------------------------------------- hostile files -- */

/* A fresh copy of the toy model (config, index, two shards) in
 * tu_tmpdir(); its malloc'd directory. */
char *tu_copy_toy(void);
/* Replaces dir/name by a FIFO (when `fifo`) or a symbolic link to
 * `target`. */
void tu_replace_entry(const char *dir, const char *name, int fifo,
                      const char *target);
/* A safetensors header (JSON) of `count` empty U8 tensors, the smallest
 * entries there are; malloc'd, *len gets its length. */
char *tu_many_tensors_header(size_t count, size_t *len);
/* Writes a K8 layer `prefix` (suh, svh of 1.0, trellis) of k x n whose
 * tensors all start misaligned (an odd header length) and whose payload is
 * a sparse hole of k * n bytes, so that only copying it costs memory.
 * Returns the payload bytes. */
size_t tu_write_odd_sparse_layer(const char *path, const char *prefix,
                                 int64_t k, int64_t n);

/* Asserts `got == want`; on mismatch fails printing both status names and
 * trellis_last_error(). */
#define tu_assert_status(got, want)                                            \
  tu_assert_status_at((got), (want), __FILE__, __LINE__)
void tu_assert_status_at(trellis_status got, trellis_status want,
                         const char *file, int line);
/* Asserts that trellis_last_error() contains `needle`. */
#define tu_assert_error_has(needle)                                            \
  tu_assert_error_has_at((needle), __FILE__, __LINE__)
void tu_assert_error_has_at(const char *needle, const char *file, int line);

/* ----------------------------------------------------- running a tool -- */

/* How tu_run_tool runs the child; all zero (or NULL) is a plain run. */
typedef struct tu_run_opts {
  uint64_t fsize;      /* RLIMIT_FSIZE in bytes (0: no limit) */
  int sig;             /* sent to the child signal_after_ms after it starts */
  int signal_after_ms; /* (sig 0: nothing is sent) */
  int watchdog_s;      /* still running after this: killed, the test fails
                          (0: waits as long as it takes) */
} tu_run_opts;

typedef struct tu_run_result {
  int code;       /* exit code, or 128 + the signal that ended it */
  char *out;      /* stdout, NUL-terminated; free with tu_run_free */
  char *err;      /* stderr, likewise */
  double secs;    /* wall time from start to exit */
  long maxrss_kb; /* the child's own peak resident memory (wait4) */
} tu_run_result;

/* Runs the program `tool` (a path, e.g. TRELLIS_CLI_PATH) with `args`
 * (NULL-terminated, without argv[0], at most 30): stdin from /dev/null,
 * stdout and stderr into files in tu_tmpdir() that are read back. `opts`
 * may be NULL. Asserts when the child cannot be started or waited for. */
tu_run_result tu_run_tool(const char *tool, const char *const *args,
                          const tu_run_opts *opts);
void tu_run_free(tu_run_result *r);

/* ---------------------------------------------------------------- GPU -- */

/* 1 when trellis_cuda_device_count() > 0. */
int tu_gpu_available(void);
/* Call first in main() of a gpu_*.c test: exits 77 (CTest "skipped") when
 * there is no usable CUDA device. */
void tu_require_gpu(void);
#define TU_REQUIRE_GPU() tu_require_gpu()

#ifdef __cplusplus
}
#endif

/* Runs a group; TRELLIS_TEST_FILTER (a cmocka glob such as
 * "test_every_variant") limits it to the tests it matches, for the slow
 * sanitizer runs. */
#define TU_RUN_TESTS(name, tests)                                              \
  (getenv("TRELLIS_TEST_FILTER") && *getenv("TRELLIS_TEST_FILTER")             \
       ? cmocka_set_test_filter(getenv("TRELLIS_TEST_FILTER"))                 \
       : (void)0,                                                              \
   cmocka_run_group_tests_name(name, tests, NULL, NULL))

#endif
