// SPDX-License-Identifier: MIT
#include "palrt/pal/thread_factory.hpp"

#include <pthread.h>

#include <atomic>
#include <boost/thread/thread.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>

#include "palrt/pal/internal/cancellation.hpp"
#include "palrt/pal/internal/fork_generation.hpp"
#include "palrt/pal/internal/registration_policy.hpp"
#include "palrt/pal/internal/thread_factory_access.hpp"
#include "palrt/pal/process_barrier.hpp"
#include "palrt/pal/wake_event.hpp"

namespace palrt::pal {
using internal::registration_policy;

namespace {

// relaxed: the policy is set once, before the first thread, by the thread that starts it.
std::atomic<registration_policy> policy{registration_policy::before_first_thread};

// Fault injection (tests): starts left before the injected failure, and its errno.
std::atomic<int> fault_countdown{-1};
std::atomic<int> fault_error{0};

// The host's hooks (set_thread_hooks), read by each start under the lock.
std::mutex hooks_lock;
thread_hooks hooks;

int injected_failure() noexcept {
  if (fault_error.load(std::memory_order_relaxed) == 0) return 0;
  if (fault_countdown.fetch_sub(1, std::memory_order_relaxed) != 0) return 0;
  return fault_error.exchange(0, std::memory_order_relaxed);
}

void ensure_registration_for_thread_start() {
  if (process_barrier_state_if_initialized()) return;
  switch (policy.load(std::memory_order_relaxed)) {
    case registration_policy::before_first_thread:
      initialize_process_barrier(registration_mode::register_membarrier);
      break;
    case registration_policy::never: initialize_process_barrier(registration_mode::skip_membarrier); break;
    case registration_policy::deferred: break;  // the host registers after its threads exist, on purpose
  }
}

}  // namespace

thread_hooks set_thread_hooks(const thread_hooks& replacement) noexcept {
  std::lock_guard lock(hooks_lock);
  thread_hooks old = hooks;
  hooks = replacement;
  return old;
}

registration_policy internal::set_registration_policy(registration_policy p) noexcept {
  return policy.exchange(p, std::memory_order_relaxed);
}

registration_policy internal::current_registration_policy() noexcept { return policy.load(std::memory_order_relaxed); }

thread_start_error::thread_start_error(int error, const std::string& thread_name)
    : std::system_error(error, std::generic_category(), "cannot start thread '" + thread_name + "'"),
      name_(thread_name) {}

namespace {

// The event a thread sets as it exits, so that join_for can wait with a timeout without
// Boost.Chrono. Held by the thread and by its managed_thread (a detached thread may outlive
// it); the last to let go frees it.
struct exit_event {
  wake_event event;
  std::atomic<int> holders{2};
  void release() noexcept {
    // acq_rel: whichever frees it sees the other's last use of it.
    if (holders.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

// The thread sets its exit_event from a pthread key's destructor: glibc runs those when the
// thread function has returned, after the C++ thread_local destructors. So the event comes
// after Boost.Thread has marked the thread done under its own mutex (Boost's join waits for
// that, then calls pthread_join) and after every thread_local the body made. Set at the end
// of the body instead, it woke a joiner while the thread was still on its way out, into
// Boost's mutex held: one more sleep and wake-up of the joiner for every join (a cross-CPU
// wake-up costs tens of microseconds on a virtual machine), and a thread_local destructor
// that blocked escaped join_for's timeout. A key, not a thread_local: registering a
// thread_local's destructor allocates (__cxa_thread_atexit), and the thread's first malloc
// makes it an arena of its own (three system calls and a page fault at every start).
//
// No key (the process used up PTHREAD_KEYS_MAX) or no room for its value: the thread sets
// the event at the end of its body instead, as correct, one wake-up slower.
struct exit_key {
  pthread_key_t key{};
  bool made = false;
  exit_key() noexcept {
    made = pthread_key_create(&key, [](void* value) {
             auto* e = static_cast<exit_event*>(value);
             e->event.set();
             e->release();
           }) == 0;
  }
};

// Tests (thread_factory_access::refuse_exit_key): no key, as if none could be made.
std::atomic<bool> exit_key_refused{false};

// Whether the key's destructor will set `e` when the calling thread exits.
bool set_at_exit(exit_event* e) noexcept {
  static const exit_key k;
  if (exit_key_refused.load(std::memory_order_relaxed)) return false;
  return k.made && pthread_setspecific(k.key, e) == 0;
}

}  // namespace

struct managed_thread::impl {
  boost::thread thread;
  exit_event* finished = new exit_event;
  // The process the thread runs in: in a child forked since, it does not exist.
  internal::fork_stamp started;

  impl() = default;
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() { finished->release(); }
};

namespace {

// A joinable managed_thread about to be lost (thread_factory.hpp says why this is fatal).
[[noreturn]] void terminate_joinable(const std::string& name, const char* what) noexcept {
  std::fprintf(stderr, "palrt: managed_thread '%s' %s while joinable: join() or detach() it first\n", name.c_str(),
               what);
  std::terminate();
}

}  // namespace

// Lets go of a thread handle about to be lost: a thread of the parent, in a fork()ed child,
// is neither joined nor detached: glibc has put its thread record in the child's cache of
// free stacks, for the child's next pthread_create(), and pthread_join() or pthread_detach()
// on it would act on that new thread. The handle is kept instead, untouched, until the child
// exits. A joinable thread of this process is fatal (thread_factory.hpp).
void managed_thread::let_go(std::unique_ptr<impl>& handle, const std::string& name, const char* what) noexcept {
  if (!handle) return;
  if (handle->started.forked()) {
    try {
      internal::keep_until_exit(std::shared_ptr<impl>(std::move(handle)));
    } catch (...) {
      (void)handle.release();  // no memory for the control block: lose it rather than touch it
    }
    return;
  }
  if (handle->thread.joinable()) terminate_joinable(name, what);
}

managed_thread::managed_thread() noexcept = default;
managed_thread::managed_thread(managed_thread&&) noexcept = default;
managed_thread& managed_thread::operator=(managed_thread&& other) noexcept {
  if (this != &other) {
    let_go(impl_, name_, "assigned over");
    impl_ = std::move(other.impl_);
    name_ = std::move(other.name_);
  }
  return *this;
}

managed_thread::~managed_thread() { let_go(impl_, name_, "destroyed"); }

bool managed_thread::joinable() const noexcept { return impl_ && !impl_->started.forked() && impl_->thread.joinable(); }

// A join is neither a cancellation point nor a Boost interruption point (cancellation.hpp):
// Boost's join waits on a boost::condition_variable and then in pthread_join(), both of which
// would otherwise be, whenever the thread is still on its way out (its thread_local
// destructors, Boost's at_thread_exit functions); unwound there, the join would be left half
// done and the owner (a stop(), a noexcept shutdown phase) with it.
bool managed_thread::join_for(std::chrono::nanoseconds timeout) {
  if (!joinable()) return true;
  const internal::cancellation_disabled no_cancellation;
  const boost::this_thread::disable_interruption no_interruption;
  // A thread asked to stop usually finishes within tens of microseconds: stay awake for it.
  if (!impl_->finished->event.wait_for(timeout, std::chrono::microseconds(200))) return false;
  // The thread is past its thread_locals and Boost's exit (exit_event): this returns
  // promptly, glibc's last steps are left (without the key, see exit_key: unless the
  // thread's way out runs long).
  impl_->thread.join();
  return true;
}

void managed_thread::join() {
  if (!joinable()) return;
  const internal::cancellation_disabled no_cancellation;  // as in join_for()
  const boost::this_thread::disable_interruption no_interruption;
  impl_->thread.join();
}

void managed_thread::detach() noexcept {
  if (joinable()) impl_->thread.detach();
}

managed_thread start_thread(const thread_options& options, std::function<void()> body) {
  // The first start may register for membarrier and count the process's threads in /proc,
  // whose reads are cancellation points (cancellation.hpp). The new thread starts with
  // cancellation enabled whatever its creator's state (POSIX).
  const internal::cancellation_disabled no_cancellation;
  ensure_registration_for_thread_start();
  if (int err = injected_failure()) throw thread_start_error(err, options.name);

  managed_thread result;
  result.impl_ = std::make_unique<managed_thread::impl>();
  result.name_ = options.name.substr(0, 15);  // the kernel keeps 15 characters plus NUL
  boost::thread::attributes attributes;
  if (options.stack_size) attributes.set_stack_size(options.stack_size);
  thread_hooks started_with;
  {
    std::lock_guard lock(hooks_lock);
    started_with = hooks;
  }
  try {
    result.impl_->thread = boost::thread(
        attributes, [name = result.name_, finished = result.impl_->finished, body = std::move(body), started_with] {
          // Named from inside: no race with a thread that exits before its creator names it.
          pthread_setname_np(pthread_self(), name.c_str());
          struct signal_on_exit {
            exit_event* finished;
            const thread_hooks& hooks;
            bool at_exit = set_at_exit(finished);
            // The exit hook before the event: a joiner that wakes on it sees the thread gone
            // from the host's collector too.
            ~signal_on_exit() {
              if (hooks.on_exit) hooks.on_exit(hooks.context);
              if (at_exit) return;
              finished->event.set();
              finished->release();
            }
          } guard{finished, started_with};
          if (started_with.on_start) started_with.on_start(started_with.context);
          body();
        });
  } catch (const boost::system::system_error& e) {
    result.impl_->finished->release();  // the thread's hold: it never ran
    throw thread_start_error(e.code().value() ? e.code().value() : EAGAIN, options.name);
  } catch (...) {
    result.impl_->finished->release();  // as above (Boost allocates before it starts the thread)
    throw;
  }
  return result;
}

namespace internal {
void thread_factory_access::inject_thread_start_failure(int successful_starts_first, int error) noexcept {
  fault_countdown.store(successful_starts_first, std::memory_order_relaxed);
  fault_error.store(error, std::memory_order_relaxed);
}

void thread_factory_access::refuse_exit_key(bool refuse) noexcept {
  exit_key_refused.store(refuse, std::memory_order_relaxed);
}
}  // namespace internal

}  // namespace palrt::pal
