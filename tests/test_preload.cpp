// SPDX-License-Identifier: MIT
// libpalrt-preload.so, driven the way it is used: preloaded into real programs. Whether the
// process got registered is read from inside it by palrt-membarrier-state, which asks the
// kernel (GET_REGISTRATIONS, PRIVATE_EXPEDITED) and the shim (palrt_preload_info).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "palrt/core/membarrier_registration.h"
#include "palrt/startup/internal/preload_info.h"
#include "subprocess.hpp"

namespace {

using palrt::testing::artefact;
using palrt::testing::process_result;
using palrt::testing::run_options;
using palrt::testing::run_process;

// Every run starts from an environment with no preload and no shim settings, so a developer's
// own LD_PRELOAD or PALRT_PRELOAD cannot change what a test compares.
run_options clean_env(std::vector<std::string> add = {}) {
  run_options opts;
  opts.env_remove = {"LD_PRELOAD", "PALRT_PRELOAD", "PALRT_PRELOAD_VERBOSE"};
  opts.env_add = std::move(add);
  return opts;
}

std::string preload_var(const std::string& value) { return "LD_PRELOAD=" + value; }

std::map<std::string, std::string> parse_state(const std::string& out) {
  std::map<std::string, std::string> kv;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

long field(const std::map<std::string, std::string>& kv, const std::string& key) {
  auto it = kv.find(key);
  REQUIRE_MESSAGE(it != kv.end(), "palrt-membarrier-state printed no " << key);
  return std::stol(it->second);
}

// palrt-membarrier-state with the given extra environment (LD_PRELOAD included).
std::map<std::string, std::string> membarrier_state(std::vector<std::string> env, std::vector<std::string> args = {}) {
  std::vector<std::string> argv{artefact("PALRT_TEST_MEMBARRIER_STATE")};
  argv.insert(argv.end(), args.begin(), args.end());
  process_result r = run_process(argv, clean_env(std::move(env)));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE_FALSE(r.timed_out);
  REQUIRE(r.term_signal == 0);
  REQUIRE(r.exit_code == 0);
  return parse_state(r.out);
}

// What this kernel (and any seccomp filter around the test) offers; the expectations below
// follow from it instead of assuming a kernel.
struct kernel_support {
  long mask = palrt_membarrier_call(PALRT_MB_CMD_QUERY, 0);
  bool private_expedited() const {
    return mask > 0 && (mask & PALRT_MB_CMD_PRIVATE_EXPEDITED) && (mask & PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED);
  }
  bool get_registrations() const { return mask > 0 && (mask & PALRT_MB_CMD_GET_REGISTRATIONS); }
};

void check_registered(const std::map<std::string, std::string>& s, int trigger) {
  CHECK(s.at("preload") == "present");
  CHECK(field(s, "preload_version") == PALRT_PRELOAD_INFO_VERSION);
  CHECK(field(s, "preload_state") == PALRT_PRELOAD_REGISTERED);
  CHECK(field(s, "preload_trigger") == trigger);
  // A fast-looking registration is recorded as such and not counted (no procfs read on the
  // startup path of every preloaded program); a count would have been 1.
  CHECK(field(s, "preload_fast_path_inferred") == 1);
  CHECK(field(s, "preload_threads") == 0);
  CHECK(field(s, "preload_error") == 0);
  CHECK(field(s, "preload_duration_ns") > 0);
  // The kernel is the witness, not the shim's own record.
  CHECK(field(s, "private_expedited") == 0);
  if (kernel_support{}.get_registrations())
    CHECK((field(s, "registrations") & PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED) != 0);
}

void check_not_registered(const std::map<std::string, std::string>& s) {
  CHECK(field(s, "private_expedited") == -EPERM);
  if (kernel_support{}.get_registrations()) CHECK(field(s, "registrations") == 0);
}

// Runs argv without and with the shim and requires the two runs to be indistinguishable.
process_result same_with_and_without_shim(const std::vector<std::string>& argv) {
  process_result plain = run_process(argv, clean_env());
  process_result shimmed = run_process(argv, clean_env({preload_var(artefact("PALRT_TEST_SHIM"))}));
  INFO("command: " << argv.back());
  REQUIRE_FALSE(plain.timed_out);
  REQUIRE_FALSE(shimmed.timed_out);
  CHECK(shimmed.out == plain.out);
  CHECK(shimmed.err == plain.err);
  CHECK(shimmed.exit_code == plain.exit_code);
  CHECK(shimmed.term_signal == plain.term_signal);
  return shimmed;
}

size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

struct temp_dir {
  std::filesystem::path path;
  explicit temp_dir(const std::string& parent) {
    std::string templ = parent + "/palrt-preload-XXXXXX";
    if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
    path = templ;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
};

std::string tmp_parent() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

// What palrt-thread-starter prints for N threads: sum of i*i over 0..N-1.
std::string started(int n) {
  long sum = 0;
  for (long i = 0; i < n; ++i) sum += i * i;
  return "threads=" + std::to_string(n) + " sum=" + std::to_string(sum) + "\n";
}

// A sanitizer's report with what differs from run to run taken out: stack frames (the shim
// adds one to a thread's creation stack, by design), the shadow-memory dump, process and
// thread ids, and addresses. What stays says what was found, where, and by which thread.
std::string report_lines(const std::string& err) {
  static const std::regex frame(R"(^\s*#\d+ )");
  static const std::regex shadow(R"(^(=>|\s+)0x[0-9a-f]+:)");
  static const std::regex pid(R"(==\d+==)");
  static const std::regex id(R"(\b(pid|tid)=\d+)");
  static const std::regex hex(R"(0x[0-9a-f]+)");
  std::string kept;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, frame) || std::regex_search(line, shadow)) continue;
    line = std::regex_replace(line, pid, "==PID==");
    line = std::regex_replace(line, id, "$1=N");
    kept += std::regex_replace(line, hex, "0x?") + "\n";
  }
  return kept;
}

