"""The PromQL the collector runs, by the column of the observation it fills.

`$selector` becomes the configured label matchers and `$window` the rate window. The defaults read
the pipeline agent's own series (`autosizer.pipeline.metrics`); the README shows the kafka-exporter
and Burrow equivalents for the partition-level queries.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from string import Template

import numpy as np

from autosizer.elasticity import FACTORS, TopicPartition

DEFAULT_QUERIES: dict[str, str] = {
    # per partition (labels topic, partition)
    "lag_records": "max by (topic, partition) (autosizer_pipeline_lag_records{$selector})",
    "lag_seconds": "max by (topic, partition) (autosizer_pipeline_lag_seconds{$selector})",
    # the watermark's growth over the time between the probe's reads a window apart: exact.
    # `rate()` takes each reading at its scrape, up to a scrape after the probe read it, and
    # read the demo's steady input 7-8% astray (sd) at a 10 s window (session 51); it stays for
    # a partition without read times (days kept before them, an exporter that drops them). A
    # partition younger than the window (a shard that joined: a re-shard, an expansion) has no
    # reading a window back: its growth since its oldest reading in the window, over the time
    # between (both only grow), is as exact; `rate()` read it at 25-60% (run u1's children,
    # a 10 s window: 91/s of 150/s 3 s after they joined). `rate()` reads only a partition
    # still exported: a range keeps a series that left (a retired shard) a window long, and
    # the demo's terminal read 205-223/s of 150/s for 2 s after each re-shard (run r3)
    "input_rate": ("max by (topic, partition) (clamp_min("
                   "(autosizer_pipeline_high_watermark{$selector}"
                   " - autosizer_pipeline_high_watermark{$selector} offset $window)"
                   " / (autosizer_pipeline_high_watermark_time_seconds{$selector}"
                   " - autosizer_pipeline_high_watermark_time_seconds{$selector} offset $window > 0), 0))"
                   " or max by (topic, partition) (clamp_min("
                   "(autosizer_pipeline_high_watermark{$selector}"
                   " - min_over_time(autosizer_pipeline_high_watermark{$selector}[$window]))"
                   " / (autosizer_pipeline_high_watermark_time_seconds{$selector}"
                   " - min_over_time(autosizer_pipeline_high_watermark_time_seconds{$selector}[$window]) > 0), 0))"
                   " or max by (topic, partition) (rate(autosizer_pipeline_high_watermark{$selector}[$window])"
                   " and autosizer_pipeline_high_watermark{$selector})"),
    "processed_rate": "sum by (topic, partition) (rate(autosizer_pipeline_records_in_total{$selector}[$window]))",
    # the watermark itself and when it was read: the input over the last tick, with no batch in it
    "high_watermark": "max by (topic, partition) (autosizer_pipeline_high_watermark{$selector})",
    "high_watermark_time": "max by (topic, partition) (autosizer_pipeline_high_watermark_time_seconds{$selector})",
    # per virtual task (labels task, and topic/partition where the series has them)
    "task_lag_records": "max by (task, topic, partition) (autosizer_pipeline_task_lag_records{$selector})",
    "task_processed_rate": "sum by (task, topic, partition) (rate(autosizer_pipeline_records_in_total{$selector}[$window]))",
    "task_process_seconds": (
        "sum by (task) (rate(autosizer_pipeline_process_seconds_sum{$selector}[$window]))"
        " / sum by (task) (rate(autosizer_pipeline_process_seconds_count{$selector}[$window]) > 0)"
    ),
    # seconds spent in the user function per second: the share of the window the task was busy
    "task_busy": "sum by (task) (rate(autosizer_pipeline_process_seconds_sum{$selector}[$window]))",
    # what the pipeline measured of its capacity (optional: without them the older estimates apply)
    "task_saturated_rate": "max by (task) (autosizer_pipeline_task_saturated_rate{$selector})",
    "hot_share": "max by (topic, partition, factor) (autosizer_pipeline_hot_share{$selector})",
    "batch_deadline_seconds": "max(autosizer_pipeline_batch_deadline_seconds{$selector})",
    "batch_overhead_seconds": "max(autosizer_pipeline_batch_overhead_seconds{$selector})",
    "batch_read_seconds": "max(autosizer_pipeline_batch_read_seconds{$selector})",
    # what stands in for the cost until the pipeline has measured it (evaluator, `_batch_cost`):
    # a batch's commit latency, and the gap after a commit before the next trigger where shown
    "commit_latency_seconds": "max(autosizer_pipeline_commit_latency_seconds{$selector})",
    "batch_gap_seconds": "max(autosizer_pipeline_batch_gap_seconds{$selector})",
    # the processing stop of the pipeline's last rescale (none before its first)
    "restart_seconds": "max(autosizer_pipeline_restart_seconds{$selector})",
    # records/s the cores could process at most: cores x records per CPU-second the threads used.
    # The records are the process-time histogram's count, one series like the CPU's: `rate()`
    # misses what a series did before its first scrape, and records_in's series are per task,
    # new at each rescale, so the restart's first batch (its backlog) fell out of the records
    # but not of the CPU: the demo's first tick after 1 -> 8 read 2,203/s of about 13,400/s
    "cpu_ceiling": (
        "max(autosizer_pipeline_cores{$selector})"
        " * sum(rate(autosizer_pipeline_record_seconds_count{$selector}[$window]))"
        " / (sum(rate(autosizer_pipeline_cpu_seconds_total{$selector}[$window])) > 0)"
    ),
    # seconds since the newest scrape of the pipeline: stale metrics hold the daemon
    "age_seconds": "time() - max(timestamp(autosizer_pipeline_batches_total{$selector}))",
    # the pipeline's scrapes within the rate window (0 when none): every rate above needs two
    "scrapes_in_window": "max(count_over_time(autosizer_pipeline_batches_total{$selector}[$window])) or vector(0)",
    # the pipelines Prometheus scrapes, whatever the selector: a selector matching none of them is named
    "pipelines_any": "count(autosizer_pipeline_batches_total) or vector(0)",
}


def scrape_problem(scrapes: float | None, others: float | None, scraped: bool, window: str, selector: str,
                   fields: tuple[str, str] = ("[prometheus] window", "[prometheus] selector")) -> str | None:
    """Why the pipeline's series cannot be read under this window and selector, or None: the
    window held fewer than two of its scrapes (`scrapes_in_window`), or nothing of it was scraped
    under the selector (`scraped` false) while Prometheus scrapes pipelines (`pipelines_any`).
    The daemon judges a tick, `autosizer fit` a run; `fields` name the settings to change."""
    if scraped and scrapes is not None and scrapes < 2:
        return _too_few_scrapes(scrapes, window, fields[0])
    if not scraped and selector and others:
        return _selector_misses(selector, others, fields[1])
    return None


def _too_few_scrapes(scrapes: float, window: str, field: str) -> str:
    """Why no rate can be read: Prometheus scraped the pipeline fewer than twice within the
    window (its default scrape interval is a minute, the daemon's window 30 s). The daemon held
    on "no virtual task busy enough to measure capacity" and `autosizer fit` asked whether
    Prometheus scraped the pipeline, which it did."""
    within = f"the rate window ({window})" if window else "the rate window"
    return (f"{within} holds {scrapes:.0f} scrape of the pipeline's metrics and a rate needs two: make "
            f"{field} four scrape intervals or more, or scrape the pipeline every 1-5 s (where the policy's "
            "goals were measured); a pipeline started within the window has one too")


def _selector_misses(selector: str, others: float, field: str) -> str:
    """Prometheus scrapes pipelines, none of them under the selector: a misspelt label matcher
    was answered with "is Prometheus scraping the pipeline's /metrics?", which it was."""
    return (f"{field} {selector!r} matches no pipeline series, and Prometheus scrapes {others:.0f} "
            "pipeline(s) under other labels: compare the selector with the labels of "
            "autosizer_pipeline_batches_total there (or this job's pipeline is not scraped)")


PARTITION_QUERIES = ("lag_records", "lag_seconds", "input_rate", "processed_rate")
TASK_QUERIES = ("task_lag_records", "task_processed_rate", "task_process_seconds", "task_busy")


def render(query: str, selector: str, window: str) -> str:
    return Template(query).safe_substitute(selector=selector, window=window)


def partition_of(labels: Mapping[str, str]) -> TopicPartition | None:
    """The (topic, partition) a series is about, or None when its labels do not say."""
    try:
        return labels["topic"], int(labels["partition"])
    except (KeyError, ValueError):
        return None


def hot_share_table(rows: Iterable[tuple[Mapping[str, str], float]],
                    index: Mapping[TopicPartition, int]) -> np.ndarray | None:
    """`autosizer_pipeline_hot_share` as (partitions in `index`, len(FACTORS)), NaN where no
    usable value (0 < share <= 1) was read; None when nothing was. The daemon reads it at a tick,
    `autosizer fit` from a run's last samples: one reading, so both describe the same job."""
    table: np.ndarray | None = None
    for labels, value in rows:
        i, factor = index.get(partition_of(labels)), labels.get("factor", "")
        if i is None or not (factor.isascii() and factor.isdigit()) or int(factor) not in FACTORS:
            continue  # (a non-ASCII digit such as "²" passes isdigit, and int() refuses it)
        if not (math.isfinite(value) and 0 < value <= 1):
            continue
        if table is None:
            table = np.full((len(index), len(FACTORS)), np.nan)
        table[i, FACTORS.index(int(factor))] = value
    return table
