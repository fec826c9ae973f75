"""Evaluate: turn collected samples into the `Observation` a policy reads, for the current layout.

The layout in Redis, not the metrics, says which partitions and virtual tasks exist: a series for a
task of an older generation is ignored, and a partition with no lag or input series makes the
observation partial (the guards then hold) rather than silently counting as idle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from autosizer.controller.collector import Labels, Samples
from autosizer.controller.queries import (
    hot_share_table,
    partition_of,
    scrape_problem,
)
from autosizer.elasticity import FACTORS, Layout, TopicPartition
from autosizer.elasticity.batch_cost import duty_at
from autosizer.policies.base import (
    DOWNTIME_UNMEASURED_S,
    Observation,
    PartitionStats,
    TaskStats,
    Watermarks,
)

REQUIRED = ("lag_records", "input_rate")  # without these a partition cannot be sized
PROBE_LATE_S = 5.0  # a lag probe this much older than the scrape is noted: it stalled


@dataclass
class Evaluation:
    observation: Observation
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # estimates made; worth logging, not holding on


class Evaluator:
    def evaluate(self, samples: Samples, layout: Layout, since_rescale_s: float = math.inf,
                 restart_downtime_s: float | None = None, at: float | None = None) -> Evaluation:
        """`restart_downtime_s`: the journal's last rescale's drain to first commit (None: none
        recorded); see `_restart_downtime` for what the policy reads. `at`: the tick's time, which
        the observation is stamped with (default: when the samples were collected); the metrics'
        age is counted from the collection all the same."""
        problems, notes = list(samples.problems), []
        partitions = layout.partitions()
        index = {tp: i for i, tp in enumerate(partitions)}
        columns = {name: _partition_column(samples, name, index)
                   for name in ("lag_records", "lag_seconds", "input_rate", "processed_rate")}
        age = _single(samples.series.get("age_seconds", ()))  # None: nothing scraped under the selector
        if not problems and (problem := scrape_problem(
                _single(samples.series.get("scrapes_in_window", ())), _single(samples.series.get("pipelines_any", ())),
                age is not None, samples.window, samples.selector)):
            problems.append(problem)
        if not problems:
            problems += _missing(columns, partitions, layout, samples)
        processed = columns["processed_rate"]
        processed[np.isnan(processed)] = 0.0  # no task processed anything there in the window
        seconds = columns["lag_seconds"]
        unknown = np.isnan(seconds)
        if unknown.any():
            pace = np.maximum(processed, columns["input_rate"])[unknown]
            lag = columns["lag_records"][unknown]
            # Nothing moving and records waiting: the age is unknown (NaN makes the guards hold).
            with np.errstate(divide="ignore", invalid="ignore"):
                seconds[unknown] = np.where(lag > 0, np.where(pace > 0, lag / pace, np.nan), 0.0)
            notes.append(f"lag_seconds estimated from lag and rate for {int(unknown.sum())} partition(s)")
        if age is None and not problems:
            problems.append("no scrape time of the pipeline's metrics: is Prometheus scraping it?")
        tasks = self._tasks(samples, layout, index)
        watermarks = _watermarks(samples, index)
        if watermarks is None:
            notes.append("no high watermark with its read time for every partition: the input is "
                         "the rate window's alone (a step shows a window late)")
        else:
            # The lag and input series are what the pipeline's probe last read: a probe stalled
            # behind a slow broker keeps exporting its last reading, which would read as no
            # input. Their age is the metrics' age too, so the guards hold on it.
            probed = max(0.0, samples.time - float(watermarks.times.min()))
            if age is not None and probed > age + PROBE_LATE_S:
                notes.append(f"the pipeline's lag probe last read the broker {probed:.0f}s ago "
                             f"(its metrics were scraped {age:.0f}s ago)")
            age = probed if age is None else max(age, probed)
        saturated, hot_shares, duties, stand_in = _capacity(samples, layout, index)
        if stand_in:
            notes.append(stand_in)
        ceiling = _single(samples.series.get("cpu_ceiling", ()))
        observation = Observation(
            time=samples.time if at is None else at, factor=layout.factor,
            partitions=PartitionStats(tuple(partitions), columns["lag_records"], seconds,
                                      columns["input_rate"], processed),
            tasks=tasks, since_rescale_s=since_rescale_s,
            restart_downtime_s=_restart_downtime(samples, restart_downtime_s),
            complete=not problems, age_s=0.0 if age is None else max(0.0, age),
            saturated_rate=saturated, hot_shares=hot_shares, watermarks=watermarks,
            duty=float(duties[FACTORS.index(layout.factor)]), duties=duties,
            cpu_ceiling=ceiling if ceiling is not None and ceiling > 0 else None,
        )
        return Evaluation(observation, problems, notes)

    def _tasks(self, samples: Samples, layout: Layout, index: dict[TopicPartition, int]) -> TaskStats:
        tasks = layout.virtual_tasks()
        row = {t.name: i for i, t in enumerate(tasks)}
        lag, rate, seconds, busy = (np.zeros(len(tasks)) for _ in range(4))
        for target, name in ((lag, "task_lag_records"), (rate, "task_processed_rate")):
            for labels, value in samples.series.get(name, ()):
                i = row.get(labels.get("task", ""))
                if i is not None and math.isfinite(value):
                    target[i] += value  # a task reading several partitions: summed over them
        for target, name in ((seconds, "task_process_seconds"), (busy, "task_busy")):
            for labels, value in samples.series.get(name, ()):
                i = row.get(labels.get("task", ""))
                if i is not None and math.isfinite(value):
                    target[i] = value
        # The pipeline counts a task's lag from its position to the high watermark, which includes
        # its siblings' records; its own share of them, for evenly spread keys, is 1/factor. A task
        # stuck behind its siblings (a hot key) still stands out.
        lag /= layout.factor
        first = [index[min(t.partitions)] for t in tasks]
        # busy is not clamped to 1: a batch's processing time lands in the window all at once, and
        # only the ratio of the two sums (processed / busy) is meaningful.
        return TaskStats(tuple(row), first, lag, rate, seconds, busy)


def _capacity(samples: Samples, layout: Layout, index: dict[TopicPartition, int]
              ) -> tuple[float | None, np.ndarray | None, np.ndarray, str | None]:
    """The pipeline's own capacity measurements: the median saturated rate of the layout's
    tasks, the busiest bucket's share per partition and factor, and the duty of a batch
    (deadline / (deadline + overhead)) at each factor in FACTORS, its read scaled to each
    (`elasticity.batch_cost`), with a note when the cost is a stand-in (`_batch_cost`). Absent
    series leave the older estimates in charge."""
    names = {t.name for t in layout.virtual_tasks()}
    rates = [v for labels, v in samples.series.get("task_saturated_rate", ())
             if labels.get("task") in names and math.isfinite(v) and v > 0]
    saturated = float(np.median(rates)) if rates else None
    hot = hot_share_table(samples.series.get("hot_share", ()), index)
    cost, stand_in = _batch_cost(samples)
    deadline = _single(samples.series.get("batch_deadline_seconds", ()))
    read = _single(samples.series.get("batch_read_seconds", ()))
    duties = np.array([duty_at(deadline, cost, read, layout.factor, f) for f in FACTORS])
    return saturated, hot, duties, stand_in


def _batch_cost(samples: Samples) -> tuple[float | None, str | None]:
    """A batch's fixed cost, and a note when the commit latency and the gap after it stand in
    for it. The pipeline measures the cost only from a saturated batch after a saturated one,
    which a job that keeps up never runs; every batch with records measures its commit latency,
    most of that cost (run 143: 0.149 of 0.166 s), and the rest is the gap after the commit,
    which the pipeline shows after any batch that ran past its trigger's interval: a fresh
    pipeline's first (runs k9-k19 showed it within their first second, 0.03-0.07 s). Read as no
    cost (duty 1), run 145's daemon read 388/s at factor 1 where the job did about 365/s; read as
    the latency alone, run k19's read 1% more than the job's."""
    cost = _single(samples.series.get("batch_overhead_seconds", ()))
    if cost is not None:
        return cost, None
    latency = _single(samples.series.get("commit_latency_seconds", ()))
    if latency is None or latency < 0:
        return None, None
    gap = _single(samples.series.get("batch_gap_seconds", ()))
    if gap is None or not gap >= 0:  # not shown yet (no batch ran past its interval): the latency alone
        return latency, f"a batch's fixed cost is not measured yet: its commit latency ({latency:.2f}s) stands in"
    return latency + gap, (f"a batch's fixed cost is not measured yet: its commit latency and the gap after "
                           f"it ({latency:.2f} + {gap:.2f}s) stand in")


def _partition_column(samples: Samples, name: str, index: dict[TopicPartition, int]) -> np.ndarray:
    """One series as a column over the layout's partitions, NaN where it has no value."""
    column = np.full(len(index), np.nan)
    for labels, value in samples.series.get(name, ()):
        i = index.get(partition_of(labels))
        if i is not None:
            column[i] = value
    return column


