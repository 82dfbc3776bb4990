#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""palrt from a host's side: what `meson install` installs, and only that.

The suite's own tests compile against the source tree's include paths, where every
internal/ header is in reach; a host has only the installed copy. So this test installs the
build's headers into a temporary DESTDIR (`meson install --destdir --tags devel`: exactly
what an install ships, never a list kept here) and compiles against that tree alone:

1. every installed header on its own (a translation unit that includes just it), with
   -Wall -Wextra -Wshadow -Wuseless-cast -Werror, since a host may build with those; an
   installed header that includes a header that is not installed (an internal/ one) is
   reported by name before anything is compiled;
2. <palrt/palrt.hpp>, the umbrella header, includes every installed header except the
   detail/ ones and the host adapters' (palrt/<runtime>/, compiled with that runtime's
   headers: --adapter) (it is compiled by 1);
3. every installed C++ header includes palrt/pal/config.hpp first, and compiled as C++17
   gives what a host sees: palrt's one-line `#error "palrt needs C++20 ..."` first, then
   only the fatal stop that follows it, no other error (compiled as a host compiles, without
   -Wfatal-errors, which would hide the errors after the first) (the C headers under
   palrt/core/ are C, and exempt);
4. every code example compiles, with the same warnings:
   - README.md and every docs/*.md: each ```cpp fenced block;
   - installed headers: a comment line `// Example:` starts an example, and its code is the
     comment lines right after it indented by at least three spaces (`//   code`), with bare
     `//` lines between them as blank lines; the first other line (prose, code, a bare `//`
     that no more example code follows) ends it. Other indented comment text (tables, lists)
     is prose, never compiled. Elided code is written as a comment (`// ...`,
     `/* ... */`), so an example is valid C++ as it stands.

   Examples are fragments. Each becomes one translation unit: `#include <palrt/palrt.hpp>`,
   `using namespace std::chrono_literals;`, then the example's top-level parts (lines at the
   example's own column 0 that start with `#`, struct/class/union/enum/template/namespace/
   extern/typedef, or a function definition such as `int main() {`, each up to where its
   braces close), then the rest as the body of a function. A header's examples read as if
   written inside that header's namespace (the function body starts with
   `using namespace palrt; using namespace palrt::<ns>;`). What the prose around an example
   has in hand, the function takes as parameters, each only when the example uses the name
   and does not declare it: CONTEXT below (`rt` from bootstrap(), `s` its services, a
   `collector`, a `table`, a handle `h`, a `native` identity, a `pid`, a dispatch `policy`,
   a `child_process`), and `sync` as palrt::sync. Compiler messages point at the document's
   or the header's own lines (#line). An example stops where the prose takes over, so a value
   it computes is often left unused: examples alone get -Wno-unused-variable (and
   -Wno-unused-but-set-variable); the headers themselves are checked with every warning;
5. every result palrt marks [[nodiscard]] (NODISCARD below: bootstrap(), the waits, try_get,
   what only its result says has failed) is refused when dropped: a call that drops it does
   not compile with -Werror, and fails for that reason only, while the same call that keeps
   it (the control) compiles. A case whose header is not installed (an adapter whose runtime
   was not found) is skipped.

Usage (meson runs it; tests/meson.build):
  check_installed_headers.py --meson MESON... --build-root B --source-root S --cxx CXX...
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WARNINGS = ['-Wall', '-Wextra', '-Wshadow', '-Wuseless-cast', '-Werror']
GUARD_MESSAGE = '#error "palrt needs C++20 (compile with -std=c++20 or later)"'
# The fatal #include after the #error (palrt/pal/config.hpp), which stops the compiler there.
STOP_MESSAGE = 'palrt: compilation stopped at the error above'

