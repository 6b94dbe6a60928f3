#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Bad invocations of the `trellis` CLI. Each one must exit non-zero without
# crashing (exit code < 128), print exactly one line on stderr, and that line
# must name the file, tensor or argument at fault.
#
# usage: cli_errors.sh TRELLIS_CLI DATA_DIR [TRELLIS_BENCH]
#   (DATA_DIR holds testvectors/; TRELLIS_BENCH is the trellis-bench program)
set -u

CLI=$1
TV=$2/testvectors
BENCH=${3:-}
CASE=$TV/k1_mcg_256x128.safetensors # k = 256, n = 128
LAYER=model.layers.0.mlp.proj
TMP=$(mktemp -d "${TMPDIR:-/tmp}/trellis-cli-errors.XXXXXX")
trap 'rm -rf "$TMP"' EXIT INT TERM

total=0
failed=0

# expect_error NEEDLE COMMAND [ARGS...]
expect_error() {
  needle=$1
  shift
  total=$((total + 1))
  "$@" >"$TMP/stdout" 2>"$TMP/stderr"
  rc=$?
  lines=$(wc -l <"$TMP/stderr" | tr -d ' ')
  problem=
  if [ "$rc" -eq 0 ]; then
    problem="exit code 0"
  elif [ "$rc" -ge 128 ]; then
    problem="crashed (exit code $rc)"
  fi
  if [ "$lines" -ne 1 ]; then
    problem="${problem:+$problem; }$lines stderr lines instead of 1"
  fi
  if ! grep -qF -- "$needle" "$TMP/stderr"; then
    problem="${problem:+$problem; }stderr does not name '$needle'"
  fi
  shown=$(printf '%s ' "$@" | sed "s|^$CLI ||; s|^fwd |forward (cpu) --input |; s|$TMP/||g")
  if [ -n "$problem" ]; then
    failed=$((failed + 1))
    echo "FAIL trellis $shown: $problem"
    sed 's/^/     | /' "$TMP/stderr"
  else
    echo "ok   trellis $shown(exit $rc): $(cat "$TMP/stderr")"
  fi
}

# mk_npy FILE DESCR SHAPE DATA_BYTES: a version 1.0 .npy file with zero data.
mk_npy() {
  hdr="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  len=$((${#hdr} + 1)) # + the closing newline
  pad=$(((64 - (10 + len) % 64) % 64))
  total_len=$((len + pad))
  {
    printf '\223NUMPY\001\000'
    # The 2-byte little-endian header length, as octal escapes.
    # shellcheck disable=SC2059
    printf "\\$(printf %03o $((total_len % 256)))\\$(printf %03o $((total_len / 256)))"
    printf "%s%${pad}s\n" "$hdr" ""
    head -c "$4" /dev/zero
  } >"$1"
}

# --- inputs --------------------------------------------------------------
mkdir "$TMP/empty_dir"
size=$(wc -c <"$CASE" | tr -d ' ')
head -c 4 "$CASE" >"$TMP/trunc_4.safetensors"
head -c 100 "$CASE" >"$TMP/trunc_100.safetensors"
head -c $((size - 7)) "$CASE" >"$TMP/trunc_tail.safetensors"
# Header length 0xffff... far past the end of the file.
printf '\377\377\377\377\000\000\000\000{}' >"$TMP/hdr_past_eof.safetensors"
mk_npy "$TMP/x_ok.npy" '<f2' '(2, 256)' 1024
mk_npy "$TMP/x_k_plus_1.npy" '<f2' '(2, 257)' 1028
mk_npy "$TMP/x_1d_wrong.npy" '<f4' '(255,)' 1020
mk_npy "$TMP/x_3d.npy" '<f2' '(1, 2, 256)' 1024
mk_npy "$TMP/x_f64.npy" '<f8' '(2, 256)' 4096
mk_npy "$TMP/x_i32.npy" '<i4' '(2, 256)' 2048
mk_npy "$TMP/x_short_data.npy" '<f2' '(2, 256)' 100
printf 'not a numpy file at all' >"$TMP/x_garbage.npy"
mk_npy "$TMP/x_w64.npy" '<f2' '(2, 64)' 256

