// SPDX-License-Identifier: MIT
// The tools as a user runs them: exit codes, one-line errors, and JSON that parses.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench_disturbance.hpp"
#include "common/json_string.hpp"
#include "palrt/pal/internal/barrier_strategies.hpp"
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

// A folder of its own under /tmp for one test case, removed with what it holds at the end.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    char dir_template[] = "/tmp/palrt-cli-XXXXXX";
    REQUIRE(mkdtemp(dir_template) != nullptr);
    path = dir_template;
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir() { std::filesystem::remove_all(path); }
};

using json = nlohmann::json;

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

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

// The ways a report can fail to reach its reader. run_process() always gives the child a
// pipe with a reader, so these need their own spawn.
enum class lost_stdout {
  dev_full,             // every write fails with ENOSPC
  closed,               // fd 1 not open at all (`>&-`): EBADF
  pipe_without_reader,  // the read end closed before the child starts, SIGPIPE ignored: EPIPE
};

const char* describe(lost_stdout kind) {
  switch (kind) {
    case lost_stdout::dev_full: return ">/dev/full";
    case lost_stdout::closed: return ">&-";
    case lost_stdout::pipe_without_reader: return "| (reader gone, SIGPIPE ignored)";
  }
  return "?";
}

constexpr lost_stdout all_lost_stdouts[] = {lost_stdout::dev_full, lost_stdout::closed,
                                            lost_stdout::pipe_without_reader};

// Runs argv with stdout set up as `kind` says; stderr is captured. The pipe's read end is
// closed before the child exists, so its first write fails: no race with a reader exiting.
palrt::testing::process_result run_with_lost_stdout(const std::vector<std::string>& argv, lost_stdout kind,
                                                    std::chrono::seconds timeout = std::chrono::seconds(20)) {
  int err_pipe[2];
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  int out_fd = -1;
  if (kind == lost_stdout::dev_full) {
    out_fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    REQUIRE(out_fd >= 0);
  } else if (kind == lost_stdout::pipe_without_reader) {
    int p[2];
    REQUIRE(pipe2(p, O_CLOEXEC) == 0);
    close(p[0]);
    out_fd = p[1];
  }
  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ignore, nullptr);  // an ignored signal stays ignored across exec
    if (kind == lost_stdout::closed)
      close(1);
    else
      dup2(out_fd, 1);
    dup2(err_pipe[1], 2);
    execv(cargv[0], cargv.data());
    _exit(127);
  }
  close(err_pipe[1]);
  if (out_fd >= 0) close(out_fd);

  palrt::testing::process_result result;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd pfd{err_pipe[0], POLLIN, 0};
    if (poll(&pfd, 1, static_cast<int>(left.count())) < 0 && errno == EINTR) continue;
    char buf[4096];
    const ssize_t got = read(err_pipe[0], buf, sizeof buf);
    if (got > 0) {
      result.err.append(buf, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(err_pipe[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  return result;
}

// What every bad-arguments case must look like: exit 2, nothing on stdout, one short line
// on stderr that starts with the tool's name and holds no control character but its newline.
// palrt-bench's line-transfer rows (the machine's, around a component's 2-thread cases):
// before_ns and after_ns, each once, wherever two CPUs are allowed; none otherwise. Returns how
// many rows of `results` they are.
std::size_t check_line_transfer_rows(const json& results) {
  std::set<std::string> seen;
  std::size_t count = 0;
  for (const auto& row : results) {
    if (row.at("case") != "line-transfer") continue;
    ++count;
    CHECK(row.at("variant") == "machine");
    CHECK(row.at("threads").get<int>() == 2);
    CHECK(row.at("value").get<double>() > 0);
    CHECK_FALSE(row.contains("cpu_value"));
    seen.insert(row.at("metric").get<std::string>());
  }
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  if (CPU_COUNT(&allowed) >= 2) {
    CHECK(seen == std::set<std::string>{"before_ns", "after_ns"});
    CHECK(count == 2);
  } else {
    CHECK(count == 0);
  }
  return count;
}

void check_one_line_usage_error(const palrt::testing::process_result& r, const std::string& tool) {
  INFO("stderr: ", r.err.substr(0, 300));
  CHECK(r.exit_code == 2);
  CHECK(r.out.empty());
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.size() <= 200);
  CHECK(r.err.rfind(tool + ": ", 0) == 0);
  bool control = false;
  for (std::size_t i = 0; i + 1 < r.err.size(); ++i)
    control = control || static_cast<unsigned char>(r.err[i]) < 0x20 || r.err[i] == 0x7f;
  CHECK_FALSE(control);
}

}  // namespace

TEST_CASE("palrt-startup: bad arguments print one line and exit 2") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (auto args : std::vector<std::vector<std::string>>{{"--bogus"},
                                                         {"--order", "sideways"},
                                                         {"--threads", "-1"},
                                                         {"--threads", "many"},
                                                         {"--report", "xml"},
                                                         {"--sync-worker", "sometimes"},
                                                         {"--sync-worker", "Eager"},
                                                         {"--sync-worker"},
                                                         {"extra-positional"},
                                                         {"--objects", "-5"},
                                                         {"--objects", "1e3"},
                                                         {"--objects", "10000001"},
                                                         {"--objects"}}) {
    args.insert(args.begin(), bin);
    auto r = run_process(args);
    CAPTURE(args.back());
    CHECK(r.exit_code == 2);
    CHECK(line_count(r.err) == 1);
    CHECK(r.err.rfind("palrt-startup: ", 0) == 0);
    CHECK(r.out.empty());
  }
}

namespace {

// Every field of a JSON object, nested ones as `outer.inner`, and those of an array's objects
// as `outer[].inner`: the spelling of docs/TOOLS.md's table.
void field_names(const json& j, const std::string& prefix, std::set<std::string>& out) {
  for (const auto& [key, value] : j.items()) {
    out.insert(prefix + key);
    if (value.is_object()) field_names(value, prefix + key + ".", out);
    if (value.is_array())
      for (const auto& element : value)
        if (element.is_object()) field_names(element, prefix + key + "[].", out);
  }
}

}  // namespace

