/* SPDX-License-Identifier: Apache-2.0 */
#include "internal.h"

int trellis_version_number(void) { return TRELLIS_VERSION_NUMBER; }

const char *trellis_version_string(void) { return TRELLIS_VERSION_STRING; }
