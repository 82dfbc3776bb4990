// SPDX-License-Identifier: MIT
// copying_host::space: one mmap'd region of the copying host's heap (a nursery half, an old
// semispace, the pinned space).
//
// Why a mapping of its own per space: the collector makes a space it has just evacuated
// PROT_NONE until it allocates in it again, so a pointer the collector forgot to update (a
// handle slot not relocated, a root not scanned) faults at its first use instead of reading
// a stale copy that happens to look right. That is the suite's "no stale pointer" check, and
// it costs two mprotect calls per collection.
//
// Not thread-safe: the heap changes a space's protection only with the world stopped.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace copying_host {

class space {
 public:
  space(std::size_t bytes, const char* name) : bytes_(round_to_pages(bytes)), name_(name) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) fail("mmap");
    begin_ = static_cast<std::byte*>(p);
  }
  space(const space&) = delete;
  space& operator=(const space&) = delete;
  ~space() { ::munmap(begin_, bytes_); }

  std::byte* begin() const noexcept { return begin_; }
  std::byte* end() const noexcept { return begin_ + bytes_; }
  std::size_t bytes() const noexcept { return bytes_; }
  const char* name() const noexcept { return name_; }
  bool contains(const void* p) const noexcept {
    auto* b = static_cast<const std::byte*>(p);
    return b >= begin_ && b < begin_ + bytes_;
  }
  bool is_protected() const noexcept { return protected_; }

  // Evacuated: any access faults until open() (the "no stale pointer" check).
  void close() {
    if (::mprotect(begin_, bytes_, PROT_NONE) != 0) fail("mprotect(PROT_NONE)");
    protected_ = true;
  }
  // About to be allocated in again.
  void open() {
    if (::mprotect(begin_, bytes_, PROT_READ | PROT_WRITE) != 0) fail("mprotect(PROT_READ|PROT_WRITE)");
    protected_ = false;
  }

 private:
  static std::size_t round_to_pages(std::size_t n) {
    constexpr std::size_t page = 4096;
    return (n + page - 1) / page * page;
  }
  [[noreturn]] void fail(const char* call) const {
    std::fprintf(stderr, "copying host: %s of the %s space (%zu bytes) failed: %s\n", call, name_, bytes_,
                 std::strerror(errno));
    std::abort();
  }

  std::size_t bytes_;
  const char* name_;
  std::byte* begin_ = nullptr;
  bool protected_ = false;
};

}  // namespace copying_host