// The shimmed run printed, exited and reported exactly as the plain one.
void check_same_report(const palrt::testing::process_result& plain, const palrt::testing::process_result& shimmed) {
  CHECK(shimmed.out == plain.out);
  CHECK(shimmed.exit_code == plain.exit_code);
  CHECK(shimmed.term_signal == plain.term_signal);
  CHECK(report_lines(shimmed.err) == report_lines(plain.err));
}

// A sanitized program that starts 4 threads ran cleanly, and identically with the shim.
void check_threads_start_alike(const palrt::testing::process_result& plain,
                               const palrt::testing::process_result& shimmed) {
  INFO("stderr without the shim: " << plain.err << "\nstderr with it: " << shimmed.err);
  CHECK(plain.out == started(4));
  CHECK(plain.exit_code == 0);
  CHECK(shimmed.out == plain.out);
  CHECK(shimmed.err == plain.err);
  CHECK(shimmed.exit_code == plain.exit_code);
  CHECK(shimmed.term_signal == plain.term_signal);
}

// Environment for the sanitizer programs: the sanitizers' defaults (meson test sets
// ASAN_OPTIONS, which would turn ASan's exit status into an abort), plus `add`.
run_options sanitizer_env(std::vector<std::string> add = {}) {
  run_options opts = clean_env(std::move(add));
  for (const char* name : {"ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"})
    opts.env_remove.push_back(name);
  return opts;
}

// Runs a sanitizer-built program without and with the shim and returns both results, or
// nothing (with the reason printed) when the sanitizer cannot run on this machine at all.
// `shim_env` is what a user adds next to LD_PRELOAD for that sanitizer.
std::optional<std::pair<process_result, process_result>> sanitized_runs(const std::vector<std::string>& argv,
                                                                        std::vector<std::string> shim_env) {
  process_result plain = run_process(argv, sanitizer_env());
  REQUIRE_FALSE(plain.timed_out);
  // A runtime that refuses this machine's memory layout says FATAL before main runs.
  if (plain.exit_code != 0 && plain.out.empty() && plain.err.find("FATAL: ") != std::string::npos) {
    MESSAGE("the sanitizer cannot run here, so its run under the shim is left untested: "
            << plain.err.substr(0, plain.err.find('\n')));
    return std::nullopt;
  }
  shim_env.push_back(preload_var(artefact("PALRT_TEST_SHIM")));
  process_result shimmed = run_process(argv, sanitizer_env(std::move(shim_env)));
  REQUIRE_FALSE(shimmed.timed_out);
  return std::pair{plain, shimmed};
}

}  // namespace

TEST_SUITE_BEGIN("preload");

