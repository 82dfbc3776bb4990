# SPDX-License-Identifier: MIT
"""The CPython host's suite: a registry module (capi_registry.hpp) under the real interpreter.

  python3 test_registry.py [MODULE]     MODULE: palrt_registry (default), plain_registry or
                                        pybind11_registry

meson runs it for palrt_registry under Debian's python3 and under its debug interpreter
(python3-dbg: reference counts checked on every deallocation, sys.gettotalrefcount() for
leaks), in the ASan+UBSan build too (every Python object then comes from malloc, so a
wrapper used after it was freed is reported), and runs the identity checks for the two
peers, so that the benchmark compares modules that do the same thing. What is specific to
palrt's cache (its counters) is checked for palrt_registry only.
"""
import gc
import importlib
import os
import sys
import threading
import unittest
import weakref

MODULE = sys.argv.pop(1) if len(sys.argv) > 1 and not sys.argv[1].startswith('-') else 'palrt_registry'
registry = importlib.import_module(MODULE)
PALRT = registry.variant == 'palrt'
C_API = registry.variant in ('palrt', 'plain')  # cached(), stats(), on_create, payload
DEBUG_INTERPRETER = hasattr(sys, 'gettotalrefcount')


def entries(reg):
    return reg.stats()['entries']


class Identity(unittest.TestCase):
    def test_the_same_wrapper_for_as_long_as_it_lives(self):
        reg = registry.Registry(200)
        held = [reg.get(i) for i in range(200)]
        for i, w in enumerate(held):
            self.assertIs(reg.get(i), w)
            self.assertEqual(w.index, i)
        self.assertEqual(len({id(w) for w in held}), 200, 'two natives share a wrapper')
        if C_API:
            self.assertEqual(entries(reg), 200)

    def test_state_lives_in_the_native_across_wrappers(self):
        reg = registry.Registry(4)
        w = reg.get(2)
        w.value = 42
        del w
        self.assertEqual(reg.get(2).value, 42)

    def test_bad_indices_and_arguments(self):
        reg = registry.Registry(3)
        for bad in (-1, 3, 1 << 70):
            with self.assertRaises((IndexError, OverflowError, TypeError)):
                reg.get(bad)
        with self.assertRaises(TypeError):
            reg.get('1')
        with self.assertRaises((ValueError, TypeError)):
            registry.Registry(-1)
        self.assertEqual(len(registry.Registry(0)), 0)


@unittest.skipUnless(C_API, 'cached(), stats() and payloads are the C API modules\'')
class DropAndRecreate(unittest.TestCase):
    def test_a_dropped_wrapper_leaves_the_map_at_once(self):
        # Before palrt's host mode, an entry left only when the host called collect(), two
        # rounds for a dead wrapper.
        reg = registry.Registry(8)
        w = reg.get(3)
        r = weakref.ref(w)
        del w
        self.assertIsNone(r())
        self.assertIsNone(reg.cached(3))
        self.assertEqual(entries(reg), 0)
        w2 = reg.get(3)
        self.assertIs(reg.cached(3), w2)
        self.assertEqual(entries(reg), 1)

    @unittest.skipUnless(PALRT, 'counters of palrt\'s table')
    def test_churn_reuses_slots_and_rebuilds_nothing(self):
        # Before: slots were written once per table, 34,613 rebuilds per million inserts over
        # 64 identities.
        reg = registry.Registry(64)
        held = [reg.get(i) for i in range(64)]
        before = reg.stats()
        rounds = 20000
        for k in range(rounds):
            i = (k * 37) % 64
            held[i] = None
            held[i] = reg.get(i)
        after = reg.stats()
        self.assertEqual(after['rebuilds'] - before['rebuilds'], 0)
        self.assertEqual(after['reused_slots'] - before['reused_slots'], rounds)
        self.assertEqual(after['erased'] - before['erased'], rounds)
        self.assertEqual(after['entries'], 64)
        for i, w in enumerate(held):
            self.assertIs(reg.get(i), w)

    def test_registry_outlives_its_last_wrapper(self):
        reg = registry.Registry(4)
        w = reg.get(1)
        r = w.registry
        self.assertIs(r, reg)
        del reg, r
        self.assertEqual(w.index, 1)  # the wrapper holds the registry, and so its map
        self.assertIs(w.registry.get(1), w)
        del w
        gc.collect()

    def test_a_long_chain_of_wrappers_is_freed_without_deep_recursion(self):
        n = 100000
        reg = registry.Registry(n)
        head = reg.get(0)
        w = head
        for i in range(1, n):
            w.payload = reg.get(i)
            w = w.payload
        del w
        self.assertEqual(entries(reg), n)
        del head  # each dealloc frees the next: CPython's trashcan defers the deep ones
        self.assertEqual(entries(reg), 0)
        self.assertEqual(reg.get(n - 1).index, n - 1)


