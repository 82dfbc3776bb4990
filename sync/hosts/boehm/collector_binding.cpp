// SPDX-License-Identifier: MIT
// The Boehm collector's hooks around palrt's handle table, identity caches and finalizer
// thread: what runs at each point of a collection is stated in collector_binding.hpp.
#include "palrt/boehm/collector_binding.hpp"

// Threads support in the declarations (GC_register_my_thread ...), without gc.h's macros that
// rename pthread_create and friends in this file.
#define GC_THREADS 1
#define GC_NO_THREAD_REDIRECTS 1
#include <gc/gc.h>
#include <gc/gc_mark.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <span>
#include <stdexcept>

#include "palrt/boehm/thread_registration.hpp"
#include "palrt/pal/thread_factory.hpp"

namespace palrt::boehm {

namespace {

constexpr std::size_t max_caches = 16;

struct binding_state {
  gc::handle_table* table = nullptr;
  std::atomic<identity_cache*> caches[max_caches] = {};
  GC_push_other_roots_proc previous_push = nullptr;
  GC_on_collection_event_proc previous_event = nullptr;
  pal::thread_hooks previous_thread_hooks{};
  // Finalizers served (serve_finalizers), and what Boehm had before.
  std::mutex finalizers_lock;
  std::atomic<gc::finalizer_thread*> served{nullptr};
  GC_finalizer_notifier_proc previous_notifier = nullptr;
  int previous_on_demand = 0;
  // Set at MARK_END, cleared at RECLAIM_END (both on the collecting thread, under Boehm's lock).
  bool gate_closed = false;
  // Set at MARK_START, cleared at PRE_START_WORLD (the same thread, under Boehm's lock): Boehm
  // pushes the roots in between, so push_roots() finding it clear means this binding's event
  // callback is no longer called (see push_roots).
  bool in_mark = false;
  // Counters (relaxed: statistics; the collection's own writes are under Boehm's lock).
  std::atomic<std::uint64_t> collections{0}, weak_short{0}, weak_long{0}, dependent{0}, swept{0}, roots{0},
      notifications{0};
};

// The binding of the process (one: Boehm's hooks are process-wide), for the hooks, which
// Boehm calls with no context.
std::atomic<binding_state*> current{nullptr};

// The traced kind: made once per process (Boehm cannot remove a kind), its objects marked by
// mark_traced. The table whose dependents it traces is the current binding's.
std::once_flag traced_kind_once;
unsigned traced_kind = 0;
std::atomic<gc::handle_table*> traced_table{nullptr};

// Marks a traced object: its words as Boehm's conservative marker would (a traced object is
// scanned like GC_MALLOC's), then the secondaries of its dependent handles, marked and pushed
// so that they are traced in turn. Runs with the world stopped (markers in parallel
// included), or in Boehm's finalization with the world running: the lookup takes no lock
// either way (handle_table::for_each_secondary_of). An object on a free list is cleared but
// for its link word: scanning it is harmless, and no live dependent handle has it as primary
// (the handles of a dead primary were cleared when it died).
struct GC_ms_entry* mark_traced(GC_word* addr, struct GC_ms_entry* top, struct GC_ms_entry* limit, GC_word) {
  const std::size_t words = GC_size(addr) / sizeof(GC_word);
  for (std::size_t i = 0; i < words; ++i)
    top = GC_MARK_AND_PUSH(reinterpret_cast<void*>(addr[i]), top, limit, reinterpret_cast<void**>(addr + i));
  if (const gc::handle_table* table = traced_table.load(std::memory_order_acquire)) {
    table->for_each_secondary_of(
        addr, [&](void* secondary) { top = GC_MARK_AND_PUSH(secondary, top, limit, reinterpret_cast<void**>(addr)); });
  }
  return top;
}

void make_traced_kind() {
  std::call_once(traced_kind_once, [] {
    const unsigned proc = GC_new_proc(mark_traced);
    // Not add_size_to_descriptor: the procedure reads the size itself. Cleared on allocation.
    traced_kind = GC_new_kind(GC_new_free_list(), GC_MAKE_PROC(proc, 0), 0, 1);
  });
}

// Liveness, asked of Boehm under its lock. At MARK_END and RECLAIM_START every target is an
// object that was allocated when it was stored and not found dead since, so its block is
// intact: its mark bit says. By RECLAIM_END Boehm may have freed whole blocks of unmarked
// objects (and merged their headers away), so a dead target is first recognised by no longer
// being the base of an allocated object.
struct marked {
  void operator()(std::span<void* const> objects, std::span<bool> alive) const noexcept {
    for (std::size_t i = 0; i < objects.size(); ++i) alive[i] = GC_is_marked(objects[i]) != 0;
  }
};
struct survived {
  void operator()(std::span<void* const> objects, std::span<bool> alive) const noexcept {
    for (std::size_t i = 0; i < objects.size(); ++i)
      alive[i] = GC_base(objects[i]) == objects[i] && GC_is_marked(objects[i]) != 0;
  }
};

// One line on stderr and abort, with the world stopped: write(2), not stdio, as a stopped
// thread may hold stderr's lock.
[[noreturn]] void die_in_mark(const char* line) noexcept {
  std::size_t left = std::strlen(line);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, line, left);
    if (n <= 0) break;
    line += n;
    left -= static_cast<std::size_t>(n);
  }
  std::abort();
}

