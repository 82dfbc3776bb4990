// SPDX-License-Identifier: MIT
// The one way palrt starts a thread.
//
// start_thread() makes sure the process registered for membarrier before the new thread
// exists (as musl does at its first pthread_create), so "register while single-threaded"
// holds by construction rather than by convention. (palrt's own benchmarks reproduce the old,
// slow orderings by turning that off, through a header that is not installed.)
//
// Threads run on Boost.Thread, are named (visible in /proc/<pid>/task/<tid>/comm, gdb, perf;
// at most 15 characters, longer names are cut) and can have a chosen stack size.
#pragma once

#include "palrt/pal/config.hpp"  // first: C++20, or one clear #error

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <system_error>

namespace palrt::pal {

struct thread_options {
  std::string name;            // <= 15 characters are kept
  std::size_t stack_size = 0;  // 0 = Boost's default
};

// Thrown when a thread cannot be started; code() holds the errno (EAGAIN under
// RLIMIT_NPROC or when the kernel is out of threads).
class thread_start_error : public std::system_error {
 public:
  thread_start_error(int error, const std::string& thread_name);
  const std::string& thread_name() const noexcept { return name_; }

 private:
  std::string name_;
};

// A started thread. Joining and detaching are explicit, as with std::thread: destroying a
// joinable managed_thread, or assigning another over it, prints which thread it was to stderr
// and calls std::terminate(). Not a silent detach (the thread would run on with nobody
// answering for it), and not a join (nothing asks the thread to stop first, so a join could
// hang the destructor for good). An owner that gives up on a thread that missed its stop
// deadline calls detach() and reports it.
//
// A thread has finished when its body has returned and its way out has run: its
// thread_local destructors and Boost's at_thread_exit functions. join_for()'s timeout covers
// them, so a thread that blocks in one times the join out rather than hanging it. (Unless
// the process had used up its pthread keys when palrt started its first thread: then the
// join waits for them past the timeout.)
//
// Cancellation: join_for() and join() are neither POSIX cancellation points nor Boost
// interruption points, also while the thread is still on its way out; nor is start_thread().
// A pending pthread_cancel() or boost::thread::interrupt() acts at the caller's next
// cancellation or interruption point after the call.
//
// After fork() (palrt/pal/fork.hpp): in the child, a thread started in the parent does not
// exist. Its managed_thread is not joinable there (join_for() returns true at once, join()
// returns), and destroying it neither joins nor detaches it: it keeps the parent's thread
// handle, untouched, until the child exits (glibc reuses the parent's thread records for the
// child's own threads, and joining or detaching one would act on such a thread).
class managed_thread {
 public:
  managed_thread() noexcept;
  managed_thread(managed_thread&&) noexcept;
  // Terminates (see above) if *this is joinable.
  managed_thread& operator=(managed_thread&&) noexcept;
  // Terminates (see above) if joinable.
  ~managed_thread();

  bool joinable() const noexcept;
  // Waits up to `timeout`; true if the thread finished and was joined (or was not joinable),
  // false if it still runs (it stays joinable). Not from the thread itself (it would wait
  // for itself until the timeout).
  [[nodiscard]] bool join_for(std::chrono::nanoseconds timeout);
  // Waits without bound; does nothing if not joinable. Not from the thread itself.
  void join();
  // Lets the thread run on by itself; it is no longer joinable. What it uses must outlive it
  // (give it shared ownership). Does nothing if not joinable.
  void detach() noexcept;
  const std::string& name() const noexcept { return name_; }

 private:
  friend managed_thread start_thread(const thread_options&, std::function<void()>);
  struct impl;
  static void let_go(std::unique_ptr<impl>& handle, const std::string& name, const char* what) noexcept;
  std::unique_ptr<impl> impl_;
  std::string name_;
};

// A host's hooks on palrt's own threads (the finalizer, the sync manager's worker, every
// thread start_thread() makes): on_start runs on the new thread before its body, on_exit on
// it after the body returned, each with `context`. For a host collector that must know every
// thread that may hold its objects: Boehm's GC_register_my_thread / GC_unregister_my_thread,
// a JVM's AttachCurrentThread / DetachCurrentThread. A thread keeps the hooks it started with,
// so each on_exit pairs with its own on_start.
//
// Set them before palrt starts its services (before bootstrap(), or before the first
// service thread): a thread already running was started without them, and says nothing.
// set_thread_hooks() returns the hooks it replaced; {} removes them. The hooks must not
// throw (they are noexcept) and must not start or join palrt threads.
struct thread_hooks {
  void (*on_start)(void* context) noexcept = nullptr;
  void (*on_exit)(void* context) noexcept = nullptr;
  void* context = nullptr;
};
thread_hooks set_thread_hooks(const thread_hooks& hooks) noexcept;

// Starts `body` on a new thread. Throws thread_start_error (nothing was started), or
// barrier_error if the registration the policy requires cannot be set up (nothing was
// started either). An exception escaping `body` terminates the process, as with std::thread:
// a service loop catches what it can handle.
[[nodiscard]] managed_thread start_thread(const thread_options& options, std::function<void()> body);

}  // namespace palrt::pal
