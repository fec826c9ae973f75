"""Pipeline benchmarks, each measured side by side in one run (one SparkSession, one broker).

Run: .venv/bin/python benchmarks/bench_pipeline.py [factor] [rise] [cpu] [trivial] [source] [downtime]
[unordered] [sink] (no argument: all eight; `rise` takes the first of --keys, --factors the
factors it promises, default 2 8 16). Spark local[2]; the backlog is produced before each measurement, and a
rate is records after the first committed batch / time from the first to the last commit, the
whole backlog drained. The pipeline always runs with `PipelineConfig`'s defaults (what `autosizer
pipeline run` uses): nothing is tuned per factor or per case.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis  # noqa: E402
from autosizer.pipeline.admission import job_capacity  # noqa: E402
from autosizer.pipeline.control import ControlChannel  # noqa: E402
from autosizer.pipeline.sinks import FileSink, KafkaSink  # noqa: E402

PARTITIONS = 4
KEYS = 100_000
FEW_KEYS = 200
# `factor`'s topic: two partitions this many offsets past the other two, as a topic's partitions
# drift apart (more than a batch's span at any factor measured: 6,300 records at F = 16)
APART = 100_000
APART_PARTITIONS = (0, 1)  # as `examples/demo.py`'s `apart`
RISE_LIGHT_S = 30  # `rise`: seconds the job keeps up before it falls behind
RESCALED, RESCALE_AFTER = 4, 5  # `rise`: the factor a job is rescaled to in its driver, after this many batches


def sleep_10ms(record):
    time.sleep(0.010)
    return record.value


def sleep_2ms(record):
    time.sleep(0.002)
    return record.value


def trivial(record):
    return record.value


def compute_2ms(record):
    """Pure Python work holding the GIL: about 2 ms of a core per record."""
    total = 0
    for i in range(CPU_LOOP):
        total += i * i
    return record.value


CPU_LOOP = 40_000  # iterations of `compute_2ms`; its cost is measured, not assumed


class Bench:
    def __init__(self, spark, broker: EmbeddedBroker, redis_server: EmbeddedRedis, workdir: Path):
        self.spark, self.broker, self.redis, self.workdir = spark, broker, redis_server, workdir

    def topic(self, records: int, keys: int = KEYS, apart: int = 0) -> str:
        """A fresh 4-partition topic holding `records` keyed records, after `apart` records
        already read on partitions 0 and 1 (`APART_PARTITIONS`)."""
        name = f"t{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(name, PARTITIONS)
        if apart:
            self.broker.produce(name, ((p, b"old-%d" % i, b"") for p in APART_PARTITIONS for i in range(apart)))
        produce_backlog(self.broker, name, records, keys)
        return name

    def run_pipeline(self, process, factor: int, records: int, keys: int = KEYS, sink: str = "file",
                     apart: int = 0, promise_to: tuple[int, ...] = ()) -> Run:
        """Drain a backlog with the pipeline at its default settings, into Parquet files or, with
        `sink="kafka"`, a 4-partition topic (both exactly once). With `apart`, the job starts
        where a job before it left partitions 0 and 1, that many offsets past the others, as the
        partitions of a topic that has run a while are; without, where a new job starts."""
        from autosizer.elasticity import Checkpoints
        from autosizer.pipeline.agent import PipelineConfig

        topic = self.topic(records, keys, apart)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        config = PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap)
        layout = Layout(topics={topic: PARTITIONS}, factor=factor)
        start = None
        if apart:
            start = Checkpoints.from_partition_offsets(
                layout, {(topic, p): apart if p in APART_PARTITIONS else 0 for p in range(PARTITIONS)})
        return drain(self.spark, config, layout, process, self._sink(sink, job), records, start,
                     promise_to=promise_to)

    def rise_pipeline(self, light_rate: int, light_s: int, burst: int, keys: int, promise_to: tuple[int, ...]) -> Run:
        """The pipeline at factor 1 and its default settings on a topic written `light_rate`
        records a second for `light_s` seconds (it keeps up), then `burst` at once (it falls
        behind), 10 ms of sleep a record."""
        from autosizer.pipeline.agent import PipelineConfig

        topic = f"t{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(topic, PARTITIONS)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        config = PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap)
        feed = rise_feed(lambda first, count: produce_backlog(self.broker, topic, count, keys, first),
                         light_rate, light_s, burst)
        return drain(self.spark, config, Layout(topics={topic: PARTITIONS}, factor=1), sleep_10ms,
                     self._sink("file", job), light_rate * light_s + burst, feed=feed, promise_to=promise_to)

    def rescaled_pipeline(self, records: int, keys: int, promise_to: tuple[int, ...]) -> Run:
        """A backlog drained at factor 1, rescaled to RESCALED in its driver after RESCALE_AFTER
        batches (`drain`'s `rescale_to`), 10 ms of sleep a record."""
        from autosizer.pipeline.agent import PipelineConfig

        topic = self.topic(records, keys)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        config = PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap)
        return drain(self.spark, config, Layout(topics={topic: PARTITIONS}, factor=1), sleep_10ms,
                     self._sink("file", job), records, promise_to=promise_to, rescale_to=(RESCALE_AFTER, RESCALED))

    def _sink(self, kind: str, job: str) -> FileSink | KafkaSink:
        if kind == "file":
            return FileSink(self.workdir / job)
        self.broker.create_topic(f"{job}-out", PARTITIONS)
        return KafkaSink(self.broker.bootstrap, f"{job}-out")

    def run_unordered(self, records: int, ways: int, max_records: int) -> float:
        """The same 2 ms workload cut `ways` ways by offset range, no key order (Spark's
        minPartitions): each slot splits its records into equal chunks, a thread per chunk. It
        reads as the pipeline's slots do (the ranges source, records read in the slot), so the
        two differ only in order and batching."""
        import pyarrow as pa

        from autosizer.pipeline.kafka_source import read_slot, register

        register(self.spark)
        topic = self.topic(records)
        slots = self.spark.sparkContext.defaultParallelism
        chunks = ways // slots
        commits: list[tuple[float, int]] = []
        bootstrap = self.broker.bootstrap

        def slot(batches):
            batches = list(batches)
            if not batches:
                return
            table = read_slot(bootstrap, pa.Table.from_batches(batches), 30.0)
            rows = table.column("value").to_pylist()
            size = -(-len(rows) // chunks) if rows else 0

            def work(part):
                for _ in part:
                    time.sleep(0.002)
                return len(part)

            with ThreadPoolExecutor(chunks) as pool:
                done = sum(pool.map(work, [rows[i:i + size] for i in range(0, len(rows), size or 1)]))
            yield pa.RecordBatch.from_pylist([{"n": done}])

        def on_batch(df, _batch_id):
            n = sum(r["n"] for r in df.mapInArrow(slot, "n long").collect())
            commits.append((time.perf_counter(), n))

        groups = [[f"{topic}/{p}" for p in range(PARTITIONS) if p % slots == s] for s in range(slots)]
        return self._stream_rate(topic, records, max_records, on_batch, commits, slots=groups,
                                 source="autosizer-kafka-ranges")

    def _stream_rate(self, topic: str, records: int, max_records: int, on_batch, commits,
                     slots: list[list[str]] | None = None, source: str = "autosizer-kafka") -> float:
        """Run a bare query of `source` with `on_batch` until `records` are counted."""
        reader = (
            self.spark.readStream.format(source)
            .option("kafka.bootstrap.servers", self.broker.bootstrap).option("subscribe", topic)
            .option("maxRecordsPerBatch", str(max_records))
        )
        if slots:
            reader = reader.option("slots", json.dumps(slots))
        query = (
            reader.load().writeStream.foreachBatch(on_batch).trigger(processingTime="50 milliseconds")
            .option("checkpointLocation", tempfile.mkdtemp()).start()
        )
        while sum(n for _, n in commits) < records:
            time.sleep(0.05)
        query.stop()
        return steady_rate(commits)

    def run_source(self, records: int) -> float:
        """Records/s through the path a Kafka slot takes, no user function: the ranges source,
        each slot reading its records itself (`read_slot`) and bucketing them with numpy
        (`key_hashes`, as `run_slot` does)."""
        import numpy as np
        import pyarrow as pa

        from autosizer.elasticity import key_hashes
        from autosizer.pipeline.kafka_source import read_slot, register

        register(self.spark)
        topic = self.topic(records)
        commits: list[tuple[float, int]] = []
        bootstrap = self.broker.bootstrap

        def slot(batches):
            table = read_slot(bootstrap, pa.Table.from_batches(list(batches)), 30.0)
            buckets = key_hashes(table.column("key"), table.column("offset").to_numpy()) & np.uint64(7)
            yield pa.RecordBatch.from_pylist([{"n": len(buckets)}])

        def on_batch(df, _batch_id):
            n = sum(r["n"] for r in df.mapInArrow(slot, "n long").collect())
            commits.append((time.perf_counter(), n))

        return self._stream_rate(topic, records, 400_000, on_batch, commits, source="autosizer-kafka-ranges")

    def run_source_in_spark(self, records: int) -> float:
        """The same through `autosizer-kafka` and Spark's `xxhash64` (the rows path; a Kinesis
        job's slots still take it): printed beside the slot's path."""
        from pyspark.sql import functions as F

        from autosizer.pipeline.bucketing import key_bucket_column
        from autosizer.pipeline.kafka_source import register

        register(self.spark)
        topic = self.topic(records)
        commits: list[tuple[float, int]] = []

        def on_batch(df, _batch_id):
            row = df.select(key_bucket_column(8).alias("b")).agg(F.count("b").alias("n")).collect()[0]
            commits.append((time.perf_counter(), row["n"]))

        return self._stream_rate(topic, records, 400_000, on_batch, commits)

    def rescale_downtime(self, rescales: int) -> list[float]:
        """Seconds from the drain request to the first committed batch of the new generation,
        with a producer writing throughout."""
        from autosizer.pipeline.agent import PipelineAgent, PipelineConfig

        topic = f"t{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(topic, PARTITIONS)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        store = MetadataStore(self.redis.url, job)
        store.init_layout(Layout(topics={topic: PARTITIONS}, factor=2))
        agent = PipelineAgent(
            self.spark, PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap,
                                       trigger_seconds=0.1),
            trivial, FileSink(self.workdir / job))
        stop, producing = threading.Event(), threading.Event()
        runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)

        def produce():
            producer = self.broker.producer()
            i = 0
            while not producing.is_set():
                producer.produce(topic, key=b"k%d" % (i % KEYS), value=b"x", partition=i % PARTITIONS)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            producer.flush(10)

        feeder = threading.Thread(target=produce, daemon=True)
        feeder.start()
        runner.start()
        downtimes = []
        try:
            for i in range(rescales):
                generation = store.current_generation()
                while store.committed_batch(generation) < 3:
                    time.sleep(0.05)
                began = time.perf_counter()
                rescale_in_driver(store, 8 if i % 2 == 0 else 2)
                while store.committed_batch(generation + 1) < 1:
                    time.sleep(0.01)
                downtimes.append(time.perf_counter() - began)
        finally:
            producing.set()
            stop.set()
            runner.join(60)
            feeder.join(10)
            agent.close()
        return downtimes


