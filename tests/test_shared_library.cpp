// SPDX-License-Identifier: MIT
// libpalrt.so: what it exports, and a second copy of palrt in one process saying so.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "subprocess.hpp"

using palrt::testing::artefact;
using palrt::testing::run_process;

namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("shared library: it exports palrt's own symbols and nothing it links in") {
  const auto r = run_process({"nm", "-D", "--defined-only", "-C", artefact("PALRT_TEST_SHARED_LIBRARY")});
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> foreign;
  std::size_t exported = 0;
  bool bootstrap = false;
  for (const std::string& line : lines(r.out)) {
    // "<address> <type> <name>"; the version node itself is an absolute symbol.
    const std::size_t name_at = line.find(' ', line.find(' ') + 1);
    if (name_at == std::string::npos) continue;
    const std::string name = line.substr(name_at + 1);
    if (name == "PALRT_0") continue;
    ++exported;
    if (name.rfind("palrt::startup::bootstrap(", 0) == 0) bootstrap = true;
    bool ours = name.rfind("palrt_", 0) == 0;
    for (const char* prefix : {"palrt::", "typeinfo for palrt::", "typeinfo name for palrt::", "vtable for palrt::",
                               "VTT for palrt::", "guard variable for palrt::", "TLS init function for palrt::",
                               "TLS wrapper function for palrt::"})
      ours = ours || name.rfind(prefix, 0) == 0;
    if (!ours) foreign.push_back(name);
  }
  INFO("exported but not palrt's: " << foreign.size() << (foreign.empty() ? "" : ", the first: " + foreign[0]));
  CHECK(foreign.empty());
  CHECK(bootstrap);
  CHECK(exported > 100);
}

TEST_CASE("shared library: one copy says nothing; a second copy in the process names both") {
  const std::string host = artefact("PALRT_TEST_COPIES_HOST");
  const std::string plugin = artefact("PALRT_TEST_STATIC_COPY");
  SUBCASE("libpalrt.so alone") {
    const auto r = run_process({host});
    REQUIRE(r.exit_code == 0);
    const auto copies = lines(r.out);
    REQUIRE(copies.size() == 1);
    CHECK(copies[0].find("libpalrt.so") != std::string::npos);
    CHECK(r.err.find("copy of palrt") == std::string::npos);
  }
  SUBCASE("a plugin with palrt linked in statically, beside libpalrt.so") {
    const auto r = run_process({host, plugin});
    REQUIRE(r.exit_code == 0);
    const auto copies = lines(r.out);
    REQUIRE(copies.size() == 2);
    CHECK(ends_with(copies[1], "libpalrt-test-static-copy.so"));
    INFO(r.err);
    CHECK(r.err.find("palrt: a second copy of palrt is loaded: " + copies[1] + "; the first is " + copies[0]) !=
          std::string::npos);
    CHECK(r.err.find("link every module of the process against libpalrt.so") != std::string::npos);
  }
}
