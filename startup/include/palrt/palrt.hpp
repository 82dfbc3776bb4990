// SPDX-License-Identifier: MIT
// <palrt/palrt.hpp>: every public header of palrt, for a host that would rather include one.
// It lives in startup/, the top layer, because only that layer sees all the others; it is
// installed with startup's headers. Not included: palrt/*/detail/ (the inline fast paths,
// which the headers below include themselves) and the internal/ folders, which are not
// installed. tests/check_installed_headers.py checks that this list stays complete.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

// palrt::pal, the platform: the process-wide barrier (and the membarrier(2) calls under
// it), CPU facts, palrt's thread factory, a wake event, the fork() contract, and CoreCLR's
// PAL spelling of the barrier (FlushProcessWriteBuffers(), in the global namespace).
#include "palrt/core/membarrier_commands.h"
#include "palrt/pal/compat.hpp"
#include "palrt/pal/cpu.hpp"
#include "palrt/pal/fork.hpp"
#include "palrt/pal/membarrier.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/pal/process_copies.hpp"
#include "palrt/pal/thread_factory.hpp"
#include "palrt/pal/wake_event.hpp"

// palrt::gc, the handles and the embedded collector: the handle table (for a host GC),
// objects and ref<T>, typed handles, read sections and retire(), the collector and the finalizer thread.
#include "palrt/gc/collector.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/dependent_promotion.hpp"
#include "palrt/gc/handle_walk.hpp"
#include "palrt/gc/object.hpp"
#include "palrt/gc/owned_handle.hpp"
#include "palrt/gc/read_section.hpp"
#include "palrt/gc/retire.hpp"
#include "palrt/gc/typed_handles.hpp"

// palrt::interop: the identity cache (one wrapper per native identity, and outbound
// wrappers), its host mode (the host's own objects as wrappers), the wrapper_object mixin,
// and the process-wide dispatch tables (vtables).
#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/host_identity_cache.hpp"
#include "palrt/interop/identity_cache.hpp"
#include "palrt/interop/wrapper_object.hpp"

// palrt::sync: Win32-style waitable objects and waits (events, semaphores, mutexes,
// threads, processes), the sync manager's worker (posted and invoked work), and the
// service threads the runtime runs.
#include "palrt/sync/event.hpp"
#include "palrt/sync/handle.hpp"
#include "palrt/sync/mutex.hpp"
#include "palrt/sync/process_handle.hpp"
#include "palrt/sync/semaphore.hpp"
#include "palrt/sync/service_thread.hpp"
#include "palrt/sync/sync_manager.hpp"
#include "palrt/sync/task.hpp"
#include "palrt/sync/thread_handle.hpp"
#include "palrt/sync/wait.hpp"
#include "palrt/sync/work_priority.hpp"

// palrt::startup: bootstrap() (the ordered start of a runtime and its services), the
// preload shim's probe and the system facts it reports.
#include "palrt/startup/bootstrap.hpp"
#include "palrt/startup/preload_probe.hpp"
#include "palrt/startup/system_facts.hpp"