void GC_CALLBACK push_roots() {
  binding_state* s = current.load(std::memory_order_acquire);
  if (!s) return;
  // Boehm calls the collection event callback at MARK_START before it pushes any root. If
  // ours did not see it, someone replaced it (GC_set_on_collection_event after the binding)
  // without calling it on: this collection would reclaim the targets of weak handles that no
  // sweep clears, so every weak handle would dangle. Said now, before anything is reclaimed.
  // (Or Boehm was switched to incremental mode since, whose marking pushes roots outside a
  // stopped mark.) GC_is_incremental_mode() takes no lock.
  if (!s->in_mark) {
    if (GC_is_incremental_mode())
      die_in_mark("palrt: boehm::collector_binding: Boehm was switched to incremental mode after the binding was "
                  "made; palrt's handles need a stop-the-world mark\n");
    die_in_mark("palrt: boehm::collector_binding: a collection is marking without the binding's collection event "
                "callback (GC_set_on_collection_event() was called after the binding, and its callback does not "
                "call the one it replaced), so palrt's weak handles would dangle; set yours before the binding "
                "(it calls it first), or have it call what GC_get_on_collection_event() returned\n");
  }
  if (s->previous_push) s->previous_push();
  // Pushed a batch at a time from the stack: GC_push_all_eager marks what the words point to
  // at once, so the buffer is free again when it returns.
  void* batch[256];
  std::size_t n = 0;
  std::uint64_t pushed = 0;
  s->table->for_each_strong([&](void* target) {
    batch[n++] = target;
    if (n == std::size(batch)) {
      GC_push_all_eager(batch, batch + n);
      pushed += n;
      n = 0;
    }
  });
  if (n) GC_push_all_eager(batch, batch + n);
  s->roots.fetch_add(pushed + n, std::memory_order_relaxed);
}

