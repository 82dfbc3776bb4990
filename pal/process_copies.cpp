// SPDX-License-Identifier: MIT
// Every copy of palrt carries the note below; a copy that finds another one when it is
// loaded says so (process_copies.hpp). This file is linked into every copy that has
// process-wide state: process_barrier.cpp refers to it (pal::internal::this_copy).
#include "palrt/pal/process_copies.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>

#include "palrt/pal/internal/process_copies.hpp"

// The note: owner "palrt", type 0x70616c01, 4 bytes of format version. SHF_ALLOC in a
// .note.* section of type SHT_NOTE: the linker puts it in a PT_NOTE segment, which the
// loader maps and dl_iterate_phdr shows.
asm(".pushsection .note.palrt,\"a\",@note\n"
    ".balign 4\n"
    ".long 6\n"           // namesz: "palrt" and its NUL
    ".long 4\n"           // descsz
    ".long 0x70616c01\n"  // type
    ".asciz \"palrt\"\n"
    ".balign 4\n"
    ".long 1\n"  // desc: the format of palrt's process-wide state, 1
    ".popsection\n");

namespace palrt::pal {

namespace {

constexpr std::uint32_t note_type = 0x70616c01;

bool has_palrt_note(const dl_phdr_info& info) {
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info.dlpi_phdr[i];
    if (ph.p_type != PT_NOTE || ph.p_align > 4) continue;  // ours is 4-aligned
    auto* p = reinterpret_cast<const unsigned char*>(info.dlpi_addr + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      ElfW(Nhdr) n;
      std::memcpy(&n, p, sizeof n);
      const unsigned char* name = p + sizeof n;
      const std::size_t name_bytes = (n.n_namesz + 3u) & ~std::size_t{3};
      const std::size_t desc_bytes = (n.n_descsz + 3u) & ~std::size_t{3};
      if (name + name_bytes + desc_bytes > end) break;
      if (n.n_type == note_type && n.n_namesz == 6 && std::memcmp(name, "palrt", 6) == 0) return true;
      p = name + name_bytes + desc_bytes;
    }
  }
  return false;
}

std::string path_of(const char* dl_name) {
  if (dl_name && *dl_name) return dl_name;
  char exe[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  return n > 0 ? std::string(exe, static_cast<std::size_t>(n)) : std::string("(the main program)");
}

// Which loaded object this code is in: the address of something with internal linkage. Not
// internal::this_copy: in a plugin with its own copy, a reference to that global binds to the
// first definition loaded (libpalrt.so's, say), as any of this copy's globals may.
const char this_object = 0;

struct copy {
  std::string path;
  bool is_this;  // the object this code is in
};

bool contains(const dl_phdr_info& info, const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info.dlpi_phdr[i];
    const std::uintptr_t start = info.dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && a >= start && a - start < ph.p_memsz) return true;
  }
  return false;
}

std::vector<copy> loaded_copies() {
  std::vector<copy> copies;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        if (has_palrt_note(*info))
          static_cast<std::vector<copy>*>(out)->push_back({path_of(info->dlpi_name), contains(*info, &this_object)});
        return 0;
      },
      &copies);
  return copies;
}

// How many loaded objects carry the note: no allocation, no string (every process that links
// palrt runs this at load, on its startup path).
int count_copies() noexcept {
  int n = 0;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* count) {
        if (has_palrt_note(*info)) ++*static_cast<int*>(count);
        return 0;
      },
      &n);
  return n;
}

// At load, this copy's constructor: says so if another copy is there already.
[[gnu::constructor]] void look_for_other_copies() {
  if (count_copies() < 2) return;  // the common case: one walk of the program headers
  try {
    const std::vector<copy> copies = loaded_copies();
    const copy* me = nullptr;
    const copy* other = nullptr;
    for (const copy& c : copies) {
      if (c.is_this)
        me = &c;
      else if (!other)
        other = &c;
    }
    if (!me || !other) return;
    std::fprintf(stderr,
                 "palrt: a second copy of palrt is loaded: %s; the first is %s. Each keeps its own process-wide "
                 "state; link every module of the process against libpalrt.so\n",
                 me->path.c_str(), other->path.c_str());
  } catch (...) {
    // Out of memory this early: nothing to say it with either.
  }
}

}  // namespace

std::vector<std::string> process_copies() {
  std::vector<std::string> paths;
  for (copy& c : loaded_copies()) paths.push_back(std::move(c.path));
  return paths;
}

namespace internal {
const char this_copy = 0;

bool object_holding(const void* address, char* path, std::size_t size, bool* copy) noexcept {
  struct search {
    const void* address;
    char* path;
    std::size_t size;
    bool found = false;
    bool copy = false;
  } q{address, path, size};
  if (size) path[0] = '\0';
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* data) {
        auto& q = *static_cast<search*>(data);
        if (!contains(*info, q.address)) return 0;
        q.found = true;
        q.copy = has_palrt_note(*info);
        if (q.size == 0) return 1;
        if (info->dlpi_name && *info->dlpi_name) {
          std::size_t n = std::strlen(info->dlpi_name);
          if (n >= q.size) n = q.size - 1;
          std::memcpy(q.path, info->dlpi_name, n);
          q.path[n] = '\0';
        } else {
          const ssize_t n = ::readlink("/proc/self/exe", q.path, q.size - 1);
          q.path[n > 0 ? n : 0] = '\0';
        }
        return 1;  // found: stop the walk
      },
      &q);
  if (copy) *copy = q.copy;
  return q.found;
}
}  // namespace internal

}  // namespace palrt::pal
