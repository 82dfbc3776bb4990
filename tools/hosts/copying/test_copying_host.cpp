// SPDX-License-Identifier: MIT
// The copying host's suite: palrt's handle table, finalizer thread and identity cache inside
// a real generational copying collector (heap.hpp), checked against an oracle the test
// computes by its own trace, without palrt's walks:
//   before each collection (world stopped) the oracle traces from the heap's roots, the
//   targets of the test's strong and pinned handles (read slot by slot, as a mutator reads
//   them), every uncondemned object (a young collection keeps the whole old space: what the
//   remembered set must reproduce), and dependents to a fixpoint; then the finalization scan
//   (dead finalizable objects and what they reach) and dependents again. It writes down, per
//   handle the test holds, what the collection must leave in it;
//   after it (world still stopped) every handle is compared:
//     strong, pinned  the same object (its id, in its header, at its new address); a pinned
//                     target at the address it had when it was pinned
//     weak_short      cleared exactly when its target was unreachable before finalization
//     weak_long       cleared exactly when its target was dead after the finalization scan
//                     (so kept while the finalizer is pending, and kept for good when the
//                     finalizer resurrected the object)
//     dependent       cleared with its primary; while the primary lives, the secondary is the
//                     same object and alive
//   and every target's header and payload is read: the spaces the collector evacuated are
//   PROT_NONE, so a stale pointer faults (the fault handler names the space).
// The identity cache is checked by the mutators themselves: a wrapper they still see through
// a weak handle of their own is the one get() returns; once that handle was cleared, get()
// returns a new wrapper. Runs at 4 and 8 mutators plus palrt's finalizer thread; iterations
// scale with PALRT_TEST_SCALE. No sleeps: every wait is on the heap's safepoints, a join or
// palrt's wait_for_pending_finalizers().
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "heap.hpp"
#include "palrt/gc/finalizer_thread.hpp"
#include "palrt/gc/handle_table.hpp"
#include "scale.hpp"
#include "wrappers.hpp"

using namespace copying_host;
namespace gc = palrt::gc;
using gc::handle_kind;

namespace {

// --- Payload patterns: a copy that lost or shifted bytes is caught at the next read ---
std::byte pattern(std::uint64_t id, std::size_t i) { return static_cast<std::byte>((id * 131 + i * 7) & 0xff); }
void fill(object* o) {
  for (std::size_t i = 0; i < o->payload_bytes(); ++i) o->payload()[i] = pattern(o->id, i);
}
bool intact(object* o) {
  if (o->has(wrapper)) return true;  // its payload is its cell
  for (std::size_t i = 0; i < o->payload_bytes(); ++i)
    if (o->payload()[i] != pattern(o->id, i)) return false;
  return true;
}

// --- A stale pointer faults: say where ---
std::atomic<const heap*> fault_heap{nullptr};
void on_fault(int, siginfo_t* si, void*) {
  char line[200];
  const heap* h = fault_heap.load(std::memory_order_relaxed);
  const char* where = h ? h->region_of(si->si_addr) : nullptr;
  int n = std::snprintf(line, sizeof line, "copying host suite: SIGSEGV at %p, in %s: a stale pointer\n", si->si_addr,
                        where ? where : "no space of the heap");
  if (n > 0) (void)!::write(2, line, static_cast<std::size_t>(n));
}
struct fault_reporter {
  struct sigaction old {};
  explicit fault_reporter(const heap& h) {
    fault_heap.store(&h);
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;  // report, then the default action at the re-fault
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old);
  }
  ~fault_reporter() {
    sigaction(SIGSEGV, &old, nullptr);
    fault_heap.store(nullptr);
  }
};

// --- The host: table, heap, identity cache, palrt's finalizer thread ---
struct host {
  gc::handle_table table;
  heap h;
  wrapper_cache wrappers;
  gc::finalizer_thread finalizer;
  explicit host(heap_options o = {}) : h(table, o), wrappers(h), finalizer(h.finalization_source()) {
    h.set_finalizer_thread(&finalizer);
    finalizer.start();
  }
  ~host() {
    if (!finalizer.stop()) std::fprintf(stderr, "copying host suite: the finalizer thread did not stop\n");
  }
};

struct attached {
  heap& h;
  mutator m;
  explicit attached(heap& hp) : h(hp) { h.attach(m); }
  ~attached() { h.detach(m); }
};

