// SPDX-License-Identifier: MIT
// The process-wide dispatch tables and the per-instance dispatch caches: a type's table is
// built once for the process whatever the number of instances; each instance sees exactly
// its own policy over shared vtables; concurrent first calls build once; the steady state
// is the L1; an instance never gets a view that is not its own, a dead one's least of all;
// bad descriptors are rejected by name; vtables hold the base slots, then the methods.
//
// The process-wide table of a type is built once per process, so every test that counts
// builds uses descriptors of its own that no other test touches.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "palrt/interop/dispatch_tables.hpp"
#include "palrt/interop/internal/dispatch_tables_access.hpp"
#include "scale.hpp"

using namespace palrt::interop;
using dispatch_access = palrt::interop::internal::dispatch_tables_access;
using namespace std::chrono_literals;

namespace {

// Distinct bodies, so that no identical-code folding can give two slots one address.
std::atomic<int> last_called{0};
template <int N>
void method() {
  last_called.store(N, std::memory_order_relaxed);
}

// IIDs of the COM shape {0000000n-0000-0000-C000-000000000046}.
constexpr interface_id iid(std::uint32_t n) { return interface_id::from_guid(n, 0, 0, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}); }

// QueryInterface, AddRef, Release: shared by every interface of a type.
const dispatch_slot unknown_slots[] = {&method<0>, &method<1>, &method<2>};
const dispatch_slot stream_methods[] = {&method<10>, &method<11>};
const dispatch_slot persist_methods[] = {&method<20>};
const dispatch_slot marshal_methods[] = {&method<30>, &method<31>, &method<32>};

// Declared out of id order, so that the tables' sorting shows.
const interface_descriptor istream{iid(3), "IStream", stream_methods};
const interface_descriptor ipersist{iid(1), "IPersist", persist_methods};
const interface_descriptor imarshal{iid(2), "IMarshal", marshal_methods};
const interface_descriptor* const widget_interfaces[] = {&istream, &ipersist, &imarshal};
constexpr std::size_t widget_interface_count = 3;

// Every test that counts builds or claims the L1 has types of its own.
const type_descriptor built_once_type{"BuiltOnce", unknown_slots, widget_interfaces};
const type_descriptor policy_order_hiding_first{"PolicyHidingFirst", unknown_slots, widget_interfaces};
const type_descriptor policy_order_exposing_first{"PolicyExposingFirst", unknown_slots, widget_interfaces};
const type_descriptor raced_table_type{"RacedTable", unknown_slots, widget_interfaces};
const type_descriptor raced_view_type{"RacedView", unknown_slots, widget_interfaces};
const type_descriptor steady_state_type{"SteadyState", unknown_slots, widget_interfaces};
const type_descriptor successor_type{"Successor", unknown_slots, widget_interfaces};
const type_descriptor churn_type{"Churn", unknown_slots, widget_interfaces};
const type_descriptor layout_type{"Layout", unknown_slots, widget_interfaces};
const type_descriptor no_interfaces_type{"NoInterfaces", unknown_slots, {}};
const type_descriptor no_base_slots_type{"NoBaseSlots", {}, widget_interfaces};

// A policy that hides IMarshal and counts its calls (through its context).
struct hiding_policy {
  std::atomic<int> calls{0};
  dispatch_policy policy() {
    return {[](void* context, const type_descriptor&, const interface_descriptor& iface) noexcept {
              static_cast<hiding_policy*>(context)->calls.fetch_add(1, std::memory_order_relaxed);
              return iface.id != imarshal.id;
            },
            this};
  }
};

bool exposes(const exposed_interfaces& view, const interface_descriptor& iface) { return view.find(iface.id); }

// Runs body(0..n-1) on n threads released together by a latch. Returns how many had not
// returned within `bound`; those are detached (the state they use is shared with them, so
// they touch nothing freed), the others joined.
int run_together(int n, std::function<void(int)> body, std::chrono::seconds bound = 10s) {
  struct shared {
    explicit shared(int n, std::function<void(int)> b) : start(n), body(std::move(b)) {}
    std::latch start;
    std::function<void(int)> body;
    std::mutex lock;
    std::condition_variable returned;
    int finished = 0;
  };
  auto s = std::make_shared<shared>(n, std::move(body));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([s, i] {
      s->start.arrive_and_wait();  // all first calls start together
      s->body(i);
      std::lock_guard guard(s->lock);
      ++s->finished;
      s->returned.notify_all();
    });
  std::unique_lock lock(s->lock);
  const bool all = s->returned.wait_for(lock, bound, [&] { return s->finished == n; });
  const int overstayed = n - s->finished;
  lock.unlock();
  for (auto& t : threads) all ? t.join() : t.detach();
  return overstayed;
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(nothing thrown)";
}

}  // namespace

