"""The trace suite's table: every trace, the three built-in policies, default settings and guards.

Run: .venv/bin/python benchmarks/bench_trace_suite.py [--plots DIR | --undo]

A trace of a day or more runs its three policies on one process per core (`compare`): 67 s on
2 cores where one process took 93 s (session 74), the tables the same.

Prints, per trace and policy, violation-seconds / task-hours / rescales (per day, on traces of a
day or more) / reversals within 1 h / the longest scale-up delay after a sustained overload (s),
then the totals over the real and the synthetic traces, as markdown for BENCHMARKS.md. The same
runs as `tests/unit/test_trace_suite.py` (which checks the goals) and `autosizer simulate --trace`.
With `--plots DIR` it also writes each trace's timeline (the three runs) to `DIR/trace-NAME.png`
and prints the README's section per trace (its description, its row, its plot). With `--undo`
the baselines also opt in to the guards' at-once undo of a scale-down under overload
(`Decision.undo_scale_down`, which they do not by default): what that opt-in does to them.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.policies import load_policy  # noqa: E402
from autosizer.simulator.report import plot  # noqa: E402
from autosizer.simulator.scores import score  # noqa: E402
from autosizer.simulator.sweep import compare  # noqa: E402
from autosizer.simulator.traces import load_trace, real_trace_names, trace_names  # noqa: E402

POLICIES = ("autosizer", "utilization", "lag-threshold")
REAL = tuple(real_trace_names())
DAY = 86_400


def cell(s, seconds: int) -> str:
    per_day = f" ({s.rescales * DAY / seconds:.1f})" if seconds >= DAY else ""
    return (f"{s.violation_s:,} / {s.task_hours:,.0f} / {s.rescales}{per_day} / {s.reversals_1h} / "
            f"{s.scale_up_delay_s}")


class OptIn:
    """A baseline that opts in to the guards' undo of a scale-down under overload."""

    def __init__(self, name: str):
        self.policy = load_policy(name)
        self.name = name

    def decide(self, observation, state=None):
        decision, state = self.policy.decide(observation, state)
        return replace(decision, undo_scale_down=True), state


def main(plots: Path | None = None, undo: bool = False) -> None:
    names = [*REAL, *(n for n in trace_names() if n not in REAL)]
    totals: dict[tuple[str, str], list[float]] = {}
    sections: list[str] = []
    print(f"| trace | {' | '.join(f'`{p}`' for p in POLICIES)} |")
    print("| --- |" + " --- |" * len(POLICIES))
    for name in names:
        trace = load_trace(name)
        cells = []
        runs = compare(trace.workload, trace.job, [
            (policy, OptIn(policy) if undo and policy != "autosizer" else load_policy(policy))
            for policy in POLICIES], workers=None)  # a trace of a day or more: a process per core
        for policy, run in zip(POLICIES, runs, strict=True):
            s = score(run)
            cells.append(cell(s, trace.workload.seconds))
            kind = "real" if name in REAL else "synthetic"
            row = totals.setdefault((kind, policy), [0, 0.0, 0, 0])
            for i, value in enumerate((s.violation_s, s.task_hours, s.rescales, s.reversals_1h)):
                row[i] += value
        if plots is not None:
            plot(runs, plots / f"trace-{name}.png", title=name)
            sections.append(f"##### `{name}`\n\n{trace.description}\n\n" + "; ".join(
                f"`{p}` {c}" for p, c in zip(POLICIES, cells, strict=True)) +
                f".\n\n![{name}]({plots.name}/trace-{name}.png)\n")
        label = f"`{name}` (real)" if name in REAL else f"`{name}`"
        print(f"| {label} | {' | '.join(cells)} |", flush=True)
    print("\n| traces | " + " | ".join(f"`{p}`" for p in POLICIES) + " |")
    print("| --- |" + " --- |" * len(POLICIES))
    for kind, count in (("real", len(REAL)), ("synthetic", len(names) - len(REAL))):
        cells = [" / ".join(f"{v:,.0f}" for v in totals[(kind, p)]) for p in POLICIES]
        print(f"| {kind} ({count}) | {' | '.join(cells)} |")
    if sections:
        print("\n" + "\n".join(sections))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--plots"] and len(sys.argv) == 3:
        main(Path(sys.argv[2]))
    elif sys.argv[1:] == ["--undo"]:
        main(undo=True)
    elif len(sys.argv) == 1:
        main()
    else:
        sys.exit("usage: bench_trace_suite.py [--plots DIR | --undo]")
