"""Where the change lands in a tick: each synthetic trace with its input 0, 1, ..., 14 s later.

The suite's changes land on a policy tick (every 15 s), which then reads them whole. A real
change lands anywhere in a tick, and the daemon's metrics are a scrape old, so the first tick
after it may have seen a second of it. This runs `autosizer` (default settings) on every
synthetic trace delayed by each whole second up to a tick, with metrics 0 and 8 s old
(`JobModel.metrics_age_s`), and prints per trace and age the unshifted run's violation-seconds,
rescales, reversals within 1 h, longest scale-up delay and rescales to converge, then the range
of each over the fifteen shifts, and which of the issue's per-trace goals a shift breaks that the
unshifted run kept: more than one rescale to converge after a step, a scale-up later than 60 s,
a reversal within an hour. (The real traces run for days at 5-minute resolution: a 15 s shift moves nothing.)

    .venv/bin/python benchmarks/bench_trace_phase.py [trace ...]
"""

from __future__ import annotations

import dataclasses
import sys

from autosizer.policies import load_policy
from autosizer.simulator.engine import simulate
from autosizer.simulator.scores import broken_goals, score
from autosizer.simulator.traces import load_trace, real_trace_names, trace_names

REAL = tuple(real_trace_names())
SHIFTS = range(0, 15)  # every second: odd ones found `step-up`'s 4 -> 8 -> 16 (session 43)
AGES = (0.0, 8.0)


def _span(values: list[int]) -> str:
    low, high = min(values), max(values)
    return f"{low:,}" if low == high else f"{low:,}-{high:,}"


def main(names: list[str]) -> None:
    print("| trace | metrics age | unshifted: violation-s / rescales / reversals / delay / converge "
          "| over shifts 0-14 s: violation-s | rescales | delay (s) | goals broken at a shift |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        trace = load_trace(name)
        for age in AGES:
            job = dataclasses.replace(trace.job, metrics_age_s=age)
            runs = {s: score(simulate(trace.workload.delayed(s), job, load_policy("autosizer"))) for s in SHIFTS}
            base = runs[0]
            broken = [f"{s} s: {', '.join(b)}" for s, r in runs.items() if (b := broken_goals(r, base))]
            print(f"| `{name}` | {age:g} s | {base.violation_s:,} / {base.rescales} / {base.reversals_1h} / "
                  f"{base.scale_up_delay_s} / {base.converge_rescales if base.converge_rescales is not None else '-'} "
                  f"| {_span([r.violation_s for r in runs.values()])} | {_span([r.rescales for r in runs.values()])} "
                  f"| {_span([r.scale_up_delay_s for r in runs.values()])} | {'; '.join(broken) or 'none'} |",
                  flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or [n for n in trace_names() if n not in REAL])