# The results that must not be dropped: (what, setup, call). Each case compiles `setup` and
# then `call;` (must fail: the result is dropped), and `setup` and then the call kept in a
# variable (must compile). Names of CONTEXT may be used as in examples. `thing` is an object
# type of the embedded collector.
THING = 'struct thing : palrt::gc::object {};'
EVENT = 'palrt::sync::event_handle e(palrt::sync::event_reset::manual);'
CACHE = 'palrt::interop::identity_cache cache(collector);'
SERVICE = 'palrt::sync::service_thread st("t", [](const std::atomic<bool>&) {});'
CPYTHON = '#include <palrt/cpython/identity_cache.hpp>\npalrt::cpython::identity_cache c;'
NODISCARD = [
    ('bootstrap()', '', 'palrt::startup::bootstrap()'),
    ('pal::start_thread', '', 'palrt::pal::start_thread({"t", 0}, [] {})'),
    ('managed_thread::join_for', 'palrt::pal::managed_thread t;', 't.join_for(1s)'),
    ('wake_event::try_wait', 'palrt::pal::wake_event w;', 'w.try_wait()'),
    ('wake_event::wait_for', 'palrt::pal::wake_event w;', 'w.wait_for(1ms)'),
    ('membarrier::query (membarrier::result)', '', 'palrt::pal::membarrier::query()'),
    ('membarrier::register_private_expedited', '', 'palrt::pal::membarrier::register_private_expedited()'),
    ('membarrier::private_expedited', '', 'palrt::pal::membarrier::private_expedited()'),
    ('membarrier::get_registrations', '', 'palrt::pal::membarrier::get_registrations()'),
    ('pal::parse_barrier_strategy', '', 'palrt::pal::parse_barrier_strategy("signal")'),
    ('pal::measure_flush_cost_ns', '', 'palrt::pal::measure_flush_cost_ns()'),
    ('gc::make_object', THING, 'palrt::gc::make_object<thing>(collector)'),
    ('gc::ref::adopt', THING, 'palrt::gc::ref<thing>::adopt(nullptr)'),
    ('gc::ref::detach', THING + '\npalrt::gc::ref<thing> r;', 'r.detach()'),
    ('gc::static_ref_cast', THING, 'palrt::gc::static_ref_cast<palrt::gc::object>(palrt::gc::ref<thing>())'),
    ('gc::strong_handle::lock', THING + '\npalrt::gc::strong_handle<thing> sh;', 'sh.lock()'),
    ('gc::weak_handle::try_get', THING + '\npalrt::gc::weak_handle<thing> wh;', 'wh.try_get()'),
    ('gc::dependent_handle::try_get_primary', THING + '\npalrt::gc::dependent_handle<thing, thing> dh;',
     'dh.try_get_primary()'),
    ('gc::dependent_handle::try_get_secondary', THING + '\npalrt::gc::dependent_handle<thing, thing> dh;',
     'dh.try_get_secondary()'),
    ('gc::collector::synchronize', '', 'collector.synchronize()'),
    ('gc::finalizer_thread::wait_for_pending_finalizers', '', 's.finalizer().wait_for_pending_finalizers()'),
    ('gc::finalizer_thread::stop', '', 's.finalizer().stop()'),
    ('gc::handle_table::allocate', '', 'table.allocate(palrt::gc::handle_kind::strong, nullptr)'),
    ('interop::identity_cache::get_or_create', THING + '\n' + CACHE,
     'cache.get_or_create<thing>(native, [&](const void*) { return palrt::gc::make_object<thing>(collector); })'),
    ('interop::identity_cache::try_get', THING + '\n' + CACHE, 'cache.try_get<thing>(native)'),
    ('interop::identity_cache::find', CACHE, 'cache.find(native)'),
    ('interop::identity_cache::get_or_create_outbound', THING + '\n' + CACHE + '\npalrt::gc::ref<thing> managed;',
     'cache.get_or_create_outbound(managed, [&](const auto&) { return palrt::gc::make_object<thing>(collector); })'),
    ('interop::identity_cache::try_get_outbound', THING + '\n' + CACHE + '\npalrt::gc::ref<thing> managed;',
     'cache.try_get_outbound(*managed)'),
    ('interop::dispatch_cache::find',
     'palrt::interop::dispatch_cache d;\nconst palrt::interop::type_descriptor* type = nullptr;',
     'd.find(*type, palrt::interop::interface_id{})'),
    ('sync::wait_one (sync::wait_result)', EVENT, 'palrt::sync::wait_one(e)'),
    ('sync::wait_any', EVENT, 'palrt::sync::wait_any({e}, 1s)'),
    ('sync::wait_all', EVENT, 'palrt::sync::wait_all({e}, 1s)'),
    ('sync::sync_manager::open_process', '', 's.sync_manager().open_process(pid)'),
    ('sync::sync_manager::stop', '', 's.sync_manager().stop()'),
    ('sync::service_thread::stop', SERVICE, 'st.stop()'),
    ('sync::service_thread::join', SERVICE, 'st.join()'),
    ('boehm::collector_binding::allocate_traced',
     '#include <palrt/boehm/collector_binding.hpp>\npalrt::boehm::collector_binding b(table);', 'b.allocate_traced(8)'),
    ('cpython::identity_cache::find', CPYTHON, 'c.find(native)'),
    ('cpython::identity_cache::get_or_create', CPYTHON,
     'c.get_or_create(native, [](const void*) -> PyObject* { return nullptr; })'),
]

