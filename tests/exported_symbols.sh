#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# libtrellis.so exports exactly its public API: every dynamic symbol it
# defines is a function declared TRELLIS_API in trellis.h and every such
# function is exported. Internal functions are hidden (-fvisibility=hidden);
# the benchmark, the .npy reader/writer and the other tools live in their own
# static libraries, never in libtrellis.
#
# usage: exported_symbols.sh LIBTRELLIS_SO TRELLIS_H
set -u
lib=$1
header=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/trellis-exports.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

if ! nm -D --defined-only "$lib" >"$tmp/nm"; then
  echo "FAIL: nm -D --defined-only $lib"
  exit 1
fi
awk 'NF >= 3 { print $3 }' "$tmp/nm" | sed 's/@.*//' | sort -u >"$tmp/exported"
# Names of the TRELLIS_API declarations (a declaration may span lines).
awk '/^TRELLIS_API/ {
       decl = $0
       while (decl !~ /\(/ && (getline line) > 0) decl = decl " " line
       sub(/\(.*/, "", decl)
       n = split(decl, w, /[ *]+/)
       print w[n]
     }' "$header" | sort -u >"$tmp/declared"

bad=0
if [ ! -s "$tmp/declared" ]; then
  echo "FAIL: no TRELLIS_API declarations found in $header"
  bad=1
fi
# shellcheck disable=SC2013 # symbol names hold no spaces
for s in $(grep -v '^trellis_' "$tmp/exported"); do
  echo "FAIL: $s is exported but is not named trellis_*"
  bad=1
done
for s in $(comm -23 "$tmp/exported" "$tmp/declared"); do
  echo "FAIL: $s is exported but is not public API (not TRELLIS_API in trellis.h)"
  bad=1
done
for s in $(comm -13 "$tmp/exported" "$tmp/declared"); do
  echo "FAIL: $s is declared TRELLIS_API in trellis.h but not exported"
  bad=1
done
if grep -iE 'npy|bench' "$tmp/exported"; then
  echo "FAIL: benchmark or .npy symbols above are exported"
  bad=1
fi
if [ "$bad" -eq 0 ]; then
  echo "ok: $(wc -l <"$tmp/exported" | tr -d ' ') exported symbols, all trellis_* public API of trellis.h"
fi
exit $bad
