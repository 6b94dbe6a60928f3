/* SPDX-License-Identifier: Apache-2.0 */
/* What the threading rules of trellis.h promise, tested: many threads on
 * one model and on one layer (fetching, realigning, decoding, running the
 * CPU forward, which starts threads of its own), files read from many
 * threads, and a model closed while other threads hold it and compute on
 * its layers. .ci/run runs this program under ThreadSanitizer too.
 *
 * cmocka's assertions are not thread-safe: workers count their failures
 * and keep the first message; the main thread asserts. */
#include "testutil.h"

#include "io/model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define THREADS 8
#define ROWS 3

static const char *const toy_layer = "model.layers.1.mlp.up_proj";

typedef struct outcome {
  int failures;
  char first[512];
} outcome;

static void record(outcome *o, const char *what, trellis_status st) {
  if (o->failures++ == 0)
    snprintf(o->first, sizeof o->first, "%s: %s (%s)", what,
             trellis_status_name(st), trellis_last_error());
}

static void assert_no_failures(const outcome *o, int count) {
  for (int i = 0; i < count; i++)
    if (o[i].failures)
      fail_msg("thread %d: %d failure(s), the first: %s", i, o[i].failures,
               o[i].first);
}

/* x for a layer of k inputs: fp16 values of a small fixed pattern. */
static uint16_t *make_x(int64_t k) {
  uint16_t *x = malloc((size_t)(ROWS * k) * 2);
  assert_non_null(x);
  for (int64_t i = 0; i < ROWS * k; i++)
    x[i] = trellis_f32_to_f16((float)((i * 37) % 17 - 8) / 8.0f);
  return x;
}

/* y = forward(w, x) as fp32 into a malloc'd buffer, or NULL with *st. */
static float *forward(const trellis_weight *w, const uint16_t *x, int threads,
                      trellis_status *st) {
  size_t ws_bytes = trellis_cpu_workspace_size(w, ROWS, threads);
  void *ws = malloc(ws_bytes ? ws_bytes : 1);
  float *y = malloc((size_t)(ROWS * w->n) * sizeof *y);
  *st = ws && y ? trellis_cpu_forward(w, x, TRELLIS_F16, ROWS, y, TRELLIS_F32,
                                      ws, ws_bytes, threads)
                : TRELLIS_ERR_OUT_OF_MEMORY;
  free(ws);
  if (*st != TRELLIS_OK) {
    free(y);
    return NULL;
  }
  return y;
}

/* ------------------------------------------- one model, many threads -- */

typedef struct model_job {
  const trellis_model *m;
  size_t count;
  uint16_t **x;
  float **want; /* per layer */
  int start;
  outcome out;
} model_job;

/* Every layer, from a different starting point in each thread: fetched by
 * index and by name, described, run (with 2 threads of its own). */
static void *model_worker(void *arg) {
  model_job *j = arg;
  for (size_t r = 0; r < j->count; r++) {
    size_t i = (r + (size_t)j->start) % j->count;
    trellis_layer by_index, by_name;
    trellis_layer_info info;
    trellis_status st = trellis_model_layer(j->m, i, &by_index);
    if (st != TRELLIS_OK) {
      record(&j->out, "trellis_model_layer", st);
      continue;
    }
    st = trellis_model_find_layer(j->m, by_index.name, &by_name);
    if (st == TRELLIS_OK)
      st = trellis_model_layer_info(j->m, i, &info);
    if (st != TRELLIS_OK) {
      record(&j->out, "find_layer / layer_info", st);
      continue;
    }
    if (by_name.weight.trellis != by_index.weight.trellis ||
        info.k != by_index.weight.k)
      record(&j->out, "the same layer by name and by index", TRELLIS_OK);
    float *y = forward(&by_name.weight, j->x[i], 2, &st);
    if (!y) {
      record(&j->out, "trellis_cpu_forward", st);
      continue;
    }
    if (memcmp(y, j->want[i], (size_t)(ROWS * by_name.weight.n) * sizeof *y))
      record(&j->out, "a forward differs from the one-thread result",
             TRELLIS_OK);
    free(y);
  }
  return NULL;
}

