// SPDX-License-Identifier: MIT
// The posters' fast path to the sync manager's worker: a ring of 16-byte entries for small
// posted items at normal priority, four to a cache line.
//
// Why: a posted item in a work node is two cache lines that move from the poster's CPU to the
// worker's, and the worker pays about one line transfer per item, which a virtual machine's
// vCPU placement may make cost ~250 ns (docs/BENCHMARKS.md, "post's slow mode"). An entry
// here is 16 bytes, written in order, so the worker reads four items per line and its walk in
// address order lets the hardware fetch the next lines while it runs the current ones: tens
// of nanoseconds per item where a node costs a whole transfer (docs/BENCHMARKS.md, "Packing
// posted items" and "post without a slow mode").
//
// What goes here: post() at work_priority::normal, without a delay, of a callable of at most 8
// bytes that is trivially copyable and trivially destructible (sync_manager.hpp, small_kind):
// the entry holds its bytes and its kind, the index of the function that runs such bytes
// (small_task_kinds.cpp). Everything else, and a small item that finds the ring full or
// closed, goes through a work node and the inbox (work_inbox.hpp).
//
// Entry: word = position << 16 | kind, then the 8 bytes. Positions count every claim of the
// manager's life (48 bits: at 10^8 posts a second they wrap after 32 days), so a word names
// one use of one slot, and a ticket for it (the word itself) matches nothing once the slot is
// reused. Kinds below first_kind are marks: empty (0), taken by the worker (1), cancelled (2).
//
// Protocol (positions are 64-bit counters; slot = position % capacity; tail holds the next
// position << 1 | the closed bit):
//   claim (any poster): CAS tail's position t -> t + 1 while t - published_head < capacity and
//     the closed bit is clear (seq_cst, see below); full or closed: the poster uses a node.
//   write: bits (plain), then word = t << 16 | kind (seq_cst store: the release that
//     publishes the bits, and W1 of the worker's park protocol, worker_state.hpp).
//   take (the worker, at head h): exchange word -> h << 16 | taken (acquire: the bits): one
//     read-modify-write, since the worker must both see the item and keep a canceller from
//     it. (The worker's look for work, ready(), loads the word first; in the probe of
//     docs/BENCHMARKS.md a load before the write cost no more than the write alone: the
//     worker's per-item cost is the lines it walks, not how it takes each.) The result says
//     what was there:
//       h's word with a kind: the item, ours to run; cancelled: skipped; anything else: not
//       published yet (a poster between its claim and its write), and the poster's write,
//       later in the word's modification order, overwrites our mark: we look again later.
//     Each 64 items, and before the worker parks, it stores published_head (release: its
//     reads of the bits before a poster's overwrite of them on the next lap).
//   cancel (any thread, with the word the post returned): CAS word -> same position, kind
//     cancelled. Of it and the worker's exchange exactly one finds the item's word: either the
//     item runs (and cancel fails) or it never runs (and cancel succeeds). A trivially
//     destructible callable has nothing to destroy.
//   close (a stop): fetch_or the closed bit into tail: a claim comes before it (and its item
//     is queued, run or cancelled by the stopping worker) or after it (and is refused).
// A claimed slot is always written (nothing between the claim and the write can fail or
// block), but a poster preempted there holds the worker at that position until it runs again:
// items are taken in the claims' order, which is what keeps post()'s order (below).
//
// Order with the node path (sync_manager.hpp: the oldest item of a priority first, a thread's
// posts in its order). A normal-priority node records, before its push, the ring's tail
// (ring_stamp, work_node.hpp). The worker runs the first node of its normal FIFO only once the
// ring's head has reached that stamp, and before the ring's item at the head; it looks at the
// ring's head before it takes the inbox's new nodes, so that a node pushed before the item it
// sees there is among them (work_queue.cpp: the other way round, a thread could push a node
// and write an item between the two looks, and the item would run first). Every ring item
// whose post happens before the node's has a position below the stamp (its claim happened
// before the stamp was read: coherence of tail), so it runs first; every ring item whose post
// happens after the node's has a position at least the stamps of that node and of every node
// pushed before it (their stamps were read before their pushes, which happen before the later
// claim through the inbox's release sequence), so it runs after. Nodes keep their push order.
//
// One consumer at a time: the worker the ring was handed to at its launch (worker_state.hpp).
// A worker that missed its stop deadline and was detached keeps the ring until it has cancelled
// what is left; a new worker launched meanwhile serves posts through nodes only
// (reopen_if_free() fails), and the ring reopens at a later start.
#pragma once

#include <atomic>
#include <cstdint>

namespace palrt::sync::internal {

// How a small item's bytes are run (small_task_kinds.cpp registers one per callable type).
using small_task_fn = void (*)(std::uint64_t);

class post_ring {
 public:
  post_ring() noexcept = default;
  post_ring(const post_ring&) = delete;
  post_ring& operator=(const post_ring&) = delete;
  ~post_ring();

  // 4096 entries, 64 KiB: the worker runs far more than that between two looks at a poster's
  // backlog, and a poster that finds it full only pays a node.
  static constexpr std::uint64_t capacity = 4096;
  static constexpr std::uint64_t empty = 0, taken = 1, cancelled = 2, first_kind = 3;
  static constexpr unsigned kind_bits = 16;

