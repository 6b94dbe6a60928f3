/* Status names and the per-thread detail message. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

#define MSG_CAP 1024

static _Thread_local char last_message[MSG_CAP];

static const struct {
  const char *name;
  const char *text;
} status_table[] = {
    [TRELLIS_OK] = {"TRELLIS_OK", "success"},
    [TRELLIS_ERR_INVALID_ARGUMENT] = {"TRELLIS_ERR_INVALID_ARGUMENT",
                                      "invalid argument"},
    [TRELLIS_ERR_OUT_OF_MEMORY] = {"TRELLIS_ERR_OUT_OF_MEMORY",
                                   "out of memory"},
    [TRELLIS_ERR_IO] = {"TRELLIS_ERR_IO", "I/O error"},
    [TRELLIS_ERR_FORMAT] = {"TRELLIS_ERR_FORMAT", "malformed file"},
    [TRELLIS_ERR_DTYPE] = {"TRELLIS_ERR_DTYPE", "wrong dtype"},
    [TRELLIS_ERR_SHAPE] = {"TRELLIS_ERR_SHAPE", "wrong shape"},
    [TRELLIS_ERR_NOT_FOUND] = {"TRELLIS_ERR_NOT_FOUND", "not found"},
    [TRELLIS_ERR_UNSUPPORTED] = {"TRELLIS_ERR_UNSUPPORTED", "unsupported"},
    [TRELLIS_ERR_WORKSPACE] = {"TRELLIS_ERR_WORKSPACE",
                               "workspace missing or too small"},
    [TRELLIS_ERR_BUFFER] = {"TRELLIS_ERR_BUFFER",
                            "buffer missing, too small or misaligned"},
    [TRELLIS_ERR_NO_DEVICE] = {"TRELLIS_ERR_NO_DEVICE",
                               "no usable CUDA device"},
    [TRELLIS_ERR_ARCH] = {"TRELLIS_ERR_ARCH",
                          "not compiled for this GPU architecture"},
    [TRELLIS_ERR_CUDA] = {"TRELLIS_ERR_CUDA", "CUDA error"},
    [TRELLIS_ERR_NOT_PREPARED] = {"TRELLIS_ERR_NOT_PREPARED",
                                  "plan not prepared"},
    [TRELLIS_ERR_INTERNAL] = {"TRELLIS_ERR_INTERNAL", "internal error"},
};

#define STATUS_COUNT (sizeof(status_table) / sizeof(status_table[0]))

const char *trellis_status_name(trellis_status status) {
  if ((unsigned)status >= STATUS_COUNT)
    return "TRELLIS_ERR_UNKNOWN";
  return status_table[status].name;
}

const char *trellis_status_string(trellis_status status) {
  if ((unsigned)status >= STATUS_COUNT)
    return "unknown status";
  return status_table[status].text;
}

const char *trellis_last_error(void) { return last_message; }

void trellis_clear_error(void) { last_message[0] = '\0'; }

static trellis_status failv(trellis_status status, const char *fmt,
                            va_list ap) {
  vsnprintf(last_message, MSG_CAP, fmt, ap);
  return status;
}

trellis_status trl_fail(trellis_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  failv(status, fmt, ap);
  va_end(ap);
  return status;
}

trellis_status trl_fail_prefix(trellis_status status, const char *fmt, ...) {
  char old[MSG_CAP];
  va_list ap;
  memcpy(old, last_message, MSG_CAP);
  va_start(ap, fmt);
  int used = vsnprintf(last_message, MSG_CAP, fmt, ap);
  va_end(ap);
  if (used < 0 || used >= MSG_CAP - 3)
    return status;
  size_t room = (size_t)(MSG_CAP - used);
  memcpy(last_message + used, ": ", 2);
  size_t len = strnlen(old, room - 3);
  memcpy(last_message + used + 2, old, len);
  last_message[used + 2 + len] = '\0';
  return status;
}
