"""Scores of a run: how late the job was, what it cost, how often and how well it rescaled."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from autosizer.elasticity import FACTORS
from autosizer.simulator.engine import Run
from autosizer.simulator.job import JobModel

HOUR = 3600
OVERLOAD_S = 30  # an overload this long (on a 30 s mean of the input) is sustained, not noise


@dataclass(frozen=True)
class Score:
    policy: str
    violation_s: int  # seconds the worst partition's lag exceeded the SLO
    lag_p50_s: float
    lag_p99_s: float
    task_hours: float  # virtual-task-hours
    slot_hours: float  # executor-slot-hours
    rescales: int
    reversals_1h: int  # rescales undoing the previous one within an hour
    converge_rescales: int | None  # worst, over the workload's step changes
    # the longest wait from the start of a sustained overload (input over the factor's capacity
    # for OVERLOAD_S, where a larger factor would take it) to a scale-up; 0 with none
    scale_up_delay_s: int = 0

    def row(self) -> dict[str, Any]:
        return asdict(self)


def reversals(changes: Iterable[tuple[float, float]], within_s: float = HOUR) -> int:
    """Rescales that undo the one before within `within_s`, from (time, signed change) pairs in
    time order: one rule for the suite's scores and the real runs' report, so a real run's count
    means what the goal's does."""
    steps = list(changes)
    return sum(1 for (a, up_a), (b, up_b) in zip(steps, steps[1:], strict=False)
               if b - a < within_s and up_a * up_b < 0)


def score(run: Run, slo_s: float = 30.0) -> Score:
    lag = run.lag_seconds
    factor = run.factor.astype(np.int64)
    tasks = run.job.partition_counts(factor.size, run.tick_s) * factor
    slots = -(-tasks // run.job.tasks_per_slot)
    times = [r.time for r in run.rescales]
    undone = reversals((r.time, r.new - r.old) for r in run.rescales)
    converge = None
    changes = [c for c in run.workload.changes if c < len(factor)]
    if changes:
        ends = changes[1:] + [len(factor)]
        converge = max(sum(1 for t in times if start <= t < end) for start, end in zip(changes, ends, strict=True))
    p50, p99 = np.percentile(lag, [50, 99])
    return Score(run.policy, int((lag > slo_s).sum()), round(float(p50), 1), round(float(p99), 1),
                 round(float(tasks.sum()) / HOUR, 1), round(float(slots.sum()) / HOUR, 1),
                 len(run.rescales), undone, converge, scale_up_delay(run))


def scale_up_delay(run: Run) -> int:
    """Seconds from the start of each sustained overload to the first scale-up decided after
    it (or to its end, if none came), worst over the run.

    Overloaded: the input exceeds what the running factor takes (`JobModel.capacity`), and some
    larger factor would take it (a hot key or a CPU-bound job past its cores is not a scaling
    delay). Sustained: overloaded for 80% of OVERLOAD_S seconds (noise around the capacity is
    not a gap); it begins at the first overloaded second of that window."""
    factor = run.factor.astype(np.int64)
    if factor.size < OVERLOAD_S:
        return 0
    capacity, best = _capacities(run.job, factor, run.tick_s)
    rate = run.rate
    over = (rate > capacity) & (rate <= best)
    counts = np.convolve(over, np.ones(OVERLOAD_S, dtype=np.int64))[: factor.size]
    sustained = counts >= 0.8 * OVERLOAD_S
    ups = np.array(sorted(r.time for r in run.rescales if r.new > r.old), dtype=np.int64)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], sustained.view(np.int8), [0]))))
    worst = 0
    for first, end in zip(edges[::2], edges[1::2], strict=True):
        window = max(0, int(first) - OVERLOAD_S + 1)
        begin = window + int(np.argmax(over[window:first + 1]))
        after = ups[ups >= begin]
        waited = int(after[0]) - begin if after.size and after[0] <= end else int(end) - begin
        worst = max(worst, waited)
    return worst


def _capacities(job: JobModel, factor: np.ndarray, tick: int) -> tuple[np.ndarray, np.ndarray]:
    """Each second's capacity at the running factor, and the most any factor from the run's
    least on would take, in the layout the job read then (`JobModel.layout_changes_s`)."""
    layouts = [(0, job)] if not job.layout_changes_s else [
        (min(factor.size, math.floor(at / tick) * tick), job.in_layout(weights)[0]) for at, weights in job.layouts()]
    capacity, best = np.zeros(factor.size), np.zeros(factor.size)
    least = int(factor.min())
    for (begin, model), (end, _) in zip(layouts, [*layouts[1:], (factor.size, None)], strict=True):
        part = factor[begin:end]
        for level in np.unique(part):
            capacity[begin:end][part == level] = model.capacity(int(level))
        best[begin:end] = max(model.capacity(f) for f in FACTORS if f >= least)
    return capacity, best


def broken_goals(result: Score, reference: Score) -> list[str]:
    """The per-trace goals `result` breaks that `reference` (the same trace, unmoved) kept: more
    rescales to converge after a change than one (or than the reference's own, where it needed
    more: a surge topping out over a minute), a scale-up later than a minute after a sustained
    overload, more reversals within an hour. Used where a trace is replayed with its change
    landing elsewhere in a tick."""
    broken = []
    converge, kept = result.converge_rescales, max(1, reference.converge_rescales or 0)
    if converge is not None and converge > kept:
        broken.append(f"converges in {converge}")
    if result.scale_up_delay_s > 60:
        broken.append(f"scale-up {result.scale_up_delay_s} s late")
    if result.reversals_1h > reference.reversals_1h:
        broken.append(f"{result.reversals_1h} reversals")
    return broken