  static constexpr std::uint64_t word(std::uint64_t position, std::uint64_t kind) noexcept {
    return position << kind_bits | kind;
  }
  static constexpr std::uint64_t kind_of(std::uint64_t w) noexcept { return w & ((1u << kind_bits) - 1); }
  // Whether `w` holds an item (a kind, not a mark) for `position`.
  static constexpr bool holds_item(std::uint64_t w, std::uint64_t position) noexcept {
    return (w >> kind_bits) == (position & position_mask) && kind_of(w) >= first_kind;
  }

  // Any thread: queues (kind, bits); the item's word (its ticket), or 0 if the ring is full or
  // closed (nothing queued: the caller uses a node).
  std::uint64_t push(std::uint64_t kind, std::uint64_t bits) noexcept;
  // Any thread, before pushing a normal-priority node: the position its ring_stamp records.
  std::uint64_t stamp() const noexcept {
    // acquire: not needed for the order argument above (the stamp is read before the node's
    // release push), but it costs nothing on x86 and keeps the read from moving later.
    return tail_.load(std::memory_order_acquire) >> 1;
  }
  // cancel(): true if the item `w` names was queued and now never runs.
  bool cancel(std::uint64_t w) noexcept;

  // --- The consumer (the worker the ring was handed to) ---
  std::uint64_t head() const noexcept { return head_; }
  // Whether the item at the head is published (or cancelled: the worker has something to do).
  // seq_cst: W2' of the park protocol (worker_state.hpp).
  bool ready() const noexcept {
    const std::uint64_t w = word_of(slots_[head_ % capacity]).load(std::memory_order_seq_cst);
    return (w >> kind_bits) == (head_ & position_mask) && kind_of(w) >= cancelled;
  }
  enum class taken_item { item, skipped, none };
  // Takes the head's item: `item` (its kind and bits in the out parameters; the head moved on),
  // `skipped` (cancelled; the head moved on) or `none` (not published yet).
  taken_item take(std::uint64_t& kind, std::uint64_t& bits) noexcept;
  // Lets posters reuse the slots the worker has passed (every 64 items, and before a park).
  void publish_head() noexcept { published_head_.store(head_, std::memory_order_release); }
  // A stopping worker: cancels every item claimed before the close, waiting for the ones still
  // being written; how many it cancelled (cancel() got the others first). Then gives the ring up.
  std::uint64_t cancel_all_closed() noexcept;

  // --- The manager's lifecycle (under its start lock) ---
  void close() noexcept;
  // Opens the ring for a new worker if its last one gave it up (or it never had one): true,
  // and the next worker to start takes it. false: a detached worker still holds it, or the
  // first open could not map the entries (small items then use nodes).
  bool reopen_if_free() noexcept;
  // After reopen_if_free() for a worker that then failed to start: closed, and free again.
  // What was queued stays for the next worker.
  void unclaim() noexcept;

  // Tests: items claimed and not yet taken. Only while the worker is held inside a work item
  // (its head is its own; the hold orders it before this read).
  std::uint64_t waiting() const noexcept { return (tail_.load(std::memory_order_acquire) >> 1) - head_; }

 private:
  static constexpr std::uint64_t position_mask = (std::uint64_t{1} << (64 - kind_bits)) - 1;

  // Plain words in zero-filled pages, the word accessed through std::atomic_ref only: the
  // entries are mapped, not constructed, so that a manager that never posts a small item (or
  // has not yet) has not written, nor faulted in, 64 KiB at its bootstrap.
  struct alignas(16) entry {
    std::uint64_t word;
    std::uint64_t bits;  // written by the claimer before its publish, read by the taker after
  };
  static std::atomic_ref<std::uint64_t> word_of(entry& e) noexcept { return std::atomic_ref<std::uint64_t>(e.word); }
  static_assert(sizeof(entry) == 16 && std::atomic_ref<std::uint64_t>::required_alignment <= alignof(std::uint64_t));

  // position << 1 | closed. Starts closed: the first start opens it (reopen_if_free).
  alignas(64) std::atomic<std::uint64_t> tail_{1};
  // The worker's, every 64 items: where posters may write up to (one lap ahead).
  alignas(64) std::atomic<std::uint64_t> published_head_{0};
  // The consumer's own; in this object so that a new worker goes on where the last one stopped.
  alignas(64) std::uint64_t head_ = 0;
  // Whether the ring has no worker (none yet, or the last one gave it up).
  std::atomic<bool> free_{true};
  // capacity entries, mapped at the first reopen_if_free() (anonymous pages: zero, and
  // faulted in only as posts reach them); before it, no worker and no post touches them.
  entry* slots_ = nullptr;
};

// Kinds are process-wide (small_task_kinds.cpp): a kind >= first_kind for `run`, or 0 once
// every kind is taken (the type's items then use nodes); and a registered kind's function.
std::uint64_t register_small_task_kind(small_task_fn run) noexcept;
small_task_fn small_task_function(std::uint64_t kind) noexcept;

}  // namespace palrt::sync::internal
