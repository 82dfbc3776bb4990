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


class samples:
    """Every run's figure for each row, in the order the rows first appeared."""

    def __init__(self):
        self.values = {}
        self.order = []

    def add(self, row):
        key = (row['case'], row['variant'], row['threads'], row['metric'])
        if key not in self.values:
            self.order.append(key)
        self.values.setdefault(key, []).append(row['value'])

    def median(self, case, variant, threads, metric):
        return statistics.median(self.values[(case, variant, threads, metric)])

    def results(self):
        return [{'case': c, 'variant': v, 'threads': t, 'metric': m, 'value': statistics.median(self.values[k]),
                 'samples': self.values[k]} for k in self.order for (c, v, t, m) in [k]]


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
