"""`autosizer-kinesis`: a Kinesis source on PySpark's Python Data Source API, over boto3.

A shard is a partition: `shardId-000000000007` of stream `clicks` is `clicks/7`, so the layout,
the buckets, the checkpoints and the read plan are the Kafka pipeline's own. Positions are
sequence numbers (ordered within a shard, up to 56 digits: Python ints, sent to Spark and in
Arrow as decimal text). A task's position is, as with Kafka, the first sequence number it has not
processed: a record's own (a task cut at its deadline) or the last processed one plus one. The
read plan always exists (the agent writes it before the query starts); a batch reads each planned
shard from its `start` up to `span` records, whatever is there. Kinesis has no high watermark, so
the driver asks each planned shard for one record past its start (a GetRecords per shard and
trigger) to tell Spark whether a batch has anything to read, unless the agent's tail on that
shard already counted one, or read the idle shard to its tip since the last peek (`tipsFile`).

Options:
  stream              required: the stream's name
  endpoint            the Kinesis endpoint URL (default: boto3's, i.e. AWS); credentials and
                      region come from boto3's usual chain (environment, profile, role)
  region              AWS region (default: boto3's)
  slots, pauseFile, planFile   as `autosizer-kafka`
  tipsFile            JSON the agent's probe writes: per shard, [the last sequence number its tail
                      counted, when its tail last read to the shard's tip]: a record there or past
                      the start needs no peek, nor does an idle shard read to its tip just now
  kinesis.timeoutMs   how long a read may wait for a shard before the batch fails (default 30000)
  kinesis.outageMs    ride through an endpoint that does not answer (refused, unreachable, timed
                      out, throttled, 5xx) this long: each call is retried, then the batch fails
                      with one line (default 25000, the pipeline's --broker-outage-s)
"""

from __future__ import annotations

import bisect
import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import structlog
from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    DataSource,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit
from pyspark.sql.types import StructType

from autosizer.elasticity.shards import Shard
from autosizer.pipeline.kafka_source import EPOCH, pack, parse_offset_key, read_plan
from autosizer.pipeline.worker_gc import freeze_imports
from autosizer.redaction import redact

SCHEMA = "key binary, value binary, topic string, partition int, offset string, timestamp timestamp"
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.string()),  # the sequence number, in decimal
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)
MISSING = ("ResourceNotFoundException", "InvalidArgumentException")  # no record at that number
# Answers of an endpoint that is there but cannot serve now: worth asking again, as a refused or
# timed-out connection is. Any other answer (no such stream, no access) would come back the same.
BUSY = ("ProvisionedThroughputExceededException", "LimitExceededException", "ThrottlingException",
        "KMSThrottlingException", "InternalFailure", "ServiceUnavailable")
OUTAGE_MS = 25_000  # kinesis.outageMs's default: the pipeline's --broker-outage-s default
PAGE = 10_000  # records a GetRecords asks for: Kinesis's most
# How recently a tail must have read its shard to the tip for the source to take its word that an
# idle shard is still idle (the probe reads every 0.5-1.5 s); older, and the source asks itself.
TIP_FRESH_S = 2.0
LOOKBACK_S = (10, 300, 3600, 86400)  # how far back `upcoming` looks for a shard's last record
# A slot's shards read at once, at most: each is a round trip of its own that Kinesis serves
# apart from the others (a shard's 5 GetRecords a second are its own), so they overlap.
READ_THREADS = 16

log = structlog.get_logger(__name__)


class KinesisUnavailable(RuntimeError):
    """Kinesis did not deliver a shard's records in time; nothing was committed."""


def shard_id(index: int) -> str:
    return f"shardId-{index:012d}"


def shard_index(shard: str) -> int:
    """`shardId-000000000007` -> 7: Kinesis numbers a stream's shards once, children after
    parents, so the number is a stable partition index."""
    prefix, _, number = shard.rpartition("-")
    if prefix != "shardId" or not number.isdigit():
        raise ValueError(f"not a Kinesis shard id: {shard!r}")
    return int(number)


def unavailable_errors() -> tuple[type[Exception], ...]:
    """What a Kinesis call raises when the service cannot answer it (unreachable, refused)."""
    from botocore.exceptions import BotoCoreError, ClientError

    return BotoCoreError, ClientError