TEST_CASE(
    "dispatch tables: a type's table is built once for the process; a new instance builds its view, never the table") {
  REQUIRE(dispatch_access::published_table(built_once_type) == nullptr);  // nobody asked yet
  const std::uint64_t before = dispatch_access::tables_built();
  const dispatch_table* table = nullptr;
  {
    std::vector<std::unique_ptr<dispatch_cache>> instances;
    for (int i = 0; i < 8; ++i) instances.push_back(std::make_unique<dispatch_cache>());
    for (auto& instance : instances) {
      const exposed_interfaces& view = instance->interfaces_for(built_once_type);
      CHECK(&instance->interfaces_for(built_once_type) == &view);  // kept, not built again
      CHECK(view.cache_id() == instance->id());
      if (!table) table = &view.table();
      CHECK(&view.table() == table);  // every instance shares the one table
      CHECK(dispatch_access::views_built(*instance) == 1);
    }
    CHECK_MESSAGE(dispatch_access::tables_built() - before == 1,
                  "8 instances built the table " << dispatch_access::tables_built() - before << " times");
  }
  // Every instance is gone; the table is not, and a new instance does not rebuild it.
  dispatch_cache late;
  CHECK(&late.interfaces_for(built_once_type).table() == table);
  CHECK(&dispatch_table_for(built_once_type) == table);
  CHECK(dispatch_access::views_built(late) == 1);
  CHECK_MESSAGE(dispatch_access::tables_built() - before == 1, "a new instance rebuilt the table");
}

TEST_CASE(
    "dispatch tables: two instances with different policies each see only their own, in either order, over shared "
    "vtables") {
  // The first instance to ask claims the type's L1, the second uses its map: both orders,
  // with a type each, so that each policy is seen through the L1 once and the map once.
  for (const bool hiding_first : {true, false}) {
    const type_descriptor& type = hiding_first ? policy_order_hiding_first : policy_order_exposing_first;
    CAPTURE(type.name);
    hiding_policy hide;
    std::unique_ptr<dispatch_cache> hiding, exposing;
    if (hiding_first) {
      hiding = std::make_unique<dispatch_cache>(hide.policy());
      exposing = std::make_unique<dispatch_cache>();
      hiding->interfaces_for(type);
      exposing->interfaces_for(type);
    } else {
      exposing = std::make_unique<dispatch_cache>();
      hiding = std::make_unique<dispatch_cache>(hide.policy());
      exposing->interfaces_for(type);
      hiding->interfaces_for(type);
    }
    CHECK(dispatch_access::l1_owner(type) == (hiding_first ? hiding : exposing)->id());
    CHECK(hide.calls.load() == static_cast<int>(widget_interface_count));  // once per interface, for its own view only

    const dispatch_table& table = dispatch_table_for(type);
    for (int round = 0; round < 3; ++round) {  // the first lookup built the views; these are L1 and map hits
      const exposed_interfaces& h = hiding->interfaces_for(type);
      const exposed_interfaces& e = exposing->interfaces_for(type);
      CHECK(h.cache_id() == hiding->id());
      CHECK(e.cache_id() == exposing->id());
      CHECK(h.entries().size() == 2);
      CHECK(e.entries().size() == 3);
      CHECK_FALSE(exposes(h, imarshal));
      CHECK(exposes(e, imarshal));
      CHECK(hiding->find(type, imarshal.id) == nullptr);
      CHECK(exposing->find(type, imarshal.id) == table.find(imarshal.id)->vtable());
      for (const interface_descriptor* both : {&istream, &ipersist}) {
        // The very same vtable: the policy filters the shared table, it copies nothing.
        CHECK(hiding->find(type, both->id) == table.find(both->id)->vtable());
        CHECK(exposing->find(type, both->id) == table.find(both->id)->vtable());
      }
    }
    CHECK(hide.calls.load() == static_cast<int>(widget_interface_count));  // lookups do not ask the policy again
  }
}

