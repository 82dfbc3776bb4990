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
std::map<std::string, std::string> membarrier_state(std::vector<std::string> env,
                                                    std::vector<std::string> args = {}) {
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
    return mask > 0 && (mask & PALRT_MB_CMD_PRIVATE_EXPEDITED) &&
           (mask & PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED);
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

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
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
    CHECK_MESSAGE((starts_with(base, "libc.so.") || starts_with(base, "ld-linux")),
                  "unexpected dependency: " << line);
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
    process_result r =
        same_with_and_without_shim({"/bin/sh", "-c", "echo hi; echo oops >&2; exit 3"});
    CHECK(r.out == "hi\n");
    CHECK(r.err == "oops\n");
    CHECK(r.exit_code == 3);
  }
  SUBCASE("python, single-threaded") {
    process_result r = same_with_and_without_shim(
        {"/usr/bin/python3", "-c", "import sys; print(sum(range(10))); sys.exit(4)"});
    CHECK(r.out == "45\n");
    CHECK(r.exit_code == 4);
  }
  SUBCASE("python starting threads through the interposed pthread_create") {
    process_result r = same_with_and_without_shim(
        {"/usr/bin/python3", "-c",
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
  const char* harness =
      "import os, subprocess, sys\n"
      "r, w = os.pipe(); os.close(r)\n"
      "env = dict(os.environ, LD_PRELOAD=sys.argv[1], PALRT_PRELOAD_VERBOSE='1')\n"
      "p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=w, env=env)\n"
      "sys.stdout.write('status=%d\\n' % p.returncode + p.stdout.decode())\n";
  process_result r = run_process({"/usr/bin/python3", "-c", harness, artefact("PALRT_TEST_SHIM"),
                                  "/bin/sh", "-c", "echo hi; exit 3"},
                                 clean_env());
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "status=3\nhi\n");
}

TEST_CASE("PALRT_PRELOAD=0 turns the shim off, silently") {
  const std::string shim = artefact("PALRT_TEST_SHIM");
  process_result r =
      run_process({"/bin/sh", "-c", "echo hi; exit 3"},
                  clean_env({preload_var(shim), "PALRT_PRELOAD=0", "PALRT_PRELOAD_VERBOSE=1"}));
  CHECK(r.out == "hi\n");
  CHECK(r.err == "");
  CHECK(r.exit_code == 3);

  auto s = membarrier_state({preload_var(shim), "PALRT_PRELOAD=0", "PALRT_PRELOAD_VERBOSE=1"});
  CHECK(s.at("preload") == "present");
  CHECK(field(s, "preload_state") == PALRT_PRELOAD_DISABLED);
  check_not_registered(s);
}

TEST_CASE("the constructor registers the process before main") {
  kernel_support kernel;
  REQUIRE_MESSAGE(
      kernel.private_expedited(),
      "this kernel (or a seccomp filter) offers no private expedited membarrier; QUERY = "
          << kernel.mask);
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
  auto s = membarrier_state({}, {"--dlopen-after-thread", artefact("PALRT_TEST_SHIM")});
  CHECK(field(s, "preload_state") == PALRT_PRELOAD_REGISTERED);
  CHECK(field(s, "preload_threads") == 2);
  CHECK(field(s, "private_expedited") == 0);
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
    process_result r =
        run_process({artefact("PALRT_TEST_MEMBARRIER_STATE")},
                    clean_env({preload_var(shim + " " + early), "PALRT_PRELOAD_VERBOSE=1"}));
    INFO("stderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(count_lines(r.err) == 1);
    CHECK(starts_with(r.err, "palrt-preload: registered membarrier (private expedited) in "));
    CHECK(ends_with(r.err, ", 1 thread, by pthread_create\n"));
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
  for (auto [variant, err, name] :
       {std::tuple{"eperm", EPERM, "EPERM"}, std::tuple{"enosys", ENOSYS, "ENOSYS"}}) {
    CAPTURE(variant);
    // env sets LD_PRELOAD after the filter is in place, so only the helper loads the shim.
    process_result r = run_process(
        {seccomp_exec, variant, "--", "env", preload_var(shim), "PALRT_PRELOAD_VERBOSE=1", state},
        clean_env());
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    auto s = parse_state(r.out);
    CHECK(field(s, "preload_state") == PALRT_PRELOAD_FAILED);
    CHECK(field(s, "preload_error") == err);
    CHECK(field(s, "preload_mask") == 0);
    CHECK(field(s, "private_expedited") == -err);
    CHECK(count_lines(r.err) == 1);
    CHECK(starts_with(
        r.err,
        std::string("palrt-preload: membarrier registration failed at query: ") + name + " in "));
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
    if (run_process({"setpriv", "--version"}, clean_env()).exit_code != 0)
      throw std::runtime_error("setpriv");
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
    process_result r = run_process(
        {"setpriv", "--reuid=" + std::to_string(nobody), "--regid=" + std::to_string(nogroup),
         "--clear-groups", helper.string(), "--dlopen", shim.string()},
        clean_env({"PALRT_PRELOAD=0", "PALRT_PRELOAD_VERBOSE=1"}));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    return std::pair{parse_state(r.out), r.err};
  };

  // Control: the same run without the setgid bit honours PALRT_PRELOAD=0.
  auto [plain, plain_err] = run_as_nobody(plain_helper);
  REQUIRE(field(plain, "at_secure") == 0);
  CHECK(field(plain, "preload_state") == PALRT_PRELOAD_DISABLED);
  CHECK(plain_err == "");

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
