/* SPDX-License-Identifier: Apache-2.0 */
#include "io/json_bounds.h"

#include <string.h>

void trl_json_scan(const char *text, size_t len, trl_json_bounds *out) {
  memset(out, 0, sizeof *out);
  size_t depth = 0;
  for (size_t i = 0; i < len; i++) {
    switch (text[i]) {
    case '"': /* skip the string, escapes included */
      for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\')
          i++;
      break;
    case '{':
      out->objects++;
      /* fall through */
    case '[':
      out->values++;
      if (++depth > out->depth)
        out->depth = depth;
      break;
    case '}':
    case ']':
      if (depth > 0)
        depth--;
      break;
    case ',':
    case ':':
      out->values++;
      break;
    default:
      break;
    }
  }
}

void trl_json_error_text(const json_error_t *err, char *buf, size_t cap) {
  if (cap == 0)
    return;
  size_t len = strnlen(err->text, sizeof err->text);
  const char *near = strstr(err->text, " near ");
  if (near && (size_t)(near - err->text) < len)
    len = (size_t)(near - err->text);
  if (len >= cap)
    len = cap - 1;
  memcpy(buf, err->text, len);
  buf[len] = '\0';
}
