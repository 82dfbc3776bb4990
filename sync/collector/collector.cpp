// SPDX-License-Identifier: MIT
// The embedded collector: collect() and the grace-period reclamation (collector.hpp has the
// life cycle; read_section.hpp and reader_epoch.cpp the grace period).
//
// Ownership of an object's `next_` link (one list at a time):
//   dead lists (the dying thread pushes onto its own, collect() takes them all:
//   dead_lists.cpp)
//     -> finalization queue (collect() pushes, the finalizer takes)
//       -> finalized list (the finalizer pushes, collect() takes it all)
//     -> retired batch (collect() only) -> freed.
// A resurrected object leaves the lists; it comes back through a dead list when its count
// reaches zero again.
#include "palrt/gc/collector.hpp"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "palrt/pal/fork.hpp"
#include "palrt/pal/internal/cancellation.hpp"
#include "palrt/pal/internal/keep_until_exit.hpp"
#include "palrt/gc/internal/collector_state.hpp"
#include "palrt/gc/internal/grace_period.hpp"

namespace palrt::gc {

namespace internal {

namespace {

// This thread is inside collect() of this collector (a destructor or finalizer-free path
// calling collect() again returns at once instead of deadlocking).
constinit thread_local collector_state* collecting = nullptr;
// Objects of that collector that died on this thread during the current round.
constinit thread_local std::size_t deaths_caused = 0;

std::uint8_t state_of(void* target) noexcept {
  // relaxed: states of objects this collection condemns were written by this thread; the
  // others are only compared with those two values.
  return detail::object_access::state(*static_cast<object*>(target)).load(std::memory_order_relaxed);
}

}  // namespace

void collector_state::push(std::atomic<object*>& list, object* first, object* last) noexcept {
  object* head = list.load(std::memory_order_relaxed);
  do {
    last->next_ = head;
    // release: the taker (acquire exchange) sees the objects as the pusher left them.
  } while (!list.compare_exchange_weak(head, first, std::memory_order_release, std::memory_order_relaxed));
}

void collector_state::destroy(object* o) noexcept { delete o; }

void collector_state::prepend(chain_ref& c, object* o) noexcept {
  o->next_ = c.first;
  if (!c.last) c.last = o;
  c.first = o;
  ++c.n;
}

void collector_state::append(chain_ref& c, object* o) noexcept {
  o->next_ = nullptr;
  if (c.last)
    c.last->next_ = o;
  else
    c.first = o;
  c.last = o;
  ++c.n;
}

void note_death(collector_state& c) noexcept {
  if (collecting == &c) ++deaths_caused;
}

namespace {

object* reversed(object* list) noexcept {
  object* result = nullptr;
  while (list) {
    object* next = detail::object_access::next(*list);
    collector_state::link(list, result);
    result = list;
    list = next;
  }
  return result;
}

std::size_t destroy_batch(const retired_batch& b) noexcept {
  std::size_t freed = 0;
  for (object* o = b.first; o;) {
    object* next = detail::object_access::next(*o);
    collector_state::destroy(o);
    ++freed;
    o = next;
  }
  return freed;
}

// Frees every retired batch no reader can still see. Under collect_lock, which every
// retirement (run_collection) holds too: no batch joins c.retired between the scan and the
// walk below. (Were one to, oldest_reader_epoch() would still not pass it.)
// `leave`: batches not to free, those of threads that free their own (see the sweep in
// run_collection).
template <class Leave>
std::size_t reclaim(collector_state& c, Leave&& leave) {
  if (c.retired.empty()) return 0;
  const std::uint64_t oldest = oldest_reader_epoch();
  std::size_t freed = 0;
  auto safe = std::stable_partition(c.retired.begin(), c.retired.end(),
                                    [&](const retired_batch& b) { return b.tag >= oldest || leave(b); });
  for (auto it = safe; it != c.retired.end(); ++it) freed += destroy_batch(*it);
  c.retired.erase(safe, c.retired.end());
  c.freed.fetch_add(freed, std::memory_order_relaxed);
  c.awaiting_grace.fetch_sub(freed, std::memory_order_relaxed);
  return freed;
}
std::size_t reclaim(collector_state& c) {
  return reclaim(c, [](const retired_batch&) { return false; });
}

// An automatic collection of one thread's own dead (collect_now): the batches it retired
// that no reader can still see, taken out of c.retired (under collect_lock) for the caller to
// free once it dropped the lock. At most `picked.size()`; the others wait for the next.
// A grace period's barrier interrupts every CPU running the process (tens of us on a VM),
// so this one scans only when a batch of an earlier collection is still waiting: a batch
// just retired waits for the next collection, by which time another thread's scan has often
// passed it (known_safe_epoch). So a thread alone scans every other collection, and threads
// that collect at once share their scans.
std::size_t pick_own_reclaimable(collector_state& c, const dead_list_record* own, std::uint64_t just_retired,
                                 std::array<retired_batch, 4>& picked) {
  std::size_t n = 0;
  const auto pick = [&](std::uint64_t safe_below) {
    std::erase_if(c.retired, [&](const retired_batch& b) {
      if (b.owner != own || b.tag >= safe_below || n == picked.size()) return false;
      picked[n++] = b;
      return true;
    });
  };
  pick(known_safe_epoch());
  bool older_waiting = false;
  for (const retired_batch& b : c.retired) older_waiting = older_waiting || (b.owner == own && b.tag < just_retired);
  if (older_waiting && n < picked.size()) pick(oldest_reader_epoch());
  return n;
}

// What a collection takes (collect_now chooses for the automatic ones).
enum class collection_scope {
  // every list: collect(), the collector's destructor
  everything,
  // the calling thread's own list (`own`), in one round; the batches it retired are freed
  // after the lock is dropped, so that two threads' automatic collections free their own
  // objects at once, each on its own CPU
  own,
  // `own` and the lists their owners do not collect themselves (take_unattended), or
  // everything if the shared list is not empty
  unattended,
};

// `wait`: false for the automatic collections, which an allocating thread runs only if no
// other collection is running (allocation never waits for a collection).
collection_report run_collection(collector_state& c, bool wait, collection_scope what = collection_scope::everything,
                                 dead_list_record* own = nullptr) {
  collection_report report;
  // A fork()ed child: the lock may be held for good, and the finalizer is gone. The automatic
  // collections just do not happen there (an allocation never waits for one anyway).
  if (c.made.forked()) {
    if (wait) throw pal::forked_child_error("collector::collect");
    return report;
  }
  if (collecting == &c) return report;  // from a destructor this collection runs
  std::unique_lock lock(c.collect_lock, std::defer_lock);
  if (wait)
    lock.lock();
  else if (!lock.try_lock())
    return report;
  struct scope {
    explicit scope(collector_state& c) : previous(collecting) { collecting = &c, deaths_caused = 0; }
    ~scope() { collecting = previous; }
    collector_state* previous;
  } in_collection(c);

  collector_state::chain_ref deferred;
  std::uint64_t just_retired = UINT64_MAX;  // the tag of this collection's first batch
  // A round takes what is dead now; another round runs only for deaths this one caused.
  while (report.rounds < 64) {
    ++report.rounds;
    deaths_caused = 0;
    // Room for this round's batch first: once the dead lists are taken, nothing may throw.
    c.retired.reserve(c.retired.size() + 1);
    collector_state::chain_ref to_retire, to_finalize;
    // In the order dead_lists.cpp states: each thread's objects in the order they died (which
    // keeps their wait in the queue fair), thread after thread. take_all() hands the lists
    // over in the reverse order; prepending restores it.
    const auto visit = [&](object* list) {
      for (object* o = list; o;) {
        object* next = detail::object_access::next(*o);
        auto& state = detail::object_access::state(*o);
        auto& flags = detail::object_access::flags(*o);
        // acquire: pairs with the finalizer's release of a resurrected object (finished()).
        if (state.load(std::memory_order_acquire) == finalizing) {
          // Resurrected and dead again while its finalize() still runs: the finalizer thread
          // still uses it. Take it up again after the finalizer is done with it.
          collector_state::prepend(deferred, o);
        } else if (flags.load(std::memory_order_relaxed) & finalization_registered) {
          // Finalized once: reregister_for_finalize() is needed for another time.
          flags.fetch_and(static_cast<std::uint8_t>(~finalization_registered), std::memory_order_relaxed);
          state.store(f_reachable, std::memory_order_relaxed);
          collector_state::prepend(to_finalize, o);
        } else {
          state.store(condemned, std::memory_order_relaxed);
          collector_state::prepend(to_retire, o);
        }
        o = next;
      }
    };
    if (what == collection_scope::own) {
      c.lists.take_one(*own, visit);
      // relaxed: a hint for the other threads' sweeps (dead_lists.hpp).
      own->collected_by_owner.store(true, std::memory_order_relaxed);
    } else {
      if (what == collection_scope::unattended && c.lists.shared_empty())
        c.lists.take_unattended(*own, visit);
      else
        c.lists.take_all(visit);
      for (object* o = reversed(c.finalized_list.exchange(nullptr, std::memory_order_acquire)); o;) {
        object* next = detail::object_access::next(*o);
        detail::object_access::state(*o).store(condemned, std::memory_order_relaxed);
        collector_state::append(to_retire, o);
        o = next;
      }
    }
    report.found_dead += to_retire.n + to_finalize.n;

    // The host-GC order (handle_table.hpp): short weak, finalization, long weak and dependent.
    if (to_retire.n + to_finalize.n > 0) {
      report.weak_short_cleared += c.table.sweep_weak(handle_kind::weak_short, [](void* t) {
        const std::uint8_t s = state_of(t);
        return s != condemned && s != f_reachable;
      });
      if (to_finalize.n > 0) {
        c.queued_total.fetch_add(to_finalize.n, std::memory_order_relaxed);
        report.queued_for_finalization += to_finalize.n;
        c.finalization.push(to_finalize.first, to_finalize.last, to_finalize.n);
      }
      const auto not_condemned = [](void* t) { return state_of(t) != condemned; };
      report.weak_long_cleared += c.table.sweep_weak(handle_kind::weak_long, not_condemned);
      report.dependent_cleared += c.table.sweep_weak(handle_kind::dependent, not_condemned, [](void*, void* secondary) {
        // The reference the dependent handle held; may make the secondary dead (a death
        // this round caused: another round collects it).
        if (secondary) detail::object_access::release(*static_cast<object*>(secondary));
      });
    }
    if (to_retire.n > 0) {
      // After the sweeps: nothing leads to these objects any more (B'' in reader_epoch.cpp).
      const std::uint64_t tag = retire_epoch();
      just_retired = std::min(just_retired, tag);
      c.retired.push_back({tag, to_retire.first, to_retire.n, what == collection_scope::own ? own : nullptr});
      c.awaiting_grace.fetch_add(to_retire.n, std::memory_order_relaxed);
      report.retired += to_retire.n;
    }
    if (what == collection_scope::own) break;  // deaths it caused are on its own list: the next collection's
    if (what == collection_scope::unattended) {
      // Not the batches of threads that free their own (pick_own_reclaimable): freed here they
      // would be freed on this CPU, away from the cache that holds them, into this thread's
      // memory cache, which the thread that made them then misses.
      report.freed += reclaim(c, [own](const retired_batch& b) {
        return b.owner && b.owner != own && b.owner->collected_by_owner.load(std::memory_order_relaxed);
      });
    } else {
      report.freed += reclaim(c);
    }
    if (deaths_caused == 0) break;
  }
  if (what == collection_scope::unattended) c.lists.clear_owner_marks();
  if (deferred.n > 0) c.lists.push_shared(deferred.first, deferred.last);
  c.collections.fetch_add(1, std::memory_order_relaxed);
  if (what == collection_scope::own) {
    std::array<retired_batch, 4> picked;
    const std::size_t n = pick_own_reclaimable(c, own, just_retired, picked);
    lock.unlock();
    // Between the pick (under the lock) and the frees (after it): no other collection can
    // free the picked batches (they left c.retired under the lock), and a reader that opens a
    // section meanwhile cannot reach them (their tags are below a scan's verdict, which does
    // not expire: reader_epoch.cpp). Still inside the collection for this thread
    // (`collecting`): a destructor's collect() returns at once, as under the lock.
    std::size_t freed = 0;
    for (std::size_t i = 0; i < n; ++i) freed += destroy_batch(picked[i]);
    c.freed.fetch_add(freed, std::memory_order_relaxed);  // relaxed: counters
    c.awaiting_grace.fetch_sub(freed, std::memory_order_relaxed);
    report.freed += freed;
  }
  report.awaiting_grace_period = c.awaiting_grace.load(std::memory_order_relaxed);
  return report;
}

// Counted; the first one reported on stderr. Never throws: a drain must always finish (its
// request count would otherwise refuse every later one).
void report_inline_exception(collector_state& c, std::exception_ptr error) noexcept {
  // relaxed: a counter.
  if (c.inline_finalizer_exceptions.fetch_add(1, std::memory_order_relaxed) != 0) return;
  std::string what;
  const char* text = "an exception that could not be described";  // describe() ran out of memory
  try {
    what = finalization_access::describe(error);
    text = what.c_str();
  } catch (...) {
  }
  std::fprintf(stderr,
               "palrt: a finalizer run by collect() threw (%s); collect() goes on (further ones are only counted)\n",
               text);
}

// Runs what is queued for finalization while no finalizer thread consumes the queue; the
// number of finalizers it ran. One thread runs the queue at a time, as the finalizer thread
// would (finalizers do not run concurrently with each other, but for the one a finalizer
// thread that missed its stop deadline may still be running): a caller that finds a drain
// running leaves its objects to that drain and returns, and the drain goes round again for
// every request that came in meanwhile. A finalizer that collects is such a caller.
//   Caller: push (collect(), under the queue's lock); requests.fetch_add (C).
//   Drain:  take_all ... run ...; requests.compare_exchange(seen -> 0) (C'), again on failure.
// A request before C' in the counter's order makes C' fail, and C' (acquire on failure)
// reads it after its release (C): the caller's push happens before the drain's next
// take_all, so no object queued before a request is left behind. A request after C' reads 0
// and makes its caller the next drain; C's acquire, with C''s release on success, orders
// its finalizers after the previous drain's (one at a time, as on one thread).
std::size_t finalize_inline(collector_state& c) {
  // Inside a collection of c on this thread (a destructor it runs called collect()): the
  // outer collect() runs them, once it has dropped its lock.
  if (collecting == &c || c.finalization.has_consumer()) return 0;
  if (c.inline_finalization_requests.fetch_add(1, std::memory_order_acq_rel) != 0) return 0;  // C
  std::size_t ran = 0;
  std::uint32_t seen = 1;
  do {
    std::size_t n = 0;
    // A finalizer thread started meanwhile takes over what is queued from here on.
    while (!c.finalization.has_consumer()) {
      object* o = c.finalization.take_all(n);
      if (!o) break;
      collector_state::chain_ref done;
      while (o) {
        object* next = finalization_access::next(*o);  // before finished() relinks o
        std::exception_ptr error;
        const auto result = finalization_access::run(*o, error);
        if (error) report_inline_exception(c, error);
        finalization_access::finished(*o, result, done);
        o = next;
      }
      finalization_access::hand_back(c, done);
      c.finalized_inline.fetch_add(n, std::memory_order_relaxed);  // relaxed: a counter
      c.finalization.complete(n);
      ran += n;
    }
  } while (!c.inline_finalization_requests.compare_exchange_strong(seen, 0, std::memory_order_acq_rel,
                                                                   std::memory_order_acquire));  // C'
  return ran;
}

}  // namespace

void collect_now(collector_state& c, dead_list_record& mine) {
  const pal::internal::cancellation_disabled no_cancellation;  // as in collector::collect()
  // What died on this thread only (its own objects, mostly: freed on the CPU that made them,
  // at the same time as other threads free theirs). Every `sweep_every`-th time, also the
  // lists of threads that do not collect their own (they never allocate, or have exited), so
  // that what dies there is not left waiting for an explicit collect(); on a thread without a
  // list of its own, everything. Not the lists of threads that collect their own: taking
  // them held two threads making and dropping objects to 0.96x-1.48x one thread's throughput
  // (palrt-bench finalizer, create-drop, a 2-vCPU VM: their objects were freed on the other
  // CPU, away from the cache that held them, into the other thread's memory cache, and the
  // sweep held the lock the other thread's collections then skipped), against 1.89x-2.41x
  // without (docs/BENCHMARKS.md).
  constexpr std::uint32_t sweep_every = 64;
  collection_scope what = collection_scope::own;
  if (&mine == &c.lists.shared())
    what = collection_scope::everything;
  else if (++mine.automatic_collections % sweep_every == 0)
    what = collection_scope::unattended;
  if (run_collection(c, false, what, &mine).rounds > 0) (void)finalize_inline(c);
}

// --- finalization_queue ---

void finalization_queue::set_consumer(void (*wake)(void*), void* context) {
  std::lock_guard lock(lock_);
  wake_ = wake;
  wake_context_ = context;
  consumer_ = true;
}

void finalization_queue::clear_consumer() {
  {
    std::lock_guard lock(lock_);
    wake_ = nullptr;
    wake_context_ = nullptr;
    consumer_ = false;
  }
  completed_changed_.notify_all();
}

bool finalization_queue::has_consumer() const {
  std::lock_guard lock(lock_);
  return consumer_;
}

void finalization_queue::push(object* first, object* last, std::size_t n) {
  std::lock_guard lock(lock_);
  collector_state::link(last, nullptr);
  if (tail_)
    collector_state::link(tail_, first);
  else
    head_ = first;
  tail_ = last;
  queued_ += n;
  enqueued_.fetch_add(n, std::memory_order_release);
  // Under the lock: once clear_consumer() returned, no wake-up of the old consumer runs.
  if (consumer_) wake_(wake_context_);
}

object* finalization_queue::take_all(std::size_t& n) {
  std::lock_guard lock(lock_);
  object* first = head_;
  n = queued_;
  head_ = tail_ = nullptr;
  queued_ = 0;
  return first;
}

object* finalization_queue::take_one(bool& emptied) {
  std::lock_guard lock(lock_);
  object* first = head_;
  if (!first) {
    emptied = false;
    return nullptr;
  }
  head_ = detail::object_access::next(*first);
  if (!head_) tail_ = nullptr;
  --queued_;
  emptied = queued_ == 0;
  return first;
}

void finalization_queue::complete(std::size_t n) {
  bool wake;
  {
    std::lock_guard lock(lock_);
    completed_.fetch_add(n, std::memory_order_release);
    wake = waiters_ > 0;
  }
  if (wake) completed_changed_.notify_all();
}

bool finalization_queue::wait_until_completed(std::uint64_t target, std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(lock_);
  ++waiters_;
  completed_changed_.wait_until(lock, deadline,
                                [&] { return completed_.load(std::memory_order_relaxed) >= target || !consumer_; });
  --waiters_;
  return completed_.load(std::memory_order_relaxed) >= target;
}

// --- finalization_access ---

finalization_access::outcome finalization_access::run(object& o, std::exception_ptr& error) noexcept {
  // relaxed: the object came through the queue's lock from the collector.
  o.state_.store(finalizing, std::memory_order_relaxed);
  o.flags_.fetch_and(static_cast<std::uint8_t>(~resurrected), std::memory_order_relaxed);
  outcome result = outcome::finalized;
  try {
    static_cast<finalizable&>(o).finalize();
  } catch (...) {
    error = std::current_exception();
    result = outcome::threw;
  }
  if (o.flags_.load(std::memory_order_relaxed) & resurrected) return outcome::resurrected;
  return result;
}

void finalization_access::finished(object& o, outcome result, collector_state::chain_ref& done) noexcept {
  if (result == outcome::resurrected) {
    o.flags_.fetch_and(static_cast<std::uint8_t>(~resurrected), std::memory_order_relaxed);
    // release: pairs with collect()'s acquire of the state; after this store the object is
    // the host's again, and this thread does not touch it any more.
    o.state_.store(live, std::memory_order_release);
    return;
  }
  o.state_.store(finalized, std::memory_order_relaxed);
  collector_state::append(done, &o);
}

void finalization_access::hand_back(collector_state& c, collector_state::chain_ref& done) noexcept {
  if (done.n > 0) collector_state::push(c.finalized_list, done.first, done.last);
  done = {};
}

std::string finalization_access::describe(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

}  // namespace internal

collector::collector(handle_table& table, collector_options options)
    : state_(std::make_shared<internal::collector_state>(table, options)) {
  table.claim_for_collector(state_.get());  // std::logic_error if another collector sweeps it
}

collector::~collector() {
  const pal::internal::cancellation_disabled no_cancellation;  // as in collect()
  internal::collector_state& c = *state_;
  if (c.made.forked()) {
    // A fork()ed child: collecting would take locks that may be held for good. Objects the
    // child still holds, or drops later, keep pushing onto this state: it stays.
    pal::internal::keep_until_exit(state_);
    return;
  }
  // Queued for a finalizer that no longer runs: they go as if finalized. Also those that the
  // collections below queue (finalizable objects that a destructor or a cleared dependent
  // handle leaves dead), so this repeats with each round.
  auto abandon_finalization = [&c] {
    std::size_t n = 0;
    object* o = c.finalization.take_all(n);
    if (!o) return;
    object* last = o;
    for (object* next; (next = detail::object_access::next(*last));) last = next;
    for (object* p = o; p; p = detail::object_access::next(*p))
      detail::object_access::state(*p).store(internal::finalized, std::memory_order_relaxed);
    internal::collector_state::push(c.finalized_list, o, last);
  };
  for (int i = 0; i < 64; ++i) {
    abandon_finalization();
    // Not collect(): a collector being destroyed runs no finalizer (see collector.hpp).
    const collection_report r = internal::run_collection(c, true);
    if (r.found_dead == 0 && r.queued_for_finalization == 0 && c.lists.empty() &&
        c.finalized_list.load(std::memory_order_acquire) == nullptr)
      break;
  }
  const bool drained = synchronize(std::chrono::seconds(2));
  const collector_counters n = counters();
  const std::uint64_t alive = n.objects_created - n.objects_freed;
  if (alive > 0 || !drained) {
    std::fprintf(stderr,
                 "palrt: collector destroyed with %" PRIu64 " objects not freed (%" PRIu64
                 " still referenced by the host or being finalized, %" PRIu64
                 " awaiting a grace period); they stay allocated\n",
                 alive, alive - n.awaiting_grace_period, n.awaiting_grace_period);
    // Kept for the life of the process: a reference the host drops later pushes onto this
    // state's dead lists, which must stay valid memory (nothing will free those objects).
    pal::internal::keep_until_exit(state_);
  }
  c.table.release_collector(state_.get());
}

collection_report collector::collect() {
  // Not a cancellation point (pal/internal/cancellation.hpp): a grace period's barrier may
  // read /proc (the signal strategy), and the finalizers run here are host code whose own
  // cancellation points must not act inside finalize_inline(): its `catch (...)` would
  // swallow the unwind, which glibc answers by aborting the process.
  const pal::internal::cancellation_disabled no_cancellation;
  collection_report report = internal::run_collection(*state_, true);
  report.finalized_inline = internal::finalize_inline(*state_);  // with collect_lock dropped
  return report;
}

bool collector::synchronize(std::chrono::nanoseconds timeout) {
  internal::collector_state& c = *state_;
  if (c.made.forked()) throw pal::forked_child_error("collector::synchronize");
  const pal::internal::cancellation_disabled no_cancellation;  // its sleep would be one
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int attempt = 0;; ++attempt) {
    {
      if (internal::collecting == &c) return c.retired.empty();
      std::lock_guard lock(c.collect_lock);
      internal::reclaim(c);
      if (c.retired.empty()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    internal::reader_wait_backoff(attempt);  // a reader is inside a section
  }
}

handle_table& collector::handles() noexcept { return state_->table; }

collector_counters collector::counters() const noexcept {
  const internal::collector_state& c = *state_;
  collector_counters n;
  n.objects_created = c.lists.created();
  n.objects_freed = c.freed.load(std::memory_order_relaxed);
  n.collections = c.collections.load(std::memory_order_relaxed);
  n.queued_for_finalization = c.queued_total.load(std::memory_order_relaxed);
  n.finalization_pending = c.finalization.enqueued() - c.finalization.completed();
  n.awaiting_grace_period = c.awaiting_grace.load(std::memory_order_relaxed);
  n.finalized_inline = c.finalized_inline.load(std::memory_order_relaxed);
  n.inline_finalizer_exceptions = c.inline_finalizer_exceptions.load(std::memory_order_relaxed);
  return n;
}

}  // namespace palrt::gc