def _watermarks(samples: Samples, index: dict[TopicPartition, int]) -> Watermarks | None:
    """Each partition's high watermark and when it was read; None unless every partition has
    both (a sum over some partitions is not the input)."""
    offsets, times = (_partition_column(samples, name, index) for name in ("high_watermark", "high_watermark_time"))
    if not index or not np.isfinite(offsets).all() or not np.isfinite(times).all():
        return None
    return Watermarks(tuple(index), offsets, times)


def _restart_downtime(samples: Samples, journaled: float | None) -> float:
    """The stop a rescale costs, as the policy reads it: the pipeline's own measure of its last
    restart (drain to the next generation's first batch: the stop the input piles up in), else
    the journal's drain to first commit (a batch's work more), else a query restart assumed."""
    restarted = _single(samples.series.get("restart_seconds", ()))
    if restarted is not None and restarted > 0:
        return restarted
    return journaled if journaled else DOWNTIME_UNMEASURED_S


def _single(series: Iterable[tuple[Labels, float]]) -> float | None:
    values = [v for _, v in series if math.isfinite(v)]
    return max(values) if values else None


def _missing(columns: dict[str, np.ndarray], partitions: list[TopicPartition], layout: Layout,
             samples: Samples) -> list[str]:
    """Why a partition cannot be sized, each reason once. A partition that joined the layout (a
    re-shard's child, an expansion's new partition) has no series until the pipeline's probe has
    read it, and none for a rate until it read it twice: the tick holds and says so. Runs u3 and
    u4 held "is Prometheus scraping the pipeline's /metrics?" for a split's children 0.8 s before
    and 0.3 s after their first reading, while every other partition's series were there."""
    read = {partition_of(labels) for labels, _ in samples.series.get("high_watermark", ())}
    joined = set(layout.parents) | {(b.topic, b.partition) for b in layout.barriers}
    found, unread = [], {}
    for name in REQUIRED:
        missing = [partitions[i] for i in np.flatnonzero(np.isnan(columns[name]))]
        young = [tp for tp in missing if name == "input_rate" and tp in read]
        if young:  # one reading so far: a rate needs two (run u1's merge child, a tick after it joined)
            whose = "its watermark was" if len(young) == 1 else "their watermarks were"
            found.append(f"no input_rate for {_names(young)} yet: {whose} read once so far "
                         "(joined the layout: a re-shard or an expansion); the next tick reads it")
        # the others' series are there: Prometheus scrapes the pipeline, which has not read these yet
        new = tuple(tp for tp in missing if tp not in young and tp in joined and len(missing) < len(partitions))
        if new:
            unread.setdefault(new, []).append(name)
        rest = [tp for tp in missing if tp not in young and tp not in new]
        if rest:
            found.append(f"no {name} for {_names(rest)}: is Prometheus scraping the pipeline's /metrics?")
    for new, names in unread.items():
        it = "it" if len(new) == 1 else "them"
        found.append(f"no {' or '.join(names)} for {_names(list(new))} yet: {'it' if len(new) == 1 else 'they'} "
                     f"joined the layout (a re-shard or an expansion) and the pipeline's probe has not read {it} "
                     f"so far; the next tick reads {it} (if not, see the pipeline's log)")
    return found


def _names(partitions: list[TopicPartition]) -> str:
    shown = ", ".join(f"{t}[{p}]" for t, p in partitions[:4])
    return shown + (f" and {len(partitions) - 4} more" if len(partitions) > 4 else "")