@unittest.skipUnless(C_API, 'weakref callbacks asking the registry need cached()')
class WeakrefCallbacks(unittest.TestCase):
    def test_callback_asking_for_the_dying_wrappers_native_gets_a_new_wrapper(self):
        reg = registry.Registry(8)
        seen = []

        def callback(_ref):
            self.assertIsNone(_ref())
            seen.append(reg.get(5))        # the native whose wrapper is dying
            seen.append(reg.get(5).index)  # and asked again: the new one, cached

        w = reg.get(5)
        old_id = id(w)
        ref = weakref.ref(w, callback)
        del w
        self.assertEqual(len(seen), 2)
        fresh = seen[0]
        self.assertEqual(seen[1], 5)
        self.assertEqual(fresh.index, 5)
        # The dying wrapper's end removed its own entry, not the callback's new one.
        self.assertIs(reg.cached(5), fresh)
        self.assertIs(reg.get(5), fresh)
        self.assertEqual(entries(reg), 1)
        del ref, old_id

    def test_callback_of_a_wrapper_in_a_garbage_cycle_may_resurrect_it(self):
        reg = registry.Registry(8)
        seen = []
        w = reg.get(6)
        w.payload = w  # a cycle: only the cycle collector frees it
        ref = weakref.ref(w, lambda _r: seen.append(reg.get(6)))
        del w
        gc.collect()
        # The callback ran while the cycle was garbage, before anything was freed: the wrapper
        # was still cached, and handing it out resurrected it (CPython keeps it alive).
        self.assertEqual(len(seen), 1)
        self.assertEqual(seen[0].index, 6)
        self.assertIs(reg.get(6), seen[0])
        self.assertIs(seen[0].payload, seen[0])
        seen[0].payload = None
        seen.clear()
        self.assertIsNone(reg.cached(6))
        self.assertEqual(entries(reg), 0)
        del ref

    def test_callbacks_making_and_dropping_other_wrappers(self):
        reg = registry.Registry(64)
        made = []

        def callback(_ref):
            for i in range(32, 64):  # a burst of inserts while the dying entry goes
                made.append(reg.get(i))
            del made[::2]

        held = [reg.get(i) for i in range(32)]
        refs = [weakref.ref(w, callback) for w in held]
        held.clear()
        self.assertEqual(entries(reg), len({id(w) for w in made}))
        for w in made:
            self.assertIs(reg.get(w.index), w)
        del refs


@unittest.skipUnless(C_API, 'payloads are the C API modules\'')
class Cycles(unittest.TestCase):
    def test_cycles_between_wrappers_are_collected_and_leave_the_map(self):
        reg = registry.Registry(10)
        a, b = reg.get(0), reg.get(1)
        a.payload, b.payload = b, a
        ra, rb = weakref.ref(a), weakref.ref(b)
        del a, b
        self.assertEqual(entries(reg), 2)  # alive until the collector finds the cycle
        gc.collect()
        self.assertIsNone(ra())
        self.assertIsNone(rb())
        self.assertIsNone(reg.cached(0))
        self.assertEqual(entries(reg), 0)

    def test_cycles_through_the_registry_are_collected(self):
        reg = registry.Registry(4)
        w = reg.get(2)
        w.payload = reg
        reg.on_create = lambda i: reg  # registry -> callable -> registry
        rw = weakref.ref(w)
        del w, reg
        gc.collect()
        self.assertIsNone(rw())


