/* SPDX-License-Identifier: Apache-2.0 */
/* trellis_plans_buffer_sizes without a GPU: its arguments, an empty set
 * (zero sizes, path NONE). The sizes of real plans are gpu_model_plan's. */
#include "testutil.h"

#include <string.h>

static void test_arguments(void **state) {
  (void)state;
  trellis_buffer_sizes sz;
  memset(&sz, 0xAB, sizeof sz);
  tu_assert_status(trellis_plans_buffer_sizes(NULL, 0, 1, &sz), TRELLIS_OK);
  assert_int_equal(sz.struct_size, sizeof sz);
  assert_int_equal(sz.path, TRELLIS_PATH_NONE);
  assert_true(sz.rotated_bytes == 0 && sz.input_f16_bytes == 0 &&
              sz.output_f16_bytes == 0 && sz.workspace_bytes == 0);
  tu_assert_status(trellis_plans_buffer_sizes(NULL, 0, 1, NULL),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_status(trellis_plans_buffer_sizes(NULL, 2, 1, &sz),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("plans is NULL");
  const trellis_plan *none[2] = {NULL, NULL};
  tu_assert_status(trellis_plans_buffer_sizes(none, 2, 1, &sz),
                   TRELLIS_ERR_INVALID_ARGUMENT);
  tu_assert_error_has("plans[0] is NULL");
  tu_assert_status(trellis_plans_buffer_sizes(none, 0, 0, &sz),
                   TRELLIS_ERR_SHAPE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
