#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Formats palrt's C and C++ sources with clang-format 14 (Debian 12's) and the top-level
# .clang-format.
#
#   scripts/format.sh           reformats the files in place (what a developer runs)
#   scripts/format.sh --check   changes nothing; fails naming each file clang-format would
#                               change, with the diff of the first few (the `format` test)
#   --source-root DIR           the tree to format (default: the one this script is in)
#
# The files: in a git checkout, those git knows or would add (tracked, and untracked but not
# ignored); in any other tree (an unpacked source package), the same found by walking it.
# Either way, C and C++ sources and headers only, and never a meson subproject (third-party
# code), debian/ (packaging and its staging folders) or a build folder.
#
# Exit status: 0 when every file is formatted (or, in place, was formatted); 1 when --check
# found files to change, or clang-format is missing, is not version 14, or failed; 2 for
# bad arguments.
set -euo pipefail

usage="usage: scripts/format.sh [--check] [--source-root DIR]"
check=false
root="$(cd "$(dirname "$0")/.." && pwd)"
while [ $# -gt 0 ]; do
  case $1 in
    --check) check=true ;;
    --source-root) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; root=$2; shift ;;
    --source-root=*) root=${1#--source-root=} ;;
    -h|--help) echo "$usage"; exit 0 ;;
    *) echo "format.sh: unknown argument '$1'" >&2; echo "$usage" >&2; exit 2 ;;
  esac
  shift
done
cd "$root"

# clang-format's output differs between major versions: the tree is formatted by 14, the
# version Debian 12 ships, and another would report (or make) changes that 14 undoes.
clang_format=""
for candidate in clang-format-14 clang-format; do
  if command -v "$candidate" >/dev/null 2>&1; then clang_format=$candidate; break; fi
done
if [ -z "$clang_format" ]; then
  echo "format.sh: clang-format is not installed: run scripts/setup.sh (Debian 12: apt-get install clang-format)" >&2
  exit 1
fi
version=$("$clang_format" --version)
if [[ ! $version =~ version\ 14\. ]]; then
  echo "format.sh: palrt is formatted with clang-format 14 (Debian 12's); $clang_format is: $version" >&2
  echo "format.sh: install clang-format-14 (scripts/setup.sh on Debian 12 does)" >&2
  exit 1
fi
# Without it clang-format would fall back to its own default style, silently.
[ -f .clang-format ] || { echo "format.sh: $root has no .clang-format" >&2; exit 1; }

# What to format, from a list of paths relative to the root, one per line (NUL-separated).
wanted() {
  local path
  while IFS= read -r -d '' path; do
    path=${path#./}
    case $path in
      subprojects/* | */subprojects/* | debian/*) continue ;;
      *.c | *.h | *.cc | *.cpp | *.cxx | *.hh | *.hpp | *.hxx) ;;
      *) continue ;;
    esac
    # A regular file (a symbolic link is formatted where it points, if at all; a file
    # deleted but not yet removed from git's index is gone).
    if [ -f "$path" ] && [ ! -L "$path" ]; then printf '%s\0' "$path"; fi
  done
}
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 &&
   [ "$(git rev-parse --show-toplevel)" = "$(pwd -P)" ]; then
  list() { git ls-files -z --cached --others --exclude-standard; }
else
  # Build folders may have any name: meson's hold meson-private/, CMake's CMakeCache.txt.
  list() {
    find . \( -name .git -o -path ./subprojects -o -path ./debian \
              -o -exec test -e '{}/meson-private' -o -e '{}/CMakeCache.txt' \; \) -prune \
           -o -type f -print0
  }
fi
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(list | wanted | sort -z)
if [ ${#files[@]} -eq 0 ]; then
  echo "format.sh: no C or C++ files found under $root" >&2
  exit 1
fi

if ! $check; then
  printf '%s\0' "${files[@]}" | xargs -0 "$clang_format" -i --style=file
  echo "format.sh: formatted ${#files[@]} files with $clang_format ($root)"
  exit 0
fi

# --dry-run --Werror reports each place it would change as
# "FILE:LINE:COL: error: code should be clang-formatted [-Wclang-format-violations]".
status=0
output=$(printf '%s\0' "${files[@]}" | xargs -0 "$clang_format" --dry-run --Werror --style=file 2>&1) || status=$?
changed=()
while IFS= read -r f; do
  [ -n "$f" ] && changed+=("$f")
done < <(sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$output" | sort -u)
if [ "$status" -ne 0 ] && [ ${#changed[@]} -eq 0 ]; then
  # Not a formatting difference: a bad .clang-format, an unreadable file...
  echo "$output" >&2
  echo "format.sh: $clang_format failed (status $status)" >&2
  exit 1
fi
if [ ${#changed[@]} -eq 0 ]; then
  echo "format.sh: ${#files[@]} files formatted as .clang-format says"
  exit 0
fi

shown=3
for f in "${changed[@]:0:$shown}"; do
  "$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - || true
done
[ ${#changed[@]} -le $shown ] || echo "(diffs of the other $((${#changed[@]} - shown)) files left out)"
echo
echo "format.sh: clang-format would change ${#changed[@]} of ${#files[@]} files:"
printf '  %s\n' "${changed[@]}"
echo "format.sh: run scripts/format.sh to reformat them"
exit 1