// Waits for palrt's finalizer thread without holding up a collection it may need.
void wait_finalizers(host& x, mutator& m) {
  x.h.enter_native(m);
  const auto r = x.finalizer.wait_for_pending_finalizers(std::chrono::seconds(60));
  x.h.leave_native(m);
  REQUIRE(r == gc::pending_finalizers::finalized);
}

object* make(heap& h, mutator& m, std::size_t fields, std::size_t payload, std::uint8_t flags = 0) {
  object* o = h.allocate(m, fields, payload, flags);
  fill(o);
  return o;
}
object* target(gc::handle hd) { return static_cast<object*>(gc::handle_table::target(hd)); }

}  // namespace

TEST_CASE("a stale pointer into an evacuated nursery faults (the spaces left behind are PROT_NONE)") {
  // In a child of its own: it faults on purpose. Its handler exits 42 only for a fault in an
  // evacuated space, so a fault anywhere else (or no fault: 0) fails the case.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    static heap* hp = nullptr;
    gc::handle_table table;
    heap h(table, {});
    hp = &h;
    struct sigaction sa {};
    sa.sa_sigaction = [](int, siginfo_t* si, void*) {
      const char* where = hp->region_of(si->si_addr);
      ::_exit(where && std::strstr(where, "PROT_NONE") ? 42 : 43);
    };
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
    mutator m;
    h.attach(m);
    object* o = h.allocate(m, 0, 8);
    m.roots.push_back(o);
    h.collect(&m, collection_kind::young);
    volatile std::uint64_t id = o->id;  // o is stale: the object now lives at m.roots[0]
    (void)id;
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK_MESSAGE(WEXITSTATUS(status) == 42, "the stale read did not fault in an evacuated space (exit ",
                WEXITSTATUS(status), ")");
}

TEST_CASE("young collection: survivors move to the old space, strong handles follow, short weak handles of the dead "
          "are cleared, the write barrier keeps old-to-young stores") {
  host x;
  attached a(x.h);
  mutator& m = a.m;
  m.roots.push_back(make(x.h, m, 2, 8));
  x.h.collect(&m, collection_kind::young);
  REQUIRE(x.h.in_old(m.roots[0]));
  object* young = make(x.h, m, 0, 16);
  const std::uint64_t young_id = young->id;
  x.h.write(m, m.roots[0], 0, young);  // the only reference: from an old object (the barrier)
  gc::handle strong = x.table.allocate(handle_kind::strong, young);
  gc::handle weak = x.table.allocate(handle_kind::weak_short, young);
  object* dead = make(x.h, m, 0, 8);
  gc::handle weak_dead = x.table.allocate(handle_kind::weak_short, dead);
  x.h.collect(&m, collection_kind::young);
  REQUIRE(target(strong));
  CHECK(target(strong)->id == young_id);
  CHECK(x.h.in_old(target(strong)));
  CHECK(m.roots[0]->field(0) == target(strong));
  CHECK(target(weak) == target(strong));
  CHECK(target(weak_dead) == nullptr);
  CHECK(intact(target(strong)));
  // Old handles of old objects: a full collection moves them again, and still finds them.
  x.h.collect(&m, collection_kind::full);
  CHECK(target(strong)->id == young_id);
  CHECK(m.roots[0]->field(0) == target(strong));
  for (gc::handle hd : {strong, weak, weak_dead}) (void)x.table.release(hd);
}