TEST_CASE("dispatch tables: concurrent first calls from 4 threads build one table, and all get it") {
  constexpr int threads = 4;
  const std::uint64_t before = dispatch_access::tables_built();
  auto seen = std::make_shared<std::array<std::atomic<const dispatch_table*>, threads>>();
  const int overstayed = run_together(threads, [seen](int i) { (*seen)[i] = &dispatch_table_for(raced_table_type); });
  REQUIRE_MESSAGE(overstayed == 0,
                  overstayed << " of 4 first calls never returned: the winner's table never reached them");
  const std::uint64_t builds = dispatch_access::tables_built() - before;
  CHECK_MESSAGE(builds == 1, "4 racing first calls built the table " << builds << " times");
  const dispatch_table* published = dispatch_access::published_table(raced_table_type);
  REQUIRE(published);
  for (int i = 0; i < threads; ++i)
    CHECK_MESSAGE((*seen)[i].load() == published, "thread " << i << " got a table that was not kept");
}

TEST_CASE("dispatch tables: concurrent first calls in one instance keep one view, and all threads get it") {
  constexpr int threads = 4;
  auto instance = std::make_shared<dispatch_cache>();
  auto seen = std::make_shared<std::array<std::atomic<const exposed_interfaces*>, threads>>();
  const int overstayed =
      run_together(threads, [instance, seen](int i) { (*seen)[i] = &instance->interfaces_for(raced_view_type); });
  REQUIRE_MESSAGE(overstayed == 0, overstayed << " of 4 first lookups never returned");
  // Racing threads may each build a view (no lock is held around the policy); one is kept.
  CHECK_MESSAGE(dispatch_access::views_built(*instance) == 1,
                "kept " << dispatch_access::views_built(*instance) << " views of one type");
  CHECK(dispatch_access::views_discarded(*instance) <= threads - 1);
  const exposed_interfaces& kept = instance->interfaces_for(raced_view_type);
  for (int i = 0; i < threads; ++i)
    CHECK_MESSAGE((*seen)[i].load() == &kept, "thread " << i << " got a view that was dropped");
}

TEST_CASE("dispatch tables: the steady state is the L1; a second live instance uses its own map, never the L1's view") {
  const auto hits = [] { return dispatch_access::l1_hits_on_this_thread(); };
  const auto fallbacks = [] { return dispatch_access::fallback_lookups_on_this_thread(); };
  dispatch_cache first;
  std::uint64_t h0 = hits(), f0 = fallbacks();
  const exposed_interfaces& mine = first.interfaces_for(steady_state_type);  // builds, claims the L1
  CHECK(fallbacks() - f0 == 1);
  CHECK(dispatch_access::l1_claims(first) == 1);
  CHECK(dispatch_access::l1_owner(steady_state_type) == first.id());
  CHECK(dispatch_access::l1_view(steady_state_type) == &mine);

  constexpr int lookups = 1000;
  h0 = hits(), f0 = fallbacks();
  for (int i = 0; i < lookups; ++i) REQUIRE(&first.interfaces_for(steady_state_type) == &mine);
  CHECK_MESSAGE(hits() - h0 == lookups, (lookups - (hits() - h0)) << " steady-state lookups missed the L1");
  CHECK(fallbacks() - f0 == 0);

  // The L1 is taken: a second instance's lookups are answered by its map, with its view.
  dispatch_cache second;
  const exposed_interfaces& its = second.interfaces_for(steady_state_type);
  CHECK(&its != &mine);
  CHECK(its.cache_id() == second.id());
  h0 = hits(), f0 = fallbacks();
  for (int i = 0; i < lookups; ++i) REQUIRE(&second.interfaces_for(steady_state_type) == &its);
  CHECK(hits() - h0 == 0);
  CHECK(fallbacks() - f0 == lookups);
  CHECK(dispatch_access::views_built(second) == 1);  // found in the map every time, never rebuilt
  CHECK(dispatch_access::l1_claims(second) == 0);
  CHECK(dispatch_access::l1_owner(steady_state_type) == first.id());  // untouched by the second
}