def drain(spark, config, layout: Layout, process, sink, records: int, start=None, feed=None,
          promise_to: tuple[int, ...] = (), rescale_to: tuple[int, int] | None = None) -> Run:
    """Drain `records` already in the source under `layout` from the checkpoints `start` (default:
    the source's start), timing each commit and keeping the capacity the pipeline showed after
    it: one measuring loop for every source, so a Kafka and a Kinesis figure mean the same thing.
    With `feed`, the records are not there yet: `feed()` writes them, on a thread, once the
    pipeline runs. With `promise_to`, after each batch that left work behind (the job behind,
    when a daemon scales up), what the pipeline's measurements promise each of those factors.
    With `rescale_to` (batches, factor), the job is rescaled in its driver after that many
    batches, as the daemon's `restart-in-driver` does it, and promises only from then on."""
    from autosizer.pipeline.agent import PipelineAgent

    MetadataStore(config.redis_url, config.job).init_layout(layout, start)
    commits: list[tuple[float, int]] = []
    shown: list[float] = []  # the capacity the pipeline exported after each batch
    reading: list[float] = []  # each batch's slowest read of a slot's records (slot_read_seconds)
    promises: list[dict[int, tuple[float, float]]] = []

    def on_batch(agent, progress) -> None:
        commits.append((time.perf_counter(), sum(p.records for p in progress)))
        shown.append(job_capacity(agent.admission, layout))
        reading.append(max((s.read_seconds for s in agent.metrics.slots.values()), default=0.0))
        if promise_to and (rescale_to is None or rescaled.is_set()) and any(p.pending for p in progress):
            promises.append({f: (promise(agent.admission, layout, f, flat=True), promise(agent.admission, layout, f))
                             for f in promise_to})

    def rescale() -> None:
        while len(commits) < rescale_to[0]:
            time.sleep(0.05)
        rescale_in_driver(MetadataStore(config.redis_url, config.job), rescale_to[1])
        rescaled.set()

    rescaled = threading.Event()
    agent = PipelineAgent(spark, config, process, sink, on_batch=on_batch)
    stop = threading.Event()
    runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    runner.start()
    for side in (feed, rescale if rescale_to else None):
        if side is not None:
            threading.Thread(target=side, daemon=True).start()
    while sum(n for _, n in commits) < records:
        if not runner.is_alive():  # the agent failed; its traceback is on stderr
            agent.close()
            raise SystemExit(f"the pipeline stopped after {sum(n for _, n in commits):,} of {records:,} records")
        time.sleep(0.05)
    stop.set()
    runner.join(60)
    agent.close()
    capacity = job_capacity(agent.admission, layout)
    durations = [b - a for (a, _), (b, _) in zip(commits, commits[1:], strict=False)]
    cpu_s = agent.metrics.cpu_ns / 1e9
    return Run(steady_rate(commits), capacity, len(commits), max(durations, default=0.0),
               cpu_s / max(1, sum(agent.metrics.records_in.values())),
               spark.sparkContext.defaultParallelism, agent.admission.duty(), settled_rate(commits),
               statistics.fmean(shown[2:-1]) if len(shown) >= 4 else 0.0,
               statistics.median(durations[1:-1]) if len(durations) >= 3 else 0.0,
               statistics.median(reading[2:-1]) if len(reading) >= 4 else 0.0, agent.admission, layout, promises)


