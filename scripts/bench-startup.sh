#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times whole-process startup under hyperfine: palrt-startup in each ordering and with the
# sync worker started eagerly, the C and C++ floors that do the same work, and the preload
# shim, each beside the baseline it is judged against. Then prints (and writes
# to results/summary.md) medians, ratios, the phase timings palrt-startup reports, and the
# machine facts that decide whether registration hits the kernel's slow path; and draws
# results/startup.png.
#
#   RUNS=450 ROUNDS=15 REPORT_RUNS=50 scripts/bench-startup.sh
#
# RUNS is the number of runs per row in all, split over ROUNDS rounds of every row: these
# machines are noisy in bursts longer than one row takes, so a ratio is taken within each
# round (rows run back to back) and the median over rounds is quoted.
#
# Needs a build in build/ (scripts/run.sh makes one and then runs this).
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-450}
rounds=${ROUNDS:-15}
report_runs=${REPORT_RUNS:-50}
for n in "$runs" "$rounds" "$report_runs"; do
  if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
    echo "bench-startup: RUNS, ROUNDS and REPORT_RUNS must be positive integers (got '$n')" >&2
    exit 2
  fi
done
if [ "$runs" -lt 100 ]; then
  echo "bench-startup: RUNS=$runs: fewer than 100 runs is fine for a smoke test, not for the record" >&2
fi

startup=build/tools/palrt-startup/palrt-startup
reference=build/tools/reference/palrt-startup-reference
reference_cpp=build/tools/reference/palrt-startup-reference-cpp
# Absolute, so the preload still applies if a program changes directory.
shim=$PWD/build/startup/preload/libpalrt-preload.so
for f in "$startup" "$reference" "$reference_cpp" "$shim"; do
  if [ ! -f "$f" ]; then
    echo "bench-startup: $f is missing; build first (scripts/run.sh, or scripts/build.sh build)" >&2
    exit 1
  fi
done
# Debian's python3: the first python3 on PATH may be a pyenv one without matplotlib.
# Checked now rather than after minutes of benchmarking.
python=/usr/bin/python3
if ! "$python" -c 'import matplotlib' 2>/dev/null; then
  echo "bench-startup: $python cannot import matplotlib; run scripts/setup.sh" >&2
  exit 1
fi

mkdir -p results

# Rows in this order; startup_report.py compares each row with the nearest baseline row at
# or above it (--baselines, 1-based): rows 2-5 with 1, rows 7-8 with 6, row 10 with 9, row 12
# with 11. The `env` baselines give the shim rows the same extra exec they pay themselves.
# Each palrt-startup row is also compared with the floors that do the same work (--compare):
# the C floor, the least any process pays, and the C++ floor, the same work in C++ linked as
# palrt-startup is, which a C++ host pays whatever it links. By default palrt-startup starts
# one service thread (the finalizer; the sync worker is lazy, as bootstrap() starts it), like
# the references; --sync-worker eager starts two, like `--threads 2`.
# The shim row and its baseline do the same work apart from the shim: both name an order, so
# both build palrt-startup's option parser (a run without arguments skips it: 40-100 us,
# which would otherwise be charged to the shim). The baseline registers first, the shim row
# registers late (threads-first) in a process the shim has registered already.
# What else the machine did: printed before the run (the second before it) and after it, and
# for each round, kept in the round's JSON ("machine": {"load"}), so that a reader can tell a
# round that others disturbed from a regression (scripts/machine_load.py).
load_start=$("$python" scripts/machine_load.py snapshot --pid $$ --show bench-startup)
per_round=$(((runs + rounds - 1) / rounds))
rm -f results/startup-round-*  # a smaller ROUNDS must not leave older rounds behind
round_files=()
for ((round = 1; round <= rounds; round++)); do
  echo "bench-startup: round $round of $rounds ($per_round runs per row)" >&2
  round_load_start=$("$python" scripts/machine_load.py snapshot --pid $$)
  hyperfine -N --warmup 20 --runs "$per_round" --time-unit millisecond --style basic \
    --export-json "results/startup-round-$round.json" --export-markdown "results/startup-round-$round.md" \
    -n "palrt-startup" "$startup" \
    -n "palrt-startup --order threads-first" "$startup --order threads-first" \
    -n "palrt-startup --order no-membarrier" "$startup --order no-membarrier" \
    -n "reference (C floor)" "$reference" \
    -n "reference-cpp (C++ floor)" "$reference_cpp" \
    -n "palrt-startup --sync-worker eager" "$startup --sync-worker eager" \
    -n "reference --threads 2 (C floor, two threads)" "$reference --threads 2" \
    -n "reference-cpp --threads 2 (C++ floor, two threads)" "$reference_cpp --threads 2" \
    -n "env palrt-startup --order registered-first" "env $startup --order registered-first" \
    -n "env LD_PRELOAD=shim palrt-startup --order threads-first" \
       "env 'LD_PRELOAD=$shim' $startup --order threads-first" \
    -n "env /bin/true" "env /bin/true" \
    -n "env LD_PRELOAD=shim /bin/true" "env 'LD_PRELOAD=$shim' /bin/true"
  round_files+=("results/startup-round-$round.json")
  "$python" scripts/machine_load.py report --since "$round_load_start" --pid $$ \
    --json-into "results/startup-round-$round.json" |
    sed "s/^Load during the run: /bench-startup: load during round $round: /" >&2
