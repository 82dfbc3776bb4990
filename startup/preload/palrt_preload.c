// SPDX-License-Identifier: MIT
/*
 * libpalrt-preload.so: registers the process for membarrier(PRIVATE_EXPEDITED) before its
 * first thread exists.
 *
 * Why this exists. The kernel registers a process for private expedited membarrier on a
 * fast path only while the process is single-threaded (mm_users == 1); once a second thread
 * exists it waits for a full RCU grace period and IPIs every CPU, which is ~13-16 ms on this
 * project's 2-core machines against ~2-3 us single-threaded. Programs that register late pay
 * that on every start: .NET 8 and older, the JDK with -XX:+UseSystemMemoryBarrier, folly
 * apps, anything that dlopens liburcu after starting threads. Registering is sticky and
 * re-registering returns at once, so if this shim registers first, their own late
 * registration becomes free.
 *
 * How. An ELF constructor registers while the process still has one thread. A constructor of
 * another library can run before ours and start a thread, so pthread_create is interposed
 * too: whichever comes first registers, exactly once, and publishes a record
 * (startup/internal/preload_info.h) a palrt host can report on. The interposer hands every
 * call on to the next pthread_create in library order, so it shares the function with the
 * other interposers a program may carry (sanitizer runtimes, profilers, tracers), listed
 * before or after the shim.
 *
 * Constraints that shape the code. It is loaded into every process of a preloaded tree
 * (set-id ones too, when installed system-wide) and into programs that care about every
 * microsecond of startup, so it depends on libc alone, allocates nothing, reads /proc only
 * when its registration already took the slow path (to count the threads that made it
 * slow), writes no files, never touches stdout or the exit status, and in secure-execution
 * mode reads no environment at all.
 *
 * Settings, read once, at the registration (constructor or first pthread_create), and never
 * in secure-execution mode:
 *   PALRT_PRELOAD          0, false, no, off: the shim registers nothing (it still passes
 *                          pthread_create on). 1, true, yes, on, empty or unset: it registers.
 *   PALRT_PRELOAD_VERBOSE  1, true, yes, on: one line to stderr saying what the shim did
 *                          (registered, failed and where, or was disabled). 0, false, no,
 *                          off, empty or unset: nothing.
 * The words match in any ASCII case (the program's locale plays no part) and nothing else
 * does: no surrounding spaces, no other numbers. Any other value means the default. For
 * PALRT_PRELOAD that is "on", and a verbose shim says in a line of its own that it did not
 * understand the value. For PALRT_PRELOAD_VERBOSE it is "off", silently: the setting in
 * doubt is the one that would allow output, and a shim preloaded into a whole tree of
 * programs must not start writing to their stderr over a misspelling.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "palrt/core/membarrier_registration.h"
#include "palrt/core/thread_census.h"
#include "palrt/startup/internal/preload_info.h"

#define PALRT_PRELOAD_EXPORT __attribute__((visibility("default")))

/* g_phase moves IDLE -> BUSY -> DONE once; the CAS on IDLE elects the one writer of g_info,
 * and the release store of DONE publishes it to readers that load DONE with acquire. */
enum { PHASE_IDLE = 0, PHASE_BUSY = 1, PHASE_DONE = 2 };
static int g_phase;
static struct palrt_preload_info g_info;

/* What palrt_preload_info() returns until g_info is published, so a reader never sees a
 * half-written record. */
static const struct palrt_preload_info k_not_run = {
    .version = PALRT_PRELOAD_INFO_VERSION,
    .state = PALRT_PRELOAD_NOT_RUN,
};

