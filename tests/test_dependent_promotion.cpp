// SPDX-License-Identifier: MIT
// Dependent promotion in linear time (palrt/gc/dependent_promotion.hpp): chains laid against
// the walk order, many handles on one primary, recursive marking, young collections, moving
// collectors, and promotions one after another.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <stdexcept>
#include <vector>

#include "palrt/gc/dependent_promotion.hpp"
#include "palrt/gc/handle_table.hpp"
#include "palrt/gc/handle_walk.hpp"

using namespace palrt::gc;

namespace {

struct object {
  alignas(16) int id = 0;
  bool marked = false;
};

// A tracing collector's mark phase in miniature: a mark bit and a mark stack, counting the
// calls it makes into the table.
struct marker {
  std::vector<object*> stack;
  std::size_t is_alive_calls = 0;
  std::size_t marks = 0;
  bool is_alive(void* o) {
    ++is_alive_calls;
    return static_cast<object*>(o)->marked;
  }
  void mark(void* o) {
    ++marks;
    auto* x = static_cast<object*>(o);
    if (!x->marked) {
      x->marked = true;
      stack.push_back(x);
    }
  }
  // Marks the roots, starts the promotion and drains the stack, reporting each marked object.
  std::size_t run(dependent_promotion& p, const std::vector<object*>& roots) {
    for (object* r : roots) mark(r);
    std::size_t promoted = p.start([&](void* o) { return is_alive(o); }, [&](void* o) { mark(o); });
    while (!stack.empty()) {
      object* o = stack.back();
      stack.pop_back();
      promoted += p.on_marked(o, [&](void* s) { mark(s); });
    }
    return promoted;
  }
};

// The order in which walks visit `handles` (by slot address, as for_each_slot reports them).
std::vector<handle> in_walk_order(const handle_table& table, handle_kind kind) {
  std::vector<handle> order;
  table.for_each_slot(kind, [&](handle_slot s) { order.push_back(s.as_handle()); });
  return order;
}

// A chain of n dependent handles over n + 1 objects, d[i]: o[i] -> o[i + 1], laid out so that
// the walk meets the links in the given order.
struct chain {
  handle_table table;
  std::vector<std::unique_ptr<object>> objects;
  std::vector<handle> handles;
  chain(std::size_t n, bool reverse) {
    for (std::size_t i = 0; i <= n; ++i) {
      objects.push_back(std::make_unique<object>());
      objects.back()->id = static_cast<int>(i);
    }
    for (std::size_t i = 0; i < n; ++i) handles.push_back(table.allocate(handle_kind::dependent, nullptr));
    std::vector<handle> order = in_walk_order(table, handle_kind::dependent);
    REQUIRE(order.size() == n);
    if (reverse) std::reverse(order.begin(), order.end());
    for (std::size_t i = 0; i < n; ++i) {
      handle_table::set_target(order[i], objects[i].get());
      table.set_secondary(order[i], objects[i + 1].get());
    }
  }
  ~chain() {
    for (handle h : handles) (void)table.release(h);
  }
};

}  // namespace

TEST_CASE(
    "dependent promotion: a chain against the walk order is promoted in one walk, in calls linear in its length") {
  for (const bool reverse : {false, true}) {
    CAPTURE(reverse);
    const std::size_t n = 4000;
    chain c(n, reverse);
    dependent_promotion p(c.table);
    marker m;
    CHECK(m.run(p, {c.objects[0].get()}) == n);
    std::size_t unmarked = 0;
    for (auto& o : c.objects) unmarked += !o->marked;
    CHECK_MESSAGE(unmarked == 0, unmarked << " objects of the chain were not promoted");
    CHECK(p.pending() == 0);
    // Linear: at most two liveness tests per handle (primary, then secondary) and one mark
    // per link, whatever the order (rounds of promote_dependents would make n rounds of n).
    CHECK(m.is_alive_calls <= 2 * n);
    CHECK(m.marks == n + 1);  // the root and each secondary once
  }
}

