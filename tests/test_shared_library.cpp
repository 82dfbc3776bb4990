// SPDX-License-Identifier: MIT
// libpalrt.so: what it exports, and a second copy of palrt in one process saying so.
#include <cxxabi.h>
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
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

bool starts_with(const std::string& s, const std::string& head) { return s.rfind(head, 0) == 0; }

// mangled name -> nm's type letter, of every symbol `nm` lists defined in `library`: the
// dynamic symbol table (what the library exports, without the version suffix and without
// the version node's own symbol) or, without `dynamic`, the whole symbol table.
std::map<std::string, char> defined_symbols(const std::string& library, bool dynamic) {
  std::vector<std::string> argv{"nm", "--defined-only"};
  if (dynamic) argv.push_back("-D");
  argv.push_back(library);
  const auto r = run_process(argv);
  REQUIRE(r.exit_code == 0);
  std::map<std::string, char> symbols;
  for (const std::string& line : lines(r.out)) {
    std::istringstream fields(line);
    std::string address, type, name;
    if (!(fields >> address >> type >> name) || type.size() != 1) continue;
    if (const auto at = name.find('@'); at != std::string::npos) name.resize(at);
    if (type == "A" && name == "PALRT_0") continue;
    symbols[name] = type[0];
  }
  return symbols;
}

std::string demangled(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> d(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status),
                                                &std::free);
  return status == 0 && d ? std::string(d.get()) : name;
}

// A name of palrt's internal:: namespaces, or one that takes an internal type (a constructor
// only palrt's own code can call, with a key type only it defines).
bool is_internal(const std::string& demangled_name) { return demangled_name.find("::internal::") != std::string::npos; }

// Type information, its name, a vtable or a VTT: what a host's derived class refers to.
bool is_type_symbol(const std::string& name) {
  return starts_with(name, "_ZTI") || starts_with(name, "_ZTS") || starts_with(name, "_ZTV") ||
         starts_with(name, "_ZTT");
}

// A symbol whose presence does not depend on how much the compiler inlined: a function or
// variable defined in palrt's sources (strong: T, D, B, R). The vague-linkage rest comes and
// goes with the compiler and its options: W, an inline function some caller did not inline;
// u, a static of an inline function or an inline variable; V, type information and vtables
// of classes without a key function, emitted where they are used (an -O1 build that calls
// through a vtable -O3 devirtualized emits it; the type symbols' own test is above).
bool independent_of_inlining(char type) { return type == 'T' || type == 'D' || type == 'B' || type == 'R'; }

constexpr const char* symbols_header =
    "# SPDX-License-Identifier: MIT\n"
    "# What libpalrt.so exports (startup/libpalrt.map), one symbol a line: nm's type letter, the\n"
    "# mangled name and the demangled one. tests/test_shared_library.cpp compares it with the\n"
    "# library, so that every change of the exports is seen and committed with this list: when\n"
    "# they differ, the suite writes the library's list into the build folder and names it.\n"
    "# Which symbols of vague linkage are exported (W inline functions, u statics of inline\n"
    "# functions, V type information and vtables of classes without a key function) depends on\n"
    "# the compiler and its options, so the whole list is compared only in the build named\n"
    "# below, the release build of scripts/test.sh; other builds compare the rest (T D B R).\n"
    "# No internal:: name is exported (docs/ABI.md); abi/libpalrt.so.0.abi describes these\n"
    "# names with their types.\n";

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
    for (const char* prefix :
         {"palrt::", "typeinfo for palrt::", "typeinfo name for palrt::", "vtable for palrt::", "VTT for palrt::",
          "guard variable for palrt::", "TLS init function for palrt::", "TLS wrapper function for palrt::"})
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

TEST_CASE("shared library: it exports palrt's type information and vtables, which a host's derived classes name") {
  const std::string library = artefact("PALRT_TEST_SHARED_LIBRARY");
  const auto exported = defined_symbols(library, true);
  const auto all = defined_symbols(library, false);
  std::vector<std::string> hidden;
  std::size_t palrt_types = 0;
  for (const auto& [name, type] : all) {
    // Of palrt's namespaces, but not of an unnamed namespace (local to its translation unit)
    // nor of an internal one (never exported: the next test case).
    if (!is_type_symbol(name) || name.compare(4, 7, "N5palrt") != 0 || name.find("_GLOBAL__N_") != std::string::npos ||
        is_internal(demangled(name)))
      continue;
    ++palrt_types;
    if (!exported.count(name)) hidden.push_back(demangled(name));
  }
  INFO("of " << palrt_types << " type symbols of palrt's, not exported: " << hidden.size()
             << (hidden.empty() ? "" : ", the first: " + hidden[0]));
  CHECK(hidden.empty());
  // The ones examples/shared needs (docs/GC.md's and docs/INTEROP.md's examples): a finalizable,
  // a wrapper_object, palrt's errors.
  for (const std::string name : {"_ZTIN5palrt2gc6objectE", "_ZTVN5palrt2gc6objectE", "_ZTIN5palrt2gc11finalizableE",
                                 "_ZTVN5palrt2gc11finalizableE", "_ZTIN5palrt7interop14wrapper_objectE",
                                 "_ZTIN5palrt4sync10sync_errorE", "_ZTIN5palrt7startup13startup_errorE"}) {
    CAPTURE(demangled(name));
    CHECK(exported.count(name) == 1);
  }
}