def rescale_in_driver(store: MetadataStore, factor: int, timeout_s: float = 60) -> None:
    """Rescale a running agent to `factor` as the daemon's `restart-in-driver` does: drain its
    query, migrate the checkpoints, start the query again in the same driver."""
    control = ControlChannel(store)
    generation = store.current_generation()
    asked = control.request("drain")
    if not control.wait_for(f"stopped@{generation}", timeout_s, request_id=asked):
        raise RuntimeError(f"drain timed out: {control.status()}")
    store.migrate(generation, store.layout().with_factor(factor))
    control.request("start")


def produce_backlog(broker: EmbeddedBroker, topic: str, records: int, keys: int, first: int = 0) -> None:
    """`records` keyed records from the `first`, key `i` in partition `i % 4`, every key equally
    often (batched)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
                         "batch.num.messages": 10000, "log_level": 0})
    for i in range(first, first + records):
        key = i % keys
        producer.produce(topic, key=b"key-%d" % key, value=b"%d" % i, partition=key % PARTITIONS)
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(120)


@dataclass
class Run:
    rate: float  # records/s, first commit to last
    capacity: float  # what the pipeline's own capacity model says the job can take, records/s
    batches: int
    longest_gap: float  # seconds between two commits, at most
    cpu_per_record: float = 0.0  # CPU seconds the slots' threads spent per record
    cores: int = 0  # the cores the slots share (what the pipeline exports)
    duty: float = 1.0  # the share of a saturated batch its tasks work, as the pipeline measured it
    settled: float = 0.0  # records/s past the query's start, up to the backlog's last batch
    settled_capacity: float = 0.0  # the capacity the pipeline showed after each of those batches, on average
    cycle_s: float = 0.0  # a batch past the start, commit to commit (median)
    read_s: float = 0.0  # of which its slowest slot spent getting its records (median)
    admission: Any = None  # what the pipeline measured, to predict another factor from
    layout: Layout | None = None
    # after each batch that left work behind: factor -> its promise (cost as measured, read scaled)
    promises: list[dict[int, tuple[float, float]]] = field(default_factory=list)

    def predicted(self, factor: int, flat: bool = False) -> float:
        """The capacity this run's measurements promise `factor` at its end (`promise`)."""
        assert self.admission is not None and self.layout is not None
        return promise(self.admission, self.layout, factor, flat)

    def cpu_ceiling(self) -> float:
        """The policy's cap at any factor: duty x cores / CPU per record (`Observation`)."""
        return self.duty * self.cores / self.cpu_per_record