static void run_threads(void *(*fn)(void *), void *jobs, size_t job_size,
                        int count) {
  pthread_t t[THREADS];
  for (int i = 0; i < count; i++)
    assert_int_equal(
        pthread_create(&t[i], NULL, fn, (char *)jobs + (size_t)i * job_size),
        0);
  for (int i = 0; i < count; i++)
    assert_int_equal(pthread_join(t[i], NULL), 0);
}

static void test_one_model_many_threads(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  size_t count = trellis_model_layer_count(m);
  assert_true(count > 4);
  uint16_t **x = calloc(count, sizeof *x);
  float **want = calloc(count, sizeof *want);
  assert_non_null(x);
  assert_non_null(want);
  for (size_t i = 0; i < count; i++) {
    trellis_layer L;
    tu_assert_status(trellis_model_layer(m, i, &L), TRELLIS_OK);
    x[i] = make_x(L.weight.k);
    trellis_status st;
    want[i] = forward(&L.weight, x[i], 1, &st);
    tu_assert_status(st, TRELLIS_OK);
  }
  model_job jobs[THREADS];
  for (int i = 0; i < THREADS; i++)
    jobs[i] = (model_job){m, count, x, want, i * 3, {0, ""}};
  run_threads(model_worker, jobs, sizeof *jobs, THREADS);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++)
    outs[i] = jobs[i].out;
  assert_no_failures(outs, THREADS);
  for (size_t i = 0; i < count; i++) {
    free(x[i]);
    free(want[i]);
  }
  free(x);
  free(want);
  trellis_model_close(m);
}

/* ------------------------------------------- one layer, many threads -- */

typedef struct layer_job {
  const trellis_weight *w;
  const uint16_t *x;
  const float *want;
  const uint16_t *w_hat;
  outcome out;
} layer_job;

static void *layer_worker(void *arg) {
  layer_job *j = arg;
  size_t kn = (size_t)j->w->k * (size_t)j->w->n;
  uint16_t *w_hat = malloc(kn * 2);
  for (int rep = 0; rep < 3; rep++) {
    trellis_status st;
    float *y = forward(j->w, j->x, rep, &st); /* 0 = one thread per core */
    if (!y)
      record(&j->out, "trellis_cpu_forward", st);
    else if (memcmp(y, j->want, (size_t)(ROWS * j->w->n) * sizeof *y))
      record(&j->out, "a forward differs", TRELLIS_OK);
    free(y);
    st = w_hat ? trellis_decode_weight(j->w, w_hat) : TRELLIS_ERR_OUT_OF_MEMORY;
    if (st != TRELLIS_OK)
      record(&j->out, "trellis_decode_weight", st);
    else if (memcmp(w_hat, j->w_hat, kn * 2))
      record(&j->out, "a decode differs", TRELLIS_OK);
    st = trellis_weight_check_values(j->w);
    if (st != TRELLIS_OK)
      record(&j->out, "trellis_weight_check_values", st);
  }
  free(w_hat);
  return NULL;
}

static void test_one_layer_many_threads(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  trellis_layer L;
  tu_assert_status(trellis_model_find_layer(m, toy_layer, &L), TRELLIS_OK);
  uint16_t *x = make_x(L.weight.k);
  trellis_status st;
  float *want = forward(&L.weight, x, 1, &st);
  tu_assert_status(st, TRELLIS_OK);
  uint16_t *w_hat = malloc((size_t)L.weight.k * (size_t)L.weight.n * 2);
  assert_non_null(w_hat);
  tu_assert_status(trellis_decode_weight(&L.weight, w_hat), TRELLIS_OK);
  layer_job jobs[THREADS];
  for (int i = 0; i < THREADS; i++)
    jobs[i] = (layer_job){&L.weight, x, want, w_hat, {0, ""}};
  run_threads(layer_worker, jobs, sizeof *jobs, THREADS);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++)
    outs[i] = jobs[i].out;
  assert_no_failures(outs, THREADS);
  free(w_hat);
  free(want);
  free(x);
  trellis_model_close(m);
}

/* ---------------------------- a lazy layer realigned by many at once -- */

typedef struct lazy_job {
  const trellis_model *m;
  pthread_barrier_t *start;
  trellis_layer got;
  outcome out;
} lazy_job;

