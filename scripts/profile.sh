#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Nsight Compute on the hot kernels (device machine): one launch each of the
# fused and generic decode-GEMM at M rows (default 1) on the given shape.
# Clocks are left alone (--clock-control none). Environment: KERNELS (name
# regex, e.g. reconstruct_full for the prefill fold) and FORCES ("default",
# "generic" or both) pick other kernels and paths.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trellis-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
k=${1:-8192} n=${2:-28672} m=${3:-1}
sections=(--section SpeedOfLight --section Occupancy --section LaunchStats
          --metrics "regex:smsp__warp_issue_stalled_.*_per_warp_active.pct,regex:sm__inst_executed_pipe_.*avg.pct_of_peak_sustained_active,regex:sm__pipe_.*cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__warps_active.avg.per_cycle_active")
kernels=${KERNELS:-fused_k6|dq_gemm}
for tag in ${FORCES:-default generic}; do
  force=""
  [ "$tag" = generic ] && force="--force generic"
  ncu --clock-control none --kernel-name regex:"$kernels" --launch-skip 4 --launch-count 1 \
    "${sections[@]}" "$BUILD/trellis" bench "$k" "$n" --m "$m" --reps 1 $force \
    >/tmp/ncu-$tag.txt 2>&1
  grep -E "$kernels|Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Grid Size|Waves Per SM|inst_executed.sum|issue_active|warps_active" /tmp/ncu-$tag.txt | head -20
  # stall reasons and pipes above 3%
  grep -E "warp_issue_stalled|inst_executed_pipe|sm__pipe_" /tmp/ncu-$tag.txt | awk '$NF+0 > 3' | sed 's/smsp__warp_issue_stalled_//; s/_per_warp_active.pct//; s/sm__inst_executed_pipe_//' | head -30
  cat /tmp/ncu-$tag.txt >>"$OUT/ncu.txt"
done
