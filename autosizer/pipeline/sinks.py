"""Where the user's outputs go. Sinks are configuration (and what `prepare` found), so they
pickle to executors.

Order per micro-batch: `prepare` (driver) → `write` per slot (executors) → commit to Redis →
`finalize` (driver). Both sinks are exactly once:
- the file sink: a crash before the commit retries the same batch number, and `prepare` clears
  that attempt's files; a crash after the commit is mended by `recover` at the next start;
- the Kafka sink: what a topic got cannot be taken back, so `prepare` reads back what was written
  since the last batch it knows committed and `write` leaves out every output already there.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.parquet as pq
import structlog

from autosizer.elasticity import Checkpoints
from autosizer.pipeline.slots import Output, Source

COMMITTED = "_COMMITTED"
OUTPUT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary())])
SOURCE_HEADER = "autosizer-source"  # on every Kafka output: "<topic>:<partition>:<offset>:<key hash>:<index>"
JOB_HEADER = "autosizer-job"  # and the job that wrote it: two jobs may read one topic and write to one

log = structlog.get_logger(__name__)


class SinkLedger(Protocol):
    """What a sink keeps in the job's store (`MetadataStore` is one)."""

    job: str

    def committed_batch(self, generation: int) -> int: ...

    def sink_marks(self, topic: str) -> dict[int, int] | None: ...

    def set_sink_marks(self, topic: str, marks: Mapping[int, int]) -> None: ...


class Sink(Protocol):
    wants_sources: bool  # whether `write` needs each output's source (they cost time to make)

    def recover(self, ledger: SinkLedger) -> None:
        """At start, on the driver: mend what a crash left (the ledger knows what committed)."""
        ...

    def prepare(self, generation: int, batch: int, checkpoints: Checkpoints) -> None: ...

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output],
              sources: Sequence[Source]) -> None: ...

    def finalize(self, generation: int, batch: int) -> None: ...

    def close(self) -> None: ...


class FileSink:
    """Parquet files, exactly once: `generation=G/batch=B/slot-S.parquet`, plus a `_COMMITTED`
    marker written only after the batch's checkpoints are committed. Readers take marked
    batches only (`read_committed`)."""

    wants_sources = False

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(path)

    def _batch_dir(self, generation: int, batch: int) -> Path:
        return Path(self.path) / f"generation={generation}" / f"batch={batch:010d}"

    def prepare(self, generation: int, batch: int, checkpoints: Checkpoints) -> None:
        shutil.rmtree(self._batch_dir(generation, batch), ignore_errors=True)

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output],
              sources: Sequence[Source] = ()) -> None:
        if not outputs:
            return
        directory = self._batch_dir(generation, batch)
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.table(
            {"key": pa.array([k for k, _ in outputs], pa.binary()),
             "value": pa.array([v for _, v in outputs], pa.binary())},
            schema=OUTPUT_SCHEMA,
        )
        final = directory / f"slot-{slot:05d}.parquet"
        temporary = directory / f".slot-{slot:05d}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table, temporary)
        os.replace(temporary, final)  # a retried task replaces, never duplicates

    def finalize(self, generation: int, batch: int) -> None:
        directory = self._batch_dir(generation, batch)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / COMMITTED).touch()

    def close(self) -> None:
        pass

    def recover(self, ledger: SinkLedger) -> None:
        root = Path(self.path)
        if not root.exists():
            return
        for gen_dir in root.glob("generation=*"):
            generation = int(gen_dir.name.split("=")[1])
            last = ledger.committed_batch(generation)
            for batch_dir in gen_dir.glob("batch=*"):
                batch = int(batch_dir.name.split("=")[1])
                if batch <= last:
                    (batch_dir / COMMITTED).touch()  # committed, marker lost in a crash
                elif not (batch_dir / COMMITTED).exists():
                    shutil.rmtree(batch_dir, ignore_errors=True)  # never committed


def read_committed(path: str | os.PathLike[str]) -> pa.Table:
    """Every output of committed batches, in (generation, batch, slot) order."""
    root = Path(path)
    tables = []
    for marker in sorted(root.glob(f"generation=*/batch=*/{COMMITTED}"), key=_batch_order):
        for part in sorted(marker.parent.glob("slot-*.parquet")):
            tables.append(pq.read_table(part))
    return pa.concat_tables(tables) if tables else OUTPUT_SCHEMA.empty_table()


def _batch_order(marker: Path) -> tuple[int, int]:
    match = re.search(r"generation=(\d+)/batch=(\d+)", marker.as_posix())
    assert match is not None
    return int(match.group(1)), int(match.group(2))


