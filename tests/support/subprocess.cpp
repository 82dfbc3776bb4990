// SPDX-License-Identifier: MIT
#include "subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string_view>

#include <doctest/doctest.h>

extern char** environ;

namespace palrt::testing {
namespace {

std::map<std::string, fresh_fn>& fresh_registry() {
  static std::map<std::string, fresh_fn> registry;
  return registry;
}

std::vector<std::string> build_env(const run_options& opts) {
  std::vector<std::string> env;
  auto name_of = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
  auto overridden = [&](std::string_view name) {
    for (const auto& r : opts.env_remove)
      if (r == name) return true;
    for (const auto& a : opts.env_add)
      if (name_of(a) == name) return true;
    return false;
  };
  for (char** e = environ; *e; ++e)
    if (!overridden(name_of(*e))) env.emplace_back(*e);
  for (const auto& a : opts.env_add) env.push_back(a);
  return env;
}

}  // namespace

fresh_registrar::fresh_registrar(const char* name, fresh_fn fn) { fresh_registry()[name] = fn; }

// Called from main(): returns true (and sets *exit_code) when this process is a fresh child.
bool dispatch_fresh_process(int argc, char** argv, int* exit_code) {
  constexpr std::string_view flag = "--palrt-fresh=";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.substr(0, flag.size()) != flag) continue;
    auto it = fresh_registry().find(std::string(arg.substr(flag.size())));
    if (it == fresh_registry().end()) {
      std::fprintf(stderr, "no fresh-process function named %s\n", argv[i] + flag.size());
      *exit_code = 125;
    } else {
      *exit_code = it->second();
    }
    return true;
  }
  return false;
}

process_result run_process(const std::vector<std::string>& argv, const run_options& opts) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);

  std::vector<std::string> env = build_env(opts);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, cargv[0], &actions, nullptr, cargv.data(), cenv.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
  }

  process_result result;
  auto deadline = std::chrono::steady_clock::now() + opts.timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  return result;
}

process_result run_fresh(const std::string& name, const run_options& opts) {
  REQUIRE_MESSAGE(fresh_registry().count(name) == 1, "no fresh-process function " << name);
  return run_process({"/proc/self/exe", "--palrt-fresh=" + name}, opts);
}

namespace {
std::string asan_options_plus(const char* extra) {
  const char* current = std::getenv("ASAN_OPTIONS");
  std::string value = current && *current ? std::string(current) + ":" + extra : extra;
  return "ASAN_OPTIONS=" + value;
}
}  // namespace

std::vector<std::string> preload_env(const std::string& shim) {
  return {"LD_PRELOAD=" + shim, asan_options_plus("verify_asan_link_order=0")};
}

std::vector<std::string> privilege_drop_env() { return {asan_options_plus("detect_leaks=0")}; }

std::string artefact(const char* env_name) {
  const char* value = std::getenv(env_name);
  REQUIRE_MESSAGE((value && *value), env_name << " is not set: run this suite through `meson test`");
  return value;
}

}  // namespace palrt::testing