void GC_CALLBACK on_collection_event(GC_EventType event) {
  binding_state* s = current.load(std::memory_order_acquire);
  if (!s) return;
  if (s->previous_event) s->previous_event(event);
  gc::handle_table& table = *s->table;
  switch (event) {
    case GC_EVENT_MARK_START:  // the world is stopped; the roots are pushed next
      s->in_mark = true;
      break;
    case GC_EVENT_PRE_START_WORLD:  // after MARK_END, or after a mark abandoned
      s->in_mark = false;
      break;
    case GC_EVENT_MARK_END: {  // the world is stopped
      table.close_tracking_reads();
      s->gate_closed = true;
      std::uint64_t swept = 0;
      for (auto& slot : s->caches)
        if (identity_cache* cache = slot.load(std::memory_order_acquire)) swept += cache->sweep(marked{});
      s->swept.fetch_add(swept, std::memory_order_relaxed);
      break;
    }
    case GC_EVENT_RECLAIM_START:  // the world runs; finalization has not marked anything yet
      if (s->gate_closed)
        s->weak_short.fetch_add(table.sweep_weak_batched(gc::handle_kind::weak_short, marked{}),
                                std::memory_order_relaxed);
      break;
    case GC_EVENT_RECLAIM_END:  // after finalization
      if (s->gate_closed) {
        s->weak_long.fetch_add(table.sweep_weak_batched(gc::handle_kind::weak_long, survived{}),
                               std::memory_order_relaxed);
        s->dependent.fetch_add(table.sweep_weak_batched(gc::handle_kind::dependent, survived{}),
                               std::memory_order_relaxed);
        s->gate_closed = false;
        table.open_tracking_reads();
        s->collections.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    default: break;
  }
}

void GC_CALLBACK notify_finalizers() {
  binding_state* s = current.load(std::memory_order_acquire);
  if (!s) return;
  s->notifications.fetch_add(1, std::memory_order_relaxed);
  if (gc::finalizer_thread* t = s->served.load(std::memory_order_acquire)) t->signal_work();
}

std::size_t run_ready_finalizers(void*) { return static_cast<std::size_t>(GC_invoke_finalizers()); }

// palrt's threads, registered with Boehm for their lifetime (the thread factory's hooks).
thread_local bool registered_by_hook = false;
void on_thread_start(void*) noexcept {
  if (GC_thread_is_registered()) return;
  GC_stack_base base;
  if (GC_get_stack_base(&base) == GC_SUCCESS && GC_register_my_thread(&base) == GC_SUCCESS) registered_by_hook = true;
}
void on_thread_exit(void*) noexcept {
  if (registered_by_hook) {
    registered_by_hook = false;
    GC_unregister_my_thread();
  }
}

void* GC_CALLBACK install_push(void* state) {
  auto* s = static_cast<binding_state*>(state);
  s->previous_push = GC_get_push_other_roots();
  GC_set_push_other_roots(push_roots);
  return nullptr;
}
void* GC_CALLBACK uninstall_push(void* state) {
  GC_set_push_other_roots(static_cast<binding_state*>(state)->previous_push);
  return nullptr;
}

}  // namespace

collector_binding::collector_binding(gc::handle_table& table) : table_(table) {
  if (GC_is_incremental_mode())
    throw std::logic_error("palrt: boehm::collector_binding: Boehm runs in incremental mode, whose marking runs with "
                           "the world running; palrt's handles need a stop-the-world mark");
  auto* s = new binding_state;
  s->table = &table;
  binding_state* expected = nullptr;
  if (!current.compare_exchange_strong(expected, s, std::memory_order_acq_rel)) {
    delete s;
    throw std::logic_error("palrt: boehm::collector_binding: a binding exists already (one per process: Boehm's "
                           "hooks are process-wide)");
  }
  try {
    table.claim_for_collector(s);
  } catch (...) {
    current.store(nullptr, std::memory_order_release);
    delete s;
    throw;
  }
  make_traced_kind();
  GC_allow_register_threads();
  // No collection while the hooks go in: one that saw roots pushed but no sweeps would leave
  // handles to objects it reclaimed.
  GC_disable();
  GC_call_with_alloc_lock(install_push, s);
  s->previous_event = GC_get_on_collection_event();
  GC_set_on_collection_event(on_collection_event);
  traced_table.store(&table, std::memory_order_release);
  GC_enable();
  s->previous_thread_hooks = pal::set_thread_hooks({&on_thread_start, &on_thread_exit, nullptr});
}

collector_binding::~collector_binding() {
  binding_state* s = current.load(std::memory_order_acquire);
  stop_serving_finalizers();
  pal::set_thread_hooks(s->previous_thread_hooks);
  // GC_disable() waits for a collection in progress (it takes Boehm's lock): none runs
  // while the hooks come out, so none is left with the gate closed.
  GC_disable();
  GC_set_on_collection_event(s->previous_event);
  GC_call_with_alloc_lock(uninstall_push, s);
  traced_table.store(nullptr, std::memory_order_release);
  GC_enable();
  table_.release_collector(s);
  current.store(nullptr, std::memory_order_release);
  delete s;
}

namespace {
void* GC_CALLBACK no_op(void*) { return nullptr; }
}  // namespace

