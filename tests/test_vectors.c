/* SPDX-License-Identifier: Apache-2.0 */
/* Every case of the known-answer vectors through the library's CPU side:
 * testvectors/manifest.json, half/ (ExLlamaV3 1.6's half-integer rates,
 * K 1.5 / 2.5 / 3.5) and exl3-real/ (layers ExLlamaV3 1.6.5's quantizer
 * wrote; y is their y_exact, and they have no w_dense):
 *   - the layer the loader finds matches the manifest (k, n, K, codebook,
 *     sign form, bias);
 *   - W_hat from trellis_decode_weight equals w_hat bit for bit;
 *   - trellis_dense_weight matches w_dense (rel L2 <= 2e-3, max abs <=
 *     2e-3 * max|w_dense|);
 *   - trellis_cpu_forward matches y with the same tolerances, for fp16 and
 *     fp32 inputs, fp32 and fp16 outputs, on 1 and 2 threads.
 * One cmocka test per case and check, so a failure names the case. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOL 2e-3

static void test_layer_matches_manifest(void **state) {
  const tv_case *c = *state;
  tv_loaded t;
  tv_open(c, &t);
  const trellis_weight *w = &t.layer.weight;
  assert_int_equal(w->k, c->k);
  assert_int_equal(w->n, c->n);
  assert_int_equal(w->bits, c->bits);
  assert_int_equal(w->half, c->half);
  assert_int_equal(trellis_weight_payload_bytes(w),
                   (size_t)(c->k * c->n * (2 * c->bits + c->half) / 16));
  assert_int_equal(w->codebook, c->codebook);
  assert_int_equal(t.layer.signs == TRELLIS_SIGNS_LEGACY, c->legacy_signs);
  assert_int_equal(t.layer.has_bias, c->bias);
  assert_int_equal(t.x.ndim, 2);
  assert_int_equal(t.x.shape[0], c->m);
  assert_int_equal(t.x.shape[1], c->k);
  tv_close(&t);
}

static void test_decode_bit_exact(void **state) {
  const tv_case *c = *state;
  tv_loaded t;
  tv_open(c, &t);
  tv_check_w_hat(c, &t);
  tv_close(&t);
}

static void test_dense_weight(void **state) {
  const tv_case *c = *state;
  tv_loaded t;
  tv_open(c, &t);
  tv_check_w_dense(c, &t, TOL);
  tv_close(&t);
}

static void test_cpu_forward(void **state) {
  const tv_case *c = *state;
  tv_loaded t;
  tv_open(c, &t);
  tv_check_cpu_forward(c, &t, TOL);
  tv_close(&t);
}

typedef struct check {
  const char *suffix;
  CMUnitTestFunction fn;
} check;

static const check checks[] = {
    {"layer", test_layer_matches_manifest},
    {"w_hat bit-exact", test_decode_bit_exact},
    {"w_dense", test_dense_weight},
    {"cpu forward", test_cpu_forward},
};
#define NCHECKS (sizeof checks / sizeof checks[0])

int main(void) {
  tv_case *cases = NULL;
  size_t ncases = tv_load_all(&cases);
  if (ncases == 0) {
    fprintf(stderr, "test_vectors: the manifest lists no cases\n");
    return 1;
  }
  size_t ntests = ncases * NCHECKS;
  struct CMUnitTest *tests = calloc(ntests, sizeof *tests);
  char(*names)[160] = calloc(ntests, sizeof *names);
  if (!tests || !names)
    return 1;
  size_t k = 0;
  for (size_t i = 0; i < ncases; i++)
    for (size_t j = 0; j < NCHECKS; j++) {
      if (checks[j].fn == test_dense_weight &&
          strcmp(cases[i].set, TU_TV_REAL) == 0)
        continue; /* exl3-real has no w_dense */
      snprintf(names[k], sizeof names[k], "%s%s%s: %s", cases[i].set,
               cases[i].set[0] ? "/" : "", cases[i].name, checks[j].suffix);
      tests[k].name = names[k];
      tests[k].test_func = checks[j].fn;
      tests[k].initial_state = &cases[i];
      k++;
    }
  int failed = _cmocka_run_group_tests("test_vectors", tests, k, NULL, NULL);
  free(tests);
  free(names);
  free(cases);
  return failed;
}