TEST_CASE("the shim depends on libc and the dynamic loader only") {
  const std::string shim = artefact("PALRT_TEST_SHIM");
  process_result r = run_process({"ldd", shim});
  INFO("ldd output:\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  bool saw_libc = false;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string name;
    if (!(words >> name)) continue;
    std::string base = std::filesystem::path(name).filename();
    if (starts_with(base, "linux-vdso.so")) continue;
    saw_libc = saw_libc || starts_with(base, "libc.so.");
    CHECK_MESSAGE((starts_with(base, "libc.so.") || starts_with(base, "ld-linux")), "unexpected dependency: " << line);
  }
  CHECK(saw_libc);
}

TEST_CASE("the shim exports palrt_preload_info and pthread_create and nothing else") {
  process_result r = run_process({"nm", "-D", "--defined-only", artefact("PALRT_TEST_SHIM")});
  INFO("nm output:\n" << r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::set<std::string> exported;
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string address, type, name;
    if (words >> address >> type >> name) exported.insert(name);
  }
  CHECK(exported == std::set<std::string>{PALRT_PRELOAD_INFO_SYMBOL, "pthread_create"});
}

TEST_CASE("preloaded programs print and exit exactly as without the shim") {
  SUBCASE("a shell writing to stdout and stderr") {
    process_result r = same_with_and_without_shim({"/bin/sh", "-c", "echo hi; echo oops >&2; exit 3"});
    CHECK(r.out == "hi\n");
    CHECK(r.err == "oops\n");
    CHECK(r.exit_code == 3);
  }
  SUBCASE("python, single-threaded") {
    process_result r =
        same_with_and_without_shim({"/usr/bin/python3", "-c", "import sys; print(sum(range(10))); sys.exit(4)"});
    CHECK(r.out == "45\n");
    CHECK(r.exit_code == 4);
  }
  SUBCASE("python starting threads through the interposed pthread_create") {
    process_result r =
        same_with_and_without_shim({"/usr/bin/python3", "-c",
                                    "import threading\n"
                                    "out = []\n"
                                    "ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
                                    "[t.start() for t in ts]; [t.join() for t in ts]\n"
                                    "print(sorted(out))"});
    CHECK(r.out == "[0, 1, 2, 3]\n");
    CHECK(r.exit_code == 0);
  }
  SUBCASE("ls -la of a directory with files, a subdirectory and a symlink") {
    temp_dir tmp(tmp_parent());
    // Listing a child of the temp dir keeps `..` (the temp dir) unchanged between the runs.
    auto dir = tmp.path / "listing";
    std::filesystem::create_directory(dir);
    std::ofstream(dir / "data") << "some bytes\n";
    std::filesystem::create_directory(dir / "sub");
    std::filesystem::create_symlink("data", dir / "link");
    process_result r = same_with_and_without_shim({"ls", "-la", dir.string()});
    CHECK(r.out.find(" data\n") != std::string::npos);
    CHECK(r.out.find(" link -> data\n") != std::string::npos);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("another pthread_create interposer sees every thread, before or after the shim") {
  // Sanitizers, profilers and tracers interpose pthread_create unversioned and pass the call
  // on with dlsym(RTLD_NEXT); each must see every thread whatever the order of LD_PRELOAD.
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string other = artefact("PALRT_TEST_COUNTING_INTERPOSER");
  const std::string starter = artefact("PALRT_TEST_THREAD_STARTER");
  for (const std::string& preload : {other, shim + " " + other, other + " " + shim}) {
    CAPTURE(preload);
    process_result r = run_process({starter, "8"}, clean_env({preload_var(preload)}));
    INFO("stderr: " << r.err);
    REQUIRE_FALSE(r.timed_out);
    CHECK(r.term_signal == 0);
    CHECK(r.exit_code == 0);
    CHECK(r.out == started(8) + "interposer_calls=8\n");
    CHECK(r.err == "");
  }
}

TEST_CASE("with another interposer in the chain, the shim registers before the first thread") {
  kernel_support kernel;
  REQUIRE(kernel.private_expedited());
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string other = artefact("PALRT_TEST_COUNTING_INTERPOSER");
  const std::string early = artefact("PALRT_TEST_EARLY_THREAD_LIB");
  // The early library's constructor runs first and starts a thread through the whole chain.
  for (const std::string& preload : {shim + " " + other + " " + early, other + " " + shim + " " + early}) {
    CAPTURE(preload);
    auto s = membarrier_state({preload_var(preload)});
    CHECK(field(s, "early_thread_ran") == 1);
    CHECK(field(s, "early_thread_private_expedited") == 0);
    check_registered(s, PALRT_PRELOAD_BY_PTHREAD_CREATE);
  }
}

TEST_CASE("a shim preloaded twice passes threads on through both copies") {
  // A second copy (another file: the loader keeps it as a separate object) and the same path
  // listed twice (one object); threads must start, and the interposer among them see each.
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string other = artefact("PALRT_TEST_COUNTING_INTERPOSER");
  temp_dir tmp(tmp_parent());
  const std::string copy = (tmp.path / "libpalrt-preload-copy.so").string();
  std::filesystem::copy_file(shim, copy);
  for (const std::string& preload :
       {shim + " " + copy + " " + other, shim + " " + other + " " + copy, shim + " " + shim + " " + other}) {
    CAPTURE(preload);
    process_result r = run_process({artefact("PALRT_TEST_THREAD_STARTER"), "8"},
                                   clean_env({preload_var(preload), "PALRT_PRELOAD_VERBOSE=1"}));
    INFO("stderr: " << r.err);
    REQUIRE_FALSE(r.timed_out);
    CHECK(r.term_signal == 0);
    CHECK(r.exit_code == 0);
    CHECK(r.out == started(8) + "interposer_calls=8\n");
    // Each copy is its own shim with its own constructor: one line from each object.
    CHECK(count_lines(r.err) == (preload.find(copy) != std::string::npos ? 2u : 1u));
  }
}

TEST_CASE("a dlsym wrapper ahead of the shim does not make it call itself") {
  // The wrapper makes the real dlsym read RTLD_NEXT relative to the wrapper, so the shim's
  // "next pthread_create" comes back as the shim itself. Calling that would never return (a
  // tail call: it spins); the threads must start instead.
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string forwarder = artefact("PALRT_TEST_DLSYM_FORWARDER");
  const std::string starter = artefact("PALRT_TEST_THREAD_STARTER");
  process_result r = run_process({starter, "8"}, clean_env({preload_var(forwarder + " " + shim)}));
  INFO("stderr: " << r.err);
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.term_signal == 0);
  CHECK(r.exit_code == 0);
  CHECK(r.out == started(8));
  CHECK(r.err == "");
}

TEST_CASE("a ThreadSanitizer program behaves and reports the same under the shim") {
  const std::string tsan = artefact("PALRT_TEST_THREAD_STARTER_TSAN");
  SUBCASE("threads start and finish") {
    auto runs = sanitized_runs({tsan, "4"}, {});
    if (!runs) return;
    check_threads_start_alike(runs->first, runs->second);
  }
  SUBCASE("a data race in a thread is still found") {
    auto runs = sanitized_runs({tsan, "--race"}, {});
    if (!runs) return;
    auto& [plain, shimmed] = *runs;
    INFO("stderr without the shim: " << plain.err << "\nstderr with it: " << shimmed.err);
    CHECK(plain.out == "racy=2\n");
    CHECK(plain.exit_code == 66);  // TSan's exit status after a report
    CHECK(plain.err.find("WARNING: ThreadSanitizer: data race") != std::string::npos);
    check_same_report(plain, shimmed);
  }
}

TEST_CASE("an AddressSanitizer program behaves and reports the same under the shim") {
  // ASan insists on its runtime coming first in the library list; the shim listed ahead of
  // it needs that check off, as docs/PRELOAD.md says.
  const std::string asan = artefact("PALRT_TEST_THREAD_STARTER_ASAN");
  const std::vector<std::string> asan_env{"ASAN_OPTIONS=verify_asan_link_order=0"};
  SUBCASE("threads start and finish") {
    auto runs = sanitized_runs({asan, "4"}, asan_env);
    if (!runs) return;
    check_threads_start_alike(runs->first, runs->second);
  }
  SUBCASE("a use after free in a thread is reported with the right threads") {
    auto runs = sanitized_runs({asan, "--use-after-free"}, asan_env);
    if (!runs) return;
    auto& [plain, shimmed] = *runs;
    INFO("stderr without the shim: " << plain.err << "\nstderr with it: " << shimmed.err);
    CHECK(plain.exit_code == 1);  // ASan's exit status after a report
    CHECK(plain.err.find("READ of size 4 at ") != std::string::npos);
    CHECK(plain.err.find("freed by thread T1 here:") != std::string::npos);
    check_same_report(plain, shimmed);
  }
}

TEST_CASE("PALRT_PRELOAD_VERBOSE=1 prints one line to stderr and leaves stdout alone") {
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::vector<std::string> cmd{"/bin/sh", "-c", "echo hi; exit 3"};
  process_result r = run_process(cmd, clean_env({preload_var(shim), "PALRT_PRELOAD_VERBOSE=1"}));
  INFO("stderr: " << r.err);
  CHECK(r.out == "hi\n");
  CHECK(r.exit_code == 3);
  CHECK(count_lines(r.err) == 1);
  CHECK(starts_with(r.err, "palrt-preload: "));
  if (kernel_support{}.private_expedited()) {
    CHECK(starts_with(r.err, "palrt-preload: registered membarrier (private expedited) in "));
    CHECK(ends_with(r.err, ", 1 thread, by constructor\n"));
  }
}

TEST_CASE("a SIGPIPE from the verbose line does not kill the program") {
  // fd 2 is a pipe whose reader is gone, so the shim's write gets EPIPE and the kernel raises
  // SIGPIPE; the program must still run to its own exit status. Python builds the pipe and
  // restores SIGPIPE to its default action in the child.
  const char* harness = "import os, subprocess, sys\n"
                        "r, w = os.pipe(); os.close(r)\n"
                        "env = dict(os.environ, LD_PRELOAD=sys.argv[1], PALRT_PRELOAD_VERBOSE='1')\n"
                        "p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=w, env=env)\n"
                        "sys.stdout.write('status=%d\\n' % p.returncode + p.stdout.decode())\n";
  process_result r =
      run_process({"/usr/bin/python3", "-c", harness, artefact("PALRT_TEST_SHIM"), "/bin/sh", "-c", "echo hi; exit 3"},
                  clean_env());
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "status=3\nhi\n");
}

