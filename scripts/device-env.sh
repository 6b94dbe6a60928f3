# SPDX-License-Identifier: Apache-2.0
# Sourced by the device scripts: Debian packages of jansson/cmocka found in
# .deps/ are unpacked to a private prefix when the machine lacks them (the
# device image has no registry); the CUDA toolkit goes on PATH;
# configure_device_build is the one build configuration they use.
if [ -d .deps ] && ! pkg-config --exists jansson cmocka 2>/dev/null; then
  rm -rf /tmp/trellis-deps
  for f in .deps/*.deb; do dpkg -x "$f" /tmp/trellis-deps; done
  pc=/tmp/trellis-deps/usr/lib/x86_64-linux-gnu/pkgconfig
  sed -i 's|^prefix=/usr|prefix=/tmp/trellis-deps/usr|' "$pc"/*.pc
  export PKG_CONFIG_PATH=$pc
  export CMAKE_PREFIX_PATH=/tmp/trellis-deps/usr
  export LD_LIBRARY_PATH=/tmp/trellis-deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
fi
export PATH=/usr/local/cuda/bin:$PATH

# configure_device_build DIR [CMAKE ARGS...]: Release, sm_90a, warnings not
# fatal, jansson/cmocka found afresh (the private prefix may be new).
configure_device_build() {
  local dir=$1 gen=()
  shift
  command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DTRELLIS_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90a-real -DTRELLIS_WERROR=OFF \
    -U"*jansson*" -U"*cmocka*" "$@"
}
