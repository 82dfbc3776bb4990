// SPDX-License-Identifier: MIT
// palrt-bench cache, peer `rculfhash`: liburcu's lock-free resizable hash table (cds_lfht,
// Debian liburcu-dev) from identity to the wrapper's weak handle, with liburcu's default
// flavour (memb: membarrier-based, the same asymmetric scheme as palrt's read sections). A
// hit: rcu_read_lock(), cds_lfht_lookup(), copy the handle, rcu_read_unlock(); then the
// handle's target and consume(). Every thread that reads is registered with liburcu first
// (rcu_register_thread(), once per thread, outside the timed loop).
//
// _LGPL_SOURCE inlines liburcu's read-side fast paths (rcu_read_lock/unlock) into this file,
// as palrt's read_section is inlined into its callers; without it each is a call into the
// shared library. liburcu allows it for code under a GPL-compatible licence (palrt's MIT
// licence is), and only this file includes liburcu. cds_lfht_lookup() itself is out of line
// in liburcu-cds either way.
#define _LGPL_SOURCE 1

#include <algorithm>
#include <bit>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include <urcu.h>
#include <urcu/rculfhash.h>

#include "bench_cache.hpp"

namespace palrt::bench::cache {

namespace {

// The calling thread's registration with liburcu, undone when the thread exits (liburcu
// requires a registered thread to unregister before it goes).
struct urcu_registration {
  bool registered = false;
  ~urcu_registration() {
    if (registered) rcu_unregister_thread();
  }
};
thread_local urcu_registration this_thread_registration;

void register_this_thread() {
  if (this_thread_registration.registered) return;
  rcu_register_thread();
  this_thread_registration.registered = true;
}

struct peer_node {
  cds_lfht_node node;
  const void* identity = nullptr;
  gc::handle handle;
};

int match_identity(cds_lfht_node* node, const void* key) {
  return caa_container_of(node, peer_node, node)->identity == key;
}

// The table and its nodes. Destroyed on a registered thread outside a read-side section
// (the thread that built it: setup and teardown run on the tool's main thread).
class lfht_map {
 public:
  explicit lfht_map(const peer_inputs& inputs) : nodes_(inputs.identities->size()) {
    register_this_thread();
    const unsigned long buckets = std::bit_ceil(std::max<std::size_t>(nodes_.size(), 1));
    table_ = cds_lfht_new(buckets, 1, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, nullptr);
    if (table_ == nullptr) throw std::bad_alloc();
    rcu_read_lock();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      peer_node& n = nodes_[i];
      cds_lfht_node_init(&n.node);
      n.identity = (*inputs.identities)[i];
      n.handle = inputs.handles[i];
      if (cds_lfht_add_unique(table_, peer_hash(n.identity), match_identity, n.identity, &n.node) != &n.node) {
        rcu_read_unlock();
        remove_all_and_destroy();
        throw std::runtime_error("rculfhash: an identity was inserted twice");
      }
      ++added_;
    }
    rcu_read_unlock();
  }
  lfht_map(const lfht_map&) = delete;
  lfht_map& operator=(const lfht_map&) = delete;
  ~lfht_map() { remove_all_and_destroy(); }

  gc::handle find(const void* identity) const noexcept {
    gc::handle h;
    rcu_read_lock();
    cds_lfht_iter iter;
    cds_lfht_lookup(table_, peer_hash(identity), match_identity, identity, &iter);
    if (cds_lfht_node* n = cds_lfht_iter_get_node(&iter)) h = caa_container_of(n, peer_node, node)->handle;
    rcu_read_unlock();
    return h;
  }

 private:
  void remove_all_and_destroy() noexcept {
    rcu_read_lock();
    for (std::size_t i = 0; i < added_; ++i) cds_lfht_del(table_, &nodes_[i].node);
    rcu_read_unlock();
    synchronize_rcu();  // no reader sees a node once nodes_ is freed
    cds_lfht_destroy(table_, nullptr);
  }

  std::vector<peer_node> nodes_;
  std::size_t added_ = 0;  // nodes_[0, added_) are in the table
  cds_lfht* table_ = nullptr;
};

}  // namespace

measured_variant rculfhash_hit_variant(const peer_inputs& inputs) {
  auto map = std::make_shared<lfht_map>(inputs);
  return hit_variant(
      "rculfhash", inputs.identities, inputs.team,
      [map](const void* id) {
        const gc::handle h = map->find(id);
        return consume(h ? gc::handle_table::target(h) : nullptr);
      },
      [] { register_this_thread(); });
}

}  // namespace palrt::bench::cache