def promise(admission, layout: Layout, factor: int, flat: bool = False) -> float:
    """The capacity a job's measurements promise `factor`, as the daemon reads them: the read a
    batch pays scaled to the factor's batches (`Admission.duty`), or with `flat` the cost
    measured at the running factor at every factor (the daemon before session 54)."""
    there = Layout(topics=layout.topics, factor=factor, source=layout.source)
    capacity = job_capacity(admission, there)
    return capacity * admission.duty() / admission.duty(factor) if flat else capacity


def ordered_bound(factor: int, keys: int, per_task: float, partition_of=None) -> float:
    """The most a key-ordered pipeline with `factor` threads per partition that share its key
    lanes can do over this backlog (every key has the same number of records): per partition the
    busiest thread, an even share or its busiest lane, sets the drain time (`busiest_workers`,
    the rule the pipeline exports as hot_share). Key `k` (`b"key-k"`) is in partition
    `partition_of[k]`, by default `k % 4` as `produce_backlog` writes it."""
    import numpy as np

    from autosizer.elasticity import FACTORS, MAX_FACTOR, key_hashes
    from autosizer.elasticity.lanes import busiest_workers

    names = [b"key-%d" % k for k in range(keys)]
    residues = (key_hashes(names, np.zeros(keys, dtype=np.int64)) & np.uint64(MAX_FACTOR - 1)).astype(np.int64)
    where = np.arange(keys) % PARTITIONS if partition_of is None else np.asarray(partition_of)
    busiest = 0.0
    for p in np.unique(where):
        counts = np.bincount(residues[where == p], minlength=MAX_FACTOR)
        busiest = max(busiest, busiest_workers(counts)[FACTORS.index(factor)])
    return per_task * keys / busiest