typedef int (*pthread_create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
static pthread_create_fn g_real_pthread_create;

/* The value of one setting; see the opening comment for what each word means. */
enum setting { SETTING_UNSET, SETTING_ON, SETTING_OFF, SETTING_NOT_UNDERSTOOD };

/* Whether s equals `lower` (lower-case ASCII) ignoring ASCII case. Not strcasecmp: that
 * follows the program's locale, which may have been set by the time pthread_create runs. */
static bool ascii_equal_nocase(const char* s, const char* lower) {
  for (; *s != '\0' && *lower != '\0'; ++s, ++lower) {
    char c = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
    if (c != *lower) return false;
  }
  return *s == '\0' && *lower == '\0';
}

static enum setting parse_setting(const char* value) {
  static const char* const on[] = {"1", "true", "yes", "on"};
  static const char* const off[] = {"0", "false", "no", "off"};
  if (!value || value[0] == '\0') return SETTING_UNSET;
  for (size_t i = 0; i < sizeof on / sizeof on[0]; ++i)
    if (ascii_equal_nocase(value, on[i])) return SETTING_ON;
  for (size_t i = 0; i < sizeof off / sizeof off[0]; ++i)
    if (ascii_equal_nocase(value, off[i])) return SETTING_OFF;
  return SETTING_NOT_UNDERSTOOD;
}

struct config {
  bool enabled;
  bool verbose;
  /* PALRT_PRELOAD as set, for the verbose lines (NULL when unset or not read), and whether
   * it was a value the shim does not understand. getenv's pointer, so used only within the
   * ensure_registered() call that read it. */
  const char* enable_value;
  bool enable_not_understood;
};

static struct config read_config(void) {
  struct config c = {.enabled = true, .verbose = false};
  /* A setuid program must not let its caller's environment steer it: register silently. */
  if (getauxval(AT_SECURE) != 0) return c;
  c.enable_value = getenv("PALRT_PRELOAD");
  enum setting enable = parse_setting(c.enable_value);
  c.enabled = enable != SETTING_OFF;
  c.enable_not_understood = enable == SETTING_NOT_UNDERSTOOD;
  c.verbose = parse_setting(getenv("PALRT_PRELOAD_VERBOSE")) == SETTING_ON;
  return c;
}

static const char* errno_name(int e) {
  switch (e) {
    case EPERM: return "EPERM";
    case ENOSYS: return "ENOSYS";
    case EINVAL: return "EINVAL";
    case ENOMEM: return "ENOMEM";
    case EFAULT: return "EFAULT";
    case EACCES: return "EACCES";
    case EBUSY: return "EBUSY";
    default: return NULL;
  }
}

/* Writes one line to stderr. A closed pipe on fd 2 must not turn into a SIGPIPE that kills
 * the program, so SIGPIPE is blocked around the write and a SIGPIPE this write raised is
 * consumed (one that was already pending is left alone). */
static void write_stderr_line(const char* line, size_t len) {
  sigset_t pipe_set, old_set, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;

  int write_errno = 0;
  while (len > 0) {
    ssize_t n = write(STDERR_FILENO, line, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      write_errno = n < 0 ? errno : 0;
      break;
    }
    line += n;
    len -= (size_t)n;
  }
  if (write_errno == EPIPE && !was_pending) {
    const struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, NULL);
}

/* One formatted line to stderr. The buffer fits every line the shim makes; should one ever
 * be cut, it still ends the line. */
__attribute__((format(printf, 1, 2))) static void say(const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  int len = vsnprintf(line, sizeof line, format, args);
  va_end(args);
  if (len <= 0) return;
  if ((size_t)len >= sizeof line) {
    len = (int)sizeof line - 1;
    line[len - 1] = '\n';
  }
  write_stderr_line(line, (size_t)len);
}

/* The PALRT_PRELOAD value the shim did not understand, quoted so the user sees what it got:
 * at most 32 bytes, anything but printable ASCII as '?' (it may hold a newline, and the
 * report is one line), "..." when cut. */
static void report_not_understood(const char* value) {
  char shown[33];
  size_t n = 0;
  for (; n < sizeof shown - 1 && value[n] != '\0'; ++n) {
    unsigned char c = (unsigned char)value[n];
    shown[n] = c >= 0x20 && c < 0x7f ? (char)c : '?';
  }
  shown[n] = '\0';
  say("palrt-preload: PALRT_PRELOAD=\"%s%s\" not understood (expected 1/true/yes/on or "
      "0/false/no/off), staying on\n",
      shown, value[n] != '\0' ? "..." : "");
}

static void report(const struct palrt_preload_info* info) {
  const char* by = info->trigger == PALRT_PRELOAD_BY_PTHREAD_CREATE ? "pthread_create" : "constructor";
  /* Microseconds with one decimal on the fast path, milliseconds once it is the slow one. */
  long long ns = info->registration.duration_ns;
  char duration[32];
  if (ns < 1000000)
    snprintf(duration, sizeof duration, "%lld.%lld us", ns / 1000, (ns % 1000) / 100);
  else
    snprintf(duration, sizeof duration, "%lld.%02lld ms", ns / 1000000, (ns % 1000000) / 10000);
  int threads = info->threads_at_registration;
  const char* thread_word = threads == 1 ? "thread" : "threads";

  if (info->state == PALRT_PRELOAD_REGISTERED) {
    say("palrt-preload: registered membarrier (private expedited) in %s, %d %s, by %s\n", duration, threads,
        thread_word, by);
  } else {
    int e = info->registration.error;
    const char* name = errno_name(e);
    char errbuf[24];
    if (!name) {
      snprintf(errbuf, sizeof errbuf, "errno %d", e);
      name = errbuf;
    }
    /* Which step failed tells a seccomp filter (QUERY denied, mask 0) from an old kernel
     * (QUERY works, the command is missing) from a refused REGISTER. */
    uint32_t mask = info->registration.mask;
    uint32_t needed = PALRT_MB_CMD_PRIVATE_EXPEDITED | PALRT_MB_CMD_REGISTER_PRIVATE_EXPEDITED;
    const char* step = mask == 0                   ? "query"
                       : (mask & needed) != needed ? "query (kernel lacks the command)"
                                                   : "register";
    say("palrt-preload: membarrier registration failed at %s: %s in %s, %d %s, by %s\n", step, name, duration, threads,
        thread_word, by);
  }
}

/* Registers (or records that the user disabled it) the first time it is called, from the
 * constructor or the first pthread_create, whichever comes first. */
static void ensure_registered(int trigger) {
  if (__atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) == PHASE_DONE) return;

  /* Callers are a constructor and pthread_create, neither of which promises the program that
   * errno changes, and the program may be inspecting it around either. */
  int saved_errno = errno;
  int expected = PHASE_IDLE;
  if (__atomic_compare_exchange_n(&g_phase, &expected, PHASE_BUSY, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    struct config cfg = read_config();
    g_info.version = PALRT_PRELOAD_INFO_VERSION;
    g_info.trigger = trigger;
    if (!cfg.enabled) {
      g_info.state = PALRT_PRELOAD_DISABLED;
    } else {
      palrt_membarrier_register(&g_info.registration);
      g_info.state = g_info.registration.error == 0 ? PALRT_PRELOAD_REGISTERED : PALRT_PRELOAD_FAILED;
      g_info.fast_path_inferred = palrt_registration_looks_fast(&g_info.registration);
      /* A count only where it tells something or is shown: the verbose line prints it. */
      if (cfg.verbose || !g_info.fast_path_inferred) g_info.threads_at_registration = palrt_threads_in_process();
    }
    __atomic_store_n(&g_phase, PHASE_DONE, __ATOMIC_RELEASE);
    if (cfg.verbose) {
      if (!cfg.enabled) {
        /* Only an accepted "off" word gets here, so the value is short and printable. */
        say("palrt-preload: disabled by PALRT_PRELOAD=%s\n", cfg.enable_value);
      } else {
        if (cfg.enable_not_understood) report_not_understood(cfg.enable_value);
        report(&g_info);
      }
    }
  } else if (expected == PHASE_BUSY) {
    /* Another thread (one that did not come from our pthread_create: raw clone, or libc's own
     * helper threads) is registering right now. Waiting for it could spin for a whole grace
     * period, and our caller's thread must not start before the process is registered, so
     * register here as well: it is idempotent, and only the winner writes the record. */
    struct config cfg = read_config();
    if (cfg.enabled) {
      struct palrt_registration ignored;
      palrt_membarrier_register(&ignored);
    }
  }
  errno = saved_errno;
}

__attribute__((constructor)) static void palrt_preload_constructor(void) {
  ensure_registered(PALRT_PRELOAD_BY_CONSTRUCTOR);
}

/* This object's own pthread_create, through a hidden alias (defined after the function):
 * a plain &pthread_create would go through the GOT and could name another object's. */
extern __typeof__(pthread_create) palrt_preload_own_pthread_create __attribute__((visibility("hidden")));

/* libc's own pthread_create, found through libc's handle rather than the global lookup
 * order; libpthread for the libcs from before 2.34 that kept it there. Only for the rare
 * arrangement described at real_pthread_create(), once: dlopen of an already loaded library
 * maps nothing but may allocate inside glibc, the one place the shim does not promise that. */
static void* libc_pthread_create(void) {
  static const char* const libs[] = {LIBC_SO, LIBPTHREAD_SO};
  for (size_t i = 0; i < sizeof libs / sizeof libs[0]; ++i) {
    void* lib = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!lib) continue;
    void* sym = dlsym(lib, "pthread_create");
    dlclose(lib); /* drops only the reference RTLD_NOLOAD took; libc stays loaded */
    if (sym) return sym;
  }
  return NULL;
}

