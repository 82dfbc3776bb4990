// SPDX-License-Identifier: MIT
// After fork(): what palrt's objects do in a child process.
//
// A child of a multithreaded process has one thread, the one that called fork(). The
// parent's other threads do not exist there, and whatever they were doing stays half done
// in the child's copy of memory: a lock one of them held stays held for good, a read
// section one of them had open is never closed, a work item queued for a service thread is
// never run. palrt's contract in the child:
//
// - What palrt made before fork() belongs to the parent: a runtime and its services (handle
//   table, collector, finalizer thread, sync manager), and identity caches and services made
//   on their own. In the child such an object is dead. A call that would take one of its
//   locks, wait for one of its threads or wait for a grace period on its behalf fails at
//   once with a clear error: forked_child_error (below), or the component's own "not
//   running" result where it has one (sync_manager: sync_error(ESHUTDOWN);
//   wait_for_pending_finalizers: not_running). What needs none of that (a handle's target, a
//   lock-free cache hit, counters) still works on the child's copy. Each public header's
//   "After fork()" paragraph says which calls are which. Destroying such an object in the
//   child returns at once: it waits for nothing, and whatever a lock or a missing thread
//   might still guard is kept allocated, untouched, until the child exits.
// - The child may bootstrap() a runtime of its own, whether the parent's runtime is alive or
//   not; that runtime and everything the child makes are the child's and work as in any
//   process. (A child that only execs needs none of this.)
// - Process-wide state is the child's and works: the process barrier (a membarrier
//   registration lives in the address space, which the kernel copies at fork() and clears
//   only at exec, so the child is registered as its parent was), read sections (the records
//   of the parent's other threads are released in the child, so grace periods never wait for
//   sections nobody will close), the thread factory, waits on palrt's waitable objects (the
//   parent's other threads count as exited: a mutex one of them owned is abandoned to the
//   child's first wait on it, their thread handles are signalled, and a wait one of them was
//   blocked in takes nothing from the child's threads).
//   palrt's process-wide locks (the barrier's, the handle tables' registry, the waitable
//   objects' lock, ...) are held across fork(): fork() waits until their holders release
//   them, which they do within microseconds (the barrier's set-up, once per process, within a
//   membarrier registration), so a child never inherits one held.
// - This relies on pthread_atfork() handlers, which fork() runs. A child made without them
//   (vfork(), posix_spawn(), _Fork(), a raw clone()) may only exec or _exit.
//
// Cost: none on fast paths. An object records the fork generation it was made in (bumped in
// each child by the handler), and the slow paths that would take its locks compare it with
// the current one: a relaxed load of one word.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <stdexcept>
#include <string>

namespace palrt::pal {

// Thrown by a call on an object palrt made before fork() when it is made in the child (see
// above). what(): "palrt: <operation>: used in a child after fork(); ...".
class forked_child_error : public std::logic_error {
 public:
  // `operation` names the call, e.g. "collector::collect".
  explicit forked_child_error(const std::string& operation);
};

}  // namespace palrt::pal
