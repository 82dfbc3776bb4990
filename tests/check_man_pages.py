#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A man page of palrt's, as its reader and its tool see it.

    check_man_pages.py --mandoc MANDOC --page PAGE [--tool TOOL] [--environment SOURCE ...]

1. `mandoc -T lint -W style` has nothing to say about PAGE (the page as meson configured it,
   version and paths filled in): no error, no warning, no style message.
2. With --tool: the options and commands the tool's --help lists are exactly those PAGE
   describes, so that neither can drift from the other. --help's "Options:" lines give the
   options (`-h,--help` is two), its "Subcommands:" lines the commands; PAGE's give the heads
   of the tagged paragraphs (.TP) of its OPTIONS section and of the section that lists the
   commands (COMMANDS, or COMPONENTS for palrt-bench).
3. With --environment: every environment variable SOURCE reads (getenv or secure_getenv of
   a string literal) heads a tagged paragraph of PAGE's ENVIRONMENT section.

Exit status 0 when all holds; 1 with one line per difference on stderr.
"""
import argparse
import re
import subprocess
import sys

COMMAND_SECTIONS = ("COMMANDS", "COMPONENTS")


def lint(mandoc, page):
    """mandoc's messages about the page, empty when it is clean."""
    run = subprocess.run([mandoc, "-T", "lint", "-W", "style", page],
                         capture_output=True, text=True, check=False)
    messages = (run.stdout + run.stderr).strip()
    if run.returncode != 0 and not messages:
        messages = f"mandoc exited {run.returncode} without a message"
    return messages


def roff_words(line):
    """The words of one roff line of the page as a reader sees them: the macro, fonts and
    quotes gone, `\\-` as '-', commas and blanks as separators."""
    line = re.sub(r"^\.[A-Z]{1,2}\s*", "", line)
    line = re.sub(r"\\f[BIRP]", "", line)
    line = line.replace("\\-", "-").replace('"', " ")
    return [w for w in re.split(r"[\s,]+", line) if w]


def tagged_heads(page):
    """{section name: [words of each .TP head]} for the page's sections."""
    heads = {}
    section = None
    lines = open(page, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith(".SH "):
            section = line[4:].strip().strip('"')
            heads.setdefault(section, [])
        elif line.strip() == ".TP" and section and i + 1 < len(lines):
            heads[section].append(roff_words(lines[i + 1]))
    return heads


def help_listing(tool):
    """(options, commands) that `tool --help` lists."""
    run = subprocess.run([tool, "--help"], capture_output=True, text=True, check=False, timeout=60)
    if run.returncode != 0:
        raise SystemExit(f"check_man_pages: {tool} --help exited {run.returncode}: {run.stderr.strip()}")
    options, commands = set(), set()
    listing = None
    for line in run.stdout.splitlines():
        if line in ("Options:", "Subcommands:"):
            listing = line
            continue
        # An entry starts two columns in; its description's continuation lines further in.
        entry = re.match(r"^  (\S+)", line)
        if not entry or not listing:
            continue
        if listing == "Options:":
            options.update(entry.group(1).split(","))
        else:
            commands.add(entry.group(1))
    if not options:
        raise SystemExit(f"check_man_pages: {tool} --help lists no option; is its format still CLI11's?")
    return options, commands


def compare(tool, page, what, listed, described):
    problems = []
    for name in sorted(listed - described):
        problems.append(f"{tool} --help lists {what} {name}, which {page} does not describe")
    for name in sorted(described - listed):
        problems.append(f"{page} describes {what} {name}, which {tool} --help does not list")
    return problems


def environment_read(source):
    text = open(source, encoding="utf-8").read()
    return set(re.findall(r"\b(?:secure_)?getenv\(\s*\"([A-Z0-9_]+)\"", text))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mandoc", required=True)
    parser.add_argument("--page", required=True)
    parser.add_argument("--tool")
    parser.add_argument("--environment", action="append", default=[])
    args = parser.parse_args()

    problems = []
    messages = lint(args.mandoc, args.page)
    if messages:
        problems.append(f"mandoc -T lint -W style {args.page}:\n{messages}")

    heads = tagged_heads(args.page)
    if args.tool:
        options, commands = help_listing(args.tool)
        described_options = {w for head in heads.get("OPTIONS", []) for w in head if w.startswith("-")}
        described_commands = {head[0] for name in COMMAND_SECTIONS for head in heads.get(name, []) if head}
        problems += compare(args.tool, args.page, "option", options, described_options)
        problems += compare(args.tool, args.page, "command", commands, described_commands)

    described_variables = {w for head in heads.get("ENVIRONMENT", []) for w in head}
    for source in args.environment:
        variables = environment_read(source)
        if not variables:
            problems.append(f"{source} reads no environment variable any more; drop it from the man page test")
        for name in sorted(variables - described_variables):
            problems.append(f"{source} reads {name}, which {args.page} does not describe under ENVIRONMENT")

    for p in problems:
        print(f"check_man_pages: {p}", file=sys.stderr)
    if not problems:
        print(f"check_man_pages: {args.page}: clean; "
              + (f"{args.tool} --help and the page agree" if args.tool else "no tool to compare"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
