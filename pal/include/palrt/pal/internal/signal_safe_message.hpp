// SPDX-License-Identifier: MIT
// One line to stderr from anywhere, a signal handler included: no allocation, no stdio lock,
// no locale (fprintf and strerror may take locks or allocate, and a flush may run in a
// handler that interrupted malloc or stdio on its thread). The process barrier's failure
// messages use it, since a flush is async-signal-safe (process_barrier.hpp).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace palrt::pal::internal {

class signal_safe_message {
 public:
  signal_safe_message& operator<<(const char* text) noexcept {
    if (!text) text = "(null)";
    while (*text && len_ < sizeof buf_ - 1) buf_[len_++] = *text++;
    return *this;
  }
  signal_safe_message& operator<<(long value) noexcept {
    char digits[24];
    int n = 0;
    const bool negative = value < 0;
    // Through unsigned, so that the most negative value has a magnitude too.
    auto magnitude = negative ? 0 - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
    do {
      digits[n++] = static_cast<char>('0' + magnitude % 10);
      magnitude /= 10;
    } while (magnitude);
    if (negative) *this << "-";
    while (n > 0 && len_ < sizeof buf_ - 1) buf_[len_++] = digits[--n];
    return *this;
  }
  signal_safe_message& operator<<(int value) noexcept { return *this << static_cast<long>(value); }
  // An address, as 0x... in hex.
  signal_safe_message& operator<<(const void* address) noexcept {
    auto v = reinterpret_cast<std::uintptr_t>(address);
    char digits[2 * sizeof v];
    int n = 0;
    do {
      digits[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v);
    *this << "0x";
    while (n > 0 && len_ < sizeof buf_ - 1) buf_[len_++] = digits[--n];
    return *this;
  }
  // errno's description (strerrordesc_np: a constant string, no locale, no buffer), or its
  // number where the C library has none for it.
  static const char* describe_errno(int error) noexcept {
    const char* text = ::strerrordesc_np(error);
    return text ? text : "unknown error";
  }

  // The line so far, with a newline, to stderr; errno is left as it was.
  void write_line() noexcept {
    const int saved = errno;
    buf_[len_++] = '\n';  // room was kept for it
    for (std::size_t done = 0; done < len_;) {
      const ssize_t n = ::write(STDERR_FILENO, buf_ + done, len_ - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // stderr closed or full: nothing else to tell it with
      done += static_cast<std::size_t>(n);
    }
    --len_;
    errno = saved;
  }

 private:
  char buf_[1024];
  std::size_t len_ = 0;
};

}  // namespace palrt::pal::internal
