"""Fit: the job model of a real run, from the pipeline's own series in Prometheus.

The simulator is only worth trusting when it describes the job that really ran, so its parameters
are read back from what the pipeline measured, not guessed: one task's saturated rate (so the time
per record, framework cost included), the busiest bucket's share at every factor, each partition's
share of the input, a batch's deadline and fixed cost, and what a restart cost. The load itself is
the input rate the run saw. `fit_job` is pure (series in, `JobModel` out); `fetch` does the range
queries (`arrivals.read_arrivals` counts the records' own times, where the topic still has them);
`write_trace` writes a trace (TOML and the load as CSV) that `autosizer simulate --trace` replays.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from autosizer.controller import queries
from autosizer.controller.queries import DEFAULT_QUERIES, hot_share_table, partition_of
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import Workload

Labels = Mapping[str, str]
Series = list[tuple[Labels, list[tuple[float, float]]]]  # per series: labels, (time, value) points

FIT_QUERIES: dict[str, str] = {
    "input_rate": "max by (topic, partition) (rate(autosizer_pipeline_high_watermark{$selector}[$window]))",
    # the load itself: records that arrived in each second, from the watermark's own steps (a
    # rate over a window would replay a step smeared over the window, and that much late)
    "high_watermark": "max by (topic, partition) (autosizer_pipeline_high_watermark{$selector})",
    # when the pipeline's probe read each watermark: Prometheus stamps it up to a scrape later
    "high_watermark_time": "max by (topic, partition) (autosizer_pipeline_high_watermark_time_seconds{$selector})",
    # when Prometheus scraped each of those readings: a range query's points are its own steps,
    # a constant phase off the scrapes
    "high_watermark_scraped": ("max by (topic, partition) "
                               "(timestamp(autosizer_pipeline_high_watermark_time_seconds{$selector}))"),
    "saturated_rate": "quantile(0.5, autosizer_pipeline_task_saturated_rate{$selector})",
    "service_cv": "max(autosizer_pipeline_service_cv{$selector})",
    "hot_share": "max by (topic, partition, factor) (autosizer_pipeline_hot_share{$selector})",
    "deadline": "max(autosizer_pipeline_batch_deadline_seconds{$selector})",
    "overhead": "max(autosizer_pipeline_batch_overhead_seconds{$selector})",
    "read": "max(autosizer_pipeline_batch_read_seconds{$selector})",
    "commit_latency": "max(autosizer_pipeline_commit_latency_seconds{$selector})",
    "read_boundary": "max(autosizer_pipeline_read_boundary_seconds{$selector})",
    "batch_gap": "max(autosizer_pipeline_batch_gap_seconds{$selector})",
    # one warm batch's read fill and commit latency, a pair at each scrape: the line the model
    # takes between them, checked batch by batch (`batch_commits`)
    "batch_fill": "max(autosizer_pipeline_batch_fill{$selector})",
    "batch_latency": "max(autosizer_pipeline_batch_latency_seconds{$selector})",
    # and its records read, set with them (since session 83): what the wait grows with
    "batch_read_records": "max(autosizer_pipeline_batch_read_records{$selector})",
    # the slowest setup of a slot in the last batch, beyond its busiest thread's work: in the
    # commit latency, and shown beside it (`fit_checks.setup_line`)
    "slot_setup": ("max(autosizer_pipeline_slot_seconds{$selector}"
                   " - autosizer_pipeline_slot_busiest_seconds{$selector})"),
    # the last batch's busiest thread's time on records and the records its tasks processed:
    # how much longer its slowest thread worked than its busiest share predicts (`fit_checks`)
    "slot_busiest": "max(autosizer_pipeline_slot_busiest_seconds{$selector})",
    "batch_processed": "max(autosizer_pipeline_batch_records{$selector})",
    # the records committed so far: the capacity the job showed while behind (`fit_checks`)
    "records_total": "sum(autosizer_pipeline_records_in_total{$selector})",
    "restart": "max(autosizer_pipeline_restart_seconds{$selector})",
    "factor": "max(autosizer_pipeline_factor{$selector})",
    "lag_seconds": "max(autosizer_pipeline_lag_seconds{$selector})",
    # whether the window holds two scrapes, and whether the selector misses the pipelines there
    "scrapes_in_window": DEFAULT_QUERIES["scrapes_in_window"],
    "pipelines_any": DEFAULT_QUERIES["pipelines_any"],
    # over 15 s whatever the load's window: batches commit every few seconds, and a short window
    # holds none or two of them
    "processed_rate": "sum(rate(autosizer_pipeline_records_in_total{$selector}[15s]))",
    # the CPU a record costs and the cores the slots share: where a CPU-bound job stops gaining
    # (records counted by one series, as the CPU is: see DEFAULT_QUERIES["cpu_ceiling"])
    "cpu_per_record": ("sum(rate(autosizer_pipeline_cpu_seconds_total{$selector}[15s]))"
                       " / (sum(rate(autosizer_pipeline_record_seconds_count{$selector}[15s])) > 0)"),
    "cores": "max(autosizer_pipeline_cores{$selector})",
    # the records processed of each partition so far: which partitions an expansion's first batch
    # after its restart read (`JobModel.layout_barrier_passed`)
    "records_read": "sum by (topic, partition) (autosizer_pipeline_records_in_total{$selector})",
}


# The job settings that are a series' median over the run, where the run has one.
MEDIANS = {"read_boundary": "read_boundary_s", "batch_gap": "batch_gap_s", "deadline": "batch_seconds",
           "service_cv": "process_cv"}


# Of the batches the pipeline exported with their read's fill (`batch_commits`), those under this
# fill are light: their mean latency is the model's commit latency, with at least this many
LIGHT_FILL = 0.5
MIN_LIGHT_BATCHES = 10


# A series no query returns: the records that arrived in each second, counted from their own
# timestamps by a reader of the topic (`arrivals.read_arrivals`: `autosizer fit --bootstrap`,
# the sim-vs-real benchmark); the load, where present
ARRIVALS = "arrivals"
# how far the records counted by their times may stray from the watermark's rise over the run
# before the fit takes them for stamps of something else (events' own times) and keeps the marks
ARRIVALS_AGREE = 0.02
# A layout's share for a re-shard's new partition that took no input in it, only records before
# it (a child closed by a merge before it was read: run v7's shard 3 held 1,083 records when first
# read and took none after): a queue of its own for those records (`layout_waiting_weights`),
# next to no input after. Left out, as a partition with no share is, its records went with it.
HELD_ONLY_SHARE = 1e-6
# how far inside the run a partition's series may begin or end before the fit reads a layout
# change (a re-shard, an expansion) there: the pipeline exports every partition of its layout
# from its first probe, a second or two into a run
LAYOUT_SLACK_S = 5.0
# A query's first two batches measure no cycle (`agent._cycles_warm`), so a new query's first
# fixed cost shows 3 s or more after its factor does: one set within this of a factor change
# was measured at the factor before it (the last saturated batch before the drain)
CYCLE_AFTER_RESTART_S = 2.0


@dataclass(frozen=True, eq=False)
class Fitted:
    """A run read back: the job model, the load it saw, and its lag, factor and processed rate
    (1 s apart)."""

    job: JobModel
    load: Workload
    lag_seconds: np.ndarray
    factor: np.ndarray
    processed: np.ndarray
    load_source: str = ""  # where the load was counted from, and why there


def scrape_problem(series: Mapping[str, Series], window: str, selector: str) -> str | None:
    """Why the run's series cannot be read at this window or selector, before the fit says "no
    input rate series": a window that never held two scrapes of the pipeline, or a selector that
    matches none of the pipelines Prometheus scraped. None when neither (or the run did not
    fetch these two: a caller's own queries)."""
    def most(name: str) -> float | None:
        values = [v for _, points in series.get(name, ()) for _, v in points if math.isfinite(v)]
        return max(values) if values else None

    scrapes = most("scrapes_in_window")
    return queries.scrape_problem(scrapes, most("pipelines_any"), bool(scrapes), window, selector,
                                  ("--window", "--selector"))


def fit_job(series: Mapping[str, Series], base: JobModel | None = None) -> JobModel:
    """The job model these series describe; what they do not say keeps `base`'s value."""
    base = base or JobModel()
    partitions = sorted({partition_of(labels) for labels, _ in series.get("input_rate", ())} - {None})
    if not partitions:
        raise ValueError("no input rate series: is Prometheus scraping the pipeline's /metrics?")
    index = {p: i for i, p in enumerate(partitions)}
    settings: dict[str, Any] = {"partitions": len(partitions)}
    weights = np.zeros(len(partitions))
    for labels, points in series["input_rate"]:
        values = [v for _, v in points if math.isfinite(v)]
        if values:
            weights[index[partition_of(labels)]] = float(np.mean(values))  # type: ignore[index]
    if weights.sum() > 0:
        settings["partition_weights"] = tuple(float(w) for w in weights)
    rate = _median(series.get("saturated_rate", ()))
    if rate:
        settings["process_seconds"] = 1.0 / rate
    settings.update(_cpu(series, settings.get("process_seconds", base.process_seconds)))
    # the run's last usable reading of each series
    table = hot_share_table(((labels, next((v for _, v in reversed(points) if math.isfinite(v) and 0 < v <= 1),
                                           math.nan))
                             for labels, points in series.get("hot_share", ())), index)
    if table is not None and np.isfinite(table).all():
        settings["hot_share_table_measured"] = tuple(tuple(float(v) for v in row) for row in table)
        settings["hot_shares_known_at_start"] = _shares_known_at_start(series, index)
    settings.update(_overhead(series, len(partitions)))
    settings["overhead_known_at_start"] = _overhead_known_at_start(series)
    if settings["overhead_known_at_start"]:
        settings["overhead_shown_at_start_s"] = _points(series["overhead"])[0][1]
    commits = batch_commits(series, _first_sample(series), records=True)
    latency = _light_latency(commits)
    warmup = _latency_warmup(commits)
    if warmup is not None:
        latency, settings["commit_warmup_s"], settings["commit_warmup_tau_s"] = warmup
    latency = _median(series.get("commit_latency", ())) if latency is None else latency
    per_record = _per_record_wait(commits)
    for name, setting in MEDIANS.items():
        value = _median(series.get(name, ()))
        if value is not None:
            settings[setting] = value
    if latency is not None:
        settings["commit_latency_s"] = latency
        # no cost measured (`_overhead`): a batch pays its commit latency, and the gap after it
        settings.setdefault("batch_overhead_s", latency + settings.get("batch_gap_s", 0.0))
    # the wait from the records each batch read, warm-up and all; the stand-in cost above keeps
    # the light batches' mean, the wait the daemon read where no batch measured the cost
    if per_record is not None:
        (settings["commit_latency_s"], settings["commit_per_record_s"], settings["commit_warmup_s"],
         settings["commit_warmup_tau_s"]) = per_record
    if "batch_gap_s" in settings:  # a part of the fixed cost: the gap's batches are not the cost's
        settings["batch_gap_s"] = min(settings["batch_gap_s"], settings.get("batch_overhead_s", base.batch_overhead_s))
    restarts = _changes(series.get("restart", ()))
    if restarts:
        settings["restart_downtime_s"] = statistics.median(restarts)
        settings["restarts_measured_s"] = tuple(restarts)
    first = _points(series.get("factor", ()))
    if first:
        settings["start_factor"] = int(first[0][1])
    age = _metrics_age(series.get("high_watermark_time", ()), series.get("high_watermark_scraped", ()))
    if age is not None:
        settings["metrics_age_s"] = age
    _, gaps = _scrapes(series.get("high_watermark_time", ()), series.get("high_watermark_scraped", ()))
    if gaps:  # rate() averages the samples' span: the window less this
        settings["scrape_interval_s"] = float(statistics.median(gaps))
    return JobModel(**{**{f.name: getattr(base, f.name) for f in fields(base)}, **settings})


def _cpu(series: Mapping[str, Series], process_seconds: float) -> dict[str, float | int]:
    """The share of a record's time on a core (its CPU over its wall time) and the cores: the
    model then shares the cores among the tasks as the pipeline measured them."""
    cpu, cores = _median(series.get("cpu_per_record", ())), _median(series.get("cores", ()))
    if not cpu or not cores or cpu <= 0 or cores < 1:
        return {}
    return {"cpu_fraction": min(1.0, cpu / process_seconds), "cores": int(cores)}


def _shares_known_at_start(series: Mapping[str, Series], index: Mapping[Any, int]) -> tuple[bool, ...]:
    """Per partition: did the run's first sample already show its hot shares? The pipeline exports
    them once its batches have read MIN_SHARE_READ of the partition's records, so a run that
    begins with the pipeline may not have them yet (run 66, before small batches were summed,
    had none until its step; runs 72-80 had them from the start): the model is told, not left
    to guess."""
    first = _first_sample(series)
    known = [False] * len(index)
    for labels, points in series.get("hot_share", ()):
        i = index.get(partition_of(labels))
        seen = [t for t, v in points if math.isfinite(v) and 0 < v <= 1]
        if i is not None and seen and seen[0] <= first:
            known[i] = True
    return tuple(known)


def _first_sample(series: Mapping[str, Series]) -> float:
    """When the run's first sample was taken: the earliest input rate point (inf with none)."""
    return min((t for _, points in series.get("input_rate", ()) for t, _ in points[:1]), default=math.inf)


def _overhead_known_at_start(series: Mapping[str, Series]) -> bool:
    """Did the run's first sample already show a batch's fixed cost? The pipeline measures it
    only from a batch that left records (overran its deadline, or was cut at work by a drain),
    so the demo's runs learned it at their step or first rescale (35-38 s in runs 72-86, a
    second after the first drain in runs 88, 89 and 91) and run 87 not at all: until then the
    daemon reads the commit latency for it (duty 1 before session 49), and the model's must too."""
    first = _first_sample(series)
    return any(t <= first for t, v in _points(series.get("overhead", ()))[:1] if v >= 0)


def _metrics_age(read: Series, scraped: Series = ()) -> float | None:
    """How old the watermarks a tick reads are, on the median: from the probe's read to the
    scrape, plus half the scrape interval (a query gets the last scrape, from zero to one interval
    old). None without read times.

    The scrape is each reading's own stamp (`timestamp()`, `scraped`). A range query's point is
    stamped with its step instead, which lies a constant phase after the scrape (both a second
    apart); counted from there the phase was in the age twice: run 85's fit read 1.67 s where
    the daemon's own ticks were 0.6 s behind their scrapes on the median. Runs saved without the
    stamps keep that reading."""
    ages, gaps = _scrapes(read, scraped)
    if not ages or not gaps:
        return None
    return float(statistics.median(ages) + statistics.median(gaps) / 2)


def legacy_lag_probe_age(series: Mapping[str, Series]) -> float:
    """`JobModel.lag_probe_age_s` of a run whose pipeline predates the one-moment lag gauge
    (saved before session 48): the median from the probe's read to the scrape, from the scrape
    stamps only (steps add a phase); 0 without them. Today's pipeline needs none."""
    ages, _ = _scrapes(series.get("high_watermark_time", ()), series.get("high_watermark_scraped", ()))
    return float(statistics.median(ages)) if ages and series.get("high_watermark_scraped") else 0.0


def _scrapes(read: Series, scraped: Series) -> tuple[list[float], list[float]]:
    """Each scrape's age of the watermark reading it holds, and the gaps between scrapes."""
    ages, gaps = [], []
    for _, points in _restamped(read, scraped):  # one point a scrape (a step repeats the last)
        pairs = [(t, v) for t, v in points if math.isfinite(t) and math.isfinite(v)]
        ages += [t - v for t, v in pairs if t >= v]
        gaps += [b[0] - a[0] for a, b in zip(pairs, pairs[1:], strict=False) if b[0] > a[0]]
    return ages, gaps


def _overhead(series: Mapping[str, Series], partitions: int) -> dict[str, float | bool]:
    """A batch's fixed cost as base + per task: a least-squares line through the overhead samples
    against the task count when each was taken (more tasks: more to launch, to commit and to
    read). With one factor in the run (or a line that falls), the median, of which the part the
    pipeline measured as its batches' growing read (`batch_read_seconds`, which scales with the
    factor: `elasticity.batch_cost`) is the part per task.

    The pipeline measures it only from a saturated batch after a saturated one; a run that never
    fell two batches behind shows none, and the fit then takes the commit latency, which every
    batch with records measures and which is most of it (run 143: 0.149 of 0.166 s), and the gap
    after a commit where a batch ran past its trigger's interval (`batch_gap_seconds`), not the
    model's default of 0.6 s, three to four times this job's: run 145 held factor 1 at 75%,
    and its replay's batches took 1.28 s against the real 0.79 s (lag integral 1.35x).

    Each measurement counts once, at the factor it was measured at: the gauge holds its last
    value until a batch sets another, and counted every second it is held, the last one before a
    scale-up that then kept up outweighed the rest and was taken for the new factor's (run n7:
    0.269 s, set by factor 1's last batch, held 190 s at factor 8, where factor 1's cycles had
    cost 0.30-0.46 s; the fit gave factor 1 0.18 s). Since session 81 every warm batch moves the
    gauge between saturated cycles, at the cycles' factor (the start-up's warm-up no longer held
    all run, `Admission.overhead_s`): a run that kept up at that factor shows a value a batch.
    Since session 82 a factor no cycle measured shows its own cost, built from its batches' parts
    there, where it showed the cycles' factor's, moved: the line through them had too little per
    task (run p4: 0.9 ms a task, its replay's batches at factor 4 7% short)."""
    samples = _set_times(series.get("overhead", ()))
    if not samples:
        return {}
    read = [(t, v) for t, v in _points(series.get("read", ())) if v > 0]  # the daemon scaled it
    shown = bool(read)
    factors = _points(series.get("factor", ()))
    times = np.array([t for t, _ in factors])
    # the rescales before the pipeline first showed it: its reads at one factor could not tell
    changes = [t for (_, a), (t, b) in zip(factors, factors[1:], strict=False) if a != b]
    after = sum(1 for t in changes if t <= read[0][0]) if shown else 0

    def tasks_at(t: float) -> int:
        return partitions * factors[max(0, int(np.searchsorted(times, t, side="right")) - 1)][1]

    tasks = [tasks_at(t - CYCLE_AFTER_RESTART_S) for t, v in samples if factors and v >= 0]
    values = [v for _, v in samples if factors and v >= 0]
    if len(set(tasks)) >= 2:
        slope, base = np.polyfit(np.array(tasks, dtype=np.float64), np.array(values), 1)
        if slope > 0 and base >= 0:
            return {"batch_overhead_s": float(base), "batch_overhead_per_task_s": float(slope),
                    "read_growth_shown": shown, "read_growth_after": after}
    overhead = float(statistics.median(v for _, v in samples if v >= 0))
    per_task = [v / tasks_at(t) for t, v in read] if factors else []
    if per_task and tasks:
        running = float(statistics.median(tasks))
        growing = min(overhead, float(statistics.median(per_task)) * running)
        return {"batch_overhead_s": overhead - growing, "batch_overhead_per_task_s": growing / running,
                "read_growth_shown": shown, "read_growth_after": after}
    return {"batch_overhead_s": overhead}


def fitted_run(series: Mapping[str, Series], start: float, end: float,
               base: JobModel | None = None) -> Fitted:
    """The model, and the run's load, worst lag and factor resampled to 1 s over [start, end].
    The load is the records' own arrivals where a reader of the topic counted them (`ARRIVALS`),
    else the watermark's steps as the probe read them, else (older runs) its rate."""
    seconds = np.arange(0, int(end - start) + 1, dtype=np.float64)
    loads, source, marks = _partition_loads(series, start, seconds)
    load = sum(loads.values()) if loads else np.zeros(seconds.size)
    job = fit_job(series, base)
    partitions = sorted({partition_of(labels) for labels, _ in series.get("input_rate", ())} - {None})
    # a layout's shares from what the pipeline counted under each of its partitions (since
    # session 58 a child not adopted yet counts under its parent, whose tasks it waits for)
    job = replace(job, **_layout_changes(series, start, end, marks or loads, partitions))
    return Fitted(job, Workload("recorded", np.maximum(load, 0.0)),
                  _resample(_points(series.get("lag_seconds", ())), start, seconds),
                  np.rint(_resample(_points(series.get("factor", ())), start, seconds, step=True)).astype(np.int32),
                  _resample(_points(series.get("processed_rate", ())), start, seconds), source)


def _partition_loads(series: Mapping[str, Series], start: float,
                     seconds: np.ndarray) -> tuple[dict[Any, np.ndarray], str, dict[Any, np.ndarray] | None]:
    """Per partition, the records that arrived in each second, where they were counted from, and
    the watermark's rise each second (None without it)."""
    marks: dict[Any, np.ndarray] | None = None
    spans: dict[Any, tuple[float, float]] = {}
    if series.get("high_watermark"):
        marks = {}
        restamped = _restamped(series["high_watermark"], series.get("high_watermark_time", ()))
        for labels, points in restamped:
            p = partition_of(labels)
            rise = np.diff(_resample(points, start, np.append(seconds, seconds[-1] + 1), hold_first=True))
            marks[p] = marks.get(p, 0.0) + rise
        spans = _spans(restamped)
    if series.get(ARRIVALS):
        arrived = _arrivals(series[ARRIVALS], start, seconds.size)
        if marks is None:
            return arrived, "the records' own times", None
        # A shard that joined mid-run (a re-shard) shows its first reading with its records until
        # then already counted, which the rise leaves out: the shipped Kinesis demo's children
        # held 515 of the 14,694 records before their first reading, 3.6%. Since session 58 the
        # pipeline counts a child under its parent until it joins, in the parent's rise; before,
        # nowhere: the records' times agree with either, and with anything between (run u2's
        # parent stopped counting its children at its last reading, a second before theirs
        # began: the rise was 14,391 between 13,680 and 14,683, and the fit took the watermark's
        # reads for the load until session 59).
        first = min((a for a, _ in spans.values()), default=start)
        total = sum(float(load.sum()) for load in arrived.values())
        counted = total - sum(float(arrived[p][:max(0, math.ceil(a - start))].sum())
                              for p, (a, _) in spans.items() if p in arrived and a > first + LAYOUT_SLACK_S)
        rose = sum(float(m.sum()) for m in marks.values())
        slack = max(ARRIVALS_AGREE * rose, 20)
        if min(counted, total) - slack <= rose <= max(counted, total) + slack:
            return arrived, "the records' own times", marks
        return marks, (f"the watermark's reads: the records' times count {counted:.0f} records in "
                       f"the run where the watermark rose {rose:.0f} (a producer that stamps its "
                       f"events' own times?)"), marks
    if marks is not None:
        return marks, "the watermark's reads", marks
    loads: dict[Any, np.ndarray] = {}  # series saved before the watermark was fetched
    for labels, points in series.get("input_rate", ()):
        p = partition_of(labels)
        loads[p] = loads.get(p, 0.0) + _resample(points, start, seconds)
    return loads, "the input rate over its window", None


def _arrivals(series: Series, start: float, size: int) -> dict[Any, np.ndarray]:
    """Per partition, records that arrived in each second [start + s, start + s + 1), from counts
    a reader of the topic placed at each second's start: the records' own timestamps, so a step
    lands in the second it happened, not smeared between two scrapes of the watermark."""
    loads: dict[Any, np.ndarray] = {}
    for labels, points in series:
        load = loads.setdefault(partition_of(labels), np.zeros(size))
        for t, count in points:
            s = round(t - start)
            if 0 <= s < size and math.isfinite(count):
                load[s] += count
    return loads


def _spans(series: Series, start: float = -math.inf, end: float = math.inf) -> dict[Any, tuple[float, float]]:
    """Per partition, its series' first and last finite point in [start, end]: when the
    pipeline began and stopped reading it."""
    spans: dict[Any, tuple[float, float]] = {}
    for labels, points in series:
        times = [t for t, v in points if math.isfinite(v) and start <= t <= end]
        if times:
            p = partition_of(labels)
            a, b = spans.get(p, (math.inf, -math.inf))
            spans[p] = (min(a, times[0]), max(b, times[-1]))
    return spans


def _layout_changes(series: Mapping[str, Series], start: float, end: float, loads: Mapping[Any, np.ndarray],
                    partitions: Sequence[Any]) -> dict[str, Any]:
    """`JobModel.layout_changes_s` and `layout_weights` where the partitions the pipeline read
    changed during the run (a Kinesis re-shard, an adopted expansion): a partition's series
    begins or ends more than LAYOUT_SLACK_S inside the run's (edges closer than that are one
    change, at the last of them). Each layout holds the partitions whose series cover its
    middle, weighted by what `loads` counted under each over it (the watermarks' rise, where
    read: a child not adopted yet counts under its parent since session 58; a parent read to its
    end after a split gets none, and leaves); the first is `partition_weights`. Neighbours whose
    shares fall on the same partitions are one layout, with the first one's shares (run l2's
    fit, over the joined stretch instead, moved its replay's peak from 0.91 to 0.83). None where
    every partition ran the whole run."""
    # when the pipeline's probe first and last read each partition (the range query's steps show
    # a reading up to a step after its scrape: run l2's children first read at 123.97 s showed at
    # 125.39 s, after the real daemon's 125 s tick had read them)
    read = (_restamped(series["high_watermark"], series.get("high_watermark_time", ()))
            if series.get("high_watermark") else series.get("input_rate", ()))
    spans = {p: span for p, span in _spans(read, start, end).items() if p in partitions}
    if not spans:
        return {}
    first, last = min(a for a, _ in spans.values()), max(b for _, b in spans.values())
    edges = sorted({a for a, _ in spans.values() if a > first + LAYOUT_SLACK_S}
                   | {b for _, b in spans.values() if b < last - LAYOUT_SLACK_S})
    # one change's edges together, at its last: a split's parent leaves when read to its end and
    # its children join at the next probe, a second or two apart (the Kinesis demo: 48.2, 49.2 s)
    edges = [e for e, after in zip(edges, [*edges[1:], math.inf], strict=False) if after > e + LAYOUT_SLACK_S]
    if not edges:
        return {}
    size = next(iter(loads.values())).size if loads else 0
    arrived = _arrivals(series[ARRIVALS], start, size) if series.get(ARRIVALS) and size else {}
    layouts: list[tuple[float, tuple[float, ...]]] = []
    for a, b in zip([start, *edges], [*edges, max(last, start + size)], strict=True):
        middle = (a + b) / 2
        members = [p for p in partitions if p in spans and spans[p][0] <= middle <= spans[p][1]]
        lo, hi = max(0, math.ceil(a - start)), max(0, math.ceil(b - start))
        counts = {p: float(loads[p][lo:hi].sum()) if p in loads else 0.0 for p in members}
        if not sum(counts.values()) > 0:  # no input in it: its partitions alike
            counts = dict.fromkeys(members, 1.0)
        if layouts:  # a new partition that took records only before it (closed before it was read)
            was = {p for p, w in zip(partitions, layouts[-1][1], strict=True) if w > 0}
            held = [p for p in members if not counts[p] > 0 and p not in was and p in arrived and arrived[p][:lo].any()]
            counts.update({p: HELD_ONLY_SHARE * sum(counts.values()) for p in held})
        weights = tuple(counts.get(p, 0.0) / sum(counts.values()) for p in partitions)
        if not layouts or [w > 0 for w in layouts[-1][1]] != [w > 0 for w in weights]:
            layouts.append((a - start, weights))
    if len(layouts) < 2:
        return {}
    changes = {"partition_weights": layouts[0][1], "layout_changes_s": tuple(float(a) for a, _ in layouts[1:]),
               "layout_weights": tuple(w for _, w in layouts[1:])}
    timings = _timings(series, read, start, layouts, partitions, loads, arrived)
    if any(wait or restarts for wait, restarts, _, _ in timings):
        changes["layout_waits_s"] = tuple(wait for wait, _, _, _ in timings)
        changes["layout_restarts"] = tuple(restarts for _, restarts, _, _ in timings)
    if any(closed for _, _, closed, _ in timings):
        changes["layout_closed_s"] = tuple(closed for _, _, closed, _ in timings)
    if any(any(waiting) for _, _, _, waiting in timings):
        changes["layout_waiting_weights"] = tuple(waiting for _, _, _, waiting in timings)
    passed = tuple(_passed_at_restart(series.get("records_read", ()), start + at, before, after, partitions)
                   if restarts else (False,) * len(partitions)
                   for ((_, before), (at, after)), (_, restarts, _, _) in zip(itertools.pairwise(layouts), timings,
                                                                             strict=True))
    if any(any(row) for row in passed):
        changes["layout_barrier_passed"] = passed
    return changes


def _passed_at_restart(counted: Series, at: float, before: Sequence[float], after: Sequence[float],
                       partitions: Sequence[Any]) -> tuple[bool, ...]:
    """Per partition, whether the first batch after an expansion's restart read it (a new one):
    its first record was counted no later than the kept partitions' first after `at` (the
    probe's first reading of the new layout, after the restart). Where its parent had not passed
    the barrier, that batch left it out, and its records showed a batch later (runs e6 and e7:
    3 s; e11's restart held one new partition of four). Without the series (runs saved before
    session 61), not known: false."""
    new = {p for p, b, a in zip(partitions, before, after, strict=True) if a > 0 and not b > 0}
    kept = {p for p, b in zip(partitions, before, strict=True) if b > 0}

    def totals(members: set[Any]) -> dict[float, float]:  # a range query's steps line up
        found: dict[float, float] = {}
        for labels, points in counted:
            if partition_of(labels) in members:
                for t, v in points:
                    if math.isfinite(v):
                        found[t] = found.get(t, 0.0) + v
        return found

    kept_since = sorted((t, v) for t, v in totals(kept).items() if t >= at)
    rose = next((t for t, v in kept_since if v > kept_since[0][1]), math.inf) if kept_since else -math.inf
    return tuple(p in new and min((t for t, v in totals({p}).items() if v > 0), default=math.inf) <= rose
                 for p in partitions)


def _timings(series: Mapping[str, Series], read: Series, start: float,
             layouts: Sequence[tuple[float, tuple[float, ...]]], partitions: Sequence[Any],
             loads: Mapping[Any, np.ndarray],
             arrived: Mapping[Any, np.ndarray]) -> list[tuple[float, bool, float, tuple[float, ...]]]:
    """Per layout change after the first, (wait, restarts, closed, waiting). A growth (every partition
    keeps a share: a Kafka expansion): how long its new partitions took records before the
    pipeline read them, and whether the pipeline restarted within LAYOUT_SLACK_S of it (the
    actuator's migration: run e1's restart gauge was set 2 s after its children's first
    reading). A re-shard (partitions retired for others): when the new ones took their first
    record, which is when the retired ones closed (`JobModel.layout_closed_s`). Either from the
    new partitions' first record's own time, else from what each held at its first reading,
    `loads`' shares walked back from the change; `waiting`: each new partition's share of the
    input from then to the change (`JobModel.layout_waiting_weights`), from the records' times.
    (0, False, 0, zeros) for any other change."""
    # what each partition held at its first reading (`read`: the watermarks at the probe's times;
    # a run without them has rates there, which hold no count)
    levels = ({partition_of(labels): next((v for _, v in _points([(labels, points)])), 0.0) for labels, points in read}
              if series.get("high_watermark") else {})
    restarts = [t - start for t, _ in _set_times(series.get("restart", ()))]
    total = sum(loads.values()) if loads else np.zeros(0)
    found = []
    for (_, before), (at, after) in itertools.pairwise(layouts):
        new = [p for p, b, a in zip(partitions, before, after, strict=True) if a > 0 and not b > 0]
        none = (0.0,) * len(partitions)
        if not new:
            found.append((0.0, False, 0.0, none))
            continue
        firsts = [int(np.flatnonzero(arrived[p])[0]) for p in new if p in arrived and arrived[p].any()]
        if firsts:
            wait = max(0.0, at - min(firsts))
        else:  # walk back from the change until the new partitions' shares add up to what they held
            share = sum(after[partitions.index(p)] for p in new) / sum(after)
            held = sum(levels.get(p, 0.0) for p in new)
            taken = np.cumsum(share * total[:max(0, math.ceil(at))][::-1])
            wait = float(np.searchsorted(taken, held)) if held > 0 and taken.size else 0.0
        if any(b > 0 and not a > 0 for b, a in zip(before, after, strict=True)):  # a re-shard
            closed = float(min(at, max(0.0, at - wait))) if wait else 0.0
            waiting = _waiting_shares(arrived, closed, at, new, partitions) if closed else none
            found.append((0.0, False, closed, waiting))
        else:
            found.append((float(wait), any(abs(t - at) <= LAYOUT_SLACK_S for t in restarts), 0.0, none))
    return found


def _waiting_shares(arrived: Mapping[Any, np.ndarray], closed: float, at: float, new: Sequence[Any],
                    partitions: Sequence[Any]) -> tuple[float, ...]:
    """Each of a re-shard's `new` partitions' share of the topic's input over [closed, at), the
    records it took while it waited unread, counted by their own times. All zero where a reader
    did not count them (the layout's shares stand in: a closing walked back from what the
    children held at their first reading already takes their share after for the one before) or
    the span holds no input."""
    lo, hi = max(0, math.ceil(closed)), max(0, math.ceil(at))
    input_ = float(sum(a[lo:hi].sum() for a in arrived.values()))
    if not (input_ > 0 and all(p in arrived for p in new)):
        return (0.0,) * len(partitions)
    came = {p: float(arrived[p][lo:hi].sum()) for p in new}
    return tuple(min(1.0, came[p] / input_) if p in came else 0.0 for p in partitions)


def _restamped(series: Series, stamps: Series) -> Series:
    """Each point placed at the time `stamps` holds for its partition at the same step, once per
    time: the watermarks at the times the pipeline's probe read them (a gauge holds a reading
    until the next scrape, so a step otherwise replays up to a scrape interval late), and those
    read times at their scrapes (`_metrics_age`). A partition without stamps keeps the steps."""
    times = {partition_of(labels): dict(points) for labels, points in stamps}
    placed: Series = []
    for labels, points in series:
        when = times.get(partition_of(labels), {})
        moved = sorted({(when[t], v) for t, v in points
                        if math.isfinite(when.get(t, math.nan)) and math.isfinite(v)})
        placed.append((labels, moved if len(moved) >= 2 else points))
    return placed


def fetch(url: str, start: float, end: float, selector: str = "", window: str = "10s",
          step_s: float = 1.0, queries: Mapping[str, str] = FIT_QUERIES,
          timeout_s: float = 120.0, progress: bool | None = None) -> dict[str, Series]:
    """Range queries (FIT_QUERIES unless told) over [start, end] (epoch seconds), each in as many
    pieces as Prometheus' per-query limit needs (`range_series`); a query's time limit is
    Prometheus' own default, two minutes. A day's run is about 230 queries: a bar counts them on
    a terminal (`progress` None), or always (True), or never (False)."""
    from string import Template

    from tqdm import tqdm

    from autosizer.controller.collector import range_pieces, range_series

    found: dict[str, Series] = {}
    total = len(queries) * range_pieces(start, end, step_s)
    with tqdm(total=total, unit="query", desc="reading Prometheus", leave=False,
              disable=None if progress is None else not progress) as bar:
        for name, query in queries.items():
            text = Template(query).safe_substitute(selector=selector, window=window)
            try:
                found[name] = [(dict(labels), points) for labels, points in
                               range_series(url, text, start, end, step_s, timeout_s, lambda: bar.update(1))]
            except ValueError as exc:
                raise ValueError(f"Prometheus range query {name}: {exc}") from None
    return found


def write_trace(fitted: Fitted, path: str | Path, description: str = "fitted from a real run") -> Path:
    """A trace file (and the load as `<name>.csv` beside it) that `simulate --trace` replays."""
    path = Path(path)
    csv_path = path.with_suffix(".csv")
    csv_path.write_text("time,rate\n" + "".join(f"{t},{r:.3f}\n" for t, r in enumerate(fitted.load.rate)))
    job = fitted.job
    lines = [f"description = {_toml(description)}", "", "[workload]", 'kind = "csv"',
             f"path = {_toml(csv_path.name)}", "", "[job]"]
    defaults = JobModel()
    for f in fields(job):
        value = getattr(job, f.name)
        if f.name != "skew" and value != getattr(defaults, f.name):
            lines.append(f"{f.name} = {_toml(value)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value)


def batch_commits(series: Mapping[str, Series], start: float, records: bool = False) -> np.ndarray:
    """(batches, 3): each warm batch's (second of the run, read fill, commit latency) as the
    pipeline exported them together (`autosizer_pipeline_batch_fill`, `..._batch_latency_seconds`),
    once per batch: a range query repeats a gauge at every step until the next batch sets it,
    and two batches never measure the same pair. Empty for a run saved before session 63.
    With `records`, (batches, 4): and the records it read (`..._batch_read_records`), NaN for a run
    saved before session 83."""
    latency = dict(_points(series.get("batch_latency", ())))
    read = dict(_points(series.get("batch_read_records", ())))
    rows: list[tuple[float, float, float, float]] = []
    for t, fill in _points(series.get("batch_fill", ())):
        if t in latency and (not rows or (fill, latency[t]) != rows[-1][1:3]):
            rows.append((t - start, fill, latency[t], read.get(t, math.nan)))
    found = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return found if records else found[:, :3]


def _light_latency(commits: np.ndarray) -> float | None:
    """`JobModel.commit_latency_s` from the run's batches themselves: the mean commit latency of
    those that read under LIGHT_FILL of their span (the line's empty end; a full read pays the
    fixed cost less its gap), where the run has MIN_LIGHT_BATCHES of them. A record's wait is
    the mean, and the smoothed gauge's median sits below it: run r8's Kinesis batches waited
    0.297 s on the mean where the gauge's median read 0.275 s (a few batches wait 0.4-0.8 s)."""
    light = commits[commits[:, 1] < LIGHT_FILL, 2] if commits.size else commits
    return float(light.mean()) if light.size >= MIN_LIGHT_BATCHES else None


# The e-folding times a fresh pipeline's warm-up is tried at (`_latency_warmup`), seconds
WARMUP_TAUS = (5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0)


def _latency_warmup(commits: np.ndarray) -> tuple[float, float, float] | None:
    """(steady latency, extra at the run's second 0, e-folding seconds) of the light batches'
    commit latencies over the run (`commits` timed from its first sample): a fresh pipeline's
    batches wait longer while its JVM and Python workers warm up (the demo's: 0.19-0.30 s in
    their first 10 s, 0.14-0.17 s after a minute; runs k8b-k15), which one mean leaves in every
    batch. Least squares through L + W exp(-t / tau) at each of WARMUP_TAUS, the best fit kept;
    the two coefficients keep the light batches' mean. None where fewer than MIN_LIGHT_BATCHES
    batches ran in the run or none fades (W <= 0: a pipeline that had warmed up before)."""
    light = commits[(commits[:, 1] < LIGHT_FILL) & (commits[:, 0] >= 0)] if commits.size else commits
    if len(light) < MIN_LIGHT_BATCHES:
        return None
    found = _fading(light[:, 0], light[:, 2], ())
    return None if found is None else (float(found[0][0]), float(found[0][-1]), found[1])


def _fading(t: np.ndarray, y: np.ndarray, columns: Sequence[np.ndarray]) -> tuple[np.ndarray, float] | None:
    """(coefficients, e-folding seconds) of the least-squares line through y at times t of a
    constant, `columns` and a warm-up W exp(-t / tau), at each of WARMUP_TAUS, the best kept of
    those where every coefficient is 0 or more and W above 0 (it fades); None where none is."""
    best: tuple[float, np.ndarray, float] | None = None
    for tau in WARMUP_TAUS:
        design = np.column_stack([np.ones_like(t), *columns, np.exp(-t / tau)])
        coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
        error = float(np.sum((design @ coefficients - y) ** 2))
        if (coefficients >= 0).all() and coefficients[-1] > 0 and (best is None or error < best[0]):
            best = (error, coefficients, tau)
    return None if best is None else best[1:]


# A slope in the records needs batches of different sizes: the fullest tenth at least this many
# times the lightest tenth's records (the demo's: 100 a batch after its step, 1,400 in it)
RECORDS_SPREAD = 2.0


def _per_record_wait(commits: np.ndarray) -> tuple[float, float, float, float] | None:
    """(commit latency of an empty read, seconds more a record read, extra at the run's second
    0, its e-folding seconds): least squares through L + k records + W exp(-t / tau) over
    every warm batch that exported its records (`batch_commits(records=True)`), each of
    WARMUP_TAUS tried, the best kept (W = 0 where none fades). The wait grows with what a
    batch read, not with its fill: the demo's read 0.02-0.08 s longer in its step's high phase
    than after it at the same factor, and in its 10 s bursts at factor 4, with no restart, up
    to 0.04 s longer than between them (session 83, run b1: 26 us a record; the step's q3: 9 us).
    None with fewer than MIN_LIGHT_BATCHES such batches, sizes too alike to tell a slope
    (RECORDS_SPREAD), or no line that rises."""
    rows = commits[(commits[:, 0] >= 0) & np.isfinite(commits[:, 3])] if commits.size else commits.reshape(0, 4)
    if len(rows) < MIN_LIGHT_BATCHES:
        return None
    t, records, y = rows[:, 0], rows[:, 3], rows[:, 2]
    low, high = np.percentile(records, [10, 90])
    if high < RECORDS_SPREAD * max(low, 1.0):
        return None
    found = _fading(t, y, (records,))
    if found is not None and found[0][1] > 0:
        (base, slope, extra), tau = found
        return float(base), float(slope), float(extra), tau
    (base, slope), *_ = np.linalg.lstsq(np.column_stack([np.ones_like(t), records]), y, rcond=None)
    return (float(base), float(slope), 0.0, WARMUP_TAUS[0]) if base >= 0 and slope > 0 else None


def _points(series: Series | Sequence[Any]) -> list[tuple[float, float]]:
    """The finite points of every series, merged in time order."""
    return sorted((t, v) for _, points in series for t, v in points if math.isfinite(v))


def _changes(series: Series | Sequence[Any]) -> list[float]:
    """A gauge's values, each once when it was set (a positive value that differs from the one
    before): the restart gauge holds its last value until the next rescale, so a median over
    samples would weigh each restart by how long the run went on after it."""
    return [v for _, v in _set_times(series)]


def _set_times(series: Series | Sequence[Any]) -> list[tuple[float, float]]:
    """(first seen, value) each time a gauge was set to a new positive value."""
    found: list[tuple[float, float]] = []
    for t, v in _points(series):
        if v > 0 and (not found or v != found[-1][1]):
            found.append((t, v))
    return found


def _median(series: Series | Sequence[Any]) -> float | None:
    values = [v for _, v in _points(series) if v > 0]
    return statistics.median(values) if values else None


def _resample(points: list[tuple[float, float]], start: float, seconds: np.ndarray,
              step: bool = False, hold_first: bool = False) -> np.ndarray:
    """Values at start + seconds: linear between points (or the last value, for a step series),
    0 where the run had no sample yet (the first value, with `hold_first`: a counter)."""
    if not points:
        return np.zeros(seconds.size)
    times = np.array([t - start for t, _ in points])
    values = np.array([v for _, v in points])
    if step:
        at = np.searchsorted(times, seconds, side="right") - 1
        return np.where(at >= 0, values[np.maximum(at, 0)], values[0])
    return np.interp(seconds, times, values, left=values[0] if hold_first else 0.0, right=values[-1])
