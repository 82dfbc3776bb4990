#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fresh-machine check: runs the README's two commands (scripts/run.sh, then scripts/test.sh)
# exactly as a newcomer would, on a brand-new Debian 12 minbase system, so that a missing
# install step in scripts/setup.sh fails here instead of on someone's new machine. A
# developer's machine always has something installed that the scripts forgot to ask for
# (CMake once hid a missing doctest lookup); a minbase root has only what Debian requires.
# Then, in the same root, scripts/package-check.sh: the Debian packages built from the tree
# (their test suites off: test.sh has just run them), installed with apt-get, and a host
# built against them alone.
#
#   sudo scripts/fresh-check.sh ['command args' ...]
#
# Each argument is one more command, run after those three in the same root and clone, its words
# split on blanks (e.g. 'scripts/test.sh --only=slow': CI runs the slow suite this way, in the
# release build the README's commands made, instead of building it again elsewhere).
#
# How: builds a `debootstrap --variant=minbase bookworm` root (the base packages are cached
# in a tarball: made once with --make-tarball, then each run unpacks a fresh root from it
# with --unpack-tarball), gives it this machine's apt sources and resolv.conf, git-clones
# this repository's HEAD into /root/palrt (committed work only: uncommitted changes are not
# part of the check), bind-mounts /proc, /sys and /dev, and runs the three commands with
# chroot as root in a clean environment (env -i: HOME, PATH, LANG only). It prints PASS or
# FAIL per command and exits 1 if any failed. The mounts are undone and the root removed
# however the run ends (Ctrl-C and SIGTERM included); a run killed with SIGKILL is cleaned
# up by the next one.
#
# Needs root, network access to the Debian mirror, and ~3 GB free in the cache folder (a
# root grows to 1.7 GB; the tarball is 45 MB).
# Installs debootstrap on this machine with apt-get if it is missing. The two commands take
# about 10 minutes on a quiet 2-core machine (apt; the release build, ~3.5 minutes of it; the
# startup benchmark; the suites and the consumers, ~1.5), several times that on a busy one;
# the package check adds about 4 (the packages' build, ~3.2 of it: measured 3m49s in all);
# making the tarball the first time adds under a minute, and extra commands their own time.
#
#   FRESH_CHECK_CACHE=/var/cache/palrt-fresh-check   the base tarball, roots/ (each run's
#                                                    root) and the lock
#   FRESH_CHECK_KEEP=1     keep this run's root (unmounted) for debugging; the path is
#                          printed. Look around with: sudo chroot <root> /bin/bash
#                          Remove it with rm -rf once done (a kept root is never reused).
#   FRESH_CHECK_MIRROR=URI Debian mirror for debootstrap (default: this machine's, from
#                          /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list)
#
# Exit status: 0 every command passed, 1 a command failed, 2 not root, 3 the set-up failed
# before any command ran (mirror, debootstrap, mounts: nothing was checked), 130/143
# interrupted.
set -euo pipefail
commands=(scripts/run.sh scripts/test.sh scripts/package-check.sh "$@")

if [ "$(id -u)" -ne 0 ]; then
  echo "fresh-check: needs root (debootstrap, chroot and bind mounts); run: sudo $0" >&2
  exit 2
fi

suite=bookworm
cache=${FRESH_CHECK_CACHE:-/var/cache/palrt-fresh-check}
keep=${FRESH_CHECK_KEEP:-0}
repo=$(cd "$(dirname "$0")/.." && pwd -P)
arch=$(dpkg --print-architecture)
clean_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "fresh-check: $*"; }
fail() { echo "fresh-check: $*" >&2; exit 1; }