TEST_CASE("palrt-startup: docs/TOOLS.md's table of --report json fields is the fields it prints") {
  std::ifstream doc(artefact("PALRT_TEST_TOOLS_DOC"));
  REQUIRE(doc.good());
  // The table right after the paragraph that introduces it: the field names are in its first
  // column.
  std::set<std::string> documented;
  bool introduced = false, paragraph_ended = false, in_table = false;
  for (std::string line; std::getline(doc, line);) {
    if (!introduced) {
      introduced = line.find("`--report json` prints one object") != std::string::npos;
      continue;
    }
    if (!paragraph_ended) {
      paragraph_ended = line.empty();
      continue;
    }
    if (line.rfind("|", 0) != 0) break;  // the table ended, or there was none
    in_table = true;
    const std::string first_cell = line.substr(1, line.find('|', 1) - 1);
    for (std::size_t at = first_cell.find('`'); at != std::string::npos; at = first_cell.find('`', at + 1)) {
      const std::size_t end = first_cell.find('`', at + 1);
      REQUIRE(end != std::string::npos);
      documented.insert(first_cell.substr(at + 1, end - at - 1));
      at = end;
    }
  }
  REQUIRE_MESSAGE(in_table,
                  "docs/TOOLS.md has no table right after the paragraph \"`--report json` prints one object\"");
  std::set<std::string> printed;
  field_names(startup_json({"--objects", "1"}), "", printed);
  std::string undocumented, unknown;
  for (const auto& f : printed)
    if (!documented.count(f)) undocumented += " " + f;
  for (const auto& f : documented)
    if (!printed.count(f)) unknown += " " + f;
  INFO("printed, not in docs/TOOLS.md's table:" << undocumented);
  INFO("in docs/TOOLS.md's table, not printed:" << unknown);
  CHECK(undocumented.empty());
  CHECK(unknown.empty());
}

TEST_CASE("palrt-startup: the report carries the services' counters, at work with --objects") {
  json idle = startup_json({});
  CHECK(idle.at("objects").get<int>() == 0);
  CHECK(idle.at("objects_created").get<int>() == 0);
  CHECK(idle.at("handle_blocks").get<int>() == 0);
  json j = startup_json({"--objects", "500"});
  CHECK(j.at("objects").get<int>() == 500);
  CHECK(j.at("handles").at("weak-long").get<int>() == 500);  // the run still held them
  CHECK(j.at("handles").at("strong").get<int>() == 0);
  CHECK(j.at("handles").at("weak-short").get<int>() == 0);
  CHECK(j.at("handles").at("dependent").get<int>() == 0);
  CHECK(j.at("handle_blocks").get<int>() >= 5);
  CHECK(j.at("handle_bytes").get<int>() >= 5 * 1024);
  CHECK(j.at("objects_created").get<int>() == 500);
  CHECK(j.at("objects_freed").get<int>() == 500);
  CHECK(j.at("objects_finalized").get<int>() == 500);
  CHECK(j.at("finalizer_exceptions").get<int>() == 0);
  CHECK(j.at("finalizers_left_at_shutdown").get<int>() == 0);
  CHECK(j.at("longest_finalizer_ns").get<double>() > 0);
  CHECK(j.at("collections").get<int>() >= 2);
}

TEST_CASE("palrt-startup: --help and --version exit 0; the default run prints nothing") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  auto help = run_process({bin, "--help"});
  CHECK(help.exit_code == 0);
  CHECK(help.out.find("--order") != std::string::npos);
  CHECK(help.out.find("doctor") != std::string::npos);
  auto version = run_process({bin, "--version"});
  CHECK(version.exit_code == 0);
  // The version meson.build's project() states, its one home (CHANGELOG.md).
  CHECK(version.out == "palrt-startup " + artefact("PALRT_TEST_VERSION") + "\n");
  auto quiet = run_process({bin});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
}

TEST_CASE("palrt-startup: the JSON report parses and has every field, for each order" * palrt::testing::fallback_case) {
  for (const std::string order : {"registered-first", "threads-first", "no-membarrier"}) {
    CAPTURE(order);
    json j = startup_json({"--order", order, "--threads", "2"});
    REQUIRE(j.is_object());
    for (const std::string key : {"order", "sync_worker", "barrier_strategy", "registered_by", "kernel"}) {
      CAPTURE(key);
      REQUIRE(j.contains(key));
      CHECK(j.at(key).is_string());
    }
    for (const std::string key : {"membarrier_mask", "registration_ns", "bootstrap_ns", "shutdown_ns",
                                  "processor_count", "online_cpus", "rcu_expedited", "extra_threads"}) {
      CAPTURE(key);
      REQUIRE(j.contains(key));
      CHECK(j.at(key).is_number());
    }
    REQUIRE(j.contains("sync_worker_started"));
    CHECK(j.at("sync_worker_started").is_boolean());
    REQUIRE(j.contains("shutdown_clean"));
    CHECK(j.at("shutdown_clean").get<bool>() == true);
    CHECK(j.at("order").get<std::string>() == order);
    CHECK(j.at("extra_threads").get<double>() == 2);
    CHECK(j.at("bootstrap_ns").get<double>() > 0);
    CHECK(j.at("shutdown_ns").get<double>() > 0);
    REQUIRE(j.at("phases").is_array());
    CHECK(j.at("phases").size() == 4);
    for (const auto& p : j.at("phases")) {
      CHECK(p.at("name").is_string());
      CHECK(p.at("start_ns").is_number());
      CHECK(p.at("duration_ns").get<double>() > 0);
    }
    const std::string by = j.at("registered_by").get<std::string>();
    if (order == "no-membarrier" || !membarrier_available()) {
      CHECK(by == "none");
      CHECK(j.at("barrier_strategy").get<std::string>() != "membarrier");
    } else {
      CHECK(by == "bootstrap");
      CHECK(j.at("barrier_strategy").get<std::string>() == "membarrier");
      // A report counts (never infers) the threads at registration: main alone, or main and
      // the finalizer at least for threads-first (a sanitizer may add its own).
      REQUIRE(j.at("threads_at_registration").is_number());
      if (order == "registered-first")
        CHECK(j.at("threads_at_registration").get<double>() == 1);
      else
        CHECK(j.at("threads_at_registration").get<double>() >= 2);
    }
  }
}

TEST_CASE("palrt-startup: under the preload shim, threads-first reports registered_by preload with 1 thread") {
  if (!membarrier_available()) return;
  json j = startup_json({"--order", "threads-first"}, {palrt::testing::preload_env(artefact("PALRT_TEST_SHIM")), {}});
  CHECK(j.at("registered_by").get<std::string>() == "preload");
  // The shim does not count threads on a fast-looking registration (procfs stays off every
  // preloaded program's startup path); the report says it was inferred and gives no count.
  // Whether it looked fast is a duration (a loaded machine, a sanitizer's runtime beside the
  // shim make it slow at times), so the test takes either outcome and checks what each must
  // say: a slow-looking one was counted, and the shim ran before any thread of the program.
  REQUIRE(j.at("fast_path_inferred").is_boolean());
  if (j.at("fast_path_inferred").get<bool>()) {
    CHECK(j.at("threads_at_registration").is_null());
  } else {
    REQUIRE(j.at("threads_at_registration").is_number());
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    CHECK(j.at("threads_at_registration").get<int>() >= 1);  // a sanitizer may add a thread of its own
#else
    CHECK(j.at("threads_at_registration").get<int>() == 1);
#endif
  }
  // How fast the bootstrap's own late REGISTER returned is a benchmark (scripts/bench-startup.sh,
  // the shim row), not a test: with rcu_expedited=1 it is fast without the shim too.
}

