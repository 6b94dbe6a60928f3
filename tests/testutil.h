/* Shared helpers for the test programs (placeholder: the IO work fills it). */
#ifndef TRELLIS_TESTUTIL_H
#define TRELLIS_TESTUTIL_H
#include "trellis.h"
#endif
