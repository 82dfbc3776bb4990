// SPDX-License-Identifier: MIT
// membarrier(2) against the real kernel. Registration is per process and sticky (a fork()ed
// child inherits it), so every case runs in a freshly exec'd process.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "palrt/core/membarrier_registration.h"
#include "palrt/pal/membarrier.hpp"
#include "kernel_support.hpp"
#include "subprocess.hpp"

namespace mb = palrt::pal::membarrier;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;

PALRT_FRESH_PROCESS(membarrier_lifecycle) {
  // Before registration PRIVATE_EXPEDITED must be refused with EPERM...
  auto before = mb::private_expedited();
  auto regs_before = mb::get_registrations();
  auto reg = mb::register_private_expedited();
  auto after = mb::private_expedited();
  auto regs_after = mb::get_registrations();
  std::printf("before=%d reg=%d after=%d regs_before=%ld/%d regs_after=%ld/%d\n", before.error, reg.error, after.error,
              regs_before.value, regs_before.error, regs_after.value, regs_after.error);
  return 0;
}

TEST_CASE("membarrier: an unknown command is EINVAL, reported as 'invalid'" * palrt::testing::fallback_case) {
  if (!membarrier_available()) {
    // Denied by seccomp or not built in: QUERY already fails, and so does everything else.
    CHECK(palrt_membarrier_call(1 << 30, 0) < 0);
    return;
  }
  mb::result r{0, static_cast<int>(-palrt_membarrier_call(1 << 30, 0))};
  CHECK(r.error == EINVAL);
  CHECK(r.reason() == mb::failure_reason::invalid);
  CHECK(mb::describe(r.error).find("EINVAL") != std::string_view::npos);
}

TEST_CASE("membarrier: PRIVATE_EXPEDITED is EPERM before registration and works after it") {
  if (!membarrier_available()) return;
  auto child = run_fresh("membarrier_lifecycle");
  REQUIRE_MESSAGE(child.exit_code == 0, child.err);
  int before = -1, reg = -1, after = -1, regs_before_err = -1, regs_after_err = -1;
  long regs_before = -1, regs_after = -1;
  REQUIRE(std::sscanf(child.out.c_str(), "before=%d reg=%d after=%d regs_before=%ld/%d regs_after=%ld/%d", &before,
                      &reg, &after, &regs_before, &regs_before_err, &regs_after, &regs_after_err) == 7);
  CHECK(before == EPERM);
  CHECK(mb::reason_of(before) == mb::failure_reason::denied);
  CHECK(reg == 0);
  CHECK(after == 0);
  if (mb::query().value & mb::cmd_get_registrations) {
    // GET_REGISTRATIONS (6.3+) answers with the REGISTER_* command bits this process used.
    CHECK(regs_before_err == 0);
    CHECK((regs_before & mb::cmd_register_private_expedited) == 0);
    CHECK(regs_after_err == 0);
    CHECK((regs_after & mb::cmd_register_private_expedited) != 0);
  } else {
    CHECK(regs_after_err == EINVAL);
  }
}

TEST_CASE("membarrier: errno maps to a named reason") {
  CHECK(mb::reason_of(0) == mb::failure_reason::none);
  CHECK(mb::reason_of(ENOSYS) == mb::failure_reason::not_supported);
  CHECK(mb::reason_of(EPERM) == mb::failure_reason::denied);
  CHECK(mb::reason_of(EINVAL) == mb::failure_reason::invalid);
  CHECK(mb::reason_of(ENOMEM) == mb::failure_reason::other);
  CHECK(mb::describe(ENOSYS).find("ENOSYS") != std::string_view::npos);
  CHECK(mb::describe(EPERM).find("seccomp") != std::string_view::npos);
}

TEST_CASE("membarrier: a seccomp filter's errno comes back as the named reason" * palrt::testing::fallback_case) {
  // Set by the seccomp variants of the suites (tests/meson.build): membarrier is denied.
  const char* expected = std::getenv("PALRT_TEST_MEMBARRIER_DENIED");
  if (!expected) return;
  const int err = std::string_view(expected) == "EPERM" ? EPERM : ENOSYS;
  auto q = mb::query();
  CHECK(q.error == err);
  CHECK(q.value == 0);
  auto r = mb::register_private_expedited();
  CHECK(r.error == err);
  CHECK(r.reason() == (err == EPERM ? mb::failure_reason::denied : mb::failure_reason::not_supported));
}
