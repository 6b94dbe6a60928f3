/* SPDX-License-Identifier: Apache-2.0 */
/* trellis_plans_buffer_sizes: the shared buffers of a set of plans, from
 * trellis_plan_query alone (pure C; in a build without CUDA no plan exists
 * and a non-empty set fails as the query does). */
#include "core/internal.h"

#include <stdio.h>
#include <string.h>

trellis_status trellis_plans_buffer_sizes(const trellis_plan *const *plans,
                                          size_t count, int64_t m,
                                          trellis_buffer_sizes *max_out) {
  if (!max_out)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "plans buffer sizes: output is NULL");
  if (count > 0 && !plans)
    return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                    "plans buffer sizes: plans is NULL with count %zu", count);
  if (m < 1)
    return trl_fail(TRELLIS_ERR_SHAPE, "plans buffer sizes: m = %lld < 1",
                    (long long)m);
  trellis_buffer_sizes max;
  memset(&max, 0, sizeof max);
  max.struct_size = sizeof max;
  max.path = TRELLIS_PATH_NONE;
  for (size_t i = 0; i < count; i++) {
    if (!plans[i])
      return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,
                      "plans buffer sizes: plans[%zu] is NULL", i);
    trellis_buffer_sizes one;
    memset(&one, 0, sizeof one);
    one.struct_size = sizeof one;
    trellis_status st = trellis_plan_query(plans[i], m, &one);
    if (st != TRELLIS_OK) {
      char detail[512];
      snprintf(detail, sizeof detail, "%s", trellis_last_error());
      return trl_fail(st, "plans buffer sizes: plans[%zu]: %s", i, detail);
    }
    /* a query never answers NONE, so a mixed set stays NONE */
    max.path = i == 0 || one.path == max.path ? one.path : TRELLIS_PATH_NONE;
#define TRL_MAX_FIELD(f) max.f = one.f > max.f ? one.f : max.f
    TRL_MAX_FIELD(rotated_bytes);
    TRL_MAX_FIELD(input_f16_bytes);
    TRL_MAX_FIELD(output_f16_bytes);
    TRL_MAX_FIELD(workspace_bytes);
#undef TRL_MAX_FIELD
  }
  *max_out = max;
  return TRELLIS_OK;
}
