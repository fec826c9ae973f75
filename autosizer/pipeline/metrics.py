"""The pipeline's Prometheus endpoint: what the controller's collector reads.

A custom collector renders the agent's state at scrape time, so a scrape never blocks a batch and
histograms built on executors (per-record process time, bucketed in the slot) are exported whole.

Series (labels in braces):
  autosizer_pipeline_lag_records{topic,partition}          high watermark - lowest task position
  autosizer_pipeline_lag_seconds{topic,partition}          age of the oldest unprocessed record
  autosizer_pipeline_high_watermark{topic,partition}       next offset the broker will write (rate = input)
  autosizer_pipeline_task_lag_records{task,topic,partition} high watermark - the task's position
  autosizer_pipeline_records_in_total{task,topic,partition} records the task processed
  autosizer_pipeline_records_out_total{task}               outputs the task produced
  autosizer_pipeline_process_seconds{task}                 histogram: user function time per record
  autosizer_pipeline_busy_ratio{task}                      share of the last batch the task was busy
  autosizer_pipeline_batch_duration_seconds                last micro-batch, read to commit
  autosizer_pipeline_batches_total                         committed micro-batches
  autosizer_pipeline_factor, autosizer_pipeline_generation the running layout
  autosizer_pipeline_rescales_total                        generations started after the first
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator, Mapping

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from autosizer.elasticity import Layout
from autosizer.pipeline.slots import PROCESS_TIME_BUCKETS, TaskProgress

Partition = tuple[str, int]


class PipelineMetrics(Collector):
    def __init__(self, job: str):
        self.job = job
        self._lock = threading.Lock()
        self.layout: Layout | None = None
        self.started_generations = 0
        self.batches = 0
        self.batch_seconds = 0.0
        self.records_in: dict[tuple[str, str, int], int] = defaultdict(int)
        self.records_out: dict[str, int] = defaultdict(int)
        self.histograms: dict[str, list[int]] = {}
        self.process_ns: dict[str, int] = defaultdict(int)
        self.busy: dict[str, float] = {}
        self.positions: dict[tuple[str, str, int], int | None] = {}
        self.high_watermarks: dict[Partition, int] = {}
        self.oldest_age: dict[Partition, float] = {}

    # --- updates from the agent ----------------------------------------------------------------

    def started(self, layout: Layout, positions: Mapping[tuple[str, str, int], int | None]) -> None:
        """A generation started from these positions: lag is known before its first batch."""
        with self._lock:
            self.layout = layout
            self.started_generations += 1
            self.positions = dict(positions)

    def observe_batch(self, progress: list[TaskProgress], wall_ns: Mapping[str, int],
                      positions: Mapping[tuple[str, str, int], int | None], seconds: float) -> None:
        with self._lock:
            self.batches += 1
            self.batch_seconds = seconds
            busy: dict[str, int] = defaultdict(int)
            for p in progress:
                self.records_in[(p.task, p.topic, p.partition)] += p.records
                self.records_out[p.task] += p.outputs
                self.process_ns[p.task] += p.process_ns
                busy[p.task] += p.process_ns
                if p.histogram:
                    current = self.histograms.setdefault(p.task, [0] * len(p.histogram))
                    for i, count in enumerate(p.histogram):
                        current[i] += count
            self.busy = {t: min(1.0, ns / wall_ns[t]) if wall_ns.get(t) else 0.0 for t, ns in busy.items()}
            self.positions = dict(positions)

    def observe_lag(self, high_watermarks: Mapping[Partition, int], oldest_age: Mapping[Partition, float]) -> None:
        with self._lock:
            self.high_watermarks = dict(high_watermarks)
            self.oldest_age = dict(oldest_age)

    def partition_lag(self) -> dict[Partition, int]:
        with self._lock:
            return self._partition_lag()

    def _partition_lag(self) -> dict[Partition, int]:
        lowest: dict[Partition, int] = {}
        for (_, topic, partition), next_offset in self.positions.items():
            if next_offset is not None:
                tp = (topic, partition)
                lowest[tp] = min(lowest.get(tp, next_offset), next_offset)
        # A partition with no known position has no lag series: unknown is not zero.
        return {tp: max(0, hw - lowest[tp]) for tp, hw in self.high_watermarks.items() if tp in lowest}

    # --- the scrape ----------------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            yield from self._collect()

    def _collect(self) -> Iterator[Metric]:
        lag = GaugeMetricFamily("autosizer_pipeline_lag_records",
                                "Records behind the high watermark (lowest virtual task position)",
                                labels=["topic", "partition"])
        for (topic, partition), value in sorted(self._partition_lag().items()):
            lag.add_metric([topic, str(partition)], value)
        yield lag
        age = GaugeMetricFamily("autosizer_pipeline_lag_seconds",
                                "Age of the oldest unprocessed record", labels=["topic", "partition"])
        for (topic, partition), value in sorted(self.oldest_age.items()):
            age.add_metric([topic, str(partition)], value)
        yield age
        marks = GaugeMetricFamily("autosizer_pipeline_high_watermark",
                                  "Next offset the broker will write; its rate is the input rate",
                                  labels=["topic", "partition"])
        for (topic, partition), value in sorted(self.high_watermarks.items()):
            marks.add_metric([topic, str(partition)], value)
        yield marks
        task_lag = GaugeMetricFamily("autosizer_pipeline_task_lag_records",
                                     "Records behind the high watermark for one virtual task",
                                     labels=["task", "topic", "partition"])
        for (task, topic, partition), next_offset in sorted(self.positions.items()):
            hw = self.high_watermarks.get((topic, partition))
            if hw is not None and next_offset is not None:
                task_lag.add_metric([task, topic, str(partition)], max(0, hw - next_offset))
        yield task_lag
        records_in = CounterMetricFamily("autosizer_pipeline_records_in",
                                         "Records processed by a virtual task",
                                         labels=["task", "topic", "partition"])
        for (task, topic, partition), value in sorted(self.records_in.items()):
            records_in.add_metric([task, topic, str(partition)], value)
        yield records_in
        records_out = CounterMetricFamily("autosizer_pipeline_records_out",
                                          "Outputs produced by a virtual task", labels=["task"])
        for task, value in sorted(self.records_out.items()):
            records_out.add_metric([task], value)
        yield records_out
        histogram = HistogramMetricFamily("autosizer_pipeline_process_seconds",
                                          "User function time per record", labels=["task"])
        for task, counts in sorted(self.histograms.items()):
            cumulative, buckets = 0, []
            for edge, count in zip((*PROCESS_TIME_BUCKETS, float("inf")), counts, strict=True):
                cumulative += count
                buckets.append(("+Inf" if edge == float("inf") else repr(edge), cumulative))
            histogram.add_metric([task], buckets, self.process_ns[task] / 1e9)
        yield histogram
        busy = GaugeMetricFamily("autosizer_pipeline_busy_ratio",
                                 "Share of the last batch a virtual task spent in the user function",
                                 labels=["task"])
        for task, value in sorted(self.busy.items()):
            busy.add_metric([task], value)
        yield busy
        yield GaugeMetricFamily("autosizer_pipeline_batch_duration_seconds",
                                "Last micro-batch, from read to commit", value=self.batch_seconds)
        yield CounterMetricFamily("autosizer_pipeline_batches", "Committed micro-batches",
                                  value=self.batches)
        if self.layout is not None:
            yield GaugeMetricFamily("autosizer_pipeline_factor", "Running elasticity factor",
                                    value=self.layout.factor)
            yield GaugeMetricFamily("autosizer_pipeline_generation", "Running layout generation",
                                    value=self.layout.generation)
        yield CounterMetricFamily("autosizer_pipeline_rescales",
                                  "Layout generations started after the first",
                                  value=max(0, self.started_generations - 1))


def serve(metrics: PipelineMetrics, port: int, address: str = "127.0.0.1") -> CollectorRegistry:
    """Expose `metrics` on http://address:port/metrics."""
    registry = CollectorRegistry()
    registry.register(metrics)
    start_http_server(port, addr=address, registry=registry)
    return registry