# name -> parameter declaration. Types are spelled through palrt's own declarations where
# they might change (the runtime bootstrap() returns), so the test follows the API.
CONTEXT = {
    'rt': 'decltype(palrt::startup::bootstrap())& rt',
    's': 'std::remove_reference_t<decltype(palrt::startup::bootstrap()->services())>& s',
    'collector': 'palrt::gc::collector& collector',
    'table': 'palrt::gc::handle_table& table',
    'h': 'palrt::gc::handle h',
    'native': 'const void* native',
    'pid': 'pid_t pid',
    'policy': 'palrt::interop::dispatch_policy policy',
    'child_process': 'palrt::sync::process_handle child_process',
}

TOP_LEVEL_START = re.compile(
    r'^(#|(struct|class|union|enum|template|namespace|extern|typedef)\b'
    r'|(?!(if|else|for|while|switch|return|do)\b)[\w:<>,]+[\s*&]+\w+\s*\([^=;]*\)\s*(const\s*)?(noexcept\s*)?\{?\s*$)')
NOT_DECLARATION_BEFORE = {'return', 'co_return', 'throw', 'delete', 'case', 'else', 'goto', 'co_await', 'co_yield'}


class Failure(Exception):
    pass


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def stage(meson, build_root, destdir):
    """Installs the headers (and the rest of the devel tag) exactly as `meson install` does."""
    r = run(meson + ['install', '-C', str(build_root), '--destdir', str(destdir), '--no-rebuild',
                     '--tags', 'devel', '--quiet'])
    if r.returncode != 0:
        raise Failure('meson install into the staging DESTDIR failed:\n' + r.stdout)
    options = {o['name']: o['value'] for o in json.loads(
        run(meson + ['introspect', str(build_root), '--buildoptions']).stdout)}
    includedir = Path(options['prefix']) / options['includedir']  # absolute includedir wins
    staged = destdir / includedir.relative_to(includedir.anchor)
    if not (staged / 'palrt').is_dir():
        raise Failure(f'meson install put no palrt/ under {staged}')
    return staged


def strip_comments_and_strings(code):
    code = re.sub(r'/\*.*?\*/', ' ', code, flags=re.S)
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    code = re.sub(r"'(\\.|[^'\\])*'", "''", code)
    return re.sub(r'//[^\n]*', '', code)


def declares(code, name):
    for m in re.finditer(r'(\b\w+\b|[>\]])\s*[&*]*\s*\b' + re.escape(name) + r'\s*[=({;\[),]', code):
        if m.group(1) not in NOT_DECLARATION_BEFORE:
            return True
    return False


def split_snippet(lines):
    """[(lineno, text)] -> (top-level lines, body lines), each keeping its line numbers."""
    top, body = [], []
    depth, in_top = 0, False
    for lineno, text in lines:
        bare = strip_comments_and_strings(text)
        if not in_top and depth == 0 and TOP_LEVEL_START.match(text):
            if text.startswith('#'):
                top.append((lineno, text))
                continue
            in_top = True
        (top if in_top else body).append((lineno, text))
        depth += bare.count('{') - bare.count('}')
        if in_top and depth == 0 and re.search(r'[;}]\s*$', bare):
            in_top = False
    return top, body


def build_tu(snippet):
    top, body = split_snippet(snippet['lines'])
    body_code = strip_comments_and_strings('\n'.join(t for _, t in body))
    params = [decl for name, decl in CONTEXT.items()
              if re.search(r'(?<![\w.>:])' + re.escape(name) + r'\b', body_code)
              and not declares(body_code, name)]
    prologue = []
    if snippet['namespace']:
        prologue.append(f'using namespace palrt; using namespace palrt::{snippet["namespace"]};')
    elif re.search(r'(?<![\w:])sync::', body_code) and 'using namespace palrt;' not in body_code:
        prologue.append('namespace sync = palrt::sync;')
    where = snippet['file']
    out = ['#include <palrt/palrt.hpp>', '#include <memory>', '#include <type_traits>',
           '#include <sys/types.h>', 'using namespace std::chrono_literals;']
    for lineno, text in top:
        out += [f'#line {lineno} "{where}"', text]
    out.append('#line 1 "<example wrapper>"')
    out.append('[[maybe_unused]] static void palrt_example(' +
               ', '.join('[[maybe_unused]] ' + p for p in params) + ') {')
    out += prologue
    for lineno, text in body:
        out += [f'#line {lineno} "{where}"', text]
    out += ['#line 2 "<example wrapper>"', '}', '']
    return '\n'.join(out)


