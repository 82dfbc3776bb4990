// SPDX-License-Identifier: MIT
// The per-instance map from type descriptor to view: the protocol is in dispatch_view_map.hpp.
#include "palrt/interop/internal/dispatch_view_map.hpp"

#include "palrt/interop/internal/bucket_hash.hpp"

namespace palrt::interop::internal {

namespace {
// 8 slots hold 4 views before the first growth: most instances see a handful of types.
constexpr unsigned initial_bits = 3;
// bucket_of() takes the hash's top `bits` bits; it is exact for any width below 64, so a
// map of more than the identity cache's 4096 buckets is fine.
}  // namespace

struct dispatch_view_map::table {
  explicit table(unsigned b)
      : bits(b), slots(std::make_unique<std::atomic<const exposed_interfaces*>[]>(std::size_t{1} << b)) {}
  std::size_t capacity() const noexcept { return std::size_t{1} << bits; }

  const unsigned bits;
  const std::unique_ptr<std::atomic<const exposed_interfaces*>[]> slots;  // value-initialised: null
};

std::unique_ptr<dispatch_view_map::table> dispatch_view_map::make_table(unsigned bits) {
  return std::make_unique<table>(bits);
}

dispatch_view_map::dispatch_view_map() {
  tables_.push_back(make_table(initial_bits));
  // relaxed: the map is not shared yet; its owner is published to other threads by whatever
  // hands them the instance.
  current_.store(tables_.back().get(), std::memory_order_relaxed);
}

dispatch_view_map::~dispatch_view_map() = default;

const exposed_interfaces* dispatch_view_map::find(const type_descriptor& type) const noexcept {
  // (B') acquire: a table is filled before it is published (B, insert).
  const table& t = *current_.load(std::memory_order_acquire);
  const std::size_t mask = t.capacity() - 1;
  for (std::size_t i = bucket_of(fibonacci_hash(&type), t.bits);; i = (i + 1) & mask) {
    // (A') acquire: a view is built before it is stored into a slot (A, place).
    const exposed_interfaces* view = t.slots[i].load(std::memory_order_acquire);
    if (!view) return nullptr;  // at most half full: every probe ends at an empty slot
    if (&view->type() == &type) return view;
  }
}

void dispatch_view_map::place(const table& t, const exposed_interfaces& view) noexcept {
  const std::size_t mask = t.capacity() - 1;
  std::size_t i = bucket_of(fibonacci_hash(&view.type()), t.bits);
  // relaxed: only the writer, holding the lock, stores slots; it reads its own stores.
  while (t.slots[i].load(std::memory_order_relaxed)) i = (i + 1) & mask;
  // (A) release: the view's contents before its address (A', find).
  t.slots[i].store(&view, std::memory_order_release);
}

void dispatch_view_map::insert(const exposed_interfaces& view) {
  // relaxed: the writer made the current table itself.
  const table* t = current_.load(std::memory_order_relaxed);
  if (2 * (size_ + 1) > t->capacity()) {
    // Grow first: if an allocation throws, nothing has changed.
    tables_.reserve(tables_.size() + 1);
    std::unique_ptr<table> bigger = make_table(t->bits + 1);
    for (std::size_t i = 0; i < t->capacity(); ++i)
      if (const exposed_interfaces* v = t->slots[i].load(std::memory_order_relaxed)) place(*bigger, *v);
    t = bigger.get();
    tables_.push_back(std::move(bigger));  // cannot throw: reserved
    // (B) release: the new table's slots before its address (B', find).
    current_.store(t, std::memory_order_release);
  }
  place(*t, view);
  ++size_;
}

}  // namespace palrt::interop::internal