TEST_CASE("finalization: palrt's finalizer thread runs it once; weak_long tracks the object through it, and stays set "
          "when the finalizer resurrects it") {
  host x;
  std::mutex lock;
  std::map<std::uint64_t, int> finalized;
  std::atomic<std::uint64_t> resurrect_id{0};
  x.h.set_finalizer([&](heap& h, mutator&, object* o) {
    {
      std::lock_guard l(lock);
      ++finalized[o->id];
    }
    if (o->id == resurrect_id.load()) (void)h.add_global(o);
  });
  attached a(x.h);
  mutator& m = a.m;
  for (bool resurrect : {false, true}) {
    CAPTURE(resurrect);
    object* o = make(x.h, m, 1, 8, finalizable);
    const std::uint64_t id = o->id;
    if (resurrect) resurrect_id = id;
    object* reached = make(x.h, m, 0, 8);  // reachable only from the finalizable object
    x.h.write(m, o, 0, reached);
    gc::handle ws = x.table.allocate(handle_kind::weak_short, o);
    gc::handle wl = x.table.allocate(handle_kind::weak_long, o);
    gc::handle ws_reached = x.table.allocate(handle_kind::weak_short, reached);
    gc::handle wl_reached = x.table.allocate(handle_kind::weak_long, reached);
    x.h.collect(&m, collection_kind::young);  // dead: kept for its finalizer
    CHECK(target(ws) == nullptr);
    CHECK(target(ws_reached) == nullptr);
    REQUIRE(target(wl) != nullptr);
    CHECK(target(wl)->id == id);
    CHECK(target(wl_reached) == target(wl)->field(0));
    wait_finalizers(x, m);
    {
      std::lock_guard l(lock);
      CHECK(finalized[id] == 1);
    }
    x.h.collect(&m, collection_kind::full);
    if (resurrect) {
      REQUIRE(target(wl) != nullptr);
      CHECK(target(wl)->id == id);
      CHECK(target(wl_reached) == target(wl)->field(0));
      x.h.set_global(0, nullptr);  // dead again: the finalizer does not run twice
      x.h.collect(&m, collection_kind::full);
      wait_finalizers(x, m);
    }
    CHECK(target(wl) == nullptr);
    CHECK(target(wl_reached) == nullptr);
    {
      std::lock_guard l(lock);
      CHECK(finalized[id] == 1);
    }
    for (gc::handle hd : {ws, wl, ws_reached, wl_reached}) (void)x.table.release(hd);
  }
}

TEST_CASE("dependent handles: a chain of secondaries lives exactly while the first primary does, through young and "
          "full collections") {
  host x;
  attached a(x.h);
  mutator& m = a.m;
  // primary -> (dependent) s1 -> (dependent, s1 as primary) s2; s2 holds a field object.
  m.roots.push_back(make(x.h, m, 0, 8));
  object* s1 = make(x.h, m, 0, 8);
  gc::handle d1 = x.table.allocate(handle_kind::dependent, m.roots[0], s1);
  object* s2 = make(x.h, m, 1, 8);
  object* leaf = make(x.h, m, 0, 24);
  x.h.write(m, s2, 0, leaf);
  gc::handle d2 = x.table.allocate(handle_kind::dependent, target(d1) == nullptr ? nullptr : x.table.secondary(d1), s2);
  const std::uint64_t ids[] = {s1->id, s2->id, leaf->id};
  for (collection_kind k : {collection_kind::young, collection_kind::full, collection_kind::young}) {
    x.h.collect(&m, k);
    REQUIRE(target(d1) == m.roots[0]);
    auto* a1 = static_cast<object*>(x.table.secondary(d1));
    auto* a2 = static_cast<object*>(x.table.secondary(d2));
    REQUIRE(a1);
    REQUIRE(a2);
    CHECK(a1->id == ids[0]);
    CHECK(target(d2) == a1);
    CHECK(a2->id == ids[1]);
    CHECK(a2->field(0)->id == ids[2]);
    CHECK(intact(a2->field(0)));
  }
  m.roots.clear();
  x.h.collect(&m, collection_kind::full);
  CHECK(target(d1) == nullptr);
  CHECK(x.table.secondary(d1) == nullptr);
  CHECK(target(d2) == nullptr);
  (void)x.table.release(d1);
  (void)x.table.release(d2);
}

TEST_CASE("pinned handles: the target never moves, its nursery referents are kept and updated, and it is reclaimed "
          "once unpinned and unreachable") {
  host x;
  attached a(x.h);
  mutator& m = a.m;
  object* p = x.h.allocate_pinned(m, 1, 32);
  fill(p);
  const std::uint64_t id = p->id;
  gc::handle pin = x.table.allocate(handle_kind::pinned, p);
  gc::handle weak = x.table.allocate(handle_kind::weak_short, p);
  for (int i = 0; i < 6; ++i) {
    object* child = make(x.h, m, 0, 8);
    const std::uint64_t child_id = child->id;
    x.h.write(m, target(pin), 0, child);  // a pinned-space object is old: the barrier
    x.h.collect(&m, i % 3 == 2 ? collection_kind::full : collection_kind::young);
    REQUIRE(target(pin) == p);
    CHECK(p->id == id);
    CHECK(intact(p));
    REQUIRE(p->field(0));
    CHECK(p->field(0)->id == child_id);
    CHECK(!x.h.in_nursery(p->field(0)));
  }
  (void)x.table.release(pin);
  x.h.collect(&m, collection_kind::full);
  CHECK(target(weak) == nullptr);
  (void)x.table.release(weak);
}

