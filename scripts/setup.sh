#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs what building, testing and benchmarking palrt needs on Debian 12, and only what is
# missing: on a machine that already has everything it changes nothing and does not touch the
# network, so every other script can call it first.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  gcc g++ libc6-dev           # C (reference program, preload shim, seccomp helper) and C++20
  clang                       # test.sh's consumers: hosts on libpalrt.so built with clang++ too
  meson ninja-build pkg-config
  cmake                       # palrt's CMake package (meson takes its version file from
                              # CMake) and test.sh's find_package(palrt) host build
  libboost-thread-dev         # pal's thread factory
  libboost-dev                # palrt-bench invoke's asio baseline (headers only)
  doctest-dev                 # test suites
  abigail-tools               # the abi test: abidw and abidiff compare libpalrt.so with abi/
  nlohmann-json3-dev          # tests only: reading the tools' JSON back
  mandoc                      # tests only: lints the man pages (mandoc -T lint)
  clang-format                # tests only: the format check (scripts/format.sh --check; 14)
  libcli11-dev                # palrt-startup, palrt-bench
  # palrt-bench cache's peers, the concurrent hash maps the identity cache is measured
  # against: tbb::concurrent_hash_map, libcuckoo (headers only) and liburcu's cds_lfht
  libtbb-dev libcuckoo-dev liburcu-dev
  hyperfine                   # scripts/bench-*.sh
  strace valgrind libc6-dbg   # the startup path by hand; libc6-dbg gives valgrind libc symbols;
                              # valgrind also runs the startup-order test (callgrind)
  lld                         # links palrt-startup in its startup order (meson.build)
  python3 python3-matplotlib  # scripts/startup_report.py, run with /usr/bin/python3
  # the two real hosts of the host-GC mode (tools/hosts/): a CPython extension module, its
  # suite run under the debug interpreter too, measured against pybind11; a host on Boehm GC
  python3-dev python3-dbg pybind11-dev libgc-dev
  # the JVM host (tools/hosts/jvm/): a JNI library whose wrappers live in palrt's cache
  openjdk-17-jdk-headless
)

installed() {
  # dpkg-query fails for a package it has never seen; "deinstall ok config-files" is missing too.
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
# Through `env` so DEBIAN_FRONTEND reaches apt-get, whatever sudo's env_reset policy is.
if [ "$(id -u)" -eq 0 ]; then
  as_root=(env)
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo env)
else
  echo "setup: not root and sudo is not available; install as root: apt-get install ${missing[*]}" >&2
  exit 1
fi

"${as_root[@]}" apt-get update
# Recommends would pull in a desktop's worth of fonts and tools for matplotlib and valgrind;
# nothing here needs them.
"${as_root[@]}" DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