# --- command line ----------------------------------------------------------
expect_error "missing command" "$CLI"
expect_error "frobnicate" "$CLI" frobnicate
expect_error "help: unknown command 'frobnicate'" "$CLI" help frobnicate
expect_error "one command at a time" "$CLI" help info decode
expect_error "--bogus" "$CLI" info --bogus "$CASE"
expect_error "PATH" "$CLI" info
expect_error "LAYER" "$CLI" decode "$CASE"
expect_error "extra_arg" "$CLI" decode "$CASE" "$LAYER" extra_arg --output "$TMP/w.npy"
expect_error "--output" "$CLI" decode "$CASE" "$LAYER"
expect_error "--output" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy"
expect_error "--input" "$CLI" forward "$CASE" "$LAYER" --output "$TMP/y.npy"
expect_error "--output" "$CLI" decode "$CASE" "$LAYER" --output
# An option where a value belongs is refused (it wrote a file named --dense).
cd "$TMP" || exit 1
expect_error "option --output needs a value, got the option '--dense'" "$CLI" decode "$CASE" "$LAYER" --output --dense
cd - >/dev/null || exit 1
if [ -e "$TMP/--dense" ]; then
  total=$((total + 1)) failed=$((failed + 1))
  echo "FAIL trellis decode ... --output --dense: wrote a file named --dense"
fi
expect_error "option --input needs a value, got the option '-h'" "$CLI" forward "$CASE" "$LAYER" --output "$TMP/y.npy" --input -h
# Integers are digits alone (strtol took " 5" and "+5").
expect_error "--threads: expected an integer in [0, 4096], got ' 5'" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --threads " 5"
expect_error "--threads: expected an integer in [0, 4096], got '+5'" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --threads +5
expect_error "--threads: expected an integer in [0, 4096], got '5 '" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --threads "5 "
expect_error "--reps: expected an integer in [1, 100000], got '0x10'" "$CLI" demo --reps 0x10
expect_error "--bits: expected" "$CLI" synth llama-3.1-8b "$TMP/synth_bits" --bits " 4"
expect_error "--device" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --device tpu
expect_error "--out-dtype" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --out-dtype f64
expect_error "--threads" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --threads many
expect_error "--device" "$CLI" demo --device tpu
expect_error "--reps" "$CLI" demo --reps 0
expect_error "--warmup-ms" "$CLI" bench --warmup-ms -1
expect_error "--warmup-ms" "$CLI" bench --warmup-ms soon
expect_error "no_such_targets.json" "$CLI" bench --targets "$TMP/no_such_targets.json"
if [ -n "$BENCH" ]; then # the same entry point as `trellis bench`
  expect_error "--warmup-ms" "$BENCH" --warmup-ms -1
  expect_error "--bogus" "$BENCH" --bogus
  expect_error "--m: expected an integer in [1, " "$BENCH" --m "+5"
  expect_error "--m: expected an integer in [1, " "$BENCH" --m " 5"
fi

# --- files -----------------------------------------------------------------
expect_error "no_such_file.safetensors" "$CLI" info "$TMP/no_such_file.safetensors"
expect_error "empty_dir" "$CLI" info "$TMP/empty_dir"
expect_error "trunc_4.safetensors" "$CLI" info "$TMP/trunc_4.safetensors"
expect_error "trunc_100.safetensors" "$CLI" info "$TMP/trunc_100.safetensors"
expect_error "trunc_tail.safetensors" "$CLI" info "$TMP/trunc_tail.safetensors"
expect_error "trunc_tail.safetensors" "$CLI" decode "$TMP/trunc_tail.safetensors" "$LAYER" --output "$TMP/w.npy"
expect_error "hdr_past_eof.safetensors" "$CLI" info "$TMP/hdr_past_eof.safetensors"
expect_error "README.md" "$CLI" info "$TV/README.md"
expect_error "no.such.layer" "$CLI" decode "$CASE" no.such.layer --output "$TMP/w.npy"
expect_error "no.such.layer" "$CLI" forward "$CASE" no.such.layer --input "$TMP/x_ok.npy" --output "$TMP/y.npy"
expect_error "no_dir/w.npy" "$CLI" decode "$CASE" "$LAYER" --output "$TMP/no_dir/w.npy"

