#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Boehm host's benchmark: runs palrt-boehm-bench (one process per measurement: Boehm's
state is process-wide) for every case and variant, interleaved, RUNS times, and adds the
medians to a palrt-bench-shaped JSON report (component "hosts").

  bench_boehm.py --bench build/tools/hosts/boehm/palrt-boehm-bench [--runs 5] [--json FILE]

Cases and what each measures: bench_boehm.cpp. With --json FILE, rows are appended to the
report already in FILE (scripts/bench-hosts.sh writes the CPython rows first).
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
    (['--case', 'weak-pair'], ['palrt', 'boehm-links']),
    (['--case', 'pause'], ['palrt', 'boehm-links', 'none']),
    (['--case', 'hit', '--threads', '1'], ['palrt', 'boehm-links']),
    (['--case', 'hit', '--threads', '2'], ['palrt', 'boehm-links']),
]


def measure(bench, args, variant):
    out = subprocess.run([bench] + args + ['--variant', variant], check=True, capture_output=True, text=True)
    if out.stderr:
        sys.stderr.write(out.stderr)
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bench', required=True)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--json', metavar='FILE')
    a = ap.parse_args()
    if a.runs < 1:
        ap.error('--runs must be at least 1')
    rows = hosts_report.run_rotated(a.runs, CASES, lambda args, v: measure(a.bench, args, v), 'bench_boehm')
    results = rows.results()
    machine = hosts_report.machine()
    if a.json:
        hosts_report.merge(a.json, 'boehm/', results, machine)
    print(f'boehm host: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}')
    hosts_report.print_table(rows, ('palrt', 'boehm-links', 'none'), [('palrt', 'boehm-links'), ('palrt', 'none')])

if __name__ == '__main__':
    main()
