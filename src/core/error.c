/* SPDX-License-Identifier: Apache-2.0 */
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
    [TRELLIS_ERR_NO_DEVICE] = {"TRELLIS_ERR_NO_DEVICE", TRL_NO_CUDA_DEVICE
                               " (or " TRL_NO_CUDA_BUILD ")"},
    [TRELLIS_ERR_ARCH] = {"TRELLIS_ERR_ARCH",
                          "not compiled for this GPU architecture"},
    [TRELLIS_ERR_CUDA] = {"TRELLIS_ERR_CUDA", "CUDA error"},
    [TRELLIS_ERR_NOT_PREPARED] = {"TRELLIS_ERR_NOT_PREPARED",
                                  "plan not prepared"},
    [TRELLIS_ERR_INTERNAL] = {"TRELLIS_ERR_INTERNAL", "internal error"},
    [TRELLIS_ERR_LAYOUT] = {"TRELLIS_ERR_LAYOUT",
                            "payload in the wrong layout"},
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

/* Code points above the C1 controls that are never shown raw: Unicode's
 * whole Bidi_Control set (PropList.txt), the invisible marks that reorder
 * text, and the line and paragraph separators. tests/test_messages.c holds
 * the same table and checks every code point against it. */
static const struct {
  unsigned lo, hi;
} hidden_marks[] = {
    {0x061C, 0x061C}, /* ARABIC LETTER MARK */
    {0x200E, 0x200F}, /* LEFT-TO-RIGHT, RIGHT-TO-LEFT MARK */
    {0x2028, 0x2029}, /* LINE, PARAGRAPH SEPARATOR */
    {0x202A, 0x202E}, /* LRE, RLE, PDF, LRO, RLO */
    {0x2066, 0x2069}, /* LRI, RLI, FSI, PDI */
};

static int hidden_mark(unsigned cp) {
  for (size_t i = 0; i < sizeof hidden_marks / sizeof *hidden_marks; i++)
    if (cp >= hidden_marks[i].lo && cp <= hidden_marks[i].hi)
      return 1;
  return 0;
}

/* Length of the UTF-8 sequence at p (at most `left` bytes) when it is
 * well formed and safe to show, else 0. Unsafe: C0 controls and DEL,
 * the C1 controls U+0080-U+009F, and hidden_marks. */
static size_t safe_sequence(const unsigned char *p, size_t left) {
  unsigned c = p[0];
  if (c < 0x80)
    return c >= 0x20 && c != 0x7f;
  size_t len;
  unsigned lo = 0x80, hi = 0xbf, cp;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2, cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3, cp = c & 0x0f;
    lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
    hi = c == 0xed ? 0x9f : 0xbf; /* no surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4, cp = c & 0x07;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf; /* nothing past U+10FFFF */
  } else {
    return 0;
  }
  if (left < len || p[1] < lo || p[1] > hi)
    return 0;
  for (size_t i = 1; i < len; i++) {
    if (i > 1 && (p[i] < 0x80 || p[i] > 0xbf))
      return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  if (cp <= 0x9f || hidden_mark(cp))
    return 0;
  return len;
}

size_t trl_escape_text(const char *in, char *out, size_t cap) {
  static const char hex[] = "0123456789abcdef";
  if (cap == 0)
    return 0;
  const unsigned char *p = (const unsigned char *)in;
  size_t left = in ? strlen(in) : 0, used = 0;
  while (left > 0) {
    size_t len = safe_sequence(p, left);
    if (len == 0) { /* one byte as \xHH; the next byte starts afresh */
      if (used + 4 >= cap)
        break;
      out[used++] = '\\';
      out[used++] = 'x';
      out[used++] = hex[*p >> 4];
      out[used++] = hex[*p & 15];
      len = 1;
    } else {
      if (used + len >= cap)
        break;
      memcpy(out + used, p, len);
      used += len;
    }
    p += len;
    left -= len;
  }
  out[used] = '\0';
  return used;
}

/* Every message is stored escaped (trl_escape_text), whatever it quotes:
 * names and paths from files or callers cannot reach a terminal raw. */
static void set_message(const char *raw) {
  trl_escape_text(raw, last_message, MSG_CAP);
}

static trellis_status failv(trellis_status status, const char *fmt,
                            va_list ap) {
  char raw[MSG_CAP];
  vsnprintf(raw, MSG_CAP, fmt, ap);
  set_message(raw);
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
  char raw[MSG_CAP];
  va_list ap;
  va_start(ap, fmt);
  int used = vsnprintf(raw, MSG_CAP, fmt, ap);
  va_end(ap);
  if (used < 0 || used >= MSG_CAP - 3)
    return status;
  size_t room = (size_t)(MSG_CAP - used);
  memcpy(raw + used, ": ", 2);
  /* the old message is escaped already; escaping it again changes nothing */
  size_t len = strnlen(last_message, room - 3);
  memcpy(raw + used + 2, last_message, len);
  raw[used + 2 + len] = '\0';
  set_message(raw);
  return status;
}