PALRT_FRESH_PROCESS(exec_startup_under_rlimit_nproc) {
  if (!palrt::testing::limit_tasks(1)) return 125;
  // A copy the unprivileged user can reach: the build folder may sit under a home folder
  // only its owner may enter (Debian's /root is 0700).
  const char* bin = std::getenv("PALRT_TEST_STARTUP_COPY");
  execl(bin, bin, static_cast<char*>(nullptr));
  std::printf("exec: %s\n", std::strerror(errno));
  return 126;
}

TEST_CASE("palrt-startup: a startup failure gives its reason once, with the errno's name") {
  auto r = run_process({artefact("PALRT_TEST_STARTUP")}, {{"PALRT_BARRIER=bogus"}, {}});
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.find("phase 'process-barrier' failed: PALRT_BARRIER=bogus is not one of") != std::string::npos);
  CHECK(r.err.find("[EINVAL]") != std::string::npos);
  std::size_t reasons = 0;
  for (auto at = r.err.find(std::strerror(EINVAL)); at != std::string::npos;
       at = r.err.find(std::strerror(EINVAL), at + 1))
    ++reasons;
  CHECK(reasons == 1);
}

namespace {

// Runs a copy of the tool `artefact_variable` names, placed where the unprivileged user can
// reach it, as that user under RLIMIT_NPROC of 1 (the process itself is the one task allowed:
// its first thread cannot start). Exit 125: the limit could not be applied here.
palrt::testing::process_result run_copy_under_rlimit_nproc(const char* artefact_variable, const char* name) {
  const scratch_dir scratch;
  const auto copy = scratch.path / name;
  std::filesystem::copy_file(artefact(artefact_variable), copy);
  std::filesystem::permissions(scratch.path, std::filesystem::perms(0755));
  std::filesystem::permissions(copy, std::filesystem::perms(0755));
  auto env = palrt::testing::privilege_drop_env();
  env.push_back("PALRT_TEST_STARTUP_COPY=" + copy.string());
  return run_fresh("exec_startup_under_rlimit_nproc", {env, {}});
}

}  // namespace

TEST_CASE("palrt-startup: a startup failure exits 1 and names the phase and errno") {
  auto r = run_copy_under_rlimit_nproc("PALRT_TEST_STARTUP", "palrt-startup");
  INFO(r.out, r.err);
  CHECK(r.exit_code == 1);
  CHECK(line_count(r.err) == 1);
  CHECK(r.err.find("phase 'finalizer' failed") != std::string::npos);
  CHECK(r.err.find("EAGAIN") != std::string::npos);
}

TEST_CASE("palrt-startup doctor: a readable report of this machine, exit 0" * palrt::testing::fallback_case) {
  auto r = run_process({artefact("PALRT_TEST_STARTUP"), "doctor"});
  INFO(r.out, r.err);
  CHECK(r.exit_code == 0);
  for (const char* part :
       {"membarrier QUERY", "PRIVATE_EXPEDITED", "seccomp mode", "rcu_expedited", "CPUs", "cgroup cpu.max",
        "palrt would use", "FlushProcessWriteBuffers cost", "mprotect", "signal", "preload shim        not loaded"}) {
    CAPTURE(part);
    CHECK(r.out.find(part) != std::string::npos);
  }
  auto shim = run_process({artefact("PALRT_TEST_STARTUP"), "doctor"},
                          {palrt::testing::preload_env(artefact("PALRT_TEST_SHIM")), {}});
  CHECK(shim.exit_code == 0);
  CHECK(shim.out.find("preload shim        loaded") != std::string::npos);
}

namespace {

// A row with a CPU-timed twin (bench_report.hpp): the twin as a number, and the verdict as a
// boolean that is the verdict of those two numbers (bench_disturbance.hpp). What either number
// is depends on the machine, and is not checked: a --smoke slice whose thread lost its CPU for
// the whole millisecond may even have a twin of 0.
void check_cpu_twin(const json& row) {
  CAPTURE(row.dump());
  REQUIRE(row.contains("cpu_value"));
  REQUIRE(row.at("cpu_value").is_number());
  CHECK(row.at("cpu_value").get<double>() >= 0);
  REQUIRE(row.contains("disturbed"));
  REQUIRE(row.at("disturbed").is_boolean());
  CHECK(row.at("disturbed").get<bool>() ==
        palrt::bench::is_disturbed(row.at("value").get<double>(), row.at("cpu_value").get<double>()));
}

}  // namespace

// The tools' smoke runs: palrt-bench --smoke is the shortest run that still prints every row of
// the report, so these prove its format and measure nothing.
TEST_CASE("palrt-bench: bad arguments exit 2; --version is meson's; barrier --smoke --json parses with palrt beside "
          "its baselines") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "barrier", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto version = run_process({bench, "--version"});
  CHECK(version.exit_code == 0);
  CHECK(version.out == "palrt-bench " + artefact("PALRT_TEST_VERSION") + "\n");
  auto r = run_process({bench, "barrier", "--smoke", "--json", "--threads", "1"}, {{}, {}, std::chrono::seconds(120)});
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
  // Where the trick is no barrier (arm64, INVLPGB) the strategy is refused and skipped.
  CHECK(variants.count("mprotect") == (palrt::pal::internal::process_barrier_access::mprotect_unsuitable() ? 0 : 1));
  CHECK(variants.count("signal") == 1);
  if (membarrier_available()) CHECK(variants.count("raw-membarrier") == 1);
}

TEST_CASE("palrt-bench: barrier where membarrier is denied leaves out the bare syscall and measures the rest" *
          palrt::testing::fallback_case) {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench || membarrier_available()) return;  // built with -Dbench=false; nothing falls back
  auto r = run_process({bench, "barrier", "--smoke", "--json", "--threads", "1"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.find("raw-membarrier") != std::string::npos);  // skipped, and says why
  json j = json::parse(r.out);
  CHECK(j.at("machine").at("barrier_strategy").get<std::string>() != "membarrier");
  std::set<std::string> variants;
  for (const auto& row : j.at("results")) variants.insert(row.at("variant").get<std::string>());
  CHECK(variants.count("raw-membarrier") == 0);
  CHECK(variants.count("palrt") == 1);
  CHECK(variants.count("signal") == 1);
}