void collector_binding::add_cache(identity_cache& cache) {
  binding_state* s = current.load(std::memory_order_acquire);
  for (auto& slot : s->caches) {
    identity_cache* expected = nullptr;
    // release: the cache's construction before a sweep that finds it.
    if (slot.compare_exchange_strong(expected, &cache, std::memory_order_release, std::memory_order_relaxed)) return;
  }
  throw std::length_error("palrt: boehm::collector_binding::add_cache: more than 16 identity caches");
}

void collector_binding::remove_cache(identity_cache& cache) noexcept {
  binding_state* s = current.load(std::memory_order_acquire);
  for (auto& slot : s->caches) {
    identity_cache* expected = &cache;
    slot.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel, std::memory_order_relaxed);
  }
  // A collection holds Boehm's lock from its mark to its reclaim: once this thread has held
  // it, no sweep that read the slot before it was cleared is still running.
  GC_call_with_alloc_lock(no_op, nullptr);
}

void* collector_binding::allocate_traced(std::size_t bytes) {
  if (!table_.options().index_dependents)
    throw std::logic_error("palrt: boehm::collector_binding::allocate_traced: the handle table was not made with "
                           "index_dependents, so a traced object cannot find its secondaries");
  void* p = GC_generic_malloc(bytes, static_cast<int>(traced_kind));
  if (!p) throw std::bad_alloc();
  return p;
}

bool collector_binding::is_traced(const void* object) noexcept {
  return traced_kind != 0 && GC_get_kind_and_size(object, nullptr) == static_cast<int>(traced_kind);
}

gc::host_finalization_source collector_binding::finalization_source() noexcept {
  return {&run_ready_finalizers, nullptr};
}

void collector_binding::serve_finalizers(gc::finalizer_thread& thread) {
  binding_state* s = current.load(std::memory_order_acquire);
  std::lock_guard guard(s->finalizers_lock);
  if (s->served.load(std::memory_order_relaxed)) {
    s->served.store(&thread, std::memory_order_release);
  } else {
    s->previous_on_demand = GC_get_finalize_on_demand();
    s->previous_notifier = GC_get_finalizer_notifier();
    s->served.store(&thread, std::memory_order_release);
    GC_set_finalizer_notifier(notify_finalizers);
    GC_set_finalize_on_demand(1);
  }
  // What was queued before is the thread's too.
  if (GC_should_invoke_finalizers()) thread.signal_work();
}

void collector_binding::stop_serving_finalizers() noexcept {
  binding_state* s = current.load(std::memory_order_acquire);
  std::lock_guard guard(s->finalizers_lock);
  if (!s->served.load(std::memory_order_relaxed)) return;
  GC_set_finalize_on_demand(s->previous_on_demand);
  GC_set_finalizer_notifier(s->previous_notifier);
  s->served.store(nullptr, std::memory_order_release);
}

binding_counters collector_binding::counters() const noexcept {
  const binding_state* s = current.load(std::memory_order_acquire);
  binding_counters c;
  c.collections = s->collections.load(std::memory_order_relaxed);
  c.weak_short_cleared = s->weak_short.load(std::memory_order_relaxed);
  c.weak_long_cleared = s->weak_long.load(std::memory_order_relaxed);
  c.dependent_cleared = s->dependent.load(std::memory_order_relaxed);
  c.cache_entries_swept = s->swept.load(std::memory_order_relaxed);
  c.strong_roots_pushed = s->roots.load(std::memory_order_relaxed);
  c.finalizer_notifications = s->notifications.load(std::memory_order_relaxed);
  return c;
}

// --- scoped_thread_registration ---

scoped_thread_registration::scoped_thread_registration() {
  if (GC_thread_is_registered()) return;
  GC_stack_base base;
  if (GC_get_stack_base(&base) != GC_SUCCESS)
    throw std::runtime_error("palrt: boehm::scoped_thread_registration: cannot find this thread's stack base");
  const int r = GC_register_my_thread(&base);
  if (r == GC_UNIMPLEMENTED)
    throw std::runtime_error("palrt: boehm::scoped_thread_registration: Boehm does not accept threads it did not "
                             "start (GC_allow_register_threads not called; a collector_binding calls it)");
  registered_ = r == GC_SUCCESS;
}

scoped_thread_registration::~scoped_thread_registration() {
  if (registered_) GC_unregister_my_thread();
}

}  // namespace palrt::boehm
