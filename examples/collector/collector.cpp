// SPDX-License-Identifier: MIT
// A host's own collector driving palrt's handle table (palrt/gc/handle_table.hpp; docs/GC.md,
// "Wiring palrt into a host's collector"): a toy mark-sweep heap, whose collection takes the
// table's strong handles as roots, keeps a dependent handle's secondary alive while its
// primary lives, and clears the weak handles of what it found dead before it frees anything,
// in the order the table's header gives (CoreCLR's). The toy is single-threaded, so its world
// is always "stopped"; a real host makes these calls with its mutators stopped, and palrt's
// side of them is the same (tools/hosts/ has the real ones).
// scripts/test.sh builds it against an installed palrt and runs it:
//   c++ -std=c++20 collector.cpp $(pkg-config --cflags --libs palrt)
// Exit status 0 and one line when every handle ended as its kind says, 1 with a line on stderr
// per failure.
#include <cstdio>
#include <iterator>
#include <memory>
#include <vector>

#include <palrt/gc/handle_table.hpp>

namespace gc = palrt::gc;

namespace {

// The host's objects: a mark bit and two reference fields.
struct cell {
  cell* fields[2] = {nullptr, nullptr};
  bool marked = false;
};

struct collection_report {
  std::size_t promoted = 0;            // secondaries kept alive by their primaries
  std::size_t weak_cleared = 0;        // weak_short and weak_long handles cleared
  std::size_t dependents_cleared = 0;  // dependent handles whose primary died
  std::size_t freed = 0;               // cells freed
};

// The host's heap owns every cell; palrt's table only refers to them.
class toy_heap {
 public:
  explicit toy_heap(gc::handle_table& table) : table_(table) {}

  cell* allocate() { return cells_.emplace_back(std::make_unique<cell>()).get(); }
  std::size_t size() const noexcept { return cells_.size(); }

  collection_report collect() {
    collection_report report;
    auto is_alive = [](void* target) { return static_cast<cell*>(target)->marked; };
    auto mark_target = [this](void* target) { mark(static_cast<cell*>(target)); };
    // 1. Mark from the roots. The table's strong handles are this host's only roots (a real
    //    host scans its stacks and globals too). Then the dependent handles: a live primary
    //    keeps its secondary, and marking a secondary may make another primary live, so
    //    promote until a round marks nothing.
    table_.for_each_strong(mark_target);
    while (std::size_t promoted = table_.promote_dependents(is_alive, mark_target)) report.promoted += promoted;
    // 2. Mark over. Close the read gate first: from here until the last sweep, a gated read of
    //    a weak_long or dependent handle waits rather than return a target found dead. Then
    //    weak_short handles, before any finalization, so they never see an object being
    //    finalized.
    table_.close_tracking_reads();
    report.weak_cleared += table_.sweep_weak(gc::handle_kind::weak_short, is_alive);
    // 3. The host's finalization would run here (and mark what finalizers keep, then promote
    //    again); this heap has no finalizers. Then weak_long and dependent handles. A cleared
    //    dependent handle reports its secondary, which is the host's from then on: here it is
    //    a cell like any other, freed below unless something else marked it.
    report.weak_cleared += table_.sweep_weak(gc::handle_kind::weak_long, is_alive);
    report.dependents_cleared =
        table_.sweep_weak(gc::handle_kind::dependent, is_alive, [](void* /*primary*/, void* /*secondary*/) {});
    table_.open_tracking_reads();
    // 4. Only now free: no handle refers to an unmarked cell any more.
    std::erase_if(cells_, [&](const std::unique_ptr<cell>& c) {
      report.freed += !c->marked;
      return !c->marked;
    });
    for (auto& c : cells_) c->marked = false;
    return report;
  }

 private:
  void mark(cell* root) {
    std::vector<cell*> pending{root};
    while (!pending.empty()) {
      cell* c = pending.back();
      pending.pop_back();
      if (!c || c->marked) continue;
      c->marked = true;
      pending.insert(pending.end(), std::begin(c->fields), std::end(c->fields));
    }
  }

  gc::handle_table& table_;
  std::vector<std::unique_ptr<cell>> cells_;
};

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "collector: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  gc::handle_table table;
  toy_heap heap(table);

  // root -> child; side is referenced by nothing but a dependent handle whose primary is
  // child; garbage (and its own dependent secondary) is reachable from nothing at all.
  cell* root = heap.allocate();
  cell* child = heap.allocate();
  root->fields[0] = child;
  cell* side = heap.allocate();
  cell* garbage = heap.allocate();
  cell* side_of_garbage = heap.allocate();

  gc::handle strong = table.allocate(gc::handle_kind::strong, root);
  gc::handle weak_to_child = table.allocate(gc::handle_kind::weak_short, child);
  gc::handle weak_to_garbage = table.allocate(gc::handle_kind::weak_short, garbage);
  gc::handle long_weak_to_garbage = table.allocate(gc::handle_kind::weak_long, garbage);
  gc::handle child_to_side = table.allocate(gc::handle_kind::dependent, child, side);
  gc::handle garbage_to_side = table.allocate(gc::handle_kind::dependent, garbage, side_of_garbage);

  // First collection: the root's graph lives (with side, through child), garbage dies.
  const collection_report first = heap.collect();
  check(table.target(strong) == root, "the strong handle lost its target");
  check(table.target(weak_to_child) == child, "a weak handle to a reachable cell was cleared");
  check(table.target(weak_to_garbage) == nullptr, "a weak_short handle to a dead cell was not cleared");
  check(table.gated_target(long_weak_to_garbage) == nullptr, "a weak_long handle to a dead cell was not cleared");
  check(table.gated_secondary(child_to_side) == side, "a live primary's secondary was not kept");
  check(table.gated_target(garbage_to_side) == nullptr && table.gated_secondary(garbage_to_side) == nullptr,
        "a dead primary's dependent handle was not cleared");
  check(first.promoted == 1 && first.weak_cleared == 2 && first.dependents_cleared == 1 && first.freed == 2,
        "the first collection's counts are not 1 promoted, 2 weak cleared, 1 dependent cleared, 2 freed");
  check(heap.size() == 3, "the heap does not hold root, child and side");

  // Second collection, with the root's strong handle released: nothing is reachable now.
  table.release(strong);
  const collection_report second = heap.collect();
  check(table.target(weak_to_child) == nullptr, "a weak handle outlived its target");
  check(table.gated_secondary(child_to_side) == nullptr, "a dependent handle outlived its primary");
  check(second.weak_cleared == 1 && second.dependents_cleared == 1 && second.freed == 3 && heap.size() == 0,
        "the second collection did not free the rest");

  for (gc::handle h : {weak_to_child, weak_to_garbage, long_weak_to_garbage, child_to_side, garbage_to_side})
    table.release(h);
  std::printf("collector: first collection freed %zu cells (%zu weak and %zu dependent handles cleared, %zu "
              "secondary kept), the second freed %zu after the root's handle was released\n",
              first.freed, first.weak_cleared, first.dependents_cleared, first.promoted, second.freed);
  return failures == 0 ? 0 : 1;
}