TEST_CASE("dependent promotion: handles whose primary stays dead wait, and the dependent sweep clears them") {
  handle_table table;
  object root, dead, s1, s2, s3;
  root.id = 1;
  dead.id = 2;
  const handle a = table.allocate(handle_kind::dependent, &root, &s1);
  const handle b = table.allocate(handle_kind::dependent, &dead, &s2);
  const handle c = table.allocate(handle_kind::dependent, &dead, &s3);
  dependent_promotion p(table);
  marker m;
  CHECK(m.run(p, {&root}) == 1);
  CHECK(s1.marked);
  CHECK_FALSE(s2.marked);
  CHECK_FALSE(s3.marked);
  CHECK(p.pending() == 2);
  std::set<void*> reported;
  CHECK(table.sweep_weak(
            handle_kind::dependent, [](void* o) { return static_cast<object*>(o)->marked; },
            [&](void*, void* s) { reported.insert(s); }) == 2);
  CHECK(reported == std::set<void*>{&s2, &s3});
  for (handle h : {a, b, c}) (void)table.release(h);
}

TEST_CASE(
    "dependent promotion: many handles on one primary are all reported by its first on_marked, and mark may recurse") {
  handle_table table;
  object primary, other;
  std::vector<std::unique_ptr<object>> secondaries;
  std::vector<handle> handles;
  for (int i = 0; i < 500; ++i) {
    secondaries.push_back(std::make_unique<object>());
    handles.push_back(table.allocate(handle_kind::dependent, i % 2 ? &primary : &other, secondaries.back().get()));
  }
  dependent_promotion p(table);
  CHECK(p.start([](void* o) { return static_cast<object*>(o)->marked; }, [](void*) {}) == 0);
  CHECK(p.pending() == 500);
  // A recursive marker: marking a secondary marks `other` too, from inside the first call.
  std::size_t reported = 0;
  std::function<void(void*)> mark = [&](void* o) {
    ++reported;
    auto* x = static_cast<object*>(o);
    if (x->marked) return;
    x->marked = true;
    if (x == secondaries[1].get()) {
      other.marked = true;
      p.on_marked(&other, mark);
    }
  };
  primary.marked = true;
  CHECK(p.on_marked(&primary, mark) == 250);
  CHECK(reported == 500);
  CHECK(p.on_marked(&primary, mark) == 0);  // once
  CHECK(p.pending() == 0);
  std::size_t unmarked = 0;
  for (auto& s : secondaries) unmarked += !s->marked;
  CHECK(unmarked == 0);
  for (handle h : handles) (void)table.release(h);
}

TEST_CASE("dependent promotion: a young promotion walks only young blocks; a moving collector marks by the old address "
          "and relocates after") {
  handle_table table;
  object old_primary, old_secondary;
  const handle old_one = table.allocate(handle_kind::dependent, &old_primary, &old_secondary);
  table.age_handles(0, 1);
  // A young dependent in a block of its own kind's young blocks: the old block holds 119 free
  // slots, so allocate from a thread whose cache... the same thread's cache holds the rest of
  // the old block: a new handle lands in it and makes it young. Fill the old block first.
  std::vector<handle> filler;
  object filler_target;
  while (filler.size() < 200) filler.push_back(table.allocate(handle_kind::dependent, nullptr));
  table.age_handles(all_generations, 1);
  object young_primary, young_secondary, young_primary_moved, young_secondary_moved;
  const handle young = table.allocate(handle_kind::dependent, &young_primary, &young_secondary);
  {
    dependent_promotion p(table, 0);
    std::size_t calls = 0;
    CHECK(p.start(
              [&](void* o) {
                ++calls;
                CHECK(o != &old_primary);  // the old block is not walked
                return false;
              },
              [](void*) {}) == 0);
    CHECK(p.pending() >= 1);
    // The collector evacuates the young primary, reporting the address the handle holds.
    std::vector<void*> marked;
    CHECK(p.on_marked(&young_primary, [&](void* s) { marked.push_back(s); }) == 1);
    CHECK(marked == std::vector<void*>{&young_secondary});
  }
  handle_walk relocate(table, handle_kind::dependent, 0);
  relocate.sweep_relocate([&](void* o) -> void* {
    if (o == &young_primary) return &young_primary_moved;
    if (o == &young_secondary) return &young_secondary_moved;
    return nullptr;
  });
  CHECK(handle_table::target(young) == &young_primary_moved);
  CHECK(table.secondary(young) == &young_secondary_moved);
  CHECK(handle_table::target(old_one) == &old_primary);  // not condemned: untouched
  (void)table.release(young);
  (void)table.release(old_one);
  for (handle h : filler) (void)table.release(h);
  (void)filler_target;
}

