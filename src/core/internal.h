/* SPDX-License-Identifier: Apache-2.0 */
/* Internal helpers shared by every module of the library. */
#ifndef TRL_INTERNAL_H
#define TRL_INTERNAL_H

#include "core/size.h"
#include "trellis.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The one wording of the two ways CUDA can be missing, in the library's
 * messages (plan/no_cuda.c, the device checks of plan/plan.c and
 * plan/device.c), the CLI's (cli) and Python's (_core.NO_CUDA_BUILD,
 * NO_CUDA_DEVICE). */
#define TRL_NO_CUDA_BUILD "libtrellis was built without CUDA"
#define TRL_NO_CUDA_DEVICE "no CUDA device is available"

#if defined(__GNUC__)
#define TRL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TRL_PRINTF(a, b)
#endif

/* Records a detail message for this thread and returns `status`. Use as
 * `return trl_fail(TRELLIS_ERR_SHAPE, "k = %lld is not ...", k);` */
trellis_status trl_fail(trellis_status status, const char *fmt, ...)
    TRL_PRINTF(2, 3);
/* Prepends "context: " to the current detail message (for callers that add
 * a file or tensor name to an error from below) and returns `status`. */
trellis_status trl_fail_prefix(trellis_status status, const char *fmt, ...)
    TRL_PRINTF(2, 3);
/* Copies the text `in` into `out` (`cap` bytes, NUL-terminated when cap > 0)
 * so that it cannot drive a terminal: C0 controls, DEL, bytes that are not
 * well-formed UTF-8, and the UTF-8 forms of the C1 controls, of the
 * invisible marks that reorder text (Unicode's Bidi_Control set: U+061C,
 * U+200E-F, U+202A-E, U+2066-9) and of the line and paragraph separators
 * (U+2028-9) become "\xHH" per byte. A backslash stays as it is, so escaping
 * twice changes nothing (the form is for display, not a reversible
 * encoding). Never cuts an escape or a UTF-8 sequence; returns the length
 * written. Every message trl_fail records goes through it. */
size_t trl_escape_text(const char *in, char *out, size_t cap);

#define TRL_CHECK_STRUCT(ptr, type, what)                                      \
  do {                                                                         \
    if ((ptr) == NULL)                                                         \
      return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT, "%s is NULL", what);       \
    if ((ptr)->struct_size < sizeof(type))                                     \
      return trl_fail(TRELLIS_ERR_INVALID_ARGUMENT,                            \
                      "%s: struct_size %u < %zu (call the *_init "             \
                      "function first)",                                       \
                      what, (unsigned)(ptr)->struct_size, sizeof(type));       \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
