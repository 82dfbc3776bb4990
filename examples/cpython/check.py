# SPDX-License-Identifier: MIT
# Runs palrt_example (palrt_example.cpp) as Python code uses it; exit 0 and one line when
# the identity cache kept one wrapper per native object while it lived, and libpalrt.so was
# the one shipped beside the module. scripts/test.sh runs it after building the module with
# the README's command:  python3 check.py <folder holding the module and libpalrt.so.0>
import gc
import os
import sys

folder = os.path.realpath(sys.argv[1])
sys.path.insert(0, folder)
import palrt_example as m  # noqa: E402

m.natives(4)
a = m.wrapper_of(1)
assert m.wrapper_of(1) is a, 'a second wrapper for native 1 while the first lives'
assert a.index == 1
b = m.wrapper_of(2)
assert b is not a and b.index == 2
assert m.cached() == 2, m.cached()
del a
gc.collect()
assert m.cached() == 1, 'the dead wrapper was not forgotten in tp_dealloc'
assert m.wrapper_of(1).index == 1  # a new wrapper, dropped at once
assert m.cached() == 1
with open('/proc/self/maps') as maps:
    palrt = sorted({line.split()[-1] for line in maps if 'libpalrt.so' in line})
assert palrt == [os.path.join(folder, 'libpalrt.so.0')], palrt
print(f'palrt_example: one wrapper per native object, on {palrt[0]}')