TEST_CASE(
    "palrt-bench: handles --smoke --json parses with palrt beside mutex-freelist and new-delete at 1 and 2 threads") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "handles", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto r = run_process({bench, "handles", "--smoke", "--json"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "handles");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  CHECK(j.at("machine").at("kernel").is_string());
  // Every (case, variant, threads) once: the targets' case and the larger working set, each
  // variant measured in the same run, at the default thread counts.
  std::set<std::string> rows;
  check_line_transfer_rows(j.at("results"));
  for (const auto& row : j.at("results")) {
    const std::string c = row.at("case").get<std::string>();
    if (c == "line-transfer") continue;
    CHECK((c == "alloc-release" || c == "alloc-release/burst=1024"));
    CHECK(row.at("metric").get<std::string>() == "ns_per_op");
    CHECK(row.at("value").get<double>() > 0);
    check_cpu_twin(row);
    rows.insert(c + " " + row.at("variant").get<std::string>() + " " + std::to_string(row.at("threads").get<int>()));
  }
  for (const std::string c : {"alloc-release", "alloc-release/burst=1024"}) {
    for (const std::string v : {"palrt", "mutex-freelist", "new-delete"}) {
      for (const std::string t : {"1", "2"}) {
        CAPTURE(c + " " + v + " " + t);
        CHECK(rows.count(c + " " + v + " " + t) == 1);
      }
    }
  }
  CHECK(rows.size() == 12);
}

TEST_CASE("palrt-bench: cache --smoke --json parses with palrt beside its designs, the peers and the no-map control") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "cache", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto r = run_process({bench, "cache", "--smoke", "--json"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "cache");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  std::set<std::string> rows;
  for (const auto& row : j.at("results")) {
    CHECK(row.at("value").get<double>() > 0);
    rows.insert(row.at("case").get<std::string>() + " " + row.at("variant").get<std::string>() + " " +
                row.at("metric").get<std::string>() + " " + std::to_string(row.at("threads").get<int>()));
  }
  std::size_t expected = 0;
  const std::string designs[] = {"palrt", "bucketed-rwlock", "single-lock", "pybind11-shards"};
  for (const std::string live : {"1", "8", "64", "1024"})
    for (const std::string v :
         {"palrt", "bucketed-rwlock", "single-lock", "pybind11-shards", "no-map", "tbb", "libcuckoo", "rculfhash"})
      for (const std::string t : {"1", "2"}) {
        CAPTURE("hit/live=" + live + " " + v + " " + t);
        CHECK(rows.count("hit/live=" + live + " " + v + " ns_per_op " + t) == 1);
        ++expected;
      }
  for (const std::string& v : designs) {
    for (const std::string t : {"1", "2"}) {
      CAPTURE("get-or-create " + v + " " + t);
      CHECK(rows.count("get-or-create/live=64 " + v + " ns_per_op " + t) == 1);
      ++expected;
    }
    for (const std::string m : {"p50_ns", "p99_ns", "queue_wait_p50_ns", "queue_wait_p99_ns", "ops_per_s"}) {
      CAPTURE("sustained " + v + " " + m);
      CHECK(rows.count("sustained " + v + " " + m + " 2") == 1);
      ++expected;
    }
  }
  CHECK(rows.size() == expected);
}

