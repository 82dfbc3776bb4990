// The tools as a user runs them: exit codes, one-line errors, and JSON that parses.
#include <doctest/doctest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "common/json_string.hpp"
#include "palrt/pal/membarrier.hpp"
#include "privileges.hpp"
#include "kernel_support.hpp"
#include "subprocess.hpp"

using palrt::testing::artefact;
using palrt::testing::membarrier_available;
using palrt::testing::run_fresh;
using palrt::testing::run_options;
using palrt::testing::run_process;

namespace {

using json = nlohmann::json;

int line_count(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

json startup_json(const std::vector<std::string>& args, const run_options& opts = {}) {
  std::vector<std::string> argv{artefact("PALRT_TEST_STARTUP")};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back("--report");
  argv.push_back("json");
  auto r = run_process(argv, opts);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(line_count(r.out) == 1);
  return json::parse(r.out);  // throws, failing the test, unless it is one JSON value
}

}  // namespace

TEST_CASE("palrt-startup: bad arguments print one line and exit 2") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (auto args : std::vector<std::vector<std::string>>{
           {"--bogus"}, {"--order", "sideways"}, {"--threads", "-1"}, {"--threads", "many"}, {"--report", "xml"},
           {"extra-positional"}}) {
    args.insert(args.begin(), bin);
    auto r = run_process(args);
    CAPTURE(args.back());
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.rfind("palrt-startup: ", 0) == 0);
    CHECK(r.out.empty());
  }
}

TEST_CASE("palrt-startup: --help and --version exit 0; the default run prints nothing") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  auto help = run_process({bin, "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--order") != std::string::npos);
  CHECK(help.out.find("doctor") != std::string::npos);
  auto version = run_process({bin, "--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("palrt-startup ") != std::string::npos);
  auto quiet = run_process({bin});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
}

TEST_CASE("palrt-startup: the JSON report parses and has every field, for each order") {
  for (const char* order : {"registered-first", "threads-first", "no-membarrier"}) {
    CAPTURE(order);
    json j = startup_json({"--order", order, "--threads", "2"});
    REQUIRE(j.is_object());
    for (const char* key : {"order", "barrier_strategy", "registered_by", "kernel"}) {
      CAPTURE(key);
      REQUIRE(j.contains(key));
      CHECK(j.at(key).is_string());
    }
    for (const char* key : {"membarrier_mask", "threads_at_registration", "registration_ns", "bootstrap_ns",
                            "shutdown_ns", "processor_count", "online_cpus", "rcu_expedited", "extra_threads"}) {
      CAPTURE(key);
      REQUIRE(j.contains(key));
      CHECK(j.at(key).is_number());
    }
    CHECK(j.at("order").get<std::string>() == order);
    CHECK(j.at("extra_threads").get<double>() == 2);
    CHECK(j.at("bootstrap_ns").get<double>() > 0);
    CHECK(j.at("shutdown_ns").get<double>() > 0);
    REQUIRE(j.at("phases").is_array());
    CHECK(j.at("phases").size() == 3);
    for (const auto& p : j.at("phases")) {
      CHECK(p.at("name").is_string());
      CHECK(p.at("start_ns").is_number());
      CHECK(p.at("duration_ns").get<double>() > 0);
    }
    const std::string by = j.at("registered_by").get<std::string>();
    if (std::string(order) == "no-membarrier" || !membarrier_available()) {
      CHECK(by == "none");
      CHECK(j.at("barrier_strategy").get<std::string>() != "membarrier");
    } else {
      CHECK(by == "bootstrap");
      CHECK(j.at("barrier_strategy").get<std::string>() == "membarrier");
      // threads-first: main and both service threads at least (a sanitizer may add its own).
      if (std::string(order) == "registered-first")
        CHECK(j.at("threads_at_registration").get<double>() == 1);
      else
        CHECK(j.at("threads_at_registration").get<double>() >= 3);
    }
  }
}

TEST_CASE("palrt-startup: under the preload shim, threads-first reports registered_by preload with 1 thread") {
  if (!membarrier_available() || !palrt::testing::can_preload_into_this_build()) return;
  json j = startup_json({"--order", "threads-first"}, {palrt::testing::preload_env(artefact("PALRT_TEST_SHIM")), {}});
  CHECK(j.at("registered_by").get<std::string>() == "preload");
  CHECK(j.at("threads_at_registration").get<double>() == 1);
  // The bootstrap's own, late REGISTER found the process registered and returned at once.
  CHECK(j.at("phases").at(2).at("duration_ns").get<double>() < 5e6);
}

PALRT_FRESH_PROCESS(exec_startup_under_rlimit_nproc) {
  if (!palrt::testing::limit_tasks(1)) return 125;
  const char* bin = std::getenv("PALRT_TEST_STARTUP");
  execl(bin, bin, static_cast<char*>(nullptr));
  std::printf("exec: %s\n", std::strerror(errno));
  return 126;
}

TEST_CASE("palrt-startup: a startup failure exits 1 and names the phase and errno") {
  auto r = run_fresh("exec_startup_under_rlimit_nproc", {palrt::testing::privilege_drop_env(), {}});
  INFO(r.out, r.err);
  CHECK(r.exit_code == 1);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.find("phase 'finalizer' failed") != std::string::npos);
  CHECK(r.err.find("EAGAIN") != std::string::npos);
}

