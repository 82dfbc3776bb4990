#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The JVM host's benchmark: palrt's identity cache behind the JNI binding
(palrt.jvmhost.WrapperCache) against the caches a binding writes without palrt, each as its
users write it and each one JNI transition per lookup that hits:
  palrt      WrapperCache.at(handle, i): palrt::jni::identity_cache (JNI weak global
             references, grace_period); a miss makes the wrapper in Java and caches it with
             two more JNI calls (NativeObjects.pointerAt, publish); the binding's sweeper
             thread removes collected wrappers' entries after each collection
  chm        NativeObjects.pointerAt(handle, i), then a ConcurrentHashMap<Long,
             WeakReference<Wrapper>> in Java, dead entries expunged through a ReferenceQueue
  mutex-map  a native at(handle, i) over a std::unordered_map<const void*, jweak> under a
             std::mutex (libpalrt_jvmbench.so), each entry removed by a cleanup of its own
             (a PhantomReference that is the token, drained by a thread of the library)
and, in the churn case only, what none of them is, a cache:
  jni-weak-floor  JniWeakFloor.at(handle, i): the wrapper and its cleanup made in Java, one JNI
             call that makes its weak global reference, which mutex-map's cleanup mechanism
             deletes at once; no map, no lookup, no grace period. The floor under any binding
             that removes its wrappers' entries with a cleanup per wrapper (palrt sweeps
             instead, and has none). Not a peer of the caches
             (every call makes a wrapper): it has no hit or bytes rows and no target, and is
             printed in the churn notes and, after the targets, as its ratio to chm.
Runs JvmBench (palrt-jvmbench.jar) once per case and variant, in a JVM of its own (fixed
heap, G1), the variants of a case one after another in an order rotated from run to run,
RUNS times, and adds the medians to a palrt-bench-shaped JSON report (component "hosts").

  bench_jvm.py --jar build/tools/hosts/jvm/bench/palrt-jvmbench.jar \\
               --host-jar build/tools/hosts/jvm/java/palrt-jvmhost.jar [--java JAVA] [--runs 5] \\
               [--json FILE] [--quick] [--check-jni]

The native libraries are looked for beside the two jars (--library-path to say otherwise:
scripts/bench-hosts.sh gives build/tools/hosts/jvm and its bench/ folder).

Rows (case|variant|threads|metric; the Java classes say exactly what one operation is):
  jvm/hit/N=1024, jvm/hit/N=100000, threads 1 and 2, ns_per_op (HitBench.java): every wrapper
      alive, random objects. ns_per_op is INVERSE THROUGHPUT: a repetition's wall time (the
      earliest thread's start to the latest thread's end) divided by the lookups of all
      threads together, so two threads that scale perfectly halve it. "palrt at 2 threads is
      1.8x faster than at 1" reads ns_per_op(1 thread) / ns_per_op(2 threads) >= 1.8.
  jvm/churn/N=1024, ns_per_op (ChurnBench.java): rounds of N wrappers made (every lookup a
      miss), dropped, collected (System.gc(), untimed) and cleaned up (the wait until the
      cache holds no weak reference, timed): ns per wrapper made and cleaned up; the detail
      adds the background threads' CPU per wrapper (the reference handler, palrt's sweeper or
      a peer's cleanup thread), which the wall figure misses where they start before
      System.gc() returned. Also jni-weak-floor's row, kept in FILE and left out of the table.
  jvm/bytes-per-wrapper/N=100000, bytes (BytesBench.java): Java heap (MemoryMXBean, after
      full collections) plus malloc'd native memory (glibc mallinfo2: palrt's tables, the
      map's nodes, the JVM's storage of JNI weak references) grown by N live cached
      wrappers, per wrapper, less what HotSpot malloc'd for itself meanwhile (its compilers'
      arenas, from Native Memory Tracking, which this case's JVM runs with); heap_bytes and
      native_bytes are the two parts.
