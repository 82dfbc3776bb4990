#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The real hosts' benchmarks (tools/hosts/): palrt inside a runtime, beside that runtime's own
# means, all variants of a case interleaved in one run. Writes results/hosts.json
# (palrt-bench's JSON shape, component "hosts": per row the median of the runs and each run's
# figure) and prints the table with palrt's ratios.
#
#   RUNS=5 scripts/bench-hosts.sh
#
# Hosts: the CPython registry module (palrt_registry against pybind11_registry and
# plain_registry: tools/hosts/cpython/bench_python.py says what each case measures), and the
# Boehm host (palrt's handles and identity cache inside a Boehm-collected process against
# Boehm's own disappearing links: tools/hosts/boehm/bench_boehm.cpp). And the walks a
# production collector makes (`palrt-bench gc`, rows gc/...: tools/palrt-bench/bench_gc.cpp),
# each run RUNS times by tools/hosts/bench_runs.py, and the generational copying host
# (tools/hosts/copying/bench_copying.cpp: a young pause with 100,000 old weak handles against
# none). And the JVM host (palrt's cache behind a JNI binding against a ConcurrentHashMap of
# weak references and a mutex-guarded std::unordered_map of JNI weak references:
# tools/hosts/jvm/bench/bench_jvm.py).
# Needs a release build in build/ with the hosts in it (scripts/build.sh build; the hosts are
# built when python3-dev, libgc-dev and openjdk-17-jdk-headless are installed, as
# scripts/setup.sh does).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-5}
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
  echo "bench-hosts: RUNS must be a positive integer (got '$runs')" >&2
  exit 2
fi
modules=build/tools/hosts/cpython
python=/usr/bin/python3
if ! ls "$modules"/palrt_registry.cpython-*.so >/dev/null 2>&1; then
  echo "bench-hosts: $modules/palrt_registry is not built; build first (scripts/build.sh build -Dbuildtype=release; needs python3-dev)" >&2
  exit 1
fi
boehm_bench=build/tools/hosts/boehm/palrt-boehm-bench
if [ ! -x "$boehm_bench" ]; then
  echo "bench-hosts: $boehm_bench is not built; build first (scripts/build.sh build -Dbuildtype=release; needs libgc-dev)" >&2
  exit 1
fi
copying_bench=build/tools/hosts/copying/palrt-copying-bench
if [ ! -x "$copying_bench" ]; then
  echo "bench-hosts: $copying_bench is not built; build first (scripts/build.sh build -Dbuildtype=release)" >&2
  exit 1
fi
palrt_bench=build/tools/palrt-bench/palrt-bench
if [ ! -x "$palrt_bench" ]; then
  echo "bench-hosts: $palrt_bench is not built; build first (scripts/build.sh build -Dbuildtype=release)" >&2
  exit 1
fi
jvm_bench_jar=build/tools/hosts/jvm/bench/palrt-jvmbench.jar
jvm_host_jar=build/tools/hosts/jvm/java/palrt-jvmhost.jar
if [ ! -f "$jvm_bench_jar" ] || [ ! -f "$jvm_host_jar" ]; then
  echo "bench-hosts: $jvm_bench_jar is not built; build first (scripts/build.sh build -Dbuildtype=release; needs openjdk-17-jdk-headless)" >&2
  exit 1
fi
mkdir -p results
# What else the machine did: printed before the run (the second before it) and after it, and
# kept in hosts.json ("machine": {"load"}), so that a reader can tell a run that others
# disturbed from a regression (scripts/machine_load.py).
load_start=$("$python" scripts/machine_load.py snapshot --pid $$ --show bench-hosts)
"$python" tools/hosts/cpython/bench_python.py --modules "$modules" --runs "$runs" --json results/hosts.json
"$python" tools/hosts/boehm/bench_boehm.py --bench "$boehm_bench" --runs "$runs" --json results/hosts.json
"$python" tools/hosts/copying/bench_copying.py --bench "$copying_bench" --runs "$runs" --json results/hosts.json
"$python" tools/hosts/jvm/bench/bench_jvm.py --jar "$jvm_bench_jar" --host-jar "$jvm_host_jar" \
  --library-path build/tools/hosts/jvm:build/tools/hosts/jvm/bench --runs "$runs" --json results/hosts.json
"$python" tools/hosts/bench_runs.py --bench "$palrt_bench" --component gc --runs "$runs" --json results/hosts.json
# What else the machine did meanwhile, printed and kept in hosts.json ("machine": {"load"}).
"$python" scripts/machine_load.py report --since "$load_start" --pid $$ --json-into results/hosts.json
echo "bench-hosts: wrote results/hosts.json"
