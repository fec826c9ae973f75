"""The control agent in the Spark driver: runs the query of the current layout generation.

Per micro-batch (`foreachBatch`): each slot (`mapInArrow`, one Spark task per slot) reads its
Kafka ranges itself (`autosizer-kafka-ranges`; a Kinesis slot receives rows, hashed on the way by
the Spark expression equal to `key_bucket`), runs its virtual tasks on threads (`run_slot`) until
the batch deadline, writes outputs to the sink; then the agent commits every touched
task's progress in one commit fenced by the generation, then finalize the sink and publish
per-partition positions to a Kafka consumer group so standard lag tools see real lag. Last, the
measured rates go into `Admission`, whose read plan (from the slowest task, a span of measured
capacity) tells the source what the next batch reads.

Between batches it obeys the control channel: `drain` stops the query once no batch is in flight
(stopping a query inside foreachBatch has crashed Spark with a StackOverflowError) and reports
`stopped@<g>`; `start` starts the query of the now-current generation in the same SparkSession.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import socket
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import structlog
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.coupling import Coupling
from autosizer.elasticity.shards import Reshard, Shard, WaitingCounts, reshard, waiting_under
from autosizer.elasticity.shards import apply as apply_reshard
from autosizer.elasticity.startpoints import Startpoint
from autosizer.elasticity.store import MetadataStore, StaleGeneration, StoreError
from autosizer.elasticity.topology import Topology
from autosizer.elasticity.topology import waiting_under as waiting_partitions
from autosizer.pipeline import kinesis_source
from autosizer.pipeline.admission import Admission, AdmissionConfig, gap_after_commit, read_fill
from autosizer.pipeline.bucketing import key_hash_column
from autosizer.pipeline.control import ControlChannel
from autosizer.pipeline.kafka_source import EPOCH, offset_key, read_slot, register, write_plan
from autosizer.pipeline.metrics import PipelineMetrics, SlotStats, serve
from autosizer.pipeline.sinks import Sink
from autosizer.pipeline.slots import ProcessFn, TaskProgress, WallDeadline, run_slot
from autosizer.pipeline.worker_gc import freeze_imports

log = structlog.get_logger(__name__)

PROGRESS_SCHEMA = pa.schema(
    [
        ("task", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
        # next_offset in decimal: a Kinesis sequence number outgrows int64
        ("next_offset", pa.string()), ("records", pa.int64()), ("outputs", pa.int64()),
        ("process_ns", pa.int64()), ("wall_ns", pa.int64()), ("slot", pa.int32()),
        ("histogram", pa.list_(pa.int64())), ("busy_ns", pa.int64()),
        ("pending", pa.int64()), ("read", pa.int64()), ("slot_records", pa.int64()),
        ("hottest", pa.list_(pa.float64())),
        # lanes the deadline cut above next_offset: residues of h mod modulus, their offsets
        ("mark_residues", pa.list_(pa.int64())), ("mark_offsets", pa.list_(pa.string())),
        ("modulus", pa.int64()), ("cpu_ns", pa.int64()),
        # a batch too small to measure the partition's hot shares alone: its records per residue
        ("share_residues", pa.list_(pa.int64())), ("share_counts", pa.list_(pa.int64())),
        # the slot's wait for its records: Kinesis's reads upstream in the task, Kafka's own read
        ("read_ns", pa.int64()), ("read_rows", pa.int64()),
        # when (epoch ns) it had them: a Kinesis slot takes what its shards hold then
        ("read_end_ns", pa.int64()),
        # the most one of its threads spent on records (`SlotResult.busiest_ns`)
        ("busiest_ns", pa.int64()),
    ]
)


PROGRESS_TYPE = from_arrow_schema(PROGRESS_SCHEMA)  # what mapInArrow returns, for Spark


class PipelineFailed(RuntimeError):
    """The query stopped with an error; the agent reported `failed` with this message."""


# Query errors a loaded node causes and a new query outlives. Spark gives a Python process it
# starts a fixed 10 s to connect back (PythonWorkerFactory.createSimpleWorker, no setting), and
# every query starts one for its Python source: with four test workers on two cores a restarted
# pipeline's query failed there, 10 s after it started, having run no batch (session 78).
TRANSIENT_QUERY_ERRORS = ("Python worker failed to connect back",)
QUERY_RESTARTS = 3  # new queries in a row, with no batch committed between, before the error stands


# How the query's own Spark checkpoint is written: it is scratch in the agent's work directory,
# never read back (every start is planned from the job's checkpoints in Redis), so it goes
# through the FileSystem API to Hadoop's plain local file system, where Spark's defaults went
# through FileContext to the checksummed one: a `.crc` beside each file and, without Hadoop's
# native library (none ships with PySpark), a `chmod` or `readlink` process for each permission
# set or link looked up, about 16 a second at a 1 s trigger (BENCHMARKS, "Spark's checkpoint
# files"). Set on the session only while the query starts: the query keeps them (its logs and
# its clone of the session are made then), and the rest of a user's session is left as it was
# built. Hadoop's cache of file systems would hand back the checksummed one already made, hence
# the last key. A session that sets any of them itself keeps its own.
SCRATCH_CHECKPOINT = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}
BROKER_TIMEOUT_MS = 5000  # one broker attempt's wait (kafka.timeoutMs)
BROKER_OUTAGE_S = 25.0  # --broker-outage-s's default: the 5 broker attempts the pipeline always made


def broker_attempts(outage_s: float, timeout_ms: int = BROKER_TIMEOUT_MS) -> int:
    """The broker attempts that ride through an outage of `outage_s`: each waits `timeout_ms`
    for an answer (and a short back-off after), so the query fails no sooner than that."""
    return max(1, math.ceil(outage_s * 1000 / timeout_ms))


@dataclass
class PipelineConfig:
    job: str
    redis_url: str
    bootstrap: str
    trigger_seconds: float = 1.0
    batch_seconds: float = 3.0  # each virtual task's deadline in a batch (see Admission)
    run_ahead: float = 1.5  # how many batches of work a task may run ahead of its slowest sibling
    max_records_per_batch: int | None = None  # an optional upper bound (memory)
    parallelism: int | None = None  # slots per batch; default: Spark's default parallelism
    default_offsets: str = "earliest"
    consumer_group: str | None = None  # default: the job name
    metrics_port: int | None = None  # serve /metrics here (0: pick a free port)
    metrics_address: str = "127.0.0.1"
    lag_probe_seconds: float = 1.0
    # broker attempts before the query fails (nothing is committed): at the default, BROKER_OUTAGE_S
    kafka_retries: int = broker_attempts(BROKER_OUTAGE_S)
    redis_outage_s: float = 60.0  # ride through a Redis outage this long, then fail
    drain_wait_s: float = 300.0  # a drain waits this long for the in-flight batch
    kafka_timeout_ms: int = BROKER_TIMEOUT_MS
    # "kafka" (topics on `bootstrap`) or "kinesis" (streams; a shard is a partition), read at
    # `kinesis_endpoint` (default: AWS) in `kinesis_region`, credentials from boto3's chain
    source: str = "kafka"
    kinesis_endpoint: str | None = None
    kinesis_region: str | None = None
    # Kinesis: each call a batch makes rides through an endpoint that does not answer this long
    kinesis_outage_s: float = BROKER_OUTAGE_S

    def __post_init__(self) -> None:
        if self.source not in ("kafka", "kinesis"):
            raise ValueError(f"source must be kafka or kinesis, not {self.source!r}")
        if not (math.isfinite(self.kinesis_outage_s) and self.kinesis_outage_s >= 0):
            raise ValueError(f"kinesis_outage_s must be seconds >= 0, not {self.kinesis_outage_s!r}")


# Errors a query raises where Spark ran its tasks, and what to do about each. The pipeline checks
# the driver's AWS chain before Spark starts; a cluster's executors have their own, and without
# credentials there every read failed with botocore's bare line (session 80, a standalone cluster).
QUERY_ERROR_FIXES = {
    "botocore.exceptions.NoCredentialsError": (
        "the Kinesis reads on Spark's executors found no AWS credentials, where the driver's chain "
        "has them: give each executor's host an instance role or an AWS profile "
        "(--conf spark.executorEnv.AWS_PROFILE=NAME picks one); nothing was committed"),
}


def summarize_error(text: str) -> str:
    """The line that names the real exception inside Spark's wrapped Python traceback, and what
    to do about it where that is known (`QUERY_ERROR_FIXES`)."""
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        head = stripped.split(":", 1)[0]
        if ": " in stripped and head.replace(".", "").replace("_", "").isalnum() and (
            head.endswith(("Error", "Exception", "Failed", "Unavailable", "Generation"))
        ):
            if head in QUERY_ERROR_FIXES:
                return f"{stripped} ({QUERY_ERROR_FIXES[head]})"
            # our own exceptions by their name alone (AppFailed, KafkaUnavailable): the message says the rest
            return stripped.removeprefix(head.rpartition(".")[0] + ".") if head.startswith("autosizer.") else stripped
    return text.strip().splitlines()[0] if text.strip() else "unknown error"


class KafkaOffsets:
    """Resolves startpoints and source defaults to offsets (the elasticity OffsetResolver)."""

    def __init__(self, bootstrap: str):
        # It reads one record per partition (`timestamps_at`); small fetches keep the broker
        # from serving a megabyte a partition for it. Its queue keeps librdkafka's default:
        # capping it (queued.min.messages=1) made a fresh assignment wait out a stale fetch, so
        # half the probes found no record in their second and the lag series went blind.
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "autosizer-offsets",
                                  "enable.auto.commit": False, "log_level": 0,
                                  "max.partition.fetch.bytes": 16384})

    def oldest_offset(self, topic: str, partition: int) -> int:
        return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[0]

    def upcoming_offset(self, topic: str, partition: int) -> int:
        return self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]

    def timestamps_at(self, offsets: dict[tuple[str, int], int], timeout_s: float = 1.0) -> dict[tuple[str, int], int]:
        """The timestamp (ms) of the record at each partition's offset, fetched together (a
        consumer waits out its previous fetch before a new assignment, so one at a time would
        cost that wait per partition); partitions that do not answer in time are left out.

        A partition is unassigned as soon as its record is read: that drops what was fetched
        behind it. Kept assigned, a job far behind had the probe wade through every record
        queued after the one it wanted (36,000 a probe on a 12,000-record backlog, 4 partitions)."""
        found: dict[tuple[str, int], int] = {}
        if not offsets:
            return found
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        deadline = time.monotonic() + timeout_s
        try:
            while len(found) < len(offsets) and time.monotonic() < deadline:
                for message in self.consumer.consume(len(offsets) - len(found), timeout=0.1):
                    tp = (message.topic(), message.partition())
                    if message.error() is None and tp not in found and offsets.get(tp) == message.offset():
                        found[tp] = message.timestamp()[1]
                        self.consumer.incremental_unassign([TopicPartition(*tp)])
        finally:
            self.consumer.unassign()
        return found

    def partition_counts(self, topics: Iterable[str], timeout_s: float = 5.0) -> dict[str, int]:
        """Each topic's partition count on the broker (topics it does not know are left out)."""
        metadata = self.consumer.list_topics(timeout=timeout_s)
        return {t: len(metadata.topics[t].partitions) for t in topics
                if t in metadata.topics and metadata.topics[t].error is None}

    def offset_for_timestamp(self, topic: str, partition: int, epoch_ms: int) -> int:
        found = self.consumer.offsets_for_times([TopicPartition(topic, partition, epoch_ms)], timeout=10)[0]
        return found.offset if found.offset >= 0 else self.upcoming_offset(topic, partition)

    def close(self) -> None:
        self.consumer.close()