Each row's "detail" (printed by JvmBench, not kept in FILE) feeds the notes after the table:
the hit rows' share of time on a CPU, churn's two parts. Then the targets, met or not.
--quick: a smoke run of every row in a fraction of the time (figures meaningless);
--check-jni: the JVMs run with -Xcheck:jni, and any warning it prints fails the run.
With --json FILE, the jvm/ rows of FILE are replaced and every other row is kept
(scripts/bench-hosts.sh writes the other hosts' rows to the same file).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

# tools/hosts/hosts_report.py: the rows' medians and the merge into hosts.json, shared by the hosts.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import hosts_report  # noqa: E402

VARIANTS = ['palrt', 'chm', 'mutex-map']  # the identity caches: the table's columns
# The churn case's floor (JniWeakFloor.java): not a cache, so only in the churn case's runs.
FLOOR = 'jni-weak-floor'
FLOOR_LABEL = 'floor: a cleanup per wrapper alone'
HIT_SIZES = (1024, 100000)
CHURN_N = 1024
BYTES_N = 100000
CASES = [(['--case', 'hit', '--n', str(n), '--threads', str(t)], VARIANTS) for n in HIT_SIZES for t in (1, 2)] + [
    (['--case', 'churn', '--n', str(CHURN_N)], VARIANTS + [FLOOR]),
    (['--case', 'bytes', '--n', str(BYTES_N)], VARIANTS),
]
# A fixed heap, so that no variant runs with a heap the JVM sized differently for it, and G1
# named: it is the default only on a machine the JVM finds server-class (2 CPUs, 2 GiB).
JVM_OPTIONS = ['-Xms2g', '-Xmx2g', '-XX:+UseG1GC']
# The bytes case subtracts what HotSpot mallocs for itself (its compilers' arenas) from
# malloc's figure, as Native Memory Tracking reports it (JvmScratchMemory.java).
CASE_JVM_OPTIONS = {'bytes': ['-XX:NativeMemoryTracking=summary']}
MAIN_CLASS = 'palrt.jvmhost.bench.JvmBench'
# --quick: a smoke run (the same code paths, a fraction of the time); its figures mean little.
QUICK_ARGS = ['--warmup-ms', '100', '--iterations', '3', '--rep-ms', '5']


def measure(jvm, program, args, variant, details):
    """One JVM: `jvm` (the launcher and its options) + the case's own options + `program`.
    Each row's "detail" object is appended to details[(case, variant, threads, metric)]."""
    case = args[args.index('--case') + 1]
    out = subprocess.run(jvm + CASE_JVM_OPTIONS.get(case, []) + program + args + ['--variant', variant],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit(f'bench_jvm: {" ".join(args)} --variant {variant} failed (exit status {out.returncode})')
    if out.stderr:
        sys.stderr.write(out.stderr)
    # JvmBench prints rows only; anything else on stdout is the JVM's (-Xcheck:jni's warnings
    # go there) and fails the run rather than pass unseen.
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    stray = [line for line in lines if not line.startswith('{')]
    if stray:
        raise SystemExit(f'bench_jvm: {" ".join(args)} --variant {variant} printed more than its rows:\n' + '\n'.join(stray))
    rows = [json.loads(line) for line in lines]
    for r in rows:
        details.setdefault((r['case'], r['variant'], r['threads'], r['metric']), []).append(r.get('detail', {}))
    return rows


def java_version(java):
    out = subprocess.run([java, '-version'], capture_output=True, text=True, check=True)
    return (out.stderr.splitlines() or ['?'])[0]


def ratio(rows, num, den):
    """(median num / median den, each run's num / den) for two (case, variant, threads, metric)."""
    a, b = rows.values.get(num), rows.values.get(den)
    if not a or not b:
        return None, []
    return rows.median(*num) / rows.median(*den), [x / y for x, y in zip(a, b)]


def print_targets(rows):
    """Each target of the JVM host, met or not. The verdict reads the median of the runs' own
    ratios: the two figures of a ratio come from the same run, measured one after the other,
    so a slow spell of the machine moves both (the N=100000 rows are memory-bound: on a shared
    2-vCPU virtual machine they moved by up to 5x between processes minutes apart, while the
    N=1024 rows held within 2%); the ratio of the medians is printed beside it."""
    targets = []  # (what, each run's ratio, ratio of the medians, target text, is met)
    for n in HIT_SIZES:
        case = f'jvm/hit/N={n}'
        r, runs = ratio(rows, (case, 'palrt', 1, 'ns_per_op'), (case, 'chm', 1, 'ns_per_op'))
        targets.append((f'{case} 1 thread, palrt/chm', runs, r, '<= 1.0x', lambda x: x <= 1.0))
        r, runs = ratio(rows, (case, 'palrt', 1, 'ns_per_op'), (case, 'palrt', 2, 'ns_per_op'))
        targets.append((f'{case} palrt, 2 threads x faster than 1', runs, r, '>= 1.8x', lambda x: x >= 1.8))
        r, runs = ratio(rows, (case, 'palrt', 2, 'ns_per_op'), (case, 'mutex-map', 2, 'ns_per_op'))
        targets.append((f'{case} 2 threads, palrt/mutex-map', runs, r, '<= 0.5x', lambda x: x <= 0.5))
    case = f'jvm/churn/N={CHURN_N}'
    r, runs = ratio(rows, (case, 'palrt', 1, 'ns_per_op'), (case, 'chm', 1, 'ns_per_op'))
    targets.append((f'{case}, palrt/chm', runs, r, '<= 1.0x', lambda x: x <= 1.0))
    case = f'jvm/bytes-per-wrapper/N={BYTES_N}'
    r, runs = ratio(rows, (case, 'palrt', 1, 'bytes'), (case, 'chm', 1, 'bytes'))
    targets.append((f'{case}, palrt/chm', runs, r, '<= 1.0x', lambda x: x <= 1.0))
    print('\ntargets: the median of the runs\' ratios (the verdict), the ratio of the medians, each run\'s ratio')
    for what, runs, of_medians, target, is_met in targets:
        if not runs:
            print(f'  {what:50} not measured')
            continue
        paired = statistics.median(runs)
        verdict = 'met' if is_met(paired) else 'NOT MET'
        print(f'  {what:50} {paired:6.2f}x {of_medians:6.2f}x  target {target:8} {verdict:8} runs: ' +
              ' '.join(f'{x:.2f}' for x in runs))
    # The floor is no target's subject: it is what the churn target's palrt/chm cannot go
    # below while palrt holds wrappers through JNI weak global references. Same columns.
    case = f'jvm/churn/N={CHURN_N}'
    r, runs = ratio(rows, (case, FLOOR, 1, 'ns_per_op'), (case, 'chm', 1, 'ns_per_op'))
    what = f'{case}, floor ({FLOOR})/chm'
    if runs:
        print(f'  {what:50} {statistics.median(runs):6.2f}x {r:6.2f}x  no target: the least a binding with a '
              f'cleanup per wrapper reaches; runs: ' + ' '.join(f'{x:.2f}' for x in runs))
    else:
        print(f'  {what:50} not measured')


def detail_median(details, key, field):
    values = [d[field] for d in details.get(key, []) if field in d]
    return statistics.median(values) if values else None


def print_details(rows, details):
    """What the rows' details say: the hit rows' scaling and time on a CPU, churn's two parts
    (the floor's included, under FLOOR_LABEL)."""
    print('\nhit, 2 threads against 1 (ns_per_op 1 thread / 2 threads: 2.00x is perfect scaling), and the\n'
          'workers\' median share of the wall time on a CPU at 1 / 2 threads (cpu_ns_per_op / (threads x\n'
          'ns_per_op); below 100%: other processes held the CPUs, or a worker blocked):')
    for n in HIT_SIZES:
        case = f'jvm/hit/N={n}'
        cells = []
        for v in VARIANTS:
            r, _ = ratio(rows, (case, v, 1, 'ns_per_op'), (case, v, 2, 'ns_per_op'))
            shares = []
            for t in (1, 2):
                cpu = detail_median(details, (case, v, t, 'ns_per_op'), 'cpu_ns_per_op')
                shares.append(f'{cpu / (t * rows.median(case, v, t, "ns_per_op")):.0%}' if cpu is not None else '-')
            cells.append((f'{v} {r:.2f}x' if r is not None else f'{v} -') + f' ({"/".join(shares)})')
        print(f'  {case:20} ' + '   '.join(cells))
    case = f'jvm/churn/N={CHURN_N}'
    print(f'\n{case}, ns per wrapper: making it (step 1) + its cleanup (step 3), wall; and the CPU time of the '
          'background threads (reference handler, sweeper or cleanup thread), medians of the runs:')
    labels = [(v, v) for v in VARIANTS] + [(FLOOR, FLOOR_LABEL)]
    width = max(len(label) for _, label in labels)
    for v, label in labels:
        make = detail_median(details, (case, v, 1, 'ns_per_op'), 'make_ns_per_op')
        cleanup = detail_median(details, (case, v, 1, 'ns_per_op'), 'cleanup_ns_per_op')
        background = detail_median(details, (case, v, 1, 'ns_per_op'), 'background_cpu_ns_per_op')
        if make is not None and cleanup is not None:
            cpu = f'   background CPU {background:7.1f}' if background is not None else ''
            print(f'  {label:{width}} {make:8.1f} + {cleanup:8.1f}{cpu}')


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--jar', required=True, help='palrt-jvmbench.jar')
    ap.add_argument('--host-jar', required=True, help="the binding's palrt-jvmhost.jar")
    ap.add_argument('--library-path', help='where libpalrt_jvmhost.so and libpalrt_jvmbench.so are '
                    '(default: the jars\' folders)')
    ap.add_argument('--java', default=shutil.which('java'), help='the java launcher (default: java on PATH)')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--json', metavar='FILE')
    ap.add_argument('--quick', action='store_true', help='a short run for smoke tests')
    ap.add_argument('--check-jni', action='store_true', help='run the JVMs with -Xcheck:jni')
    a = ap.parse_args()
    if a.runs < 1:
        ap.error('--runs must be at least 1')
    if not a.java:
        ap.error('no java on PATH: pass --java')
    for jar in (a.jar, a.host_jar):
        if not os.path.isfile(jar):
            ap.error(f'{jar} does not exist: build it first')
    library_path = a.library_path or os.pathsep.join(
        dict.fromkeys(os.path.dirname(os.path.abspath(j)) for j in (a.host_jar, a.jar)))
    jvm = [a.java] + JVM_OPTIONS + (['-Xcheck:jni'] if a.check_jni else [])
    program = [f'-Djava.library.path={library_path}', '-cp', os.pathsep.join([a.jar, a.host_jar]), MAIN_CLASS]
    extra = QUICK_ARGS if a.quick else []
    details = {}
    rows = hosts_report.run_rotated(a.runs, CASES, lambda args, v: measure(jvm, program, args + extra, v, details),
                                    'bench_jvm')
    results = rows.results()
    machine = hosts_report.machine()
    if a.json:
        hosts_report.merge(a.json, 'jvm/', results, machine)
    print(f'jvm host: medians of {a.runs} runs; nproc {machine["nproc"]}, kernel {machine["kernel"]}; '
          f'{java_version(a.java)}; {" ".join(JVM_OPTIONS)}' + ('; QUICK (smoke) run' if a.quick else ''))
    hosts_report.print_table(rows, VARIANTS, [('palrt', 'chm'), ('palrt', 'mutex-map')])
    print_details(rows, details)
    print_targets(rows)


if __name__ == '__main__':
    main()
