/* SPDX-License-Identifier: Apache-2.0 */
/* SHA-256 (FIPS 180-4), for the library's checks of its built-in tables. */
#ifndef TRL_CORE_SHA256_H
#define TRL_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The digest of `len` bytes as 64 lowercase hex digits plus NUL. */
void trl_sha256_hex(const void *data, size_t len, char hex[65]);

#ifdef __cplusplus
}
#endif

#endif