def passing(exc: Exception) -> bool:
    """Is `exc` what an endpoint that is away or overloaded answers, so a later call may succeed
    (a connection refused, lost or timed out; a throttle; a 5xx)?"""
    from botocore.exceptions import ClientError, HTTPClientError
    from botocore.exceptions import ConnectionError as Unreachable

    if isinstance(exc, Unreachable | HTTPClientError):
        return True
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return exc.response.get("Error", {}).get("Code") in BUSY or status >= 500
    return False


def kinesis_client(endpoint: str | None = None, region: str | None = None, attempts: int = 5) -> Any:
    """A client whose calls botocore tries `attempts` times (with a backoff that doubles between
    them); a `ShardReader` with an outage bound asks again itself, so its client needs few."""
    from botocore.config import Config

    return _session().client("kinesis", endpoint_url=endpoint or None, region_name=region or None,
                             config=Config(retries={"max_attempts": attempts, "mode": "standard"},
                                           max_pool_connections=READ_THREADS))


_SESSION: Any = None
_SESSION_LOCK = threading.Lock()


def _session() -> Any:
    """One boto3 session per process (a session loads the service model once: 0.1 s a client
    otherwise, and every Spark task makes one) whose clients parse timestamps with `utc_time`."""
    global _SESSION
    with _SESSION_LOCK:
        if _SESSION is None:
            import boto3
            import botocore.session

            core = botocore.session.get_session()
            core.get_component("response_parser_factory").set_parser_defaults(timestamp_parser=utc_time)
            _SESSION = boto3.session.Session(botocore_session=core)
        return _SESSION


