#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The main job: set up the machine, build palrt (release, in build/), and time startup
# under hyperfine (scripts/bench-startup.sh; results land in results/).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# static_runtime: the tools start like a C program (see meson_options.txt); test.sh configures
# build/ the same way so the two never force each other to rebuild.
scripts/build.sh build -Dbuildtype=release -Dstatic_runtime=true
exec scripts/bench-startup.sh
