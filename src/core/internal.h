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
