"""The simulation loop: the job's micro-batches, a policy and the guards at every tick.

Each partition is two FIFO queues (its busiest thread's share, the other threads'), tracked as positions
in the topic's cumulative input, so the lag in seconds is what the pipeline reports: the age of
the oldest unprocessed record, not backlog over the current input rate (which is 10^9 s at zero
input). The job runs the pipeline's batches (`_batches`: trigger, admission from the slowest
bucket, deadline, fixed cost, commit) or, with `batch_seconds = 0`, processes continuously.

Between rescales the factor is fixed, so a block of ticks runs at once in numba. The policy then
sees each tick of the block in turn; when the guards let a rescale through, the rest of the block
is thrown away and simulated again under the new factor, after the restart downtime.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections import namedtuple
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numba import njit

from autosizer.actuators.verification import lag_got_worse, slowest, tail_times
from autosizer.controller.backoff import BACKOFF_MAX_S, BACKOFF_S, Backoff
from autosizer.elasticity.lanes import MIN_SHARE_READ
from autosizer.policies import Guards, Observation, PartitionStats, Policy, TaskStats, Watermarks
from autosizer.policies.base import (
    DOWNTIME_UNMEASURED_S,
    PARTITION_COLUMNS,
    TASK_COLUMNS,
    filled_hot_shares,
    frozen,
)
from autosizer.policies.history import InputHistory
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import Workload

BLOCK_TICKS = 80  # the longest block; after a rescale blocks start at 5 ticks and double
# the pipeline's lag probe, which reads a partition's watermark about once a second (its
# `lag_probe_seconds`): a partition that joined the layout has one reading until the next
JOINED_READ_S = 1.0
# How long after a re-shard's parents are done (every task past their last record, committed)
# the pipeline reads their children: its probe, every 0.5-1.5 lag_probe_seconds at random,
# finds them done (0.54 s on the mean from any moment), and its loop applies the re-shard
# between batches within its 0.1 s poll (`Pipeline._watch_shards`, `_apply_reshard`); the
# next batch then plans the children.
RESHARD_FOUND_S = 0.6
PROBE_CHUNK = 4_000_000  # probe readings drawn at once by `Run.probe_peak`


@dataclass(frozen=True)
class Rescale:
    time: int
    old: int
    new: int
    reason: str
    done: float = math.nan  # when the actuation ended: its first commit, and a scale-down's lag check


@dataclass(eq=False)
class Run:
    """What happened, second by second, when one policy drove the job through one workload."""

    policy: str
    workload: Workload
    job: JobModel
    tick_s: int
    lag_records: np.ndarray  # topic total
    lag_seconds: np.ndarray  # age of the oldest unprocessed record (worst partition)
    factor: np.ndarray
    rescales: list[Rescale] = field(default_factory=list)
    # per second: the oldest record's age at its end, when a commit fell in it (its phase, NaN if
    # none) and the age just before that commit: enough to read the age at any moment of it
    sawtooth: np.ndarray | None = None  # (seconds, 3), float32
    # per second: the backlog's mean over it (`lag_records` is its end), what the pipeline's
    # gauge, read at a random moment of the second, shows on average
    lag_records_mean: np.ndarray | None = None
    # per second: at its end, the last committed batch's duration, trigger to commit (NaN before
    # a block's first commit, and for a continuous job), as the pipeline's gauge shows it
    batch_duration: np.ndarray | None = None
    # the layout changes that restarted the query (an adopted Kafka expansion): old and new are
    # the factor it ran at; not rescales (the daemon journals them as `expand`)
    adoptions: list[Rescale] = field(default_factory=list)

    def probe_readings(self, phases: np.ndarray) -> np.ndarray:
        """The age of the oldest unprocessed record a lag probe reads at `phases` (in [0, 1),
        shape (..., seconds)) of each second. The age grows by a second a second and drops at a
        commit: `lag_seconds` is its mean over each second; a probe reads one moment of it."""
        assert self.sawtooth is not None, "a run simulated before its sawtooth was kept"
        end, cut, before = (self.sawtooth[:, i].astype(np.float64) for i in range(3))
        early = ~np.isnan(cut) & (phases < np.nan_to_num(cut, nan=0.0))
        return np.maximum(0.0, np.where(early, before - (np.nan_to_num(cut) - phases), end - (1.0 - phases)))

    def probe_peak(self, draws: int = 500, seed: int = 0) -> float:
        """The highest age a probe reading one random moment of every second sees, averaged over
        `draws` such probes: what the real job's `autosizer_pipeline_lag_seconds` peak is (one
        jittered reading a second, scraped), where `lag_seconds.max()` is the highest mean of a
        second, the sawtooth's middle (run 123's ramp: real peak 4.31 s, simulated means 3.38)."""
        rng, seconds = np.random.default_rng(seed), len(self.factor)
        chunk = max(1, PROBE_CHUNK // max(1, seconds))  # a week's 500 probes whole would be 2.4 GB
        peaks = [self.probe_readings(rng.random((min(chunk, draws - done), seconds))).max(axis=1)
                 for done in range(0, draws, chunk)]
        return float(np.concatenate(peaks).mean())

    @property
    def rate(self) -> np.ndarray:
        return self.workload.rate[: len(self.factor)]

    def part(self, begin: int, end: int) -> Run:
        """Seconds `begin` to `end` of this run as a run of their own, scored as one: a week of a
        daemon that ran the year, with the state and the days on record it had by then (its
        rescales are those decided inside; one undone across the cut counts in neither)."""
        if not 0 <= begin < end <= len(self.factor):
            raise ValueError(f"a part must lie within 0 to {len(self.factor)} s, not {begin} to {end}")
        workload = Workload(self.workload.name, self.workload.rate[begin:end],
                           tuple(c - begin for c in self.workload.changes if begin <= c < end),
                           self.workload.start + begin)
        return Run(self.policy, workload, self.job, self.tick_s, self.lag_records[begin:end],
                   self.lag_seconds[begin:end], self.factor[begin:end],
                   [Rescale(r.time - begin, r.old, r.new, r.reason, r.done - begin) for r in self.rescales
                    if begin <= r.time < end],
                   None if self.sawtooth is None else self.sawtooth[begin:end],
                   None if self.lag_records_mean is None else self.lag_records_mean[begin:end],
                   None if self.batch_duration is None else self.batch_duration[begin:end])


@dataclass
class _Block:
    """A block of ticks simulated at one factor."""

    lag_records: np.ndarray  # (seconds,)
    lag_seconds: np.ndarray  # (seconds,)
    x_end: np.ndarray  # (ticks, partitions, 2): each queue's position (cumulative input) at tick ends
    x_drained: np.ndarray  # the same once a drain at each tick end has committed the batch in flight
    partition_columns: tuple[np.ndarray, ...]  # PartitionStats' columns, (ticks, partitions) each
    task_columns: tuple[np.ndarray, ...]  # TaskStats' columns, (ticks, tasks) each
    partition_totals: list[list[float]]  # per tick, the sums of partition_columns
    task_totals: list[list[float]]
    marks: np.ndarray  # (ticks, partitions): each partition's high watermark as each tick reads it
    marks_age: np.ndarray  # (ticks,): how long before the tick's end each of those was read
    marks_time: np.ndarray  # (ticks, partitions): when each was read, by the policy's clock
    overhead_tick: float = math.inf  # the first tick whose metrics show a saturated batch's fixed cost
    cut: np.ndarray | None = None  # (ticks,): a drain at the tick's end cuts a batch still at work
    sawtooth: np.ndarray | None = None  # (seconds, 3): `Run.sawtooth`'s
    lag_records_mean: np.ndarray | None = None  # (seconds,): `Run.lag_records_mean`'s
    batch_duration: np.ndarray | None = None  # (seconds,): `Run.batch_duration`'s
    # when the next batch starts, from the block's end: at or before it when a batch was in flight
    # then (the next block at the same factor starts it again, as it began), else its trigger
    resume_s: float = 0.0


@njit(cache=True, nogil=True)
def _cum_at(cum, rate, t):  # pragma: no cover
    """Records arrived by time t (s, absolute): arrivals are even within each second."""
    i = min(int(t), rate.size - 1)
    return cum[i] + rate[i] * (t - i)


@njit(cache=True, nogil=True)
def _positive_area(f0, f1, dt):  # pragma: no cover
    """The area under max(0, f) over dt, f going linearly from f0 to f1."""
    if f0 >= 0.0 and f1 >= 0.0:
        return (f0 + f1) / 2.0 * dt
    if f0 <= 0.0 and f1 <= 0.0:
        return 0.0
    hi, lo = max(f0, f1), min(f0, f1)
    return hi * hi / (2.0 * (hi - lo)) * dt


@njit(cache=True, nogil=True)
def _records(arrivals, x, c, limits, p):  # pragma: no cover
    """The records partition p's queue holds from position x up to c (negative below x):
    `arrivals` a unit of the topic's input, and `limits.dense[p, 0]` times that below position
    `limits.dense[p, 1]` (a partition whose producers moved keys away kept the records it had
    then: `_Model.hold`)."""
    if limits is None:
        return arrivals * (c - x)
    if limits.dense[p, 0] == 1.0:
        return arrivals * (c - x)
    times, below = limits.dense[p, 0], limits.dense[p, 1]
    return arrivals * (c - x) + arrivals * (times - 1.0) * max(0.0, min(c, below) - x)


@njit(cache=True, nogil=True)
def _advance(arrivals, x, done, limits, p):  # pragma: no cover
    """The position after `done` records from x (`_records`' inverse; a stretch that holds none,
    a re-shard's child that took no records while it waited, is passed at once)."""
    if limits is None:
        return x + done / arrivals
    times, below = limits.dense[p, 0], limits.dense[p, 1]
    if times != 1.0 and x < below:
        before = arrivals * times * (below - x)
        if done < before:
            return x + done / (arrivals * times)
        return below + (done - before) / arrivals
    return x + done / arrivals


@njit(cache=True, nogil=True)
def _backlog_area(cum, rate, t0, arrivals, x, a, b, limits):  # pragma: no cover
    """The backlog at positions x, integrated over [a, b] (seconds of the block, within one
    second: arrivals are even there)."""
    if b <= a:
        return 0.0
    ca, cb = _cum_at(cum, rate, t0 + a), _cum_at(cum, rate, t0 + b)
    total = 0.0
    for p in range(arrivals.shape[0]):
        for q in range(2):
            if arrivals[p, q] > 0:
                total += _positive_area(_records(arrivals[p, q], x[p, q], ca, limits, p),
                                        _records(arrivals[p, q], x[p, q], cb, limits, p), b - a)
    return total


@njit(cache=True, nogil=True)
def _arrived_at(cum, rate, x):  # pragma: no cover
    """When the x-th record (of the topic's cumulative arrivals) arrived: the inverse of _cum_at."""
    i = np.searchsorted(cum, x, side="right") - 1
    if i < 0:
        return 0.0
    if i >= rate.size:
        return float(rate.size)
    return i + ((x - cum[i]) / rate[i] if rate[i] > 0 else 0.0)


@njit(cache=True, nogil=True)
def _oldest(arrivals, x, p, c):  # pragma: no cover
    """Partition p's oldest unprocessed record, as a position in the cumulative input: its
    slowest queue with input (c, the input so far, when every queue is empty)."""
    oldest = c
    for q in range(2):
        if arrivals[p, q] > 0:
            oldest = min(oldest, x[p, q])
    return oldest


@njit(cache=True, nogil=True)
def _age(cum, rate, now, c, oldest):  # pragma: no cover
    """Seconds since the record at position `oldest` arrived; 0 when nothing is waiting."""
    return max(0.0, now - _arrived_at(cum, rate, oldest)) if oldest < c else 0.0


@njit(cache=True, nogil=True)
def _oldest_arrival(cum, rate, arrivals, x, now):  # pragma: no cover
    """When the job's oldest unprocessed record (every partition's) arrived; `now` when none is."""
    c = _cum_at(cum, rate, now)
    oldest = c
    for p in range(arrivals.shape[0]):
        oldest = min(oldest, _oldest(arrivals, x, p, c))
    return _arrived_at(cum, rate, oldest) if oldest < c else now


@njit(cache=True, nogil=True)
def _age_integral(arrived, t1, t2):  # pragma: no cover
    """The integral over [t1, t2] of the age of a record that arrived at `arrived` (0 before it)."""
    lo = max(t1, arrived)
    return 0.5 * ((t2 - arrived) ** 2 - (lo - arrived) ** 2) if t2 > lo else 0.0


@njit(cache=True, nogil=True)
def _mean_age(s, t0, arrived, before, committed, sawtooth):  # pragma: no cover
    """Second s's mean age of the oldest unprocessed record, as a probe reading it at a random
    moment of the batch cycle sees it: the age grows between commits and drops at each.
    `arrived`: when the oldest record at the second's end arrived; `committed` (absolute): the
    last commit; `before`: when the oldest record until that commit arrived. `sawtooth[s]`
    gets the age at the second's end, the commit's phase in it (NaN: none) and the age before it."""
    lo, hi = t0 + s, t0 + s + 1
    sawtooth[s, 0] = max(0.0, hi - arrived)
    if lo < committed < hi:
        sawtooth[s, 1], sawtooth[s, 2] = committed - lo, committed - before
        return _age_integral(before, lo, committed) + _age_integral(arrived, committed, hi)
    sawtooth[s, 1], sawtooth[s, 2] = np.nan, np.nan
    return _age_integral(arrived, lo, hi)


@njit(cache=True, nogil=True)
def _sample(s, t0, cum, rate, arrivals, x, lag_records, lag_seconds, limits):  # pragma: no cover
    """The end of second s of the block: backlog, and the age of the oldest unprocessed record
    (the slowest queue's position: the lowest position holds the oldest record)."""
    now = t0 + s + 1
    c = _cum_at(cum, rate, now)
    total = 0.0
    oldest = c
    for p in range(arrivals.shape[0]):
        for q in range(2):
            if arrivals[p, q] > 0:
                total += max(0.0, _records(arrivals[p, q], x[p, q], c, limits, p))
        oldest = min(oldest, _oldest(arrivals, x, p, c))
    lag_records[s] = total
    lag_seconds[s] = _age(cum, rate, now, c, oldest)
    return _arrived_at(cum, rate, oldest) if oldest < c else now


@njit(cache=True, nogil=True)
def _buffers(seconds, tick, partitions):  # pragma: no cover
    """A block's outputs: lag per second; positions (and the same after the batch in flight),
    each partition's oldest record's age and processed records per tick."""
    ticks = seconds // tick
    return (np.empty(seconds), np.empty(seconds), np.empty((ticks, partitions, 2)),
            np.zeros((ticks, partitions)), np.zeros((ticks, partitions, 2)),
            np.empty((ticks, partitions, 2)))


@njit(cache=True, nogil=True)
def _second(s, t0, tick, cum, rate, arrivals, x, lag_records, lag_seconds, x_end, ages,
            x_drained, flight, limits):  # pragma: no cover
    """Sample the end of second s; when it ends a tick, keep the positions (and where the batch in
    flight, `flight` records per queue, takes them) and each partition's oldest unprocessed
    record's age (its slowest queue with input holds that record)."""
    arrived = _sample(s, t0, cum, rate, arrivals, x, lag_records, lag_seconds, limits)
    if (s + 1) % tick == 0:
        k = s // tick
        x_end[k] = x
        for p in range(arrivals.shape[0]):
            for q in range(2):
                x_drained[k, p, q] = _advance(arrivals[p, q], x[p, q], flight[p, q], limits, p) \
                    if flight[p, q] > 0 else x[p, q]
        now = t0 + s + 1
        c = _cum_at(cum, rate, now)
        for p in range(arrivals.shape[0]):
            ages[k, p] = _age(cum, rate, now, c, _oldest(arrivals, x, p, c))
    return arrived


@njit(cache=True, nogil=True)
def _served(ready, slow, capacity, pace, seconds):  # pragma: no cover
    """(records, seconds): what a queue gets through of `ready` records in up to `seconds` at
    `capacity` a second, the first `slow` of them at `pace` times that (a re-shard's children
    going through their parents' backlog at the parents' pace, `_Model.relayout`)."""
    if capacity <= 0:
        return 0.0, 0.0
    if slow > 0 and pace != 1.0:
        first = slow / (capacity * pace)
        if first >= seconds:
            return capacity * pace * seconds, seconds
        rest = min(ready - slow, capacity * (seconds - first))
        return slow + rest, first + rest / capacity
    done = min(ready, capacity * seconds)
    return done, done / capacity


# What a layout change holds each partition to, per partition (the kernels read them; `_Model`
# sets them): a re-shard's children go at `pace` times their capacity up to position `mark`
# (their parents' backlog) and read nothing past `stop` before second `lift`; a closed partition
# reads nothing past `end`, its last record, ever; an expansion's new partition waits for its
# parent (`parent`, the partition whose keys it takes; -1: none) to pass the `barrier`
# position, and where it is coupled (`trail` >= 0, session 87) reads until then only the input
# `trail` seconds older than its parent's position; a held partition's records below position `dense[:, 1]` count `dense[:, 0]` times
# its share (`_records`). Where none binds, the kernels get None instead and numba compiles
# them without (session 60's limits, read everywhere, cost a week's run 12-23%).
_Limits = namedtuple("_Limits", "mark pace stop lift end parent barrier dense trail")
# How far a coupled expansion child's reads trail its parent's (`coupling`): a step pairs the
# child's end at the probe before (the pipeline's lag probe, every `lag_probe_seconds`, 1 s) with
# the parent's end now; the read plan's own delay, a batch planned from the last commit, the
# batch model has already.
COUPLING_TRAIL_S = 1.0


def _binding(limits: _Limits) -> bool:
    """Whether any partition is held to any of `limits`."""
    return bool(limits.barrier != -np.inf or (limits.mark != -np.inf).any() or (limits.pace != 1.0).any()
                or (limits.stop != np.inf).any() or (limits.lift != np.inf).any() or (limits.end != np.inf).any()
                or (limits.dense[:, 0] != 1.0).any())


def _held_below(times: float, closed: float, below: float, end: float) -> tuple[float, float]:
    """A re-shard's new partition's (records per position over its share, below which): it took
    `times` its share from position `closed` to `below` (the input when it was first read), or,
    where its own closing came first (`end`, a merge's parent not read yet), all of those
    records before that. Above its end the records its own child took count under it at its
    share, as the pipeline counts a child's under its parent. Run v9's merge parent took 24% of
    the input up to its closing and none after; spread to its first reading, its share read 17%,
    and the merge child's records from the closing on counted at that."""
    if closed < end < below:
        return times * (below - closed) / (end - closed), end
    return times, below


def _rescaled(dense: list[float], was: float, share: float) -> tuple[float, float]:
    """A kept partition's (records per position over its share, below which) when its share of
    the input goes from `was` to `share`: the records below stay what they were. Kept as a
    multiple of the old share, a re-shard's child held by HELD_ONLY_SHARE (1e-6, its records
    167,000 times that share) that a later layout gave 0.71 of the input held 132 million
    records: run v9's merge parent, its merge child's input counted under it (session 86)."""
    times, below = dense
    if below == -np.inf or not share > 0:
        return times, below
    return times * was / share, below


@njit(cache=True, nogil=True)
def _barrier_passed(x, arrivals, limits, passed, behind, cum, rate):  # pragma: no cover
    """Sets `passed[p]`: whether partition p may be read past the barrier: it waits for no parent,
    or every queue of its parent (an expansion's partition whose keys it takes) has processed
    its input up to the barrier position; and `behind[p]`, where a coupled child that has not
    may read up to: the input `limits.trail` seconds older than its parent's slowest queue
    (-inf: no further than it is). Unset where no limits are given: nothing reads it."""
    if limits is None:
        return
    for p in range(arrivals.shape[0]):
        parent = limits.parent[p]
        passed[p] = True
        behind[p] = -np.inf
        if parent >= 0 and limits.barrier != -np.inf:
            slowest = np.inf
            for q in range(2):
                if arrivals[parent, q] > 0:
                    slowest = min(slowest, x[parent, q])
                if arrivals[parent, q] > 0 and x[parent, q] < limits.barrier - 1e-9:
                    passed[p] = False
            if not passed[p] and limits.trail >= 0 and slowest < np.inf:
                behind[p] = _cum_at(cum, rate, max(0.0, _arrived_at(cum, rate, slowest) - limits.trail))


@njit(cache=True, nogil=True)
def _found(limits, arrivals, x, now):  # pragma: no cover
    """Bring forward the `lift` of a re-shard's children whose parents are done at `now` (every
    queue through the parents' backlog, position `mark`: at a commit, or at a block's start
    where the layout's change or a drain left them so): the pipeline reads them
    RESHARD_FOUND_S later, where the run's first reading of them (the lift until then) came up
    to a probe after that (runs v1 and v2: their children first planned 0.7-1.5 s before it)."""
    if limits is None:
        return
    for p in range(arrivals.shape[0]):
        if limits.lift[p] == np.inf or limits.lift[p] <= now:
            continue
        through = True
        for q in range(2):
            if arrivals[p, q] > 0 and x[p, q] < limits.mark[p] - 1e-9:
                through = False
        if through:
            limits.lift[p] = min(limits.lift[p], now + RESHARD_FOUND_S)


@njit(cache=True, nogil=True)
def _reach(limits, p, c, now, passed, floor, behind):  # pragma: no cover
    """How far partition p's queues may read at input position c, at second `now` (absolute):
    c, but not past a re-shard's parents' last record before the children are read (`stop`,
    `lift`), nor past a closed partition's own last record (`end`), nor past `floor` for an
    expansion's new partition before its parent `passed` the barrier, or past where its
    parent lets a coupled one (`behind`)."""
    if limits is None:
        return c
    until = min(c, limits.end[p])
    until = min(until, limits.stop[p]) if now < limits.lift[p] else until
    return until if passed[p] else min(until, max(floor, behind[p]))


@njit(cache=True, nogil=True)
def _work(arrivals, x, end, capacity, seconds, limits, p):  # pragma: no cover
    """(ready, done, took): the records a queue at x holds up to `end`, and what it gets through
    of them in up to `seconds` at `capacity` a second, and how long that takes (`_served`: the
    first of them at `limits.pace` up to `limits.mark`)."""
    ready = max(0.0, _records(arrivals, x, end, limits, p))
    if limits is None:
        done = min(ready, capacity * seconds)
        return ready, done, done / capacity
    slow = max(0.0, _records(arrivals, x, min(end, limits.mark[p]), limits, p))
    done, took = _served(ready, slow, capacity, limits.pace[p], seconds)
    return ready, done, took


@njit(cache=True, nogil=True)
def _fluid(cum, rate, t0, seconds, tick, arrivals, capacity, x0, down_s, limits):  # pragma: no cover
    """A continuous job: per second and queue, processing up to its capacity (Lindley), held to
    its partition's `limits` (`_Limits`)."""
    partitions = arrivals.shape[0]
    x = x0.copy()
    lag_records, lag_seconds, x_end, ages, processed, x_drained = _buffers(seconds, tick, partitions)
    idle = np.zeros((partitions, 2))
    passed = np.ones(partitions, dtype=np.bool_)
    behind = np.full(partitions, -np.inf)
    _found(limits, arrivals, x, t0)  # parents done before the block: at the layout's change, or a drain
    for s in range(seconds):
        k = s // tick
        if s >= down_s:
            c = cum[t0 + s + 1]
            _barrier_passed(x, arrivals, limits, passed, behind, cum, rate)
            for p in range(partitions):
                for q in range(2):
                    if arrivals[p, q] > 0 and capacity[k, p, q] > 0:
                        until = _reach(limits, p, c, t0 + s, passed, x[p, q], behind)
                        _, done, _ = _work(arrivals[p, q], x[p, q], until, capacity[k, p, q], 1.0, limits, p)
                        processed[k, p, q] += done
                        x[p, q] = _advance(arrivals[p, q], x[p, q], done, limits, p)
            _found(limits, arrivals, x, t0 + s + 1)
        _second(s, t0, tick, cum, rate, arrivals, x, lag_records, lag_seconds, x_end, ages, x_drained, idle,
                limits)
    return lag_records, lag_seconds, x_end, ages, processed, x_drained


@njit(cache=True, nogil=True)
def _batches(cum, rate, t0, seconds, tick, arrivals, capacity, x0, down_s, weights,
             batch_s, overhead_s, latency_s, trigger_s, run_ahead, limits, boundary_s, gap_s,
             warm_s, warm_tau, warm_from, per_record_s):  # pragma: no cover
    """The pipeline's micro-batches. A batch starts on the trigger (or at once after a batch
    that overran it) and reads, per partition, from its slowest queue up to `run_ahead` batches
    of the partition's capacity, of the input `boundary_s` after its start (a Kinesis slot
    takes what its shards hold when it reads; never past its commit); each queue works until it
    runs out or the deadline; the batch commits its work `latency_s` after the last queue
    stops, and the next may start
    `overhead_s` after it (or at the commit, if later). Where the part of that cost after the
    commit is known (`gap_s` >= 0), the part before it grows with the batch's read: from
    `latency_s` for none to `overhead_s - gap_s` for a full one (the fullest partition's read over
    its `run_ahead` span), and the next may start `gap_s` after the commit. Where a wait per
    record read is known (`per_record_s` >= 0), the commit comes `latency_s` plus that for each
    record the batch read after its work instead, whatever the span. Lag only moves at
    commits. Also returned:
    when the first saturated batch (a queue left records it had read) after a saturated one
    committed (one after a batch that kept up waited for its trigger: it measures no cost),
    inf with none; and per tick whether a drain at its end would cut a batch still at work
    after a saturated one: the pipeline measures a batch's fixed cost only from a batch that
    left records after one that did, and a drained one leaves them.
    Also each second's mean backlog (`lag_records` holds its end, when a trigger starts the
    next batch): what the pipeline's gauge, read at a random moment, shows on average; at
    each second's end the last committed batch's duration, trigger to commit (NaN before one);
    and where the next batch starts, from the block's end (`_Block.resume_s`).
    Each queue is held to its partition's `limits` (`_Limits`): an expansion's new partitions
    join a batch planned once their parents passed the barrier (the pipeline's read plan). A
    batch that starts s seconds after `warm_from` (the run's second 0) waits `warm_s` *
    exp(-s / `warm_tau`) more for its commit (`JobModel.warmup`: a fresh pipeline warming up)."""
    partitions = arrivals.shape[0]
    ticks = seconds // tick
    x = x0.copy()
    lag_records, lag_seconds, x_end, ages, processed, x_drained = _buffers(seconds, tick, partitions)
    sawtooth = np.empty((seconds, 3), dtype=np.float32)
    backlog_mean = np.empty(seconds)
    duration = np.full(seconds, np.nan, dtype=np.float32)
    last = np.nan  # the last committed batch's duration
    area, since = 0.0, 0.0  # the backlog's area in second s so far, and up to when
    done = np.zeros((partitions, 2))
    took = np.zeros((partitions, 2))  # each queue's time at work in the batch
    speed = np.zeros((partitions, 2))  # and its records a second there
    flight = np.zeros((partitions, 2))
    idle = np.zeros((partitions, 2))
    passed = np.ones(partitions, dtype=np.bool_)  # whether each partition may read past the barrier
    behind = np.full(partitions, -np.inf)  # and how far a coupled one may read before it has
    _found(limits, arrivals, x, t0)  # parents done before the block: at the layout's change, or a drain
    s = 0  # the next second to sample
    before, committed = 0.0, -np.inf  # the last commit (absolute), and the oldest arrival until it
    saturated = np.inf
    cut = np.zeros(ticks, dtype=np.bool_)
    start = float(down_s)
    full_before = False  # the last batch left records it read
    # the soonest a batch commits after its work: its records are cut no later
    first_commit = latency_s if gap_s < 0 or per_record_s >= 0 else min(latency_s, overhead_s - gap_s)
    while start < seconds:
        k = min(int(start) // tick, ticks - 1)
        c = _cum_at(cum, rate, t0 + start + min(boundary_s, first_commit))
        work, admitted, full, fill = 0.0, 0.0, False, 0.0
        _barrier_passed(x, arrivals, limits, passed, behind, cum, rate)
        for p in range(partitions):
            slowest = min(x[p, 0] if arrivals[p, 0] > 0 else np.inf, x[p, 1] if arrivals[p, 1] > 0 else np.inf)
            span = run_ahead * batch_s * (capacity[k, p, 0] + capacity[k, p, 1])
            if limits is not None and slowest < limits.mark[p]:
                span *= max(1.0, limits.pace[p])
            # the run-ahead counts records: where a stretch holds more (or fewer) than the
            # partition's share, it spans fewer (more) positions (`_advance`)
            end = min(_reach(limits, p, c, t0 + start, passed, slowest, behind),
                      _advance(max(weights[p], 1e-12), slowest, span, limits, p))
            if span > 0:
                fill = max(fill, min(1.0, _records(weights[p], slowest, end, limits, p) / span))
            for q in range(2):
                done[p, q], took[p, q], speed[p, q] = 0.0, 0.0, 0.0
                if arrivals[p, q] <= 0 or capacity[k, p, q] <= 0:
                    continue
                ready, done[p, q], took[p, q] = _work(arrivals[p, q], x[p, q], end, capacity[k, p, q], batch_s,
                                                      limits, p)
                admitted += ready
                speed[p, q] = done[p, q] / took[p, q] if took[p, q] > 0 else 0.0
                full = full or done[p, q] < ready - 1e-9
                work = max(work, took[p, q])
        if admitted <= 1e-9:
            start = (np.floor(start / trigger_s) + 1) * trigger_s  # nothing new: the next trigger
            continue
        warm = warm_s * np.exp(-max(0.0, t0 + start - warm_from) / warm_tau) if warm_s > 0 else 0.0
        if per_record_s >= 0 or gap_s < 0:  # the wait grows with the records read, if at all
            commit = start + work + latency_s + warm + max(0.0, per_record_s) * admitted
            # without a gap measured every batch pays the whole fixed cost
            finished = commit + gap_s if gap_s >= 0 else max(commit, start + work + overhead_s + warm)
        else:
            commit = start + work + latency_s + warm + (overhead_s - gap_s - latency_s) * fill
            finished = commit + gap_s
        while s < seconds and s + 1 <= commit:
            # a drain stops the batch in flight at each task's current record: what each queue has
            # done by then commits (a tick that ends before this batch starts has nothing in flight)
            elapsed = s + 1 - start
            for p in range(partitions):
                for q in range(2):
                    flight[p, q] = min(done[p, q], speed[p, q] * elapsed) if elapsed > 0 else 0.0
            arrived = _second(s, t0, tick, cum, rate, arrivals, x, lag_records, lag_seconds, x_end, ages,
                              x_drained, flight, limits)
            lag_seconds[s] = _mean_age(s, t0, arrived, before, committed, sawtooth)
            backlog_mean[s] = area + _backlog_area(cum, rate, t0, arrivals, x, max(since, s), s + 1.0, limits)
            duration[s] = last
            area, since = 0.0, s + 1.0
            if full_before and (s + 1) % tick == 0 and start < s + 1 < commit:  # at work when a drain comes
                for p in range(partitions):
                    for q in range(2):
                        if flight[p, q] < done[p, q] - 1e-9:
                            cut[(s + 1) // tick - 1] = True
            s += 1
        if commit > seconds:
            break  # still running when the block ends: the next block resumes it as it began
        kc = min(int(commit) // tick, ticks - 1)
        if full and full_before and saturated == np.inf:
            saturated = commit
        full_before = full
        before, committed = _oldest_arrival(cum, rate, arrivals, x, t0 + commit), t0 + commit
        area += _backlog_area(cum, rate, t0, arrivals, x, since, commit, limits)  # second s up to the commit
        since, last = commit, commit - start
        for p in range(partitions):
            for q in range(2):
                if done[p, q] > 0:
                    x[p, q] = _advance(arrivals[p, q], x[p, q], done[p, q], limits, p)
                    processed[kc, p, q] += done[p, q]
        _found(limits, arrivals, x, t0 + commit)
        start = max(finished, (np.floor(start / trigger_s) + 1) * trigger_s)
    while s < seconds:
        arrived = _second(s, t0, tick, cum, rate, arrivals, x, lag_records, lag_seconds, x_end, ages, x_drained,
                          idle, limits)
        lag_seconds[s] = _mean_age(s, t0, arrived, before, committed, sawtooth)
        backlog_mean[s] = area + _backlog_area(cum, rate, t0, arrivals, x, max(since, s), s + 1.0, limits)
        duration[s] = last
        area, since = 0.0, s + 1.0
        s += 1
    return (lag_records, lag_seconds, x_end, ages, processed, x_drained, saturated, cut, sawtooth, backlog_mean,
            duration, start - seconds)


class _Model:
    def __init__(self, job: JobModel, tick_s: int, seed: int, rate: np.ndarray, window_s: int,
                 origin: float = 0.0, history: InputHistory | None = None):
        # the processing stop the daemon reads: assumed until the first rescale, then the
        # pipeline's restart gauge (the last restart's)
        self.downtime_seen = DOWNTIME_UNMEASURED_S
        self.origin = origin  # the clock time of the run's second 0, as the policy reads it
        self.tick = tick_s
        self.window = window_s
        # the seconds a tick's input reading spans: the whole window between the probe's reads,
        # or what Prometheus' rate() averages, the samples' span inside it
        self.span = max(1, window_s - int(round(job.scrape_interval_s))) if job.input_over_scrapes else window_s
        self.rng = np.random.default_rng(seed)
        self.closings: dict[int, float] = {}  # a partition closed before it joined: its last record's position
        self._use(*(job.in_layout(job.partition_weights) if job.layout_changes_s
                    else (job, np.arange(job.partitions))), float(rate[0]) if len(rate) else 0.0)
        # the batch's fixed cost, which the daemon's duty needs: measured from a saturated batch
        # (else what the job showed when the run began: `JobModel.shown_duty`)
        self.overhead_measured = False
        self.rescales = 0  # the run's rescales so far: the read's growth shows after some (`JobModel`)
        self.age = int(round(job.metrics_age_s))  # whole seconds: the model's resolution
        # A gauge the pipeline sets at a commit (a batch's fixed cost) is only as old as the last
        # scrape, half an interval on the median; `metrics_age_s` is the watermarks', which the
        # probe read before that scrape. Run 153's daemon read at its 40 s tick a cost committed
        # at 39.3 s: 0.7 s before, inside the watermarks' 1.02 s that this counted until session 50.
        self.gauge_age = job.scrape_interval_s / 2
        self.rate = np.ascontiguousarray(rate, dtype=np.float64)
        self.cum = np.concatenate([[0.0], np.cumsum(self.rate)])  # records arrived by second s
        # what the daemon records in Redis, learned as the run goes (from the days given, if any)
        self.history = copy.deepcopy(history) if history is not None else InputHistory(zone=job.timezone)

    def _use(self, job: JobModel, members: np.ndarray, input_before: float = 0.0) -> None:
        """Read the layout `job` describes (`members`: its partitions' indexes in the run's job):
        everything here that has one entry a partition."""
        self.job, self.members = job, members
        # each queue's share of the topic's input, and what the daemon reads as each partition's
        # input: the same but while a growth's new partitions wait (`hold`)
        self.weights = self.input_weights = job.weights
        self.hot = job.hot_shares
        # a partition's hot shares as the pipeline exports them: unknown (even) until its batches
        # read MIN_SHARE_READ records between them; known from the start where a fitted run says
        # so, else wherever there was input before the run (the job runs before second 0)
        before = job.weights * input_before > 0
        known = np.array(job.hot_shares_known_at_start) if job.hot_shares_known_at_start else before
        self.shares_known = known | (not job.batch_seconds)
        self.all_known = bool(self.shares_known.all())  # asked every tick: kept, not recomputed
        self.hot_table = self._shown_shares()
        self.ceiling = job.cpu_ceiling()
        self._tasks: dict[int, tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]] = {}
        self._duty_cache: dict[tuple[bool, bool], np.ndarray | None] = {}
        self.names = tuple(("topic", int(p)) for p in members)
        # what layout changes hold each partition to (`_Limits`; set by `close`, `hold`, `relayout`)
        self.mark = np.full(len(members), -np.inf)
        self.pace = np.ones(len(members))
        self.stop = np.full(len(members), np.inf)
        self.lift = np.full(len(members), np.inf)
        self.end = np.full(len(members), np.inf)
        self.parent = np.full(len(members), -1, dtype=np.int64)
        self.barrier = -np.inf
        self.trail = -1.0  # not coupled
        self.dense = np.tile(np.array([1.0, -np.inf]), (len(members), 1))

    def hold(self, weights: tuple[float, ...], since: float) -> None:
        """A growth's new partitions take their shares of the input from second `since` (lead-in
        counted; `weights`, the layout to come) and nobody reads them until it is adopted
        (`relayout`): the layout's queues take what is left, and the daemon reads each new
        partition's input under its parent, as the pipeline counts it (`topology.waiting_under`).
        A queue keeps its position and the records it had then (`dense`): until session 60 its
        backlog shrank with its share (run e8, grown while 5.7 s behind: the replay's step
        drained 4 s early, its adoption 2.5 s early). This is applied from the tick boundary
        before `since`, where the records between still count whole."""
        shares = np.asarray(weights, dtype=np.float64)
        before = self.weights
        self.weights = (shares / shares.sum())[self.members]
        ratio = np.divide(before, self.weights, out=np.ones_like(before), where=self.weights > 0)
        self.dense = np.stack([ratio, np.full(len(ratio), _cum_at(self.cum, self.rate, since))], axis=1)

    def close(self, closed: float, retired: tuple[bool, ...]) -> None:
        """The partitions a change retires (`retired`, one flag for each of the run's
        partitions: read in a layout before the change, not after it) took their last record at
        second `closed` (a Kinesis split or merge): their tasks read nothing past the input then,
        and what came after (their children's records, which the pipeline counts under them:
        their input and backlog, `shards.waiting_under`) waits unread until the layout reads the
        children (`relayout`), as the pipeline reads a child only once its parent is done (run
        u3: the parent drained by 61 s, its children first read at 65 s, their records 21.7 s
        old by then). A closing can come before the layout the change ends (a merge whose parent
        was a split's child not read yet: runs v5, v7 and v9), and a partition keeps the
        earliest of its ends. One not read yet is held to it from when it joins: run v9's merge
        parent joined 13 s after its closing, as a split's child, and from its lift it read its
        merge child's records, a 71% share, in the replay's layout after its sibling's end
        (`_Limits.end`; the replay drained them 25 s early)."""
        position = float(_cum_at(self.cum, self.rate, closed))
        gone = {p for p, flag in enumerate(retired) if flag}
        members = self.members.tolist()
        self.end = np.array([min(end, position) if p in gone else end for p, end in zip(members, self.end, strict=True)])
        for p in gone - set(members):
            self.closings[p] = min(self.closings.get(p, np.inf), position)

    def relayout(self, base: JobModel, weights: tuple[float, ...], x: np.ndarray, at: int,
                 held_from: float | None = None, closed: float | None = None, read_at: float = 0.0,
                 passed: tuple[bool, ...] = (), waiting: tuple[float, ...] = (),
                 coupled_until: float | None = None) -> np.ndarray:
        """Read the partitions `weights` gives a share to from here on (a re-shard, an
        expansion). A partition read before keeps its position; a new one starts from the
        input at `held_from` where it waited since then (`hold`), else from the old layout's
        slowest position, as after a rescale: the backlog and its oldest record's age carry over
        whole. Where the partitions it retires were `closed` (a re-shard's parents took their last
        record then), the new ones continue the slowest of those instead, at the retired
        partitions' pace up to the input at `closed` (`_Model.pace`), and their own records
        RESHARD_FOUND_S after the parents are through that backlog (`_found`: the pipeline's
        probe finds them done), or from `read_at` on (the run's first reading of them) if that
        comes first (the layout's change falls in the tick before it): a parent with a backlog
        and no more input has no queue of its own here (each queue is a share of the topic's
        input), and its children are not read before it is done. Below the input at `read_at` a
        new one holds its `waiting` share of the input (`dense`, where given: what it took while
        it waited, its parents' backlog split the same way) rather than its share after. Where
        it retires none (a Kafka expansion, adopted at second `at`), a new one is not read before
        its parent (the kept partition whose keys it takes: p % n of n kept) has processed the
        input up to `at` (the barrier: the pipeline plans a child into a batch only then,
        `Checkpoints.blocked_partitions`; run e6's first batch after the adoption read the
        parents alone and committed 0.6 s after the restart, where a replay that read the
        children's 26 s of records in it committed 3.1 s after), but those whose parents
        `passed` it before the restart (each partition of `base`'s: runs e8 and e9 all, e11
        three of four; `JobModel.layout_barrier_passed`). Returns the new positions."""
        active = np.where(self.arrivals(1) > 0, x, np.inf)
        slowest = float(active.min()) if np.isfinite(active).any() else float(x.min())
        old = self.members.tolist()
        kept = dict(zip(old, x, strict=True))
        # each partition's (mark, pace, stop, lift, end): one that stays keeps its pace to its
        # mark, and the end a later change's closing set
        held = {p: row for p, row in zip(old, zip(self.mark, self.pace, self.stop, self.lift, self.end, strict=True),
                                         strict=True)}
        start = slowest if held_from is None else float(_cum_at(self.cum, self.rate, held_from))
        # a kept partition keeps the records it had below its mark: a share that changes rescales them
        dense = dict(zip(old, zip(self.dense.tolist(), self.weights.tolist(), strict=True), strict=True))
        self._use(*base.in_layout(weights))
        members = self.members.tolist()
        dense = {p: _rescaled(row, was, self.weights[members.index(p)]) for p, (row, was) in dense.items()
                 if p in members}
        new = [p for p in members if p not in kept]
        retired = [i for i, p in enumerate(old) if p not in members]
        if closed is not None and new and retired:
            parents = active[retired]
            start = float(parents.min()) if np.isfinite(parents).any() else start
            mark = float(_cum_at(self.cum, self.rate, closed))
            held.update({p: (mark, len(retired) / len(new), mark, read_at, np.inf) for p in new})
            if waiting:
                below = float(_cum_at(self.cum, self.rate, read_at))
                dense.update({p: _held_below(waiting[p] / self.weights[members.index(p)], mark, below,
                                             self.closings.get(p, np.inf)) for p in new})
        rows = np.array([held.get(p, (-np.inf, 1.0, np.inf, np.inf, np.inf)) for p in members], dtype=np.float64)
        rows[:, 4] = [min(row[4], self.closings.pop(p, np.inf)) for p, row in zip(members, rows, strict=True)]
        self.mark, self.pace, self.stop, self.lift, self.end = rows.T.copy()
        self.dense = np.array([dense.get(p, (1.0, -np.inf)) for p in members], dtype=np.float64)
        waiting = [p for p in new if not (passed and passed[p])]
        if waiting and not retired:  # a growth, some of its new partitions' parents not past the barrier yet
            # a growth keeps partitions 0..n-1 and moves to partition p keys of p % n (its parent)
            index = {p: i for i, p in enumerate(members)}
            self.parent = np.array([index[old[p % len(old)]] if p in waiting else -1 for p in members])
            self.barrier = float(self.cum[at])
            if coupled_until is not None and coupled_until > at:  # read behind their parents till then
                self.barrier, self.trail = float(_cum_at(self.cum, self.rate, coupled_until)), COUPLING_TRAIL_S
        return np.array([kept.get(p, (start, start)) for p in members], dtype=np.float64)

    def limits(self) -> _Limits | None:
        """What the layout changes so far hold each partition to, for the kernels; None where
        they hold none (most blocks of a run), which the kernels are compiled for on their own."""
        limits = _Limits(self.mark, self.pace, self.stop, self.lift, self.end, self.parent, float(self.barrier),
                         self.dense, float(self.trail))
        return limits if _binding(limits) else None

    def arrivals(self, factor: int) -> np.ndarray:
        """(P, 2): each queue's share of the topic's input (the busiest thread, the others)."""
        hot = np.ones(self.job.partitions) if factor == 1 else self.hot[factor]
        arrivals = self.weights[:, None] * np.stack([hot, 1.0 - hot], axis=1)
        return np.where(arrivals < 1e-12, 0.0, arrivals)  # rounding must not invent a queue

    def block(self, t0: int, end: int, factor: int, x0: np.ndarray, down_s: float,
              keeping_up: bool = False, past: tuple[np.ndarray, np.ndarray] | None = None) -> _Block:
        """Seconds [t0, end) at one factor, from positions x0 (P, 2), in cumulative-input units;
        `keeping_up`: the job takes all its input as it comes (the time before a run starts);
        `past`: the run's lag records and seconds before t0, which old metrics may still show."""
        job, tick = self.job, self.tick
        rate = self.rate[t0:end]
        ticks = rate.size // tick
        arrivals = self.arrivals(factor)
        per_task = job.task_rate(factor)
        tasks = np.array([1.0, factor - 1.0])
        throttle = min(1.0, job.partition_limit / (per_task * factor))
        spread = job.process_cv / np.sqrt(np.maximum(1.0, per_task * tick * tasks))
        noise = 1.0 + spread * self.rng.standard_normal((ticks, job.partitions, 2))
        task_cap = per_task * throttle * np.clip(noise, 0.0, None)  # (ticks, P, 2)
        capacity = np.ascontiguousarray(task_cap * tasks)
        overhead_tick, cut, sawtooth, backlog_mean = math.inf, np.zeros(ticks, dtype=bool), None, None
        duration = np.full(rate.size, np.nan, dtype=np.float32)  # a continuous job has no batches
        resume = 0.0
        limits = self.limits()
        if keeping_up:
            lag_records, lag_seconds, x_end, ages, processed, x_drained = _fluid(
                self.cum, self.rate, t0, rate.size, tick, arrivals, np.full_like(capacity, np.inf), x0, 0.0,
                limits)
        elif job.batch_seconds:
            (lag_records, lag_seconds, x_end, ages, processed, x_drained, saturated, cut, sawtooth,
             backlog_mean, duration, resume) = _batches(
                self.cum, self.rate, t0, rate.size, tick, arrivals, capacity, x0, down_s,
                self.weights, job.batch_seconds, job.overhead(factor), job.latency(factor), job.trigger_s,
                job.run_ahead, limits, job.read_boundary_s, -1.0 if job.batch_gap_s is None else job.batch_gap_s,
                job.commit_warmup_s, job.commit_warmup_tau_s, float(tick),  # the lead-in: one tick
                -1.0 if job.commit_per_record_s is None else job.commit_per_record_s)
            if saturated < math.inf:  # its commit, then as old as the tick's scrape
                overhead_tick = math.ceil((saturated + self.gauge_age) / tick) - 1
        else:
            lag_records, lag_seconds, x_end, ages, processed, x_drained = _fluid(
                self.cum, self.rate, t0, rate.size, tick, arrivals, capacity, x0, down_s, limits)
        now = t0 + tick * np.arange(1, ticks + 1)
        seen = np.maximum(0, now - self.age)  # the input as the tick's metrics show it
        c = self.cum[now][:, None, None]
        lag_end = arrivals * np.maximum(0.0, c - x_end)
        if limits is not None:  # `_records`, vectorised
            times, below = self.dense[None, :, 0, None], self.dense[None, :, 1, None]
            lag_end += arrivals * (times - 1.0) * np.maximum(0.0, np.minimum(c, below) - x_end)
        if backlog_mean is None:  # a continuous job has no teeth: each second's end is its mean
            backlog_mean = lag_records
        if self.age:
            lag_end, ages = self._aged(t0, seen, lag_end, ages, _gauge(job, lag_records, backlog_mean),
                                       lag_seconds, past, arrivals)
        if job.lag_probe_age_s:  # the gauge: an older watermark less the positions the last commit left
            lag_end = np.maximum(0.0, lag_end - processed / tick * job.lag_probe_age_s)
        block = self._columns(factor, self.observed_input(seen), lag_records, lag_seconds, lag_end,
                              (x_end, x_drained), ages, processed / tick, task_cap,
                              # the read times: the tick's time as `observe` stamps it (the run's seconds
                              # count from the end of `simulate`'s one-tick lead-in) less the age
                              (self.cum[seen][:, None] * self.input_weights, now - seen,
                               (self.origin + (now - tick)) - (now - seen)))
        if sawtooth is None:  # a continuous job's age has no teeth: each second ends at its highest
            sawtooth = np.stack([lag_seconds, np.full(rate.size, np.nan), np.full(rate.size, np.nan)],
                                axis=1).astype(np.float32)
        block.overhead_tick, block.cut, block.sawtooth = overhead_tick, cut, sawtooth
        block.lag_records_mean, block.batch_duration, block.resume_s = backlog_mean, duration, resume
        return block

    def _aged(self, t0: int, seen: np.ndarray, lag_end: np.ndarray, ages: np.ndarray, lag_records: np.ndarray,
              lag_seconds: np.ndarray, past: tuple[np.ndarray, np.ndarray] | None,
              arrivals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The backlog and the oldest records' ages as old metrics show them: the job's totals of
        `seen` seconds (this block's, or `past` ones; `lag_records` as the gauge shows them,
        `_gauge`), spread over the queues as at the tick's end
        (positions are kept per tick only; the totals are what sizing reads)."""
        old_records, old_seconds = past if past is not None else (np.zeros(0), np.zeros(0))
        lo = max(0, t0 - self.age - 1)  # the oldest second a tick of this block may still show
        records = np.concatenate([old_records[lo:t0], lag_records])
        seconds = np.concatenate([old_seconds[lo:t0], lag_seconds])
        at = np.clip(seen - 1 - lo, 0, records.size - 1)  # a second's sample is taken at its end
        shown, oldest = records[at], seconds[at]
        total = lag_end.sum(axis=(1, 2))
        share = arrivals / max(float(arrivals.sum()), 1e-12)
        lag = np.where(total[:, None, None] > 0, lag_end * (shown / np.maximum(total, 1e-12))[:, None, None],
                       shown[:, None, None] * share)
        top = ages.max(axis=1)
        ages = np.where(top[:, None] > 0, ages * (oldest / np.maximum(top, 1e-12))[:, None], oldest[:, None])
        return lag, ages

    def observed_input(self, now: np.ndarray) -> np.ndarray:
        """(ticks, P): the input each tick reads, as Prometheus' `rate()` over the daemon's window
        computes it from the high watermark: the mean over the span of the window's samples, the
        window less a scrape interval (fewer at the start). A tick's own mean would show a step a
        window early and at full height."""
        since = np.maximum(0, now - self.span)
        return ((self.cum[now] - self.cum[since]) / np.maximum(1, now - since))[:, None] * self.input_weights

    def _columns(self, factor, input_rate, lag_records, lag_seconds, lag_end, positions, ages, processed,
                 task_cap, marks) -> _Block:
        """Every tick's observation columns at once; a tick then only slices rows."""
        names, partition, repeats, divisor = self._task_shape(factor)
        ticks = lag_end.shape[0]
        lag_p = lag_end.sum(axis=2)
        busy = np.minimum(1.0, processed / np.maximum(task_cap * divisor, 1e-9))

        def per_task(queues: np.ndarray) -> np.ndarray:
            return np.repeat(queues.reshape(ticks, -1), repeats, axis=1)

        partition_columns = (lag_p, ages, input_rate, processed.sum(axis=2))
        task_columns = (per_task(lag_end / divisor), per_task(processed / divisor),
                        per_task(1.0 / np.maximum(task_cap, 1e-9)), per_task(busy))
        return _Block(
            lag_records=lag_records,
            lag_seconds=lag_seconds,
            x_end=positions[0],
            x_drained=positions[1],
            partition_columns=partition_columns,
            task_columns=task_columns,
            # Column sums for all ticks in one call each, handed to the stats as their totals.
            partition_totals=np.stack([c.sum(axis=1) for c in partition_columns], axis=1).tolist(),
            task_totals=np.stack([c.sum(axis=1) for c in task_columns], axis=1).tolist(),
            marks=marks[0],
            marks_age=marks[1],
            marks_time=np.repeat(marks[2][:, None], lag_end.shape[1], axis=1),
        )

    def _shown_shares(self) -> np.ndarray:
        """The job's hot shares where the pipeline has measured them, even elsewhere."""
        table = np.where(self.shares_known[:, None], self.job.hot_share_table(), np.nan)
        return filled_hot_shares(table, self.job.partitions)

    def _learn_shares(self, now: int) -> None:
        """Mark the partitions whose input since the run began reached the records the pipeline
        sums its small batches' counts to (MIN_SHARE_READ); the next tick shows their shares (the
        batch commits, then its metrics are scraped). With few keys the shares decide the
        capacity: run 66 (16 keys, 25/s a partition, 75 records a batch, no backlog at its
        start) read even shares until the step, when the pipeline still wanted one batch of 200,
        waited on the step's first tick and sized a tick later; runs 72-80 had them from the
        start (their first batches read the backlog built while Spark started), which a fitted
        run records (`JobModel.hot_shares_known_at_start`)."""
        if self.all_known:
            return  # nothing left to learn: most of a run's ticks
        since_start = self.cum[now + self.tick] - self.cum[self.tick]  # the rates begin a tick early (the lead-in)
        newly = ~self.shares_known & (self.weights * since_start >= MIN_SHARE_READ)
        if newly.any():
            self.shares_known |= newly
            self.all_known = bool(self.shares_known.all())
            self.hot_table = self._shown_shares()

    def observe(self, block: _Block, k: int, factor: int, time: float, since: float) -> Observation:
        names, partition, _, _ = self._task_shape(factor)
        p, p_totals = block.partition_columns, block.partition_totals[k]
        t, t_totals = block.task_columns, block.task_totals[k]
        shares = self.hot_table  # what batches before this tick measured: this tick's show next
        self._learn_shares(int(time))
        self.overhead_measured = self.overhead_measured or k >= block.overhead_tick
        # the columns are the engine's own float64 rows: built without the checks (`_unchecked`),
        # and the observation without its generated `__init__` (`frozen`)
        return frozen(
            Observation, time=self.origin + time, factor=factor,
            partitions=PartitionStats.unchecked(self.names, p[0][k], p[1][k], p[2][k], p[3][k],
                                                dict(zip(PARTITION_COLUMNS, p_totals, strict=True))),
            tasks=TaskStats.unchecked(names, partition, t[0][k], t[1][k], t[2][k], t[3][k],
                                      dict(zip(TASK_COLUMNS, t_totals, strict=True))),
            since_rescale_s=since, restart_downtime_s=self.downtime_seen,
            saturated_rate=self.job.task_rate(factor), hot_shares=shares,
            # until the pipeline measures a batch's fixed cost the daemon reads the commit latency
            # (none before session 49): run 89's replay, shown the cost from the start, held 4
            # where the real job went to 8
            duty=self.job.shown_duty(factor, self.overhead_measured, time),
            duties=self._duties(),
            cpu_ceiling=self.ceiling, history=self.history,
            cache={"shares": shares},  # filled: not again each tick
            # Stamped when they were read: before the run's second 0 at its first ticks, as a
            # daemon's first query gets a scrape from before it started.
            watermarks=Watermarks.unchecked(self.names, block.marks[k], block.marks_time[k]))

    def _duties(self) -> np.ndarray | None:
        """`JobModel.shown_duties`, once per state (a week asks 40,000 times)."""
        key = (self.overhead_measured, self.rescales >= self.job.read_growth_after)
        if key not in self._duty_cache:
            self._duty_cache[key] = self.job.shown_duties(self.overhead_measured, self.rescales)
        return self._duty_cache[key]

    def _task_shape(self, factor: int) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray]:
        if factor not in self._tasks:
            partitions = self.job.partitions
            repeats = np.tile([1, factor - 1], partitions)
            names = tuple(f"Partition {p} bucket {b}/{factor}" for p in self.members
                          for b in range(factor))
            divisor = np.array([1.0, max(1.0, factor - 1.0)])
            self._tasks[factor] = (names, np.repeat(np.arange(partitions), factor), repeats, divisor)
        return self._tasks[factor]


def _gauge(job: JobModel, end: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """The backlog per second as the pipeline's gauge shows it: one moment of each second, on
    average its mean (runs 138-140). A pipeline before session 48 read the second's end less
    the commits since its probe (`JobModel.lag_probe_age_s`)."""
    return end if job.lag_probe_age_s else mean


def _first_commit(sawtooth: np.ndarray) -> float | None:
    """Seconds into a block to its first commit (the phase kept in its sawtooth), or None."""
    seconds = np.flatnonzero(np.isfinite(sawtooth[:, 1]))
    return float(seconds[0] + sawtooth[seconds[0], 1]) if seconds.size else None


@dataclass(frozen=True)
class _Check:
    """A scale-down's lag check, as the restart actuator runs it: the backlog at the new
    generation's first commit and over the last third of `verify_window_s` after it, the
    slowest growth between (seconds counted with the lead-in), against the input and the
    processed rate when it was decided."""

    decided: int  # the tick that decided the scale-down (the daemon's backoff counts from it)
    back: int  # the factor a rollback returns to
    first: float
    last: float
    input_rate: float
    processed_rate: float

    def verdict(self, past: np.ndarray, block: np.ndarray, block_start: int) -> str | None:
        """Why it rolls back (None: it holds), from the run's backlog so far: `past` before
        `block_start`, `block` from there."""
        def at(second: float) -> float:
            s = int(second)
            return float(past[s] if s < block_start else block[min(s - block_start, block.size - 1)])
        first = at(self.first)
        seconds, last = slowest(first, [(t, at(self.first + t)) for t in tail_times(self.last - self.first)])
        return lag_got_worse(first, last, seconds, self.input_rate, self.processed_rate)


@dataclass(frozen=True)
class _LayoutEvent:
    """A layout change as the engine applies it: at `at` (a tick boundary, lead-in counted), to
    `weights`; `hold`: its new partitions begin to wait there (`_Model.hold`), else it is
    adopted, its new partitions from the input at `held_from` where they waited, and `restarts`
    where the adoption restarts the query in the tick at `at`."""

    at: int
    weights: tuple[float, ...]
    hold: bool = False
    held_from: float | None = None  # when its new partitions began to take records (lead-in counted)
    restarts: bool = False
    closed: float | None = None  # a re-shard's parents took their last record then (lead-in counted)
    close: bool = False  # only that: the partitions it retires read nothing past it (`_Model.close`)
    # a growth's new partitions are read behind their parents until then (`JobModel.adopt_after_s`
    # after they took their first records; lead-in counted)
    coupled_until: float | None = None
    retired: tuple[bool, ...] = ()  # with `close`: each of the run's partitions, read before the change and not after
    read_at: float = 0.0  # when the pipeline first read its new partitions (lead-in counted)
    passed: tuple[bool, ...] = ()  # an expansion's new partitions whose parents passed its barrier before the restart
    waiting: tuple[float, ...] = ()  # a re-shard's new partitions' shares of the input while they waited


def _layout_events(job: JobModel, lead: int, tick: int) -> list[_LayoutEvent]:
    """The run's layout changes in time order, a waiting growth as its hold and its adoption."""
    events = []
    read: set[int] = set()  # the partitions some layout before the change gave a share
    for (_, before), (at, weights, wait, restarts, closed, passed, waiting) in zip(
            job.layouts(), job.layout_adoptions(), strict=False):
        read |= {p for p, w in enumerate(before) if w > 0}
        adopt = lead + math.floor(at / tick) * tick
        held = lead + math.floor((at - wait) / tick) * tick if wait else adopt
        if held < adopt:
            events.append(_LayoutEvent(held, weights, hold=True, held_from=lead + at - wait))
        if closed:
            events.append(_LayoutEvent(lead + math.floor(closed / tick) * tick, weights, close=True,
                                       closed=lead + closed,
                                       retired=tuple(p in read and not w > 0 for p, w in enumerate(weights))))
        events.append(_LayoutEvent(adopt, weights, held_from=lead + at - wait if held < adopt else None,
                                   restarts=restarts, closed=lead + closed if closed else None,
                                   read_at=lead + at, passed=passed, waiting=waiting,
                                   coupled_until=None if closed else lead + at - wait + job.adopt_after_s))
    return sorted(events, key=lambda event: event.at)  # a closing can come before the change before it


def _joins(job: JobModel) -> list[float]:
    """When each layout change that brought new partitions was first read (seconds)."""
    layouts = job.layouts()
    return [at for (_, before), (at, after) in zip(layouts, layouts[1:], strict=False)
            if any(a > 0 and not b > 0 for b, a in zip(before, after, strict=True))]


def simulate(workload: Workload, job: JobModel, policy: Policy, guards: Guards | None = None,
             tick_s: int = 15, seed: int = 7,
             progress: Callable[[int], Any] | None = None, window_s: int | None = None,
             origin: float | None = None, history: InputHistory | None = None) -> Run:
    """Drive `job` through `workload` with `policy` behind `guards`; `progress(seconds)` as it goes.

    The simulated daemon ticks as the real one does: once when it starts (second 0: the job ran
    the workload's first rate before that) and every `tick_s` after, reading the input over its
    `window_s` rate window (default two ticks, the shipped `[prometheus] window`).

    The policy reads second s as clock time `origin + s` (by default the workload's `start`: a
    real series' own clock, else midnight UTC of day 0), and `history` as the days on record
    before the run (a copy learns the run's own; by default none, kept in the job's time zone):
    a replay of a real run whose daemon found days in Redis starts from the same clock and the
    same days."""
    if tick_s < 1:
        raise ValueError(f"tick must be >= 1 s, not {tick_s!r}")
    window = 2 * int(tick_s) if window_s is None else int(window_s)
    if window < 1:
        raise ValueError(f"the rate window must be >= 1 s, not {window_s!r}")
    if job.scrape_interval_s >= window:
        raise ValueError(f"scrape_interval_s {job.scrape_interval_s:g} must be less than the {window} s rate "
                         f"window: the input's reading needs two samples a window apart (a longer window, or a "
                         f"shorter scrape)")
    guards = guards or Guards()
    tick = int(tick_s)
    total = workload.seconds // tick * tick
    if total == 0:
        raise ValueError(f"workload {workload.name!r} is shorter than one {tick} s tick")
    # A lead-in of one tick at the first rate puts a tick at second 0; times the policy sees, and
    # the run's series, count from the workload's start.
    lead = tick
    model = _Model(job, tick, seed, np.concatenate([np.full(lead, workload.rate[0]), workload.rate]), window,
                   workload.start if origin is None else origin, history)
    run = Run(getattr(policy, "name", type(policy).__name__), workload, job, tick,
              np.empty(lead + total), np.empty(lead + total), np.empty(lead + total, dtype=np.int32),
              sawtooth=np.empty((lead + total, 3), dtype=np.float32),
              lag_records_mean=np.empty(lead + total, dtype=np.float32),
              batch_duration=np.empty(lead + total, dtype=np.float32))
    factor = job.start_factor
    x = np.zeros((model.job.partitions, 2))  # each queue's position, in cumulative input
    # the run's layout changes, each from the tick before it (a block is whole ticks): the tick
    # after a change reads the new layout, as the real daemon's does (run u1's 55 s tick read the
    # 3 shards adopted at 53 s; replayed from the tick after, it read 2 and scaled 4 -> 8)
    relayouts = _layout_events(job, lead, tick)
    # a tick that sees a partition's first reading alone holds (the daemon's input query needs
    # two): run l2's ticks 0.6 and 1.0 s after its children were first read did, u2's 1.6 s after
    # did not; the second reading shows about a probe and half a scrape after the first. So does
    # one up to a probe before it: the pipeline wrote the layout to Redis first, and the tick
    # found no reading of its new partitions (run u4's tick 0.8 s before: "no lag_records")
    joins = _joins(job)
    joining = JOINED_READ_S + job.scrape_interval_s / 2
    actuations = 0  # rescales and restarting adoptions: the run measured each one's restart
    last_rescale, down_s, adopted = -math.inf, 0.0, False
    expanded = -math.inf  # when the last adopted expansion ended
    policy_state: Any = None
    guard_state = None
    checking: _Check | None = None  # a scale-down under the actuator's lag check
    backoff = Backoff()  # the daemon's wait after a rolled-back rescale
    checked = 0.0  # the last rescale's lag check, which its end waits out after the first commit
    restarted = False  # a rescale whose first commit the next block shows
    t, block_ticks, total = 0, BLOCK_TICKS, lead + total
    # The lead-in is its own block, one tick long, in which the job keeps up.
    while t < total:
        while relayouts and relayouts[0].at <= t:
            event = relayouts.pop(0)
            if event.hold:
                model.hold(event.weights, event.held_from)
            elif event.close:
                model.close(event.closed, event.retired)
            else:
                x = model.relayout(job, event.weights, x, event.at, held_from=event.held_from, closed=event.closed,
                                   passed=event.passed, read_at=event.read_at, waiting=event.waiting,
                                   coupled_until=event.coupled_until)
        end = lead if t < lead else min(total, t + block_ticks * tick, *(e.at for e in relayouts[:1]))
        block = model.block(t, end, factor, x, down_s, keeping_up=t < lead,
                            past=(_gauge(job, run.lag_records, run.lag_records_mean)[:t], run.lag_seconds[:t]))
        committed = _first_commit(block.sawtooth) if restarted else None
        if committed is not None:
            # The actuation ends at the new generation's first commit, which comes before a whole
            # deadline when the first batch has less to read (runs 123, 126, 128 and 130: the real
            # ramps' 1 -> 2 ended 2.4-3.2 s after the tick, the deadline's estimate 3.9-4.3 s).
            last_rescale = t + committed - lead + checked
            actuated = run.adoptions if adopted else run.rescales
            actuated[-1] = dataclasses.replace(actuated[-1], done=last_rescale)
            expanded = last_rescale if adopted else expanded
            if checking is not None:
                checking = dataclasses.replace(checking, first=t + committed, last=t + committed + checked)
        restarted = False
        kept, running = end - t, factor
        for k in range((end - t) // tick):
            now = t + (k + 1) * tick - lead
            if now < last_rescale:
                continue  # the daemon is still in its last actuation: no tick (APScheduler skips it)
            target, reason = factor, ""
            # an adopted expansion restarts the query in its tick, before the policy (the real
            # daemon's tick runs it first; run e1's cooldown counted from its end)
            adopted = bool(relayouts) and relayouts[0].restarts and relayouts[0].at == t + (k + 1) * tick
            if adopted:
                run.adoptions.append(Rescale(now, factor, factor, "partition expansion adopted"))
            elif checking is not None:  # its window ended by this tick (the rollback starts here)
                worse = checking.verdict(run.lag_records[:t], block.lag_records, t)
                back, decided, checking = checking.back, checking.decided, None
                if worse is not None:
                    target, reason = back, f"rolled back {factor} -> {back}: {worse}"
                    # the daemon backs off from the failed actuation's tick (run 83: the 8 -> 1 at
                    # 110 s rolled back, and the next scale-down went through at 190 s)
                    backoff = backoff.after_failure(decided, worse, BACKOFF_S, BACKOFF_MAX_S)
                else:
                    backoff = Backoff()  # a completed rescale clears it
            if target == factor and not adopted:
                if now - expanded < model.window or any(-JOINED_READ_S <= now - at < joining for at in joins):
                    continue  # its input window spans the expansion, or a partition was read once: the
                    # real tick holds (`tick.py`, `evaluator.py`)
                observation = model.observe(block, k, factor, now, max(0.0, now - last_rescale))
                model.history.record(observation.time, observation.input_rate)
                wish, policy_state = policy.decide(observation, policy_state)
                decision, guard_state = guards.apply(observation, wish, guard_state)
                if decision.factor == factor or backoff.active(now):
                    continue
                target, reason = decision.factor, decision.reason
                if target < factor and job.verify_window_s > 0:
                    first = lead + now + model.job.actuation_s(target, job.restart_s(actuations))
                    checking = _Check(now, factor, first, first + job.verify_window_s,
                                      observation.input_rate, observation.processed_rate)
                elif target > factor:
                    backoff = Backoff()
            if not adopted:
                run.rescales.append(Rescale(now, factor, target, reason))
                model.rescales = len(run.rescales)
            # a drained batch that left records after a saturated one shows the pipeline its fixed
            # cost (runs 88, 89 and 91 first exported it a second after their first rescale, before
            # session 49 counted only such batches; run 87 never did)
            model.overhead_measured = model.overhead_measured or bool(block.cut is not None and block.cut[k])
            kept = (k + 1) * tick
            # The drain commits what the batch in flight did by now; then a new layout resumes
            # every bucket from its partition's slowest position (the pipeline skips what faster buckets did;
            # the oldest record is what lag measures).
            active = np.where(model.arrivals(factor) > 0, block.x_drained[k], np.inf)
            x = np.repeat(active.min(axis=1, keepdims=True), 2, axis=1)
            # The daemon records a rescale when its actuation ends: the new generation's first
            # commit, and after a scale-down the actuator's lag check (`verify_window_s`) too; it
            # ticks again only then, and its cooldown and the policy's settle time count from then.
            checked = job.verify_window_s if checking is not None else 0.0
            restarted = True
            # each restart as the run measured it (not rounded: 0.96 s is not 0), which the daemon
            # reads from then on
            factor, down_s = target, job.restart_s(actuations)
            actuations += 1
            model.downtime_seen = down_s
            last_rescale = now + model.job.actuation_s(factor, down_s) + checked  # until the next block shows it
            actuated = run.adoptions if adopted else run.rescales
            actuated[-1] = dataclasses.replace(actuated[-1], done=last_rescale)
            expanded = last_rescale if adopted else expanded
            block_ticks = 5  # a policy that just rescaled may soon again: waste little
            break
        else:
            x = block.x_end[-1]
            # still down, or the batch in flight at the block's end (or the next one's start) as
            # it was: starting one anew on the block's first second would read a longer batch
            # than the job ran, whose slack decays over some 15 s at 83% busy (run 149's replay)
            down_s = down_s - kept if down_s > kept else block.resume_s
            block_ticks = min(BLOCK_TICKS, 2 * block_ticks)
        run.lag_records[t:t + kept] = block.lag_records[:kept]
        run.lag_records_mean[t:t + kept] = block.lag_records_mean[:kept]
        run.batch_duration[t:t + kept] = block.batch_duration[:kept]
        run.lag_seconds[t:t + kept] = block.lag_seconds[:kept]
        run.sawtooth[t:t + kept] = block.sawtooth[:kept]
        run.factor[t:t + kept] = running
        if progress:
            progress(max(0, min(kept, t + kept - lead)))
        t += kept
    run.lag_records, run.lag_seconds, run.factor, run.sawtooth, run.lag_records_mean, run.batch_duration = (
        a[lead:] for a in (run.lag_records, run.lag_seconds, run.factor, run.sawtooth, run.lag_records_mean,
                           run.batch_duration))
    return run

