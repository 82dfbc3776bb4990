#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds palrt's Debian packages from this tree, installs them with apt-get, and builds and
# runs examples/host against what they installed, through pkg-config and through CMake's
# find_package(palrt), on libpalrt.a and on libpalrt.so; then runs the installed tools and
# the shim. scripts/fresh-check.sh runs it after the README's two commands, on a machine
# that has only what they and the packages' build dependencies installed.
#
#   scripts/package-check.sh
#
# The packages are built as docs/PACKAGES.md builds them, with differences
# that make it cheaper and change no file a package installs: the test suites and the real
# hosts they run are not built (DEB_BUILD_OPTIONS=nocheck; scripts/test.sh runs them), there
# are no debug-symbol packages (noddebs), so no debug information is made either (-g0
# through dpkg-buildflags' DEB_*FLAGS_APPEND: dh_strip would remove it; it costs half again
# the compile time), and the build runs one job per CPU. The tree is
# copied (tracked and untracked files, never the build folders) into a scratch folder, so
# that the build leaves nothing in the tree or beside it. With lintian installed, it checks
# the packages too (the fresh check's root does not have it).
#
# Needs root or sudo: apt-get installs the build dependencies and then the packages, over
# whatever palrt packages the machine had.
# Exit status: 0 every step passed; 1 a step failed (it says which).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then
  as_root=(env)
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo env)
else
  echo "package-check: not root and sudo is not available" >&2
  exit 1
fi
apt_get=("${as_root[@]}" DEBIAN_FRONTEND=noninteractive apt-get -y --no-install-recommends)

started=$SECONDS
elapsed() {
  local s=$((SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}
step_started=$SECONDS
step() {
  echo "== package-check: $* (after $(elapsed "$started"))"
  step_started=$SECONDS
}
fail() {
  echo "package-check: FAILED: $*" >&2
  exit 1
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# dpkg-buildpackage writes the packages next to the source folder: the scratch folder.
src=$scratch/palrt

step "build dependencies (apt-get build-dep, debian/control)"
"${apt_get[@]}" -P nocheck build-dep ./ >/dev/null || fail "apt-get build-dep ./"

step "copy the tree into $src"
mkdir "$src"
# .gitignore's build folders stay behind: they are this machine's, not the tree's.
tar -c --exclude-vcs --exclude='./build*' --exclude=./results --exclude=./subprojects \
  --exclude=./obj-\* --exclude=__pycache__ . | tar -x -C "$src"

step "dpkg-buildpackage -us -uc -b (nocheck, noddebs, -g0, -j$(nproc))"
(cd "$src" &&
  DEB_BUILD_OPTIONS="nocheck noddebs" DEB_CFLAGS_APPEND=-g0 DEB_CXXFLAGS_APPEND=-g0 \
    dpkg-buildpackage -us -uc -b -Pnocheck -j"$(nproc)" >"$scratch/build.log" 2>&1) || {
  tail -n 40 "$scratch/build.log" >&2
  fail "dpkg-buildpackage (last lines above)"
}
echo "   built in $(elapsed "$step_started"):"
(cd "$scratch" && ls -1 ./*.deb | sed 's/^/   /')

if command -v lintian >/dev/null 2>&1; then
  step "lintian on the packages"
  lintian --fail-on error --tag-display-limit 0 "$scratch"/*.changes || fail "lintian reports errors"
fi

step "apt-get install ./*.deb"
(cd "$scratch" && "${apt_get[@]}" install ./*.deb >/dev/null) || fail "apt-get install ./*.deb"

# From here on, only what the packages installed: no build folder, no staged prefix.
version=$(dpkg-query -W -f='${Version}' libpalrt-dev)
version=${version%%-*}
out=$scratch/hosts
mkdir "$out"

step "examples/host through pkg-config (palrt.pc, palrt-shared.pc)"
[ "$(pkg-config --modversion palrt)" = "$version" ] ||
  fail "pkg-config --modversion palrt says $(pkg-config --modversion palrt), the package is $version"
c++ -std=c++20 examples/host/host.cpp -o "$out/pkgconfig-host" $(pkg-config --cflags --libs palrt) &&
  "$out/pkgconfig-host" >/dev/null || fail "the pkg-config host on libpalrt.a"
c++ -std=c++20 examples/host/host.cpp -o "$out/shared-host" $(pkg-config --cflags --libs palrt-shared) &&
  env -u LD_LIBRARY_PATH "$out/shared-host" >/dev/null || fail "the pkg-config host on libpalrt.so"
# The library libpalrt0 installed (palrt-shared.pc's rpath names its folder). ldd's output
# whole, not through grep -q: with pipefail, ldd's SIGPIPE would fail the check.
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
loaded=$(ldd "$out/shared-host")
[[ $loaded == *"libpalrt.so.0 => /usr/lib/$multiarch/libpalrt.so.0 "* ]] ||
  fail "the shared host does not load libpalrt0's library: $loaded"

step "examples/host through CMake (find_package(palrt $version))"
cmake -S examples/host -B "$out/cmake" -G Ninja >/dev/null &&
  cmake --build "$out/cmake" >/dev/null &&
  "$out/cmake/example-host" >/dev/null || fail "the CMake host on palrt::palrt"
cmake -S examples/host -B "$out/cmake-shared" -G Ninja -DPALRT_EXAMPLE_SHARED=ON >/dev/null &&
  cmake --build "$out/cmake-shared" >/dev/null &&
  "$out/cmake-shared/example-host" >/dev/null || fail "the CMake host on palrt::shared"

step "the installed tools and the shim (palrt-tools)"
[ "$(palrt-startup --version)" = "palrt-startup $version" ] ||
  fail "palrt-startup --version says '$(palrt-startup --version)', the package is $version"
shim=/usr/lib/$multiarch/palrt/libpalrt-preload.so
report=$(env LD_PRELOAD="$shim" palrt-startup --order threads-first --report json) ||
  fail "palrt-startup under the shim"
case $report in
  *'"registered_by":"preload"'*) ;;
  *) fail "palrt-startup under $shim was not registered by the shim: $report" ;;
esac
for page in palrt-startup.1 palrt-bench.1 palrt-preload.7; do
  [ -f "/usr/share/man/man${page##*.}/$page.gz" ] || fail "no man page $page"
done

echo "== package-check: PASSED in $(elapsed "$started")"
