# SPDX-License-Identifier: MIT
"""The rows the host benchmarks add to results/hosts.json (palrt-bench's JSON shape, component
"hosts"), in one place: each run's figures gathered per row, the median of the runs with every
run's figure beside it, and the merge into a report that other benchmarks wrote rows to first.
Imported by tools/hosts/boehm/bench_boehm.py, tools/hosts/copying/bench_copying.py and
tools/hosts/bench_runs.py.
"""
import json
import os
import platform
import statistics
import sys


class samples:
    """Every run's figure for each row, in the order the rows first appeared. Rows that come with
    palrt-bench's verdict (its "disturbed": the run's wall figure and the same figure timed by
    its threads' CPU clocks differ by more than 10%) keep it too: the row's result then says in
    how many of its runs it was disturbed, and gives the median of the CPU-timed figures."""

    def __init__(self):
        self.values = {}
        self.cpu_values = {}
        self.disturbed = {}
        self.order = []

    def add(self, row):
        key = (row['case'], row['variant'], row['threads'], row['metric'])
        if key not in self.values:
            self.order.append(key)
        self.values.setdefault(key, []).append(row['value'])
        if 'cpu_value' in row:
            self.cpu_values.setdefault(key, []).append(row['cpu_value'])
        if 'disturbed' in row:
            self.disturbed.setdefault(key, []).append(bool(row['disturbed']))

    def median(self, case, variant, threads, metric):
        return statistics.median(self.values[(case, variant, threads, metric)])

    def results(self):
        out = []
        for k in self.order:
            c, v, t, m = k
            r = {'case': c, 'variant': v, 'threads': t, 'metric': m, 'value': statistics.median(self.values[k]),
                 'samples': self.values[k]}
            if k in self.cpu_values:
                r['cpu_value'] = statistics.median(self.cpu_values[k])
                r['cpu_samples'] = self.cpu_values[k]
            if k in self.disturbed:
                r['disturbed_runs'] = sum(self.disturbed[k])
            out.append(r)
        return out


def run_rotated(runs, cases, measure, label):
    """`runs` runs of every case: `cases` is [(args, variants)], measure(args, variant) returns
    the rows one measurement printed. Within a run the variants of a case follow each other in
    an order rotated from run to run, so that none always runs first (warm, or after another's
    memory). Returns the samples."""
    rows = samples()
    for run in range(runs):
        for args, variants in cases:
            k = run % len(variants)
            for v in variants[k:] + variants[:k]:
                for row in measure(args, v):
                    rows.add(row)
        print(f'{label}: run {run + 1}/{runs} done', file=sys.stderr)
    return rows


def print_table(rows, variants, ratios):
    """One line per case, metric and thread count: the median of each of `variants`, then each
    ratio (numerator, denominator) of `ratios`, '-' where a variant was not measured."""
    print(f'{"case":24} {"metric":11} {"threads":>7}' + ''.join(f' {v:>12}' for v in variants) +
          ''.join(f' {n.split("-")[0] + "/" + d.split("-")[-1]:>12}' for n, d in ratios))
    seen = []
    for (c, _, t, m) in rows.order:
        if (c, m, t) in seen:
            continue
        seen.append((c, m, t))
        med = {v: rows.median(c, v, t, m) for (cc, v, tt, mm) in rows.order if (cc, mm, tt) == (c, m, t)}
        cells = ''.join(f' {med[v]:12.1f}' if v in med else f' {"-":>12}' for v in variants)
        cells += ''.join(f' {med[n] / med[d]:11.2f}x' if n in med and d in med else f' {"-":>12}' for n, d in ratios)
        print(f'{c:24} {m:11} {t:7d}{cells}')


def machine():
    return {'nproc': len(os.sched_getaffinity(0)), 'kernel': platform.release()}


def merge(path, prefix, results, machine_facts):
    """Replaces the rows of `path` whose case starts with `prefix` by `results` (a new report if
    `path` does not exist yet), keeping every other row."""
    report = {'component': 'hosts', 'machine': machine_facts, 'results': []}
    if os.path.exists(path):
        with open(path) as f:
            report = json.load(f)
    report['results'] = [r for r in report['results'] if not r['case'].startswith(prefix)] + results
    with open(path, 'w') as f:
        json.dump(report, f, indent=1)
        f.write('\n')