TEST_CASE("palrt-bench: finalizer --smoke --json parses with drain, wait-pending and sustained (palrt alone) and "
          "create-drop (palrt beside make-shared and new-delete)") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "finalizer", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto r = run_process({bench, "finalizer", "--smoke", "--json"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "finalizer");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  std::set<std::string> rows, create_drop;
  check_line_transfer_rows(j.at("results"));
  for (const auto& row : j.at("results")) {
    const std::string c = row.at("case").get<std::string>();
    if (c == "line-transfer") continue;
    const std::string variant = row.at("variant").get<std::string>();
    const std::string metric = row.at("metric").get<std::string>();
    const std::string threads = std::to_string(row.at("threads").get<int>());
    if (c == "create-drop") {
      create_drop.insert(variant + " " + metric + " " + threads);
    } else {
      CHECK(variant == "palrt");  // no baseline is set for the finalizer's cases
    }
    // The queue may be empty whenever it is looked at, on a fast enough machine.
    if (metric == "queue_high_water") {
      CHECK(row.at("value").get<double>() >= 0);
    } else {
      CHECK(row.at("value").get<double>() > 0);
    }
    rows.insert(c + " " + metric + " " + threads);
  }
  for (const std::string expected :
       {"drain ops_per_s 1", "wait-pending p50_ns 1", "wait-pending p99_ns 1", "sustained queue_wait_p50_ns 1",
        "sustained queue_wait_p99_ns 1", "sustained queue_high_water 1", "sustained ops_per_s 1",
        "sustained queue_wait_p50_ns 2", "sustained queue_wait_p99_ns 2", "sustained queue_high_water 2",
        "sustained ops_per_s 2", "create-drop ns_per_op 1", "create-drop ns_per_op 2"}) {
    CAPTURE(expected);
    CHECK(rows.count(expected) == 1);
  }
  CHECK(rows.size() == 13);
  for (const std::string expected : {"palrt ns_per_op 1", "make-shared ns_per_op 1", "new-delete ns_per_op 1",
                                     "palrt ns_per_op 2", "make-shared ns_per_op 2", "new-delete ns_per_op 2"}) {
    CAPTURE(expected);
    CHECK(create_drop.count(expected) == 1);
  }
  CHECK(create_drop.size() == 6);

  // --threads 2 measures only sustained and create-drop, at 2 threads.
  r = run_process({bench, "finalizer", "--smoke", "--json", "--threads", "2"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  j = json::parse(r.out);
  const std::size_t transfer_rows = check_line_transfer_rows(j.at("results"));
  CHECK(j.at("results").size() == 4 + 3 + transfer_rows);
  for (const auto& row : j.at("results")) {
    const std::string c = row.at("case").get<std::string>();
    CHECK((c == "sustained" || c == "create-drop" || c == "line-transfer"));
    CHECK(row.at("threads").get<int>() == 2);
  }
}

TEST_CASE("palrt-bench: invoke --smoke --json parses with palrt beside condvar and asio, every case and metric") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto r = run_process({bench, "invoke", "--smoke", "--json"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "invoke");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  // case -> metric -> variants reported.
  std::map<std::string, std::map<std::string, std::set<std::string>>> seen;
  for (const auto& row : j.at("results")) {
    CHECK(row.at("threads").get<double>() == 1);
    CHECK(row.at("value").get<double>() >= 0);
    seen[row.at("case").get<std::string>()][row.at("metric").get<std::string>()].insert(
        row.at("variant").get<std::string>());
  }
  const std::set<std::string> all{"palrt", "condvar", "asio"};
  CHECK(seen["invoke"]["p50_ns"] == all);
  CHECK(seen["invoke"]["p99_ns"] == all);
  CHECK(seen["invoke"]["allocs_per_op"] == all);
  CHECK(seen["post"]["ops_per_s"] == all);
  CHECK(seen["post"]["allocs_per_op"] == all);
  CHECK(seen["invoke/idle"]["p50_ns"] == all);
  CHECK(seen["invoke/idle"]["p99_ns"] == all);
  // What spinning costs, beside every variant of every queue case.
  for (const char* c : {"invoke", "post", "invoke/idle"}) {
    CAPTURE(c);
    CHECK(seen[c]["worker_cpu_ns_per_op"] == all);
  }
  CHECK(seen["wait-any-64"]["p50_ns"] == std::set<std::string>{"palrt"});
  // The machine's cache-line transfer time around the post case, wherever the callers and
  // the server can be pinned apart (two allowed CPUs or more).
  cpu_set_t allowed;
  REQUIRE(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
  if (CPU_COUNT(&allowed) >= 2) {
    const std::set<std::string> machine{"machine"};
    CHECK(seen["line-transfer"]["before_post_ns"] == machine);
    CHECK(seen["line-transfer"]["after_post_ns"] == machine);
    CHECK(seen["line-transfer"].size() == 2);
    for (const auto& row : j.at("results")) {
      if (row.at("case") == "line-transfer") CHECK(row.at("value").get<double>() > 0);
    }
    CHECK(seen.size() == 5);
  } else {
    CHECK(seen.size() == 4);
  }
  // --threads counts the calling threads.
  auto two = run_process({bench, "invoke", "--smoke", "--json", "--threads", "2"}, {{}, {}, std::chrono::seconds(120)});
  INFO(two.err);
  REQUIRE(two.exit_code == 0);
  const json with_two = json::parse(two.out);
  int twins = 0, verdicts_alone = 0;
  for (const auto& row : with_two.at("results")) {
    const std::string c = row.at("case").get<std::string>(), metric = row.at("metric").get<std::string>();
    CAPTURE(c + " " + row.at("variant").get<std::string>() + " " + metric);
    const double expected = c == "wait-any-64" ? 1 : 2;
    CHECK(row.at("threads").get<double>() == expected);
    // The two callers and the server, timed by their CPU clocks beside the wall clock: post's
    // rate has a twin, invoke's latencies take their run's verdict; invoke/idle's threads
    // sleep by design and wait-any-64's wait, so neither has one; nor have the rows that
    // count allocations or CPU time.
    if (c == "post" && metric == "ops_per_s") {
      check_cpu_twin(row);
      ++twins;
    } else if (c == "invoke" && (metric == "p50_ns" || metric == "p99_ns")) {
      CHECK_FALSE(row.contains("cpu_value"));
      REQUIRE(row.contains("disturbed"));
      CHECK(row.at("disturbed").is_boolean());
      ++verdicts_alone;
    } else {
      CHECK_FALSE(row.contains("cpu_value"));
      CHECK_FALSE(row.contains("disturbed"));
    }
  }
  CHECK(twins == 3);
  CHECK(verdicts_alone == 6);
}

namespace {

// The rows `palrt-bench retire` reports at one thread count: every variant's ns_per_op in both
// cases and cpu_ns_per_op in the drained one, and `lost` for the two that defer their reclaims.
std::set<std::string> expected_retire_rows(int threads) {
  const std::string t = std::to_string(threads);
  std::set<std::string> rows;
  for (const std::string v : {"palrt", "call_rcu", "delete"}) {
    rows.insert("retire " + v + " ns_per_op " + t);
    rows.insert("retire " + v + " cpu_ns_per_op " + t);
    rows.insert("retire/drain-untimed " + v + " ns_per_op " + t);
  }
  for (const std::string v : {"palrt", "call_rcu"}) {
    rows.insert("retire " + v + " lost " + t);
    rows.insert("retire/drain-untimed " + v + " lost " + t);
  }
  return rows;
}

// Every row of a retire report once; times positive, nothing lost.
std::set<std::string> retire_rows(const json& j) {
  CHECK(j.at("component").get<std::string>() == "retire");
  CHECK(j.at("machine").at("nproc").get<double>() >= 1);
  CHECK(j.at("machine").at("kernel").is_string());
  CHECK(j.at("machine").at("barrier_strategy").is_string());
  std::set<std::string> rows;
  for (const auto& row : j.at("results")) {
    const std::string key = row.at("case").get<std::string>() + " " + row.at("variant").get<std::string>() + " " +
                            row.at("metric").get<std::string>() + " " + std::to_string(row.at("threads").get<int>());
    CAPTURE(key);
    if (row.at("metric").get<std::string>() == "lost") {
      CHECK(row.at("value").get<double>() == 0);  // every object retired was reclaimed, once
    } else {
      CHECK(row.at("value").get<double>() > 0);
    }
    CHECK(rows.insert(key).second);
  }
  return rows;
}

}  // namespace

TEST_CASE("palrt-bench: retire --smoke --json parses with palrt beside call_rcu and delete, drain timed and "
          "untimed, at 1 and 2 threads, and loses no reclaim") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "retire", "--bogus"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  // The global options before the component, as `palrt-bench --smoke retire` is written.
  auto r = run_process({bench, "--smoke", "--json", "retire"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::set<std::string> expected = expected_retire_rows(1);
  expected.merge(expected_retire_rows(2));
  CHECK(retire_rows(json::parse(r.out)) == expected);

  // --threads counts the retiring threads: only that count is measured.
  r = run_process({bench, "retire", "--smoke", "--json", "--threads", "2"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(retire_rows(json::parse(r.out)) == expected_retire_rows(2));

  // The table names the ratios, without a verdict: no target is set.
  r = run_process({bench, "retire", "--smoke", "--threads", "1"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("palrt/call_rcu") != std::string::npos);
  CHECK(r.out.find("palrt/delete") != std::string::npos);
  CHECK(r.out.find("ratios (no target): ") != std::string::npos);
}

TEST_CASE("palrt-bench: retire where membarrier is denied measures every variant on the fallback barrier" *
          palrt::testing::fallback_case) {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench || membarrier_available()) return;  // built with -Dbench=false; nothing falls back
  auto r = run_process({bench, "retire", "--smoke", "--json", "--threads", "1"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  // palrt's grace periods run on the fallback strategy; liburcu's memb flavour falls back to
  // fences on its readers' side.
  CHECK(j.at("machine").at("barrier_strategy").get<std::string>() != "membarrier");
  CHECK(retire_rows(j) == expected_retire_rows(1));
}

// --- A report that was not written is a failure ---------------------------------------------

TEST_CASE("palrt-startup: output that cannot be written exits 1 with one line on stderr") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (const auto kind : all_lost_stdouts) {
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--report", "json"}, {"--report", "text"}, {"doctor"}, {"--help"}, {"--version"}}) {
      std::vector<std::string> argv{bin};
      argv.insert(argv.end(), args.begin(), args.end());
      const std::string what = joined(args) + " " + describe(kind);
      CAPTURE(what);
      auto r = run_with_lost_stdout(argv, kind);
      INFO("stderr: ", r.err);
      CHECK(r.term_signal == 0);
      CHECK(r.exit_code == 1);
      CHECK(line_count(r.err) == 1);
      CHECK(r.err.rfind("palrt-startup: ", 0) == 0);
      CHECK(r.err.find("stdout") != std::string::npos);
    }
  }
}

TEST_CASE("palrt-startup: a run without a report writes nothing, so a lost stdout is no failure") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (const auto kind : all_lost_stdouts) {
    CAPTURE(describe(kind));
    auto r = run_with_lost_stdout({bin}, kind);
    INFO("stderr: ", r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.err.empty());
  }
}

TEST_CASE("palrt-bench: output that cannot be written exits 1 and says so on stderr") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  for (const auto kind : all_lost_stdouts) {
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"barrier", "--smoke", "--threads", "1"}, {"--help"}, {"--version"}}) {
      std::vector<std::string> argv{bench};
      argv.insert(argv.end(), args.begin(), args.end());
      const std::string what = joined(args) + " " + describe(kind);
      CAPTURE(what);
      auto r = run_with_lost_stdout(argv, kind, std::chrono::seconds(120));
      INFO("stderr: ", r.err);
      CHECK(r.term_signal == 0);
      CHECK(r.exit_code == 1);
      // The benchmark's progress lines come first; the failure is the last line.
      const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
      CHECK(last.rfind("palrt-bench", 0) == 0);
      CHECK(last.find("stdout") != std::string::npos);
    }
  }
}

// --- --threads is a decimal number ----------------------------------------------------------

TEST_CASE("--threads takes decimal digits only, in palrt-startup and palrt-bench") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  // Each of these was once read as a number: hex, octal, a sign, surrounding blanks.
  const std::vector<std::string> not_decimal{"0x10", "010", "+3",  " 5", "5 ",
                                             "-0",   "1e1", "5.0", "",   "\xd9\xa3" /* ARABIC-INDIC DIGIT THREE */};
  for (const auto& value : not_decimal) {
    CAPTURE(value);
    auto r = run_process({bin, "--threads", value});
    check_one_line_usage_error(r, "palrt-startup");
    CHECK(r.err.find("--threads") != std::string::npos);
  }
  for (const char* value : {"-1", "4097", "99999999999999999999999"}) {
    CAPTURE(value);
    check_one_line_usage_error(run_process({bin, "--threads", value}), "palrt-startup");
  }
  for (const auto& [value, count] : std::vector<std::pair<std::string, int>>{{"0", 0}, {"12", 12}}) {
    CAPTURE(value);
    CHECK(startup_json({"--threads", value}).at("extra_threads").get<int>() == count);
  }

  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  for (const auto& value : not_decimal) {
    CAPTURE(value);
    // --smoke: if a value were accepted, the run that follows stays short.
    auto r = run_process({bench, "barrier", "--smoke", "--threads", value}, {{}, {}, std::chrono::seconds(120)});
    check_one_line_usage_error(r, "palrt-bench");
    CHECK(r.err.find("--threads") != std::string::npos);
  }
  for (const char* value : {"0", "257"}) {
    CAPTURE(value);
    check_one_line_usage_error(run_process({bench, "barrier", "--smoke", "--threads", value}), "palrt-bench");
  }
}