# --- tensor-parallel shards --------------------------------------------------
tp() { # tp ARGS...: forward on the CPU of x_ok with ARGS
  "$CLI" forward "$CASE" "$LAYER" --device cpu --input "$TMP/x_ok.npy" --output "$TMP/y.npy" "$@"
}
expect_error "--rank needs --tp" tp --rank 0
expect_error "--split needs --tp" tp --split n
expect_error "--tp 2 needs --rank" tp --tp 2 --split k
expect_error "--tp 2 needs --rank" tp --tp 2 --rank 1
expect_error "--tp" tp --tp 0 --rank 0 --split k
expect_error "--rank" tp --tp 2 --rank 2 --split k
expect_error "--split" tp --tp 2 --rank 0 --split m
expect_error "fewer than the 2 ranks" tp --tp 2 --rank 0 --split n
expect_error "x_w64.npy" "$CLI" forward "$CASE" "$LAYER" --device cpu --input "$TMP/x_w64.npy" --output "$TMP/y.npy" --tp 2 --rank 1 --split k
expect_error "--tp" "$CLI" info "$CASE" --tp many
expect_error "--rank" "$CLI" info "$CASE" --tp 2 --rank 0
expect_error "--plan" "$CLI" info "$CASE" --tp 2 --plan
expect_error "--split needs --tp" "$CLI" info "$CASE" --split k
expect_error "--json" "$CLI" info "$CASE" --json --plan
expect_error "--gpu needs --plan" "$CLI" info "$CASE" --gpu h200
expect_error "--gpu: expected h200" "$CLI" info "$CASE" --plan --gpu h900
expect_error "--gpu: expected h200" "$CLI" info "$CASE" --plan --gpu sms=0,arch=90
expect_error "--gpu: expected h200" "$CLI" info "$CASE" --plan --gpu sms=132
expect_error "--gpu: expected h200" "$CLI" info "$CASE" --plan --gpu sms=132,arch=90,sms=1
expect_error "no_such_file.safetensors" "$CLI" info "$TMP/no_such_file.safetensors" --json
expect_error "no_such_file.safetensors" "$CLI" info "$TMP/no_such_file.safetensors" --json --tp 2

# --- .npy inputs -----------------------------------------------------------
fwd() { # fwd INPUT: forward on the CPU with INPUT as X
  "$CLI" forward "$CASE" "$LAYER" --device cpu --input "$1" --output "$TMP/y.npy"
}
expect_error "no_such_input.npy" fwd "$TMP/no_such_input.npy"
expect_error "x_k_plus_1.npy" fwd "$TMP/x_k_plus_1.npy"
expect_error "x_1d_wrong.npy" fwd "$TMP/x_1d_wrong.npy"
expect_error "x_3d.npy" fwd "$TMP/x_3d.npy"
expect_error "x_f64.npy" fwd "$TMP/x_f64.npy"
expect_error "x_i32.npy" fwd "$TMP/x_i32.npy"
expect_error "x_short_data.npy" fwd "$TMP/x_short_data.npy"
expect_error "x_garbage.npy" fwd "$TMP/x_garbage.npy"

# --- --output - (stdout) that cannot be written -----------------------------
to_full() { "$@" >/dev/full; }
if [ -w /dev/full ]; then
  expect_error "--output - (stdout): cannot write" to_full "$CLI" decode "$CASE" "$LAYER" --output -
  expect_error "--output - (stdout): cannot write" to_full "$CLI" forward "$CASE" "$LAYER" --device cpu --input "$TMP/x_ok.npy" --output -
fi

# --- --device cuda without a GPU -------------------------------------------
# (the one wording of the library, the CLI and the Python package)
if "$CLI" --version | grep -q "CUDA not built"; then
  expect_error "--device cuda: libtrellis was built without CUDA" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --device cuda
  expect_error "--device cuda: libtrellis was built without CUDA" "$CLI" demo --device cuda
elif "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --device cuda >/dev/null 2>&1; then
  echo "skip --device cuda error (a CUDA device is present)"
else
  expect_error "--device cuda: no CUDA device is available" "$CLI" forward "$CASE" "$LAYER" --input "$TMP/x_ok.npy" --output "$TMP/y.npy" --device cuda
fi

echo "cli_errors: $((total - failed))/$total bad invocations handled"
[ "$failed" -eq 0 ]