TEST_CASE("dependent promotion: a new promotion does not see the last one's chains, and start runs once") {
  handle_table table;
  object p1, s1;
  const handle h = table.allocate(handle_kind::dependent, &p1, &s1);
  {
    dependent_promotion first(table);
    CHECK(first.start([](void*) { return false; }, [](void*) {}) == 0);
    CHECK(first.pending() == 1);
    CHECK_THROWS_AS(first.start([](void*) { return false; }, [](void*) {}), std::logic_error);
  }
  {
    dependent_promotion stale(table);
    CHECK(stale.start([](void*) { return false; }, [](void*) {}) == 0);
    CHECK(stale.pending() == 1);
    dependent_promotion newer(table);
    CHECK_THROWS_AS(stale.on_marked(&p1, [](void*) {}), std::logic_error);  // not a silent 0
    dependent_promotion newest(table);
    CHECK_THROWS_AS(newer.start([](void*) { return false; }, [](void*) {}), std::logic_error);
  }
  handle_table::set_target(h, nullptr);  // no primary now: nothing waits
  dependent_promotion second(table);
  CHECK(second.start([](void*) { return false; }, [](void*) {}) == 0);
  CHECK(second.pending() == 0);
  std::size_t reported = 0;
  CHECK(second.on_marked(&p1, [&](void*) { ++reported; }) == 0);
  CHECK(reported == 0);
  // Promotion after promotion, past the wrap of the buckets' epoch (255): each sees its own
  // chain only, once.
  handle_table::set_target(h, &p1);
  std::size_t wrong = 0;
  for (int round = 0; round < 600; ++round) {
    dependent_promotion p(table);
    (void)p.start([](void*) { return false; }, [](void*) {});
    std::size_t n = 0;
    wrong += p.pending() != 1;
    wrong += p.on_marked(&p1, [&](void* s) { n += s == &s1; }) != 1 || n != 1;
    wrong += p.on_marked(&p1, [](void*) {}) != 0;
  }
  CHECK_MESSAGE(wrong == 0, wrong << " wrong answers over 600 promotions");
  (void)table.release(h);
}

TEST_CASE("dependent promotion: a table with no dependent block, and an indexed table") {
  handle_table empty;
  dependent_promotion none(empty);
  CHECK(none.start([](void*) { return true; }, [](void*) {}) == 0);
  object x;
  CHECK(none.on_marked(&x, [](void*) {}) == 0);

  handle_table indexed(handle_table_options{.index_dependents = true});
  const std::size_t n = 1000;
  std::vector<std::unique_ptr<object>> objects;
  std::vector<handle> handles;
  for (std::size_t i = 0; i <= n; ++i) objects.push_back(std::make_unique<object>());
  for (std::size_t i = n; i-- > 0;)
    handles.push_back(indexed.allocate(handle_kind::dependent, objects[i].get(), objects[i + 1].get()));
  dependent_promotion p(indexed);
  marker m;
  CHECK(m.run(p, {objects[0].get()}) == n);
  CHECK(objects[n]->marked);
  for (handle h : handles) (void)indexed.release(h);
}
