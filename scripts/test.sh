#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds libtrellis and runs its test suite with CTest. This is the README's
# test command; CI runs the same script (adding -DTRELLIS_WERROR=ON).
#
# usage: scripts/test.sh [extra cmake options]
#   build directory: $TRELLIS_BUILD_DIR (default: build)
# Tests labelled gpu are skipped (exit code 77) when no CUDA device is present.
set -eu
cd "$(dirname "$0")/.."
build=${TRELLIS_BUILD_DIR:-build}
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build" "$@"
cmake --build "$build" -j "$jobs"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
