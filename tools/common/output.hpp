// SPDX-License-Identifier: MIT
// How a tool ends its output. A report that did not reach its reader is a failure (exit 1),
// not a silent success: stdout may be a full disk, a closed descriptor (`>&-`), or a pipe
// whose reader went away while SIGPIPE is ignored.
#pragma once

namespace palrt::tools {

// Flushes stdout and closes its descriptor; true if everything written to stdout (by C or
// C++ streams: they share stdout's buffer while sync_with_stdio is on, the default) was
// accepted. Otherwise prints one line, "<who>: could not write to stdout: <reason>", on
// stderr and returns false. Call it once, last, and only if something was written: a run
// that printed nothing has nothing to lose.
bool finish_stdout(const char* who);

}  // namespace palrt::tools