TEST_CASE("dispatch tables: an instance created after another died gets its own view, never the dead one's") {
  hiding_policy hide;
  std::uint64_t dead_id = 0;
  {
    dispatch_cache dying(hide.policy());
    const exposed_interfaces& view = dying.interfaces_for(successor_type);
    dead_id = dying.id();
    REQUIRE(dispatch_access::l1_owner(successor_type) == dead_id);
    REQUIRE(view.entries().size() == 2);
  }
  // Given back on destruction: nothing in the descriptor refers to the freed view.
  CHECK(dispatch_access::l1_owner(successor_type) == 0);
  CHECK(dispatch_access::l1_view(successor_type) == nullptr);

  // The successor's policy differs (it exposes IMarshal): seeing the dead view would show.
  dispatch_cache successor;
  CHECK(successor.id() != dead_id);  // ids are never reused, so no slot can match by accident
  const exposed_interfaces& view = successor.interfaces_for(successor_type);
  CHECK(view.cache_id() == successor.id());
  CHECK(view.entries().size() == 3);
  CHECK(successor.find(successor_type, imarshal.id) != nullptr);
  CHECK(dispatch_access::l1_owner(successor_type) == successor.id());  // took the L1 over
  const std::uint64_t h0 = dispatch_access::l1_hits_on_this_thread();
  CHECK(&successor.interfaces_for(successor_type) == &view);
  CHECK(dispatch_access::l1_hits_on_this_thread() - h0 == 1);

  // While the successor lives, an instance with the dead one's policy gets a view of its own
  // (the id in the L1 is not its id), with its own policy.
  dispatch_cache another(hide.policy());
  const exposed_interfaces& other_view = another.interfaces_for(successor_type);
  CHECK(other_view.cache_id() == another.id());
  CHECK(other_view.entries().size() == 2);
  CHECK(successor.interfaces_for(successor_type).entries().size() == 3);
}

TEST_CASE("dispatch tables: instances born and destroyed while others look up never get a view that is not theirs") {
  // Each thread makes an instance (half of them hiding IMarshal), looks the type up, checks
  // that the view is its own and shows its policy, and destroys it: the L1 is claimed, given
  // back and taken over all the time while other threads' instances hit it or fall back.
  constexpr int threads = 4;
  const int rounds = static_cast<int>(200 * palrt::testing::scale());
  struct tally {
    std::atomic<long> foreign{0};       // a view of another instance
    std::atomic<long> wrong_policy{0};  // a view showing the other policy
    std::atomic<long> lookups{0};
  };
  auto t = std::make_shared<tally>();
  const std::uint64_t tables_before = dispatch_access::tables_built();
  const int overstayed = run_together(threads, [t, rounds](int i) {
    hiding_policy hide;
    for (int r = 0; r < rounds; ++r) {
      const bool hiding = (i + r) % 2 == 0;
      dispatch_cache instance(hiding ? hide.policy() : dispatch_policy{});
      for (int k = 0; k < 8; ++k) {
        const exposed_interfaces& view = instance.interfaces_for(churn_type);
        t->lookups.fetch_add(1);
        if (view.cache_id() != instance.id()) t->foreign.fetch_add(1);
        if (view.entries().size() != (hiding ? 2u : 3u) || exposes(view, imarshal) == hiding)
          t->wrong_policy.fetch_add(1);
      }
    }
  });
  REQUIRE_MESSAGE(overstayed == 0, overstayed << " of 4 threads never finished their rounds");
  CHECK(t->lookups.load() == static_cast<long>(threads) * rounds * 8);
  CHECK_MESSAGE(t->foreign.load() == 0, t->foreign.load() << " lookups returned another instance's view");
  CHECK_MESSAGE(t->wrong_policy.load() == 0, t->wrong_policy.load() << " lookups showed the other policy");
  CHECK(dispatch_access::tables_built() - tables_before <= 1);  // built by the first round at most, never again
  CHECK(dispatch_access::l1_owner(churn_type) == 0);            // every instance gave its claim back
}