TEST_CASE(
    "identity cache: get() returns the same wrapper, wherever it moved, while it lives, and a new one after it died") {
  host x;
  attached a(x.h);
  mutator& m = a.m;
  static const char natives[2] = {};
  object* w = x.wrappers.get(m, &natives[0]);
  const std::uint64_t id = w->id;
  m.roots.push_back(w);
  for (collection_kind k : {collection_kind::young, collection_kind::full, collection_kind::young}) {
    x.h.collect(&m, k);
    object* again = x.wrappers.get(m, &natives[0]);
    CHECK(again == m.roots[0]);
    CHECK(again->id == id);
  }
  const std::uint64_t other = x.wrappers.get(m, &natives[1])->id;  // dies at the next collection
  m.roots.clear();
  x.h.collect(&m, collection_kind::full);
  object* fresh = x.wrappers.get(m, &natives[0]);
  CHECK(fresh->id != id);
  CHECK(x.wrappers.get(m, &natives[0])->id == fresh->id);
  CHECK(x.wrappers.get(m, &natives[1])->id != other);
  CHECK(x.wrappers.counters().erased >= 2);
}

// --- The stress case and its oracle ---
namespace {

struct record {
  gc::handle h;
  handle_kind kind;
  std::uint64_t id = 0;            // the target's (a dependent's primary's)
  std::uint64_t secondary_id = 0;  // a dependent's
  object* pinned_at = nullptr;
  // Written by the oracle before a collection, checked after it.
  bool expect_target = false;
  bool expect_secondary = false;
};

struct thread_state {
  std::vector<record> records;
  std::vector<record> watches;  // weak_short to the last wrapper seen, per native
  std::vector<std::uint64_t> watch_ids;
};

struct tally {
  std::atomic<std::uint64_t> checked[gc::handle_kind_count]{};
  std::atomic<std::uint64_t> cleared[gc::handle_kind_count]{};
  std::atomic<std::uint64_t> kept_for_finalizer{0};  // weak_long set while weak_short was cleared
  std::atomic<std::uint64_t> pinned_checked{0};
  std::atomic<std::uint64_t> wrappers_same{0}, wrappers_new_after_death{0};
  std::atomic<std::uint64_t> finalized{0}, resurrected{0}, duplicate_finalizations{0};
  std::mutex failures_lock;
  std::vector<std::string> failures;
  std::atomic<std::uint64_t> failure_count{0};
  void fail(std::string what) {
    if (failure_count.fetch_add(1) < 20) {
      std::lock_guard l(failures_lock);
      failures.push_back(std::move(what));
    }
  }
};

class oracle : public collection_observer {
 public:
  oracle(gc::handle_table& t, std::vector<thread_state>& threads, tally& tl)
      : table_(t), threads_(threads), tally_(tl) {}

  void before(heap& h, collection_kind kind) override {
    kind_ = kind;
    heap_ = &h;
    reached_.clear();
    // Roots: the heap's, and the strong and pinned handles the test holds (no palrt walk).
    h.for_each_root([&](object* o) { mark(o); });
    for (thread_state& t : threads_)
      for (record& r : t.records)
        if (r.kind == handle_kind::strong || r.kind == handle_kind::pinned) mark(target(r.h));
    // A young collection keeps every old object: what they point to in the nursery lives.
    if (kind == collection_kind::young)
      h.for_each_old_object([&](object* o) {
        for (std::size_t i = 0; i < o->fields; ++i) mark(o->field(i));
      });
    trace();
    dependents();
    before_finalization_ = reached_;
    std::vector<object*> kept;
    h.for_each_finalizable([&](object* o) {
      if (!alive(o)) kept.push_back(o);
    });
    for (object* o : kept) mark(o);
    trace();
    dependents();
    for (thread_state& t : threads_) {
      for (record& r : t.records) expect(r);
      for (record& r : t.watches) expect(r);
    }
  }

  void after(heap&, const collection_stats& s) override {
    for (thread_state& t : threads_) {
      for (record& r : t.records) verify(r, s);
      for (record& r : t.watches) verify(r, s);
    }
    heap_->for_each_root([&](object* o) {
      if (o && !intact(o)) tally_.fail("a root's payload changed in collection " + std::to_string(s.number));
    });
  }

