#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Rewrites abi/libpalrt.so.<soversion>.abi, the committed description of libpalrt.so's ABI,
# from the release build (build/, configured as scripts/test.sh's release step configures it):
# after a change of the ABI that is meant. Commit the file with the change, and a CHANGELOG.md
# line that says what changed and why (docs/ABI.md). Needs abigail-tools (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build -Dbuildtype=release -Dstatic_runtime=true
meson compile -C build update-abi
git --no-pager diff --stat -- abi/
