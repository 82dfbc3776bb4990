#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""palrt-startup's startup order: the functions its timed runs execute and the data they
touch, for the linker to lay out side by side (lld's --symbol-ordering-file; meson.build
says why and when).

On the 2-vCPU VMs palrt is measured on, a page's first touch costs 9-16 us, a thousand
instructions' worth elsewhere. A run of palrt-startup executes ~60 KB of its own code, spread
over 1.1 MB of text (palrt, the static C++ runtime, Boost.Thread, CLI11): one fault per
64 KB window the kernel maps around a fault, 13 windows. Laid out in this order, the same
code takes two.

  startup_order.py write PALRT_STARTUP ORDER_FILE    # after a change to the startup path
  startup_order.py check PALRT_STARTUP ORDER_FILE    # the startup-order test

Both run PALRT_STARTUP under callgrind (valgrind) and list the functions of the executable
itself that ran (their mangled names; libc's are another object). `write` runs it the ways
scripts/bench-startup.sh times it (no option, --sync-worker eager, --order threads-first),
each REPEATS times, and puts the plain run's functions first, then what the others add;
then the data objects of the executable the plain run reads or writes (valgrind's lackey:
every load and store), so that the few its .data and .bss pages hold for a run share pages
(the C++ runtime's unused iostream and locale objects, and palrt's tables a run does not use,
go after them).
Which functions a run executes depends a little on timing: whether a service thread reaches
its loop, or parks, before the shutdown asks it to stop; callgrind runs one thread at a time,
and a busy machine moves its switches. Hence the repeats, and a check that looks at the plain
run, the row palrt-startup is judged by: it fails when that run executes more functions the
file does not list than timing alone explains, and then the file is stale: `write` brings it
up to date. What the other runs miss it reports without failing.
"""
import argparse
import bisect
import os
import re
import subprocess
import sys
import tempfile

PLAIN = []
RUNS = (PLAIN, ["--sync-worker", "eager"], ["--order", "threads-first"])
REPEATS = 3
# Functions the plain run may execute or not from one run to the next (the finalizer thread
# reaching its loop and parking before the stop request, or not): a check tolerates this many
# the file does not list.
TOLERATED_MISSING = 6

HEADER = """\
# palrt-startup's startup order (lld --symbol-ordering-file): the functions of the executable
# that its timed runs execute, laid out side by side so that a run touches 2-4 windows of its
# text instead of ~13, then the data objects a run touches, so that they share pages.
# Written by scripts/startup_order.py write (callgrind, lackey); checked by the startup-order
# test. Not a source of truth for anything else: a stale line costs a page fault.
"""


def executed_functions(binary, args):
    """The mangled names of the functions of `binary` itself that a run with `args` executed,
    in the order callgrind first lists them (grouped by file, roughly by first call)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        try:
            run = subprocess.run(
                ["valgrind", "--tool=callgrind", "--demangle=no", "--callgrind-out-file=" + out, binary, *args],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError:
            sys.exit("startup_order.py: valgrind is not installed (Debian: apt-get install valgrind; "
                     "scripts/setup.sh installs it)")
        if run.returncode != 0:
            sys.exit("startup_order.py: %s %s failed under callgrind (exit %d):\n%s"
                     % (binary, " ".join(args), run.returncode, run.stderr[-2000:]))
        lines = open(out, encoding="utf-8", errors="replace").read().splitlines()
    # Callgrind names each object and function once, "(id) name", and by "(id)" afterwards.
    names, objects = {}, {}
    for line in lines:
        m = re.match(r"^c?fn=\((\d+)\) (.*)", line)
        if m:
            names[m.group(1)] = m.group(2)
        m = re.match(r"^c?ob=\((\d+)\) (.*)", line)
        if m:
            objects[m.group(1)] = m.group(2)
    executable = os.path.realpath(binary)
    current, seen, found = None, set(), []
    for line in lines:
        m = re.match(r"^ob=\((\d+)\)", line)
        if m:
            current = os.path.realpath(objects[m.group(1)])
            continue
        m = re.match(r"^fn=\((\d+)\)", line)
        if m and current == executable:
            name = names[m.group(1)]
            # An address instead of a name: code with no symbol (the PLT): nothing to order.
            if name.startswith("0x") or name in seen:
                continue
            seen.add(name)
            found.append(name)
    return found


def data_symbols(binary):
    """(start, end, name) of the executable's data objects: initialised, zeroed, read-only, and
    the weak and unique ones (static members of templates, their guard variables)."""
    out = subprocess.run(["nm", "-S", "--defined-only", binary], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "bBdDrRgGsSVvu":
            start, size = int(parts[0], 16), int(parts[1], 16)
            if size:
                found.append((start, start + size, parts[3]))
    found.sort()
    return found


def touched_data(binary, args):
    """The executable's data objects a run with `args` loads from or stores to, in the order
    first touched (lackey traces every access; its addresses are the process's own, and the
    executable is not position-independent in the build that uses the order)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "lackey.log")
        run = subprocess.run(["valgrind", "--tool=lackey", "--trace-mem=yes", "--log-file=" + log, binary, *args],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit("startup_order.py: %s %s failed under lackey (exit %d):\n%s"
                     % (binary, " ".join(args), run.returncode, run.stderr[-2000:]))
        symbols = data_symbols(binary)
        starts = [s[0] for s in symbols]
        seen, found = set(), []
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                if len(line) < 4 or line[0] != " " or line[1] not in "LSM":
                    continue
                address = int(line[3:].split(",", 1)[0], 16)
                k = bisect.bisect_right(starts, address) - 1
                if k >= 0 and address < symbols[k][1]:
                    name = symbols[k][2]
                    if name not in seen:
                        seen.add(name)
                        found.append(name)
    return found


def union_of(binary, runs):
    ordered, seen = [], set()
    for args in runs:
        for name in executed_functions(binary, args):
            if name not in seen:
                seen.add(name)
                ordered.append(name)
    return ordered


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["write", "check"])
    parser.add_argument("binary", help="palrt-startup, built")
    parser.add_argument("order_file")
    a = parser.parse_args()
    if a.mode == "write":
        executed = union_of(a.binary, [args for args in RUNS for _ in range(REPEATS)])
        functions = set(executed)
        executed += [name for name in touched_data(a.binary, PLAIN) if name not in functions]
        with open(a.order_file, "w", encoding="utf-8") as f:
            f.write(HEADER)
            f.write("".join(name + "\n" for name in executed))
        print("startup_order.py: %d functions and %d data objects written to %s"
              % (len(functions), len(executed) - len(functions), a.order_file))
        return 0
    listed = set()
    with open(a.order_file, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                listed.add(line)
    for args in RUNS[1:]:
        others = [name for name in union_of(a.binary, [args]) if name not in listed]
        print("startup_order.py: the run with %s executed %d functions the file does not list (not checked)"
              % (" ".join(args), len(others)))
        for name in others:
            print("  not listed: " + name)
    executed = union_of(a.binary, [PLAIN])
    missing = [name for name in executed if name not in listed]
    print("startup_order.py: the run without options executed %d functions of %s; %d not in %s"
          % (len(executed), a.binary, len(missing), a.order_file))
    for name in missing:
        print("  not listed: " + name)
    if len(missing) > TOLERATED_MISSING:
        print("startup_order.py: %s is stale (more than %d functions missing): run\n"
              "  scripts/startup_order.py write %s %s"
              % (a.order_file, TOLERATED_MISSING, a.binary, a.order_file))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