 private:
  bool condemned(const object* o) const { return heap_->condemned(o, kind_); }
  bool alive(const object* o) const { return !condemned(o) || reached_.count(o); }
  bool alive_before_finalization(const object* o) const { return !condemned(o) || before_finalization_.count(o); }
  void mark(object* o) {
    if (o && condemned(o) && reached_.insert(o).second) stack_.push_back(o);
  }
  void trace() {
    while (!stack_.empty()) {
      object* o = stack_.back();
      stack_.pop_back();
      for (std::size_t i = 0; i < o->fields; ++i) mark(o->field(i));
    }
  }
  void dependents() {
    for (bool changed = true; changed;) {
      changed = false;
      for (thread_state& t : threads_)
        for (record& r : t.records) {
          if (r.kind != handle_kind::dependent) continue;
          object* p = target(r.h);
          auto* s = static_cast<object*>(table_.secondary(r.h));
          if (p && s && alive(p) && !alive(s)) {
            mark(s);
            trace();
            changed = true;
          }
        }
    }
  }
  void expect(record& r) {
    object* t = target(r.h);
    if (t && t->id != r.id)
      tally_.fail("before a collection, a " + std::string(gc::handle_kind_name(r.kind)) + " handle holds object " +
                  std::to_string(t->id) + ", not " + std::to_string(r.id));
    r.expect_target = false;
    r.expect_secondary = false;
    if (!t) return;
    switch (r.kind) {
      case handle_kind::strong:
      case handle_kind::pinned: r.expect_target = true; break;
      case handle_kind::weak_short: r.expect_target = alive_before_finalization(t); break;
      case handle_kind::weak_long:
        r.expect_target = alive(t);
        if (r.expect_target && !alive_before_finalization(t)) tally_.kept_for_finalizer.fetch_add(1);
        break;
      case handle_kind::dependent:
        r.expect_target = alive(t);
        r.expect_secondary = r.expect_target && table_.secondary(r.h) != nullptr;
        break;
    }
  }
  void verify(record& r, const collection_stats& s) {
    const std::string where = std::string(gc::handle_kind_name(r.kind)) + " handle of object " + std::to_string(r.id) +
                              ", " + collection_kind_name(s.kind) + " collection " + std::to_string(s.number);
    const auto k = static_cast<std::size_t>(r.kind);
    tally_.checked[k].fetch_add(1, std::memory_order_relaxed);
    object* t = target(r.h);
    if (!r.expect_target) {
      if (t) {
        tally_.fail(where + ": not cleared, though its target was dead");
        return;
      }
      if (r.id) tally_.cleared[k].fetch_add(1, std::memory_order_relaxed);
      r.id = 0;  // cleared: nothing more to expect of it
      r.secondary_id = 0;
      return;
    }
    if (!t) {
      tally_.fail(where + ": cleared, though its target lived");
      r.id = 0;
      return;
    }
    if (t->id != r.id) tally_.fail(where + ": now holds object " + std::to_string(t->id));  // faults if stale
    if (!intact(t)) tally_.fail(where + ": the payload changed");
    if (r.kind == handle_kind::pinned) {
      tally_.pinned_checked.fetch_add(1, std::memory_order_relaxed);
      if (t != r.pinned_at) tally_.fail(where + ": the pinned target moved");
    }
    if (r.kind == handle_kind::dependent) {
      auto* sec = static_cast<object*>(table_.secondary(r.h));
      if (r.expect_secondary && (!sec || sec->id != r.secondary_id || !intact(sec)))
        tally_.fail(where + ": the secondary was lost or changed");
    }
  }

