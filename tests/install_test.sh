#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs the build into a temporary prefix and builds a small program
# against it as a user would: through pkg-config (also after moving the
# prefix: the .pc file is relative to itself) and through the CMake package
# (find_package(libtrellis CONFIG), shared and static library, and the shared
# one where the CUDA toolkit is not found), then runs it; and the licence.
#
# usage: install_test.sh BUILD_DIR CONSUMER_DIR CMAKE CC PKG_CONFIG STATIC
#                        [FLAGS]
#   CONSUMER_DIR  tests/install (consumer.c and its CMakeLists.txt)
#   PKG_CONFIG    the pkg-config program ("" skips that part)
#   STATIC        ON or OFF: also link libtrellis::trellis_static
#   FLAGS         extra compile and link flags (the sanitizers of the build)
set -eu
build=$1
src=$2
cmake=$3
cc=$4
pkgconfig=$5
static=$6
flags=${7:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trellis-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

run() { # run LOG COMMAND...: the command's output only when it fails
  log=$1
  shift
  if ! "$@" >"$tmp/$log" 2>&1; then
    echo "FAIL: $*"
    tail -n 40 "$tmp/$log"
    exit 1
  fi
}

prefix=$tmp/prefix
run install.log "$cmake" --install "$build" --prefix "$prefix"
echo "ok   cmake --install into $prefix"

# pkg-config, then the same after moving the whole prefix.
pc_build() { # pc_build PREFIX NAME
  pc=$(find "$1" -name libtrellis.pc | head -n 1)
  [ -n "$pc" ] || { echo "FAIL: no libtrellis.pc under $1"; exit 1; }
  pcdir=$(dirname "$pc")
  export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  libdir=$("$pkgconfig" --variable=libdir libtrellis)
  cflags=$("$pkgconfig" --cflags libtrellis)
  libs=$("$pkgconfig" --libs libtrellis)
  case "$libdir" in
  "$1"/*) ;;
  *)
    echo "FAIL: pkg-config libdir $libdir is not under $1"
    exit 1
    ;;
  esac
  # shellcheck disable=SC2086 # flags hold several arguments
  run "$2.log" "$cc" -std=c11 -Wall -Wextra -pedantic -Werror $flags $cflags \
    "$src/consumer.c" -o "$tmp/$2" $libs -Wl,-rpath,"$libdir"
  run "$2.run" "$tmp/$2"
  echo "ok   pkg-config ($libs): $(cat "$tmp/$2.run")"
}
if [ -n "$pkgconfig" ]; then
  saved_pc_path=${PKG_CONFIG_PATH:-}
  pc_build "$prefix" consumer_pc
  mv "$prefix" "$tmp/moved"
  prefix=$tmp/moved
  PKG_CONFIG_PATH=$saved_pc_path
  [ -n "$PKG_CONFIG_PATH" ] || unset PKG_CONFIG_PATH
  pc_build "$prefix" consumer_pc_moved
else
  echo "skip pkg-config (not found)"
fi

# The CMake package.
run configure.log "$cmake" -S "$src" -B "$tmp/cmake" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCONSUMER_STATIC="$static"
run build.log "$cmake" --build "$tmp/cmake"
targets=consumer_shared
[ "$static" = ON ] && targets="$targets consumer_static"
for t in $targets; do
  run "$t.run" "$tmp/cmake/$t"
  echo "ok   find_package, $t: $(cat "$tmp/$t.run")"
done

# The shared library alone needs none of the static one's dependencies: a
# project that finds no CUDA toolkit (nor pkg-config) still gets it.
run configure_shared.log "$cmake" -S "$src" -B "$tmp/cmake_shared" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" \
  -DCONSUMER_STATIC=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
run build_shared.log "$cmake" --build "$tmp/cmake_shared"
run consumer_shared_only.run "$tmp/cmake_shared/consumer_shared"
echo "ok   find_package without the CUDA toolkit, consumer_shared:" \
  "$(cat "$tmp/consumer_shared_only.run")"
[ -f "$prefix/share/doc/libtrellis/LICENSE" ] ||
  { echo "FAIL: no LICENSE under $prefix/share/doc/libtrellis"; exit 1; }
echo "ok   LICENSE installed"
