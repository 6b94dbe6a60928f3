/* SPDX-License-Identifier: Apache-2.0 */
/* The one dispatch layer of the kernel variants: a runtime key (bits,
 * codebook, m-blocks, dtypes, flags) becomes a template instantiation, or
 * TRL_KERNEL_UNSUPPORTED with a message that names the family, the key
 * and what this build has -- never a silent default.
 *
 * Registering a kernel family
 *   1. Declare the family, a struct:
 *        struct MyFamily {
 *          static constexpr const char *kName = "my kernel"; // for messages
 *          using Axes = dispatch::Axes<dispatch::BitsAxis,
 *                                      dispatch::CodebookAxis, ...>;
 *          struct Args { ... };  // what the operations read and write
 *          // one int per axis, in the order of Axes; 0 or a cudaError_t:
 *          template <int K, int CB, ...> static int launch(Args &);
 *          // optional:
 *          template <int K, int CB, ...> static int prepare(Args &);
 *          template <int K, int CB, ...> static int query(Args &);
 *          template <int K, int CB, ...> static constexpr bool exists();
 *          static constexpr int kUnits = 8;
 *        };
 *      prepare is the one-time host work (attributes, image checks; absent:
 *      nothing to do), query fills outputs in Args (registers, shared
 *      memory), exists() returns false for combinations the family does
 *      not compile. Axes come from this header (the lists are in
 *      rules/kernel_config.h); a family's own axis is
 *        struct HalvesAxis : dispatch::Axis<0, 1> {
 *          static constexpr const char *kName = "halves"; };
 *   2. Its C launcher (declared in kernels.h, taking trellis_dtype and
 *      trellis_codebook) calls
 *        return dispatch::run<MyFamily>(dispatch::Op::kLaunch,
 *                                       {bits, (int)cb, ...}, args);
 *      and for_each_value<Axis>(f) runs prepare over the values of an axis.
 *   3. kUnits > 1 spreads the variants over that many translation units
 *      (they compile in parallel): unit u holds the variants whose value of
 *      the first axis sits at position u, u + kUnits, ... of that axis, so
 *      a value added to the axis lands in an existing unit. The family's
 *      kernels live in a header; unit u is a .cu file of three lines:
 *        #include "my_family.cuh"
 *        #include "dispatch_unit.cuh"
 *        TRL_DISPATCH_UNIT(trl::my::MyFamily, u)
 *      The launcher's .cu includes the family header but not
 *      dispatch_unit.cuh, so it compiles no kernel itself. Without kUnits
 *      the launcher's .cu instantiates everything.
 * Adding a bitrate, codebook, dtype or m-block is one edit of its list in
 * rules/kernel_config.h (plus the device code the new value needs). */
#ifndef TRL_CUDA_DISPATCH_CUH
#define TRL_CUDA_DISPATCH_CUH

#include "core/internal.h"
#include "cuda/kernels.h"
#include "rules/kernel_config.h"

#include <stdio.h>
#include <string.h>
#include <type_traits>
#include <utility>