/* The pthread_create the program would have called without the shim: the next definition in
 * lookup order after this object, which is what plain dlsym(RTLD_NEXT) returns. That may be
 * another interposer (a sanitizer's runtime, a profiler, a tracer: they define
 * pthread_create unversioned and pass the call on the same way) or libc. A versioned lookup
 * (dlvsym) would be wrong here: it only accepts definitions carrying that version, so it
 * would jump over every such interposer to libc, and the threads they never saw would crash
 * a sanitizer or go missing from a profile.
 *
 * Versions. The program reaches this unversioned definition through its versioned reference
 * (pthread_create@GLIBC_2.34, or @GLIBC_2.2.5 from binaries linked before 2.34): the loader
 * lets an unversioned definition satisfy any version. Which version the caller asked for is
 * not visible here, so when the next definition is libc's, the call goes to libc's default
 * version, as it does from every unversioned interposer, sanitizers included. Nothing is
 * lost: the older versions name the same function as the default (on x86_64 both are at one
 * address), except GLIBC_2.0 on the oldest 32-bit ports such as i386, which only binaries
 * linked against glibc 2.0 (1997) reference.
 *
 * Never ourselves. The real dlsym reads RTLD_NEXT relative to its immediate caller, so a
 * library preloaded ahead of the shim that wraps dlsym (some graphics layers and tracers
 * do) turns our question into "the pthread_create after that library", and the answer is
 * this very function: calling it would loop forever. Then, and if nothing is found at all,
 * the call goes to libc's own pthread_create; an interposer after the shim is missed in that
 * one arrangement, which beats hanging every thread start.
 *
 * Resolved on first use rather than in the constructor: an earlier library's constructor may
 * call pthread_create before ours has run. Two racing first callers resolve the same
 * address, so either store is right. memcpy because ISO C has no object-to-function pointer
 * cast; POSIX guarantees it works. */