class KafkaSink:
    """A Kafka topic, exactly once, through an idempotent producer (no duplicates from its own
    retries).

    A batch's outputs reach the topic before its checkpoints commit, and a topic cannot take them
    back: a crash, a failed batch or a fenced commit in between left them there, and the redo
    wrote them again (at least once, until session 45). Now every output carries its record's
    identity (`SOURCE_HEADER`), and the sink keeps in Redis each partition's end after the last
    batch it saw commit (its marks). `prepare` reads back what lies past the marks; an output
    there whose record the checkpoints still hold unprocessed is one a redo must not write again,
    and `write` leaves it out (a record's outputs left out whole or in part, by their index). A
    retried Spark task also reads back what its batch wrote so far. A batch after one that
    committed clean here reads nothing back (`_settled`): all this job wrote lay below the ends
    `finalize` read, and it writes nothing between batches, so what came since is another
    producer's. A clean run costs two reads of the topic's ends a batch, never a read of outputs.

    Downstream consumers see each output once. Another producer writing to the same topic (or
    another job: `JOB_HEADER`) is read past by the first batch after a start or a failed batch."""

    wants_sources = True

    def __init__(self, bootstrap: str, topic: str, timeout_s: float = 30.0, delivery_s: float = 60.0):
        self.bootstrap, self.topic, self.timeout_s, self.delivery_s = bootstrap, topic, timeout_s, delivery_s
        self.written: frozenset[Source] = frozenset()  # outputs already there for unprocessed records
        self.ends: dict[int, int] = {}  # the topic's ends when the batch was prepared
        self.job = ""  # the job writing (`recover`), in every output's `JOB_HEADER`
        self._ledger: SinkLedger | None = None  # driver only, like the rest below
        self._marks: dict[int, int] | None = None
        self._clean = True
        self._settled = False  # the last batch committed clean in this process: nothing to read back
        self._consumer: Any = None
        self._admin: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_ledger": None, "_consumer": None, "_admin": None}

    def recover(self, ledger: SinkLedger) -> None:
        self._ledger, self._marks, self.job = ledger, ledger.sink_marks(self.topic), ledger.job
        self._settled = False  # a start reads back from the marks

    def prepare(self, generation: int, batch: int, checkpoints: Checkpoints) -> None:
        assert self._ledger is not None, "recover() binds the sink to the job's store first"
        ends, settled, self._settled = self._ends(), self._settled, False
        if settled:  # what lies past the last clean batch's ends is another producer's
            self.written, self.ends, self._clean = frozenset(), ends, True
            return
        if self._marks is None:  # never used by this job: nothing of its outputs is there
            self._marks = ends
            self._ledger.set_sink_marks(self.topic, ends)
        tail = {p: (self._marks.get(p, 0), end) for p, end in ends.items() if end > self._marks.get(p, 0)}
        written, lowest = set(), {}
        known = set(checkpoints.layout.partitions())
        for partition, offset, source in self._read_back(tail):
            if _unprocessed(checkpoints, known, source):
                written.add(source)
                lowest.setdefault(partition, offset)
        if tail:  # everything below an output still to be redone is done: the marks move up to it
            marks = {p: lowest.get(p, end) for p, end in ends.items()}
            if marks != self._marks:
                self._marks = marks
                self._ledger.set_sink_marks(self.topic, marks)
            log.info("sink.read_back", job=self.job, topic=self.topic,
                     records=sum(e - b for b, e in tail.values()), already_written=len(written))
        self.written, self.ends, self._clean = frozenset(written), ends, not written

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output],
              sources: Sequence[Source] = ()) -> None:
        if not outputs:
            return
        from pyspark import TaskContext

        written = self.written
        context = TaskContext.get()
        if context is not None and context.attemptNumber() > 0:
            # a retried task: its first attempt may have written part of these outputs
            latest = self._ends()
            written = written | {s for _, _, s in self._read_back(
                {p: (self.ends.get(p, 0), end) for p, end in latest.items() if end > self.ends.get(p, 0)})}
            self.close()
        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        settings = (self.bootstrap, self.delivery_s, self.timeout_s)
        producer, job = _producer(*settings), self.job.encode()
        for (key, value), source in zip(outputs, sources, strict=True):
            if source in written:
                continue
            producer.produce(self.topic, key=key, value=value,
                             headers=[(JOB_HEADER, job), (SOURCE_HEADER, _encode(source))], on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(self.delivery_s)
        if remaining or errors:
            _PRODUCERS.pop(settings, None)  # a fresh one for the retry
            unsettled = _abandon(producer, self.timeout_s)
            raise RuntimeError(
                f"Kafka sink {self.topic!r}: {len(errors) + unsettled} undelivered, errors {errors[:3]}: "
                "check the broker; the batch is not committed and will be retried"
                + (f" ({unsettled} still in flight to the broker)" if unsettled else "")
            )

    def finalize(self, generation: int, batch: int) -> None:
        """The batch committed. With nothing left to redo, everything in the topic now is done:
        the marks move to its ends (else `prepare` moved them as far as they may go)."""
        if self._clean and self._ledger is not None:
            ends = self._ends()
            if ends != self._marks:  # a batch that wrote nothing leaves them, and Redis, alone
                self._marks = ends
                self._ledger.set_sink_marks(self.topic, ends)
            self._settled = True

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _reader(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "autosizer-sink",
                                       "enable.auto.commit": False, "log_level": 0})
        return self._consumer

    def _ends(self) -> dict[int, int]:
        """Each partition's high watermark, in one request for all of them (none: the topic does
        not exist yet)."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        found = self._admin.list_topics(self.topic, timeout=self.timeout_s).topics.get(self.topic)
        if found is None or found.error is not None:
            return {}
        asked = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in sorted(found.partitions)}
        answers = self._admin.list_offsets(asked, request_timeout=self.timeout_s)
        return {tp.partition: future.result().offset for tp, future in answers.items()}

    def _read_back(self, ranges: Mapping[int, tuple[int, int]]) -> Iterator[tuple[int, int, Source]]:
        """(partition, offset, source) of every output this job wrote in [begin, end) of each
        partition (another job's, or a record without our headers, is passed over)."""
        from confluent_kafka import TopicPartition

        if not ranges:
            return
        consumer = self._reader()
        consumer.assign([TopicPartition(self.topic, p, begin) for p, (begin, _) in ranges.items()])
        left = dict(ranges)
        deadline = time.monotonic() + self.timeout_s
        try:
            while left:
                messages = consumer.consume(1000, timeout=0.5)
                if messages:  # the wait is for a broker that stops answering, not for a long tail
                    deadline = time.monotonic() + self.timeout_s
                for message in messages:
                    partition = message.partition()
                    if message.error() is not None or partition not in left or message.offset() >= left[partition][1]:
                        continue
                    headers = dict(message.headers() or ())
                    if headers.get(JOB_HEADER) == self.job.encode() and SOURCE_HEADER in headers:
                        yield partition, message.offset(), _decode(headers[SOURCE_HEADER])
                for tp in consumer.position([TopicPartition(self.topic, p) for p in list(left)]):
                    if tp.offset >= left[tp.partition][1]:
                        del left[tp.partition]
                if left and time.monotonic() > deadline:
                    raise RuntimeError(
                        f"Kafka sink {self.topic!r}: reading back partitions {sorted(left)} got nothing "
                        f"for {self.timeout_s:g}s: check the broker; the batch is not committed and will be retried")
        finally:
            consumer.unassign()


_PRODUCERS: dict[tuple[str, float, float], Any] = {}  # per Python worker (Spark reuses them)


def _producer(bootstrap: str, delivery_s: float, timeout_s: float) -> Any:
    """The worker's idempotent producer for `bootstrap`, made once. A new one spends 0.5-1 s
    before its first delivery (its producer id handshake, measured on noida-db), and the sink
    made one for every slot of every batch until session 45 (`benchmarks/bench_kafka_sink.py`).

    A message gives up after `delivery_s` (librdkafka's default is 300 s) and a request after
    `timeout_s`: by the time a failed write has waited both out (`_abandon`), the producer has
    settled every message, delivered or failed, and retries none in the background after the
    retried task's read-back. Until session 48 a message in flight to a broker that stopped
    answering was retried for five minutes, and could land after the redo had written it again."""
    key = (bootstrap, delivery_s, timeout_s)
    if key not in _PRODUCERS:
        from confluent_kafka import Producer

        _PRODUCERS[key] = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                    "linger.ms": 5, "log_level": 0,
                                    "message.timeout.ms": max(1, round(delivery_s * 1000)),
                                    "request.timeout.ms": max(1, round(timeout_s * 1000))})
    return _PRODUCERS[key]


def _abandon(producer: Any, wait_s: float) -> int:
    """Drop what a failed write still queues, and wait for what is in flight to settle; the
    messages still in flight after `wait_s` (0 if none). A producer left with its queue kept
    retrying it in the background (the raised error's traceback keeps it alive), so outputs
    could land once the broker came back, after the retried task's read-back, and be written
    twice. What never left the producer is safe to drop; what is in flight may be written,
    and waiting for its answer settles it before the retry reads back."""
    producer.purge(in_queue=True, in_flight=False)
    return producer.flush(wait_s)


def _unprocessed(checkpoints: Checkpoints, known: set, source: Source) -> bool:
    """Does a virtual task still hold the output's record unprocessed (so a redo reads it)?"""
    topic, partition, offset, key_hash, _ = source
    if (topic, partition) not in known:
        return False
    return any(checkpoints.accepts(task.name, topic, partition, offset, key_hash)
               for task in checkpoints.layout.readers(topic, partition))


def _encode(source: Source) -> bytes:
    return ":".join(map(str, source)).encode()


def _decode(header: bytes) -> Source:
    topic, partition, offset, key_hash, index = header.decode().rsplit(":", 4)
    return topic, int(partition), int(offset), int(key_hash), int(index)
