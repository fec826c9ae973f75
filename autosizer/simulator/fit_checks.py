"""A fitted job model against the run it was fitted to: what `autosizer fit` and the sim-vs-real
benchmark print after the model, so a user sees on their own job whether the capacity and the
commit wait the simulator (and the policy) believe are the ones the job showed.

Pure: series already fetched in, lines of text out.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from autosizer.policies import Observation, PartitionStats
from autosizer.simulator.fit import (
    LIGHT_FILL,
    MIN_LIGHT_BATCHES,
    Fitted,
    Series,
    _points,
    _resample,
    batch_commits,
)
from autosizer.simulator.job import JobModel

# The commit check's bins of a batch's read fill: a batch that keeps up reads a sliver of its
# span, a saturated one all of it, so the ends hold most batches
FILL_BINS = (0.0, 0.1, 0.4, 0.7, 0.99, 1.0)
# The capacity check's seconds at a factor before its stretch behind counts: the batches after a
# restart still read the backlog the restart left
SETTLE_S = 15


def checks(series: Mapping[str, Series], start: float, fitted: Fitted) -> list[str]:
    """Both checks' lines, each table after a blank line; none where the run shows neither (it
    was never behind long enough, and its pipeline predates the batches' pairs)."""
    records = _resample(_points(series.get("records_total", ())), start, np.arange(fitted.factor.size), step=True)
    lines: list[str] = []
    for table in (capacity_check(fitted, records), commit_check(fitted.job, fitted.factor,
                                                                batch_commits(series, start, records=True))):
        if table:
            lines += ["", *table]
    setup = setup_line(series)
    return lines + [setup] if setup else lines


def setup_line(series: Mapping[str, Series]) -> str | None:
    """What a slot spends beyond its busiest thread's time on records (sorting and hashing its
    records, cutting lanes, starting threads): the commit latency holds it, and the model's
    batch charges it there, so the line says how much of the latency it is. None for a run
    whose pipeline does not export it (before session 68)."""
    values = np.array([v for _, v in _points(series.get("slot_setup", ()))])
    if not values.size:
        return None
    return (f"a slot's setup beyond its busiest thread's work, in the commit latency: median "
            f"{np.median(values):.4f} s, 90th percentile {np.percentile(values, 90):.4f} s ({values.size} scrapes)")


def capacity_check(fitted: Fitted, records: np.ndarray, settle_s: int = SETTLE_S) -> list[str]:
    """The capacity model (the policy's `Observation.capacity`, on the fitted job) against what
    the real job did while it was behind, per factor it ran at, counted by its commits: over the
    longest stretch of the factor (past its first `settle_s`) in which the lag never fell below
    a batch deadline, even right after a commit (so every batch there worked its whole
    deadline), the records committed from the stretch's first commit to its last over the time
    between them. (A 15 s rate of the same counter holds 4 or 5 commits of a 3.3 s cycle, 4
    most of the time: its median read run 79 at 1,338/s where the commits say 1,418/s.)
    `records`: the records committed by each second. No lines where no stretch had 3 commits."""
    job, factor, lag = fitted.job, fitted.factor, fitted.lag_seconds
    rows: list[str] = []
    # a stretch also begins where the layout changed (its partitions, each with its own backlog:
    # run e2's children drained 15,000 records after their adoption while their parents kept up)
    layouts = [(math.floor(at), job.in_layout(weights)[0] if job.layout_changes_s else job)
               for at, weights in job.layouts()]
    starts = sorted({0, *(np.flatnonzero(np.diff(factor)) + 1).tolist(),
                     *(a for a, _ in layouts if 0 < a < factor.size), factor.size})
    for a, b in itertools.pairwise(starts):
        model_job = [m for at, m in layouts if at <= a][-1]
        f, (first, last) = int(factor[a]), _longest(lag[a + settle_s:b] >= job.batch_seconds)
        stretch = records[a + settle_s + first:a + settle_s + last]
        commits = a + settle_s + first + np.flatnonzero(np.diff(stretch) > 0) + 1
        if commits.size < 3:
            continue
        measured = (records[commits[-1]] - records[commits[0]]) / (commits[-1] - commits[0])
        model = _capacity(model_job, f)
        rows.append(f"{f:6d} {last - first:15d} {commits.size:8d} {measured:11.0f} {model:8.0f} "
                    f"{model / measured:17.2f}")
    if not rows:
        return []
    return [f"capacity while behind, model against the commits ({len(rows)} stretch{'es' if len(rows) > 1 else ''})",
            f"{'factor':>6} {'seconds behind':>15} {'commits':>8} {'measured/s':>11} {'model/s':>8} "
            f"{'model / measured':>17}", *rows]