def utc_time(value: Any) -> datetime:
    """A timestamp from the wire as an aware datetime in UTC. Every record carries one (its
    ApproximateArrivalTimestamp, epoch seconds), and botocore's own parser takes the local zone
    from dateutil for each: 18-27 µs of CPU a record on the emulator's GetRecords pages against
    9 µs with this (`bench_kinesis.py parse`), paid twice, by the batch and by the driver's tail.
    Anything but a number (no Kinesis call we make returns one) goes to botocore's parser."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    from botocore.utils import parse_timestamp

    return parse_timestamp(value)


@dataclass(frozen=True)
class ShardRead:
    """The records of one shard in one micro-batch: from `start`, at most `span` of them."""

    stream: str
    shard: int
    start: int
    span: int


class ShardReader:
    """Shard iterators from positions, and records from iterators: the calls the driver (peek,
    startpoints) and the executors (reads) both make.

    With `outage_s`, a call the endpoint does not answer (`passing`) is asked again until it has
    gone unanswered that long, then `KinesisUnavailable` names the endpoint and the fix: a batch
    rides through an endpoint's restart, as a Kafka batch rides through a broker's. Without it
    (the lag probe, which must not stall) botocore's own five attempts are all there is.
    `records` may run on several threads at once (`read_slot`); `left_at` then says nothing."""

    def __init__(self, client: Any, stream: str, outage_s: float = 0.0):
        self.client, self.stream, self.outage_s = client, stream, outage_s
        self._starting: dict[int, int] = {}
        self.left_at: str | None = None  # the iterator the last page read handed on (`first_at`)

    def _call(self, what: str, call: Any, **kwargs: Any) -> Any:
        began, pause = None, 0.2
        while True:
            try:
                return call(**kwargs)
            except Exception as exc:
                if not self.outage_s or not passing(exc):
                    raise
                now = time.monotonic()
                if began is None:
                    began = now
                    log.warning("kinesis.unavailable_retrying", stream=self.stream, call=what,
                                outage_s=self.outage_s, error=redact(str(exc)))
                if now - began >= self.outage_s:
                    raise KinesisUnavailable(
                        f"Kinesis at {redact(self.client.meta.endpoint_url)} did not answer {what} for "
                        f"{self.outage_s:g}s ({redact(str(exc))}): start the endpoint or fix --kinesis-endpoint, "
                        f"or raise --broker-outage-s; nothing was committed") from exc
                time.sleep(min(pause, began + self.outage_s - now))
                pause = min(2 * pause, 2.0)

    def starting(self, shard: int) -> int:
        """The shard's StartingSequenceNumber: no record of the shard is below it."""
        if shard not in self._starting:
            self.shards()
            if shard not in self._starting:
                raise ValueError(f"stream {self.stream!r} has no shard {shard_id(shard)}")
        return self._starting[shard]

    def shards(self) -> list[Shard]:
        """Every shard ListShards reports (all pages), with its parents and whether it is closed."""
        pages, token = [], None
        while True:
            page = (self._call(f"{self.stream}'s shards", self.client.list_shards, NextToken=token) if token
                    else self._call(f"{self.stream}'s shards", self.client.list_shards, StreamName=self.stream))
            pages += page["Shards"]
            token = page.get("NextToken")
            if not token:
                break
        out = []
        for s in pages:
            index = shard_index(s["ShardId"])
            self._starting[index] = int(s["SequenceNumberRange"]["StartingSequenceNumber"])
            parents = tuple(shard_index(s[k]) for k in ("ParentShardId", "AdjacentParentShardId") if s.get(k))
            out.append(Shard(index, parents, "EndingSequenceNumber" in s["SequenceNumberRange"]))
        return out

    def iterator(self, shard: int, position: int) -> str:
        """An iterator whose first record is the first one at or after `position` (a record's
        own number, or the last read one plus one), or at the shard's oldest record."""
        args = {"StreamName": self.stream, "ShardId": shard_id(shard)}
        if position > self.starting(shard):
            for kind, number in (("AFTER_SEQUENCE_NUMBER", position - 1), ("AT_SEQUENCE_NUMBER", position)):
                try:
                    return self._call(f"{self.stream}/{args['ShardId']}'s iterator", self.client.get_shard_iterator,
                                      **args, ShardIteratorType=kind, StartingSequenceNumber=str(number))["ShardIterator"]
                except self.client.exceptions.ClientError as exc:
                    if exc.response.get("Error", {}).get("Code") not in MISSING:
                        raise
        # at the shard's start, or both neighbours trimmed by retention: the oldest record kept
        return self._call(f"{self.stream}/{args['ShardId']}'s iterator", self.client.get_shard_iterator,
                          **args, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def at_timestamp(self, shard: int, epoch_s: float) -> str:
        return self._call(f"{self.stream}/{shard_id(shard)}'s iterator", self.client.get_shard_iterator,
                          StreamName=self.stream, ShardId=shard_id(shard), ShardIteratorType="AT_TIMESTAMP",
                          Timestamp=datetime.fromtimestamp(epoch_s, UTC))["ShardIterator"]

    def records(self, iterator: str | None, limit: int, position: int = 0, timeout_s: float = 30.0,
                shard: int = -1) -> Iterator[dict]:
        """Up to `limit` records at or after `position` from `iterator`, until the shard has no
        more (caught up, or closed). An iterator that expired while the endpoint was away (they
        last five minutes) is taken again past the last record read, when the shard is known."""
        deadline = time.monotonic() + timeout_s
        left = limit
        what = f"{self.stream}/{shard_id(shard)}'s records" if shard >= 0 else f"{self.stream}'s records"
        while iterator and left > 0:
            asked = min(PAGE, left)
            try:
                page = self._call(what, self.client.get_records, ShardIterator=iterator, Limit=asked)
            except self.client.exceptions.ExpiredIteratorException:
                if shard < 0:
                    raise
                iterator = self.iterator(shard, position)
                continue
            for record in page["Records"]:
                number = int(record["SequenceNumber"])
                if number >= position and left > 0:
                    left -= 1
                    position = number + 1
                    yield record
            iterator = self.left_at = page.get("NextShardIterator")
            if caught_up(page, asked):
                return
            if not page["Records"]:
                if time.monotonic() > deadline:
                    raise KinesisUnavailable(
                        f"{self.stream}/{shard_id(shard)}: no records for {timeout_s:.0f}s while "
                        f"{page['MillisBehindLatest']} ms behind: check the Kinesis endpoint")
            else:
                deadline = time.monotonic() + timeout_s

    def first_at(self, shard: int, position: int, iterator: str | None = None) -> int | None:
        """The sequence number of the first record at or after `position`, or None (and then
        `left_at` is where to ask next time: a fresh iterator costs a GetShardIterator, which a
        shard serves five a second on AWS). `iterator`: one that an empty ask at the same
        position left, instead of a fresh one."""
        for record in self.records(iterator or self.iterator(shard, position), 1, position, shard=shard):
            return int(record["SequenceNumber"])
        return None


def caught_up(page: Mapping[str, Any], asked: int) -> bool:
    """A GetRecords page that held everything the shard had: at its tip (`MillisBehindLatest`
    0) with fewer records than asked. Asking again would only return an empty page, a call
    that counts against the shard's five reads a second on AWS, shared by every consumer: the
    tail and the batch asked it after every page, and a job keeping up asked 3.0-3.1 a second
    of each shard, 2.1-2.5 without (`bench_kinesis.py calls`)."""
    return page.get("MillisBehindLatest", 0) == 0 and len(page["Records"]) < asked


def at_or_past(numbers: list[int], position: int) -> int:
    """How many of the sorted sequence `numbers` are at or past `position`."""
    return len(numbers) - bisect.bisect_left(numbers, position)


class ShardTail:
    """Follows one shard from a position on, on the driver, to count what Kinesis does not report:
    records that arrived (a high watermark: its rate is the input rate) and records at or past a
    position (lag in records). Costs one more read of every record (a GetRecords per shard and
    probe), the price of a lag in records on Kinesis."""

    def __init__(self, reader: ShardReader, shard: int, position: int):
        self.reader, self.shard, self.floor = reader, shard, position
        self.iterator: str | None = reader.iterator(shard, position)
        self.numbers: list[int] = []  # sequence numbers at or past `floor`, in order
        self.arrivals: list[float] = []  # their arrival times (epoch s)
        self.seen = 0  # records counted since the tail started
        self.last = position - 1  # the last record counted
        self.tip_at = 0.0  # when (epoch s) a read last reached the shard's tip

    def follow(self, limit: int = 100_000) -> list[tuple[int, float]]:
        """Read what arrived since the last call (up to `limit` records). An iterator that
        expired (unused for 5 minutes: a stalled probe) is taken again past the last record.
        Returns each page that held records, as (records, seconds its GetRecords took): what the
        endpoint takes to serve a record and the client to parse it, at sizes a batch's read at
        factor 1 never reaches (`Admission.observe_endpoint_read`)."""
        read, pages = 0, []
        while self.iterator and read < limit:
            began = time.perf_counter()
            try:
                page = self.reader.client.get_records(ShardIterator=self.iterator, Limit=PAGE)
            except self.reader.client.exceptions.ExpiredIteratorException:
                self.iterator = self.reader.iterator(self.shard, self.last + 1)
                continue
            if page["Records"]:
                pages.append((len(page["Records"]), time.perf_counter() - began))
            for record in page["Records"]:
                number = int(record["SequenceNumber"])
                if number >= self.floor and number > self.last:
                    self.numbers.append(number)
                    self.arrivals.append(record["ApproximateArrivalTimestamp"].timestamp())
                    self.seen += 1
                    self.last = number
                    read += 1
            self.iterator = page.get("NextShardIterator")
            if caught_up(page, PAGE):
                self.tip_at = time.time()
                break
        return pages

    def trim(self, position: int) -> None:
        """Forget records below `position`: every task has passed them."""
        cut = bisect.bisect_left(self.numbers, position)
        if cut:
            del self.numbers[:cut], self.arrivals[:cut]
        self.floor = max(self.floor, position)

    def behind(self, position: int) -> int:
        """Records at or past `position`."""
        return at_or_past(self.numbers, position)

    def finished(self, position: int) -> bool:
        """The shard is closed and read to its end (its iterator ended), with no record at or
        past `position`: every task at or past it has processed all of the shard."""
        return self.iterator is None and self.behind(position) == 0

    def age(self, position: int, now: float) -> float:
        """Seconds since the first record at or past `position` arrived (0: none waiting)."""
        at = bisect.bisect_left(self.numbers, position)
        return max(0.0, now - self.arrivals[at]) if at < len(self.numbers) else 0.0


class KinesisPositions:
    """Startpoints and source defaults as positions (the elasticity OffsetResolver): oldest is
    the shard's starting number, upcoming one past its last record, a timestamp the first record
    at or after it."""

    def __init__(self, endpoint: str | None = None, region: str | None = None):
        self.client = kinesis_client(endpoint, region)
        self._readers: dict[str, ShardReader] = {}

    def reader(self, stream: str) -> ShardReader:
        if stream not in self._readers:
            self._readers[stream] = ShardReader(self.client, stream)
        return self._readers[stream]

    def oldest_offset(self, stream: str, shard: int) -> int:
        return self.reader(stream).starting(shard)

    def upcoming_offset(self, stream: str, shard: int) -> int:
        """One past the shard's last record: found by reading from ever earlier timestamps to the
        end (recent records only, not the whole retention), or the starting number if empty."""
        reader, now = self.reader(stream), time.time()
        starts = [lambda back=back: reader.at_timestamp(shard, now - back) for back in LOOKBACK_S]
        for start in (*starts, lambda: reader.iterator(shard, reader.starting(shard))):
            last = None
            for record in reader.records(start(), 10**9):
                last = int(record["SequenceNumber"])
            if last is not None:
                return last + 1
        return reader.starting(shard)

    def offset_for_timestamp(self, stream: str, shard: int, epoch_ms: int) -> int:
        reader = self.reader(stream)
        if epoch_ms <= time.time() * 1000:  # Kinesis refuses a timestamp in the future
            for record in reader.records(reader.at_timestamp(shard, epoch_ms / 1000), 1):
                return int(record["SequenceNumber"])
        return self.upcoming_offset(stream, shard)

    def close(self) -> None:
        self._readers.clear()


@dataclass(frozen=True)
class KinesisSlot(InputPartition):
    """The shards one Spark task reads: one slot of the pipeline."""

    reads: tuple[ShardRead, ...]


class KinesisDataSource(DataSource):
    """Registered as `spark.readStream.format("autosizer-kinesis")`."""

    @classmethod
    def name(cls) -> str:
        return "autosizer-kinesis"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KinesisStreamReader(self.options)


class KinesisStreamReader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]):
        options = CaseInsensitiveDict(options)
        if not options.get("stream"):
            raise ValueError("autosizer-kinesis needs option stream (the stream's name)")
        if not options.get("planFile"):
            raise ValueError("autosizer-kinesis needs option planFile: run it through the pipeline agent")
        self.stream = options["stream"]
        self.endpoint, self.region = options.get("endpoint"), options.get("region")
        self.slots: list[list[str]] = json.loads(options.get("slots") or "[]")
        self.pause_file, self.plan_file = options.get("pauseFile"), options["planFile"]
        self.tips_file = options.get("tipsFile")
        self.timeout_s = int(options.get("kinesis.timeoutMs", "30000")) / 1000
        self.outage_s = int(options.get("kinesis.outageMs", str(OUTAGE_MS))) / 1000
        if self.outage_s < 0:
            raise ValueError(f"autosizer-kinesis option kinesis.outageMs must be >= 0, not {self.outage_s * 1000:g}")
        self._reader: ShardReader | None = None
        # shard -> (start, the iterator an empty peek left, when it peeked)
        self._peeks: dict[int, tuple[int, str | None, float]] = {}

    def _shards(self) -> ShardReader:
        if self._reader is None:
            self._reader = self._patient_reader()
        return self._reader

    def _patient_reader(self) -> ShardReader:
        """The batch's calls (the driver's peeks, the executors' reads) ride through an outage."""
        client = kinesis_client(self.endpoint, self.region, attempts=2 if self.outage_s else 5)
        return ShardReader(client, self.stream, self.outage_s)

    def initialOffset(self) -> dict:
        return {EPOCH: -1}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """Each planned shard's start and span, the span 0 when nothing is there to read (so
        Spark runs a batch only when a shard has a record at or past its start)."""
        if self.pause_file and os.path.exists(self.pause_file):
            return dict(start)
        plan, tips = read_plan(self.plan_file), read_plan(self.tips_file)
        out: dict[str, Any] = {EPOCH: plan.get(EPOCH, -1)}
        for key, entry in sorted(plan.items()):
            if key == EPOCH:
                continue
            stream, shard = parse_offset_key(key)
            begin = int(entry["start"])
            last, tip_at = tips.get(key) or (-1, 0.0)
            ready = stream == self.stream and (last >= begin or self._has_record(shard, begin, tip_at))
            out[key] = {"start": str(begin), "span": int(entry["span"]) if ready else 0}
        return out

    def _has_record(self, shard: int, begin: int, tip_at: float = 0.0) -> bool:
        """Whether the shard holds a record at or past `begin`, where the agent's tail has not
        counted one (`tipsFile`). A peek that found none keeps the iterator its last page handed
        on, and the next peek at the same start asks from there: an idle job asked each shard a
        GetShardIterator every trigger (1.0 a second, of the five AWS serves it; `bench_kinesis.py
        calls`). After an empty peek, a tail that read the shard to its tip later than that
        (`tip_at`, within TIP_FRESH_S) and counted nothing past the start answers for it: idle,
        the peek and the tail each asked a shard a GetRecords a second. A record arriving after
        the tail's look then waits for its next one (the probe's 0.5-1.5 s) where a peek would
        have found it at the next trigger; the first peek at a new start always asks. A closed
        shard read to its end has none, and is not asked again until its start moves."""
        reader = self._shards()
        at, left, peeked = self._peeks.pop(shard, (None, None, 0.0))
        if at != begin:
            left = None
        elif left is None:  # closed, and read to its end
            self._peeks[shard] = (at, None, peeked)
            return False
        elif peeked < tip_at and time.time() - tip_at <= TIP_FRESH_S:  # the tail looked since, found none
            self._peeks[shard] = (at, left, peeked)
            return False
        now = time.time()
        found = reader.first_at(shard, begin, left)
        if found is None:
            self._peeks[shard] = (begin, reader.left_at, now)
        return found is not None

    def partitions(self, start: dict, end: dict) -> list[KinesisSlot]:
        reads: dict[str, ShardRead] = {}
        for key, entry in sorted(end.items()):
            if key == EPOCH or not entry["span"]:
                continue
            stream, shard = parse_offset_key(key)
            reads[key] = ShardRead(stream, shard, int(entry["start"]), int(entry["span"]))
        return [KinesisSlot(group) for group in pack(self.slots, reads)]

    def commit(self, end: dict) -> None:
        """Nothing: progress is committed per virtual task to Redis by the pipeline."""

    def read(self, partition: KinesisSlot) -> Iterator[pa.RecordBatch]:
        freeze_imports()
        yield from read_slot(self._patient_reader(), partition.reads, self.timeout_s)


