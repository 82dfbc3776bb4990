#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The copying host's benchmark: runs palrt-copying-bench (one process per measurement, so
each variant starts from a fresh heap) for every case and variant, interleaved, RUNS times,
and adds the medians to a palrt-bench-shaped JSON report (component "hosts").

  bench_copying.py --bench build/tools/hosts/copying/palrt-copying-bench [--runs 5] [--json FILE] [--quick]

Cases and what each measures: bench_copying.cpp. With --json FILE, rows are appended to the
report already in FILE (scripts/bench-hosts.sh writes the other hosts' rows first); rows of
an earlier copying run are replaced.
"""
import argparse
import json
import os
import subprocess
import sys

# tools/hosts/hosts_report.py: the rows' medians and the merge into hosts.json, shared by the hosts.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import hosts_report  # noqa: E402

CASES = [  # (args, variants)
    (['--case', 'copying/pause/young'], ['palrt', 'none']),
]


def measure(bench, args, variant, quick):
    cmd = [bench] + args + ['--variant', variant] + (['--quick'] if quick else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    if out.stderr:
        sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bench', required=True)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--json', metavar='FILE')
    ap.add_argument('--quick', action='store_true', help='a short run for smoke tests')
    a = ap.parse_args()
    if a.runs < 1:
        ap.error('--runs must be at least 1')
    rows = hosts_report.run_rotated(a.runs, CASES, lambda args, v: measure(a.bench, args, v, a.quick), 'bench_copying')
    results = rows.results()
    machine = hosts_report.machine()
    if a.json:
        hosts_report.merge(a.json, 'copying/', results, machine)
    print(f'copying host: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}')
    hosts_report.print_table(rows, ('palrt', 'none'), [('palrt', 'none')])

if __name__ == '__main__':
    main()
