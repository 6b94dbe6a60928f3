/* SPDX-License-Identifier: Apache-2.0 */
/* Device buffers of a plan for the `trellis` and `trellis-bench` programs
 * (CUDA builds only). */
#ifndef TOOLS_DEVICE_H
#define TOOLS_DEVICE_H

#include "trellis.h"

/* Initialises *b and allocates on the current device every buffer `sz`
 * asks for (none for a zero size: the plan may need none). On failure frees
 * what it got, prints one line and returns CLI_FAIL. */
int cli_buffers_alloc(const trellis_buffer_sizes *sz, trellis_buffers *b);
/* Frees what cli_buffers_alloc allocated; *b is initialised again. */
void cli_buffers_free(trellis_buffers *b);

#endif