class PipelineAgent:
    """Runs one job's pipeline in this driver and obeys the controller."""

    def __init__(self, spark: SparkSession, config: PipelineConfig, process: ProcessFn, sink: Sink,
                 on_batch: Callable[[PipelineAgent, list[TaskProgress]], None] | None = None):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        self.spark, self.config, self.process, self.sink = spark, config, process, sink
        self.store = MetadataStore(config.redis_url, config.job, outage_s=config.redis_outage_s)
        self.control = ControlChannel(self.store)
        self.on_batch = on_batch
        self.layout: Layout | None = None
        self.checkpoints: Checkpoints | None = None
        self.query: Any = None
        self.draining = False
        self._lock = threading.Lock()  # orders "draining" against a batch starting
        self._busy = False
        self._planned: tuple[frozenset, dict] | None = None  # the last plan's held children and stops
        self._committed_batch = 0  # of the running generation; read from Redis at each start
        self.failure: BaseException | None = None
        self.batches = 0
        self.kinesis = config.source == "kinesis"
        # Kafka only: the job's consumer group, where lag tools read its progress
        self._group = None if self.kinesis else Consumer({
            "bootstrap.servers": config.bootstrap, "group.id": config.consumer_group or config.job,
            "enable.auto.commit": False, "log_level": 0})
        register(spark)
        kinesis_source.register(spark)
        self.metrics = PipelineMetrics(config.job)
        self.metrics_port: int | None = None
        if config.metrics_port is not None:
            self.metrics_port = serve(self.metrics, config.metrics_port, config.metrics_address)
            log.info("pipeline.metrics_serving", job=config.job, address=config.metrics_address,
                     port=self.metrics_port)  # with --metrics-port 0, where Prometheus must look
        _remove_stale_workdirs()
        workdir = tempfile.mkdtemp(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-")
        Path(workdir, OWNER_FILE).write_text(_owner())
        # removed when the agent is collected or the process exits: one per agent piled up in /tmp
        self._workdir = weakref.finalize(self, shutil.rmtree, workdir, ignore_errors=True)
        self._workdir_path = workdir
        self._pause_file = os.path.join(workdir, "paused")
        self._plan_file = os.path.join(workdir, "plan.json")
        self._tips_file = os.path.join(workdir, "tips.json")  # Kinesis: the last record each tail counted
        self.admission = Admission(AdmissionConfig(batch_seconds=config.batch_seconds,
                                                   run_ahead=config.run_ahead))
        self._last_commit: float | None = None
        self._last_trigger: float | None = None  # the last committed batch's trigger (`gap_after_commit`)
        self._cycles_warm = False  # a query's third batch on: its cycles measure the fixed cost
        self._spans: dict[tuple[str, int], int] = {}  # the read plan's spans the next batch reads
        # the last batch left records it read: only then is the next one's cycle from its commit
        # a saturated job's own (see `_process_batch`)
        self._saturated_before = False
        # a drain's start and the generation it drained, until a newer generation's first batch
        self._drained_at: tuple[float, int] | None = None
        self._query_shape: tuple | None = None  # what the running query was planned for
        self._starts = 0  # start_query calls: the read plan's epoch (kafka_source.EPOCH)
        self._restarts = 0  # new queries after a transient error since the last committed batch
        self._resolver: Any = None  # startpoints and defaults, in start_query
        self._cp_lock = threading.Lock()  # the lag probe reads what the batch thread advances
        self._counts_since: dict[str, tuple[int, int]] = {}  # topic -> (broker count, seen since ms)
        self._reported_topology = False
        # Kafka: the new partitions an expansion not adopted yet has, each under its parent, with
        # their end offsets at the last probe; and per parent, those its adopted children had
        # then, which stay in its input so that its watermark never falls
        self._waiting: dict[tuple[str, int], tuple[tuple[str, int], int]] = {}
        # coupled expansion children: their steps behind their parents, and each one's end at the
        # last probe (a step pairs it with the parent's end read after it)
        self._couplings: dict[tuple[str, int], Coupling] = {}
        self._child_ends: dict[tuple[str, int], int] = {}
        self._folded: dict[tuple[str, int], int] = {}
        self._reshard: tuple[int, Reshard] | None = None  # found by the probe, applied by run()
        self._tails: dict[int, kinesis_source.ShardTail] = {}  # Kinesis: the probe's shard tails
        self._waiting_counts = WaitingCounts()  # Kinesis: children not adopted yet, in their lines' input

    # --- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, start: bool = True, poll_s: float = 0.1) -> None:
        """Run until `stop` is set or the query fails (PipelineFailed). Starts the current
        generation at once unless `start` is False (then it waits for a start request)."""
        stop = stop or threading.Event()
        self.sink.recover(self.store)
        if start:
            self.start_query()
        else:
            self.control.report("stopped@0")
        probing = threading.Event()
        prober = threading.Thread(target=self._probe_lag, args=(probing,), name="lag-probe", daemon=True)
        prober.start()
        try:
            while not stop.is_set():
                self._obey()
                self._apply_reshard()
                self._check_query()
                self._heartbeat()
                stop.wait(poll_s)
        finally:
            probing.set()
            if self.query is not None and self.query.isActive:
                self._stop_when_idle()
            prober.join(10)

    def _obey(self) -> None:
        pending = self.control.pending()
        if pending is None:
            return
        request_id, action = pending
        if action == "drain":
            self.drain()
        elif action == "start":
            self.start_query()
        self.control.done(request_id)

    def _heartbeat(self) -> None:
        gen = self.layout.generation if self.layout else 0
        if self.failure is not None:
            state = "failed"
        elif self.query is not None and self.query.isActive and not self.draining:
            state = f"running@{gen}"
        elif self.draining and self._busy:
            state = f"draining@{gen}"  # a batch still in flight: not stopped yet
        else:
            state = f"stopped@{gen}"
        self.control.report(state, generation=gen, batches=self.batches,
                            error=None if self.failure is None else str(self.failure))

    def _check_query(self) -> None:
        if self.query is None or self.query.isActive:
            return
        if isinstance(self.failure, StaleGeneration):
            # Fenced: a newer generation is current (a restarted pipeline ran the old layout while
            # a controller migrated). The refused commit wrote nothing; run the current layout.
            log.warning("pipeline.fenced_restarting", job=self.config.job,
                        generation=self.failure.generation, current=self.failure.current)
            self.failure, self.query = None, None
            self.start_query()
            return
        if self.failure is None:
            error = self.query.exception()
            if error is None:
                return  # stopped by a drain
            if self._restarted(str(error)):
                return
            self.failure = PipelineFailed(summarize_error(str(error)))
        self._heartbeat()
        log.error("pipeline.failed", job=self.config.job, error=str(self.failure))
        raise PipelineFailed(str(self.failure))

    def _restarted(self, error: str) -> bool:
        """Start a new query for one that failed on a loaded node (`TRANSIENT_QUERY_ERRORS`), up
        to `QUERY_RESTARTS` times in a row: what a restarted process would do, without its
        minute of JVM start. The sink mends what the failed query left, as at a process start,
        and the new query plans from the checkpoints in Redis, so nothing is lost or repeated.
        (The Python process that plans the query at its start, `create_data_source`, took 12 s
        in a test and the query started: Spark waits longer for that one.)"""
        if self._restarts >= QUERY_RESTARTS or not any(e in error for e in TRANSIENT_QUERY_ERRORS):
            return False
        self._restarts += 1
        log.warning("pipeline.query_restarting", job=self.config.job, error=summarize_error(error),
                    attempt=self._restarts, limit=QUERY_RESTARTS)
        self.query = None
        self.sink.recover(self.store)
        self.start_query()
        return True

    def _probe_lag(self, stop: threading.Event) -> None:
        """Every `lag_probe_seconds`, on its own thread with its own consumer (a slow broker
        must not delay a drain or a start): high watermarks, and the age of each partition's
        oldest unprocessed record. The interval is jittered by up to half: a probe as regular
        as the trigger (both 1 s by default) reads the same moment of every batch cycle, so the
        age it reports stays near that moment's, low or high, for minutes."""
        probe = self._new_resolver()
        once = self._probe_kinesis_once if self.kinesis else self._probe_once
        try:
            while not stop.wait(self.config.lag_probe_seconds * random.uniform(0.5, 1.5)):
                try:
                    once(probe)
                except Exception as exc:  # lag just goes stale
                    log.warning("lag_probe.failed", job=self.config.job, error=str(exc))
        finally:
            probe.close()

    def _probe_once(self, probe: KafkaOffsets) -> None:
        with self._cp_lock:
            if self.layout is None or self.checkpoints is None:
                return
            layout = self.layout
            partitions, lowest = layout.partitions(), self.checkpoints.start_offsets()
            positions = _positions(self.checkpoints)  # before the marks: a later commit is no backlog
        try:
            counts: dict[str, int] | None = probe.partition_counts(layout.topics)
        except KafkaException as exc:  # the lag still counts; the topology waits for the next probe
            log.warning("topology_probe.failed", job=self.config.job, error=str(exc))
            counts = None
        ends = {tp: probe.upcoming_offset(*tp) for tp in partitions}
        now = time.time() * 1000
        # Nothing unprocessed (or nothing known yet): no age to read.
        behind = {tp: start for tp, start in lowest.items()
                  if start is not None and tp in ends and start < ends[tp]}
        stamps = probe.timestamps_at(behind)
        ages = {tp: 0.0 for tp in ends if tp not in behind}
        ages.update({tp: max(0.0, (now - stamp) / 1000) for tp, stamp in stamps.items()})
        marks = self._input_marks(probe, layout, counts, ends)
        self.metrics.observe_lag(marks, ages, at=now / 1000, positions=positions,
                                 behind=lambda tp, position: max(0, ends[tp] - position))
        if counts is not None:
            self._report_topology(ends, int(now), counts)
        self._take_steps(layout, ends, int(now))

    def _take_steps(self, layout: Layout, ends: dict[tuple[str, int], int], now_ms: int) -> None:
        """A step for every coupled child (`coupling`): its end at the last probe, read before
        this probe read its ancestors'; once the producers have refreshed (`until_ms`), the last.
        Written to Redis before a batch reads by them, so a restarted pipeline reads no further."""
        coupled = [b for b in layout.barriers if b.coupled and (b.topic, b.partition) in ends]
        if not coupled:
            return
        with self._cp_lock:
            cp = self.checkpoints
            if cp is None or cp.layout.generation != layout.generation:
                return
            done = {(b.topic, b.partition): cp.lineage_done(b.topic, b.partition) for b in coupled}
        couplings = dict(self._couplings)
        for b in coupled:
            child = (b.topic, b.partition)
            was = couplings.get(child, Coupling())
            if was.final is not None:
                continue
            lineage = tuple(ends[(b.topic, a)] for a in layout.lineage(*child))
            if b.until_ms is not None and now_ms >= b.until_ms:
                now = was.close(lineage)
            elif child in self._child_ends:
                now = was.step(self._child_ends[child], lineage)
            else:
                now = was
            couplings[child] = now.pruned(done[child])
        self._child_ends = {(b.topic, b.partition): ends[(b.topic, b.partition)] for b in coupled}
        if couplings != self._couplings:
            self.store.write_couplings(couplings)
            with self._cp_lock:
                self._couplings = couplings
                if self.checkpoints is cp:
                    cp.couple(couplings)
        self._replan()

    def _replan(self) -> None:
        """Rewrite the read plan between batches when what a coupled child may be read up to
        moved since the last plan. Only a batch wrote the plan, and a child held at its last
        plan's stop (or left out) with its parents all read offers Spark nothing: no batch ran,
        and its released records waited for the next record on any partition, forever once the
        producers paused (the live expansion test, 12 records in each child). A batch in flight
        writes its own plan; if that one was written before this step, the next probe looks again."""
        with self._lock:
            layout, cp = self.layout, self.checkpoints
            if self._busy or self.draining or self.failure is not None or layout is None or cp is None:
                return
            if (cp.blocked_partitions(), cp.read_limits()) != self._planned:
                self._write_plan(layout, cp)

    def _input_marks(self, probe: KafkaOffsets, layout: Layout, counts: dict[str, int] | None,
                     ends: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Each partition's watermark as its input counts it: its end offset, plus those of the
        new partitions an expansion not adopted yet moved its keys to (`topology.waiting_under`),
        plus what its adopted children had when they joined (so that it never falls). Its
        backlog stays its own: the waiting records are read after the daemon adopts them
        (its next tick), however many tasks read the parent."""
        for child, (parent, end) in self._waiting.items():
            if child in ends:  # adopted since the last probe
                self._folded[parent] = self._folded.get(parent, 0) + end
        waiting = ({child: parent for child, (parent, _) in self._waiting.items() if child not in ends}
                   if counts is None else waiting_partitions(layout, counts))  # no counts: as they were
        self._waiting = {child: (parent, probe.upcoming_offset(*child)) for child, parent in waiting.items()}
        marks = {tp: end + self._folded.get(tp, 0) for tp, end in ends.items()}
        for parent, end in self._waiting.values():
            if parent in marks:
                marks[parent] += end
        return marks

    def _probe_kinesis_once(self, probe: kinesis_source.KinesisPositions) -> None:
        """Kinesis reports no high watermark, so a tail per shard counts arrivals (the input
        rate) and the records at or past each task's position (the lag), and times the oldest
        unprocessed record."""
        with self._cp_lock:
            if self.layout is None or self.checkpoints is None:
                return
            lowest = self.checkpoints.start_offsets()
            positions = _positions(self.checkpoints)
            layout = self.layout
        ((stream, _),) = layout.topics.items()
        listed = probe.reader(stream).shards()
        now = time.time()
        marks, ages, tails = {}, {}, {}
        # the layout's shards, then the children not adopted yet (from their first record) under
        # the shard whose line they continue (`shards.waiting_under`): their records are input,
        # and backlog behind that shard's tasks
        waiting = waiting_under(layout, listed)
        for shard, start in [*((shard, start) for (_, shard), start in lowest.items()),
                             *((child, None) for child in sorted(waiting))]:
            tail = self._tails.get(shard)
            if tail is None or (start or 0) < tail.floor:  # new, or rewound by a startpoint
                tail = kinesis_source.ShardTail(probe.reader(stream), shard, start or 0)
            self.admission.observe_endpoint_read(tail.follow())
            tail.trim(start or 0)
            tails[shard] = tail
        for (_, shard), start in lowest.items():
            marks[(stream, shard)] = tails[shard].seen
            ages[(stream, shard)] = tails[shard].age(start or 0, now)
        queued: dict[tuple[str, int], int] = {}
        for line, added in self._waiting_counts.under(waiting, {c: tails[c].seen for c in waiting}).items():
            marks[(stream, line)] += added
        for child, line in waiting.items():
            queued[(stream, line)] = queued.get((stream, line), 0) + tails[child].behind(0)
            ages[(stream, line)] = max(ages[(stream, line)], tails[child].age(0, now))
        self._tails = tails  # retired shards' tails dropped
        # the source's peek asks no call of a shard whose tail counted a record past its start, nor
        # of an idle one the tail read to its tip just now
        write_plan(self._tips_file, {offset_key(stream, shard): [tails[shard].last, tails[shard].tip_at]
                                     for stream, shard in lowest})
        # a copy for the scrape thread: the tails move on at the next probe
        numbers = {(stream, shard): list(tails[shard].numbers) for stream, shard in lowest}
        self.metrics.observe_lag(marks, ages, lambda tp, position: kinesis_source.at_or_past(numbers[tp], position),
                                 positions=positions, waiting=queued)
        finished = [shard for (_, shard), start in lowest.items() if tails[shard].finished(start or 0)]
        self._watch_shards(layout, listed, finished)

    def _watch_shards(self, layout: Layout, listed: list[Shard], finished: list[int]) -> None:
        """Find a re-shard the layout has not taken yet (seed 003): children whose parents are all
        closed and finished (the tails read them to their end) join, finished shards leave. `run`
        applies it between batches."""
        change = reshard(layout, listed, finished)
        if change is not None and self._reshard is None:
            self._reshard = (layout.generation, change)

    def _apply_reshard(self) -> None:
        """Take a re-shard as the next generation in place, between batches, with no restart: the
        running query reads the children from the next read plan on. Not while draining (the
        controller is changing the layout then) and not over a generation it was not found in."""
        found = self._reshard
        if found is None:
            return
        with self._lock:
            layout = self.layout
            if self._busy or self.draining or self.failure is not None or layout is None:
                return
            self._reshard = None
            generation, change = found
            if layout.generation != generation:
                return  # the layout moved on: the probe looks again
            new = apply_reshard(layout, change)
            try:
                cp = self.store.migrate(generation, new)
            except StaleGeneration as exc:  # the controller moved first: the probe looks again
                log.warning("pipeline.reshard_refused", job=self.config.job, error=str(exc))
                return
            except StoreError as exc:  # Redis away past the ride-through: try again later
                log.warning("pipeline.reshard_postponed", job=self.config.job, error=str(exc))
                return
            with self._cp_lock:
                self.layout, self.checkpoints = new, cp
            self._committed_batch = 0
            self.admission.forget(new)
            self._write_plan(new, cp)
            self.metrics.started(new, _positions(cp))
        log.info("pipeline.resharded", job=self.config.job, generation=new.generation,
                 change=change.describe(), partitions=[p for _, p in new.partitions()])

    def _report_topology(self, ends: dict[tuple[str, int], int], now_ms: int,
                         counts: dict[str, int]) -> None:
        """While a topic's partition count on the broker differs from the layout's, say so in
        Redis (with each partition's end offset: an expansion's barriers) for the daemon to adopt
        or refuse; the pipeline owns the broker connection, the daemon only reads Redis."""
        layout = self.layout
        if layout is None:
            return
        self.metrics.observe_topology(counts)
        for topic, count in counts.items():
            if self._counts_since.get(topic, (None,))[0] != count:
                self._counts_since[topic] = (count, now_ms)
        if all(counts.get(t, n) == n for t, n in layout.topics.items()):
            if self._reported_topology:
                self.store.report_topology(None)
                self._reported_topology = False
            return
        since = {t: self._counts_since[t][1] for t in counts}
        self.store.report_topology(Topology(counts, since, ends, now_ms))
        if not self._reported_topology:
            log.warning("pipeline.partition_count_changed", job=self.config.job,
                        layout=dict(layout.topics), broker=counts)
        self._reported_topology = True

    # --- start and drain -----------------------------------------------------------------------

    def start_query(self) -> None:
        """Run the now-current generation: resumed in place when the paused query already reads
        exactly what it needs, else a new query."""
        if self.query is not None and self.query.isActive and not self.draining:
            return
        began = time.perf_counter()
        layout = self.store.layout()
        cp = self.store.checkpoints(layout.generation)
        resolver = self._offsets()
        try:
            applied = self._apply_startpoints(layout, cp, resolver)
            defaults = {tp: (resolver.oldest_offset(*tp) if self.config.default_offsets == "earliest"
                             else resolver.upcoming_offset(*tp))
                        for tp, start in cp.start_offsets().items() if start is None}
        except self._source_errors() as exc:
            raise self._source_down(exc) from None
        cp.resolve_defaults(defaults)
        self._couplings = dict(cp.couplings)  # the steps the store's checkpoints came with
        starts = cp.start_offsets()
        held = sorted(offset_key(*tp) for tp in cp.blocked_partitions())  # left out of the read plan
        shape = (tuple(sorted(layout.topics.items())), json.dumps(self._slots(layout)))
        resumed = not applied and self._can_resume(shape)
        if not resumed and self.query is not None and self.query.isActive:
            self._stop_when_idle()
        self.failure = None
        with self._cp_lock:
            self.layout, self.checkpoints = layout, cp
        self._committed_batch = self.store.committed_batch(layout.generation)
        with self._lock:  # the probe writes a plan between batches too (`_replan`): not an old epoch's
            self.draining = False
            self.admission.forget(layout)
            self._last_commit = self._last_trigger = None  # the first batch of a (re)started query pays the start,
            self._cycles_warm = False  # and the second still warms up
            self._saturated_before = False
            self._starts += 1
            self._write_plan(layout, cp)
        if not resumed:
            self._new_query(layout, starts, shape)
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._pause_file)
        self.metrics.started(layout, _positions(cp))
        # The cores the slots share: what a CPU-bound job's records can have, whatever the factor.
        self.metrics.observe_cores(self.spark.sparkContext.defaultParallelism)
        log.info("pipeline.started", job=self.config.job, generation=layout.generation,
                 factor=layout.factor, held=held, resumed_in_place=resumed,
                 seconds=round(time.perf_counter() - began, 3))
        self._heartbeat()

    def _can_resume(self, shape: tuple) -> bool:
        """The paused query reads the same partitions in the same slots; where its next batch
        starts comes from the read plan, which start_query rewrites from the new checkpoints
        under a new epoch (so Spark sees new offsets even where the checkpoints did not move)."""
        return self.query is not None and self.query.isActive and shape == self._query_shape

    def _new_query(self, layout: Layout, starts: dict, shape: tuple) -> None:
        reader = self._kinesis_reader(layout, shape) if self.kinesis else self._kafka_reader(layout, starts, shape)
        writer = (
            reader.load().writeStream.foreachBatch(self._on_batch)
            .trigger(processingTime=f"{int(self.config.trigger_seconds * 1000)} milliseconds")
            .option("checkpointLocation", self._spark_checkpoint())
            .queryName(f"autosizer-{self.config.job}-g{layout.generation}")
        )
        with _scratch_checkpoint(self.spark):
            self.query = writer.start()
        self._query_shape = shape

    def _spark_checkpoint(self) -> str:
        """A new query's own Spark checkpoint, in the agent's work directory. Spark's progress
        there is never read back (every start is planned from the job's checkpoints in Redis), so
        the stopped query's is removed: one left per rescale filled /tmp on a long-running job."""
        for old in Path(self._workdir_path).glob("query-*"):
            shutil.rmtree(old, ignore_errors=True)
        return tempfile.mkdtemp(prefix="query-", dir=self._workdir_path)

    def _kinesis_reader(self, layout: Layout, shape: tuple) -> Any:
        if len(layout.topics) != 1:
            raise ValueError(f"a Kinesis job reads one stream, and the layout has {sorted(layout.topics)}: "
                             "run one job per stream")
        (stream,) = layout.topics
        reader = (
            self.spark.readStream.format("autosizer-kinesis").option("stream", stream)
            .option("slots", shape[1]).option("pauseFile", self._pause_file)
            .option("planFile", self._plan_file).option("tipsFile", self._tips_file)
            .option("kinesis.outageMs", str(round(self.config.kinesis_outage_s * 1000)))
        )
        for name, value in (("endpoint", self.config.kinesis_endpoint), ("region", self.config.kinesis_region)):
            if value:
                reader = reader.option(name, value)
        return reader

    def _kafka_reader(self, layout: Layout, starts: dict, shape: tuple) -> Any:
        reader = (
            self.spark.readStream.format("autosizer-kafka-ranges")
            .option("kafka.bootstrap.servers", self.config.bootstrap)
            .option("subscribe", ",".join(sorted(layout.topics)))
            .option("startingOffsets", json.dumps({offset_key(*tp): o for tp, o in starts.items()}))
            .option("slots", shape[1])
            .option("defaultOffsets", "earliest")
            .option("pauseFile", self._pause_file)
            .option("planFile", self._plan_file)
            .option("kafka.retries", str(self.config.kafka_retries))
            .option("kafka.timeoutMs", str(self.config.kafka_timeout_ms))
        )
        if self.config.max_records_per_batch:
            reader = reader.option("maxRecordsPerBatch", str(self.config.max_records_per_batch))
        return reader

    def _write_plan(self, layout: Layout, cp: Checkpoints) -> None:
        """Where the next batch reads each partition; expansion children behind their barrier are
        left out (not read), so a child is released by the first plan after its parent passed."""
        blocked = cp.blocked_partitions()
        starts = {tp: o for tp, o in cp.start_offsets().items() if tp not in blocked}
        plan = self.admission.plan(layout, starts)
        stops = cp.read_limits()  # coupled children: no further than their parents allow
        self._planned = (blocked, stops)
        self._spans = {tp: p.span for tp, p in plan.items()}
        write_plan(self._plan_file, {EPOCH: self._starts, **{
            offset_key(*tp): {"start": p.start, "span": p.span,
                              **({"stop": stops[tp]} if tp in stops else {})} for tp, p in plan.items()}})

    def _offsets(self) -> Any:
        self._resolver = self._resolver or self._new_resolver()
        return self._resolver

    def _source_errors(self) -> tuple[type[Exception], ...]:
        """What the source's client raises when it cannot answer (boto3 is an optional extra)."""
        return kinesis_source.unavailable_errors() if self.kinesis else (KafkaException,)

    def _source_down(self, exc: Exception) -> PipelineFailed:
        """The source did not answer the start positions: the query never started, nothing was
        committed; one line naming the flags to fix (it was a traceback from the client)."""
        if self.kinesis:
            where = f"Kinesis at {self.config.kinesis_endpoint or 'AWS'}"
            fix = ("start the emulator or fix --kinesis-endpoint, --region or the credentials (they need "
                   "kinesis:ListShards, kinesis:GetShardIterator and kinesis:GetRecords on the stream)")
        else:
            where, fix = f"Kafka at {self.config.bootstrap}", "start the broker or fix --bootstrap"
        self.failure = PipelineFailed(f"{where} did not answer the start positions "
                                      f"({summarize_error(str(exc))}): {fix}; nothing was committed")
        self._heartbeat()
        log.error("pipeline.failed", job=self.config.job, error=str(self.failure))
        return self.failure

    def _new_resolver(self) -> Any:
        if self.kinesis:
            return kinesis_source.KinesisPositions(self.config.kinesis_endpoint, self.config.kinesis_region)
        return KafkaOffsets(self.config.bootstrap)

    def drain(self) -> None:
        """Pause once the in-flight batch has committed; report stopped@<generation>.

        The query stays up but admits no data (the pause file) and processes nothing, so the
        controller can migrate; `start` then resumes it in place or replaces it.
        """
        if self.query is None or not self.query.isActive:
            self._heartbeat()
            return
        began = time.perf_counter()
        self._drained_at = (began, self.layout.generation)
        if not self._pause(self.config.drain_wait_s):
            # A batch that never ends (a stuck process function): keep admitting nothing and say
            # so; the controller's drain timeout then aborts the rescale and resumes this layout.
            log.error("pipeline.drain_stuck", job=self.config.job, waited_s=self.config.drain_wait_s,
                      fix="a micro-batch did not finish: check the process function")
            return
        self._heartbeat()
        log.info("pipeline.drained", job=self.config.job, generation=self.layout.generation,
                 seconds=round(time.perf_counter() - began, 3))

    def _pause(self, timeout_s: float | None = None) -> bool:
        """Admit nothing more and wait for the in-flight batch; False if it outlasted `timeout_s`."""
        Path(self._pause_file).touch()
        with self._lock:
            self.draining = True  # any batch that starts from now on returns without processing
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._busy or self.query.status.get("isTriggerActive", False):
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _stop_when_idle(self) -> None:
        self._pause()
        self.query.stop()

    def _apply_startpoints(self, layout: Layout, cp: Checkpoints, resolver: Any) -> bool:
        fanned = self.store.fan_out_startpoints(layout)
        for key, startpoint in fanned.startpoints.items():
            pinned: Startpoint = startpoint.resolve(key.topic, key.partition, resolver)
            if pinned is not startpoint:
                self.store.pin_startpoint(key, startpoint, pinned)
            cp.apply_startpoint(key.task, key.topic, key.partition, pinned.resolved_offset)
            log.info("startpoint.applied", job=self.config.job, topic=key.topic,
                     partition=key.partition, task=key.task, offset=pinned.resolved_offset)
        return bool(fanned.startpoints)

    def _slots(self, layout: Layout) -> list[list[str]]:
        """Partition groups bin-packed into at most `parallelism` slots: every virtual task of a
        group lands in one slot, so a partition is read once and fanned out locally."""
        groups = sorted({t.partitions for t in layout.virtual_tasks()}, key=lambda g: sorted(g))
        count = self.config.parallelism or self.spark.sparkContext.defaultParallelism
        slots: list[list[str]] = [[] for _ in range(max(1, min(count, len(groups))))]
        for i, group in enumerate(groups):
            slots[i % len(slots)] += [offset_key(*tp) for tp in sorted(group)]
        return slots

    # --- one micro-batch -----------------------------------------------------------------------

    def _on_batch(self, df: DataFrame, batch_id: int) -> None:
        with self._lock:
            if self.draining or self.failure is not None:
                return
            self._busy = True
        try:
            self._process_batch(df)
        except StaleGeneration as exc:
            self.failure = exc
            raise
        finally:
            self._busy = False

    def _process_batch(self, df: DataFrame) -> None:
        layout, cp, sink, process = self.layout, self.checkpoints, self.sink, self.process
        assert layout is not None and cp is not None
        generation = layout.generation
        began, began_at = time.perf_counter(), time.time()
        batch = self._committed_batch + 1
        sink.prepare(generation, batch, cp)
        if self._drained_at is not None and generation > self._drained_at[1]:
            # The first batch of a newer generation: processing stopped from the drain to now.
            self.metrics.restarted(began - self._drained_at[0])
            self._drained_at = None
        budget = self.config.batch_seconds
        drain_requested = _drain_probe(self.config.redis_url, self.config.job)
        read = None if self.kinesis else _slot_reader(self.config)

        def slot(batches):
            from pyspark import TaskContext

            freeze_imports()
            slot_id = TaskContext.get().partitionId()
            waited = time.perf_counter_ns()
            batches = list(batches)
            if not batches:
                return
            table = pa.Table.from_batches(batches)
            if read is not None:  # Kafka: the rows are the slot's ranges, read here
                table = read(table)
                if not table.num_rows:
                    return
            read_ns, read_rows, read_end_ns = time.perf_counter_ns() - waited, table.num_rows, time.time_ns()
            result = run_slot(table, cp, process, WallDeadline(budget, stop=drain_requested))
            sink.write(generation, batch, slot_id, result.outputs, result.sources if sink.wants_sources else ())
            yield pa.RecordBatch.from_pylist(
                [{"task": p.task, "topic": p.topic, "partition": p.partition,
                  "next_offset": str(p.next_offset), "records": p.records, "outputs": p.outputs,
                  "process_ns": p.process_ns, "wall_ns": result.wall_ns, "slot": slot_id,
                  "histogram": list(p.histogram), "busy_ns": p.busy_ns,
                  "pending": p.pending, "read": p.read, "slot_records": result.records,
                  "hottest": list(p.hottest), "mark_residues": list(p.marks),
                  "mark_offsets": [str(v) for v in p.marks.values()], "modulus": p.modulus,
                  "cpu_ns": p.cpu_ns, "share_residues": [r for r, _ in p.residues],
                  "share_counts": [n for _, n in p.residues], "read_ns": read_ns,
                  "read_rows": read_rows, "read_end_ns": read_end_ns, "busiest_ns": result.busiest_ns}
                 for p in result.progress],
                schema=PROGRESS_SCHEMA,
            )

        if self.kinesis:  # records arrive as rows: hash them in the JVM on the way
            df = df.withColumn("h", key_hash_column())
        rows = df.mapInArrow(slot, PROGRESS_TYPE).collect()
        if not rows:
            self._saturated_before = False  # the next batch's cycle from the last commit holds this one
            self._last_trigger = None  # and its trigger, this one's time
            return
        touched: set[str] = set()
        progress: list[TaskProgress] = []
        slots: dict[int, SlotStats] = {}
        for row in rows:
            slots[row["slot"]] = SlotStats(row["slot_records"], row["wall_ns"] / 1e9, row["read_ns"] / 1e9,
                                           row["read_rows"], row["busiest_ns"] / 1e9)
            marks = dict(zip(row["mark_residues"] or (), map(int, row["mark_offsets"] or ()), strict=True))
            with self._cp_lock:
                cp.advance(row["task"], row["topic"], row["partition"], int(row["next_offset"]),
                           marks, row["modulus"])
            touched.add(row["task"])
            progress.append(TaskProgress(
                row["task"], row["topic"], row["partition"], int(row["next_offset"]), records=row["records"],
                outputs=row["outputs"], process_ns=row["process_ns"], histogram=tuple(row["histogram"] or ()),
                busy_ns=row["busy_ns"], pending=row["pending"], read=row["read"],
                hottest=tuple(row["hottest"] or ()), marks=marks, modulus=row["modulus"], cpu_ns=row["cpu_ns"],
                residues=tuple(zip(row["share_residues"] or (), row["share_counts"] or (), strict=True))))
        self.store.commit(generation, {t: cp.progress(t) for t in touched}, batch=batch)
        self._committed_batch = batch
        self._restarts = 0
        sink.finalize(generation, batch)
        self.batches += 1
        self._publish_group_offsets(cp)
        self.admission.observe(progress)
        committed_at = time.perf_counter()
        # the tasks' work: the most one slot's thread spent on records. What else a slot spends
        # (accepting its records, cutting lanes, starting threads: 0.008 s a slot on the demo,
        # runs k17 and k19) is a fixed cost of the batch like its commit, which the simulator's
        # batch charges apart from the records' work; taken with the slot's wall, it was in
        # neither, and replays at the knee read the lag 0.02-0.04 low (runs k16-k19)
        worked = max(s.busiest_seconds for s in slots.values())
        reader = max(slots.values(), key=lambda s: s.read_seconds)  # the slot the batch waited on to read
        # A saturated batch's cycle is what a saturated job pays per batch only if the batch
        # before it was saturated too: then it began at that commit, or waited for a trigger every
        # saturated batch waits for (a deadline shorter than the trigger's interval), a real loss.
        # After a batch that kept up, it waited for its trigger or for data: the step's first
        # saturated batch in run 143 read 0.41 s where the later ones read 0.16-0.21 s, and after
        # a 3 s pause one read 3.55 s (the test): a burst that lands after a quiet spell (an
        # upstream dump, a backfill at once) would have shown the daemon a cost as long as the
        # spell, and a capacity of next to nothing.
        saturated = any(p.pending for p in progress)
        planning = self._planning_s()
        latency = planning + committed_at - began - worked if any(p.records for p in progress) else None
        # of that, what was neither the tasks' work nor the read the batch waited on: it does not
        # grow with the batch's fill, so every batch tells how far a saturated one's cost moved
        unread = None if latency is None or not self._cycles_warm else max(0.0, latency - reader.read_seconds)
        if self._cycles_warm and self._saturated_before and saturated:
            self.admission.observe_cycle(committed_at - self._last_commit, worked, reader.read_records, layout.factor,
                                         unread_s=unread, read_s=reader.read_seconds)
        if unread is not None:
            self.admission.observe_unread(unread, layout.factor)
        # where the last batch ran past its trigger's interval, this one's trigger came as soon as
        # it was done, saturated or not: what Spark took from that commit to it
        trigger = began - planning  # when Spark fired this batch, as near as its progress tells
        gap = gap_after_commit(self._last_trigger, self._last_commit, trigger, self.config.trigger_seconds)
        if self._cycles_warm and gap is not None:
            self.admission.observe_gap(gap)
        # A saturated batch's read only (and not a query's first two batches: their reads start
        # the Python workers). A light batch reads at another load on the endpoint: the Kinesis
        # emulator serves one call at a time, so a read while a step's records were written took
        # 0.19-0.35 s for 106-130 records and one after it 0.06-0.16 s for 4-17, and a line
        # through both read 1.0-3.1 ms a record where a slot reads 7,000 in 1.2 s: the exported
        # read stood at 25-50 times its level for 1-14 s, and a tick that read it scaled the
        # shipped demo 8 -> 16 with the job at 43% (runs h2, h3, session 91). Saturated reads
        # at two factors still tell what a record adds (`ReadCost`).
        if self._cycles_warm and saturated:
            self.admission.observe_read(reader.read_records, reader.read_seconds)
        if latency is not None:
            self.admission.observe_latency(latency, warm=self._cycles_warm)
            fill = read_fill(progress, self._spans)
            if self._cycles_warm and fill is not None:
                # with the records its slots read: the wait grows with them (accepting and hashing
                # them, cutting lanes, writing the outputs), not with the fill alone (session 83)
                self.metrics.observe_commit(fill, latency, sum(s.read_records for s in slots.values()))
            if self.kinesis and self._cycles_warm:  # a query's first reads wait for its Python workers
                cut = min(row["read_end_ns"] for row in rows) / 1e9
                self.admission.observe_read_boundary(planning + cut - began_at)
        # A query's second batch still pays its start (the JVM and the Python workers warming
        # up): measured on a backlog, its fixed cost read 0.56-0.75 s in three starts where the
        # batches after it read 0.2-0.35 s, and a load that saturates no later batch kept
        # that figure for the daemon (run 124: 0.59 s until its first rescale, and one rescale
        # more than its replay on the ramp). Its cycle is not taken for the job's fixed cost.
        self._cycles_warm, self._last_commit = self._last_commit is not None, committed_at
        self._last_trigger = trigger
        self._saturated_before = saturated
        self._write_plan(layout, cp)
        self.metrics.observe_batch(progress, _positions(cp), time.perf_counter() - began,
                                   slots=slots, admission=self.admission)
        if self.on_batch is not None:
            self.on_batch(self, progress)

    def _planning_s(self) -> float:
        """Spark's time from a trigger to the batch function (end offsets, the offset log,
        planning), as it measured it for the last batch: part of a record's wait for its commit
        that the batch function does not see. 0 before Spark reported a batch."""
        if self.query is None:  # the first batch may run before start() returned the query
            return 0.0
        try:
            durations = (self.query.lastProgress or {}).get("durationMs") or {}
        except Exception:  # noqa: BLE001 - a progress read must never fail a committed batch
            return 0.0
        return sum(float(durations.get(k, 0)) for k in ("latestOffset", "getBatch", "queryPlanning",
                                                          "walCommit")) / 1000

    def _publish_group_offsets(self, cp: Checkpoints) -> None:
        """Per partition, the lowest next offset of its virtual tasks, committed to the job's
        consumer group: Burrow, kafka-exporter and KEDA then see the real lag."""
        if self._group is None:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in cp.start_offsets().items() if o is not None]
        if offsets:
            try:
                self._group.commit(offsets=offsets, asynchronous=False)
            except Exception as exc:  # lag reporting must never fail a committed batch
                log.warning("consumer_group.commit_failed", job=self.config.job, error=str(exc))

    def close(self) -> None:
        self.sink.close()
        if self._group is not None:
            self._group.close()
        if self._resolver is not None:
            self._resolver.close()
        self._workdir()


@contextlib.contextmanager
def _scratch_checkpoint(spark: SparkSession) -> Iterator[None]:
    """`SCRATCH_CHECKPOINT` on the session while a query starts, unless the session set one of
    them (`--conf`, the builder, spark-defaults): then it is the user's choice, whole."""
    conf, built = spark.conf, spark.sparkContext.getConf()
    if any(conf.get(key, None) is not None or built.contains(f"spark.hadoop.{key}") for key in SCRATCH_CHECKPOINT):
        yield
        return
    for key, value in SCRATCH_CHECKPOINT.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key in SCRATCH_CHECKPOINT:
            conf.unset(key)


WORKDIR_PREFIX = "autosizer-agent-"  # then the driver's pid, for a reader of /tmp
OWNER_FILE = "owner"  # the host and pid of the driver that made the directory


def _owner() -> str:
    return f"{socket.gethostname()} {os.getpid()}"


def _remove_stale_workdirs() -> None:
    """Remove the work directories of drivers that died without closing (`kill -9`, a lost
    node's restart): nothing else would, one per crash for as long as the host lives. Stale
    means made on this host (a /tmp shared with other containers holds their pids, not ours)
    by a pid that is gone; one whose pid is alive (or reused) is left alone, as is any without
    an owner (made before session 39, or killed before it wrote one)."""
    host = socket.gethostname()
    for path in Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}*"):
        try:
            made_on, pid = (path / OWNER_FILE).read_text().rsplit(" ", 1)
        except (OSError, ValueError):
            continue
        if made_on == host and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            log.info("pipeline.stale_workdir_removed", path=str(path), pid=int(pid))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _slot_reader(config: PipelineConfig) -> Callable[[pa.Table], pa.Table]:
    """What a Kafka slot calls on its ranges (`autosizer-kafka-ranges`) to get its records, with
    the source's own patience: every attempt's timeout, as often as it would retry."""
    bootstrap, timeout_s = config.bootstrap, config.kafka_timeout_ms / 1000 * config.kafka_retries
    return lambda ranges: read_slot(bootstrap, ranges, timeout_s)


def _drain_probe(redis_url: str, job: str) -> Callable[[], bool]:
    """For the slots (on executors): has the controller asked for a drain? Then a saturated batch
    stops at its tasks' current records instead of its deadline. A Redis error means "no": the
    deadline still ends the batch."""
    channel: list[ControlChannel] = []

    def requested() -> bool:
        try:
            if not channel:
                channel.append(ControlChannel(MetadataStore(redis_url, job)))
            return channel[0].drain_pending()
        except Exception:
            return False

    return requested


def _positions(cp: Checkpoints) -> dict[tuple[str, str, int], int | None]:
    """Every virtual task's next offset per partition: what the lag series are computed from."""
    return {(t.name, tp, p): cp.position(t.name, tp, p)
            for t in cp.layout.virtual_tasks() for tp, p in t.partitions}
