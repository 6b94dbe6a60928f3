#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One call on a GPU machine: build for sm_90a, run every test (GPU and CPU),
# the GPU tests under compute-sanitizer, optionally the benchmark and the
# Python package's tests, and print a short summary last.
#   scripts/device-check.sh [all|tests|sanitize|bench|step|python|direct|kmajor] [BENCH ARGS...]
# `direct` builds only the register-direct kernel's test and the CLI, runs
# gpu_direct and `trellis bench` with BENCH ARGS (default: its rows at
# m = 1, 4, 16 on the bench shapes, K6 and K4, MCG and MUL1), then, when
# SKETCH names a folder with a stream.cu of the same shape's standalone
# comparison, builds and runs it (`quick`) in the same call.
# `kmajor` builds gpu_kmajor and the CLI, runs gpu_kmajor, counts the
# k-major loop's SASS per tile (scripts/sass-loop.py), and times the layer
# rows (BENCH ARGS; default the bench shapes at m = 1..32, K6/K4, MCG/MUL1)
# and the glm-tp4 3.36 step (STEP_M, default 1,4,16) on the default path
# and under --force kmajor in the same call, side by side.
# `all` = tests, sanitize, bench and python. `step` (or STEP_BENCH=1 with
# `bench` or `all`) runs the decode-step benchmark, `trellis bench --model
# preset:P --bits B --m 1,8,32,128`, for llama-3.1-8b, llama-3.1-70b and
# glm-tp4 at 4.0 and 6.0 bits and glm-tp4 at 3.36 (10 timed steps, 20 ms
# warm-up; estimated 2-3 min on an H200), each output in
# $OUT/step-P-B[-CB][-FORCE].txt and one compact table in the summary;
# STEP_CFGS="P:B[:CB[:FORCE]] ..." and STEP_M=LIST choose others. `python` alone skips the CMake
# build: it pip-installs ./python into a folder of its own with the
# machine's python3 and its scikit-build-core, cmake and ninja (nothing is
# fetched), and runs the package's pytest suite (the GPU tests included,
# with the machine's torch) and python/examples/swap_linears.py. Sanitizers (SAN_JOBS runs at
# once, default 6): memcheck with the leak check on every GPU test;
# synccheck on gpu_direct, gpu_ownership, gpu_fused and gpu_kmajor;
# initcheck on gpu_direct's dtype test, gpu_ownership's every-path test and
# gpu_kmajor; racecheck on gpu_direct's dtype test and gpu_kmajor (the
# reduced configurations:
# TRELLIS_TEST_SMALL and TRELLIS_TEST_FILTER); any report or timeout fails
# the stage. A probe (scripts/sanitizer-probes) shows where a tool
# misjudges correct code; only what a probe shows is discounted, and
# cuBLAS's own kernels (nvjet) are left out of racecheck: they are not
# this project's code.
# SAN_TESTS limits memcheck to the tests named (default: every gpu_* test),
# SAN_TOOLS the tools (default all four), SAN_TIMEOUT bounds each run (400 s).
# The benchmark runs `trellis bench --with-generic` (what targets 1 and 3-7
# need, ~2.5 min on an H200; --with-generic is left out when BENCH ARGS
# force plan flags or sweep); SWEEP=1 adds a second call, the --sweep of
# 8192x28672 at M = 1 that scores target 2 (~1.5 min); B12X_BENCH=1 adds
# the b12x rows (SQG codebooks, pairs) beside MCG at the same bits per
# weight with their vs MCG ratio (~1 min, summary: bench b12x rows).
# Environment: OUT (log folder), BUILD (build folder), TRELLIS_CMAKE_ARGS
# (extra configure arguments, e.g. an experiment's -DCMAKE_CUDA_FLAGS=...),
# TRELLIS_COMMIT (the commit the bench records: the device copy of the tree
# has no .git, so set it in the device command, e.g. TRELLIS_COMMIT=abc1234).
# Dependencies: scripts/device-env.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/trellis-out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-device}
what=${1:-all}
shift || true