def task_bound(factor: int, keys: int, per_task: float) -> float:
    """The same bound for a pipeline that runs each virtual task on its own thread (before key
    lanes): the task with the most keys sets the drain time. Printed to show what lanes buy."""
    from collections import Counter

    from autosizer.elasticity import key_bucket

    tasks = Counter((k % PARTITIONS, key_bucket(b"key-%d" % k, 0, factor)) for k in range(keys))
    return per_task * keys / max(tasks.values())


def steady_rate(commits: list[tuple[float, int]]) -> float:
    """Records after the first commit over the time from the first commit to the last."""
    if len(commits) < 2:
        raise RuntimeError("need at least two committed batches: give the benchmark more records")
    return sum(n for _, n in commits[1:]) / (commits[-1][0] - commits[0][0])


def settled_rate(commits: list[tuple[float, int]]) -> float:
    """`steady_rate` without the query's second batch, which still pays the start (its cycle ran
    3.5-3.7 s where the later ones ran 3.2-3.4 s, session 50), nor the backlog's last, which reads
    what is left: what the capacity model describes. 0 with too few batches to tell. Compared
    with the capacity shown after each of those batches, on average (`Run.settled_capacity`),
    not with the last one alone: the fixed cost, smoothed over two batches or so, moves by a
    tenth between batches at F = 16, so one reading strays from the run's by a few percent."""
    return steady_rate(commits[1:-1]) if len(commits) >= 4 else 0.0


def _settled_ratio(run: Run, even: bool) -> str:
    """Model / measured past the start, where it means something: with a lane busier than an
    even share (few keys at a large factor) the partitions drain apart, the busiest last and
    alone, and the batches past the start hold that tail; the whole run's ratio is the one to
    read there."""
    return f"{run.settled_capacity / run.settled:.2f}" if even and run.settled else "-"