def markdown_snippets(document, shown):
    snippets, lines, start = [], None, 0
    for n, text in enumerate(document.read_text().splitlines(), 1):
        if lines is None and re.match(r'^```cpp\s*$', text):
            lines, start = [], n + 1
        elif lines is not None and re.match(r'^```\s*$', text):
            snippets.append({'file': shown, 'line': start, 'lines': lines, 'namespace': None})
            lines = None
        elif lines is not None:
            lines.append((n, text))
    return snippets


def header_snippets(path, shown):
    text = path.read_text().splitlines()
    ns = re.search(r'^namespace palrt::(\w+)', '\n'.join(text), re.M)
    snippets, i = [], 0
    while i < len(text):
        if re.match(r'^\s*// Example:', text[i]):
            lines, j = [], i + 1
            while j < len(text):
                if re.match(r'^\s*//   ', text[j]):
                    lines.append((j + 1, re.sub(r'^\s*//   ', '', text[j])))
                elif (re.match(r'^\s*//\s*$', text[j]) and j + 1 < len(text)
                      and re.match(r'^\s*//   ', text[j + 1])):
                    lines.append((j + 1, ''))  # a blank line inside the example
                else:
                    break
                j += 1
            if not lines:
                raise Failure(f'{shown}:{i + 1}: "// Example:" with no code after it (code lines are `//   code`)')
            snippets.append({'file': shown, 'line': i + 2, 'lines': lines,
                             'namespace': ns.group(1) if ns else None})
            i = j
        else:
            i += 1
    return snippets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--meson', nargs='+', required=True)
    ap.add_argument('--build-root', required=True, type=Path)
    ap.add_argument('--source-root', required=True, type=Path)
    ap.add_argument('--cxx', nargs='+', required=True)
    ap.add_argument('--jobs', type=int, default=os.cpu_count() or 2)
    # The host adapters' headers (palrt/<runtime>/) need their runtime's headers: given as
    # RUNTIME=FLAG (repeatable), e.g. cpython=-isystem/usr/include/python3.11.
    ap.add_argument('--adapter', action='append', default=[], metavar='RUNTIME=FLAG')
    a = ap.parse_args()
    adapter_flags = {}
    for spec in a.adapter:
        runtime, _, flag = spec.partition('=')
        adapter_flags.setdefault(f'palrt/{runtime}/', []).append(flag)

    def flags_of(header):
        return next((f for prefix, f in adapter_flags.items() if header.startswith(prefix)), [])

    t0 = time.monotonic()
    problems = []

    with tempfile.TemporaryDirectory(prefix='palrt-installed-headers-') as tmp_name:
        tmp = Path(tmp_name)
        staged = stage(a.meson, a.build_root, tmp / 'destdir')
        inc = ['-I' + str(staged)]
        installed = sorted(str(p.relative_to(staged)) for p in (staged / 'palrt').rglob('*') if p.is_file())
        installed_set = set(installed)
        # Where each installed header comes from, for messages that name the file to edit.
        source_of = {}
        for base in sorted(a.source_root.glob('*/include')) + sorted(a.source_root.glob('*/*/include')):
            for p in base.rglob('*'):
                rel = str(p.relative_to(base))
                if rel in installed_set:
                    source_of.setdefault(rel, str(p.relative_to(a.source_root)))

        # 1a. Includes of headers that were not installed, named before the compiler finds them.
        for h in installed:
            for n, line in enumerate((staged / h).read_text().splitlines(), 1):
                m = re.match(r'\s*#\s*include\s*[<"](palrt/[^>"]+)[>"]', line)
                if m and m.group(1) not in installed_set:
                    problems.append(f'{source_of.get(h, h)}:{n}: installed header {h} includes {m.group(1)}, '
                                    f'which is not installed (internal/ headers never are): a host cannot compile it')

        # 3a. The guard comes first in every public C++ header, so that no other header (one of
        # palrt's, or the standard library's) can fail before it under C++17.
        for h in installed:
            if h.endswith('.hpp') and h != 'palrt/pal/config.hpp':
                first = re.search(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', (staged / h).read_text(), re.M)
                if not first or first.group(1) != 'palrt/pal/config.hpp':
                    problems.append(f'{source_of.get(h, h)}: the first #include of {h} is '
                                    f'{first.group(1) if first else "missing"}, not palrt/pal/config.hpp '
                                    f'(the C++20 check every public C++ header includes first)')

        # 2. The umbrella names every public header.
        umbrella = staged / 'palrt' / 'palrt.hpp'
        if not umbrella.is_file():
            problems.append('palrt/palrt.hpp is not installed')
        else:
            named = set(re.findall(r'^\s*#\s*include\s*[<"](palrt/[^>"]+)[>"]', umbrella.read_text(), re.M))
            for h in installed:
                # An adapter's header needs its runtime's headers, which a host of palrt
                # alone does not have: the umbrella leaves it out.
                if h != 'palrt/palrt.hpp' and '/detail/' not in h and h not in named and not flags_of(h):
                    problems.append(f'palrt/palrt.hpp does not include the public header {h} '
                                    f'(startup/include/palrt/palrt.hpp)')

        jobs = []  # (kind: header, c++17 or example; label; source text; flags)

        def add(kind, label, source, std, extra=()):
            jobs.append((kind, label, source, ['-std=' + std, '-fsyntax-only'] + WARNINGS + list(extra) + inc))

        for h in installed:
            add('header', h, f'#include <{h}>\n', 'c++20', flags_of(h))
            if h.endswith('.hpp'):
                # As a host compiles: every error the compiler prints counts (palrt's stops it).
                add('c++17', h, f'#include <{h}>\n', 'c++17', flags_of(h))

        # The README and the documents it leads to: an example moved from one to the other is
        # still compiled.
        documents = [a.source_root / 'README.md'] + sorted((a.source_root / 'docs').glob('*.md'))
        snippets = []
        for doc in documents:
            snippets += markdown_snippets(doc, str(doc.relative_to(a.source_root)))
        for h in installed:
            if h.endswith('.hpp'):
                snippets += [dict(sn, header=h) for sn in header_snippets(staged / h, source_of.get(h, h))]
        for sn in snippets:
            try:
                add('example', sn, build_tu(sn), 'c++20',
                    ['-Wno-unused-variable', '-Wno-unused-but-set-variable'] + flags_of(sn.get('header', '')))
            except Failure as e:
                problems.append(str(e))

        # 5. Each [[nodiscard]] result dropped, and kept (the control).
        for what, setup, call in NODISCARD:
            header = next((m.group(1) for m in re.finditer(r'#include <([^>]+)>', setup)), '')
            if header and header not in installed_set:
                continue  # an adapter that was not built
            lines = setup.split('\n') if setup else []
            for kind, last in (('dropped', f'{call};'), ('kept', f'[[maybe_unused]] auto&& kept = {call};')):
                sn = {'file': f'nodiscard case {what}', 'line': 1, 'namespace': None,
                      'lines': list(enumerate(lines + [last], 1)), 'what': what, 'call': call}
                add('nodiscard-' + kind, sn, build_tu(sn), 'c++20',
                    ['-Wno-unused-variable', '-Wno-unused-but-set-variable'] + flags_of(header))

        def compile_one(job):
            kind, label, source, flags = job
            fd, path = tempfile.mkstemp(suffix='.cpp', dir=tmp)
            with os.fdopen(fd, 'w') as f:
                f.write(source)
            r = run(a.cxx + flags + [path], cwd=tmp)
            return job, r

        # Headers first: when <palrt/palrt.hpp> itself does not compile, every example fails the
        # same way, and repeating that error once per example would only bury it.
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            results += pool.map(compile_one, [j for j in jobs if j[0] != 'example' and not j[0].startswith('nodiscard-')])
            umbrella_ok = any(j[0] == 'header' and j[1] == 'palrt/palrt.hpp' and r.returncode == 0
                              for j, r in results)
            if umbrella_ok:
                examples = [j for j in jobs if j[0] == 'example' or j[0].startswith('nodiscard-')]
                # Every example starts with #include <palrt/palrt.hpp>: precompiled once, with
                # the examples' flags, it saves re-parsing all of palrt for each (GCC takes
                # palrt/palrt.hpp.gch from the first -I directory, before the header itself).
                # Built from a file that includes the header, not from the header (its
                # #pragma once would warn as a main file). Without it, examples just run slower.
                pch_dir = tmp / 'pch'
                (pch_dir / 'palrt').mkdir(parents=True)
                (tmp / 'pch_source.hpp').write_text('#include <palrt/palrt.hpp>\n')
                pch = run(a.cxx + [f for f in examples[0][3] if f != '-fsyntax-only'] +
                          ['-x', 'c++-header', str(tmp / 'pch_source.hpp'),
                           '-o', str(pch_dir / 'palrt' / 'palrt.hpp.gch')], cwd=tmp) if examples else None
                if pch is not None and pch.returncode == 0:
                    examples = [(k, l, src, ['-I' + str(pch_dir)] + flags) for k, l, src, flags in examples]
                results += pool.map(compile_one, examples)
            for job, r in results:
                kind, label, source, flags = job
                if kind == 'header' and r.returncode != 0:
                    missing = re.findall(r'fatal error: (palrt/[^:]+): No such file', r.stdout)
                    why = f' (it includes {", ".join(missing)}, which is not installed)' if missing else ''
                    problems.append(f'{source_of.get(label, label)}: the installed header {label} does not compile '
                                    f'on its own{why}:\n{r.stdout}')
                elif kind == 'c++17':
                    errors = [l for l in r.stdout.splitlines() if re.search(r'(^| )(fatal )?error: ', l)]
                    if r.returncode == 0 or not errors or GUARD_MESSAGE not in errors[0]:
                        first = errors[0] if errors else '(it compiled)'
                        problems.append(f'{source_of.get(label, label)}: a C++17 host including {label} gets as first '
                                        f'error\n  {first}\ninstead of {GUARD_MESSAGE} '
                                        f'(include "palrt/pal/config.hpp" first)')
                    elif len(errors) != 2 or STOP_MESSAGE not in errors[1]:
                        others = [l for l in errors[1:] if STOP_MESSAGE not in l]
                        problems.append(f'{source_of.get(label, label)}: a C++17 host including {label} gets after '
                                        f'palrt\'s #error ' + (f'{len(others)} more error(s):\n  ' + '\n  '.join(others[:5])
                                        if others else f'no stop ({STOP_MESSAGE}): the compiler went on'))
                elif kind == 'nodiscard-dropped':
                    errors = [l for l in r.stdout.splitlines() if re.search(r'(^| )(fatal )?error: ', l)]
                    if r.returncode == 0 or not errors or not all('nodiscard' in l for l in errors):
                        why = 'it compiled' if r.returncode == 0 else 'it failed for another reason:\n' + r.stdout
                        problems.append(f'[[nodiscard]]: dropping the result of {label["what"]} '
                                        f'(`{label["call"]};`) must not compile with -Werror, but {why}')
                elif kind == 'nodiscard-kept' and r.returncode != 0:
                    problems.append(f'[[nodiscard]] control: keeping the result of {label["what"]} '
                                    f'does not compile, so its case proves nothing:\n{r.stdout}')
                elif kind == 'example' and r.returncode != 0:
                    numbered = '\n'.join(f'  {n:4} | {t}' for n, t in label['lines'])
                    problems.append(f'{label["file"]}:{label["line"]}: this example does not compile:\n{numbered}\n'
                                    f'compiler:\n{r.stdout}')
            if not umbrella_ok:
                problems.append('examples not compiled: each includes <palrt/palrt.hpp>, '
                                'which does not compile (above)')

    counts = {k: sum(1 for j in jobs if j[0] == k) for k in ('header', 'c++17', 'example', 'nodiscard-dropped')}
    summary = (f'{counts["header"]} installed headers, {counts["c++17"]} C++17 guards, '
               f'{counts["example"]} examples ({len(snippets)} found), '
               f'{counts["nodiscard-dropped"]} dropped [[nodiscard]] results, {time.monotonic() - t0:.1f} s')
    if problems:
        print('\n\n'.join(problems))
        print(f'\nFAILED: {len(problems)} problem(s); {summary}')
        return 1
    print(f'ok: {summary}')
    return 0


if __name__ == '__main__':
    try:
        sys.exit(main())
    except Failure as e:
        print(e)
        sys.exit(1)
