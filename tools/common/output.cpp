// SPDX-License-Identifier: MIT
#include "common/output.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace palrt::tools {

bool finish_stdout(const char* who) {
  errno = 0;
  // ferror too: a report larger than stdout's buffer had a write fail earlier, and the
  // final fflush may then have nothing left to fail on.
  bool ok = std::fflush(stdout) == 0 && !std::ferror(stdout);
  // close(), not fclose(stdout): the C++ streams flush stdout once more at exit, and that
  // must not touch a closed FILE. close() still reports what a file system only reports
  // there (NFS, quotas). Nothing is buffered any more, so nothing is written after it.
  if (ok) ok = ::close(STDOUT_FILENO) == 0 || errno == EINTR;  // after EINTR Linux has closed it
  if (!ok) {
    const int err = errno;
    std::fprintf(stderr, "%s: could not write to stdout: %s\n", who,
                 err != 0 ? std::strerror(err) : "an earlier write failed");
  }
  return ok;
}

}  // namespace palrt::tools
