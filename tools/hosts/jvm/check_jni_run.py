#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs a JVM (the java launcher, or a program that creates one) and fails on -Xcheck:jni's warnings.

  check_jni_run.py [--expect-warning] COMMAND [ARG...]

HotSpot's -Xcheck:jni reports the JNI misuses it survives as a line of output and goes on
("WARNING in native method: JNI call made without checking exceptions when required to",
"WARNING: JNI local refs: 40, exceeds capacity: 32"), so a run with such a bug still exits
0. This passes the command's stdout and stderr through, merged in the order written, and
exits with the command's status if it failed, else 1 if any line holds "WARNING", else 0.

--expect-warning is the control (jni_misuse_control.cpp): exit 0 only if the command exited
0 and printed a warning, 1 otherwise.
"""
import signal
import subprocess
import sys


def main(argv):
    args = argv[1:]
    expect_warning = bool(args) and args[0] == '--expect-warning'
    if expect_warning:
        args = args[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    warnings = []
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        for raw in proc.stdout:
            line = raw.decode(errors='replace')
            sys.stdout.write(line)
            sys.stdout.flush()
            if 'WARNING' in line:
                warnings.append(line.rstrip('\n'))
    status = proc.returncode
    if status < 0:
        print(f'check_jni_run: {args[0]} was killed by {signal.Signals(-status).name}')
        return 128 - status
    if status != 0:
        print(f'check_jni_run: {args[0]} exited with status {status}')
        return 1 if expect_warning else status
    if expect_warning:
        if not warnings:
            print('check_jni_run: the control printed no warning: -Xcheck:jni was off, or this check is blind')
            return 1
        print(f'check_jni_run: the control\'s misuse was reported ({len(warnings)} warning line(s))')
        return 0
    if warnings:
        print(f'check_jni_run: {len(warnings)} warning line(s) from the JVM (-Xcheck:jni):')
        for w in warnings:
            print(f'  {w}')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
