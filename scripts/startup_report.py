#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Summary table and plot for scripts/bench-startup.sh.

    startup_report.py summary --hyperfine results/startup-round-*.json --baselines 1,5,7,9
                              [--compare 1/4:1.35 --compare 5/6:1.35]
                              [--reports results/startup-reports.json
                               [--floor-reports results/floor-reports.json]]
                              [--command TEXT] [--out results/summary.md]
    startup_report.py plot    --hyperfine results/startup-round-*.json [--baselines 1,5,7,9]
                              [--out results/startup.png]

Medians are computed here from hyperfine's raw `results[].times`: startup times have a long
right tail (a stray RCU grace period, a page-cache miss), so the median says more than the
mean hyperfine leads with.

Run it with Debian's /usr/bin/python3: it has matplotlib; a pyenv python3 earlier on PATH
may not.
"""

import argparse
import json
import os
import random
import statistics
import sys


def fail(message):
    sys.exit(f"startup_report: {message}")


# --- inputs ---------------------------------------------------------------------------------

def load_hyperfine_round(path):
    """[(name, times in ms)] in the order hyperfine ran them."""
    try:
        with open(path) as f:
            results = json.load(f)["results"]
    except FileNotFoundError:
        fail(f"{path} not found; run scripts/bench-startup.sh first")
    except (ValueError, KeyError) as e:
        fail(f"{path} is not hyperfine --export-json output ({e})")
    rows = [(r["command"], [t * 1e3 for t in r["times"]]) for r in results]
    if not rows or any(not times for _, times in rows):
        fail(f"{path} has no timings")
    return rows


def load_hyperfine(paths):
    """Rounds of the same hyperfine run: ([(name, pooled times)], [per-round rows]).
    The machines are noisy in bursts longer than one row takes, so the script runs all rows
    several times over; ratios are taken within a round, then the median over rounds."""
    rounds = [load_hyperfine_round(p) for p in paths]
    names = [name for name, _ in rounds[0]]
    for path, r in zip(paths, rounds):
        if [name for name, _ in r] != names:
            fail(f"{path} does not have the same commands as {paths[0]}")
    pooled = [(name, [t for r in rounds for t in r[i][1]]) for i, name in enumerate(names)]
    return pooled, rounds


def round_ratios(rounds, a, b):
    """Row a's median over row b's, once per round."""
    return [statistics.median(r[a][1]) / statistics.median(r[b][1]) for r in rounds]


def describe_ratio(ratios):
    median = statistics.median(ratios)
    if len(ratios) == 1:
        return median, f"{median:.2f}x"
    return median, f"{median:.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f})"


def load_reports(path):
    """The JSON objects `palrt-startup --report json` printed, concatenated in one file."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        fail(f"{path} not found")
    decoder = json.JSONDecoder()
    reports, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return reports
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except ValueError as e:
            fail(f"{path}: not a sequence of JSON objects ({e})")
        reports.append(obj)


def read_first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return "n/a"


def machine_facts():
    """What decides membarrier registration's slow path: with more than one CPU online, a
    second thread makes REGISTER_PRIVATE_EXPEDITED wait a full RCU grace period, which
    rcu_expedited=1 would shorten."""
    return {
        "nproc": len(os.sched_getaffinity(0)),  # what `nproc` prints: honours affinity
        "online CPUs": read_first_line("/sys/devices/system/cpu/online"),
        "rcu_expedited": read_first_line("/sys/kernel/rcu_expedited"),
        "kernel": os.uname().release,
    }


def facts_line(facts):
    return ", ".join(f"{k} {v}" for k, v in facts.items())


# --- summary --------------------------------------------------------------------------------

def parse_baselines(text, count):
    """'1,5,7,9' -> for each row (0-based), the index of the nearest baseline at or above it."""
    try:
        marks = sorted({int(x) - 1 for x in text.split(",")})
    except ValueError:
        fail(f"--baselines wants 1-based row numbers like 1,5,7,9 (got '{text}')")
    if not marks or marks[0] != 0 or marks[-1] >= count:
        fail(f"--baselines {text}: row 1 must be a baseline and all rows must be 1..{count}")
    return [max(m for m in marks if m <= row) for row in range(count)]


