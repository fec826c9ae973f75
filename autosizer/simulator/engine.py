"""The simulation loop: a fluid model of the job at 1 s, a policy and the guards at every tick.

Between rescales the factor is fixed, so the model runs a block of ticks at once in numpy: per
partition and queue, lag follows Lindley's recursion L(t) = max(0, L(t−1) + in(t) − cap(t)),
solved in closed form with a cumulative sum and a running minimum. The policy then sees each
tick of the block in turn; when the guards let a rescale through, the rest of the block is thrown
away and simulated again under the new factor, after the restart downtime.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from autosizer.policies import Guards, Observation, PartitionStats, Policy, TaskStats
from autosizer.policies.base import PARTITION_COLUMNS, TASK_COLUMNS
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import Workload

BLOCK_TICKS = 80  # the longest block; after a rescale blocks start at 5 ticks and double


@dataclass(frozen=True)
class Rescale:
    time: int
    old: int
    new: int
    reason: str


@dataclass(eq=False)
class Run:
    """What happened, second by second, when one policy drove the job through one workload."""

    policy: str
    workload: Workload
    job: JobModel
    tick_s: int
    lag_records: np.ndarray  # topic total
    lag_seconds: np.ndarray  # worst partition: its lag over its input rate
    factor: np.ndarray
    rescales: list[Rescale] = field(default_factory=list)

    @property
    def rate(self) -> np.ndarray:
        return self.workload.rate[: len(self.factor)]


@dataclass
class _Block:
    """A block of ticks simulated at one factor."""

    lag_records: np.ndarray  # (seconds,)
    lag_seconds: np.ndarray  # (seconds,)
    lag_end: np.ndarray  # (ticks, partitions, 2): hot queue, other queues
    partition_columns: tuple[np.ndarray, ...]  # PartitionStats' columns, (ticks, partitions) each
    task_columns: tuple[np.ndarray, ...]  # TaskStats' columns, (ticks, tasks) each
    partition_totals: list[list[float]]  # per tick, the sums of partition_columns
    task_totals: list[list[float]]


@njit(cache=True, nogil=True)
def _queues(rate, arrivals, capacity, lag0, down_s, inverse_weights, tick):  # pragma: no cover
    """Lindley's recursion per second, partition and queue; numba keeps it one pass over memory."""
    seconds, partitions = rate.size, arrivals.shape[0]
    ticks = seconds // tick
    lag = lag0.copy()
    lag_records = np.empty(seconds)
    lag_seconds = np.empty(seconds)
    lag_end = np.empty((ticks, partitions, 2))
    processed = np.zeros((ticks, partitions, 2))
    for s in range(seconds):
        k = s // tick
        running = s >= down_s
        total = 0.0
        worst = 0.0
        for p in range(partitions):
            here = 0.0
            for q in range(2):
                arriving = rate[s] * arrivals[p, q]
                before = lag[p, q] + arriving
                after = before - capacity[k, p, q] if running else before
                if after < 0.0:
                    after = 0.0
                processed[k, p, q] += before - after
                lag[p, q] = after
                here += after
            total += here
            if here * inverse_weights[p] > worst:
                worst = here * inverse_weights[p]
        lag_records[s] = total
        lag_seconds[s] = worst / max(rate[s], 1e-3)
        if (s + 1) % tick == 0:
            lag_end[k] = lag
    return lag_records, lag_seconds, lag_end, processed