def factor_table(run_case, keys: int, factors: list[int], seconds: float, partition_of=None,
                 task_column: bool = False) -> None:
    """Throughput against the factor, one row a factor: `run_case(factor, records)` drains a
    backlog of `seconds` at the factor's ordered bound with a 10 ms sleep a record. The same
    columns and goals for every source. Where a batch's time goes past the start: its cycle, and
    the part its slowest slot waited for its records (the source's cost, which the capacity model
    counts in the batch's fixed cost). And what the run at the factor before promised this one,
    as the daemon sizes a scale-up from it, over what this one did past its start: with the cost
    measured there at every factor, and with the read scaled to this factor's batches."""
    per_task = 1 / 0.0101  # a 10 ms sleep measures 10.1 ms on these machines
    task = "task-per-thread bound vs F=1 | " if task_column else ""
    print(f"| F | records/s | vs F=1 | goal | lane bound vs F=1 | of the bound | {task}capacity model / measured | "
          "model / measured past the start | batches | longest batch s | batch cycle s (reading) | "
          "the factor before's promise / measured: cost as measured, read scaled |", flush=True)
    print("| --- " * (12 + task_column) + "|", flush=True)
    base = before = None
    for factor in factors:
        bound = ordered_bound(factor, keys, per_task, partition_of)
        run = run_case(factor, int(bound * seconds))
        base = base or (run.rate, bound)
        measured = run.settled or run.rate
        predicted = (f"{before.predicted(factor, flat=True) / measured:.2f}, {before.predicted(factor) / measured:.2f}"
                     if before is not None else "-")
        before = run
        goal = {16: 12.8 if keys == KEYS else 9.6}.get(factor, 0.8 * factor)
        goal = min(goal, 9.6) if keys == FEW_KEYS else goal
        task = f"{task_bound(factor, keys, per_task) / base[1]:.2f}x | " if task_column else ""
        print(f"| {factor} | {run.rate:,.0f} | {run.rate / base[0]:.2f}x | {goal:.1f}x | "
              f"{bound / base[1]:.2f}x | {run.rate / bound:.0%} | {task}{run.capacity / run.rate:.2f} | "
              f"{_settled_ratio(run, even=bound >= 0.99 * factor * base[1])} | {run.batches} | "
              f"{run.longest_gap:.1f} | {run.cycle_s:.2f} ({run.read_s:.2f}) | {predicted} |", flush=True)


def steady_feed(write, first: int, rate: int, seconds: int) -> None:
    """`rate` records a second for `seconds` seconds, records `first` on (`write(first, count)`)."""
    began = time.perf_counter()
    for second in range(seconds):
        write(first + second * rate, rate)
        time.sleep(max(0.0, began + second + 1 - time.perf_counter()))


def rise_feed(write, light_rate: int, light_s: int, burst: int):
    """A feed for `drain`: `light_rate` records a second for `light_s` seconds (a job keeping up),
    then `burst` at once (it falls behind). `write(first, count)` writes records `first` on."""

    def feed() -> None:
        steady_feed(write, 0, light_rate, light_s)
        write(light_s * light_rate, burst)

    return feed


def rise_table(rise_case, factor_case, bound, targets: tuple[int, ...], seconds: float, what: str,
               rescaled_case=None, fed_case=None) -> None:
    """`promise_table` for the runs a scale-up starts from: `rise_case(light_rate, light_s,
    burst, targets)` at factor 1 keeps up at half its bound for RISE_LIGHT_S, then falls behind
    by `seconds` of it; `factor_case(factor, records, targets)` drains a backlog at factor 1;
    `fed_case(light_rate, light_s, burst, targets)`, if given, drains the same backlog with input
    arriving at half the bound for RISE_LIGHT_S (a job behind on live traffic); `rescaled_case(records,
    targets)`, if given, drains one rescaled 1 -> RESCALED in its driver after RESCALE_AFTER
    batches, and promises from there. Each target factor then drains `seconds` of its
    `bound(factor)`."""
    light, burst = int(bound(1) / 2), int(bound(1) * seconds)
    print(f"\n## the promise a scale-up reads: factor 1 behind after keeping up ({light}/s for {RISE_LIGHT_S} s, "
          f"then {burst:,} at once), on a steady backlog{' (with and without input after it)' if fed_case else ''}, "
          f"and factor {RESCALED} after a rescale from 1 in its driver, against each factor draining a backlog; "
          f"sleep 10 ms per record, {what}, default settings", flush=True)
    starts = {"keeping up": rise_case(light, RISE_LIGHT_S, burst, targets),
              "a backlog": factor_case(1, burst, targets)}
    if fed_case is not None:
        starts["a backlog, input after"] = fed_case(light, RISE_LIGHT_S, burst, targets)
    if rescaled_case is not None:
        over = tuple(f for f in targets if f > RESCALED)
        records = int(bound(1) * RESCALE_AFTER * 3.6 + bound(RESCALED) * seconds)
        starts[f"{RESCALED} after 1"] = rescaled_case(records, over)
    promise_table(starts, {f: factor_case(f, int(bound(f) * seconds)) for f in targets})


