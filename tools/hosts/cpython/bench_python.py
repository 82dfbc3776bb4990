#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The CPython host's benchmark: palrt's identity cache against pybind11's registered_instances
and a plain std::unordered_map, the three registry modules built in tools/hosts/cpython/.

  bench_python.py --modules DIR [--runs 5] [--json FILE]   (FILE '-': stdout, and no table)

Cases (threads 1; N = natives, each with a live wrapper held):
  python/hit/N=...        a held wrapper's native asked for again (the cached wrapper
                          returned and its reference dropped)
  python/churn/N=1024     a wrapper dropped (the entry removed in its tp_dealloc) and its
                          native asked for again (a new wrapper cached)
    measured twice: in a C++ loop through each module's own lookup (native_registry.hpp), so
    that Python's call overhead does not hide the map, and from Python (the /py cases:
    `reg.get(i)` in a for loop, the loop included for every variant alike);
  python/churn-empty/N=...  a native with no wrapper asked for (a new wrapper, a new entry)
                          and the wrapper dropped at once (the entry removed): nothing held
  python/bytes-per-wrapper/N=100000
                          the memory one cached wrapper costs: the wrapper object and its
                          share of the map, from malloc's own accounting (mallinfo2) in a
                          process of its own with PYTHONMALLOC=malloc, so that Python objects
                          are counted the same way as the maps' nodes and tables;
  python/bytes-after-drop/N=100000
                          what the map keeps after all those wrappers were dropped: malloc's
                          bytes in use then, less before the first one was made, per wrapper.
