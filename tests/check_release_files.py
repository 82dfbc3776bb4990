#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The files that describe a release agree with meson.build and LICENSE.

    check_release_files.py --version VERSION --source-root DIR

VERSION is meson.build's project version, the version's one home. The files that cannot
take it from meson must agree with it:

1. CHANGELOG.md: its sections are `## Unreleased` (optional, first) and then one
   `## X.Y.Z` (optionally followed by a date) per version, newest first, and the newest is
   VERSION: a release raises meson.build's version and names its section in one commit.
2. debian/changelog: its newest entry is for VERSION (dpkg reads the version from there
   before any build runs, so meson cannot write it).
3. debian/copyright: its Expat licence text is LICENSE's, word for word.

Exit status 0 when all holds; 1 with one line per difference on stderr.
"""
import argparse
import os
import re
import sys


def version_key(text):
    return tuple(int(part) for part in text.split("."))


def check_changelog(path, version):
    problems = []
    headings = [line[3:].strip() for line in open(path, encoding="utf-8") if line.startswith("## ")]
    if headings and headings[0] == "Unreleased":
        headings = headings[1:]
    versions = []
    for heading in headings:
        match = re.fullmatch(r"(\d+\.\d+\.\d+)(\s+\(.*\))?", heading)
        if not match:
            problems.append(f"{path}: section '## {heading}' is neither 'Unreleased' (first) nor a version")
            continue
        versions.append(match.group(1))
    if not versions:
        problems.append(f"{path}: no version section")
    elif versions[0] != version:
        problems.append(f"{path}: the newest version section is {versions[0]}, meson.build says {version}")
    if [version_key(v) for v in versions] != sorted((version_key(v) for v in versions), reverse=True):
        problems.append(f"{path}: version sections are not newest first: {', '.join(versions)}")
    if len(set(versions)) != len(versions):
        problems.append(f"{path}: a version has two sections: {', '.join(versions)}")
    return problems


def check_debian_changelog(path, version):
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    match = re.match(r"^(\S+) \(([^)]+)\) ", first)
    if not match:
        return [f"{path}: first line is not a changelog entry: {first.strip()}"]
    # A native package's version is the upstream one; a Debian revision (-N) may follow.
    upstream = re.sub(r"-[^-]+$", "", match.group(2))
    if upstream != version:
        return [f"{path}: the newest entry is for {match.group(2)}, meson.build says {version}"]
    return []


def check_copyright(path, license_path):
    lines = open(path, encoding="utf-8").read().splitlines()
    try:
        start = lines.index("License: Expat", lines.index("License: Expat") + 1)
    except ValueError:
        return [f"{path}: no stand-alone 'License: Expat' paragraph"]
    text = []
    for line in lines[start + 1:]:
        if not line.startswith(" "):
            break
        text.append("" if line == " ." else line[1:])
    license_lines = open(license_path, encoding="utf-8").read().splitlines()
    # LICENSE's terms start after its title and copyright line.
    terms = license_lines[next(i for i, l in enumerate(license_lines) if l.startswith("Permission")):]
    while terms and not terms[-1]:
        terms.pop()
    if text != terms:
        return [f"{path}: the Expat licence text differs from {license_path}'s"]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", required=True)
    parser.add_argument("--source-root", required=True)
    args = parser.parse_args()
    root = args.source_root

    problems = check_changelog(os.path.join(root, "CHANGELOG.md"), args.version)
    problems += check_debian_changelog(os.path.join(root, "debian", "changelog"), args.version)
    problems += check_copyright(os.path.join(root, "debian", "copyright"), os.path.join(root, "LICENSE"))
    for p in problems:
        print(f"check_release_files: {p}", file=sys.stderr)
    if not problems:
        print(f"check_release_files: CHANGELOG.md, debian/changelog and debian/copyright agree with "
              f"version {args.version} and LICENSE")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