def promise_table(starts: dict[str, Run], runs: dict[int, Run], skip: int = 2) -> None:
    """What each run a scale-up starts from promised the larger factors while it was behind,
    over what each did past its start: the cost as measured at the running factor, and the read
    scaled to the factor's batches. The median over the batches behind, past the `skip` first
    (a fixed cost needs two batches behind in a row), with its range; `-` where a run promised
    nothing to that factor."""
    print("| F | records/s past the start | " + " | ".join(
        f"promise from {name} / measured: cost as measured, read scaled" for name in starts) + " |", flush=True)
    print("| --- " * (2 + len(starts)) + "|", flush=True)
    for factor, run in runs.items():
        measured = run.settled or run.rate
        cells = []
        for start in starts.values():
            behind = [p for p in start.promises[skip:] or start.promises if factor in p]
            if not behind:
                cells.append("-")
                continue
            ratios = [[p[factor][i] / measured for p in behind] for i in (0, 1)]
            cells.append(", ".join(f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})" for r in ratios))
        print(f"| {factor} | {measured:,.0f} | " + " | ".join(cells) + " |", flush=True)
    for name, start in starts.items():  # what scaled the read there, at the run's end
        line, floor = start.admission.read_cost.per_record(), start.admission.endpoint_per_record
        print(f"{name}: the slots' line {_ms(line)}, the endpoint's floor (the tails' pages) {_ms(floor)}", flush=True)


