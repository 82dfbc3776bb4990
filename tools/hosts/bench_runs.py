#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs one palrt-bench component RUNS times (one process each) and adds its rows, as medians
with every run's figure, to a palrt-bench-shaped JSON report (component "hosts"), each case
under the component's name: `palrt-bench gc`'s young-sweep/100k-old becomes
gc/young-sweep/100k-old, as scripts/bench-hosts.sh lists it beside the hosts' rows.

  bench_runs.py --bench build/tools/palrt-bench/palrt-bench --component gc [--runs 5] [--json FILE]

Rows of the component already in FILE are replaced; the others are kept. Prints the medians
with each case's ratios against the first variant of its rows, and for rows that palrt-bench
judged, in how many runs it found them disturbed (its "disturbed": hosts_report.samples).
"""
import argparse
import json
import subprocess
import sys

import hosts_report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--bench', required=True)
    ap.add_argument('--component', required=True)
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--json', metavar='FILE')
    a = ap.parse_args()
    if a.runs < 1:
        ap.error('--runs must be at least 1')
    prefix = a.component + '/'
    rows = hosts_report.samples()
    for run in range(a.runs):
        out = subprocess.run([a.bench, a.component, '--json'], check=True, capture_output=True, text=True)
        for row in json.loads(out.stdout)['results']:
            rows.add(dict(row, case=prefix + row['case']))
        print(f'bench_runs: {a.component} run {run + 1}/{a.runs} done', file=sys.stderr)
    results = rows.results()
    machine = hosts_report.machine()
    if a.json:
        hosts_report.merge(a.json, prefix, results, machine)
    print(f'{a.component}: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}')
    first = {}
    for r in results:
        base = first.setdefault((r['case'], r['metric']), r)
        ratio = r['value'] / base['value'] if base['value'] else float('nan')
        note = f'  disturbed in {r["disturbed_runs"]} of {a.runs} runs' if r.get('disturbed_runs') else ''
        print(f'{r["case"]:32} {r["variant"]:22} {r["threads"]:2d} {r["metric"]:18} {r["value"]:14.4g} '
              f'{ratio:8.3f}x of {base["variant"]}/{base["threads"]}{note}')


if __name__ == '__main__':
    main()
