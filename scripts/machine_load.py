#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What else the machine did while a benchmark ran, so that a reader can tell a disturbed run
from a regression: the CPU time other processes took (the machine's busy time from
/proc/stat less the benchmark's own, which the calling script measures with `times`), the
hypervisor's steal time, and the load average before and after.

  start=$(machine_load.py snapshot --own-cpu SECONDS)
  ... the benchmark ...
  machine_load.py report --since "$start" --own-cpu SECONDS [--json-into FILE]

--own-cpu is the CPU time (user + system) the calling script's finished children have used
so far (bash: `times`, second line). `report` prints one line; with --json-into it also
records the figures as "load" in the "machine" object of the palrt-bench-shaped report FILE.
"""
import argparse
import json
import os
import sys
import time


def cpu_jiffies():
    """(busy, steal) jiffies of all CPUs since boot: /proc/stat's first line."""
    with open('/proc/stat') as f:
        fields = f.readline().split()
    # cpu user nice system idle iowait irq softirq steal guest guest_nice (guest time is
    # counted in user already)
    values = [int(v) for v in fields[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


def loadavg():
    with open('/proc/loadavg') as f:
        return float(f.read().split()[0])


def snapshot(own_cpu):
    busy, steal = cpu_jiffies()
    return {'time': time.monotonic(), 'busy': busy, 'steal': steal, 'loadavg': loadavg(), 'own_cpu': own_cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='what', required=True)
    s = sub.add_parser('snapshot')
    s.add_argument('--own-cpu', type=float, required=True)
    r = sub.add_parser('report')
    r.add_argument('--since', required=True, help='the output of snapshot')
    r.add_argument('--own-cpu', type=float, required=True)
    r.add_argument('--json-into', metavar='FILE')
    a = ap.parse_args()
    if a.what == 'snapshot':
        print(json.dumps(snapshot(a.own_cpu)))
        return 0
    try:
        before = json.loads(a.since)
    except json.JSONDecodeError:
        ap.error('--since: not the output of `machine_load.py snapshot`')
    after = snapshot(a.own_cpu)
    hz = os.sysconf('SC_CLK_TCK')
    cpus = len(os.sched_getaffinity(0))
    wall = after['time'] - before['time']
    busy = (after['busy'] - before['busy']) / hz
    steal = (after['steal'] - before['steal']) / hz
    own = after['own_cpu'] - before['own_cpu']
    # /proc/stat counts in ticks and `times` in finer units: a few ticks of difference either
    # way is rounding, so "other" is not allowed below zero.
    other = max(0.0, busy - own)
    capacity = wall * cpus if wall > 0 else float('nan')
    load = {'wall_s': round(wall, 3), 'cpus': cpus, 'own_cpu_s': round(own, 3), 'other_cpu_s': round(other, 3),
            'other_share': round(other / capacity, 4), 'steal_s': round(steal, 3),
            'steal_share': round(steal / capacity, 4), 'loadavg_before': before['loadavg'],
            'loadavg_after': after['loadavg']}
    print(f"Load during the run: other processes took {other:.2f} CPU-s of {cpus} CPUs x {wall:.1f} s "
          f"({100 * load['other_share']:.1f}% of the machine), the hypervisor stole {steal:.2f} CPU-s "
          f"({100 * load['steal_share']:.1f}%); load average {before['loadavg']:.2f} before, "
          f"{after['loadavg']:.2f} after")
    if a.json_into:
        with open(a.json_into) as f:
            report = json.load(f)
        report.setdefault('machine', {})['load'] = load
        with open(a.json_into, 'w') as f:
            json.dump(report, f, indent=1)
            f.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
