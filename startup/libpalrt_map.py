#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the version script libpalrt.so is linked with: startup/libpalrt.map, with every
palrt name of an internal:: namespace that the libraries define listed as local.

Why a list, and not a pattern in the map: GNU ld gives a symbol that matches a global
pattern and a local pattern of the same version node to the global one (a more specific
local pattern does not win); only an exact name overrides a global pattern. palrt::* must
stay a pattern (the API is too large to list), and no glob can say "palrt::*, but not
palrt::*::internal::*" (a * spans ::). So the exact names are listed, taken from the
archives libpalrt.so is linked from, and nothing has to be kept by hand: a new internal
function is hidden by the next build.

A name is internal when its demangled form has an `::internal::` in it: a function, variable
or type of a palrt::<namespace>::internal namespace (with its type information, vtable,
guard variables), and the members of public classes that take an internal type (the
constructors palrt's own code calls with a key only it can make). The installed headers
declare internal types only as incomplete types, so no host can call such a name.

Usage: libpalrt_map.py NM CXXFILT OUTPUT TEMPLATE ARCHIVE...
"""
import subprocess
import sys

MARKER = '/* @internal-names@ */'


def defined_names(nm, archives):
    """The external names the archives define, mangled, each once, in a stable order."""
    out = subprocess.run([nm, '--defined-only', '--extern-only', '--format=posix'] + archives,
                         check=True, capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split()
        # "name type [value size]"; an archive member's heading ends in ':' and has no type.
        if len(fields) >= 2 and len(fields[1]) == 1 and not fields[0].endswith(':'):
            names.add(fields[0])
    return sorted(names)


def main(argv):
    if len(argv) < 5:
        sys.exit('usage: libpalrt_map.py NM CXXFILT OUTPUT TEMPLATE ARCHIVE...')
    nm, cxxfilt, output, template, archives = argv[0], argv[1], argv[2], argv[3], argv[4:]
    mangled = defined_names(nm, archives)
    demangled = subprocess.run([cxxfilt], input='\n'.join(mangled) + '\n', check=True,
                               capture_output=True, text=True).stdout.splitlines()
    if len(demangled) != len(mangled):
        sys.exit(f'libpalrt_map.py: {cxxfilt} gave {len(demangled)} names for {len(mangled)}')
    internal = [m for m, d in zip(mangled, demangled) if 'palrt::' in d and '::internal::' in d]

    with open(template, encoding='utf-8') as f:
        text = f.read()
    if text.count(MARKER) != 1:
        sys.exit(f'libpalrt_map.py: {template} must hold {MARKER} once, where the local names go')
    listed = ''.join(f'\n    {name};' for name in internal)
    text = text.replace(MARKER, f'/* {len(internal)} internal names, by startup/libpalrt_map.py: */{listed}')
    with open(output, 'w', encoding='utf-8') as f:
        f.write(text)


if __name__ == '__main__':
    main(sys.argv[1:])
