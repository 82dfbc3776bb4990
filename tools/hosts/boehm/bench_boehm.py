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
    rows = hosts_report.samples()
    for run in range(a.runs):
        for args, variants in CASES:
            k = run % len(variants)
            for v in variants[k:] + variants[:k]:  # rotated from run to run
                for row in measure(a.bench, args, v):
                    rows.add(row)
        print(f'bench_boehm: run {run + 1}/{a.runs} done', file=sys.stderr)
    results = rows.results()
    machine = hosts_report.machine()
    if a.json:
        hosts_report.merge(a.json, 'boehm/', results, machine)
    print(f'boehm host: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}')
    print(f'{"case":24} {"metric":11} {"threads":>7} {"palrt":>12} {"boehm-links":>12} {"none":>12} {"palrt/links":>12} {"palrt/none":>11}')
    seen = []
    for (c, v, t, m) in rows.order:
        if (c, m, t) in seen:
            continue
        seen.append((c, m, t))
        med = {vv: rows.median(c, vv, t, m) for (cc, vv, tt, mm) in rows.order if (cc, mm, tt) == (c, m, t)}
        cells = ''.join(f'{med[x]:12.1f}' if x in med else f'{"-":>12}' for x in ('palrt', 'boehm-links', 'none'))
        r1 = f'{med["palrt"] / med["boehm-links"]:11.2f}x' if 'boehm-links' in med else f'{"-":>12}'
        r2 = f'{med["palrt"] / med["none"]:10.2f}x' if 'none' in med else f'{"-":>11}'
        print(f'{c:24} {m:11} {t:7d} {cells} {r1} {r2}')


if __name__ == '__main__':
    main()
