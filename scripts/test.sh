#!/usr/bin/env bash
# Builds palrt and runs its test suites ('default', and 'seccomp': the same suites with
# membarrier denied, which must fall back and still pass).
#
#   scripts/test.sh              build/ (release)
#   scripts/test.sh --sanitize   also ASan+UBSan in build-asan/ and TSan in build-tsan/
#   scripts/test.sh --slow       also registers and runs the 'slow' suite (long stress variants)
#
# Every build folder is tried even if an earlier one failed, so one run shows everything that
# is broken; the last lines summarise, and the exit status is non-zero if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: scripts/test.sh [--sanitize] [--slow]"
sanitize=false
slow=false
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=true ;;
    --slow) slow=true ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
done

suites=(default seccomp)
if $slow; then suites+=(slow); fi
suite_args=()
for s in "${suites[@]}"; do suite_args+=(--suite "$s"); done

# Stop at the first sanitizer report so it fails the test that caused it instead of scrolling
# by. A caller's own settings come last, so they win.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
# tests/tsan.supp: reports from inside liburcu (uninstrumented), the cache benchmark's peer.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

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

# test_build <dir> <timeout multiplier> [meson -D options...]
# Called as a condition, where bash ignores `set -e`, so each step handles its own failure.
test_build() {
  local dir=$1 multiplier=$2
  shift 2
  local started=$SECONDS
  echo "== test.sh: $dir: build"
  if ! scripts/build.sh "$dir" -Dslow_tests="$slow" "$@"; then
    results+=("FAIL  $dir: build failed")
    return 1
  fi
  echo "== test.sh: $dir: suites ${suites[*]}"
  local status=0
  meson test -C "$dir" --print-errorlogs --timeout-multiplier "$multiplier" \
    "${suite_args[@]}" || status=$?
  count_results "$dir/meson-logs/testlog.json"
  if [ "$status" -ne 0 ]; then
    results+=("FAIL  $dir: tests failed ($(elapsed $started); log: $dir/meson-logs/testlog.txt)")
    return 1
  fi
  results+=("PASS  $dir ($(elapsed $started))")
}

# build/ is configured exactly as scripts/run.sh configures it, so switching between the two
# never rebuilds.
test_build build 1 -Dbuildtype=release -Dstatic_runtime=true || failures=$((failures + 1))

# What a host does with palrt: use it as a meson subproject (examples/host), and install it
# with its headers and pkg-config file and build against that. Both must build and run.
consumers() {
  local started=$SECONDS stage
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' RETURN
  echo "== test.sh: examples/host as a subproject, and an installed palrt through pkg-config"
  meson setup "$stage/host-build" examples/host >/dev/null &&
    meson compile -C "$stage/host-build" >/dev/null &&
    "$stage/host-build/example-host" &&
    meson install -C build --destdir "$stage/root" >/dev/null &&
    PKG_CONFIG_SYSROOT_DIR="$stage/root" \
      PKG_CONFIG_PATH="$(find "$stage/root" -name palrt.pc -printf '%h\n' | head -n 1)" \
      bash -c 'c++ -std=c++20 examples/host/host.cpp -o "$1/pkgconfig-host" $(pkg-config --cflags --libs palrt) &&
               "$1/pkgconfig-host"' _ "$stage" || {
    results+=("FAIL  consumers: examples/host or the installed pkg-config build failed")
    return 1
  }
  results+=("PASS  consumers: subproject and pkg-config ($(elapsed $started))")
}
consumers || failures=$((failures + 1))

if $sanitize; then
  # The sanitizer runtimes must be the process's first libraries, which needs the dynamic
  # libstdc++ (static_runtime=false) and shared objects with undefined sanitizer symbols
  # (b_lundef=false). debugoptimized keeps assertions on and gives reports line numbers.
  # Sanitized code runs slower, hence the longer test timeouts.
  test_build build-asan 2 -Dbuildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false -Dstatic_runtime=false || failures=$((failures + 1))
  test_build build-tsan 4 -Dbuildtype=debugoptimized -Db_sanitize=thread \
    -Db_lundef=false -Dstatic_runtime=false || failures=$((failures + 1))
fi

echo
echo "== test.sh summary (suites: ${suites[*]})"
printf '   %s\n' "${results[@]}"
if [ "$failures" -gt 0 ]; then
  echo "test.sh: FAILED: $failures of ${#results[@]} builds"
else
  echo "test.sh: PASSED: all ${#results[@]} builds"
fi
# The closing line: test executables run in all builds (the doctest counts are in the logs).
echo "tests: $tests_passed passed, $tests_failed failed"
[ "$failures" -eq 0 ]