elapsed() {
  local s=$((SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

case $cache in
  /*) ;;
  *) echo "fresh-check: FRESH_CHECK_CACHE must be an absolute path (got '$cache')" >&2; exit 2 ;;
esac
cache=${cache%/}
[ -n "$cache" ] || { echo "fresh-check: FRESH_CHECK_CACHE must not be /" >&2; exit 2; }

# ---------------------------------------------------------------------------------------
# Mounts, processes and removal of a root. Everything that deletes a root goes through
# release_root, which refuses to delete while anything is still mounted inside it.

# Mount points at or below $1, deepest first. /proc/self/mountinfo escapes blanks as \040.
mounts_under() {
  local root=$1 mp
  while read -r _ _ _ _ mp _; do
    mp=$(printf '%b' "$mp")
    if [ "$mp" = "$root" ] || [[ $mp == "$root"/* ]]; then
      printf '%s\n' "$mp"
    fi
  done </proc/self/mountinfo | sort -r
}

# Processes whose root directory is $1 or below (anything still running in the chroot).
root_pids() {
  local root=$1 p link
  for p in /proc/[0-9]*; do
    link=$(readlink "$p/root" 2>/dev/null) || continue
    if [ "$link" = "$root" ] || [[ $link == "$root"/* ]]; then
      echo "${p#/proc/}"
    fi
  done
}

kill_root_processes() {
  local root=$1 pids i
  pids=$(root_pids "$root")
  [ -n "$pids" ] || return 0
  say "stopping $(echo "$pids" | wc -w) process(es) still running in $root"
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    [ -n "$(root_pids "$root")" ] || return 0
    sleep 0.1
  done
  pids=$(root_pids "$root")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  sleep 0.5
}

# Undoes every mount below $1: deepest first, then lazily (a lazy unmount detaches the
# mount from the tree at once, even if something still holds it open).
unmount_under() {
  local root=$1 mp
  while read -r mp; do
    [ -n "$mp" ] || continue
    umount "$mp" 2>/dev/null || umount -l "$mp" 2>/dev/null || true
  done < <(mounts_under "$root")
  while read -r mp; do
    [ -n "$mp" ] || continue
    umount -R -l "$mp" 2>/dev/null || true
  done < <(mounts_under "$root")
}

# Stops what runs in the root, unmounts, and deletes it (or leaves it, with $2 = keep).
release_root() {
  local root=$1 what=${2:-remove} left
  case $root in
    "$cache"/roots/?*) ;;
    *) echo "fresh-check: refusing to release '$root': not under $cache/roots" >&2; return 1 ;;
  esac
  [ -d "$root" ] || return 0
  local t=$SECONDS
  kill_root_processes "$root"
  unmount_under "$root"
  released_in="stopped and unmounted in $(elapsed "$t")"
  left=$(mounts_under "$root")
  if [ -n "$left" ]; then
    echo "fresh-check: still mounted, not removing $root:" >&2
    printf '%s\n' "$left" | sed 's/^/  /' >&2
    return 1
  fi
  if [ "$what" = keep ]; then
    touch "$root/.fresh-check-kept"
    say "kept the root (nothing mounted): $root"
    return 0
  fi
  # --one-file-system: even a mount this check missed is never descended into.
  t=$SECONDS
  rm -rf --one-file-system "$root"
  released_in+=", removed in $(elapsed "$t")"
}

# ---------------------------------------------------------------------------------------
# Steps run in their own process group, so that on Ctrl-C or SIGTERM this script decides
# the order: stop the step's group, then whatever else runs in the root, then unmount.
step_pid=
released_in=
run_step() {
  local status=0
  set -m
  "$@" </dev/null 9>&- &
  step_pid=$!
  set +m
  wait "$step_pid" || status=$?
  step_pid=
  return "$status"
}

# True while process group $1 has a live member. Zombies do not count: the step's leader is
# this script's child and stays a zombie until reaped, which kill -0 cannot tell apart.
group_alive() {
  cat /proc/[0-9]*/stat 2>/dev/null |
    awk -v g="$1" '{ sub(/^.*\) /, "") } $3 == g && $1 != "Z" { found = 1 } END { exit !found }'
}

stop_step() {
  local i gone=0
  [ -n "$step_pid" ] || return 0
  kill -TERM -- "-$step_pid" 2>/dev/null || true
  # Gone means seen gone twice in a row: one look at /proc can miss a child forked meanwhile.
  for ((i = 0; i < 100 && gone < 2; i++)); do
    if group_alive "$step_pid"; then gone=0; else gone=$((gone + 1)); fi
    sleep 0.1
  done
  if [ "$gone" -lt 2 ]; then
    say "the step did not stop within 10 s of SIGTERM; sending SIGKILL"
    kill -KILL -- "-$step_pid" 2>/dev/null || true
  fi
  wait "$step_pid" 2>/dev/null || true
  step_pid=
}

root=
scratch=
cleaned=false
cleanup_failed=false
cleanup() {
  local -
  set +e
  $cleaned && return 0
  cleaned=true
  local t=$SECONDS
  stop_step
  [ "$t" = "$SECONDS" ] || say "the running step stopped in $(elapsed "$t")"
  if [ -n "$scratch" ]; then
    release_root "$scratch"
  fi
  if [ -n "$root" ]; then
    if [ "$keep" = 1 ]; then release_root "$root" keep; else release_root "$root"; fi
    say "root: $released_in"
  fi
  # The last word: nothing of this run may stay mounted.
  if [ -n "$root" ] && [ -n "$(mounts_under "$root")" ]; then
    echo "fresh-check: ERROR: mounts left below $root:" >&2
    mounts_under "$root" >&2
    cleanup_failed=true
  fi
}
on_signal() {
  trap '' INT TERM HUP
  echo >&2
  echo "fresh-check: interrupted by SIG$1; cleaning up" >&2
  cleanup
  trap - EXIT
  [ "$1" = INT ] && exit 130
  [ "$1" = HUP ] && exit 129
  exit 143
}
# A failure before the first command ran is the set-up's (exit 3): a caller can tell it from a
# command that failed.
commands_started=false
on_exit() {
  local status=$?
  cleanup
  if [ "$status" -ne 0 ] && ! $commands_started; then
    echo "fresh-check: the set-up failed before any command ran (exit 3)" >&2
    exit 3
  fi
}
trap on_exit EXIT
trap 'echo "fresh-check: failed (line $LINENO: $BASH_COMMAND)" >&2' ERR
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM
trap 'on_signal HUP' HUP

# ---------------------------------------------------------------------------------------
# Host side.

started=$SECONDS
mkdir -p "$cache/roots"
exec 9>"$cache/lock"
if ! flock -n 9; then
  say "another fresh-check holds $cache/lock; waiting for it"
  flock 9
fi

# A tarball whose making was interrupted is never used.
rm -f "$cache"/*.part

# Roots of earlier runs that died without cleaning up (SIGKILL, power loss): we hold the
# lock, so no run is using them.
for old in "$cache"/roots/*; do
  [ -d "$old" ] || continue
  if [ -e "$old/.fresh-check-kept" ]; then
    say "note: a kept root from an earlier run is in $old (remove it with rm -rf when done)"
    continue
  fi
  say "cleaning up a root an earlier run left behind: $old"
  release_root "$old" || fail "could not clean up $old; unmount what is listed above and retry"
done

free_kb=$(df -Pk "$cache" | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt $((3 * 1024 * 1024)) ]; then
  say "warning: only $((free_kb / 1024)) MB free in $cache; a run needs about 3 GB"
fi

host_packages=()
command -v debootstrap >/dev/null 2>&1 || host_packages+=(debootstrap)
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || host_packages+=(debian-archive-keyring)
command -v git >/dev/null 2>&1 || host_packages+=(git)
if [ ${#host_packages[@]} -gt 0 ]; then
  say "installing on this machine: ${host_packages[*]}"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${host_packages[@]}"
fi

# The mirror: this machine's own, the first source carrying $suite (not -updates or
# -security), deb822 files first and then one-line files, as apt reads them.
find_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # One stanza per blank-line-separated paragraph; "Enabled: no" stanzas are skipped.
    awk -v suite="$suite" '
      function flush() {
        if (uris != "" && types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && enabled != "no") {
          split(uris, u, " "); print u[1]; found = 1; exit
        }
        uris = ""; types = ""; suites = ""; enabled = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      tolower($1) == "uris:"    { $1 = ""; uris = $0; sub(/^ +/, "", uris) }
      tolower($1) == "types:"   { $1 = ""; types = $0 " " }
      tolower($1) == "suites:"  { $1 = ""; suites = $0; sub(/^ +/, "", suites) }
      tolower($1) == "enabled:" { enabled = tolower($2) }
      END { if (!found) flush() }
    ' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI suite components...
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2 }'
  done
}
mirror=${FRESH_CHECK_MIRROR:-$(find_mirror | head -n 1)}
if [ -z "$mirror" ]; then
  mirror=http://deb.debian.org/debian
  say "no $suite source found in this machine's apt sources; using $mirror"
fi
include=()
case $mirror in
  https:*) include=(--include=ca-certificates) ;;  # minbase has no CA certificates
esac

# The commit under test. A fresh clone is what a newcomer has, so only committed work counts.
head=$(git -C "$repo" -c safe.directory='*' rev-parse HEAD)
if [ -n "$(git -C "$repo" -c safe.directory='*' status --porcelain)" ]; then
  say "the work tree has uncommitted changes; they are not part of this check (it tests HEAD ${head:0:12})"
fi

say "checking ${head:0:12} on a fresh $suite minbase root ($arch, mirror $mirror)"

# The base tarball, named after everything that goes into it.
key=$(printf '%s\n' "$suite" "$arch" "$mirror" "${include[@]}" | sha256sum | cut -c1-12)
tarball=$cache/$suite-minbase-$arch-$key.tgz
if [ -f "$tarball" ]; then
  say "base tarball: reusing $tarball"
else
  say "base tarball: downloading the minbase packages once into $tarball"
  t=$SECONDS
  scratch=$(mktemp -d "$cache/roots/tarball.XXXXXX")
  run_step debootstrap --variant=minbase --arch="$arch" "${include[@]}" \
    --make-tarball="$tarball.part" "$suite" "$scratch" "$mirror" ||
    fail "debootstrap --make-tarball failed (mirror $mirror)"
  release_root "$scratch"
  scratch=
  mv "$tarball.part" "$tarball"  # only a complete tarball is ever reused
  say "base tarball: made in $(elapsed "$t")"
fi

# A new root, every run.
root=$(mktemp -d "$cache/roots/run-$(date +%Y%m%d-%H%M%S).XXXXXX")
chmod 755 "$root"  # mktemp makes it 0700; a real / lets every user (_apt, nobody) through
say "root: $root"
t=$SECONDS
run_step debootstrap --variant=minbase --arch="$arch" "${include[@]}" \
  --unpack-tarball="$tarball" "$suite" "$root" "$mirror" ||
  fail "debootstrap --unpack-tarball failed (if the tarball is damaged, delete $tarball)"
say "root: installed in $(elapsed "$t")"

# apt inside works as it does here: the same sources, the keys they name, name resolution.
rm -f "$root/etc/apt/sources.list"
mkdir -p "$root/etc/apt/sources.list.d" "$root/etc/apt/trusted.gpg.d"
copied=0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  cp "$f" "$root$f"
  copied=$((copied + 1))
done
if [ "$copied" -eq 0 ]; then
  echo "deb $mirror $suite main" >"$root/etc/apt/sources.list"
fi
for f in /etc/apt/trusted.gpg /etc/apt/trusted.gpg.d/*; do
  if [ -f "$f" ] && [ ! -e "$root$f" ]; then cp "$f" "$root$f"; fi
done
# Keyrings named by Signed-By (deb822) or signed-by= (one-line) that the root lacks.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  awk '
    tolower($1) == "signed-by:" && $2 ~ /^\// { print $2 }
    /^[ \t]*deb/ && match($0, /signed-by=[^] \t]*/) { print substr($0, RSTART + 10, RLENGTH - 10) }
  ' "$f"
done | sort -u | while read -r k; do
  if [ -f "$k" ] && [ ! -e "$root$k" ]; then
    mkdir -p "$root$(dirname "$k")"
    cp "$k" "$root$k"
  fi
done
rm -f "$root/etc/resolv.conf"
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

# The repository as a newcomer gets it: a clone of HEAD.
git -c safe.directory='*' clone --quiet --no-hardlinks "$repo" "$root/root/palrt"
if [ "$(git -C "$root/root/palrt" rev-parse HEAD)" != "$head" ]; then
  git -C "$root/root/palrt" checkout --quiet --detach "$head"
fi

# /proc, /sys (with the cgroup mounts below it) and /dev (with /dev/pts and /dev/shm).
# rslave: unmounting below the root never propagates back to this machine's own mounts.
mount --bind /proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --make-rslave "$root/sys"
mount --rbind /dev "$root/dev"
mount --make-rslave "$root/dev"

# ---------------------------------------------------------------------------------------
# The README's two commands, the package check (and the caller's), from the clone, as root,
# in a clean environment.
results=()
failures=0
commands_started=true
for cmd in "${commands[@]}"; do
  say "== $cmd (inside the root, from /root/palrt)"
  t=$SECONDS
  status=0
  # shellcheck disable=SC2086  # a command's words, split on blanks as documented above
  run_step env -i HOME=/root PATH="$clean_path" LANG=C.UTF-8 \
    chroot "$root" /bin/bash -c 'cd /root/palrt && exec "$@"' _ $cmd || status=$?
  if [ "$status" -eq 0 ]; then
    line="PASS  $cmd ($(elapsed "$t"))"
  else
    line="FAIL  $cmd (exit $status, $(elapsed "$t"))"
    failures=$((failures + 1))
  fi
  say "$line"
  results+=("$line")
done

cleanup
$cleanup_failed && fail "could not unmount everything below $root (listed above)"
echo
say "summary for ${head:0:12} on a fresh $suite minbase root ($(elapsed "$started") in all)"
printf '   %s\n' "${results[@]}"
if [ "$failures" -gt 0 ]; then
  say "FAILED: $failures of ${#results[@]} commands"
  exit 1
fi
say "PASSED: all ${#results[@]} commands"