def read_slot(reader: ShardReader, reads: Sequence[ShardRead], timeout_s: float,
              threads: int = READ_THREADS) -> Iterator[pa.RecordBatch]:
    """Each read's records as one Arrow batch, in the order of `reads`, the shards read
    together on up to `threads` threads, as a Kafka slot's one consumer fetches its partitions
    together. Read in turn, a slot holding several shards (a stream with more shards than Spark
    has cores, a re-shard's child joined to a planned slot) waited for the sum of their round
    trips. The batches keep the order of `reads`, so what follows sees the same stream either way;
    the slot's records are held at once, as the batch's spans bound them."""
    if not reads:
        return
    reader.starting(reads[0].shard)  # ListShards once for all of them, not once a thread

    def one(r: ShardRead) -> pa.RecordBatch | None:
        rows = list(reader.records(reader.iterator(r.shard, r.start), r.span, r.start, timeout_s, r.shard))
        return _batch(rows, r) if rows else None

    if threads <= 1 or len(reads) == 1:
        for r in reads:
            if (batch := one(r)) is not None:
                yield batch
        return
    with ThreadPoolExecutor(min(threads, len(reads)), thread_name_prefix="kinesis-read") as pool:
        futures = [pool.submit(one, r) for r in reads]
        try:
            for future in futures:
                batch = future.result()
                if batch is not None:
                    yield batch
        finally:  # a read that failed fails the batch: the others still queued are not started
            for future in futures:
                future.cancel()


def _batch(rows: list[dict], r: ShardRead) -> pa.RecordBatch:
    n = len(rows)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([row["PartitionKey"].encode() for row in rows], pa.binary()),
            pa.array([row["Data"] for row in rows], pa.binary()),
            pa.array([r.stream] * n, pa.string()),
            pa.array([r.shard] * n, pa.int32()),
            pa.array([row["SequenceNumber"] for row in rows], pa.string()),
            pa.array([row["ApproximateArrivalTimestamp"] for row in rows], pa.timestamp("us", tz="UTC")),
        ],
        schema=ARROW_SCHEMA,
    )


def register(spark: Any) -> None:
    """Make `spark.readStream.format("autosizer-kinesis")` available in this session."""
    spark.dataSource.register(KinesisDataSource)