static void *lazy_worker(void *arg) {
  lazy_job *j = arg;
  pthread_barrier_wait(j->start);
  trellis_status st = trellis_model_layer(j->m, 0, &j->got);
  if (st != TRELLIS_OK)
    record(&j->out, "trellis_model_layer", st);
  return NULL;
}

/* The first fetch of a misaligned layer copies it, once, whichever thread
 * gets there first; every thread sees the same copy. */
static void test_lazy_layer_race(void **state) {
  (void)state;
  char *path = tu_tmp_path("odd-threads.safetensors");
  size_t payload = tu_write_odd_sparse_layer(path, "odd.proj", 256, 512);
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(path, &m), TRELLIS_OK);
  assert_int_equal(trl_model_copied_bytes(m), 0);
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
  lazy_job jobs[THREADS];
  for (int i = 0; i < THREADS; i++)
    jobs[i] = (lazy_job){m, &start, {0}, {0, ""}};
  run_threads(lazy_worker, jobs, sizeof *jobs, THREADS);
  pthread_barrier_destroy(&start);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++)
    outs[i] = jobs[i].out;
  assert_no_failures(outs, THREADS);
  for (int i = 1; i < THREADS; i++)
    assert_ptr_equal(jobs[i].got.weight.trellis, jobs[0].got.weight.trellis);
  /* payload + suh + svh, copied once */
  assert_int_equal(trl_model_copied_bytes(m), payload + 2 * (256 + 512));
  trellis_model_close(m);
  free(path);
}

/* ------------------------------------------ one file, many threads -- */

typedef struct file_job {
  const trellis_file *f;
  outcome out;
} file_job;

static void *file_worker(void *arg) {
  file_job *j = arg;
  size_t n = trellis_file_tensor_count(j->f);
  for (size_t i = 0; i < n; i++) {
    trellis_tensor a, b;
    trellis_status st = trellis_file_tensor(j->f, i, &a);
    if (st == TRELLIS_OK)
      st = trellis_file_find(j->f, a.name, &b);
    if (st != TRELLIS_OK)
      record(&j->out, "trellis_file_tensor / find", st);
    else if (a.data != b.data)
      record(&j->out, "the same tensor by index and by name", TRELLIS_OK);
  }
  return NULL;
}

static void test_one_file_many_threads(void **state) {
  (void)state;
  char *path = tu_join(TU_TOY_MODEL, "model-00001-of-00002.safetensors");
  trellis_file *f = NULL;
  tu_assert_status(trellis_file_open(path, &f), TRELLIS_OK);
  file_job jobs[THREADS];
  for (int i = 0; i < THREADS; i++)
    jobs[i] = (file_job){f, {0, ""}};
  run_threads(file_worker, jobs, sizeof *jobs, THREADS);
  outcome outs[THREADS];
  for (int i = 0; i < THREADS; i++)
    outs[i] = jobs[i].out;
  assert_no_failures(outs, THREADS);
  trellis_file_close(f);
  free(path);
}

/* -------------------------------------- closed while others compute -- */

typedef struct hold_sync {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int holding; /* workers that hold the model and computed once */
  int closed;  /* the main thread closed it */
} hold_sync;

typedef struct hold_job {
  trellis_model *m;
  hold_sync *sync;
  int reps;
  outcome out;
} hold_job;

/* Holds the model, fetches a layer and computes once, says so, then
 * computes on it again while the main thread closes the model; releases it
 * at the end (the last release frees it). A use after free here is what
 * AddressSanitizer reports. */