namespace {

// The shim's settings as the shim documents them: 1/true/yes/on and 0/false/no/off in any
// case; empty is the same as unset; anything else is the setting's default.
struct setting_case {
  std::optional<std::string> value;  // nullopt: the variable is not set at all
  enum { unset, on, off, not_understood } meaning;
};

std::vector<setting_case> setting_cases() {
  std::vector<setting_case> cases{{std::nullopt, setting_case::unset}, {"", setting_case::unset}};
  for (const char* v : {"1", "true", "TRUE", "Yes", "on", "On"}) cases.push_back({v, setting_case::on});
  for (const char* v : {"0", "false", "False", "NO", "off", "oFF"}) cases.push_back({v, setting_case::off});
  for (const char* v : {"2", "-1", "y", "enable", "disabled", " 1", "0 ", "yes\nno", "ja"})
    cases.push_back({v, setting_case::not_understood});
  cases.push_back({std::string(100, 'x'), setting_case::not_understood});
  return cases;
}

std::vector<std::string> with_setting(std::vector<std::string> env, const char* name,
                                      const std::optional<std::string>& value) {
  if (value) env.push_back(std::string(name) + "=" + *value);
  return env;
}

// How the shim quotes a value it did not understand: at most 32 bytes, anything outside
// printable ASCII as '?', "..." when cut.
std::string shown(const std::string& value) {
  std::string out;
  for (char c : value.substr(0, 32)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return "\"" + out + (value.size() > 32 ? "...\"" : "\"");
}

// The one line a verbose shim prints about its registration, whatever this kernel allows.
void check_registration_line(const std::string& line) {
  if (kernel_support{}.private_expedited())
    CHECK(starts_with(line, "palrt-preload: registered membarrier (private expedited) in "));
  else
    CHECK(starts_with(line, "palrt-preload: membarrier registration failed at "));
  CHECK(ends_with(line, ", 1 thread, by constructor\n"));
}

}  // namespace

TEST_CASE("PALRT_PRELOAD_VERBOSE: on/off words in any case; unset, empty or anything else: quiet") {
  // Anything else is quiet because verbose is what would say so: a misspelt value must not
  // start writing to the stderr of every program in a preloaded tree.
  const std::string shim = artefact("PALRT_TEST_SHIM");
  for (const auto& c : setting_cases()) {
    CAPTURE(c.value.value_or("(unset)"));
    process_result r = run_process({"/bin/sh", "-c", "echo hi; exit 3"},
                                   clean_env(with_setting({preload_var(shim)}, "PALRT_PRELOAD_VERBOSE", c.value)));
    INFO("stderr: " << r.err);
    REQUIRE_FALSE(r.timed_out);
    CHECK(r.out == "hi\n");
    CHECK(r.exit_code == 3);
    if (c.meaning == setting_case::on) {
      CHECK(count_lines(r.err) == 1);
      check_registration_line(r.err);
    } else {
      CHECK(r.err == "");
    }
  }
}

TEST_CASE("PALRT_PRELOAD: off words turn the shim off; unset, empty, on or anything else: on") {
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const bool can_register = kernel_support{}.private_expedited();
  for (const auto& c : setting_cases()) {
    for (bool verbose : {false, true}) {
      CAPTURE(c.value.value_or("(unset)"));
      CAPTURE(verbose);
      std::vector<std::string> env = with_setting({preload_var(shim)}, "PALRT_PRELOAD", c.value);
      if (verbose) env.push_back("PALRT_PRELOAD_VERBOSE=1");

      // The program: its output and exit status are its own; stderr has the shim's lines.
      process_result r = run_process({"/bin/sh", "-c", "echo hi; exit 3"}, clean_env(env));
      INFO("stderr: " << r.err);
      REQUIRE_FALSE(r.timed_out);
      CHECK(r.out == "hi\n");
      CHECK(r.exit_code == 3);
      if (!verbose) {
        CHECK(r.err == "");
      } else if (c.meaning == setting_case::off) {
        CHECK(r.err == "palrt-preload: disabled by PALRT_PRELOAD=" + *c.value + "\n");
      } else if (c.meaning == setting_case::not_understood) {
        // One line about the value, then the usual one about the registration.
        REQUIRE(count_lines(r.err) == 2);
        const auto first_end = r.err.find('\n') + 1;
        CHECK(r.err.substr(0, first_end) ==
              "palrt-preload: PALRT_PRELOAD=" + shown(*c.value) +
                  " not understood (expected 1/true/yes/on or 0/false/no/off), staying on\n");
        check_registration_line(r.err.substr(first_end));
      } else {
        CHECK(count_lines(r.err) == 1);
        check_registration_line(r.err);
      }

      // What the process got, from inside it.
      auto s = membarrier_state(env);
      CHECK(s.at("preload") == "present");
      if (c.meaning == setting_case::off) {
        CHECK(field(s, "preload_state") == PALRT_PRELOAD_DISABLED);
        check_not_registered(s);
      } else {
        CHECK(field(s, "preload_state") == (can_register ? PALRT_PRELOAD_REGISTERED : PALRT_PRELOAD_FAILED));
      }
    }
  }
}

TEST_CASE("the constructor registers the process before main") {
  kernel_support kernel;
  REQUIRE_MESSAGE(kernel.private_expedited(),
                  "this kernel (or a seccomp filter) offers no private expedited membarrier; QUERY = " << kernel.mask);
  const std::string shim = artefact("PALRT_TEST_SHIM");

  auto without = membarrier_state({});
  CHECK(without.at("preload") == "absent");
  check_not_registered(without);

  auto with = membarrier_state({preload_var(shim)});
  check_registered(with, PALRT_PRELOAD_BY_CONSTRUCTOR);
  CHECK(field(with, "preload_mask") == kernel.mask);
}

TEST_CASE("a shim loaded after a thread exists counts the threads of its slow registration") {
  // dlopen after pthread_create: the registration is multi-threaded, the kernel's slow path;
  // the record must say 2 threads (counted), not assume the single-threaded case.
  kernel_support kernel;
  REQUIRE(kernel.private_expedited());
  const std::vector<std::string> late = {"--dlopen-after-thread", artefact("PALRT_TEST_SHIM")};
  // A verbose shim always counts (its line shows the count), whatever the timing said.
  auto verbose = membarrier_state({"PALRT_PRELOAD_VERBOSE=1"}, late);
  CHECK(field(verbose, "preload_state") == PALRT_PRELOAD_REGISTERED);
  CHECK(field(verbose, "preload_threads") == 2);
  CHECK(field(verbose, "private_expedited") == 0);
  // A quiet one counts when the registration was slow, which a multi-threaded one nearly
  // always is (an RCU grace period). When the kernel happened to finish that grace period
  // within the fast-path bound (an idle second CPU, rcu_expedited), timing cannot tell the
  // cases apart and the contract is "not counted": 0, never a wrong count.
  auto s = membarrier_state({}, late);
  CHECK(field(s, "preload_state") == PALRT_PRELOAD_REGISTERED);
  CHECK(field(s, "private_expedited") == 0);
  INFO("registration took " << field(s, "preload_duration_ns") << " ns");
  CHECK(field(s, "preload_threads") == (field(s, "preload_fast_path_inferred") == 1 ? 0 : 2));
}

TEST_CASE("a thread started by an earlier constructor finds the process registered") {
  kernel_support kernel;
  REQUIRE(kernel.private_expedited());
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string early = artefact("PALRT_TEST_EARLY_THREAD_LIB");

  SUBCASE("without the shim the early thread runs unregistered") {
    auto s = membarrier_state({preload_var(early)});
    CHECK(field(s, "early_thread_ran") == 1);
    CHECK(field(s, "early_thread_private_expedited") == -EPERM);
    CHECK(s.at("preload") == "absent");
  }
  SUBCASE("with the shim, pthread_create registers first") {
    // glibc runs preloaded constructors last-listed first, so listing the shim first makes
    // the early library's constructor (and its pthread_create) run before the shim's.
    auto s = membarrier_state({preload_var(shim + " " + early)});
    CHECK(field(s, "early_thread_ran") == 1);
    CHECK(field(s, "early_thread_private_expedited") == 0);
    check_registered(s, PALRT_PRELOAD_BY_PTHREAD_CREATE);
  }
  SUBCASE("the verbose line names the trigger") {
    process_result r = run_process({artefact("PALRT_TEST_MEMBARRIER_STATE")},
                                   clean_env({preload_var(shim + " " + early), "PALRT_PRELOAD_VERBOSE=1"}));
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_lines(r.err) == 1);
    CHECK(starts_with(r.err, "palrt-preload: registered membarrier (private expedited) in "));
    CHECK(ends_with(r.err, ", 1 thread, by pthread_create\n"));
  }
  SUBCASE("a verbose PALRT_PRELOAD=off says so on the pthread_create path too") {
    process_result r =
        run_process({artefact("PALRT_TEST_MEMBARRIER_STATE")},
                    clean_env({preload_var(shim + " " + early), "PALRT_PRELOAD=off", "PALRT_PRELOAD_VERBOSE=on"}));
    CHECK(r.exit_code == 0);
    CHECK(r.err == "palrt-preload: disabled by PALRT_PRELOAD=off\n");
    CHECK(field(parse_state(r.out), "preload_trigger") == PALRT_PRELOAD_BY_PTHREAD_CREATE);
  }
  SUBCASE("PALRT_PRELOAD=0 holds on the pthread_create path too") {
    auto s = membarrier_state({preload_var(shim + " " + early), "PALRT_PRELOAD=0"});
    CHECK(field(s, "early_thread_ran") == 1);
    CHECK(field(s, "early_thread_private_expedited") == -EPERM);
    CHECK(field(s, "preload_state") == PALRT_PRELOAD_DISABLED);
    CHECK(field(s, "preload_trigger") == PALRT_PRELOAD_BY_PTHREAD_CREATE);
    check_not_registered(s);
  }
}

