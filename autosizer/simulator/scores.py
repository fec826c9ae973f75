"""Scores of a run: how late the job was, what it cost, how often and how well it rescaled."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from autosizer.simulator.engine import Run

HOUR = 3600


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

    def row(self) -> dict[str, Any]:
        return asdict(self)


def score(run: Run, slo_s: float = 30.0) -> Score:
    lag = run.lag_seconds
    factor = run.factor.astype(np.int64)
    partitions = run.job.partitions
    tasks = partitions * factor
    slots = -(-tasks // run.job.tasks_per_slot)
    times = [r.time for r in run.rescales]
    reversals = sum(
        1 for a, b in zip(run.rescales, run.rescales[1:], strict=False)
        if b.time - a.time < HOUR and (a.new - a.old) * (b.new - b.old) < 0
    )
    converge = None
    changes = [c for c in run.workload.changes if c < len(factor)]
    if changes:
        ends = changes[1:] + [len(factor)]
        converge = max(sum(1 for t in times if start <= t < end) for start, end in zip(changes, ends, strict=True))
    p50, p99 = np.percentile(lag, [50, 99])
    return Score(run.policy, int((lag > slo_s).sum()), round(float(p50), 1), round(float(p99), 1),
                 round(float(tasks.sum()) / HOUR, 1), round(float(slots.sum()) / HOUR, 1),
                 len(run.rescales), reversals, converge)