static void *hold_worker(void *arg) {
  hold_job *j = arg;
  hold_sync *s = j->sync;
  trellis_status st = trellis_model_hold(j->m);
  trellis_layer L;
  uint16_t *x = NULL;
  float *first = NULL;
  if (st != TRELLIS_OK)
    record(&j->out, "trellis_model_hold", st);
  else if ((st = trellis_model_find_layer(j->m, toy_layer, &L)) != TRELLIS_OK)
    record(&j->out, "trellis_model_find_layer", st);
  else if (!(first = forward(&L.weight, x = make_x(L.weight.k), 2, &st)))
    record(&j->out, "the first forward", st);
  pthread_mutex_lock(&s->lock);
  s->holding++;
  pthread_cond_broadcast(&s->cond);
  while (!s->closed)
    pthread_cond_wait(&s->cond, &s->lock);
  pthread_mutex_unlock(&s->lock);
  for (int r = 0; first && r < j->reps; r++) {
    float *y = forward(&L.weight, x, 2, &st);
    if (!y)
      record(&j->out, "a forward after close", st);
    else if (memcmp(y, first, (size_t)(ROWS * L.weight.n) * sizeof *y))
      record(&j->out, "a forward after close differs", TRELLIS_OK);
    free(y);
  }
  if (first) { /* a holder may still use the model's own calls */
    trellis_layer again;
    st = trellis_model_layer(j->m, 0, &again);
    if (st != TRELLIS_OK)
      record(&j->out, "trellis_model_layer after close, held", st);
    trellis_model_release(j->m);
  }
  free(first);
  free(x);
  return NULL;
}

/* The model is closed while 1 or 4 threads hold it and compute on its
 * layers: close returns at once, the files stay mapped until the last
 * release, and the results do not change. */
static void test_close_while_held(void **state) {
  (void)state;
  for (int threads = 1; threads <= 4; threads *= 4) {
    trellis_model *m = NULL;
    tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
    hold_sync sync = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0,
                      0};
    hold_job jobs[4];
    pthread_t t[4];
    for (int i = 0; i < threads; i++) {
      jobs[i] = (hold_job){m, &sync, 20, {0, ""}};
      assert_int_equal(pthread_create(&t[i], NULL, hold_worker, &jobs[i]), 0);
    }
    pthread_mutex_lock(&sync.lock);
    while (sync.holding < threads)
      pthread_cond_wait(&sync.cond, &sync.lock);
    pthread_mutex_unlock(&sync.lock);
    trellis_model_close(m);
    if (threads == 1) { /* still alive (held): misuse is told */
      tu_assert_status(trellis_model_hold(m), TRELLIS_ERR_INVALID_ARGUMENT);
      tu_assert_error_has("is closed: trellis_model_hold");
      trellis_model_close(m);
      tu_assert_error_has("closed twice");
    }
    pthread_mutex_lock(&sync.lock);
    sync.closed = 1;
    pthread_cond_broadcast(&sync.cond);
    pthread_mutex_unlock(&sync.lock);
    for (int i = 0; i < threads; i++)
      assert_int_equal(pthread_join(t[i], NULL), 0);
    outcome outs[4];
    for (int i = 0; i < threads; i++)
      outs[i] = jobs[i].out;
    assert_no_failures(outs, threads);
    pthread_cond_destroy(&sync.cond);
    pthread_mutex_destroy(&sync.lock);
  }
}

/* Holds are counted: the model lives until the last one is released. */
static void test_holds_count(void **state) {
  (void)state;
  trellis_model *m = NULL;
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  tu_assert_status(trellis_model_hold(m), TRELLIS_OK);
  tu_assert_status(trellis_model_hold(m), TRELLIS_OK);
  trellis_model_close(m);
  trellis_layer L;
  tu_assert_status(trellis_model_find_layer(m, toy_layer, &L), TRELLIS_OK);
  trellis_model_release(m);
  /* one hold left: still usable */
  uint16_t *x = make_x(L.weight.k);
  trellis_status st;
  float *y = forward(&L.weight, x, 1, &st);
  tu_assert_status(st, TRELLIS_OK);
  free(y);
  free(x);
  trellis_model_release(m); /* the last: frees the model */

  /* Misuse that can be told: a release without a hold, NULL. */
  tu_assert_status(trellis_model_open(TU_TOY_MODEL, &m), TRELLIS_OK);
  trellis_clear_error();
  trellis_model_release(m);
  tu_assert_error_has("trellis_model_release without a hold");
  tu_assert_status(trellis_model_hold(NULL), TRELLIS_ERR_INVALID_ARGUMENT);
  trellis_model_release(NULL);
  trellis_model_close(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_one_model_many_threads),
      cmocka_unit_test(test_one_layer_many_threads),
      cmocka_unit_test(test_lazy_layer_race),
      cmocka_unit_test(test_one_file_many_threads),
      cmocka_unit_test(test_close_while_held),
      cmocka_unit_test(test_holds_count),
  };
  return TU_RUN_TESTS("threads", tests);
}