TEST_CASE("shared library: no internal name is exported, so that an internal change is no ABI change") {
  // The installed headers declare internal types only as incomplete types, so no host can
  // call an internal name, and libpalrt.so does not export one (startup/libpalrt.map). The
  // library does define them, so that this test cannot pass on a library that has none.
  const std::string library = artefact("PALRT_TEST_SHARED_LIBRARY");
  std::vector<std::string> exported_internal;
  for (const auto& [name, type] : defined_symbols(library, true))
    if (is_internal(demangled(name))) exported_internal.push_back(demangled(name));
  std::size_t defined_internal = 0;
  for (const auto& [name, type] : defined_symbols(library, false))
    if (is_internal(demangled(name))) ++defined_internal;
  INFO("exported internal names: " << exported_internal.size()
                                   << (exported_internal.empty() ? "" : ", the first: " + exported_internal[0]));
  CHECK(exported_internal.empty());
  CHECK(defined_internal > 100);
  // What the installed headers' inline code calls is of detail:: namespaces, and stays: here
  // gc::make's registration of a new object, and a read section's epoch and first entry.
  const auto exported = defined_symbols(library, true);
  for (const std::string name :
       {"_ZN5palrt2gc6detail13object_access7createdERNS0_6objectE", "_ZN5palrt2gc6detail12global_epochE",
        "_ZN5palrt2gc6detail23register_current_readerEv"}) {
    CAPTURE(demangled(name));
    CHECK(exported.count(name) == 1);
  }
}

TEST_CASE("shared library: a module whose classes derive from palrt's loads on libpalrt.so and runs") {
  const auto r = run_process({artefact("PALRT_TEST_COPIES_HOST"), artefact("PALRT_TEST_DERIVED_TYPES_MODULE")});
  INFO(r.err);
  CHECK(r.exit_code == 0);  // 2: dlopen() failed (an undefined symbol); 3: the module's steps failed
  const auto copies = lines(r.out);
  REQUIRE(copies.size() == 1);  // the module uses libpalrt.so's copy, it has none of its own
  CHECK(copies[0].find("libpalrt.so") != std::string::npos);
}

TEST_CASE("shared library: its exports are the committed list, startup/libpalrt.symbols") {
  const std::string committed_path = artefact("PALRT_TEST_EXPORTED_SYMBOLS");
  const std::string this_build = artefact("PALRT_TEST_EXPORTED_SYMBOLS_BUILD");
  const std::string new_path = artefact("PALRT_TEST_EXPORTED_SYMBOLS_NEW");
  const auto exported = defined_symbols(artefact("PALRT_TEST_SHARED_LIBRARY"), true);

  std::ifstream in(committed_path);
  REQUIRE_MESSAGE(in.good(), "cannot read " << committed_path);
  std::map<std::string, char> committed;
  std::string listed_build;
  for (std::string line; std::getline(in, line);) {
    if (starts_with(line, "# build: ")) listed_build = line.substr(9);
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string type, name;
    REQUIRE_MESSAGE(static_cast<bool>(fields >> type >> name), "a line of " << committed_path << ": " << line);
    REQUIRE(type.size() == 1);
    committed[name] = type[0];
  }
  REQUIRE_MESSAGE(!listed_build.empty(), committed_path << " has no '# build: ' line");
  const bool whole = listed_build == this_build;
  const std::string compared = whole ? "every exported symbol" : "the exports that do not depend on inlining (T D B R)";
  MESSAGE("compared " << compared << ": the list is of " << listed_build << ", this build is " << this_build);

  std::vector<std::string> added, removed;
  for (const auto& [name, type] : exported) {
    if (!whole && !independent_of_inlining(type)) continue;
    const auto it = committed.find(name);
    if (it == committed.end() || it->second != type) added.push_back(std::string(1, type) + " " + demangled(name));
  }
  for (const auto& [name, type] : committed) {
    if (!whole && !independent_of_inlining(type)) continue;
    const auto it = exported.find(name);
    if (it == exported.end() || it->second != type) removed.push_back(std::string(1, type) + " " + demangled(name));
  }
  if (!added.empty() || !removed.empty()) {
    std::ofstream out(new_path, std::ios::trunc);
    out << symbols_header << "# build: " << this_build << "\n";
    for (const auto& [name, type] : exported) out << type << ' ' << name << ' ' << demangled(name) << '\n';
    out.close();
    std::ostringstream diff;
    for (const auto& a : added) diff << "\n  + " << a;
    for (const auto& r : removed) diff << "\n  - " << r;
    INFO("libpalrt.so's exports differ from "
         << committed_path << " (" << added.size() << " new, " << removed.size() << " gone):" << diff.str()
         << "\nIf that is meant, take the list of a build of " << listed_build
         << " (scripts/test.sh's release build): this build's is written to " << new_path
         << " (cp it over the committed list and commit it with the change)"
         << std::string(whole ? "" : "; this build is not one"));
    CHECK(false);
  }
}
