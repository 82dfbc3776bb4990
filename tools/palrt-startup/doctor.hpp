// SPDX-License-Identifier: MIT
// palrt-startup doctor: what this machine offers palrt and what palrt would choose.
#pragma once

#include <cstdio>

namespace palrt::tools {

// Prints the report; returns the exit status (0: the report is informational).
int run_doctor(std::FILE* out);

}  // namespace palrt::tools