static pthread_create_fn real_pthread_create(void) {
  pthread_create_fn fn = __atomic_load_n(&g_real_pthread_create, __ATOMIC_ACQUIRE);
  if (fn) return fn;
  void* sym = dlsym(RTLD_NEXT, "pthread_create");
  memcpy(&fn, &sym, sizeof fn);
  if (!fn || fn == palrt_preload_own_pthread_create) {
    sym = libc_pthread_create();
    memcpy(&fn, &sym, sizeof fn);
    if (fn == palrt_preload_own_pthread_create) fn = NULL;
  }
  if (fn) __atomic_store_n(&g_real_pthread_create, fn, __ATOMIC_RELEASE);
  return fn;
}

PALRT_PRELOAD_EXPORT int pthread_create(pthread_t* restrict thread, const pthread_attr_t* restrict attr,
                                        void* (*start)(void*), void* restrict arg) {
  ensure_registered(PALRT_PRELOAD_BY_PTHREAD_CREATE);
  pthread_create_fn fn = real_pthread_create();
  /* Only reachable with a libc that has no pthread_create at all; EAGAIN is the documented
   * "cannot create a thread now" answer, better than jumping to NULL. */
  if (!fn) return EAGAIN;
  return fn(thread, attr, start, arg);
}

/* nothrow as <pthread.h> declares pthread_create, which an alias must not promise less than. */
__typeof__(pthread_create) palrt_preload_own_pthread_create __attribute__((alias("pthread_create"), nothrow));

PALRT_PRELOAD_EXPORT const struct palrt_preload_info* palrt_preload_info(void) {
  return __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) == PHASE_DONE ? &g_info : &k_not_run;
}