def parse_compare(text, count):
    """'1/4:1.35' -> (0, 3, 1.35): row 1's median over row 4's, target at most 1.35."""
    try:
        rows, _, target = text.partition(":")
        a, b = (int(x) - 1 for x in rows.split("/"))
        target = float(target) if target else None
    except ValueError:
        fail(f"--compare wants A/B or A/B:MAX with 1-based rows (got '{text}')")
    if not (0 <= a < count and 0 <= b < count):
        fail(f"--compare {text}: rows must be 1..{count}")
    return a, b, target


def table(header, rows, align):
    """A markdown table; align is a string of 'l'/'r', one per column."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    def line(cells):
        out = []
        for cell, width, a in zip(cells, widths, align):
            out.append(str(cell).rjust(width) if a == "r" else str(cell).ljust(width))
        return "| " + " | ".join(out) + " |"
    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else ("-" * (w + 2))
                          for w, a in zip(widths, align)) + "|"
    return [line(header), rule] + [line(r) for r in rows]


def timing_section(rows, rounds, baseline_of, compares):
    medians = [statistics.median(t) for _, t in rows]
    body = []
    for i, (name, times) in enumerate(rows):
        base = baseline_of[i]
        ratio = "baseline"
        if base != i:
            ratio = f"{describe_ratio(round_ratios(rounds, i, base))[1]} vs {base + 1}"
        body.append([i + 1, name, f"{medians[i]:.3f}", f"{statistics.mean(times):.3f}",
                     f"{statistics.stdev(times) if len(times) > 1 else 0.0:.3f}",
                     f"{min(times):.3f}", len(times), ratio])
    out = table(["#", "command", "median ms", "mean ms", "stddev ms", "min ms", "runs",
                 "ratio (median of rounds)"], body, "rlrrrrrl")
    if compares:
        # Each palrt row over the floor that does the same work, with its target.
        out += ["", "Compared with the floor that does the same work:", ""]
        body = []
        for a, b, target in compares:
            ratios = round_ratios(rounds, a, b)
            ratio = statistics.median(ratios)
            # Three decimals: at two, a ratio just over the target would print as the target.
            body.append([f"{rows[a][0]} / {rows[b][0]}", f"{a + 1}/{b + 1}", f"{ratio:.3f}x",
                         f"{min(ratios):.2f}-{max(ratios):.2f}",
                         f"<= {target:.2f}x" if target is not None else "-",
                         ("met" if ratio <= target else "NOT MET") if target is not None else "-"])
        out += table(["palrt-startup row / its floor", "rows", "median of rounds", "rounds", "target",
                      "verdict"],
                     body, "llrrll")
    return out


def distinct(values):
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return "/".join(str(v) for v in seen)


def median_us(reports, field):
    values = [r[field] for r in reports if isinstance(r.get(field), (int, float))]
    return f"{statistics.median(values) / 1e3:.1f}" if values else "n/a"


def sync_worker(report):
    """'lazy (not started)' or 'eager (started)'; '?' from a palrt-startup that did not say."""
    if "sync_worker" not in report:
        return "?"
    started = "started" if report.get("sync_worker_started") else "not started"
    return f"{report['sync_worker']} ({started})"


def threads_at_registration(report):
    """The count the report gives, or why there is none (null: not counted)."""
    count = report.get("threads_at_registration", "?")
    if count is not None:
        return count
    if report.get("registered_by") == "none":
        return "- (no registration)"
    return "not counted (fast path inferred)" if report.get("fast_path_inferred") else "not counted"


def phase_section(reports):
    groups = {}
    for r in reports:
        groups.setdefault((r.get("order", "?"), r.get("sync_worker", "?")), []).append(r)
    body = []
    for (order, _), group in groups.items():
        body.append([order, distinct(sync_worker(r) for r in group), len(group),
                     distinct(r.get("registered_by", "?") for r in group),
                     distinct(threads_at_registration(r) for r in group),
                     distinct(r.get("barrier_strategy", "?") for r in group),
                     median_us(group, "registration_ns"),
                     median_us(group, "bootstrap_ns"),
                     median_us(group, "shutdown_ns")])
    out = table(["order", "sync worker", "runs", "registered by", "threads at registration",
                 "barrier strategy", "registration µs", "bootstrap µs", "shutdown µs"],
                body, "llrlllrrr")
    out.append("")
    out.append("Medians over the runs; µs from the report's *_ns fields.")
    first = reports[0]
    seen = {k: first[k] for k in ("processor_count", "online_cpus", "rcu_expedited",
                                  "kernel", "membarrier_mask") if k in first}
    if seen:
        out.append("palrt-startup saw: " + ", ".join(f"{k} {v}" for k, v in seen.items()))
    return out


def total_ns(report, fields):
    values = [report.get(f) for f in fields]
    return sum(values) if all(isinstance(v, (int, float)) for v in values) else None


def floor_section(reports, floor_reports, slack_us=25.0):
    """palrt-startup's bootstrap + shutdown against the C++ floor's registration + thread start
    and join, per run, medians: the default run (one service thread) against the floor's one
    thread, with its target (at most slack_us more); the eager sync worker (two) against two,
    without one."""
    body = []
    for label, order, worker, threads, target in (
            ("palrt-startup", "registered-first", "lazy", 1, True),
            ("palrt-startup --sync-worker eager", "registered-first", "eager", 2, False)):
        ours = [total_ns(r, ("bootstrap_ns", "shutdown_ns")) for r in reports
                if r.get("order") == order and r.get("sync_worker") == worker]
        ours = [v for v in ours if v is not None]
        floor = [total_ns(r, ("registration_ns", "start_join_ns")) for r in floor_reports
                 if r.get("threads") == threads]
        floor = [v for v in floor if v is not None]
        if not ours or not floor:
            continue
        a, b = statistics.median(ours) / 1e3, statistics.median(floor) / 1e3
        verdict = ("met" if a <= b + slack_us else "NOT MET") if target else "-"
        body.append([label, len(ours), f"{a:.1f}", f"C++ floor, {threads} thread{'s' if threads > 1 else ''}",
                     len(floor), f"{b:.1f}", f"{a - b:+.1f}",
                     f"<= +{slack_us:.0f}" if target else "-", verdict])
    if not body:
        return []
    out = table(["palrt-startup row", "runs", "bootstrap + shutdown µs", "floor", "runs",
                 "registration + start + join µs", "difference µs", "target", "verdict"],
                body, "lrrlrrrll")
    out.append("")
    out.append("Medians over the runs (palrt-startup --report json; "
               "palrt-startup-reference-cpp --report json).")
    return out


def summary(args):
    rows, rounds = load_hyperfine(args.hyperfine)
    baseline_of = parse_baselines(args.baselines, len(rows))
    compares = [parse_compare(c, len(rows)) for c in args.compare]
    runs = distinct(len(t) for _, t in rows)

    lines = ["# palrt startup", ""]
    if args.command:
        lines.append(f"Command: `{args.command}` (hyperfine -N, {len(rounds)} rounds, "
                     f"{runs} runs per row in all)")
    lines.append(f"Machine: {facts_line(machine_facts())}")
    lines += ["", "## Whole-process time (hyperfine)", ""]
    lines += timing_section(rows, rounds, baseline_of, compares)
    if args.reports:
        reports = load_reports(args.reports)
        if not reports:
            fail(f"{args.reports} holds no reports")
        lines += ["", "## Phases (palrt-startup --report json)", ""]
        lines += phase_section(reports)
        if args.floor_reports:
            floor_reports = load_reports(args.floor_reports)
            if not floor_reports:
                fail(f"{args.floor_reports} holds no reports")
            lines += ["", "## Bootstrap and shutdown against the C++ floor's threads", ""]
            lines += floor_section(reports, floor_reports)
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


# --- plot -----------------------------------------------------------------------------------

def plot(args):
    rows, rounds = load_hyperfine(args.hyperfine)
    import matplotlib  # here, not at the top: the summary needs no matplotlib
    matplotlib.use("Agg")  # no display on CI machines
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    names = [name for name, _ in rows]
    data = [times for _, times in rows]
    positions = list(range(len(rows), 0, -1))  # first row at the top, as in the table

    fig, ax = plt.subplots(figsize=(12, 0.55 * len(rows) + 2))
    ax.boxplot(data, positions=positions, vert=False, widths=0.6, showfliers=False,
               medianprops={"color": "black", "linewidth": 1.5},
               boxprops={"color": "0.35"}, whiskerprops={"color": "0.35"},
               capprops={"color": "0.35"})
    jitter = random.Random(0)  # fixed seed: the same data always draws the same picture
    for pos, times in zip(positions, data):
        ys = [pos + jitter.uniform(-0.22, 0.22) for _ in times]
        ax.scatter(times, ys, s=6, alpha=0.35, color="tab:blue", linewidths=0)
    medians = [statistics.median(t) for t in data]
    baseline_of = parse_baselines(args.baselines, len(rows)) if args.baselines else None
    for i, pos in enumerate(positions):
        label = f"{medians[i]:.2f} ms"
        if baseline_of:
            base = baseline_of[i]
            if base == i and i > 0:  # a new comparison group starts: separate it
                ax.axhline(pos + 0.5, color="0.6", linewidth=0.8, linestyle="--")
            if base != i:
                label += f"  {statistics.median(round_ratios(rounds, i, base)):.2f}x vs {base + 1}"
        ax.annotate(label, xy=(1.0, pos), xycoords=("axes fraction", "data"),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=9)

    ax.set_yticks(positions)
    ax.set_yticklabels([f"{name}  [{i + 1}]" for i, name in enumerate(names)])
    ax.set_xscale("log")
    # Plain numbers on the log axis: 0.5, 1, 2, 5, 10, 20 ms read better than 10^0.
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:g}"))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: ""))
    ax.set_xlabel("wall time per process, ms (log scale); right: median, ratio (median of rounds)")
    ax.grid(axis="x", which="major", alpha=0.3)
    runs = distinct(len(t) for t in data)
    ax.set_title(f"palrt startup, hyperfine -N, {runs} runs per row\n"
                 f"{facts_line(machine_facts())}", fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out, dpi=130, bbox_inches="tight")  # keeps the right-hand labels
    print(f"startup_report: wrote {args.out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)

    s = sub.add_parser("summary", help="median table, ratios, phase timings, machine facts")
    s.add_argument("--hyperfine", required=True, nargs="+",
                   help="hyperfine --export-json files, one per round of the same commands")
    s.add_argument("--baselines", required=True,
                   help="1-based rows that are baselines; every row is compared with the "
                        "nearest baseline at or above it")
    s.add_argument("--compare", action="append", default=[], metavar="A/B[:MAX]",
                   help="also print row A's median over row B's, checked against MAX")
    s.add_argument("--reports", help="concatenated `palrt-startup --report json` outputs")
    s.add_argument("--floor-reports",
                   help="concatenated `palrt-startup-reference-cpp --report json` outputs "
                        "(with --reports)")
    s.add_argument("--command", help="the command that produced the data, for the record")
    s.add_argument("--out", help="also write the summary (markdown) here")
    s.set_defaults(run=summary)

    p = sub.add_parser("plot", help="distribution of every row, log scale")
    p.add_argument("--hyperfine", required=True, nargs="+", help="as for summary")
    p.add_argument("--baselines", help="as for summary: adds each row's ratio to the plot")
    p.add_argument("--out", default="results/startup.png")
    p.set_defaults(run=plot)

    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
