#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What else the machine did while a benchmark ran, so that a reader can tell a disturbed run
from a regression: the CPU time other processes took (the machine's busy time from
/proc/stat less the benchmark's own: the calling script's and that of the children it has
waited for, from /proc/PID/stat), the hypervisor's steal time, and the load average before
and after.

  start=$(machine_load.py snapshot --pid $$ [--show LABEL])
  ... the benchmark, every command of it waited for ...
  machine_load.py report --since "$start" --pid $$ [--json-into FILE]

`snapshot --show` first watches the machine for a second and prints on stderr what it was
doing just before the run (the same figures over that second); `report` prints one line for
the run, after that "before" line again if there was one; with --json-into it also records
the figures as "load" in the "machine" object of the JSON report FILE (palrt-bench-shaped, or
hyperfine's: any JSON object), the second before the run as "load": {"before": ...}.
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


def process_cpu(pid):
    """CPU seconds of process `pid` and of the children it has waited for: utime, stime,
    cutime and cstime of /proc/PID/stat (fields 14-17; the name in parentheses may hold
    spaces, so fields are counted after its closing parenthesis)."""
    with open(f'/proc/{pid}/stat') as f:
        after_name = f.read().rsplit(')', 1)[1].split()
    utime, stime, cutime, cstime = (int(v) for v in after_name[11:15])
    return (utime + stime + cutime + cstime) / os.sysconf('SC_CLK_TCK')


def snapshot(pid):
    busy, steal = cpu_jiffies()
    return {'time': time.monotonic(), 'busy': busy, 'steal': steal, 'loadavg': loadavg(), 'own_cpu': process_cpu(pid)}


def load_between(before, after):
    """What the machine did between two snapshots: the figures "load" records."""
    hz = os.sysconf('SC_CLK_TCK')
    cpus = len(os.sched_getaffinity(0))
    wall = after['time'] - before['time']
    busy = (after['busy'] - before['busy']) / hz
    steal = (after['steal'] - before['steal']) / hz
    own = after['own_cpu'] - before['own_cpu']
    capacity = wall * cpus if wall > 0 else float('nan')
    # Both count in ticks, each rounded its own way: "other" is kept between zero and what the
    # machine had.
    other = min(max(0.0, busy - own), capacity)
    return {'wall_s': round(wall, 3), 'cpus': cpus, 'own_cpu_s': round(own, 3), 'other_cpu_s': round(other, 3),
            'other_share': round(other / capacity, 4), 'steal_s': round(steal, 3),
            'steal_share': round(steal / capacity, 4), 'loadavg_before': before['loadavg'],
            'loadavg_after': after['loadavg']}


def describe(load):
    return (f"other processes took {load['other_cpu_s']:.2f} CPU-s of {load['cpus']} CPUs x {load['wall_s']:.1f} s "
            f"({100 * load['other_share']:.1f}% of the machine), the hypervisor stole {load['steal_s']:.2f} CPU-s "
            f"({100 * load['steal_share']:.1f}%); load average {load['loadavg_before']:.2f} before, "
            f"{load['loadavg_after']:.2f} after")


# How long `snapshot --show` watches the machine before the run: long enough for /proc/stat's
# ticks (100 a second per CPU) to give the share within a few %, short beside any benchmark.
BEFORE_WINDOW_S = 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest='what', required=True)
    s = sub.add_parser('snapshot')
    s.add_argument('--pid', type=int, required=True, help="the benchmark script's process ($$)")
    s.add_argument('--show', metavar='LABEL',
                   help=f'first watch the machine for {BEFORE_WINDOW_S:.0f} s and print on stderr what it did, '
                        'prefixed with LABEL')
    r = sub.add_parser('report')
    r.add_argument('--since', required=True, help='the output of snapshot')
    r.add_argument('--pid', type=int, required=True, help='as for snapshot')
    r.add_argument('--json-into', metavar='FILE')
    a = ap.parse_args()
    if a.what == 'snapshot':
        start = snapshot(a.pid)
        if a.show is not None:
            time.sleep(BEFORE_WINDOW_S)
            start_after_window = snapshot(a.pid)
            before = load_between(start, start_after_window)
            print(f"{a.show}: load before the run: {describe(before)}", file=sys.stderr)
            start = dict(start_after_window, before=before)
        print(json.dumps(start))
        return 0
    try:
        start = json.loads(a.since)
    except json.JSONDecodeError:
        ap.error('--since: not the output of `machine_load.py snapshot`')
    load = load_between(start, snapshot(a.pid))
    if 'before' in start:
        load['before'] = start['before']
        print(f"Load just before the run: {describe(load['before'])}")
    print(f"Load during the run: {describe(load)}")
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