namespace trl {
namespace dispatch {

/* ------------------------------------------------------------- axes -- */

/* The values one variant axis is compiled for. A named axis derives from
 * it and adds `static constexpr const char *kName`. */
template <int... V> struct Axis { static constexpr int kCount = sizeof...(V); };

struct BitsAxis : Axis<TRL_GPU_BITS> {
  static constexpr const char *kName = "bits";
};
struct CodebookAxis : Axis<TRL_GPU_CODEBOOKS> {
  static constexpr const char *kName = "codebook";
};
struct Bits1Axis : Axis<TRL_GPU_BITS1> {
  static constexpr const char *kName = "record1 bits";
};
struct HalfAxis : Axis<TRL_GPU_HALF> {
  static constexpr const char *kName = "half";
};
struct ComputeAxis : Axis<TRL_GPU_COMPUTE_DTYPES> {
  static constexpr const char *kName = "compute dtype";
};
struct InDtypeAxis : Axis<TRL_GPU_IO_DTYPES> {
  static constexpr const char *kName = "input dtype";
};
struct OutDtypeAxis : Axis<TRL_GPU_IO_DTYPES> {
  static constexpr const char *kName = "output dtype";
};
struct MBlocksAxis : Axis<TRL_GPU_M_BLOCKS> {
  static constexpr const char *kName = "m_blocks";
};
static_assert(MBlocksAxis::kCount == TRL_M_BLOCK_COUNT,
              "TRL_M_BLOCK_COUNT must count TRL_GPU_M_BLOCKS");

namespace detail {
template <int I, class... A> struct Nth;
template <class A0, class... A> struct Nth<0, A0, A...> { using type = A0; };
template <int I, class A0, class... A> struct Nth<I, A0, A...> {
  using type = typename Nth<I - 1, A...>::type;
};
} // namespace detail

/* The axes of a family, in the order of its runtime key. */
template <class... A> struct Axes {
  static constexpr int kCount = sizeof...(A);
  template <int I> using At = typename detail::Nth<I, A...>::type;
  static constexpr const char *kNames[] = {A::kName...};
};

namespace detail {
template <int... V> constexpr int value_in(const Axis<V...> *, int p) {
  constexpr int v[] = {V...};
  return v[p];
}
template <int... V> constexpr int position_in(const Axis<V...> *, int x) {
  constexpr int v[] = {V...};
  for (int i = 0; i < (int)sizeof...(V); ++i)
    if (v[i] == x)
      return i;
  return -1;
}
} // namespace detail

/* Value at position p of axis A, and the position of value x (-1). */
template <class A> constexpr int value_at(int p) {
  return detail::value_in(static_cast<const A *>(nullptr), p);
}
template <class A> constexpr int position_of(int x) {
  return detail::position_in(static_cast<const A *>(nullptr), x);
}

namespace detail {
template <class A, class F, int... P>
int for_each_position(F &f, std::integer_sequence<int, P...>) {
  int r = 0;
  (void)(((r = f(std::integral_constant<int, value_at<A>(P)>{})) != 0) || ...);
  return r;
}
} // namespace detail

/* f(std::integral_constant<int, v>) for every value v of axis A in order;
 * stops at and returns the first non-zero result. */
template <class A, class F> int for_each_value(F &&f) {
  return detail::for_each_position<A>(
      f, std::make_integer_sequence<int, A::kCount>{});
}

/* ------------------------------------------------------- operations -- */

enum class Op { kPrepare, kLaunch, kQuery };

template <int... V> struct Variant {};

namespace detail {

template <class F, class V, class = void> struct Exists : std::true_type {};
template <class F, int... V>
struct Exists<F, Variant<V...>,
              std::void_t<decltype(F::template exists<V...>())>>
    : std::bool_constant<F::template exists<V...>()> {};

template <class F, class V, class = void>
struct HasPrepare : std::false_type {};
template <class F, int... V>
struct HasPrepare<F, Variant<V...>,
                  std::void_t<decltype(F::template prepare<V...>(
                      std::declval<typename F::Args &>()))>> : std::true_type {
};

template <class F, class V, class = void> struct HasQuery : std::false_type {};
template <class F, int... V>
struct HasQuery<F, Variant<V...>,
                std::void_t<decltype(F::template query<V...>(
                    std::declval<typename F::Args &>()))>> : std::true_type {};

template <class F, class = void> struct Units {
  static constexpr int value = 1;
};
template <class F> struct Units<F, std::void_t<decltype(F::kUnits)>> {
  static constexpr int value = F::kUnits;
};

/* "bits 9, codebook 1" and the values of the offending axis. */
template <class F, int I>
void axis_values(const int *key, char *buf, size_t size) {
  using A = typename F::Axes::template At<I>;
  size_t used = strlen(buf);
  snprintf(buf + used, size - used, "%s%s %d", I ? ", " : "", A::kName, key[I]);
}
template <class A> void supported_values(char *buf, size_t size) {
  size_t used = strlen(buf);
  for (int p = 0; p < A::kCount && used < size; ++p) {
    snprintf(buf + used, size - used, "%s%d", p ? ", " : "", value_at<A>(p));
    used = strlen(buf);
  }
}

template <class F, int... I>
void key_text(const int *key, char *buf, size_t size,
              std::integer_sequence<int, I...>) {
  (axis_values<F, I>(key, buf, size), ...);
}
template <class F, int... I>
void axis_text(int axis, char *buf, size_t size,
               std::integer_sequence<int, I...>) {
  (void)((I == axis &&
          (supported_values<typename F::Axes::template At<I>>(buf, size),
           true)) ||
         ...);
}

/* Records why the key has no variant and returns the launcher result.
 * `axis` is the axis whose value is not compiled, or -1 when the values
 * are but their combination is not (exists()) or lacks the operation. */
template <class F> int unsupported(const int *key, int axis, Op op) {
  constexpr auto kAxes = std::make_integer_sequence<int, F::Axes::kCount>{};
  char text[256] = "";
  key_text<F>(key, text, sizeof text, kAxes);
  if (axis >= 0) {
    char have[128] = "";
    axis_text<F>(axis, have, sizeof have, kAxes);
    trl_fail(TRELLIS_ERR_UNSUPPORTED,
             "%s: no kernel variant for %s (this build has %s %s)", F::kName,
             text, F::Axes::kNames[axis], have);
  } else {
    trl_fail(TRELLIS_ERR_UNSUPPORTED,
             "%s: no kernel variant for the combination %s%s", F::kName, text,
             op == Op::kQuery ? " (no query)" : "");
  }
  return TRL_KERNEL_UNSUPPORTED;
}

/* One complete variant: the operation itself. */
template <class F, int... V>
int invoke(Op op, const int *key, typename F::Args &a) {
  if constexpr (!Exists<F, Variant<V...>>::value) {
    return unsupported<F>(key, -1, op);
  } else {
    switch (op) {
    case Op::kPrepare:
      if constexpr (HasPrepare<F, Variant<V...>>::value)
        return F::template prepare<V...>(a);
      else
        return 0;
    case Op::kLaunch:
      return F::template launch<V...>(a);
    case Op::kQuery:
      if constexpr (HasQuery<F, Variant<V...>>::value)
        return F::template query<V...>(a);
      else
        break;
    }
    return unsupported<F>(key, -1, op);
  }
}

/* Chooses the value of the next axis among its compiled values. */
template <class F, class Chosen> struct Selector;
template <class F, int... C> struct Selector<F, Variant<C...>> {
  static constexpr int I = sizeof...(C);
  static int run(Op op, const int *key, typename F::Args &a) {
    if constexpr (I == F::Axes::kCount)
      return invoke<F, C...>(op, key, a);
    else
      return pick(
          static_cast<const typename F::Axes::template At<I> *>(nullptr), op,
          key, a);
  }
  template <int... V>
  static int pick(const Axis<V...> *, Op op, const int *key,
                  typename F::Args &a) {
    int r = 0;
    const bool found =
        ((key[I] == V &&
          (r = Selector<F, Variant<C..., V>>::run(op, key, a), true)) ||
         ...);
    return found ? r : unsupported<F>(key, I, op);
  }
};

/* The first axis restricted to the positions of unit U. */
template <class F, int U, int P>
bool run_position(Op op, const int *key, typename F::Args &a, int &r) {
  using A0 = typename F::Axes::template At<0>;
  if constexpr (P % Units<F>::value != U) {
    return false;
  } else {
    if (key[0] != value_at<A0>(P))
      return false;
    r = Selector<F, Variant<value_at<A0>(P)>>::run(op, key, a);
    return true;
  }
}

} // namespace detail

/* Entry of unit U of a family with kUnits > 1: defined by
 * TRL_DISPATCH_UNIT in the unit's own translation unit. */
template <class F, int U> int unit(Op op, const int *key, typename F::Args &a);

namespace detail {
template <class F, int... U>
int run_unit(int u, Op op, const int *key, typename F::Args &a,
             std::integer_sequence<int, U...>) {
  using Fn = int (*)(Op, const int *, typename F::Args &);
  static constexpr Fn kUnit[] = {&unit<F, U>...};
  return kUnit[u](op, key, a);
}
} // namespace detail

/* Runs `op` on the variant `key` names (one value per axis, in the order
 * of F::Axes): 0, a cudaError_t, or TRL_KERNEL_UNSUPPORTED. */
template <class F>
int run(Op op, const int (&key)[F::Axes::kCount], typename F::Args &a) {
  constexpr int kUnits = detail::Units<F>::value;
  if constexpr (kUnits == 1) {
    return detail::Selector<F, Variant<>>::run(op, key, a);
  } else {
    using A0 = typename F::Axes::template At<0>;
    const int p = position_of<A0>(key[0]);
    if (p < 0)
      return detail::unsupported<F>(key, 0, op);
    return detail::run_unit<F>(p % kUnits, op, key, a,
                               std::make_integer_sequence<int, kUnits>{});
  }
}

} // namespace dispatch
} // namespace trl

#endif
