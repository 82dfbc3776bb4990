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
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <errno.h>
#include <gnu/lib-names.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "pal/internal/membarrier_syscall.h"
#include "pal/internal/thread_census.h"
#include "startup/internal/preload_info.h"

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

struct config {
  bool enabled;
  bool verbose;
};

static struct config read_config(void) {
  struct config c = {.enabled = true, .verbose = false};
  /* A setuid program must not let its caller's environment steer it: register silently. */
  if (getauxval(AT_SECURE) != 0) return c;
  const char* enable = getenv("PALRT_PRELOAD");
  if (enable && strcmp(enable, "0") == 0) c.enabled = false;
  const char* verbose = getenv("PALRT_PRELOAD_VERBOSE");
  if (verbose && verbose[0] != '\0' && strcmp(verbose, "0") != 0) c.verbose = true;
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

static void report(const struct palrt_preload_info* info) {
  const char* by =
      info->trigger == PALRT_PRELOAD_BY_PTHREAD_CREATE ? "pthread_create" : "constructor";
  /* Microseconds with one decimal on the fast path, milliseconds once it is the slow one. */
  long long ns = info->registration.duration_ns;
  char duration[32];
  if (ns < 1000000)
    snprintf(duration, sizeof duration, "%lld.%lld us", ns / 1000, (ns % 1000) / 100);
  else
    snprintf(duration, sizeof duration, "%lld.%02lld ms", ns / 1000000, (ns % 1000000) / 10000);
  int threads = info->threads_at_registration;
  const char* thread_word = threads == 1 ? "thread" : "threads";

  char line[256];
  int len;
  if (info->state == PALRT_PRELOAD_REGISTERED) {
    len = snprintf(line, sizeof line,
                   "palrt-preload: registered membarrier (private expedited) in %s, %d %s, by %s\n",
                   duration, threads, thread_word, by);
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
    len = snprintf(line, sizeof line,
                   "palrt-preload: membarrier registration failed at %s: %s in %s, %d %s, by %s\n",
                   step, name, duration, threads, thread_word, by);
  }
  if (len > 0) write_stderr_line(line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}

/* Registers (or records that the user disabled it) the first time it is called, from the
 * constructor or the first pthread_create, whichever comes first. */
static void ensure_registered(int trigger) {
  if (__atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) == PHASE_DONE) return;

  /* Callers are a constructor and pthread_create, neither of which promises the program that
   * errno changes, and the program may be inspecting it around either. */
  int saved_errno = errno;
  int expected = PHASE_IDLE;
  if (__atomic_compare_exchange_n(&g_phase, &expected, PHASE_BUSY, false, __ATOMIC_ACQ_REL,
                                  __ATOMIC_ACQUIRE)) {
    struct config cfg = read_config();
    g_info.version = PALRT_PRELOAD_INFO_VERSION;
    g_info.trigger = trigger;
    if (!cfg.enabled) {
      g_info.state = PALRT_PRELOAD_DISABLED;
    } else {
      palrt_membarrier_register(&g_info.registration);
      g_info.state =
          g_info.registration.error == 0 ? PALRT_PRELOAD_REGISTERED : PALRT_PRELOAD_FAILED;
      g_info.threads_at_registration = palrt_threads_at_registration(&g_info.registration);
    }
    __atomic_store_n(&g_phase, PHASE_DONE, __ATOMIC_RELEASE);
    if (cfg.enabled && cfg.verbose) report(&g_info);
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
extern __typeof__(pthread_create) palrt_preload_own_pthread_create
    __attribute__((visibility("hidden")));

/* libc's own pthread_create, found through libc's handle rather than the global lookup
 * order; libpthread for the libcs from before 2.34 that kept it there. */
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

PALRT_PRELOAD_EXPORT int pthread_create(pthread_t* restrict thread,
                                        const pthread_attr_t* restrict attr, void* (*start)(void*),
                                        void* restrict arg) {
  ensure_registered(PALRT_PRELOAD_BY_PTHREAD_CREATE);
  pthread_create_fn fn = real_pthread_create();
  /* Only reachable with a libc that has no pthread_create at all; EAGAIN is the documented
   * "cannot create a thread now" answer, better than jumping to NULL. */
  if (!fn) return EAGAIN;
  return fn(thread, attr, start, arg);
}

/* nothrow as <pthread.h> declares pthread_create, which an alias must not promise less than. */
__typeof__(pthread_create) palrt_preload_own_pthread_create
    __attribute__((alias("pthread_create"), nothrow));

PALRT_PRELOAD_EXPORT const struct palrt_preload_info* palrt_preload_info(void) {
  return __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE) == PHASE_DONE ? &g_info : &k_not_run;
}