// --- A bad value is echoed in one short line ------------------------------------------------

// 100 KB of one character, and a value with every kind of line break and a terminal escape.
std::vector<std::string> hostile_values() {
  return {std::string(100000, 'x'), "a\nb\rc\x1b[31md\te\x7f"
                                    "f\x85g\xff"};
}

TEST_CASE("palrt-startup: a long or multi-line bad value gives one short line, whatever the option") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (const auto& value : hostile_values()) {
    for (const auto& args : std::vector<std::vector<std::string>>{{"--order", value},
                                                                  {"--order=" + value},
                                                                  {"--threads", value},
                                                                  {"--report", value},
                                                                  {"--sync-worker", value},
                                                                  {value},
                                                                  {"--" + value},
                                                                  {"doctor", value},
                                                                  {"--version=" + value}}) {
      std::vector<std::string> argv{bin};
      argv.insert(argv.end(), args.begin(), args.end());
      CAPTURE(args.front().substr(0, 16));
      check_one_line_usage_error(run_process(argv), "palrt-startup");
    }
  }
  // The start of the value is shown, so the user can see which argument it was.
  auto r = run_process({bin, "--order", std::string(100000, 'x')});
  CHECK(r.err.find("--order") != std::string::npos);
  CHECK(r.err.find("xxxxxxxxxxxxxxxxxxxx") != std::string::npos);
}

TEST_CASE("palrt-bench: a long or multi-line bad value gives one short line, whatever the option") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  for (const auto& value : hostile_values()) {
    for (const auto& args : std::vector<std::vector<std::string>>{{"barrier", "--smoke", "--threads", value},
                                                                  {"--threads=" + value, "barrier", "--smoke"},
                                                                  {value},
                                                                  {"barrier", value},
                                                                  {"--" + value},
                                                                  {"--json=" + value, "barrier", "--smoke"}}) {
      std::vector<std::string> argv{bench};
      argv.insert(argv.end(), args.begin(), args.end());
      CAPTURE(args.front().substr(0, 16));
      check_one_line_usage_error(run_process(argv, {{}, {}, std::chrono::seconds(120)}), "palrt-bench");
    }
  }
}

// --- doctor takes no options of the run -----------------------------------------------------