TEST_CASE(
    "dispatch tables: a descriptor with a null or repeated interface is rejected by name, every time, and nothing is "
    "kept") {
  static const interface_descriptor* const with_null[] = {&istream, nullptr, &ipersist};
  static const type_descriptor null_interface_type{"WithNull", unknown_slots, with_null};
  static const interface_descriptor istream_again{iid(3), "IStreamAgain", stream_methods};
  static const interface_descriptor* const with_repeat[] = {&istream, &ipersist, &istream_again};
  static const type_descriptor repeated_id_type{"WithRepeat", unknown_slots, with_repeat};

  const std::uint64_t before = dispatch_access::tables_built();
  const std::string null_message = message_of([] { dispatch_table_for(null_interface_type); });
  MESSAGE(null_message);
  CHECK(null_message.find("'WithNull'") != std::string::npos);
  CHECK(null_message.find("interface #1 is null") != std::string::npos);
  CHECK(null_message.find("'IStream'") != std::string::npos);  // the interface before it, to find the spot

  const std::string repeat_message = message_of([] { dispatch_table_for(repeated_id_type); });
  MESSAGE(repeat_message);
  CHECK(repeat_message.find("'WithRepeat'") != std::string::npos);
  CHECK(repeat_message.find("#0 'IStream'") != std::string::npos);
  CHECK(repeat_message.find("#2 'IStreamAgain'") != std::string::npos);
  CHECK(repeat_message.find("{00000003-0000-0000-c000-000000000046}") != std::string::npos);

  // Deterministic: the same error again, from an instance too, and nothing was cached.
  CHECK(message_of([] { dispatch_table_for(null_interface_type); }) == null_message);
  CHECK(message_of([] { dispatch_table_for(repeated_id_type); }) == repeat_message);
  dispatch_cache instance;
  CHECK(message_of([&] { instance.interfaces_for(repeated_id_type); }) == repeat_message);
  CHECK(message_of([&] { (void)instance.find(null_interface_type, istream.id); }) == null_message);
  CHECK(dispatch_access::published_table(null_interface_type) == nullptr);
  CHECK(dispatch_access::published_table(repeated_id_type) == nullptr);
  CHECK(dispatch_access::tables_built() == before);
  CHECK(dispatch_access::views_built(instance) == 0);
  CHECK(dispatch_access::l1_owner(repeated_id_type) == 0);
  // The instance is still fine for good types.
  CHECK(instance.find(layout_type, istream.id) == dispatch_table_for(layout_type).find(istream.id)->vtable());
}

TEST_CASE(
    "dispatch tables: each vtable is the base slots then the interface's methods, in order; find() by id, null when "
    "unknown") {
  const dispatch_table& table = dispatch_table_for(layout_type);
  CHECK(&table.type() == &layout_type);
  REQUIRE(table.interfaces().size() == widget_interface_count);
  CHECK(std::is_sorted(table.interfaces().begin(), table.interfaces().end(),
                       [](const interface_vtable& a, const interface_vtable& b) { return a.id < b.id; }));
  dispatch_cache instance;
  for (const interface_descriptor* iface : widget_interfaces) {
    CAPTURE(iface->name);
    const interface_vtable* entry = table.find(iface->id);
    REQUIRE(entry);
    CHECK(entry->descriptor == iface);
    REQUIRE(entry->slots.size() == std::size(unknown_slots) + iface->methods.size());
    CHECK(std::equal(std::begin(unknown_slots), std::end(unknown_slots), entry->slots.begin()));
    CHECK(std::equal(iface->methods.begin(), iface->methods.end(), entry->slots.begin() + std::size(unknown_slots)));
    CHECK(entry->vtable() == entry->slots.data());
    CHECK(instance.find(layout_type, iface->id) == entry->vtable());
  }
  // Calling through a slot reaches the host's function.
  table.find(istream.id)->vtable()[std::size(unknown_slots) + 1]();
  CHECK(last_called.load() == 11);

  const interface_id unknown = iid(99);
  CHECK(table.find(unknown) == nullptr);
  CHECK(instance.find(layout_type, unknown) == nullptr);
  CHECK(instance.interfaces_for(layout_type).find(unknown) == nullptr);

  // Edge shapes: a type with no interfaces, and one whose vtables have no shared slots.
  CHECK(dispatch_table_for(no_interfaces_type).interfaces().empty());
  CHECK(instance.find(no_interfaces_type, istream.id) == nullptr);
  const interface_vtable* bare = dispatch_table_for(no_base_slots_type).find(imarshal.id);
  REQUIRE(bare);
  CHECK(std::equal(bare->slots.begin(), bare->slots.end(), std::begin(marshal_methods), std::end(marshal_methods)));
}

TEST_CASE("dispatch tables: an interface_id is a GUID as it lies in memory, so a host can copy a native IID in") {
  struct native_guid {  // the layout of a Win32/COM GUID
    std::uint32_t data1;
    std::uint16_t data2, data3;
    std::uint8_t data4[8];
  };
  static_assert(sizeof(native_guid) == sizeof(interface_id));
  const native_guid iunknown{0x00000000, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
  const native_guid idispatch{0x00020400, 0x0000, 0x0000, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}};
  interface_id copied;
  std::memcpy(copied.bytes.data(), &idispatch, sizeof copied.bytes);
  CHECK(copied == interface_id::from_guid(0x00020400, 0, 0, {0xC0, 0, 0, 0, 0, 0, 0, 0x46}));
  std::memcpy(copied.bytes.data(), &iunknown, sizeof copied.bytes);
  CHECK(copied == iid(0));
  CHECK(iid(1) != iid(2));
  CHECK((iid(1) < iid(2)) != (iid(2) < iid(1)));  // a strict order, for the binary search
}