def commit_check(job: JobModel, factor: np.ndarray, commits: np.ndarray) -> list[str]:
    """The model's wait from a batch's trigger to its commit beyond its work
    (`JobModel.commit_wait`: a line in how full the batch's read was, through the commit latency
    and the fixed cost less its gap) against each real batch's (`fit.batch_commits`), by how
    full its read was: the line's ends come from smoothed gauges and means, and this checks
    them, and the line between, batch by batch. Where the fit took the commit latency from the
    light batches themselves (`fit._light_latency`) those together read 1 by construction, and a
    line says so: the fuller batches are what tests the model then; where it took the wait from
    every batch's records (`fit._per_record_wait`), all of them together do. `factor`: the
    run's, each second; `commits` as `batch_commits(records=True)` gives them (three columns:
    no records). No lines for a run without the pairs (a pipeline before session 63)."""
    if not commits.size:
        return []
    fill = commits[:, 1]
    model = _modelled_waits(job, factor, commits)
    slope, base = np.polyfit(fill, commits[:, 2], 1) if np.ptp(fill) > 0 else (0.0, commits[0, 2])
    lines = [f"commit latency per batch by its read's fill ({len(commits)} warm batches; measured line "
             f"{base:.2f} s empty, {base + slope:.2f} s full)",
             f"{'fill':>11} {'batches':>8} {'measured s':>11} {'model s':>8} {'model / measured':>17}"]
    light = int((fill < LIGHT_FILL).sum())
    counted = int(np.isfinite(commits[:, 3]).sum()) if commits.shape[1] > 3 else 0
    if job.commit_per_record_s is not None and counted:
        lines.insert(1, f"(the fit took the commit wait from the {counted} batches' records, {job.commit_latency_s:.3f} s "
                        f"+ {job.commit_per_record_s * 1e6:.1f} us a record: together they read 1 by construction, "
                        f"the bins test how it follows the load)")
    elif light >= MIN_LIGHT_BATCHES:
        lines.insert(1, f"(the fit took the commit latency from the {light} batches under {LIGHT_FILL:.0%} full: "
                        f"together they read 1 by construction, the fuller ones test the line)")
    bins = [(f"{lo:.2f}-{hi:.2f}", (fill >= lo) & ((fill < hi) if hi < 1 else (fill <= hi)))
            for lo, hi in itertools.pairwise(FILL_BINS)]
    for name, members in [*bins, ("all", np.ones(fill.size, dtype=bool))]:
        if members.any():
            measured, modelled = commits[members, 2].mean(), model[members].mean()
            lines.append(f"{name:>11} {int(members.sum()):8d} {measured:11.3f} {modelled:8.3f} "
                         f"{modelled / measured if measured > 0 else float('nan'):17.2f}")
    return lines


def steady_wait_ratio(job: JobModel, factor: np.ndarray, commits: np.ndarray,
                      seconds: np.ndarray) -> tuple[float, float, float] | None:
    """(measured, modelled, what the model's error alone does to a steady batch) for the real
    batches committed in `seconds` (a mask over the run's seconds). A job that keeps up with
    batches past its trigger's interval runs cycles of T = (wait + gap) / (1 - busy): each
    cycle's work is the input of the cycle before at the busy share, so the commit's wait and
    the gap come back magnified. At q2's 78% busy a 13 ms error in a 0.235 s wait made 60 ms of
    a 1.2 s batch, not 13 (session 83): the third figure is the replay's batch over the real
    one that the wait's error alone gives, (modelled + gap) / (measured + gap), at the same busy
    share. None without batches there (a pipeline before session 63)."""
    if not commits.size:
        return None
    at = np.clip(commits[:, 0].astype(int), 0, seconds.size - 1)
    inside = seconds[at] & (commits[:, 0] >= 0) & (commits[:, 0] < seconds.size)
    if not inside.any():
        return None
    measured = float(commits[inside, 2].mean())
    modelled = float(_modelled_waits(job, factor, commits[inside]).mean())
    gap = job.batch_gap_s or 0.0
    return measured, modelled, (modelled + gap) / (measured + gap)


