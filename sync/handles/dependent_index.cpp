// SPDX-License-Identifier: MIT
// The dependent handles by primary: the protocol is stated in internal/dependent_index.hpp.
#include "palrt/gc/internal/dependent_index.hpp"

#include <cstdlib>
#include <new>

namespace palrt::gc::internal {

namespace {
constexpr std::size_t initial_buckets = 64;
}  // namespace

dependent_index::table* dependent_index::make_table(std::size_t buckets, unsigned generation) noexcept {
  // malloc, not new: growth runs in link(), which must not throw.
  void* memory = std::malloc(sizeof(table) + buckets * sizeof(bucket));
  if (!memory) return nullptr;
  auto* t = new (memory) table{buckets - 1, generation, nullptr, nullptr};
  t->buckets = reinterpret_cast<bucket*>(static_cast<char*>(memory) + sizeof(table));
  for (std::size_t i = 0; i < buckets; ++i) new (&t->buckets[i]) bucket;
  return t;
}

std::size_t dependent_index::bucket_of(const table& t, const void* primary) noexcept {
  // Objects are aligned and often allocated in runs: mix the bits so they spread.
  auto h = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(primary));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return static_cast<std::size_t>(h) & t.mask;
}

dependent_index::dependent_index() {
  table* t = make_table(initial_buckets, 0);
  if (!t) throw std::bad_alloc();
  current_.store(t, std::memory_order_relaxed);
}

dependent_index::~dependent_index() {
  table* t = current_.load(std::memory_order_relaxed);
  while (t) {
    table* older = t->replaced;
    std::free(t);
    t = older;
  }
}

void dependent_index::link(dependent_index_node& node, const void* primary) noexcept {
  std::lock_guard guard(lock_);
  table* t = current_.load(std::memory_order_relaxed);
  bucket& b = t->buckets[bucket_of(*t, primary)];
  node.key = primary;
  node.linked = true;
  // relaxed: published by the release store of the head (a reader that finds the node sees
  // its next); a reader on an older chain through this node retries (its unlink counted).
  node.next[t->generation].store(b.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
  b.head.store(&node, std::memory_order_release);
  const std::size_t n = linked_.fetch_add(1, std::memory_order_relaxed) + 1;
  if (n > t->mask + 1) grow();
}

void dependent_index::unlink(dependent_index_node& node) noexcept {
  std::lock_guard guard(lock_);
  if (!node.linked) return;
  table* t = current_.load(std::memory_order_relaxed);
  const unsigned g = t->generation;
  bucket& b = t->buckets[bucket_of(*t, node.key)];
  dependent_index_node* next = node.next[g].load(std::memory_order_relaxed);
  dependent_index_node* at = b.head.load(std::memory_order_relaxed);
  if (at == &node) {
    b.head.store(next, std::memory_order_release);
  } else {
    while (at && at->next[g].load(std::memory_order_relaxed) != &node) at = at->next[g].load(std::memory_order_relaxed);
    // A linked node is in the chain of its key's bucket: anything else is a broken index.
    if (!at) std::abort();
    at->next[g].store(next, std::memory_order_release);
  }
  // The sequence, before any later write can move the node (its next) under a reader that
  // stands on it: the fence orders this increment before those stores, and a reader that
  // sees one of them sees the increment (its acquire fence, for_each_secondary_of).
  b.unlinks.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  node.linked = false;
  linked_.fetch_sub(1, std::memory_order_relaxed);
}

void dependent_index::grow() noexcept {
  table* old = current_.load(std::memory_order_relaxed);
  table* t = make_table((old->mask + 1) * 4, 1 - old->generation);
  if (!t) return;  // longer chains until the next link tries again
  const unsigned from = old->generation;
  const unsigned to = t->generation;
  // The new chains go through next[to]; the published ones (next[from]) stay as they are, so
  // a reader on the old table, or one stopped with the world, sees whole chains throughout.
  for (std::size_t i = 0; i <= old->mask; ++i) {
    for (dependent_index_node* n = old->buckets[i].head.load(std::memory_order_relaxed); n;
         n = n->next[from].load(std::memory_order_relaxed)) {
      bucket& b = t->buckets[bucket_of(*t, n->key)];
      n->next[to].store(b.head.load(std::memory_order_relaxed), std::memory_order_relaxed);
      b.head.store(n, std::memory_order_relaxed);
    }
  }
  t->replaced = old;
  // release: the new chains before the table that holds them. A reader still on `old` sees
  // current_ change and reads again.
  current_.store(t, std::memory_order_release);
}

std::size_t dependent_index::for_each_secondary_of(const void* primary, void* context,
                                                   void (*visit)(void*, void*)) const noexcept {
  for (;;) {
    const table* t = current_.load(std::memory_order_acquire);
    const bucket& b = t->buckets[bucket_of(*t, primary)];
    const std::uint32_t unlinks = b.unlinks.load(std::memory_order_acquire);
    // More steps than nodes means the walk left its chain (see the header): read again.
    const std::size_t limit = linked_.load(std::memory_order_relaxed) + 64;
    std::size_t steps = 0;
    std::size_t found = 0;
    bool complete = true;
    for (dependent_index_node* n = b.head.load(std::memory_order_acquire); n;
         n = n->next[t->generation].load(std::memory_order_acquire)) {
      if (++steps > limit) {
        complete = false;
        break;
      }
      if (n->slot->load(std::memory_order_acquire) == primary) {
        if (void* s = n->secondary->load(std::memory_order_acquire)) {
          visit(context, s);
          ++found;
        }
      }
      if (traversal_hook) [[unlikely]]
        traversal_hook(traversal_hook_context);
    }
    // acquire: the nexts read above come before the second look at the sequence (pairs with
    // unlink()'s release fence).
    std::atomic_thread_fence(std::memory_order_acquire);
    if (complete && b.unlinks.load(std::memory_order_relaxed) == unlinks &&
        current_.load(std::memory_order_relaxed) == t)
      return found;
  }
}

std::size_t dependent_index::bytes() const noexcept {
  // No lock (counters() may run with the world stopped): a table's `replaced` is written
  // before the table is published and never again.
  std::size_t n = 0;
  for (const table* t = current_.load(std::memory_order_acquire); t; t = t->replaced)
    n += sizeof(table) + (t->mask + 1) * sizeof(bucket);
  return n;
}

std::size_t dependent_index::bucket_count() const noexcept {
  return current_.load(std::memory_order_acquire)->mask + 1;
}

}  // namespace palrt::gc::internal
