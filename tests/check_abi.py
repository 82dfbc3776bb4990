#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""libpalrt.so's ABI against its committed description, abi/libpalrt.so.<soversion>.abi
(docs/ABI.md).

abidw (libabigail; Debian: abigail-tools) writes what the library exports, each function and
variable with its type, and the layout of every public type those reach, read from the
library's symbols and DWARF; abi/libpalrt.suppr says which types are public (those of the
installed headers, and the standard library's). abidiff compares the committed description
with the one of the library just built: any change it reports (a name gone or added, a
changed signature, a public type's changed layout; what it judges harmless too) fails, with
abidiff's report, until the committed file is rewritten in the same commit
(scripts/update-abi.sh) and CHANGELOG.md says why. The description leaves out what would
differ between machines and build folders (paths, the Boost release the library links), so
the file is the same wherever it is written.

Which inline functions, type information and vtables a library exports depends on the
compiler and on how much it inlines (as startup/libpalrt.symbols says), and the standard
library's types on its release: the description names the build it was taken from (the
release build of scripts/test.sh), and another build is not compared (the test is skipped,
saying so). The sanitizer builds do not run it at all (tests/meson.build).

Usage (meson runs it; tests/meson.build):
  check_abi.py --library L --abi-file F --suppressions S --build DESCRIPTION
               --source-root R --build-root B [--update]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SKIP = 77  # meson's exit status for a skipped test

ABIDW_OPTIONS = [
    '--exported-interfaces-only',  # what the library exports, and the types that reaches
    '--no-corpus-path', '--no-comp-dir-path', '--no-show-locs',  # no path of this machine
    '--no-elf-needed',  # the Boost release the build machine has is not palrt's interface
    '--no-parameter-names',  # no caller sees a parameter's name
    '--type-id-style', 'hash',  # ids from the types, not the reading order: diffs stay local
]
BUILD_LINE = re.compile(r'^  <!-- build: (.*) -->$', re.M)
UPDATE = 'scripts/update-abi.sh'


def describe(abidw, library, suppressions, build, source_root, build_root):
    """The ABI description of `library`, as the committed file holds it."""
    r = subprocess.run([abidw] + ABIDW_OPTIONS + ['--suppressions', str(suppressions), str(library)],
                       capture_output=True, text=True)
    if r.returncode != 0 or not r.stdout.startswith('<abi-corpus '):
        sys.exit(f'check_abi.py: abidw failed on {library} (exit {r.returncode}):\n{r.stderr}')

    # Each translation unit is named by its source file as the compiler was given it, relative
    # to the build folder: name it relative to the source tree instead (or to the build folder,
    # a file generated there).
    def unit_path(m):
        p = Path(os.path.normpath(build_root / m.group(2)))
        for root, shown in ((build_root, '(build)/'), (source_root, '')):
            if p.is_relative_to(root):
                return f"<abi-instr address-size='{m.group(1)}' path='{shown}{p.relative_to(root)}'"
        return m.group(0)

    text = re.sub(r"<abi-instr address-size='(\d+)' path='([^']+)'", unit_path, r.stdout)
    first, rest = text.split('\n', 1)
    return (f'{first}\n'
            f'  <!-- libpalrt.so\'s ABI (docs/ABI.md), written by {UPDATE}; tests/check_abi.py compares it. -->\n'
            f'  <!-- build: {build} -->\n{rest}')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--library', required=True, type=Path)
    ap.add_argument('--abi-file', required=True, type=Path)
    ap.add_argument('--suppressions', required=True, type=Path)
    ap.add_argument('--build', required=True, help="this build's compiler and options")
    ap.add_argument('--source-root', required=True, type=Path)
    ap.add_argument('--build-root', required=True, type=Path)
    ap.add_argument('--update', action='store_true', help='rewrite the committed description')
    a = ap.parse_args()
    source_root, build_root = a.source_root.resolve(), a.build_root.resolve()

    tools = {name: shutil.which(name) for name in ('abidw', 'abidiff', 'abilint')}
    if not all(tools.values()):
        missing = ', '.join(name for name, path in tools.items() if not path)
        message = f'{missing} not found (Debian: apt-get install abigail-tools; scripts/setup.sh installs it)'
        if a.update:
            sys.exit(f'check_abi.py: {message}')
        print(f'abi: not compared: {message}')
        return SKIP

    new = describe(tools['abidw'], a.library, a.suppressions, a.build, source_root, build_root)
    if a.update:
        a.abi_file.write_text(new)
        print(f'wrote {a.abi_file} (build: {a.build}); commit it with the change, and say why in CHANGELOG.md')
        return 0

    if not a.abi_file.is_file():
        print(f'abi: {a.abi_file} is missing: {UPDATE} writes it')
        return 1
    committed = a.abi_file.read_text()
    listed = BUILD_LINE.search(committed)
    if not listed:
        print(f'abi: {a.abi_file} has no "<!-- build: ... -->" line: {UPDATE} writes it')
        return 1
    if listed.group(1) != a.build:
        print(f'abi: not compared: {a.abi_file} describes a build of {listed.group(1)} (scripts/test.sh\'s '
              f'release build), this build is {a.build}, whose compiler and options export other inline '
              f'functions and type information')
        return SKIP
    # abidiff reads a file it cannot parse as an empty corpus, and then may find no change.
    lint = subprocess.run([tools['abilint'], str(a.abi_file)], capture_output=True, text=True)
    if lint.returncode != 0:
        print(f'abi: {a.abi_file} is not a valid ABI description ({UPDATE} rewrites it):\n{lint.stderr}')
        return 1

    written = build_root / (a.abi_file.name + '.new')
    written.write_text(new)
    # --harmless: abidiff leaves out by default what it judges harmless, a public member's type
    # changed from std::int64_t to std::uint64_t among them; every change counts here.
    diff = subprocess.run([tools['abidiff'], '--harmless', str(a.abi_file), str(written)],
                          capture_output=True, text=True)
    print(f'abidiff --harmless {a.abi_file} {written}: exit {diff.returncode}')
    if diff.returncode == 0:
        if new != committed:
            print(f'abi: no change abidiff reports; {a.abi_file} differs from this build\'s description '
                  f'only where abidiff does not look ({UPDATE} refreshes it)')
        return 0
    print(diff.stdout + diff.stderr)
    # abidiff's exit status is a bit mask: 4, the ABI changed; 8, incompatibly for certain (a
    # name is gone). A changed type is 4 alone: abidiff cannot tell whether a host relies on it.
    kind = ('an incompatible change: a host linked against the committed ABI does not load on this library'
            if diff.returncode & 8 else 'a change abidiff cannot judge alone (a name added is compatible; a '
            'public type\'s changed size or layout breaks every host compiled with the old one)')
    print(f'abi: libpalrt.so\'s ABI differs from {a.abi_file}: {kind}.\n'
          f'If the change is meant: run {UPDATE} (it rewrites {a.abi_file} from the release build, '
          f'build/), commit the file with the change, and add a line to CHANGELOG.md saying what '
          f'changed and why; docs/ABI.md says when a change needs a new soversion. This build\'s '
          f'description is {written}.')
    return 1


if __name__ == '__main__':
    sys.exit(main())