def slowest_thread_ratio(job: JobModel, factor: np.ndarray, series: Mapping[str, Series], start: float,
                         seconds: np.ndarray) -> tuple[float, int] | None:
    """(median, scrapes) over `seconds` (a mask over the run's seconds) of each scraped batch's
    busiest thread's time on records (`slot_busiest`) over what its busiest share predicts:
    the batch's processed records x the busiest thread's share of the topic (partition weight x
    hot share at the factor) x the fitted time a record. Above 1 by how much a batch waits for
    its slowest thread beyond its share: service noise across many equally loaded threads (16
    keys at factor 4: one a thread), of which the model's noise, drawn once a tick for two
    queues a partition, holds a few tenths of a percent (run q4: 1.007, session 83). None for
    a run that did not save both series (before session 83) or had no batch there. A run whose
    partitions changed reads each batch against the layout it ran in (`_layouts`): after the
    Kinesis demo's merge one shard carries 73% of the input, where the first layout's busiest
    carried 51% (run v1 read 1.47 against the first layout, 1.05 against its own)."""
    busiest = _points(series.get("slot_busiest", ()))
    processed = dict(_points(series.get("batch_processed", ())))
    layouts = _layouts(job)
    ratios = []
    for t, worked in busiest:
        second = int(t - start)
        records = processed.get(t, 0.0)
        if not (0 <= second < seconds.size and seconds[second] and records > 0 and worked > 0):
            continue
        layout = [model for at, model in layouts if at <= t - start][-1]
        share = float((layout.weights * layout.hot_shares[int(factor[second])]).max())
        ratios.append(worked / (records * share * job.process_seconds))
    return (float(np.median(ratios)), len(ratios)) if ratios else None


def _layouts(job: JobModel) -> list[tuple[float, JobModel]]:
    """(from second, the job on the partitions it read from then) for each of the run's layouts
    (`JobModel.layouts`); the job alone where its partitions never changed."""
    if not job.layout_changes_s:
        return [(0.0, job)]
    return [(at, job.in_layout(weights)[0]) for at, weights in job.layouts()]


def _modelled_waits(job: JobModel, factor: np.ndarray, commits: np.ndarray) -> np.ndarray:
    """The model's wait for each real batch in `commits` (`JobModel.commit_wait` at the factor
    of its second, its fill and records, and the warm-up then), as `engine._batches` commits it."""
    seconds = np.clip(commits[:, 0].astype(int), 0, factor.size - 1)
    return np.array([job.commit_wait(int(factor[s]), commits[i, 1], _records(commits, i)) + job.warmup(commits[i, 0])
                     for i, s in enumerate(seconds)])


def _records(commits: np.ndarray, i: int) -> float | None:
    """Batch i's records read, None where the run did not export them."""
    if commits.shape[1] < 4 or not math.isfinite(commits[i, 3]):
        return None
    return float(commits[i, 3])


def _capacity(job: JobModel, factor: int) -> float:
    """What the policy reads as the job's capacity at `factor`: its tasks' rate, the busiest
    bucket's share and the batch's duty, for input in the layout's shares."""
    rows = {("t", p): (w, 0.0, w, 0.0) for p, w in enumerate(job.weights)}
    obs = Observation(0.0, factor, PartitionStats.from_rows(rows), saturated_rate=1 / job.process_seconds,
                      hot_shares=job.hot_share_table(), duty=job.duty(factor))
    return obs.capacity(factor, obs.task_rate)


def _longest(mask: np.ndarray) -> tuple[int, int]:
    """The longest run of True in `mask`, as [first, last) indices; (0, 0) with none."""
    best, begin = (0, 0), None
    for i, value in enumerate([*mask.tolist(), False]):
        if value and begin is None:
            begin = i
        elif not value and begin is not None:
            best, begin = max(best, (begin, i), key=lambda r: r[1] - r[0]), None
    return best