TEST_CASE("a failed registration is recorded and reported, and the program runs on") {
  const std::string seccomp_exec = artefact("PALRT_TEST_SECCOMP_EXEC");
  const std::string shim = artefact("PALRT_TEST_SHIM");
  const std::string state = artefact("PALRT_TEST_MEMBARRIER_STATE");
  for (auto [variant, err, name] : {std::tuple{"eperm", EPERM, "EPERM"}, std::tuple{"enosys", ENOSYS, "ENOSYS"}}) {
    CAPTURE(variant);
    // env sets LD_PRELOAD after the filter is in place, so only the helper loads the shim.
    process_result r = run_process(
        {seccomp_exec, variant, "--", "env", preload_var(shim), "PALRT_PRELOAD_VERBOSE=1", state}, clean_env());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    auto s = parse_state(r.out);
    CHECK(field(s, "preload_state") == PALRT_PRELOAD_FAILED);
    CHECK(field(s, "preload_error") == err);
    CHECK(field(s, "preload_mask") == 0);
    CHECK(field(s, "private_expedited") == -err);
    CHECK(count_lines(r.err) == 1);
    CHECK(starts_with(r.err, std::string("palrt-preload: membarrier registration failed at query: ") + name + " in "));
    CHECK(ends_with(r.err, ", by constructor\n"));
  }
}

