/* SPDX-License-Identifier: Apache-2.0 */
/* The body of one translation unit of a family spread over kUnits units
 * (see dispatch.cuh): include the family's header, then this one, then
 * TRL_DISPATCH_UNIT(Family, u). Only unit files include it, so the
 * launcher's translation unit compiles no kernel of the family. */
#ifndef TRL_CUDA_DISPATCH_UNIT_CUH
#define TRL_CUDA_DISPATCH_UNIT_CUH

#include "cuda/dispatch.cuh"

#include <utility>

namespace trl {
namespace dispatch {
namespace detail {
template <class F, int U, int... P>
int run_positions(Op op, const int *key, typename F::Args &a,
                  std::integer_sequence<int, P...>) {
  int r = 0;
  const bool found = (run_position<F, U, P>(op, key, a, r) || ...);
  return found ? r : unsupported<F>(key, 0, op);
}
} // namespace detail

template <class F, int U> int unit(Op op, const int *key, typename F::Args &a) {
  static_assert(U >= 0 && U < detail::Units<F>::value, "unit out of range");
  return detail::run_positions<F, U>(
      op, key, a,
      std::make_integer_sequence<int, F::Axes::template At<0>::kCount>{});
}
} // namespace dispatch
} // namespace trl

/* The explicit instantiation of unit U of family F (its variants). */
#define TRL_DISPATCH_UNIT(F, U)                                                \
  template int trl::dispatch::unit<F, U>(trl::dispatch::Op, const int *,       \
                                         F::Args &);

#endif