done

# Phase timings as palrt-startup reports them, one JSON object per run, for each ordering
# (none given is the default ordering) and for the eager sync worker.
reports=results/startup-reports.json
: >"$reports"
for variant in "" "--order threads-first" "--order no-membarrier" "--sync-worker eager"; do
  read -r -a args <<<"--report json $variant"
  for ((i = 0; i < report_runs; i++)); do
    if ! "$startup" "${args[@]}" >>"$reports"; then
      echo "bench-startup: '$startup ${args[*]}' failed" >&2
      exit 1
    fi
  done
done

# The C++ floor's own timings, as many runs with one thread and with two: its registration
# and its threads' start and join, what palrt-startup's bootstrap plus shutdown is judged
# against.
floor_reports=results/floor-reports.json
: >"$floor_reports"
for threads in 1 2; do
  for ((i = 0; i < report_runs; i++)); do
    if ! "$reference_cpp" --report json --threads "$threads" >>"$floor_reports"; then
      echo "bench-startup: '$reference_cpp --report json --threads $threads' failed" >&2
      exit 1
    fi
  done
done

# The targets (issue 27): palrt-startup within 1.25x of the C floor and 1.05x of the C++
# floor; with the eager sync worker within 1.30x of the two-thread C floor (and, without a
# target yet, its ratio to the two-thread C++ floor); the shim row within 1.05x of its
# baseline (the ratio column of row 10); bootstrap plus shutdown within 25 us of the C++
# floor's registration, thread start and join.
load_line=$("$python" scripts/machine_load.py report --since "$load_start" --pid $$)
"$python" scripts/startup_report.py summary --hyperfine "${round_files[@]}" \
  --baselines 1,6,9,11 --compare 1/4:1.25 --compare 1/5:1.05 --compare 6/7:1.30 --compare 6/8 \
  --reports "$reports" --floor-reports "$floor_reports" \
  --command "RUNS=$runs ROUNDS=$rounds REPORT_RUNS=$report_runs scripts/bench-startup.sh" \
  --out results/summary.md
# What else the machine did meanwhile: a reader tells a disturbed run from a regression.
printf '\n%s\n' "$load_line" | tee -a results/summary.md
echo "bench-startup: each round's load is in its JSON (results/startup-round-N.json, \"machine\": {\"load\"})" >&2
"$python" scripts/startup_report.py plot --hyperfine "${round_files[@]}" \
  --baselines 1,6,9,11 --out results/startup.png
echo "bench-startup: wrote results/startup-round-*.json and .md, startup-reports.json, floor-reports.json, summary.md, startup.png"
