"""`autosizer-kafka`: a Kafka source on PySpark's Python Data Source API, over confluent-kafka.

`autosizer-kafka-ranges` plans the same batches but hands each Spark task only its ranges, for a
consumer that reads them itself (`read_slot`): what the pipeline's slots run on.

Offsets are per partition (`{"<topic>/<partition>": next_offset}`). The starting offsets come
from the job's checkpoints in Redis, not from Spark's own checkpoint, so every query run of a new
layout generation starts where the virtual tasks left off. With a read plan, a partition the plan
leaves out is not read: one the layout does not have yet (a partition added on the broker), or an
expansion child behind its barrier, until the agent's next plan lists it. Without a plan,
partitions that appear at run time are read from their beginning.

Options:
  kafka.bootstrap.servers  required
  subscribe                comma-separated topics
  startingOffsets          JSON {"topic/partition": offset}; other partitions use `defaultOffsets`
  defaultOffsets           earliest (default) or latest, for partitions without a starting offset
  maxRecordsPerBatch       an upper bound on records per micro-batch (memory), shared fairly
  planFile                 a local JSON file {"topic/partition": {"start": o, "span": n}} the agent
                           rewrites after every commit: each batch reads a partition from `start`
                           (its slowest virtual task) up to `span` records past it and, where
                           given, below `stop` (a coupled expansion child behind its parent), and
                           reads no partition the plan leaves out. Without it, a batch reads from where the
                           previous one ended, up to the high watermark
  slots                    JSON list of lists of "topic/partition": the partitions each Spark task
                           reads together (all virtual tasks of a partition group in one slot);
                           partitions in no slot get a Spark task each
  pauseFile                while this local file exists, no new data is admitted (the agent's drain:
                           triggers go idle at once; the stream reader runs on the driver node)
  kafka.retries            metadata attempts before the query fails (default 5)
  kafka.timeoutMs          per attempt (default 5000)
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute
from confluent_kafka import Consumer, KafkaException, TopicPartition
from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from autosizer.pipeline.worker_gc import freeze_imports

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
)
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


READ_FROM = "readFrom"  # the key of an end offset that holds where each partition was read from
# The key of the plan (and of an end offset) numbering the agent's starts. Spark runs a batch only
# when the end offset differs from the last one. A batch skipped during a drain leaves the
# checkpoints where they were, so after the start the plan can give the very same offsets again
# (a backlog longer than the span, no new measurement to change the span): without this number
# Spark would see no new data, and the job would stall with a backlog.
EPOCH = "_epoch"


class KafkaUnavailable(RuntimeError):
    """The broker did not answer within the configured retries; nothing was committed."""


def offset_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def parse_offset_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition("/")
    return topic, int(partition)


@dataclass(frozen=True)
class KafkaRange:
    """One Kafka partition's offsets [start, end) in one micro-batch."""

    topic: str
    partition: int
    start: int
    end: int


@dataclass(frozen=True)
class KafkaSlot(InputPartition):
    """The ranges one Spark task reads: one slot of the pipeline."""

    ranges: tuple[KafkaRange, ...]


class KafkaDataSource(DataSource):
    """Registered as `spark.readStream.format("autosizer-kafka")`."""

    @classmethod
    def name(cls) -> str:
        return "autosizer-kafka"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)


class KafkaStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]):
        options = CaseInsensitiveDict(options)  # Spark hands options over lower-cased
        if "kafka.bootstrap.servers" not in options:
            raise ValueError("autosizer-kafka needs option kafka.bootstrap.servers (host:port,...)")
        if not options.get("subscribe"):
            raise ValueError("autosizer-kafka needs option subscribe (comma-separated topics)")
        self.bootstrap = options["kafka.bootstrap.servers"]
        self.topics = [t.strip() for t in options["subscribe"].split(",") if t.strip()]
        self.starting = {k: int(v) for k, v in json.loads(options.get("startingOffsets") or "{}").items()}
        self.default = options.get("defaultOffsets", "earliest")
        if self.default not in ("earliest", "latest"):
            raise ValueError(f"defaultOffsets must be earliest or latest, not {self.default!r}")
        self.slots: list[list[str]] = json.loads(options.get("slots") or "[]")
        self.pause_file = options.get("pauseFile")
        self.plan_file = options.get("planFile")
        self.max_records = int(options["maxRecordsPerBatch"]) if options.get("maxRecordsPerBatch") else None
        self.retries = int(options.get("kafka.retries", "5"))
        self.timeout_s = int(options.get("kafka.timeoutMs", "5000")) / 1000
        self._consumer: Any = None

    # --- offsets (run on the driver side) ------------------------------------------------------

    def initialOffset(self) -> dict:
        offsets = {}
        for topic, partition in self._partitions():
            key = offset_key(topic, partition)
            if key in self.starting:
                offsets[key] = self.starting[key]
            else:
                low, high = self._watermarks(topic, partition)
                offsets[key] = low if self.default == "earliest" else high
        return offsets

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next batch, with where each partition is read from under `READ_FROM`
        (so the offset log records exactly what a batch read, and a batch runs again when a task
        left work at its deadline even though no new data arrived)."""
        if self.pause_file and os.path.exists(self.pause_file):
            return dict(start)
        plan = read_plan(self.plan_file)
        planned = any(k != EPOCH for k in plan)
        begins: dict[str, int] = {}
        ends: dict[str, int] = {}
        for topic, partition in self._partitions():
            key = offset_key(topic, partition)
            # A partition that appeared at run time starts at 0.
            begin = plan[key]["start"] if key in plan else start.get(key, 0)
            begins[key] = begin
            if planned and key not in plan:
                ends[key] = begin  # not in the layout yet, or behind a barrier: not read
                continue
            high = max(begin, self._watermarks(topic, partition)[1])
            if key in plan:  # a coupled expansion child stops where its parent lets it (`coupling`)
                high = max(begin, min(high, plan[key].get("stop", high)))
            ends[key] = min(high, begin + plan[key]["span"]) if key in plan else high
        if isinstance(limit, ReadMaxRows):
            ends = _admit(begins, ends, limit.max_rows)
        out = {**ends, READ_FROM: begins}
        if EPOCH in plan:
            out[EPOCH] = plan[EPOCH]
        return out

    def partitions(self, start: dict, end: dict) -> list[KafkaSlot]:
        begins = end.get(READ_FROM, {})
        ranges: dict[str, KafkaRange] = {}
        for key, stop in sorted(end.items()):
            if key in (READ_FROM, EPOCH):
                continue
            begin = begins.get(key, start.get(key, 0))
            if stop > begin:
                topic, partition = parse_offset_key(key)
                ranges[key] = KafkaRange(topic, partition, begin, stop)
        return [KafkaSlot(group) for group in pack(self.slots, ranges)]

    def commit(self, end: dict) -> None:
        """Nothing: progress is committed per virtual task to Redis by the pipeline."""

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # --- reading (runs on executors) -----------------------------------------------------------

    def read(self, partition: KafkaSlot) -> Iterator[pa.RecordBatch]:
        yield from read_ranges(self.bootstrap, partition.ranges, self.timeout_s * self.retries)

    # --- metadata ------------------------------------------------------------------------------

    def _metadata_consumer(self) -> Any:
        if self._consumer is None:
            self._consumer = Consumer(
                {"bootstrap.servers": self.bootstrap, "group.id": "autosizer-metadata",
                 "enable.auto.commit": False, "log_level": 0}
            )
        return self._consumer

    def _partitions(self) -> list[tuple[str, int]]:
        metadata = self._retry("list topics", lambda: self._metadata_consumer().list_topics(timeout=self.timeout_s))
        out = []
        for topic in self.topics:
            found = metadata.topics.get(topic)
            if found is None or found.error is not None:
                raise ValueError(
                    f"unknown topic {topic!r} on {self.bootstrap}: create it, or fix the subscribe option"
                )
            out += [(topic, p) for p in sorted(found.partitions)]
        return out

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return self._retry(
            f"watermarks of {topic}[{partition}]",
            lambda: self._metadata_consumer().get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
            ),
        )

    def _retry(self, what: str, call: Any) -> Any:
        """`call` until it answers, for at least `retries` attempts and the outage bound they
        stand for (`retries` x `timeout_s`, `broker_attempts`): an attempt need not wait out its
        timeout. With the broker down, a watermark read can fail at once ("Unknown partition"
        once the client's metadata is gone), so five attempts and their back-offs took 5 s of a
        25 s bound, and the query failed on a 10 s broker restart (a test under load, session 78)."""
        last: Exception | None = None
        deadline = time.monotonic() + self.retries * self.timeout_s
        attempt = 0
        while attempt < self.retries or time.monotonic() < deadline:
            try:
                result = call()
                if result is not None:
                    return result
            except KafkaException as exc:
                last = exc
            time.sleep(max(0.0, min(0.2 * 2**attempt, 2.0, deadline - time.monotonic())))
            attempt += 1
        raise KafkaUnavailable(
            f"Kafka at {self.bootstrap} did not answer {what} in {attempt} attempts over "
            f"{self.retries * self.timeout_s:g}s ({last}): start the broker or fix kafka.bootstrap.servers; "
            f"nothing was committed"
        )


RANGES_SCHEMA = "topic string, partition int, start long, end long"
RANGES_ARROW_SCHEMA = pa.schema(
    [("topic", pa.string()), ("partition", pa.int32()), ("start", pa.int64()), ("end", pa.int64())]
)


class KafkaRangesDataSource(KafkaDataSource):
    """`autosizer-kafka-ranges`: the same batches as `autosizer-kafka` (same options, offsets and
    plan), but each Spark task receives only its slot's ranges, one row per partition, and the
    consumer of those rows reads the records itself (`read_slot`).

    Why: the pipeline's slot needs the records as Arrow in its own Python worker. Through
    `autosizer-kafka` they travel broker -> Python -> JVM -> Python, about 0.3 s of every 3 s
    batch at 30,000 records a slot (measured, BENCHMARKS "where an ordered batch's time goes");
    read in the slot, they travel broker -> Python once."""

    @classmethod
    def name(cls) -> str:
        return "autosizer-kafka-ranges"

    def schema(self) -> str:
        return RANGES_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaRangesStreamReader(self.options)


class KafkaRangesStreamReader(KafkaStreamReader):
    def read(self, partition: KafkaSlot) -> Iterator[pa.RecordBatch]:
        freeze_imports()
        yield pa.RecordBatch.from_pylist(
            [{"topic": r.topic, "partition": r.partition, "start": r.start, "end": r.end}
             for r in partition.ranges],
            schema=RANGES_ARROW_SCHEMA,
        )


def read_slot(bootstrap: str, ranges: pa.Table, timeout_s: float) -> pa.Table:
    """The records of one slot's ranges (rows of `autosizer-kafka-ranges`) as one Arrow table with
    the `autosizer-kafka` schema; an error if the broker cannot deliver all of them."""
    wanted = [KafkaRange(t, p, s, e) for t, p, s, e in zip(
        *(ranges.column(c).to_pylist() for c in ("topic", "partition", "start", "end")), strict=True)]
    return pa.Table.from_batches(list(read_ranges(bootstrap, wanted, timeout_s)), schema=ARROW_SCHEMA)


def pack(slots: Sequence[Sequence[str]], reads: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """One micro-batch's reads (by "topic/partition") in the agent's slots, one Spark task each.
    A read in no slot (a partition adopted at run time: a Kafka expansion's, a Kinesis
    re-shard's child) joins the slot with the fewest reads in this batch, so a batch runs no more
    Spark tasks than the query planned, at most Spark's parallelism. With a task of its own, a
    split's two children made three tasks for two cores, and each saturated batch ran in two
    waves, the third task's deadline starting when a core came free: 6.5 s where two shards'
    batches took 3.3 s (run v7, session 86). Without planned slots each read is a task."""
    left = dict(reads)
    groups = [[left.pop(k) for k in members if k in left] for members in slots]
    if not groups:
        return [(r,) for r in left.values()]
    for read in left.values():
        min(groups, key=len).append(read)  # the first of the least loaded: an idle slot first
    return [tuple(g) for g in groups if g]


def read_plan(path: str | None) -> dict[str, Any]:
    """The agent's read plan, or {} when there is none (the source then reads everything new)."""
    if not path:
        return {}
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def write_plan(path: str, plan: Mapping[str, Any]) -> None:
    """Replace the plan atomically: the source never reads half a file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(plan, f)
    os.replace(tmp, path)


def _admit(start: dict, ends: dict[str, int], max_rows: int) -> dict[str, int]:
    """Cap a batch at `max_rows` records, shared fairly so no partition starves."""
    backlog = {k: ends[k] - start.get(k, 0) for k in ends}
    total = sum(backlog.values())
    if total <= max_rows:
        return ends
    admitted, remaining = dict.fromkeys(ends, 0), max_rows
    pending = sorted((k for k in backlog if backlog[k] > 0), key=lambda k: backlog[k])
    while pending and remaining > 0:
        share = max(1, remaining // len(pending))
        key = pending.pop(0)
        take = min(backlog[key], share, remaining)
        admitted[key], remaining = take, remaining - take
    return {k: start.get(k, 0) + admitted[k] for k in ends}


def read_ranges(bootstrap: str, ranges: Sequence[KafkaRange], timeout_s: float,
                batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
    """The records of every range [start, end), fetched together, as Arrow batches per
    partition, or an error if the broker cannot deliver all of them (a short read would lose
    messages)."""
    pending = {(r.topic, r.partition): _Collected(r) for r in ranges if r.end > r.start}
    if not pending:
        return
    # One consumer per slot, every range assigned at once: a consumer kept across reads waits
    # for its previous long-poll fetch (fetch.wait.max.ms) before fetching a new assignment.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "autosizer-reader", "enable.auto.commit": False,
         "enable.partition.eof": False, "fetch.max.bytes": 52428800, "log_level": 0}
    )
    try:
        consumer.assign([TopicPartition(r.topic, r.partition, r.start) for r in ranges if r.end > r.start])
        deadline = time.monotonic() + timeout_s
        while any(not c.done for c in pending.values()):
            # Ask for exactly what is left: consume() waits until it has that many or times out.
            left = sum(c.left for c in pending.values())
            messages = consumer.consume(max(1, min(10_000, left)), timeout=0.1)
            if not messages:
                if time.monotonic() > deadline:
                    late = next(c for c in pending.values() if not c.done)
                    raise KafkaUnavailable(
                        f"{late.range.topic}[{late.range.partition}]: read stopped at offset "
                        f"{late.next_offset} of [{late.range.start}, {late.range.end}) after "
                        f"{timeout_s:.0f}s: check the broker at {bootstrap}"
                    )
                continue
            deadline = time.monotonic() + timeout_s
            for m in messages:
                if m.error() is not None:
                    raise KafkaUnavailable(f"{m.topic()}[{m.partition()}]: {m.error()}")
                collected = pending.get((m.topic(), m.partition()))
                if collected is not None:
                    collected.add(m)
            for collected in pending.values():
                if len(collected.offsets) >= batch_rows:
                    yield collected.flush()
        for collected in pending.values():
            if collected.offsets:
                yield collected.flush()
    finally:
        consumer.close()


def read_range(bootstrap: str, r: KafkaRange, timeout_s: float, batch_rows: int = 8192) -> Iterator[pa.RecordBatch]:
    """The records of one partition in [start, end) (see `read_ranges`)."""
    yield from read_ranges(bootstrap, [r], timeout_s, batch_rows)


class _Collected:
    """One range's records as they arrive, in offset order."""

    def __init__(self, r: KafkaRange):
        self.range, self.next_offset = r, r.start
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.stamps: list = []

    @property
    def left(self) -> int:
        return max(0, self.range.end - self.next_offset)

    @property
    def done(self) -> bool:
        return self.next_offset >= self.range.end

    def add(self, m: Any) -> None:
        offset = m.offset()
        if offset < self.next_offset or self.done:
            return
        if offset >= self.range.end:
            self.next_offset = self.range.end
            return
        self.keys.append(m.key())
        self.values.append(m.value())
        self.offsets.append(offset)
        self.stamps.append(m.timestamp()[1])
        self.next_offset = offset + 1

    def flush(self) -> pa.RecordBatch:
        batch = _batch(self.keys, self.values, self.offsets, self.stamps, self.range)
        self.keys, self.values, self.offsets, self.stamps = [], [], [], []
        return batch


def _batch(keys: list, values: list, offsets: list, stamps_ms: list, r: KafkaRange) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array([r.topic] * n, pa.string()),
            pa.array([r.partition] * n, pa.int32()),
            pa.array(offsets, pa.int64()),
            pa.compute.multiply(pa.array(stamps_ms, pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


def register(spark: Any) -> None:
    """Make `autosizer-kafka` and `autosizer-kafka-ranges` available in this session."""
    spark.dataSource.register(KafkaDataSource)
    spark.dataSource.register(KafkaRangesDataSource)