Every run measures every variant of a case before the next case, in an order rotated from
run to run; the value reported is the median of the runs, each run's figure kept beside it.
"""
import argparse
import ctypes
import gc
import importlib
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time

VARIANTS = {'palrt': 'palrt_registry', 'pybind11': 'pybind11_registry', 'plain': 'plain_registry'}
HIT_SIZES = (1, 1024, 100000)
CHURN_SIZES = (1024,)
CHURN_EMPTY_SIZES = (1, 1024, 100000)
BYTES_N = 100000


def load(variant):
    return importlib.import_module(VARIANTS[variant])


def native_loop(module, kind, n, seed):
    reg = module.Registry(n)
    iterations = 2_000_000 if kind == 'hit' and n < 100000 else 1_000_000
    loop = {'hit': reg.bench_hit, 'churn': reg.bench_churn, 'churn-empty': reg.bench_churn_empty}[kind]
    loop(iterations // 10, seed)  # warm: the table at its size, the wrappers' pools filled
    return loop(iterations, seed)


def python_loop(module, kind, n, seed):
    reg = module.Registry(n)
    get = reg.get
    held = [get(i) for i in range(n)]
    order = list(range(n)) * max(1, 4096 // n)
    random.Random(seed).shuffle(order)
    passes = max(1, 400_000 // len(order))
    gc.disable()
    try:
        start = time.perf_counter_ns()
        if kind == 'hit':
            for _ in range(passes):
                for i in order:
                    get(i)
        else:
            for _ in range(passes):
                for i in order:
                    held[i] = None
                    held[i] = get(i)
        elapsed = time.perf_counter_ns() - start
    finally:
        gc.enable()
    del held
    return elapsed / (passes * len(order))


class mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ('arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks',
                 'fordblks', 'keepcost')]


def malloc_in_use():
    libc = ctypes.CDLL(None)
    libc.mallinfo2.restype = mallinfo2
    m = libc.mallinfo2()
    return m.uordblks + m.hblkhd  # the heap's chunks in use and mmap()ed blocks


def bytes_per_wrapper(variant):
    """In a child process with PYTHONMALLOC=malloc (see the module's docstring): the bytes per
    wrapper while all are held, and after all were dropped."""
    module = load(variant)
    reg = module.Registry(BYTES_N)
    held = [None] * BYTES_N  # the list is allocated before the first reading
    gc.collect()
    gc.disable()
    before = malloc_in_use()
    for i in range(BYTES_N):
        held[i] = reg.get(i)
    after = malloc_in_use()
    for i in range(BYTES_N):
        held[i] = None
    dropped = malloc_in_use()
    return (after - before) / BYTES_N, (dropped - before) / BYTES_N


def measure_bytes(variant, which):
    env = dict(os.environ, PYTHONMALLOC='malloc')
    out = subprocess.run([sys.executable, __file__, '--bytes-of', variant], env=env, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    held, dropped = (float(x) for x in out.split())
    return held if which == 'held' else dropped


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--modules', help='the build folder of tools/hosts/cpython')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--json', metavar='FILE', help='also write one JSON object (palrt-bench\'s shape) to FILE; - for stdout, instead of the table')
    ap.add_argument('--bytes-of', help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.modules:
        sys.path.insert(0, a.modules)
        os.environ['PYTHONPATH'] = a.modules + os.pathsep + os.environ.get('PYTHONPATH', '')
    if a.bytes_of:
        print(*bytes_per_wrapper(a.bytes_of))
        return
    if a.runs < 1:
        ap.error('--runs must be at least 1')
    variants = []
    for v in VARIANTS:
        try:
            load(v)
            variants.append(v)
        except ImportError as e:
            print(f'bench_python: {v} skipped: {e}', file=sys.stderr)
    if 'palrt' not in variants:
        sys.exit('bench_python: palrt_registry cannot be imported (build tools/hosts/cpython first; --modules)')

    cases = []  # (case name, metric, function(variant, seed) -> value)
    for n in HIT_SIZES:
        cases.append((f'python/hit/N={n}', 'ns_per_op', lambda v, s, n=n: native_loop(load(v), 'hit', n, s)))
    for n in CHURN_SIZES:
        cases.append((f'python/churn/N={n}', 'ns_per_op', lambda v, s, n=n: native_loop(load(v), 'churn', n, s)))
    for n in HIT_SIZES:
        cases.append((f'python/hit/N={n}/py', 'ns_per_op', lambda v, s, n=n: python_loop(load(v), 'hit', n, s)))
    for n in CHURN_SIZES:
        cases.append((f'python/churn/N={n}/py', 'ns_per_op', lambda v, s, n=n: python_loop(load(v), 'churn', n, s)))
    for n in CHURN_EMPTY_SIZES:
        cases.append((f'python/churn-empty/N={n}', 'ns_per_op', lambda v, s, n=n: native_loop(load(v), 'churn-empty', n, s)))
    cases.append((f'python/bytes-per-wrapper/N={BYTES_N}', 'bytes', lambda v, s: measure_bytes(v, 'held')))
    cases.append((f'python/bytes-after-drop/N={BYTES_N}', 'bytes', lambda v, s: measure_bytes(v, 'dropped')))

    samples = {}
    for run in range(a.runs):
        for case, metric, fn in cases:
            order = variants[run % len(variants):] + variants[:run % len(variants)]
            for v in order:
                samples.setdefault((case, metric, v), []).append(fn(v, 1000 + run))
                gc.collect()
        print(f'bench_python: run {run + 1}/{a.runs} done', file=sys.stderr)

    results = [{'case': case, 'variant': v, 'threads': 1, 'metric': metric,
                'value': statistics.median(values), 'samples': values}
               for (case, metric, v), values in samples.items()]
    machine = {'nproc': len(os.sched_getaffinity(0)), 'kernel': platform.release(),
               'python': f'{sys.executable} {platform.python_version()}'}
    if a.json:
        report = {'component': 'hosts', 'machine': machine, 'results': results}
        if a.json == '-':
            json.dump(report, sys.stdout, indent=1)
            print()
            return
        with open(a.json, 'w') as f:
            json.dump(report, f, indent=1)
            f.write('\n')
    print(f'python host: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}, {machine["python"]}')
    base = [v for v in variants if v != 'palrt']
    head = f'{"case":34} {"metric":10}' + ''.join(f'{v:>10}' for v in variants) + ''.join(f'{"palrt/" + b:>16}' for b in base)
    print(head)
    for case, metric, _ in cases:
        vals = {v: statistics.median(samples[(case, metric, v)]) for v in variants}
        print(f'{case:34} {metric:10}' + ''.join(f'{vals[v]:10.1f}' for v in variants) +
              ''.join(f'{vals["palrt"] / vals[b]:15.2f}x' for b in base))


if __name__ == '__main__':
    main()
