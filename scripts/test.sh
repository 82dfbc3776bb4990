#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds palrt and runs its test suites ('default'; and 'seccomp': the fallback cases of the
# suites that touch membarrier, with membarrier denied, where palrt must fall back and pass).
#
#   scripts/test.sh              release build in build/: suites, then the consumers (a host
#                                built against palrt as a meson subproject, through pkg-config
#                                and through CMake's find_package)
#   scripts/test.sh --sanitize   also ASan+UBSan in build-asan/ and TSan in build-tsan/
#   scripts/test.sh --slow       also the 'slow' suite (long stress variants) in build/
#   scripts/test.sh --only=STEP[,STEP...]
#                                only these steps, in this order whatever the order given:
#                                release, consumers, slow, asan, tsan. CI builds each
#                                configuration once with it (.ci/run).
#
# Every step runs even if an earlier one failed, so one run shows everything that is broken;
# each step prints its time, each build its suites' times, and the last lines summarise. The
# exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/test.sh [--sanitize] [--slow] [--only=release,consumers,slow,asan,tsan]"
all_steps=(release consumers slow asan tsan)
declare -A wanted=([release]=1 [consumers]=1)
only=""
for arg in "$@"; do
  case $arg in
    --sanitize) wanted[asan]=1; wanted[tsan]=1 ;;
    --slow) wanted[slow]=1 ;;
    --only=*) only=${arg#--only=} ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done
if [ -n "$only" ]; then
  wanted=()
  IFS=, read -ra listed <<<"$only"
  for s in "${listed[@]}"; do
    case " ${all_steps[*]} " in
      *" $s "*) wanted[$s]=1 ;;
      *) echo "test.sh: unknown step '$s' in --only" >&2; echo "$usage" >&2; exit 2 ;;
    esac
  done
fi
steps=()
for s in "${all_steps[@]}"; do
  if [ -n "${wanted[$s]:-}" ]; then steps+=("$s"); fi
done

# Stop at the first sanitizer report so it fails the test that caused it instead of scrolling
# by. A caller's own settings come last, so they win.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# tests/tsan.supp: reports from inside liburcu (uninstrumented), the cache benchmark's peer.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

started_all=$SECONDS
scripts/setup.sh

results=()
failures=0