TEST_CASE("palrt-startup doctor: an option of the run is an error, before or after doctor") {
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (const auto& args : std::vector<std::vector<std::string>>{{"doctor", "--threads", "3"},
                                                                {"--threads", "3", "doctor"},
                                                                {"--report", "json", "doctor"},
                                                                {"doctor", "--report", "json"},
                                                                {"--order", "threads-first", "doctor"},
                                                                {"doctor", "--sync-worker", "eager"}}) {
    std::vector<std::string> argv{bin};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string option = args[0] == "doctor" ? args[1] : args[0];
    CAPTURE(option);
    CAPTURE(args.front());
    auto r = run_process(argv);
    check_one_line_usage_error(r, "palrt-startup");
    CHECK(r.err.find(option) != std::string::npos);
    CHECK(r.err.find("doctor") != std::string::npos);
  }
}

TEST_CASE("palrt-startup doctor: doctor given twice is a bad command line, not one doctor run") {
  // CLI11 hands a word the subcommand does not know back to the main command (fallthrough,
  // for the check above), which parses a second `doctor` as the subcommand again.
  const std::string bin = artefact("PALRT_TEST_STARTUP");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"doctor", "doctor"}, {"doctor", "doctor", "doctor"}, {"doctor", "doctor", "--threads", "2"}}) {
    std::vector<std::string> argv{bin};
    argv.insert(argv.end(), args.begin(), args.end());
    CAPTURE(joined(args));
    auto r = run_process(argv);
    check_one_line_usage_error(r, "palrt-startup");
    CHECK(r.err.find("doctor") != std::string::npos);
  }
}

// --- The sync worker, as a host gets it by default ------------------------------------------

TEST_CASE("palrt-startup: the sync worker starts lazily, as bootstrap()'s default; --sync-worker eager starts it") {
  for (const auto& args : std::vector<std::vector<std::string>>{{}, {"--sync-worker", "lazy"}}) {
    json j = startup_json(args);
    CHECK(j.at("sync_worker").get<std::string>() == "lazy");
    CHECK(j.at("sync_worker_started").get<bool>() == false);
  }
  json eager = startup_json({"--sync-worker", "eager"});
  CHECK(eager.at("sync_worker").get<std::string>() == "eager");
  CHECK(eager.at("sync_worker_started").get<bool>() == true);

  // threads-first registers after the service threads bootstrap started: the finalizer, and
  // the sync worker only when it is eager (a sanitizer may add a thread of its own).
  if (membarrier_available()) {
    CHECK(startup_json({"--order", "threads-first"}).at("threads_at_registration").get<int>() >= 2);
    CHECK(
        startup_json({"--order", "threads-first", "--sync-worker", "eager"}).at("threads_at_registration").get<int>() >=
        3);
  }

  const std::string bin = artefact("PALRT_TEST_STARTUP");
  auto text = run_process({bin, "--report", "text"});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("sync worker        lazy (not started)") != std::string::npos);
  text = run_process({bin, "--report", "text", "--sync-worker", "eager"});
  CHECK(text.out.find("sync worker        eager (started)") != std::string::npos);
}

// --- The C and C++ floors --------------------------------------------------------------------

TEST_CASE(
    "palrt-startup-reference and its C++ twin: one thread by default, two with --threads 2, other arguments exit 2" *
    palrt::testing::fallback_case) {
  for (const auto& [variable, name] : {std::pair{"PALRT_TEST_REFERENCE", "palrt-startup-reference"},
                                       std::pair{"PALRT_TEST_REFERENCE_CPP", "palrt-startup-reference-cpp"}}) {
    CAPTURE(name);
    const std::string ref = artefact(variable);
    // It needs membarrier: where seccomp denies it, it fails (exit 1) as it documents, in one line.
    const bool available = membarrier_available();
    for (const auto& args : std::vector<std::vector<std::string>>{{}, {"--threads", "1"}, {"--threads", "2"}}) {
      std::vector<std::string> argv{ref};
      argv.insert(argv.end(), args.begin(), args.end());
      auto r = run_process(argv);
      INFO(r.err);
      CHECK(r.exit_code == (available ? 0 : 1));
      CHECK(r.out.empty());
      if (!available) CHECK(line_count(r.err) == 1);
    }
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--threads"}, {"--threads", "3"}, {"--threads", "02"}, {"2"}, {"--threads", "2", "extra"}}) {
      std::vector<std::string> argv{ref};
      argv.insert(argv.end(), args.begin(), args.end());
      CAPTURE(args.back());
      check_one_line_usage_error(run_process(argv), name);
    }
  }
}

TEST_CASE("palrt-startup-reference-cpp --report json: registration and the threads' start and join, timed" *
          palrt::testing::fallback_case) {
  const std::string ref = artefact("PALRT_TEST_REFERENCE_CPP");
  const bool available = membarrier_available();
  for (const int threads : {1, 2}) {
    CAPTURE(threads);
    std::vector<std::string> argv{ref, "--report", "json"};
    if (threads == 2) argv.insert(argv.end(), {"--threads", "2"});
    auto r = run_process(argv);
    INFO(r.err);
    if (!available) {
      CHECK(r.exit_code == 1);
      CHECK(r.out.empty());
      continue;
    }
    REQUIRE(r.exit_code == 0);
    CHECK(line_count(r.out) == 1);
    const json j = json::parse(r.out);
    CHECK(j.at("tool").get<std::string>() == "palrt-startup-reference-cpp");
    CHECK(j.at("threads").get<int>() == threads);
    CHECK(j.at("registration_ns").get<long long>() > 0);
    CHECK(j.at("start_join_ns").get<long long>() > 0);
  }
  // The report is its own option, before --threads, once; the C floor has none.
  for (const auto& args : std::vector<std::vector<std::string>>{{"--report"},
                                                                {"--report", "text"},
                                                                {"--threads", "2", "--report", "json"},
                                                                {"--report", "json", "--report", "json"}}) {
    std::vector<std::string> full{ref};
    full.insert(full.end(), args.begin(), args.end());
    CAPTURE(args.back());
    check_one_line_usage_error(run_process(full), "palrt-startup-reference-cpp");
  }
  check_one_line_usage_error(run_process({artefact("PALRT_TEST_REFERENCE"), "--report", "json"}),
                             "palrt-startup-reference");
}

TEST_CASE("palrt-startup-reference-cpp: a thread that cannot start exits 1 with one line") {
  // Under RLIMIT_NPROC of 1 the process itself is the one task allowed: registration works,
  // std::thread throws. A copy the unprivileged user can reach (see the palrt-startup case).
  auto r = run_copy_under_rlimit_nproc("PALRT_TEST_REFERENCE_CPP", "palrt-startup-reference-cpp");
  INFO(r.out, r.err);
  if (r.exit_code == 125) {
    MESSAGE("skipped: RLIMIT_NPROC cannot be applied here: " << r.out);
    return;
  }
  CHECK(r.exit_code == 1);
  CHECK(line_count(r.err) == 1);
  // Where membarrier is denied it stops at QUERY instead, which the case above covers.
  if (membarrier_available()) CHECK(r.err.find("palrt-startup-reference-cpp: std::thread: ") == 0);
}

