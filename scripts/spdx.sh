#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The licence line of every tracked source file: the SPDX identifier
# Apache-2.0 (LICENSE holds the text) in the file's header.
#
# usage: scripts/spdx.sh [check|add|list]
#   check  (default) lists the files without the line, or with another
#          identifier, and exits 1 when there is any; CI can run this
#   add    writes the line into each file that lacks it (a file with another
#          identifier is reported, not changed); running it twice changes
#          nothing the second time
#   list   prints the files the rule covers
#
# Which files: tracked .c .h .cu .cuh .py .sh .cmake files, CMakeLists.txt,
# the configured .c.in/.cmake.in templates and scripts that start with a
# shebang (such as .ci/run); not test data or fuzz corpora. Where the line
# goes: C and CUDA files open with /* SPDX-License-Identifier: Apache-2.0 */;
# the others carry "# SPDX-License-Identifier: Apache-2.0" as their first
# line, or right after a shebang (and a Python coding line).
set -eu
cd "$(dirname "$0")/.."
mode=${1:-check}
id="Apache-2.0"
tag="SPDX-License-Identifier:"

case "$mode" in
check | add | list) ;;
*)
  echo "usage: scripts/spdx.sh [check|add|list]" >&2
  exit 2
  ;;
esac

files() {
  git ls-files | grep -Ev '^(tests/data/|fuzz/corpus)' | while IFS= read -r f; do
    [ -f "$f" ] || continue
    case "$f" in
    *.c | *.cc | *.h | *.cu | *.cuh | *.c.in | *.py | *.sh | *.cmake | *.cmake.in | CMakeLists.txt | */CMakeLists.txt)
      echo "$f"
      ;;
    *)
      if head -c 2 "$f" | grep -q '^#!'; then
        echo "$f"
      fi
      ;;
    esac
  done
}

# style FILE: "c" (a /* */ comment) or "hash" (a # comment)
style() {
  case "$1" in
  *.c | *.cc | *.h | *.cu | *.cuh | *.c.in) echo c ;;
  *) echo hash ;;
  esac
}

# The line, when present, must be among the first three lines.
has_line() { head -n 3 "$1" | grep -q "$tag $id\\b"; }
other_id() { head -n 3 "$1" | grep "$tag" | grep -qv "$tag $id\\b"; }

add_line() {
  f=$1
  tmp=$f.spdx.$$
  if [ "$(style "$f")" = c ]; then
    {
      echo "/* $tag $id */"
      cat "$f"
    } >"$tmp"
  else
    # after a shebang and a Python coding line, else first
    skip=0
    if head -n 1 "$f" | grep -q '^#!'; then
      skip=1
    fi
    if sed -n "$((skip + 1))p" "$f" | grep -Eq '^#.*coding[:=]'; then
      skip=$((skip + 1))
    fi
    {
      [ "$skip" -gt 0 ] && head -n "$skip" "$f"
      echo "# $tag $id"
      tail -n +"$((skip + 1))" "$f"
    } >"$tmp"
  fi
  # keep the mode (executable scripts stay executable)
  chmod "$(stat -c %a "$f")" "$tmp"
  mv "$tmp" "$f"
}

missing=0
bad=0
count=0
for f in $(files); do
  count=$((count + 1))
  if [ "$mode" = list ]; then
    echo "$f"
    continue
  fi
  if other_id "$f"; then
    echo "$f: an SPDX identifier other than $id" >&2
    bad=$((bad + 1))
    continue
  fi
  if has_line "$f"; then
    continue
  fi
  if [ "$mode" = add ]; then
    add_line "$f"
    echo "added: $f"
  else
    echo "$f: no '$tag $id' in its first three lines"
    missing=$((missing + 1))
  fi
done

[ "$mode" = list ] && exit 0
if [ "$mode" = check ]; then
  echo "spdx: $count files, $missing without the line, $bad with another identifier"
  [ "$missing" -eq 0 ] && [ "$bad" -eq 0 ]
else
  echo "spdx: $count files checked; $bad with another identifier left alone"
  [ "$bad" -eq 0 ]
fi