TEST_CASE("palrt-startup doctor: a readable report of this machine, exit 0") {
  auto r = run_process({artefact("PALRT_TEST_STARTUP"), "doctor"});
  INFO(r.out, r.err);
  CHECK(r.exit_code == 0);
  for (const char* part : {"membarrier QUERY", "PRIVATE_EXPEDITED", "seccomp mode", "rcu_expedited", "CPUs",
                           "cgroup cpu.max", "palrt would use", "FlushProcessWriteBuffers cost", "mprotect",
                           "signal", "preload shim        not loaded"}) {
    CAPTURE(part);
    CHECK(r.out.find(part) != std::string::npos);
  }
  if (!palrt::testing::can_preload_into_this_build()) return;
  auto shim = run_process({artefact("PALRT_TEST_STARTUP"), "doctor"},
                          {palrt::testing::preload_env(artefact("PALRT_TEST_SHIM")), {}});
  CHECK(shim.exit_code == 0);
  CHECK(shim.out.find("preload shim        loaded") != std::string::npos);
}

TEST_CASE("palrt-bench: bad arguments exit 2; barrier --quick --json parses with palrt beside its baselines") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "barrier", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto r = run_process({bench, "barrier", "--quick", "--json", "--threads", "1"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "barrier");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  CHECK(j.at("machine").at("kernel").is_string());
  CHECK(j.at("machine").at("barrier_strategy").is_string());
  std::set<std::string> variants;
  for (const auto& row : j.at("results")) {
    CHECK(row.at("case").get<std::string>() == "flush");
    CHECK(row.at("metric").get<std::string>() == "ns_per_op");
    CHECK(row.at("threads").get<double>() == 1);
    CHECK(row.at("value").get<double>() > 0);
    variants.insert(row.at("variant").get<std::string>());
  }
  CHECK(variants.count("palrt") == 1);
  CHECK(variants.count("mprotect") == 1);
  CHECK(variants.count("signal") == 1);
  if (membarrier_available()) CHECK(variants.count("raw-membarrier") == 1);
}

TEST_CASE("json_string, the tools' one JSON escaper: control characters escaped, bad UTF-8 as U+FFFD") {
  using palrt::tools::json_string;
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("q\"b\\") == "\"q\\\"b\\\\\"");
  CHECK(json_string("a\nb\x01\x7f") == "\"a\\nb\\u0001\\u007f\"");
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // valid UTF-8 passes as it is
  CHECK(json_string("\xff" "x\xc3") == "\"\\ufffdx\\ufffd\"");
  CHECK(json_string("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate is not UTF-8
  // Whatever the bytes, the result parses back as one JSON string.
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  CHECK(json::parse(json_string(every_byte)).is_string());
}