  gc::handle_table& table_;
  std::vector<thread_state>& threads_;
  tally& tally_;
  heap* heap_ = nullptr;
  collection_kind kind_ = collection_kind::young;
  std::unordered_set<const object*> reached_, before_finalization_;
  std::vector<object*> stack_;
};

constexpr std::size_t root_slots = 24;
constexpr std::size_t max_records = 1500;
const char natives[64] = {};

void mutate(host& x, thread_state& st, tally& tl, std::atomic<std::size_t>& globals, unsigned seed, long iterations) {
  attached a(x.h);
  mutator& m = a.m;
  heap& h = x.h;
  std::mt19937 rng(seed);
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  m.roots.assign(root_slots, nullptr);
  st.watches.assign(sizeof natives, record{});
  st.watch_ids.assign(sizeof natives, 0);
  for (auto& w : st.watches) {
    w.kind = handle_kind::weak_short;
    w.h = x.table.allocate(handle_kind::weak_short, nullptr);
  }
  auto add = [&](record r) {
    if (st.records.size() >= max_records) {
      const std::size_t i = pick(st.records.size());
      (void)x.table.release(st.records[i].h);
      st.records[i] = st.records.back();
      st.records.pop_back();
    }
    st.records.push_back(r);
  };
  for (long it = 0; it < iterations; ++it) {
    const unsigned r = rng() % 100;
    if (r < 38) {
      const std::size_t fields = pick(4);
      object* o = make(h, m, fields, pick(48), pick(10) == 0 ? finalizable : 0);
      const std::size_t slot = pick(root_slots);
      m.roots[slot] = o;
      object* holder = m.roots[pick(root_slots)];
      if (holder && holder->fields && pick(2)) h.write(m, holder, pick(holder->fields), o);
    } else if (r < 48) {
      const auto kind = static_cast<handle_kind>(pick(gc::handle_kind_count));
      if (kind == handle_kind::pinned) {
        object* p = h.allocate_pinned(m, 1, 16);
        fill(p);
        if (object* child = m.roots[pick(root_slots)]) h.write(m, p, 0, child);
        record rec{x.table.allocate(handle_kind::pinned, p), kind, p->id};
        rec.pinned_at = p;
        add(rec);
      } else if (kind == handle_kind::dependent) {
        const std::size_t slot = pick(root_slots);
        if (!m.roots[slot]) continue;
        object* sec = make(h, m, 1, 8);  // a safepoint: read the primary after it
        if (object* child = m.roots[pick(root_slots)]) h.write(m, sec, 0, child);
        object* primary = m.roots[slot];
        if (!primary) continue;
        record rec{x.table.allocate(handle_kind::dependent, primary, sec), kind, primary->id};
        rec.secondary_id = sec->id;
        add(rec);
      } else {
        object* t = m.roots[pick(root_slots)];
        if (!t) continue;
        add(record{x.table.allocate(kind, t), kind, t->id});
      }
    } else if (r < 54) {
      if (st.records.empty()) continue;
      const std::size_t i = pick(st.records.size());
      (void)x.table.release(st.records[i].h);
      st.records[i] = st.records.back();
      st.records.pop_back();
    } else if (r < 64) {
      if (st.records.empty()) continue;
      record& rec = st.records[pick(st.records.size())];
      object* t = target(rec.h);
      if ((rec.kind == handle_kind::strong || rec.kind == handle_kind::pinned) && !t)
        tl.fail(std::string(gc::handle_kind_name(rec.kind)) + " handle read null by its mutator");
      if (t && t->id != rec.id) tl.fail("a mutator read a handle holding the wrong object");
    } else if (r < 72) {
      m.roots[pick(root_slots)] = nullptr;
    } else if (r < 80) {
      const std::size_t n = pick(sizeof natives);
      object* w = x.wrappers.get(m, &natives[n], 8);
      record& watch = st.watches[n];
      if (target(watch.h)) {
        if (w->id != st.watch_ids[n]) tl.fail("get() returned another wrapper while the first one lived");
        tl.wrappers_same.fetch_add(1, std::memory_order_relaxed);
      } else if (st.watch_ids[n]) {
        if (w->id == st.watch_ids[n]) tl.fail("get() returned a wrapper its watch saw die");
        tl.wrappers_new_after_death.fetch_add(1, std::memory_order_relaxed);
      }
      wrapper_cell* cell;
      std::memcpy(&cell, w->payload(), sizeof cell);
      if (cell->identity != &natives[n]) tl.fail("a wrapper's cell names another identity");
      gc::handle_table::set_target(watch.h, w);
      watch.id = w->id;
      st.watch_ids[n] = w->id;
      if (pick(3) == 0) m.roots[pick(root_slots)] = w;
    } else if (r < 82) {
      if (const std::size_t n = globals.load()) h.set_global(pick(n), nullptr);
    } else if (r < 86) {
      // A store into an existing handle (an old block made young again by the store).
      if (st.records.empty()) continue;
      record& rec = st.records[pick(st.records.size())];
      object* t = m.roots[pick(root_slots)];
      if (!t || rec.kind == handle_kind::pinned || rec.kind == handle_kind::dependent) continue;
      gc::handle_table::set_target(rec.h, t);
      rec.id = t->id;
    } else {
      h.poll(m);
    }
  }
  for (record& rec : st.records) (void)x.table.release(rec.h);
  for (record& rec : st.watches) (void)x.table.release(rec.h);
  st.records.clear();
  st.watches.clear();
}

void stress(int threads) {
  heap_options options;
  options.nursery_bytes = 64 << 10;
  options.tlab_bytes = 2 << 10;
  options.old_bytes = 24 << 20;
  options.full_every = 6;
  host x(options);
  fault_reporter faults(x.h);
  tally tl;
  std::atomic<std::size_t> globals{0};
  std::mutex lock;
  std::map<std::uint64_t, int> finalized;
  x.h.set_finalizer([&](heap& h, mutator&, object* o) {
    tl.finalized.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard l(lock);
      if (++finalized[o->id] > 1) tl.duplicate_finalizations.fetch_add(1);
    }
    if (!intact(o)) tl.fail("a finalizer saw a changed payload");
    if (o->id % 3 == 0) {
      h.add_global(o);
      globals.fetch_add(1);
      tl.resurrected.fetch_add(1, std::memory_order_relaxed);
    }
  });
  std::vector<thread_state> states(static_cast<std::size_t>(threads));
  oracle o(x.table, states, tl);
  x.h.set_observer(&o);
  const long iterations = 1'000'000L * palrt::testing::scale() / threads;
  {
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; ++i)
      ts.emplace_back(mutate, std::ref(x), std::ref(states[static_cast<std::size_t>(i)]), std::ref(tl),
                      std::ref(globals), 1234u + static_cast<unsigned>(i) * 77u + static_cast<unsigned>(threads),
                      iterations);
    for (auto& t : ts) t.join();
  }
  // The finalizers still pending, then collections that find their objects dead again.
  {
    attached a(x.h);
    wait_finalizers(x, a.m);
    x.h.collect(&a.m, collection_kind::full);
    wait_finalizers(x, a.m);
  }
  x.h.set_observer(nullptr);
  MESSAGE(threads, " mutators: ", x.h.young_collections(), " young and ", x.h.full_collections(),
          " full collections; handles checked strong/weak_short/weak_long/dependent/pinned ", tl.checked[0].load(), "/",
          tl.checked[1].load(), "/", tl.checked[2].load(), "/", tl.checked[3].load(), "/", tl.checked[4].load(),
          ", cleared weak_short/weak_long/dependent ", tl.cleared[1].load(), "/", tl.cleared[2].load(), "/",
          tl.cleared[3].load(), "; weak_long kept for a pending finalizer ", tl.kept_for_finalizer.load(),
          "; finalized ", tl.finalized.load(), " (resurrected ", tl.resurrected.load(),
          "); wrappers same/new after death ", tl.wrappers_same.load(), "/", tl.wrappers_new_after_death.load());
  {
    std::lock_guard l(tl.failures_lock);
    for (const std::string& f : tl.failures) FAIL_CHECK(f);
  }
  CHECK_MESSAGE(tl.failure_count.load() == 0, tl.failure_count.load(), " disagreements with the oracle");
  CHECK_MESSAGE(tl.duplicate_finalizations.load() == 0, "objects finalized twice");
  // Each behaviour was exercised, or the run proves nothing.
  CHECK(x.h.young_collections() >= 5);
  CHECK(x.h.full_collections() >= 1);
  CHECK(tl.cleared[1].load() > 0);
  CHECK(tl.cleared[2].load() > 0);
  CHECK(tl.cleared[3].load() > 0);
  CHECK(tl.kept_for_finalizer.load() > 0);
  CHECK(tl.pinned_checked.load() > 0);
  CHECK(tl.resurrected.load() > 0);
  CHECK(tl.wrappers_same.load() > 0);
  CHECK(tl.wrappers_new_after_death.load() > 0);
}

}  // namespace

TEST_CASE("stress, 4 mutators: every handle kind agrees with the oracle after every collection") { stress(4); }
TEST_CASE("stress, 8 mutators: every handle kind agrees with the oracle after every collection") { stress(8); }
