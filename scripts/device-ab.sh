#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A/B timing on the device machine: builds the tree once per variant
# (VARIANTS, default "A B") with its configure arguments (A_ARGS, B_ARGS,
# ..., e.g. -DCMAKE_CUDA_FLAGS=-DSOME_MACRO), then runs `trellis bench
# ARGS...` for each variant in turn, ROUNDS times (default 2), and prints
# each run's rows (k x n-K<bits><codebook>, M, path, graph us, cuBLAS us,
# speedup). A variant's sources may come from another tree (A_SRC=base,
# e.g. an older commit unpacked with `git archive REV | tar -x -C base`).
# SHARED_BUILD=1: one build folder (build-ab), configured with each
# variant's arguments just before its runs, for variants that differ only
# in what recompiles quickly (CMAKE_C_FLAGS: the plan's rules); the CUDA
# objects are built once. Each run's whole output is kept in
# $OUT/ab-V-rR.txt; rows of the step benchmark (--model) print as they are.
#   A_ARGS=... B_ARGS=... scripts/device-ab.sh 6144 1024 --m 1,4096
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/trellis-out}
mkdir -p "$OUT"
root=$PWD
. scripts/device-env.sh
# build V: configures and builds variant V's folder (its own, or the
# shared one); prints why when it fails.
build() {
  local v=$1 args=${1}_ARGS src=${1}_SRC dir=build-ab-$1
  [ -n "${SHARED_BUILD:-}" ] && dir=build-ab
  # shellcheck disable=SC2086 # each *_ARGS holds several arguments
  (cd "${!src:-.}" && configure_device_build "$root/$dir" ${!args:-}) \
    >>"$OUT/ab-$v.log" 2>&1 &&
    cmake --build "$dir" -j"$(nproc)" --target trellis >>"$OUT/ab-$v.log" 2>&1 ||
    { echo "build $v failed"; tail -20 "$OUT/ab-$v.log"; return 1; }
}
if [ -z "${SHARED_BUILD:-}" ]; then
  for v in ${VARIANTS:-A B}; do build "$v" & done
  wait
fi
for r in $(seq "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-A B}; do
    dir=build-ab-$v
    if [ -n "${SHARED_BUILD:-}" ]; then
      dir=build-ab
      build "$v" || continue
    fi
    a=${v}_ARGS
    echo "== $v round $r (${v}_ARGS: ${!a:-none})"
    "$dir/trellis" bench "$@" >"$OUT/ab-$v-r$r.txt" 2>&1
    awk -F"|" '/^\| [0-9]/ {s = $2 "-K" $3 $4; gsub(/ /, "", s);
      print s, $5, $6, $7, $11, $12, $13} /^\| +[0-9]+ \|/ {print}
      /FAIL|error/' "$OUT/ab-$v-r$r.txt"
  done
done
