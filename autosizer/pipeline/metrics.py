"""The pipeline's Prometheus endpoint: what the controller's collector reads.

A custom collector renders the agent's state at scrape time, so a scrape never blocks a batch and
histograms built on executors (per-record process time, bucketed in the slot) are exported whole.

Series (labels in braces):
  autosizer_pipeline_lag_records{topic,partition}          high watermark - lowest task position, both
                                                           as the lag probe read them (one moment)
  autosizer_pipeline_lag_seconds{topic,partition}          age of the oldest unprocessed record
  autosizer_pipeline_high_watermark{topic,partition}       next offset the broker will write (Kinesis:
                                                           records the shard tail counted; rate = input)
  autosizer_pipeline_high_watermark_time_seconds{topic,partition} Unix time the probe read it: the
                                                           input between two reads, with no batch in it
  autosizer_pipeline_task_lag_records{task,topic,partition} high watermark - the task's position (the probe's)
  autosizer_pipeline_records_in_total{task,topic,partition} records the task processed
  autosizer_pipeline_records_out_total                     outputs the job produced
  autosizer_pipeline_process_seconds{task}                 summary (_sum, _count): user function time,
                                                           the records it ran on
  autosizer_pipeline_record_seconds                        histogram over every task: user function time
                                                           per record (per task it was 13 series a task
                                                           no query read: 61% of the exposition)
  autosizer_pipeline_busy_threads                          threads in the user function, on average
                                                           over the last batch
  autosizer_pipeline_cpu_seconds_total                     CPU time the threads used on records (their
                                                           own clocks; with record_seconds' count,
                                                           the CPU a record costs)
  autosizer_pipeline_batch_duration_seconds                last micro-batch, read to commit
  autosizer_pipeline_batch_records                         records processed in the last batch

Capacity (what the job can really do, measured; see pipeline/admission.py):
  autosizer_pipeline_slot_records{slot}                    records one slot processed, last batch
  autosizer_pipeline_slot_seconds{slot}                    that slot's wall time, last batch
  autosizer_pipeline_slot_busiest_seconds{slot}            of it, its busiest thread's time on records:
                                                           the rest is the slot's setup, a fixed cost
  autosizer_pipeline_slot_read_seconds{slot}               that slot's wait for its records before it
                                                           (the source's read), last batch
  autosizer_pipeline_task_saturated_rate{task}             records/s one thread does on the task's
                                                           records while they are a backlog (records
                                                           / the threads' busy time on its lanes)
  autosizer_pipeline_pending_records{topic,partition}      records the partition's tasks left at the
                                                           last batch's deadline (> 0: saturated)
  autosizer_pipeline_partition_capacity{topic,partition}   records/s the partition can take in key
                                                           order: a thread's rate / the busiest
                                                           thread's share (hot_share at the factor)
  autosizer_pipeline_admitted_span{topic,partition}        records the next batch may read past the
                                                           slowest task
  autosizer_pipeline_hot_share{topic,partition,factor}     the busiest thread's share of the
                                                           partition's input, were the job at that
                                                           factor: an even 1/F, or its busiest key
                                                           lane if more (every power of two: what a
                                                           rescale would buy)
  autosizer_pipeline_batch_deadline_seconds                a batch's time budget (--batch-seconds)
  autosizer_pipeline_cores                                 cores the slots run on (Spark's default
                                                           parallelism): with the CPU a record costs,
                                                           the most the job does at any factor
  autosizer_pipeline_restart_seconds                       last rescale's stop: drain to the next
                                                           generation's first batch
  autosizer_pipeline_batch_overhead_seconds                a saturated batch's fixed cost
  autosizer_pipeline_batch_read_seconds                    of it, the slowest-reading slot's time on
                                                           its records (the read's own fixed part left
                                                           out): what grows with the factor; on
                                                           Kinesis at least what the endpoint took to
                                                           serve them (the driver's tails' pages)
  autosizer_pipeline_commit_latency_seconds                a batch's trigger to its commit, beyond
                                                           its busiest thread's work on records
  autosizer_pipeline_batch_gap_seconds                     of the fixed cost, what follows a commit
                                                           before the next trigger (after a batch that
                                                           ran past its trigger's interval, saturated
                                                           or not): the rest grows with the records read
  autosizer_pipeline_read_boundary_seconds                 Kinesis only: a batch's trigger to the cut
                                                           of its records (a slot takes what its
                                                           shards hold when it reads; Kafka's trigger
                                                           plans the end offsets)
  autosizer_pipeline_batch_fill                            the last warm batch with records: its fullest
                                                           partition's read over its planned span
  autosizer_pipeline_batch_latency_seconds                 that batch's commit latency, not smoothed
                                                           (the pair checks how it grows with the read)
  autosizer_pipeline_batch_read_records                    that batch's records read, all partitions:
                                                           what its commit latency grows with
  autosizer_pipeline_service_cv                            a record's service time's coefficient of
                                                           variation: how far a task's rate in a
                                                           batch strays from its smoothed rate
  autosizer_pipeline_capacity                              records/s the job can take in key order,
                                                           fixed cost included, at most what the
                                                           cores do at the CPU a record costs
  autosizer_pipeline_batches_total                         committed micro-batches
  autosizer_pipeline_factor, autosizer_pipeline_generation the running layout
  autosizer_pipeline_topic_partitions{topic}               partitions the broker has (more than the
                                                           layout's: an expansion not adopted yet)
  autosizer_pipeline_rescales_total                        generations started after the first
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from autosizer.elasticity import FACTORS, Layout
from autosizer.pipeline.admission import Admission, job_capacity
from autosizer.pipeline.slots import PROCESS_TIME_BUCKETS, TaskProgress

Partition = tuple[str, int]


@dataclass(frozen=True)
class SlotStats:
    """One slot's last batch: records its tasks processed, its wall time, and the time it waited
    for its records before that (the source's part of a batch's fixed cost)."""

    records: int
    seconds: float
    read_seconds: float = 0.0
    read_records: int = 0  # the records it read (its tasks' and the ones they skip)
    busiest_seconds: float = 0.0  # the most one of its threads spent on records


# The job's one-value gauges, as (attribute, series, help), exported once measured.
SCALAR_GAUGES = (
    ("deadline_s", "autosizer_pipeline_batch_deadline_seconds", "A batch's time budget (--batch-seconds)"),
    ("cores", "autosizer_pipeline_cores", "Cores the slots run on: the CPU a record costs caps the job there"),
    ("restart_s", "autosizer_pipeline_restart_seconds",
     "Last drain to the next generation's first batch (a rescale's downtime)"),
    ("overhead_s", "autosizer_pipeline_batch_overhead_seconds", "A saturated batch's fixed cost outside its tasks' work"),
    ("read_s", "autosizer_pipeline_batch_read_seconds",
     "Of a saturated batch's fixed cost at the running factor, the time its slowest-reading slot spends on its "
     "records: the part that grows with the factor"),
    ("commit_latency_s", "autosizer_pipeline_commit_latency_seconds",
     "A batch's trigger to its commit, beyond its busiest thread's work on records"),
    ("gap_s", "autosizer_pipeline_batch_gap_seconds",
     "Of a saturated batch's fixed cost, what follows its commit before the next trigger"),
    ("read_boundary_s", "autosizer_pipeline_read_boundary_seconds",
     "How long after its trigger a batch's records are cut: a Kinesis slot takes what its shards hold when it reads"),
    ("batch_fill", "autosizer_pipeline_batch_fill",
     "The last warm batch's fullest partition read over the span planned for it (1: a full read)"),
    ("batch_latency_s", "autosizer_pipeline_batch_latency_seconds",
     "The same batch's trigger to its commit beyond its busiest thread's work (one batch, not smoothed)"),
    ("batch_read_records", "autosizer_pipeline_batch_read_records",
     "The same batch's records read from all its partitions: what its commit latency grows with"),
    ("service_cv", "autosizer_pipeline_service_cv",
     "A record's service time's coefficient of variation, from how a task's rate varies"),
    ("job_capacity", "autosizer_pipeline_capacity", "Records/s the job can take in key order, batch cost included"),
)


class PipelineMetrics(Collector):
    def __init__(self, job: str):
        self.job = job
        self._lock = threading.Lock()
        self.layout: Layout | None = None
        self.started_generations = 0
        self.batches = 0
        self.batch_seconds = 0.0
        self.records_in: dict[tuple[str, str, int], int] = defaultdict(int)
        self.records_out = 0
        self.histograms: dict[str, list[int]] = {}
        self.process_ns: dict[str, int] = defaultdict(int)
        self.cpu_ns = 0
        self.cores: int | None = None
        self.busy_threads = 0.0
        self.positions: dict[tuple[str, str, int], int | None] = {}
        self.lag_positions: dict[tuple[str, str, int], int | None] = {}  # as the lag probe read them
        self.high_watermarks: dict[Partition, int] = {}
        self.waiting: dict[Partition, int] = {}  # records in shards not adopted yet, by the partition they wait for
        self.oldest_age: dict[Partition, float] = {}
        self.probed_at: float | None = None  # Unix time of the lag probe that read the watermarks
        self._behind: Callable[[Partition, int], int] = lambda tp, position: max(
            0, self.high_watermarks[tp] - position)
        self.batch_records = 0
        self.slots: dict[int, SlotStats] = {}
        self.pending: dict[Partition, int] = {}
        self.saturated_rate: dict[str, float] = {}
        self.capacity: dict[Partition, float] = {}
        self.spans: dict[Partition, int] = {}
        self.overhead_s: float | None = None
        self.read_s: float | None = None
        self.commit_latency_s: float | None = None
        self.read_boundary_s: float | None = None
        self.gap_s: float | None = None
        self.batch_fill: float | None = None
        self.batch_latency_s: float | None = None
        self.batch_read_records: int | None = None
        self.service_cv: float | None = None
        self.job_capacity: float | None = None
        self.hot_shares: dict[Partition, tuple[float, ...]] = {}
        self.deadline_s: float | None = None
        self.restart_s: float | None = None
        self.topic_partitions: dict[str, int] = {}

    # --- updates from the agent ----------------------------------------------------------------

    def started(self, layout: Layout, positions: Mapping[tuple[str, str, int], int | None]) -> None:
        """A generation started from these positions: lag is known before its first batch where
        it reads the partitions the last probe read (a rescale). Where they changed (a re-shard,
        an adopted expansion), the last probe's view stands until the next probe: its marks, and
        the children it counted waiting under their parents, cover only its own partitions. Read
        against the new ones, the backlog lost the children's records for a scrape or two at
        every re-shard (runs v1-v4: 3-27 records where hundreds waited; v5's daemon read 1,409
        where 5,000 waited, `scale-down wanted`)."""
        with self._lock:
            self.layout = layout
            self.started_generations += 1
            self.positions = dict(positions)
            if not self.high_watermarks or set(layout.partitions()) == set(self.high_watermarks):
                self.lag_positions = dict(positions)  # the new tasks' lag, with the last probe's marks

    def observe_batch(self, progress: list[TaskProgress],
                      positions: Mapping[tuple[str, str, int], int | None], seconds: float,
                      slots: Mapping[int, SlotStats] | None = None,
                      admission: Admission | None = None) -> None:
        with self._lock:
            self.batches += 1
            self.batch_seconds = seconds
            self.batch_records = sum(p.records for p in progress)
            self.slots = dict(slots or {})
            if admission is not None and self.layout is not None:
                self.saturated_rate = dict(admission.rates)
                self.capacity = admission.partition_capacity(self.layout)
                self.overhead_s = admission.overhead_s
                self.read_s = admission.growing_read_s(self.layout.factor)
                self.commit_latency_s = admission.commit_latency_s
                self.read_boundary_s = admission.read_boundary_s
                self.gap_s = admission.gap_s
                self.service_cv = admission.service_cv
                self.hot_shares = dict(admission.hot_shares)
                self.deadline_s = admission.config.batch_seconds
                self.job_capacity = job_capacity(admission, self.layout, self.cores)
                self.spans = {tp: plan.span for tp, plan in admission.plan(
                    self.layout, {tp: 0 for tp in self.layout.partitions()}).items()}
            pending: dict[Partition, int] = defaultdict(int)
            working_ns = 0
            for p in progress:
                self.records_in[(p.task, p.topic, p.partition)] += p.records
                self.records_out += p.outputs
                self.process_ns[p.task] += p.process_ns
                self.cpu_ns += p.cpu_ns
                pending[(p.topic, p.partition)] += p.pending
                working_ns += p.process_ns
                if p.histogram:
                    current = self.histograms.setdefault(p.task, [0] * len(p.histogram))
                    for i, count in enumerate(p.histogram):
                        current[i] += count
            self.pending = dict(pending)
            self.busy_threads = working_ns / (seconds * 1e9) if seconds > 0 else 0.0
            self.positions = dict(positions)

    def observe_commit(self, fill: float, latency_s: float, records: int | None = None) -> None:
        """One warm batch's read fill (`admission.read_fill`), commit latency and records read,
        set together so a scrape reads them as one: what the simulator's commit wait is fitted
        to and checked against (it grows with the records, not only with the fill: session 83)."""
        with self._lock:
            self.batch_fill, self.batch_latency_s, self.batch_read_records = fill, latency_s, records

    def restarted(self, seconds: float) -> None:
        """A drain's start to the first batch of the next generation: processing stopped that long."""
        with self._lock:
            self.restart_s = seconds

    def observe_cores(self, cores: int) -> None:
        with self._lock:
            self.cores = cores

    def observe_topology(self, counts: Mapping[str, int]) -> None:
        with self._lock:
            self.topic_partitions = dict(counts)

    def observe_lag(self, high_watermarks: Mapping[Partition, int], oldest_age: Mapping[Partition, float],
                    behind: Callable[[Partition, int], int] | None = None, at: float | None = None,
                    positions: Mapping[tuple[str, str, int], int | None] | None = None,
                    waiting: Mapping[Partition, int] | None = None) -> None:
        """`behind(partition, position)`: records at or past a position, where positions are not
        offsets (Kinesis: sequence numbers); by default the high watermark minus the position.
        `at`: when the watermarks were read (now by default). `positions`: the tasks' positions
        taken just before the marks (the last batch's by default). The lag gauges subtract
        these, not the positions at the scrape: a commit between the probe and the scrape read
        as no backlog while a second of input waited (23 of 176 busy ticks in runs 122-132).
        `waiting`: records past every task of a partition, in shards not adopted yet that wait
        for it (Kinesis children: `shards.waiting_under`); in its lag, not in its tasks'."""
        with self._lock:
            self.probed_at = time.time() if at is None else at
            self.high_watermarks = dict(high_watermarks)
            self.waiting = dict(waiting or {})
            self.oldest_age = dict(oldest_age)
            self.lag_positions = dict(self.positions if positions is None else positions)
            if behind is not None:
                self._behind = behind

    def partition_lag(self) -> dict[Partition, int]:
        with self._lock:
            return self._partition_lag()

    def _partition_lag(self) -> dict[Partition, int]:
        lowest: dict[Partition, int] = {}
        for (_, topic, partition), next_offset in self.lag_positions.items():
            if next_offset is not None:
                tp = (topic, partition)
                lowest[tp] = min(lowest.get(tp, next_offset), next_offset)
        # A partition with no known position has no lag series: unknown is not zero.
        return {tp: self._behind(tp, lowest[tp]) + self.waiting.get(tp, 0) for tp in self.high_watermarks if tp in lowest}

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
        read = GaugeMetricFamily("autosizer_pipeline_high_watermark_time_seconds",
                                 "Unix time the high watermark was read (the scrape may be later)",
                                 labels=["topic", "partition"])
        if self.probed_at is not None:
            for topic, partition in sorted(self.high_watermarks):
                read.add_metric([topic, str(partition)], self.probed_at)
        yield read
        topics = GaugeMetricFamily("autosizer_pipeline_topic_partitions",
                                   "Partitions the broker has for each topic the job reads", labels=["topic"])
        for topic, count in sorted(self.topic_partitions.items()):
            topics.add_metric([topic], count)
        yield topics
        task_lag = GaugeMetricFamily("autosizer_pipeline_task_lag_records",
                                     "Records behind the high watermark for one virtual task",
                                     labels=["task", "topic", "partition"])
        for (task, topic, partition), next_offset in sorted(self.lag_positions.items()):
            if (topic, partition) in self.high_watermarks and next_offset is not None:
                task_lag.add_metric([task, topic, str(partition)], self._behind((topic, partition), next_offset))
        yield task_lag
        records_in = CounterMetricFamily("autosizer_pipeline_records_in",
                                         "Records processed by a virtual task",
                                         labels=["task", "topic", "partition"])
        for (task, topic, partition), value in sorted(self.records_in.items()):
            records_in.add_metric([task, topic, str(partition)], value)
        yield records_in
        # What no query reads per task is exported per job or per partition (session 70): per
        # task it was five series a task of the ten, and a scrape's cost grows with the tasks.
        yield CounterMetricFamily("autosizer_pipeline_records_out", "Outputs the job produced",
                                  value=self.records_out)
        # Per task the daemon reads the time and the records it ran on (`task_busy`,
        # `task_process_seconds`); the distribution is one histogram over the job: per task its
        # buckets were 13 series a task that nothing read, and the scrape's cost grows with the
        # tasks (4,096 tasks: 0.53 s of the driver's CPU a scrape, 0.17 s without them).
        summary = SummaryMetricFamily("autosizer_pipeline_process_seconds",
                                      "User function time, and the records it ran on", labels=["task"])
        totals, seconds = [0] * (len(PROCESS_TIME_BUCKETS) + 1), 0.0
        for task, counts in sorted(self.histograms.items()):
            spent = self.process_ns[task] / 1e9
            summary.add_metric([task], sum(counts), spent)
            totals = [a + b for a, b in zip(totals, counts, strict=True)]
            seconds += spent
        yield summary
        cumulative, buckets = 0, []
        for edge, count in zip((*PROCESS_TIME_BUCKETS, float("inf")), totals, strict=True):
            cumulative += count
            buckets.append(("+Inf" if edge == float("inf") else repr(edge), cumulative))
        yield HistogramMetricFamily("autosizer_pipeline_record_seconds", "User function time per record, over "
                                    "every task", buckets=buckets, sum_value=seconds)
        yield CounterMetricFamily("autosizer_pipeline_cpu_seconds", "CPU time the threads used on records",
                                  value=self.cpu_ns / 1e9)
        yield GaugeMetricFamily("autosizer_pipeline_busy_threads",
                                "Threads in the user function, on average over the last batch",
                                value=self.busy_threads)
        yield GaugeMetricFamily("autosizer_pipeline_batch_duration_seconds",
                                "Last micro-batch, from read to commit", value=self.batch_seconds)
        yield GaugeMetricFamily("autosizer_pipeline_batch_records",
                                "Records processed in the last micro-batch", value=self.batch_records)
        yield from self._capacity()
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


    def _capacity(self) -> Iterator[Metric]:
        slot_records = GaugeMetricFamily("autosizer_pipeline_slot_records",
                                         "Records one slot processed in the last batch", labels=["slot"])
        slot_seconds = GaugeMetricFamily("autosizer_pipeline_slot_seconds",
                                         "Wall time of one slot in the last batch", labels=["slot"])
        slot_busiest = GaugeMetricFamily("autosizer_pipeline_slot_busiest_seconds",
                                         "Of a slot's wall time in the last batch, its busiest thread's time on records",
                                         labels=["slot"])
        slot_read = GaugeMetricFamily("autosizer_pipeline_slot_read_seconds",
                                      "Time one slot waited for its records in the last batch", labels=["slot"])
        for slot, stats in sorted(self.slots.items()):
            slot_records.add_metric([str(slot)], stats.records)
            slot_seconds.add_metric([str(slot)], stats.seconds)
            slot_busiest.add_metric([str(slot)], stats.busiest_seconds)
            slot_read.add_metric([str(slot)], stats.read_seconds)
        yield slot_records
        yield slot_seconds
        yield slot_busiest
        yield slot_read
        rate = GaugeMetricFamily("autosizer_pipeline_task_saturated_rate",
                                 "Records/s a virtual task processes while it has a backlog",
                                 labels=["task"])
        for task, value in sorted(self.saturated_rate.items()):
            rate.add_metric([task], value)
        yield rate
        pending = GaugeMetricFamily("autosizer_pipeline_pending_records",
                                    "Records a partition's virtual tasks left at the last batch's deadline",
                                    labels=["topic", "partition"])
        for (topic, partition), value in sorted(self.pending.items()):
            pending.add_metric([topic, str(partition)], value)
        yield pending
        capacity = GaugeMetricFamily("autosizer_pipeline_partition_capacity",
                                     "Records/s a partition can take in key order (busiest thread bound)",
                                     labels=["topic", "partition"])
        for (topic, partition), value in sorted(self.capacity.items()):
            capacity.add_metric([topic, str(partition)], value)
        yield capacity
        span = GaugeMetricFamily("autosizer_pipeline_admitted_span",
                                 "Records the next batch may read past a partition's slowest task",
                                 labels=["topic", "partition"])
        for (topic, partition), value in sorted(self.spans.items()):
            span.add_metric([topic, str(partition)], value)
        yield span
        hot = GaugeMetricFamily("autosizer_pipeline_hot_share",
                                "The busiest thread's share of a partition's input at a factor (busiest key lane or 1/F)",
                                labels=["topic", "partition", "factor"])
        for (topic, partition), shares in sorted(self.hot_shares.items()):
            for factor, value in zip(FACTORS, shares, strict=False):
                hot.add_metric([topic, str(partition), str(factor)], value)
        yield hot
        for attribute, name, text in SCALAR_GAUGES:
            value = getattr(self, attribute)
            if value is not None:  # not measured yet: no series, never a made-up 0
                yield GaugeMetricFamily(name, text, value=value)

def serve(metrics: PipelineMetrics, port: int, address: str = "127.0.0.1") -> int:
    """Expose `metrics` on http://address:port/metrics and return the port bound: port 0 lets
    the kernel pick one in the bind itself, which no other process can take first."""
    registry = CollectorRegistry()
    registry.register(metrics)
    try:
        server, _ = start_http_server(port, addr=address, registry=registry)
    except OSError as exc:
        raise ValueError(f"cannot serve /metrics on {address}:{port} ({exc.strerror}): pass "
                         "--metrics-port with a free port (0 picks one)") from None
    return int(server.server_port)