def _ms(seconds: float | None) -> str:
    return "none" if seconds is None else f"{seconds * 1000:.3f} ms a record"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", nargs="*",
                        default=["factor", "rise", "cpu", "trivial", "source", "downtime", "unordered", "sink"])
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="backlog per run, in seconds at the factor's ordered bound")
    parser.add_argument("--factors", type=int, nargs="+",
                        help="default: 1-16 for many keys, 1-64 for few (a larger factor splits the busiest bucket)")
    parser.add_argument("--keys", type=int, nargs="+", default=[KEYS, FEW_KEYS],
                        help="key mixes for `factor`: distinct keys over the 4 partitions")
    parser.add_argument("--apart", type=int, default=APART,
                        help="`factor`: offsets partitions 0 and 1 start past the others (0: all at 0, before session 53)")
    parser.add_argument("--batch-seconds", type=float, default=3.0,
                        help="the unordered reference's batches, in seconds of its ideal work")
    parser.add_argument("--verbose", action="store_true", help="log the agent's steps")
    args = parser.parse_args()
    configure_logging(level="info" if args.verbose else "warning")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("autosizer-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-bench-"))
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker:
        bench = Bench(spark, broker, redis_server, workdir)
        ideal_per_task = 1 / 0.00208  # a 2 ms sleep measures 2.08 ms on these machines
        if "factor" in args.which:
            for keys in args.keys:
                print(f"\n## throughput vs factor: sleep 10 ms per record, 4 partitions ({args.apart:,} offsets "
                      f"apart), {keys:,} keys, default settings", flush=True)
                factors = args.factors or ([1, 2, 4, 8, 16] if keys > 1000 else [1, 2, 4, 8, 16, 32, 64])
                factor_table(lambda factor, records, keys=keys: bench.run_pipeline(
                                 sleep_10ms, factor, records, keys, apart=args.apart),
                             keys, factors, args.seconds, task_column=True)
        if "rise" in args.which:
            keys = args.keys[0]
            rise_table(lambda light, seconds, burst, to: bench.rise_pipeline(light, seconds, burst, keys, to),
                       lambda factor, records, to=(): bench.run_pipeline(sleep_10ms, factor, records, keys, promise_to=to),
                       lambda factor: ordered_bound(factor, keys, 1 / 0.0101), tuple(args.factors or (2, 8, 16)),
                       args.seconds, f"4 partitions, {keys:,} keys",
                       lambda records, to: bench.rescaled_pipeline(records, keys, to))
        if "cpu" in args.which:
            print("\n## CPU-bound work: pure Python, ~2 ms of a core per record, 4 partitions, "
                  f"{KEYS:,} keys, {spark.sparkContext.defaultParallelism} cores, default settings", flush=True)
            print("| F | records/s | vs F=1 | CPU ms per record | cores' ceiling (duty x cores / CPU) | "
                  "measured / ceiling | capacity without the ceiling / measured |", flush=True)
            print("| --- | --- | --- | --- | --- | --- | --- |", flush=True)
            base = None
            for factor in args.factors or [1, 2, 4, 8]:
                guess = base or 800.0
                run = bench.run_pipeline(compute_2ms, factor, int(guess * args.seconds))
                base = base or run.rate
                print(f"| {factor} | {run.rate:,.0f} | {run.rate / base:.2f}x | {run.cpu_per_record * 1e3:.2f} | "
                      f"{run.cpu_ceiling():,.0f} | {run.rate / run.cpu_ceiling():.2f} | "
                      f"{run.capacity / run.rate:.2f} |", flush=True)
        if "trivial" in args.which:
            print("\n## trivial function: bucketed (F=8) vs unbucketed (F=1)")
            one = bench.run_pipeline(trivial, 1, 400_000).rate
            eight = bench.run_pipeline(trivial, 8, 400_000).rate
            print(f"F=1: {one:8.0f}/s   F=8: {eight:8.0f}/s   loss {1 - eight / one:+.1%} (goal <= 5%)", flush=True)
        if "source" in args.which:
            print("\n## source + bucketing (no user function)")
            rate = bench.run_source(2_000_000)
            print(f"the slot's path (ranges, read in the slot, numpy hash): {rate:10.0f} records/s "
                  "(goal >= 250,000)", flush=True)
            rate = bench.run_source_in_spark(2_000_000)
            print(f"the rows path (autosizer-kafka, Spark's xxhash64):      {rate:10.0f} records/s", flush=True)
        if "downtime" in args.which:
            print("\n## rescale downtime: drain -> migrate -> first batch of the new layout committed")
            downtimes = bench.rescale_downtime(5)
            print(f"median {statistics.median(downtimes):.2f} s over {len(downtimes)} rescales "
                  f"({', '.join(f'{d:.2f}' for d in downtimes)}) (goal <= 2 s)", flush=True)
        if "unordered" in args.which:
            print("\n## against the unordered limit: 32 ways by offset range vs F=8 (32 ordered workers)")
            ideal = 32 * ideal_per_task
            records = int(ideal * args.seconds)
            batch = int(ideal * args.batch_seconds)
            unordered = bench.run_unordered(records, 32, max_records=batch)
            ordered = bench.run_pipeline(sleep_2ms, 8, records).rate
            print(f"unordered (batches of {args.batch_seconds:g} s of ideal work): {unordered:8.0f}/s   "
                  f"virtual tasks F=8 (default settings): {ordered:8.0f}/s   "
                  f"= {ordered / unordered:.0%} of the unordered rate (goal >= 90%)", flush=True)
        if "sink" in args.which:
            print("\n## the sink: Parquet files against a Kafka topic, both exactly once (sleep 2 ms, F=8)")
            records = int(32 * ideal_per_task * args.seconds)
            rates = {kind: [] for kind in ("file", "kafka")}
            for _ in range(2):  # alternated, so both meet the same machine
                for kind in rates:
                    rates[kind].append(bench.run_pipeline(sleep_2ms, 8, records, sink=kind).rate)
            file_rate, kafka_rate = (statistics.median(r) for r in rates.values())
            print(f"file: {file_rate:8.0f}/s   kafka: {kafka_rate:8.0f}/s   kafka / file = {kafka_rate / file_rate:.2f} "
                  f"(runs: file {', '.join(f'{r:.0f}' for r in rates['file'])}; "
                  f"kafka {', '.join(f'{r:.0f}' for r in rates['kafka'])})", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