. scripts/device-env.sh

gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv,noheader)
echo "$gpu"
# build_targets TARGET...: configures $BUILD and builds only those targets
# (the direct and kmajor modes); exits with the build's errors on failure.
build_targets() {
  local t0
  t0=$(date +%s)
  # shellcheck disable=SC2086 # TRELLIS_CMAKE_ARGS holds several arguments
  configure_device_build "$BUILD" ${TRELLIS_CMAKE_ARGS:-} >"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target "$@" >>"$OUT/build.log" 2>&1 ||
    { grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1; }
  echo "build: $(($(date +%s) - t0)) s"
}
if [ "$what" = direct ]; then
  build_targets gpu_direct trellis_cli
  timeout 400 "$BUILD/tests/gpu_direct" >"$OUT/gpu-direct.log" 2>&1
  echo "gpu_direct: rc $?"
  grep -E "^\[ +(OK|FAILED|PASSED) |Error|error|worst|rel L2" "$OUT/gpu-direct.log" | head -40
  [ $# -gt 0 ] || set -- --shapes "8192,28672;28672,8192;4096,4096;2048,4096;6144,1024;512,6144" \
    --m 1,4,16 --bits 6,4 --codebook mcg,mul1 --reps 20 --warmup-ms 20
  timeout 400 "$BUILD/trellis" bench --csv "$OUT/bench-direct.csv" "$@" >"$OUT/bench-direct.txt" 2>&1
  echo "bench: rc $?"
  grep -E "peak:|error|FAIL" "$OUT/bench-direct.txt" | head -10
  awk -F"|" '/^\| [0-9]/ {s = $2 "-K" $3 $4; gsub(/ /, "", s); print "  " s, $5, $6, $7, $13, $14, $15}' \
    "$OUT/bench-direct.txt" | head -90
  # NCU=1: Nsight Compute on one launch of the register-direct kernel
  # (8192x28672, M = 1, K6 MCG and K4 MUL1): speed of light, occupancy,
  # warp stalls
  if [ "${NCU:-0}" = 2 ] && command -v ncu >/dev/null; then # stall reasons
    stalls=""
    for r in long_scoreboard short_scoreboard wait math_pipe_throttle mio_throttle \
      lg_throttle barrier branch_resolving dispatch_stall no_instruction not_selected \
      selected drain imc_miss tex_throttle misc membar sleeping; do
      stalls="$stalls,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
    done
    # NCU_CFGS: "K codebook m;..." (default K6 MCG, K2 MCG, K4 MUL1 at m = 1)
    IFS=';' read -r -a cfgs <<<"${NCU_CFGS:-6 mcg 1;2 mcg 1;4 mul1 1}"
    for cfg in "${cfgs[@]}"; do
      # shellcheck disable=SC2086 # three words
      set -- $cfg
      timeout 240 ncu --clock-control none --kernel-name regex:direct_kernel \
        --launch-skip 4 --launch-count 1 \
        --metrics "smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,gpu__time_duration.sum$stalls" \
        "$BUILD/trellis" bench --shapes 8192,28672 --m "$3" --bits "$1" --codebook "$2" \
        --reps 2 --warmup-ms 0 >"$OUT/ncu-stalls-k$1-$2-m$3.txt" 2>&1
      grep -E "smsp__|sm__|gpu__" "$OUT/ncu-stalls-k$1-$2-m$3.txt" | awk '{print $1, $(NF)}' |
        sed -e 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' |
        paste -sd' ' | sed "s/^/  [k$1 $2 m$3] /"
    done
  fi
  # NCU=3: warp-stall samples and executed instructions per SASS
  # instruction into $OUT/ncu-src-K-CB-mM.csv (read on the host), for
  # NCU_CFGS "K codebook m;..." (default K6 MCG m 1, K4 MUL1 m 1 and 4)
  if [ "${NCU:-0}" = 3 ] && command -v ncu >/dev/null; then
    IFS=';' read -r -a cfgs <<<"${NCU_CFGS:-6 mcg 1;4 mul1 1;4 mul1 4}"
    for cfg in "${cfgs[@]}"; do
      # shellcheck disable=SC2086 # three words
      set -- $cfg
      rep="$OUT/ncu-src-k$1-$2-m$3"
      timeout 240 ncu --clock-control none --kernel-name regex:direct_kernel \
        --launch-skip 4 --launch-count 1 --section SourceCounters --section WarpStateStats \
        --section SpeedOfLight --section ComputeWorkloadAnalysis \
        --import-source no -f -o "$rep" \
        "$BUILD/trellis" bench --shapes 8192,28672 --m "$3" --bits "$1" --codebook "$2" \
        --reps 2 --warmup-ms 0 >"$rep.log" 2>&1
      ncu --import "$rep.ncu-rep" --page source --csv --print-source sass >"$rep.csv" 2>&1 ||
        ncu --import "$rep.ncu-rep" --page source --csv >"$rep.csv" 2>&1
      ncu --import "$rep.ncu-rep" --page details >"$rep-details.txt" 2>&1
      rm -f "$rep.ncu-rep"
      echo "  [k$1 $2 m$3] source page: $(wc -l <"$rep.csv") lines; $(grep -E "Duration|Issue Slots Busy|Executed Ipc A" "$rep-details.txt" | awk '{print $1, $(NF)}' | paste -sd' ')"
    done
  fi
  if [ "${NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
    for cfg in "6 mcg" "4 mul1"; do
      set -- $cfg
      timeout 240 ncu --clock-control none --kernel-name regex:direct_kernel \
        --launch-skip 4 --launch-count 1 --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section WarpStateStats --section SchedulerStats \
        --section MemoryWorkloadAnalysis \
        "$BUILD/trellis" bench --shapes 8192,28672 --m 1 --bits "$1" --codebook "$2" \
        --reps 2 --warmup-ms 0 >"$OUT/ncu-direct-k$1-$2.txt" 2>&1
      grep -E "Duration|Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Issued Warp|No Eligible|Active Warps Per|Eligible Warps|Stall|Cluster|Waves|Grid Size|Shared Memory Config|Dynamic Shared" \
        "$OUT/ncu-direct-k$1-$2.txt" | head -40 | sed "s/^/  [k$1 $2] /"
    done
  fi
  # DIRECT_VARIANTS="label=nvcc flags;label=flags": the register-direct
  # kernel's units rebuilt with each set of flags (its compile-time tunables,
  # e.g. -DTRL_DIRECT_FMA_TOP=8), then `trellis bench` with VARIANT_ARGS
  # (default: 8192x28672, 28672x8192, 4096x4096 at m = 1, 4, K6 and K4, MCG
  # and MUL1) into $OUT/bench-<label>.txt, its rows in the summary.
  if [ -n "${DIRECT_VARIANTS:-}" ]; then
    IFS=';' read -r -a variants <<<"$DIRECT_VARIANTS"
    for v in "${variants[@]}"; do
      label=${v%%=*} flags=${v#*=}
      rm -f "$BUILD"/src/CMakeFiles/trellis_objects.dir/cuda/direct_u*.o
      t0=$(date +%s)
      NVCC_APPEND_FLAGS="$flags" cmake --build "$BUILD" -j"$(nproc)" --target trellis_cli \
        >"$OUT/build-$label.log" 2>&1 || { echo "variant $label: build failed"; continue; }
      # shellcheck disable=SC2086 # VARIANT_ARGS holds several arguments
      timeout 300 "$BUILD/trellis" bench ${VARIANT_ARGS:---shapes "8192,28672;28672,8192;4096,4096" --m 1,4 --bits 6,4 --codebook mcg,mul1 --reps 20 --warmup-ms 20} \
        >"$OUT/bench-$label.txt" 2>&1
      echo "== variant $label ($flags): build $(($(date +%s) - t0)) s, bench rc $?"
      awk -F"|" '/^\| [0-9]/ {s = $2 "-K" $3 $4; gsub(/ /, "", s); print "  " s, $5, $6, $7, $13, $14, $15}' \
        "$OUT/bench-$label.txt"
    done
    # the next build compiles the kernel's units afresh, without the flags
    rm -f "$BUILD"/src/CMakeFiles/trellis_objects.dir/cuda/direct_u*.o
  fi
  if [ -n "${SKETCH:-}" ] && [ -f "$SKETCH/stream.cu" ]; then
    nvcc -arch=sm_90 -O3 -std=c++17 -Xcompiler -fopenmp -o /tmp/sketch-stream "$SKETCH/stream.cu" &&
      /tmp/sketch-stream quick >"$OUT/sketch.txt" 2>&1
    grep -E "STREAM|device" "$OUT/sketch.txt" | head -30
  fi
  exit 0
fi
if [ "$what" = kmajor ]; then
  build_targets gpu_kmajor trellis_cli
  timeout 200 "$BUILD/tests/gpu_kmajor" >"$OUT/gpu-kmajor.log" 2>&1
  echo "gpu_kmajor: rc $?"
  grep -E "^\[ +(OK|FAILED|PASSED) |Error|error|rel L2" "$OUT/gpu-kmajor.log" | head -20
  for u in 6 8; do # K4 and K6: instructions per tile at 1, 2 and 4 sub-blocks
    timeout 60 python3 scripts/sass-loop.py \
      "$BUILD/src/CMakeFiles/trellis_objects.dir/cuda/direct_u$u.cu.o" 2>&1 | grep kmajor
  done
  [ $# -gt 0 ] || set -- --shapes "8192,28672;28672,8192;4096,4096;2048,4096;6144,1024;512,6144" \
    --m 1,4,8,16,32 --bits 6,4 --codebook mcg,mul1 --reps 20 --warmup-ms 20
  rows() { awk -F"|" '/^\| [0-9]/ {s = $2 "-K" $3 $4; gsub(/ /, "", s); print s, $5, $6, $7}' "$1"; }
  for v in default kmajor; do
    f=()
    [ $v = kmajor ] && f=(--force kmajor)
    timeout 280 "$BUILD/trellis" bench "$@" "${f[@]}" --csv "$OUT/bench-$v.csv" >"$OUT/bench-$v.txt" 2>&1
    echo "bench $v: rc $?"
  done
  echo "layer M | k-major path us | default path us"
  paste -d" " <(rows "$OUT/bench-kmajor.txt") <(rows "$OUT/bench-default.txt" | awk '{print "|", $3, $4}')
  for v in default kmajor; do
    f=()
    [ $v = kmajor ] && f=(--force kmajor)
    timeout 250 "$BUILD/trellis" bench --model preset:glm-tp4 --bits 3.36 --m "${STEP_M:-1,4,16}" \
      "${f[@]}" --reps 10 --warmup-ms 20 >"$OUT/step-glm-tp4-3.36-$v.txt" 2>&1
    echo "step glm-tp4 3.36 $v: rc $?"
    grep -E "^\| +[0-9]" "$OUT/step-glm-tp4-3.36-$v.txt" | head -8
  done
  exit 0
fi
if [ "$what" != python ]; then
  t0=$(date +%s)
  # shellcheck disable=SC2086 # TRELLIS_CMAKE_ARGS holds several arguments
  configure_device_build "$BUILD" ${TRELLIS_CMAKE_ARGS:-} >"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" >>"$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -40; exit 1; }
  t1=$(date +%s)
  echo "build: $((t1 - t0)) s, $(grep -c "warning" "$OUT/build.log") warning lines"
  grep -A3 "warning" "$OUT/build.log" | head -20
fi

gpu_rc=0 cpu_rc=0 bench_rc=0
if [ "$what" = all ] || [ "$what" = tests ]; then
  ctest --test-dir "$BUILD" -L gpu --output-on-failure -V >"$OUT/gpu-tests.log" 2>&1
  gpu_rc=$?
  ctest --test-dir "$BUILD" -L cpu -j8 --output-on-failure >"$OUT/cpu-tests.log" 2>&1
  cpu_rc=$?
  grep -E "^\[ +(OK|FAILED|PASSED|SKIPPED) |Error|error:|fail|rel " "$OUT/gpu-tests.log" | tail -80
  tail -3 "$OUT/cpu-tests.log"
fi
san_rc=0
san_lines=()
if [ "$what" = all ] || [ "$what" = sanitize ]; then
  # sanitize TOOL TEST SMALL FILTER [extra compute-sanitizer args]: one run
  # in the background (SAN_JOBS at a time: the sanitizers are CPU-bound
  # and the runs share the GPU), its summary line to $OUT/san/*.line
  mkdir -p "$OUT/san" "$BUILD/probes"
  rm -f "$OUT"/san/*.line
  # A probe, a correct program that shows where a tool cannot see (see its
  # comments): while initcheck reports cublas_probe, the one kernel that
  # reads a cuBLAS output (bias_convert_kernel, the dense path's epilogue)
  # is not initchecked. (No kernel uses bulk copies any more: racecheck's
  # reports are all counted.)
  cublas_limit=0 sync_max_cluster=${SAN_MAX_CLUSTER:-}
  nvcc -arch=sm_90a -O2 -o "$BUILD/probes/cublas_probe" scripts/sanitizer-probes/cublas_probe.cu \
    -lcublas || san_rc=1
  compute-sanitizer --tool initcheck --error-exitcode 99 --print-limit 1 \
    "$BUILD/probes/cublas_probe" >"$OUT/san/probe-initcheck.log" 2>&1
  [ $? -eq 99 ] && cublas_limit=1
  san_lines+=("probe: initcheck misses cuBLAS stores: $cublas_limit")
  sanitize() {
    local tool=$1 t=$2 small=$3 filter=$4
    shift 4
    while [ "$(jobs -rp | wc -l)" -ge "${SAN_JOBS:-6}" ]; do sleep 1; done
    (
      log="$OUT/san/$tool-$t.log"
      t0=$(date +%s)
      # tests whose assertions are about timing between streams skip them
      # (the sanitizers serialise the device's work)
      limit=""
      [ "$tool" = synccheck ] && limit=$sync_max_cluster
      TRELLIS_TEST_SMALL=$small TRELLIS_TEST_FILTER=$filter TRELLIS_UNDER_SANITIZER=1 \
        TRELLIS_TEST_MAX_CLUSTER=$limit \
        timeout "${SAN_TIMEOUT:-400}" \
        compute-sanitizer --tool "$tool" --error-exitcode 99 "$@" \
        "$BUILD/tests/$t" >"$log" 2>&1
      rc=$?
      summary=$(grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY" "$log" | tail -2 | tr '\n' ' ')
      # 77: the test skipped (no GPU); 124: timed out; 99: a report
      printf '%-10s %-16s %-20s rc %-3s %4ss  %s\n' "$tool" "$t" "${filter:-all tests}" "$rc" \
        "$(($(date +%s) - t0))" "$summary" >"$OUT/san/$tool-$t.line"
      # a failing run shows its first report (or its last lines)
      if [ $rc -ne 0 ]; then
        { grep -m1 -A5 -E "^========= [A-Z]" "$log" || tail -5 "$log"; } |
          cut -c1-160 | sed 's/^/      /' >>"$OUT/san/$tool-$t.line"
      fi
    ) &
  }
  tools=" ${SAN_TOOLS:-memcheck synccheck initcheck racecheck} "
  # racecheck is the slowest: the register-direct kernel's dtype test
  # (its shared-memory rounds and the cluster reduce), started first
  [[ $tools != *" racecheck "* ]] || sanitize racecheck gpu_direct 1 test_dtypes
  # the k-major kernel's rounds (cuBLAS's own kernels, run by its dense
  # path, are not ours to judge: racecheck flags nvjet's)
  [[ $tools != *" racecheck "* ]] ||
    sanitize racecheck gpu_kmajor 1 "" --kernel-name-exclude kns=nvjet
  if [[ $tools == *" initcheck "* ]]; then
    sanitize initcheck gpu_direct 1 test_dtypes""
    excl=()
    [ $cublas_limit = 0 ] || excl=(--kernel-name-exclude kns=bias_convert_kernel)
    sanitize initcheck gpu_ownership 1 test_prepare_twice "${excl[@]}" # every path once
    # the k-major payload's paths; its dense path's output stage reads
    # cuBLAS's output (rot_out_kernel, as the half rates')
    kexcl=()
    [ $cublas_limit = 0 ] || kexcl=(--kernel-name-exclude kns=rot_out_kernel)
    sanitize initcheck gpu_kmajor 1 "" "${kexcl[@]}"
  fi
  if [[ $tools == *" synccheck "* ]]; then
    for t in gpu_direct gpu_ownership gpu_fused gpu_kmajor; do
      sanitize synccheck "$t" 1 ""
    done
  fi
  if [[ $tools == *" memcheck "* ]]; then
    for t in ${SAN_TESTS:-$(cd "$BUILD/tests" && ls gpu_* 2>/dev/null)}; do
      [ -x "$BUILD/tests/$t" ] || continue
      sanitize memcheck "$t" 1 "" --leak-check full
    done
  fi
  wait
  for f in "$OUT"/san/*.line; do
    [ -e "$f" ] || continue
    line=$(cat "$f")
    san_lines+=("$line")
    [[ $line == *" rc 0 "* ]] || san_rc=1
  done
fi
sweep_rc=0 b12x_rc=0
if [ "$what" = all ] || [ "$what" = bench ]; then
  with_generic=(--with-generic) # target 5: default vs forced generic
  for a in "$@"; do
    case $a in --force* | --sweep) with_generic=() ;; esac
  done
  "$BUILD/trellis" bench "${with_generic[@]}" --csv "$OUT/bench.csv" --json /tmp/bench.json "$@" >"$OUT/bench.txt" 2>&1
  bench_rc=$?
  if [ "${SWEEP:-0}" = 1 ]; then # target 2: every K and codebook at M = 1
    "$BUILD/trellis" bench --sweep --m 1 --shapes 8192,28672 --csv "$OUT/bench-sweep.csv" \
      --json /tmp/bench-sweep.json >"$OUT/bench-sweep.txt" 2>&1
    sweep_rc=$?
  fi
  # B12X_BENCH=1: SQG codebooks and pairs beside MCG at the same bits per
  # weight (the vs MCG column: ratio of decoded weights/s), every row on the
  # generic path's split-K decode-GEMM (--force generic,legacy: no fused or
  # persistent kernel for the MCG rows either), ~1 min
  if [ "${B12X_BENCH:-0}" = 1 ]; then
    b12x=(--m 1,16 --reps 10 --warmup-ms 10 --force generic,legacy)
    { "$BUILD/trellis" bench --shapes 4096,14336 --bits 2,3,4,5,6 \
        --codebook mcg,sqg_e4m3,sqg_fp16 "${b12x[@]}" &&
        "$BUILD/trellis" bench --pair p24,p33,p44 --rate-axis n --orth 7168 \
          "${b12x[@]}" &&
        "$BUILD/trellis" bench --pair p24,p33 --rate-axis k --orth 7168 \
          "${b12x[@]}"; } >"$OUT/bench-b12x.txt" 2>&1
    b12x_rc=$?
  fi
fi
step_rc=0
step_lines=()
if [ "$what" = step ] || { [ "${STEP_BENCH:-0}" = 1 ] && { [ "$what" = all ] || [ "$what" = bench ]; }; }; then
  t0=$(date +%s)
  # STEP_CFGS: "preset:bits[:codebook[:force]] ..." (default below),
  # STEP_M: the rows (default 1,8,32,128)
  for cfg in ${STEP_CFGS:-llama-3.1-8b:4 llama-3.1-8b:6 llama-3.1-70b:4 \
    llama-3.1-70b:6 glm-tp4:4 glm-tp4:6 glm-tp4:3.36}; do
    IFS=: read -r p b cb force <<<"$cfg"
    extra=()
    [ -z "$cb" ] || extra+=(--codebook "$cb")
    [ -z "$force" ] || extra+=(--force "$force")
    log="$OUT/step-$p-$b${cb:+-$cb}${force:+-$force}.txt"
    b=$b${cb:+ $cb}${force:+ $force}
    "$BUILD/trellis" bench --model "preset:$p" --bits "${b%% *}" \
      --m "${STEP_M:-1,8,32,128}" "${extra[@]}" --reps 10 --warmup-ms 20 \
      >"$log" 2>&1
    rc=$?
    [ $rc -eq 0 ] || step_rc=1
    # the result table's rows: | M | eager | FULL | PIECE | GB/s | %peak |
    # FP16 | vs FP16 | FP8 | vs FP8 | check |
    while IFS= read -r line; do
      step_lines+=("$(echo "$line" | awk -F'|' -v p="$p" -v b="$b" '{
        gsub(/ /, "", $0); printf "%-14s %4s %4s %10s %10s %10s %7s %8s %8s %5s",
        p, b, $2, $3, $4, $5, $7, $9, $11, $12 }')")
    done < <(grep -E '^\| +[0-9]+ \|.*\| (PASS|FAIL) +\|$' "$log")
    [ $rc -eq 0 ] || step_lines+=("$p $b: rc $rc: $(grep -E 'trellis:' "$log" | tail -2 | tr '\n' ' ')")
  done
  step_lines+=("($(($(date +%s) - t0)) s)")
fi
py_rc=0 example_rc=0
if [ "$what" = all ] || [ "$what" = python ]; then
  # pip builds the library with the machine's scikit-build-core, cmake and
  # ninja (no build isolation, no index: nothing is fetched) and installs
  # the package into a folder of its own. Not a venv: python3 there is
  # itself a venv's, whose torch a nested venv would not see.
  pydir=/tmp/trellis-python
  rm -rf "$pydir"
  t0=$(date +%s)
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install --no-build-isolation \
    --no-deps --no-index --target "$pydir" -v ./python >"$OUT/python-build.log" 2>&1
  py_rc=$?
  echo "python build: $(($(date +%s) - t0)) s (rc $py_rc)"
  [ $py_rc -eq 0 ] || tail -30 "$OUT/python-build.log"
  if [ $py_rc -eq 0 ]; then
    PYTHONPATH=$pydir timeout 900 python3 -m pytest python/tests -v -rs \
      -p no:cacheprovider >"$OUT/python-tests.log" 2>&1
    py_rc=$?
    grep -E "FAILED|ERROR|SKIPPED" "$OUT/python-tests.log" | head -40
    # the first failure's traceback
    sed -n '/^=* FAILURES =*$/,/^=* short test summary/p' \
      "$OUT/python-tests.log" | grep -vE "^\s*$" | tail -40
    PYTHONPATH=$pydir timeout 300 python3 python/examples/swap_linears.py \
      >"$OUT/python-example.txt" 2>&1
    example_rc=$?
  fi
fi
demo_rc=0
if [ "$what" != python ]; then
  "$BUILD/trellis" demo >"$OUT/demo.txt" 2>&1
  demo_rc=$?
fi

# SASS of the hot kernels: instruction mix of the register-direct K6/MCG
# kernel (one token block) and of the split-K decode kernel's K6/MCG
# m-block-1 variant (its stage loop is fully unrolled).
sass_mix="" direct_mix=""
sass_count() { # FILE FUNCTION-PATTERN: opcode counts of one function
  awk -v pat="$2" '$0 ~ "Function : .*" pat {on=1; next}
    /Function :/ {on=0} on && /\/\*[0-9a-f]+\*\/ / {
      for (i = 1; i <= NF; i++) if ($i ~ /^[A-Z][A-Z0-9_.]+$/) {
        split($i, a, "."); c[a[1]]++; n++; break } }
    END { for (k in c) printf "%s %d\n", k, c[k]; printf "TOTAL %d\n", n }' \
    "$1" | sort -k2 -nr | head -16 | tr '\n' ' '
}
if [ "$what" != python ] && command -v cuobjdump >/dev/null; then
  for obj in $(find "$BUILD" -name 'gemm_k6.cu.o'); do
    cuobjdump -sass "$obj" >"$OUT/gemm_k6.sass" 2>/dev/null
  done
  for obj in $(find "$BUILD" -name 'direct_u8.cu.o'); do
    cuobjdump -sass "$obj" >"$OUT/direct_k6.sass" 2>/dev/null
  done
  sass_mix=$(sass_count "$OUT/gemm_k6.sass" 'dq_gemm_kernelILi6ELi1ELi1ELb0E')
  direct_mix=$(sass_count "$OUT/direct_k6.sass" 'direct_kernelILi12ELi1ELi0EEEv')
fi

echo "================ summary ================"
echo "$gpu"
if [ "$what" = all ] || [ "$what" = tests ]; then
  echo "gpu tests: $(grep -E 'tests passed|tests failed' "$OUT/gpu-tests.log" | tail -1) (rc $gpu_rc)"
  grep -E "^[0-9]+/[0-9]+ Test" "$OUT/gpu-tests.log" | sed 's/^/  /'
  echo "cpu tests: $(grep -E 'tests passed|tests failed' "$OUT/cpu-tests.log" | tail -1) (rc $cpu_rc)"
fi
if [ "$what" = all ] || [ "$what" = sanitize ]; then
  echo "compute-sanitizer (rc $san_rc):"
  printf '  %s\n' "${san_lines[@]}"
fi
[ -n "$sass_mix" ] && echo "SASS dq_gemm_kernel<6,MCG,1,fp16>: $sass_mix"
[ -n "$direct_mix" ] && echo "SASS direct_kernel<12,MCG,halves>: $direct_mix"
if [ "$what" != python ]; then
  echo "demo (rc $demo_rc):"
  sed 's/^/  /' "$OUT/demo.txt" | tail -12
fi
if [ "$what" = all ] || [ "$what" = python ]; then
  echo "python tests: $(tail -1 "$OUT/python-tests.log" 2>/dev/null) (rc $py_rc)"
  echo "python example (rc $example_rc):"
  sed 's/^/  /' "$OUT/python-example.txt" 2>/dev/null | tail -6
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  echo "bench (rc $bench_rc):"
  cat "$OUT/bench.txt" | tail -120
  if [ "${SWEEP:-0}" = 1 ]; then
    echo "bench --sweep (rc $sweep_rc):"
    tail -60 "$OUT/bench-sweep.txt"
  fi
  if [ "${B12X_BENCH:-0}" = 1 ]; then
    echo "bench b12x rows (rc $b12x_rc):"
    grep -E '^\| (k x n|[0-9])' "$OUT/bench-b12x.txt" | grep -v -- '--|' | tail -80
    grep -iE 'error|FAIL' "$OUT/bench-b12x.txt" | head -5
  fi
fi
if [ ${#step_lines[@]} -gt 0 ]; then
  echo "decode step (rc $step_rc): preset bits M | eager FULL PIECEWISE us | %peak | vs FP16 | vs FP8 | check"
  printf '  %s\n' "${step_lines[@]}"
fi
[ $gpu_rc -eq 0 ] && [ $cpu_rc -eq 0 ] && [ $bench_rc -eq 0 ] && [ $sweep_rc -eq 0 ] && [ $step_rc -eq 0 ] &&
  [ $b12x_rc -eq 0 ] &&
  [ $demo_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $py_rc -eq 0 ] && [ $example_rc -eq 0 ]