TEST_CASE("json_string, the tools' one JSON escaper: control characters escaped, bad UTF-8 as U+FFFD") {
  using palrt::tools::json_string;
  CHECK(json_string("plain") == "\"plain\"");
  CHECK(json_string("q\"b\\") == "\"q\\\"b\\\\\"");
  CHECK(json_string("a\nb\x01\x7f") == "\"a\\nb\\u0001\\u007f\"");
  CHECK(json_string("caf\xc3\xa9") == "\"caf\xc3\xa9\"");  // valid UTF-8 passes as it is
  CHECK(json_string("\xff"
                    "x\xc3") == "\"\\ufffdx\\ufffd\"");
  CHECK(json_string("\xed\xa0\x80") == "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate is not UTF-8
  // Whatever the bytes, the result parses back as one JSON string.
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  CHECK(json::parse(json_string(every_byte)).is_string());
}

TEST_CASE("palrt-bench: gc --smoke --json reports every walk beside the walk it replaces, and refuses a thread "
          "count it cannot use") {
  const char* bench = std::getenv("PALRT_TEST_BENCH");
  if (!bench) return;  // built with -Dbench=false
  auto bad = run_process({bench, "gc", "--threads", "3"});
  CHECK(bad.exit_code == 2);
  CHECK(line_count(bad.err) == 1);
  auto r = run_process({bench, "gc", "--smoke", "--json"}, {{}, {}, std::chrono::seconds(120)});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  CHECK(j.at("component").get<std::string>() == "gc");
  std::set<std::string> rows;
  for (const auto& row : j.at("results")) {
    std::string c = row.at("case").get<std::string>();
    c = c.substr(0, c.find('/'));  // the size after the slash is the smoke run's
    std::string variant = row.at("variant").get<std::string>();
    if (variant.starts_with("palrt@cpu")) variant = "palrt@cpu";  // one per CPU the team uses
    const std::string key = c + " " + variant + " " + row.at("metric").get<std::string>() + " " +
                            std::to_string(row.at("threads").get<int>());
    if (variant == "palrt@cpu" && rows.count(key)) continue;
    CAPTURE(key);
    CHECK(row.at("value").get<double>() > 0);
    CHECK(rows.insert(key).second);
  }
  CHECK(rows == std::set<std::string>{"young-sweep aged ns_per_collection 1", "young-sweep full ns_per_collection 1",
                                      "parallel-sweep palrt ns_per_op 1", "parallel-sweep palrt@cpu ns_per_op 1",
                                      "parallel-sweep palrt ns_per_op 2", "sweep-relocate sweep-relocate ns_per_op 1",
                                      "sweep-relocate sweep ns_per_op 1", "dependent-chain walk-order ns_per_op 1",
                                      "dependent-chain reverse-order ns_per_op 1",
                                      "dependent-chain rounds-walk-order ns_per_op 1",
                                      "dependent-chain rounds-reverse-order ns_per_op 1"});
}

// --- The shim and procfs ------------------------------------------------------------------------

namespace {

// The lines of an strace log (-f -o FILE) that open a /proc path, split at the second
// membarrier QUERY: the shim's registration makes the first, palrt's own bootstrap the second.
struct procfs_opens {
  int queries = 0;
  int before_palrt = 0;  // the shim's own census, if its registration looked slow
  int from_palrt = 0;    // from palrt's registration on, to the end of the run
  std::vector<std::string> lines;
};

procfs_opens count_procfs_opens(const std::filesystem::path& log) {
  procfs_opens seen;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find("membarrier(MEMBARRIER_CMD_QUERY") != std::string::npos) {
      ++seen.queries;
      continue;
    }
    // open, openat and openat2, by absolute path or relative to a /proc descriptor (-y).
    const bool is_open = line.find("open(") != std::string::npos || line.find("openat(") != std::string::npos ||
                         line.find("openat2(") != std::string::npos;
    if (!is_open || line.find("/proc") == std::string::npos) continue;
    ++(seen.queries >= 2 ? seen.from_palrt : seen.before_palrt);
    seen.lines.push_back(line);
  }
  return seen;
}

// Why strace cannot trace here, or empty when it can.
std::string strace_unusable() {
  try {
    auto r = run_process({"strace", "-o", "/dev/null", "true"});
    if (r.exit_code != 0) return "strace cannot trace here (ptrace not permitted?): " + r.err;
  } catch (const std::runtime_error& e) {
    return std::string("strace is not installed (scripts/setup.sh installs it): ") + e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("palrt-startup under the shim opens nothing in /proc after the shim's registration (strace)") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  MESSAGE("skipped: a sanitizer's runtime reads /proc itself (maps, task) in every process it runs");
  return;
#endif
  if (!membarrier_available()) return;  // the shim registers nothing, and palrt counts by design
  if (const std::string why = strace_unusable(); !why.empty()) {
    MESSAGE("skipped: " << why);
    return;
  }
  const scratch_dir scratch;
  const std::filesystem::path& dir = scratch.path;
  // Verbose, the shim always counts its threads (its line shows the count): that one read, seen
  // before palrt's registration, is the control that shows the trace catches a /proc open.
  for (const bool verbose : {false, true}) {
    CAPTURE(verbose);
    const auto log = dir / (verbose ? "verbose.log" : "quiet.log");
    // -E: the shim goes to palrt-startup only, not to strace. strace slows every syscall, so
    // the shim's own registration may look slow and be counted: allowed, and before palrt's.
    std::vector<std::string> argv{"strace",
                                  "-f",
                                  "-y",
                                  "-e",
                                  "trace=openat,open,openat2,membarrier",
                                  "-o",
                                  log.string(),
                                  "-E",
                                  "LD_PRELOAD=" + artefact("PALRT_TEST_SHIM")};
    if (verbose) argv.insert(argv.end(), {"-E", "PALRT_PRELOAD_VERBOSE=1"});
    argv.push_back(artefact("PALRT_TEST_STARTUP"));
    auto r = run_process(argv);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const procfs_opens seen = count_procfs_opens(log);
    INFO(joined(seen.lines));
    REQUIRE(seen.queries == 2);  // the shim's registration, then palrt's
    CHECK(seen.from_palrt == 0);
    if (verbose) {
      CHECK(seen.before_palrt == 1);
      CHECK(r.err.find(", 1 thread, by constructor") != std::string::npos);
    }
  }
}
