#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B timing on the device machine: builds the tree once per variant
# (VARIANTS, default "A B") with its configure arguments (A_ARGS, B_ARGS,
# ..., e.g. -DCMAKE_CUDA_FLAGS=-DSOME_MACRO), then runs `trellis bench
# ARGS...` for each variant in turn, ROUNDS times (default 2), and prints
# each run's rows (k x n-K<bits><codebook>, M, path, graph us, cuBLAS us,
# speedup). A variant's sources may come from another tree (A_SRC=base,
# e.g. an older commit unpacked with `git archive REV | tar -x -C base`).
#   A_ARGS=... B_ARGS=... scripts/device-ab.sh 6144 1024 --m 1,4096
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trellis-out}
mkdir -p "$OUT"
root=$PWD
. scripts/device-env.sh
for v in ${VARIANTS:-A B}; do
  args=${v}_ARGS src=${v}_SRC
  # shellcheck disable=SC2086 # each *_ARGS holds several arguments
  ( (cd "${!src:-.}" && configure_device_build "$root/build-ab-$v" ${!args:-}) \
    >"$OUT/ab-$v.log" 2>&1 &&
    cmake --build "build-ab-$v" -j"$(nproc)" --target trellis >>"$OUT/ab-$v.log" 2>&1 ||
    { echo "build $v failed"; tail -20 "$OUT/ab-$v.log"; }) &
done
wait
for r in $(seq "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-A B}; do
    echo "== $v round $r (${v}_ARGS: $(eval echo \${${v}_ARGS:-none}))"
    "build-ab-$v/trellis" bench "$@" 2>&1 |
      awk -F"|" '/^\| [0-9]/ {s = $2 "-K" $3 $4; gsub(/ /, "", s);
        print s, $5, $6, $7, $11, $12, $13} /FAIL|error/'
  done
done