class _Model:
    def __init__(self, job: JobModel, tick_s: int, seed: int):
        self.job = job
        self.tick = tick_s
        self.rng = np.random.default_rng(seed)
        self.weights = job.weights
        self.inverse_weights = 1.0 / np.maximum(job.weights, 1e-12)
        self.hot = job.hot_shares
        self._tasks: dict[int, tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]] = {}
        self.names = tuple(("topic", p) for p in range(job.partitions))

    def block(self, rate: np.ndarray, factor: int, lag0: np.ndarray, down_s: int) -> _Block:
        job, tick = self.job, self.tick
        ticks = rate.size // tick
        hot = self.hot[factor]
        arrivals = self.weights[:, None] * np.stack([hot, 1.0 - hot], axis=1)  # (P, 2)
        per_task = job.task_rate(factor)
        tasks = np.array([1.0, factor - 1.0])
        throttle = min(1.0, job.partition_limit / (per_task * factor))
        spread = job.process_cv / np.sqrt(np.maximum(1.0, per_task * tick * tasks))
        noise = 1.0 + spread * self.rng.standard_normal((ticks, job.partitions, 2))
        task_cap = per_task * throttle * np.clip(noise, 0.0, None)  # (ticks, P, 2)
        lag_records, lag_seconds, lag_end, processed = _queues(
            np.ascontiguousarray(rate), arrivals, task_cap * tasks, lag0, down_s,
            self.inverse_weights, tick)
        return self._columns(factor, rate, lag_records, lag_seconds, lag_end, processed / tick, task_cap)

    def _columns(self, factor, rate, lag_records, lag_seconds, lag_end, processed, task_cap) -> _Block:
        """Every tick's observation columns at once; a tick then only slices rows."""
        names, partition, repeats, divisor = self._task_shape(factor)
        ticks = lag_end.shape[0]
        input_rate = rate.reshape(ticks, self.tick).mean(axis=1)[:, None] * self.weights
        lag_p = lag_end.sum(axis=2)
        busy = np.minimum(1.0, processed / np.maximum(task_cap * divisor, 1e-9))

        def per_task(queues: np.ndarray) -> np.ndarray:
            return np.repeat(queues.reshape(ticks, -1), repeats, axis=1)

        partition_columns = (lag_p, lag_p / np.maximum(input_rate, 1e-3), input_rate,
                             processed.sum(axis=2))
        task_columns = (per_task(lag_end / divisor), per_task(processed / divisor),
                        per_task(1.0 / np.maximum(task_cap, 1e-9)), per_task(busy))
        return _Block(
            lag_records=lag_records,
            lag_seconds=lag_seconds,
            lag_end=lag_end,
            partition_columns=partition_columns,
            task_columns=task_columns,
            # Column sums for all ticks in one call each, handed to the stats as their totals.
            partition_totals=np.stack([c.sum(axis=1) for c in partition_columns], axis=1).tolist(),
            task_totals=np.stack([c.sum(axis=1) for c in task_columns], axis=1).tolist(),
        )

    def observe(self, block: _Block, k: int, factor: int, time: float, since: float) -> Observation:
        names, partition, _, _ = self._task_shape(factor)
        p, p_totals = block.partition_columns, block.partition_totals[k]
        t, t_totals = block.task_columns, block.task_totals[k]
        return Observation(
            time, factor,
            PartitionStats(self.names, p[0][k], p[1][k], p[2][k], p[3][k],
                           dict(zip(PARTITION_COLUMNS, p_totals, strict=True))),
            TaskStats(names, partition, t[0][k], t[1][k], t[2][k], t[3][k],
                      dict(zip(TASK_COLUMNS, t_totals, strict=True))),
            since_rescale_s=since, restart_downtime_s=self.job.restart_downtime_s)

    def _task_shape(self, factor: int) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
        if factor not in self._tasks:
            partitions = self.job.partitions
            repeats = np.tile([1, factor - 1], partitions)
            names = tuple(f"Partition {p} bucket {b}/{factor}" for p in range(partitions)
                          for b in range(factor))
            divisor = np.array([1.0, max(1.0, factor - 1.0)])
            self._tasks[factor] = (names, np.repeat(np.arange(partitions), factor), repeats, divisor)
        return self._tasks[factor]


def simulate(workload: Workload, job: JobModel, policy: Policy, guards: Guards | None = None,
             tick_s: int = 15, seed: int = 7,
             progress: Callable[[int], Any] | None = None) -> Run:
    """Drive `job` through `workload` with `policy` behind `guards`; `progress(seconds)` as it goes."""
    if tick_s < 1:
        raise ValueError(f"tick must be >= 1 s, not {tick_s!r}")
    guards = guards or Guards()
    model = _Model(job, int(tick_s), seed)
    tick = model.tick
    total = workload.seconds // tick * tick
    if total == 0:
        raise ValueError(f"workload {workload.name!r} is shorter than one {tick} s tick")
    run = Run(getattr(policy, "name", type(policy).__name__), workload, job, tick,
              np.empty(total), np.empty(total), np.empty(total, dtype=np.int32))
    factor = job.start_factor
    lag = np.zeros((job.partitions, 2))
    last_rescale, down_s = -math.inf, 0
    policy_state: Any = None
    guard_state = None
    t, block_ticks = 0, BLOCK_TICKS
    while t < total:
        end = min(total, t + block_ticks * tick)
        block = model.block(workload.rate[t:end], factor, lag, down_s)
        kept, running = end - t, factor
        for k in range((end - t) // tick):
            now = t + (k + 1) * tick
            observation = model.observe(block, k, factor, now, now - last_rescale)
            wish, policy_state = policy.decide(observation, policy_state)
            decision, guard_state = guards.apply(observation, wish, guard_state)
            if decision.factor == factor:
                continue
            run.rescales.append(Rescale(now, factor, decision.factor, decision.reason))
            kept = (k + 1) * tick
            lag = block.lag_end[k]
            factor, last_rescale, down_s = decision.factor, now, int(job.restart_downtime_s)
            block_ticks = 5  # a policy that just rescaled may soon again: waste little
            break
        else:
            lag = block.lag_end[-1]
            down_s = max(0, down_s - kept)
            block_ticks = min(BLOCK_TICKS, 2 * block_ticks)
        run.lag_records[t:t + kept] = block.lag_records[:kept]
        run.lag_seconds[t:t + kept] = block.lag_seconds[:kept]
        run.factor[t:t + kept] = running
        if progress:
            progress(kept)
        t += kept
    return run