@unittest.skipUnless(C_API, 'on_create is the C API modules\'')
class FactoryRunsPythonCode(unittest.TestCase):
    def test_a_wrapper_made_meanwhile_wins_and_the_loser_removes_nothing(self):
        reg = registry.Registry(10)
        inner = []
        nested = []

        def hook(i):
            if i == 7 and not nested:
                nested.append(i)
                inner.append(reg.get(7))  # the native gets a wrapper while the outer one is made

        reg.on_create = hook
        before = reg.stats()
        outer = reg.get(7)
        self.assertIs(outer, inner[0])
        # The outer factory's wrapper was dropped; its tp_dealloc did not remove the winner.
        self.assertIs(reg.cached(7), outer)
        if PALRT:
            self.assertEqual(reg.stats()['races_lost'] - before['races_lost'], 1)
        self.assertEqual(entries(reg), 1)

    def test_a_factory_that_raises_caches_nothing(self):
        reg = registry.Registry(4)

        def hook(i):
            raise KeyError(i)

        reg.on_create = hook
        with self.assertRaises(KeyError):
            reg.get(1)
        self.assertIsNone(reg.cached(1))
        self.assertEqual(entries(reg), 0)
        reg.on_create = None
        self.assertEqual(reg.get(1).index, 1)
        with self.assertRaises(TypeError):
            reg.on_create = 5

    def test_a_hook_that_replaces_itself(self):
        reg = registry.Registry(4)

        def hook(i):
            reg.on_create = None  # drops the last reference to this function while it runs

        reg.on_create = hook
        del hook
        self.assertEqual(reg.get(0).index, 0)
        self.assertIsNone(reg.on_create)


class Threads(unittest.TestCase):
    def test_threads_see_one_wrapper_per_native(self):
        # Python threads switch between bytecodes and wherever the GIL is released (the hook):
        # every call on the cache still holds the GIL. Reports what was lost or duplicated.
        reg = registry.Registry(16)
        if C_API:
            reg.on_create = lambda i: None
        mismatches, errors = [], []
        start = threading.Barrier(4)

        def run(seed):
            try:
                start.wait()
                held = {}
                for k in range(3000):
                    i = (k * 7 + seed) % 16
                    w = reg.get(i)
                    if reg.get(i) is not w or w.index != i:
                        mismatches.append((seed, k, i))
                    if k % 3 == 0:
                        held[i] = w
                    elif k % 5 == 0:
                        held.pop(i, None)
            except Exception as e:  # reported below, with the others
                errors.append(repr(e))

        threads = [threading.Thread(target=run, args=(s,)) for s in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        self.assertEqual(mismatches, [], f'{len(mismatches)} lookups returned another wrapper')
        if C_API:
            gc.collect()
            self.assertEqual(entries(reg), 0, 'entries left for wrappers no one holds')


class NativeLoops(unittest.TestCase):
    def test_the_benchmark_loops_leave_the_map_as_they_found_it(self):
        reg = registry.Registry(256)
        kept = reg.get(9)
        self.assertIsInstance(reg.bench_hit(5000, 3), float)
        self.assertIsInstance(reg.bench_churn(5000, 4), float)
        self.assertIs(reg.get(9), kept)
        if C_API:
            self.assertEqual(entries(reg), 1)


@unittest.skipUnless(DEBUG_INTERPRETER and C_API, 'sys.gettotalrefcount() is the debug interpreter\'s')
class References(unittest.TestCase):
    def test_no_reference_is_leaked_or_lost(self):
        def workload():
            reg = registry.Registry(32)
            inner = []

            def hook(i):
                if i == 3 and not inner:
                    inner.append(None)
                    inner.append(reg.get(i))  # a race lost by the outer get()

            reg.on_create = hook
            held = [reg.get(i) for i in range(32)]
            for k in range(2000):
                held[k % 32] = None
                held[k % 32] = reg.get(k % 32)
                reg.cached(k % 7)
            a = reg.get(5)
            a.payload = a
            del a, held, inner, hook
            reg.on_create = None
            reg.bench_churn(1000)
            reg.bench_hit(1000)

        def references_after(runs):
            gc.collect()
            before = sys.gettotalrefcount()
            for _ in range(runs):
                workload()
            gc.collect()
            return sys.gettotalrefcount() - before

        references_after(2)  # warm-up: caches the interpreter fills once
        # The measurement itself costs a constant few references; a leak grows with the runs.
        once, ten_times = references_after(1), references_after(10)
        self.assertEqual(ten_times - once, 0, f'{(ten_times - once) / 9:.1f} references leaked per run')

if __name__ == '__main__':
    print(f'{MODULE} ({registry.variant}) under {sys.executable}'
          f'{" (debug interpreter)" if DEBUG_INTERPRETER else ""}', file=sys.stderr)
    unittest.main(verbosity=2)
