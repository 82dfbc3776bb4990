// SPDX-License-Identifier: MIT
#include "palrt/sync/internal/node_pool.hpp"

#include <memory>

namespace palrt::sync::internal {

node_pool::~node_pool() {
  for (work_node* n = all_; n;) {
    std::unique_ptr<work_node> owned(n);  // made by take(), owned by the pool until now
    n = n->pool_all_next;
  }
}

work_node& node_pool::take() {
  {
    std::lock_guard lock(mutex_);
    if (work_node* n = free_) {
      free_ = n->pool_free_next;
      n->pool_free_next = nullptr;
      return *n;
    }
  }
  auto made = std::make_unique<work_node>();
  allocations_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
  std::lock_guard lock(mutex_);
  made->pool_all_next = all_;
  all_ = made.get();
  return *made.release();  // owned through all_ from here on
}

void node_pool::give(work_node& node) noexcept {
  std::lock_guard lock(mutex_);
  node.pool_free_next = free_;
  free_ = &node;
}

void node_pool::give_chain(work_node& first, work_node& last) noexcept {
  std::lock_guard lock(mutex_);
  last.pool_free_next = free_;
  free_ = &first;
}

}  // namespace palrt::sync::internal
