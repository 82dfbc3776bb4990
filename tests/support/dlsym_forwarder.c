// SPDX-License-Identifier: MIT
/*
 * libpalrt-test-dlsym-forwarder.so: a library that wraps dlsym and passes every call on to
 * the real one, as some graphics layers, tracers and loader shims do. The real dlsym reads
 * RTLD_NEXT relative to its caller, which is now this library, not the one that asked: a
 * shim listed after this library in LD_PRELOAD asks for "the pthread_create after me" and
 * is handed its own. The shim must notice instead of calling itself forever.
 */
#define _GNU_SOURCE

#include <dlfcn.h>
#include <string.h>

void* dlsym(void* restrict handle, const char* restrict name) {
  void* (*real)(void*, const char*);
  /* dlvsym, so this lookup does not come back here. GLIBC_2.34: dlsym moved into libc. */
  void* sym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
  memcpy(&real, &sym, sizeof real);
  void* result = real(handle, name);
  /* Code after the call keeps it from being a tail jump, which would leave the asker's
   * return address in place and hide the effect this library exists to reproduce. */
  __asm__ volatile("" ::: "memory");
  return result;
}