elapsed() {
  local s=$((SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# Test executables run, over all builds: meson's log has one JSON line per test, with
# "result": "OK" for a pass (escaped quotes inside a test's captured output do not match).
tests_passed=0
tests_failed=0
count_results() {
  [ -f "$1" ] || return 0
  local ok all skipped
  ok=$(grep -c '"result": "OK"' "$1" || true)
  all=$(grep -c '"result": "' "$1" || true)
  skipped=$(grep -c '"result": "SKIP"' "$1" || true)
  tests_passed=$((tests_passed + ok))
  tests_failed=$((tests_failed + all - ok - skipped))
}

# Each suite's time in that log, slowest first, and their sum: where a build's suite time goes.
suite_times() {
  [ -f "$1" ] || return 0
  sed -n 's/^{"name": "[^"/]*\/ \([^"]*\)".*"duration": \([0-9.]*\).*/\2 \1/p' "$1" | sort -rn |
    awk '{ total += $1; line = line sprintf("%s%.1fs %s", NR > 1 ? ", " : "", $1, $2) }
         END { if (NR) printf "   suite times (%.0fs in all): %s\n", total, line }'
}

# The release build: build/ is configured exactly as scripts/run.sh configures it, so switching
# between the two never rebuilds. slow_tests only registers tests, so flipping it recompiles
# nothing.
release_options=(-Dbuildtype=release -Dstatic_runtime=true)
# The sanitizer runtimes must be the process's first libraries, which needs the dynamic
# libstdc++ (static_runtime=false) and shared objects with undefined sanitizer symbols
# (b_lundef=false). Assertions stay on (b_ndebug=false: palrt's default, if-release, would
# take a plain build without debug info for a release). -O1 -g1: optimised enough that
# the stress tests run in bounded time, and line tables only, which is all a sanitizer's
# report needs (file:line in every frame): measured on 2 cores, the ASan+UBSan build of a
# CLI11 translation unit takes 32 s against 74 s at debugoptimized's -O2 -g, and the whole
# build about half as long. Sanitized code runs slower, hence the longer test timeouts.
sanitizer_build=(-Dbuildtype=plain -Doptimization=1 -Db_ndebug=false -Dc_args=-g1 -Dcpp_args=-g1 -Db_lundef=false -Dstatic_runtime=false)
asan_options=("${sanitizer_build[@]}" -Db_sanitize=address,undefined)
# palrt-bench runs (the cli suite) under ASan only: its threads use the services the suites test
# under TSan, and its build is a third of a sanitized build. Under TSan, as under ASan, only
# what a suite runs is built (tools/hosts/meson.build): the CI's two sanitizer builds from a
# fresh clone are most of its time.
tsan_options=("${sanitizer_build[@]}" -Db_sanitize=thread -Dbench=false)

# test_build <name> <dir> <timeout multiplier> <suites> [meson -D options...]
# Called as a condition, where bash ignores `set -e`, so each step handles its own failure.
test_build() {
  local name=$1 dir=$2 multiplier=$3 suites=$4
  shift 4
  local started=$SECONDS t
  echo "== test.sh: $name: build $dir"
  if ! scripts/build.sh "$dir" "$@"; then
    results+=("FAIL  $name: build failed ($(elapsed $started))")
    return 1
  fi
  local built_in
  built_in=$(elapsed $started)
  echo "== test.sh: $name: build done in $built_in; suites: $suites"
  local suite_args=() s status=0
  for s in $suites; do suite_args+=(--suite "$s"); done
  t=$SECONDS
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "$multiplier" "${suite_args[@]}" || status=$?
  count_results "$dir/meson-logs/testlog.json"
  suite_times "$dir/meson-logs/testlog.json"
  local timing="build $built_in, suites $(elapsed $t)"
  if [ "$status" -ne 0 ]; then
    results+=("FAIL  $name: tests failed ($timing; log: $dir/meson-logs/testlog.txt)")
    return 1
  fi
  results+=("PASS  $name ($timing)")
}

# What a host does with palrt: install it (headers, libpalrt.a, palrt.pc, the CMake package)
# and build the example host against that with pkg-config and with CMake's find_package, and
# use it as a meson subproject (examples/host), then the other examples/ through the .pc file
# or CMake target each is for. Each must build and run. The subproject build
# compiles the library once more, with no optimisation: it checks palrt's meson.build as a
# subproject, not the code, which the suites have checked.
consumers() {
  local started=$SECONDS stage t step=""
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"; trap - RETURN' RETURN
  echo "== test.sh: consumers: install build/, then examples/ through pkg-config, CMake and as a subproject"
  # A command the README shows, on a line of its own: what the step runs is what a reader
  # copies.
  readme_shows() {
    grep -qxF -- "$1" README.md || { echo "test.sh: README.md has no line: $1" >&2; return 1; }
  }
  # The line of an example's build file (meson or CMake, whose comments start with #) that
  # holds <text>, as the README shows it (without the file's indentation): the README's meson
  # and CMake lines are the ones the builds below use.
  readme_shows_line_of() {
    local line
    line=$(grep -v '^[[:space:]]*#' "$1" | grep -F -- "$2" | sed 's/^[[:space:]]*//')
    [ "$(printf '%s\n' "$line" | wc -l)" -eq 1 ] && [ -n "$line" ] ||
      { echo "test.sh: $1 has no single line with: $2" >&2; return 1; }
    readme_shows "$line"
  }
  # Copies of the staged .pc files whose prefix is the staged one (printed: their folder), so
  # that what they record (palrt-shared.pc's rpath) points where the library really is, and
  # what they require from the system (python3.pc) is found as it is, with no sysroot.
  relocated_pc_files() {
    local pcdir prefix f
    pcdir=$(find "$stage/root" -name palrt.pc -printf '%h\n' | head -n 1)
    [ -n "$pcdir" ] || { echo "test.sh: the install has no palrt.pc" >&2; return 1; }
    prefix=$(sed -n 's/^prefix=//p' "$pcdir/palrt.pc")
    mkdir -p "$stage/pc"
    for f in "$pcdir"/palrt*.pc; do
      sed "s|^prefix=.*|prefix=$stage/root$prefix|" "$f" >"$stage/pc/${f##*/}" || return 1
    done
    echo "$stage/pc"
  }
  consumer_step() {
    local what=$1 t=$SECONDS
    shift
    step=$what
    "$@" || return 1
    echo "   $what: $(elapsed $t)"
  }
  install_palrt() {
    scripts/build.sh build "${release_options[@]}" >/dev/null &&
      meson install -C build --destdir "$stage/root" >/dev/null
  }
  # Both calls, as README.md shows them: the plain one links (Boost.Thread shared), --static
  # with -static makes a fully static executable.
  pkgconfig_host() {
    readme_shows 'c++ -std=c++20 host.cpp $(pkg-config --cflags --libs palrt)' &&
      readme_shows 'c++ -std=c++20 -static host.cpp $(pkg-config --static --cflags --libs palrt)' &&
      PKG_CONFIG_SYSROOT_DIR="$stage/root" \
      PKG_CONFIG_PATH="$(find "$stage/root" -name palrt.pc -printf '%h\n' | head -n 1)" \
      bash -c 'c++ -std=c++20 examples/host/host.cpp -o "$1/pkgconfig-host" $(pkg-config --cflags --libs palrt) &&
               "$1/pkgconfig-host" &&
               c++ -std=c++20 -static examples/host/host.cpp -o "$1/static-host" $(pkg-config --static --cflags --libs palrt) &&
               "$1/static-host"' _ "$stage"
  }
  # The same host on libpalrt.so (palrt-shared.pc), found at run time in the staged libdir.
  shared_host() {
    local pcdir
    readme_shows 'c++ -std=c++20 host.cpp $(pkg-config --cflags --libs palrt-shared)' || return 1
    pcdir=$(find "$stage/root" -name palrt-shared.pc -printf '%h\n' | head -n 1)
    [ -n "$pcdir" ] || { echo "test.sh: the install has no palrt-shared.pc" >&2; return 1; }
    PKG_CONFIG_SYSROOT_DIR="$stage/root" PKG_CONFIG_PATH="$pcdir" \
      bash -c 'c++ -std=c++20 examples/host/host.cpp -o "$1/shared-host" $(pkg-config --cflags --libs palrt-shared) &&
               LD_LIBRARY_PATH="$2" "$1/shared-host" &&
               LD_LIBRARY_PATH="$2" ldd "$1/shared-host" | grep -q "libpalrt.so.0 => $2/"' _ "$stage" "$(dirname "$pcdir")"
  }
  # Hosts whose classes derive from palrt's, on libpalrt.so (examples/shared: host.cpp and a
  # plugin it dlopen()s), with g++ and clang++, through palrt-shared.pc and palrt::shared.
  # Through relocated .pc files, and with no LD_LIBRARY_PATH: the rpath palrt-shared.pc
  # gives must find the library.
  shared_derived_hosts() {
    local pcdir package cxx out
    pcdir=$(relocated_pc_files) || return 1
    package=$(find "$stage/root" -name palrtConfig.cmake -printf '%h\n' | head -n 1)
    [ -n "$package" ] || { echo "test.sh: the install has no palrtConfig.cmake" >&2; return 1; }
    for cxx in g++ clang++; do
      out="$stage/derived-$cxx"
      mkdir -p "$out"
      PKG_CONFIG_PATH="$pcdir" bash -c '
        "$1" -std=c++20 examples/shared/host.cpp -o "$2/shared-host" $(pkg-config --cflags --libs palrt-shared) -ldl &&
        "$1" -std=c++20 -shared -fPIC examples/shared/plugin.cpp -o "$2/plugin.so" $(pkg-config --cflags --libs palrt-shared)' \
        _ "$cxx" "$out" || return 1
      env -u LD_LIBRARY_PATH "$out/shared-host" "$out/plugin.so" || return 1
      cmake -S examples/shared -B "$out/cmake" -G Ninja -Dpalrt_DIR="$package" -DCMAKE_CXX_COMPILER="$cxx" >/dev/null &&
        cmake --build "$out/cmake" >/dev/null &&
        env -u LD_LIBRARY_PATH "$out/cmake/shared-host" "$out/cmake/libshared-plugin.so" || return 1
    done
  }
  # A CPython extension module on palrt-cpython.pc (examples/cpython), built with README.md's
  # command in a folder of its own with libpalrt.so copied beside it, as a module ships it;
  # check.py imports it from there.
  cpython_module() {
    local pcdir module=$stage/cpython-module
    pcdir=$(relocated_pc_files) || return 1
    [ -f "$pcdir/palrt-cpython.pc" ] || { echo "test.sh: the install has no palrt-cpython.pc (is python3-dev installed?)" >&2; return 1; }
    local build="c++ -std=c++20 -shared -fPIC palrt_example.cpp -o palrt_example\$(python3-config --extension-suffix) -Wl,-rpath,'\$ORIGIN' \$(pkg-config --cflags --libs palrt-cpython)"
    local ship='cp "$(pkg-config --variable=libdir palrt-shared)/libpalrt.so.0" .'
    readme_shows "$build" && readme_shows "$ship" || return 1
    mkdir -p "$module" && cp examples/cpython/palrt_example.cpp "$module/" &&
      (cd "$module" && PKG_CONFIG_PATH="$pcdir" bash -c "$build && $ship") &&
      env -u LD_LIBRARY_PATH python3 examples/cpython/check.py "$module"
  }
  # A host on the Boehm collector through palrt-boehm.pc (examples/boehm), when libgc-dev is
  # there (the adapter is built and installed only then).
  boehm_host() {
    local pcdir
    pcdir=$(find "$stage/root" -name palrt-boehm.pc -printf '%h\n' | head -n 1)
    [ -n "$pcdir" ] || { echo "test.sh: the install has no palrt-boehm.pc (is libgc-dev installed?)" >&2; return 1; }
    PKG_CONFIG_SYSROOT_DIR="$stage/root" PKG_CONFIG_PATH="$pcdir" \
      bash -c 'c++ -std=c++20 -DGC_THREADS examples/boehm/host.cpp -o "$1/boehm-host" $(pkg-config --static --cflags --libs palrt-boehm) &&
               "$1/boehm-host"' _ "$stage"
  }
  # The small hosts of the GC services (examples/identity-cache, examples/collector), each one
  # translation unit on palrt.pc, built and run as their header comments say.
  gc_service_hosts() {
    PKG_CONFIG_SYSROOT_DIR="$stage/root" \
      PKG_CONFIG_PATH="$(find "$stage/root" -name palrt.pc -printf '%h\n' | head -n 1)" \
      bash -c 'c++ -std=c++20 examples/identity-cache/identity_cache.cpp -o "$1/identity-cache" $(pkg-config --cflags --libs palrt) &&
               "$1/identity-cache" &&
               c++ -std=c++20 examples/collector/collector.cpp -o "$1/collector" $(pkg-config --cflags --libs palrt) &&
               "$1/collector"' _ "$stage"
  }
  cmake_host() {
    local package
    readme_shows_line_of examples/host/CMakeLists.txt 'find_package(palrt' &&
      readme_shows_line_of examples/host/CMakeLists.txt 'PRIVATE palrt::palrt' || return 1
    package=$(find "$stage/root" -name palrtConfig.cmake -printf '%h\n' | head -n 1)
    [ -n "$package" ] || { echo "test.sh: the install has no palrtConfig.cmake" >&2; return 1; }
    cmake -S examples/host -B "$stage/cmake-build" -G Ninja -Dpalrt_DIR="$package" >/dev/null &&
      cmake --build "$stage/cmake-build" >/dev/null &&
      "$stage/cmake-build/example-host" &&
      # palrt::shared: the same host on libpalrt.so, found at run time in the staged libdir.
      cmake -S examples/host -B "$stage/cmake-shared" -G Ninja -Dpalrt_DIR="$package" -DPALRT_EXAMPLE_SHARED=ON >/dev/null &&
      cmake --build "$stage/cmake-shared" >/dev/null &&
      LD_LIBRARY_PATH="$(dirname "$(dirname "$package")")" "$stage/cmake-shared/example-host" &&
      # grep reads all of ldd's output: the loader writes a line at a time, and a grep -q that
      # left at the first match would fail the pipeline (pipefail) with ldd's SIGPIPE.
      LD_LIBRARY_PATH="$(dirname "$(dirname "$package")")" ldd "$stage/cmake-shared/example-host" | grep "libpalrt.so.0 => " >/dev/null
  }
  subproject_host() {
    readme_shows_line_of examples/host/meson.build "dependency('palrt'" &&
      readme_shows_line_of examples/host/meson.build "executable(" || return 1
    meson setup "$stage/host-build" examples/host -Dbuildtype=plain >/dev/null &&
      meson compile -C "$stage/host-build" >/dev/null &&
      "$stage/host-build/example-host"
  }
  if ! { consumer_step "install" install_palrt &&
         consumer_step "pkg-config host" pkgconfig_host &&
         consumer_step "pkg-config host on libpalrt.so" shared_host &&
         consumer_step "derived classes on libpalrt.so (g++, clang++; pkg-config, CMake; plugin)" shared_derived_hosts &&
         consumer_step "CPython module (palrt-cpython.pc, libpalrt.so shipped beside it)" cpython_module &&
         consumer_step "Boehm host (palrt-boehm.pc)" boehm_host &&
         consumer_step "identity-cache and collector hosts (palrt.pc)" gc_service_hosts &&
         consumer_step "CMake host (static and shared)" cmake_host &&
         consumer_step "subproject host" subproject_host; }; then
    results+=("FAIL  consumers: $step failed ($(elapsed $started))")
    return 1
  fi
  results+=("PASS  consumers: install, pkg-config (plain, static, shared, Boehm, identity cache, collector), derived classes on libpalrt.so, CPython module, CMake, subproject ($(elapsed $started))")
}

for s in "${steps[@]}"; do
  case $s in
    release) test_build release build 1 "default seccomp" "${release_options[@]}" -Dslow_tests=false ;;
    consumers) consumers ;;
    # The long stress variants in the release build: they reconfigure build/ only.
    slow) test_build slow build 1 "slow" "${release_options[@]}" -Dslow_tests=true ;;
    asan) test_build asan build-asan 2 "default seccomp" "${asan_options[@]}" ;;
    tsan) test_build tsan build-tsan 4 "default seccomp" "${tsan_options[@]}" ;;
  esac || failures=$((failures + 1))
done

echo
echo "== test.sh summary (steps: ${steps[*]}; $(elapsed $started_all) in all)"
printf '   %s\n' "${results[@]}"
if [ "$failures" -gt 0 ]; then
  echo "test.sh: FAILED: $failures of ${#results[@]} steps"
else
  echo "test.sh: PASSED: all ${#results[@]} steps"
fi
# The closing line: test executables run in all builds (the doctest counts are in the logs).
echo "tests: $tests_passed passed, $tests_failed failed"
[ "$failures" -eq 0 ]