TEST_CASE("in secure-execution mode the shim reads no environment") {
  // The only way to get AT_SECURE without touching system directories: a setgid copy of the
  // helper in a private temp dir, run as nobody. The setgid group is an unused gid, so the
  // bit grants nothing. In secure mode the loader takes LD_PRELOAD entries only from system
  // directories (a system-wide install through /etc/ld.so.preload is how the shim meets
  // set-id programs), so the helper dlopens the shim; the constructor is the same code.
  if (geteuid() != 0) {
    MESSAGE("not root: cannot make a setgid helper, secure-execution mode left untested");
    return;
  }
  try {
    if (run_process({"setpriv", "--version"}, clean_env()).exit_code != 0) throw std::runtime_error("setpriv");
  } catch (const std::exception&) {
    MESSAGE("setpriv (util-linux) not found: secure-execution mode left untested");
    return;
  }
  const std::string parent = tmp_parent();
  struct statvfs fs {};
  REQUIRE(statvfs(parent.c_str(), &fs) == 0);
  if (fs.f_flag & ST_NOSUID) {
    MESSAGE(parent << " is mounted nosuid: secure-execution mode left untested");
    return;
  }

  constexpr uid_t nobody = 65534;
  constexpr gid_t nogroup = 65534;
  constexpr gid_t unused_gid = 65533;
  temp_dir tmp(parent);
  const auto setgid_helper = tmp.path / "membarrier-state-setgid";
  const auto plain_helper = tmp.path / "membarrier-state";
  const auto shim = tmp.path / "libpalrt-preload.so";
  std::filesystem::copy_file(artefact("PALRT_TEST_MEMBARRIER_STATE"), setgid_helper);
  std::filesystem::copy_file(artefact("PALRT_TEST_MEMBARRIER_STATE"), plain_helper);
  std::filesystem::copy_file(artefact("PALRT_TEST_SHIM"), shim);
  // chown clears the set-id bits, so chmod comes after it.
  REQUIRE(chown(setgid_helper.c_str(), 0, unused_gid) == 0);
  REQUIRE(chmod(setgid_helper.c_str(), 02755) == 0);
  REQUIRE(chmod(plain_helper.c_str(), 0755) == 0);
  REQUIRE(chmod(shim.c_str(), 0644) == 0);
  // Only nobody (and root) can reach the set-id file while it exists.
  REQUIRE(chown(tmp.path.c_str(), nobody, nogroup) == 0);
  REQUIRE(chmod(tmp.path.c_str(), 0700) == 0);

  auto run_as_nobody = [&](const std::filesystem::path& helper) {
    process_result r =
        run_process({"setpriv", "--reuid=" + std::to_string(nobody), "--regid=" + std::to_string(nogroup),
                     "--clear-groups", helper.string(), "--dlopen", shim.string()},
                    clean_env({"PALRT_PRELOAD=0", "PALRT_PRELOAD_VERBOSE=1"}));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return std::pair{parse_state(r.out), r.err};
  };

  // Control: the same run without the setgid bit honours PALRT_PRELOAD=0 and the verbose
  // setting, which says so.
  auto [plain, plain_err] = run_as_nobody(plain_helper);
  REQUIRE(field(plain, "at_secure") == 0);
  CHECK(field(plain, "preload_state") == PALRT_PRELOAD_DISABLED);
  CHECK(plain_err == "palrt-preload: disabled by PALRT_PRELOAD=0\n");

  auto [secure, secure_err] = run_as_nobody(setgid_helper);
  REQUIRE_MESSAGE(field(secure, "at_secure") == 1, "the setgid helper did not run in secure mode");
  CHECK(secure_err == "");  // PALRT_PRELOAD_VERBOSE=1 not read either
  if (kernel_support{}.private_expedited()) {
    check_registered(secure, PALRT_PRELOAD_BY_CONSTRUCTOR);
  } else {
    CHECK(field(secure, "preload_state") == PALRT_PRELOAD_FAILED);
  }
}

TEST_SUITE_END();
