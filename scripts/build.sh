#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Configures and compiles one build folder:  scripts/build.sh <dir> [meson -D options...]
# A fresh folder is set up; an existing one is reconfigured with the options given, so the
# same command works the first time and every time after (run.sh and test.sh rely on that).
# Expects scripts/setup.sh to have run.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: scripts/build.sh <build-dir> [meson -D options...]" >&2
  exit 2
fi
dir=$1
shift

# coredata.dat is what makes a folder a meson build tree; a folder left behind by a failed
# first setup lacks it, and meson 1.0 refuses --reconfigure there but accepts a plain setup.
if [ -f "$dir/meson-private/coredata.dat" ]; then
  meson setup --reconfigure "$dir" "$@"
else
  meson setup "$dir" "$@"
fi
meson compile -C "$dir"
