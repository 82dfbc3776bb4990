#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times whole-process startup under hyperfine: palrt-startup in each ordering and with the
# sync worker started eagerly, the C floors that do the same work, and the preload shim, each
# beside the baseline it is judged against. Then prints (and writes
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
# Absolute, so the preload still applies if a program changes directory.
shim=$PWD/build/startup/preload/libpalrt-preload.so
for f in "$startup" "$reference" "$shim"; do
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
# or above it (--baselines, 1-based): rows 2-4 with 1, row 6 with 5, row 8 with 7, row 10
# with 9. The `env` baselines give the shim rows the same extra exec they pay themselves.
# Each palrt-startup row that has a C floor doing the same work is also compared with it
# (--compare): by default palrt-startup starts one service thread (the finalizer; the sync
# worker is lazy, as bootstrap() starts it), like the reference; --sync-worker eager starts
# two, like `reference --threads 2`.
per_round=$(((runs + rounds - 1) / rounds))
rm -f results/startup-round-*  # a smaller ROUNDS must not leave older rounds behind
round_files=()
for ((round = 1; round <= rounds; round++)); do
  echo "bench-startup: round $round of $rounds ($per_round runs per row)" >&2
  hyperfine -N --warmup 20 --runs "$per_round" --time-unit millisecond --style basic \
    --export-json "results/startup-round-$round.json" --export-markdown "results/startup-round-$round.md" \
    -n "palrt-startup" "$startup" \
    -n "palrt-startup --order threads-first" "$startup --order threads-first" \
    -n "palrt-startup --order no-membarrier" "$startup --order no-membarrier" \
    -n "reference (C floor)" "$reference" \
    -n "palrt-startup --sync-worker eager" "$startup --sync-worker eager" \
    -n "reference --threads 2 (C floor, two threads)" "$reference --threads 2" \
    -n "env palrt-startup" "env $startup" \
    -n "env LD_PRELOAD=shim palrt-startup --order threads-first" \
       "env 'LD_PRELOAD=$shim' $startup --order threads-first" \
    -n "env /bin/true" "env /bin/true" \
    -n "env LD_PRELOAD=shim /bin/true" "env 'LD_PRELOAD=$shim' /bin/true"
  round_files+=("results/startup-round-$round.json")
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

# The targets: each palrt-startup row within 1.35x of the C floor that does the same work.
"$python" scripts/startup_report.py summary --hyperfine "${round_files[@]}" \
  --baselines 1,5,7,9 --compare 1/4:1.35 --compare 5/6:1.35 --reports "$reports" \
  --command "RUNS=$runs ROUNDS=$rounds REPORT_RUNS=$report_runs scripts/bench-startup.sh" \
  --out results/summary.md
"$python" scripts/startup_report.py plot --hyperfine "${round_files[@]}" \
  --baselines 1,5,7,9 --out results/startup.png
echo "bench-startup: wrote results/startup-round-*.json and .md, startup-reports.json, summary.md, startup.png"
