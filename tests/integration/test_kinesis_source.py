"""The Kinesis source's positions and reads against the real emulator (kinesis-local)."""

from __future__ import annotations

import threading
import time
from datetime import UTC

import pytest

from autosizer.pipeline.kinesis_source import (
    KinesisPositions,
    ShardReader,
    ShardTail,
    kinesis_client,
    shard_index,
    unavailable_errors,
)


def _by_shard(kinesis, stream, records) -> dict[int, list[int]]:
    """Produce, then read every shard from its start: sequence numbers per shard index."""
    kinesis.produce(stream, records)
    reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
    out = {}
    for shard in (0, 1):
        rows = reader.records(reader.iterator(shard, reader.starting(shard)), 10**6)
        out[shard] = [int(r["SequenceNumber"]) for r in rows]
    return out


def test_a_position_reads_from_that_record_whether_a_record_or_one_past_it(kinesis, stream):
    kinesis.create_stream(stream, 2)
    seqs = _by_shard(kinesis, stream, [(b"k%d" % i, b"%d" % i) for i in range(60)])
    assert sum(map(len, seqs.values())) == 60 and all(len(s) > 5 for s in seqs.values())
    reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
    numbers = seqs[0]
    for i in (0, 3, len(numbers) - 1):
        for position in (numbers[i], numbers[i - 1] + 1 if i else numbers[0]):
            got = [int(r["SequenceNumber"]) for r in
                   reader.records(reader.iterator(0, position), 10**6, position)]
            assert got == numbers[i:], (i, position)
    # a span bounds the read; past the last record nothing is there
    assert len(list(reader.records(reader.iterator(0, numbers[0]), 4, numbers[0]))) == 4
    assert reader.first_at(0, numbers[-1] + 1) is None
    assert reader.first_at(0, numbers[2]) == numbers[2]


def test_startpoint_positions_oldest_upcoming_and_timestamp(kinesis, stream):
    kinesis.create_stream(stream, 2)
    positions = KinesisPositions(kinesis.endpoint)
    empty = positions.upcoming_offset(stream, 0)
    assert empty == positions.oldest_offset(stream, 0)  # an empty shard: its start
    seqs = _by_shard(kinesis, stream, [(b"k%d" % i, b"a") for i in range(30)])
    time.sleep(0.05)
    stamp_ms = int(time.time() * 1000)
    time.sleep(0.05)
    later = _by_shard(kinesis, stream, [(b"k%d" % i, b"b") for i in range(30)])
    new = {s: [n for n in later[s] if n not in seqs[s]] for s in (0, 1)}
    for shard in (0, 1):
        assert positions.oldest_offset(stream, shard) <= seqs[shard][0]
        assert positions.upcoming_offset(stream, shard) == later[shard][-1] + 1
        assert positions.offset_for_timestamp(stream, shard, stamp_ms) == new[shard][0]
    assert positions.offset_for_timestamp(stream, 0, stamp_ms + 60_000) == later[0][-1] + 1


def test_shard_ids_are_partition_indexes():
    assert shard_index("shardId-000000000007") == 7
    for bad in ("shard-7", "shardId-x", "7"):
        try:
            shard_index(bad)
        except ValueError as exc:
            assert bad in str(exc)
        else:
            raise AssertionError(bad)


def test_a_tail_counts_arrivals_and_records_behind_a_position(kinesis, stream):
    from autosizer.pipeline.kinesis_source import ShardTail

    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(30)])
    reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
    tail = ShardTail(reader, 0, 0)
    tail.follow()
    numbers = list(tail.numbers)
    assert tail.seen == 30 and len(numbers) == 30
    assert tail.behind(numbers[10]) == 20 and tail.behind(numbers[-1] + 1) == 0
    assert tail.age(numbers[0], time.time() + 5) >= 5 and tail.age(numbers[-1] + 1, time.time()) == 0
    tail.trim(numbers[10])
    kinesis.produce(stream, [(b"k%d" % i, b"b") for i in range(10)])
    tail.follow()
    assert tail.seen == 40 and tail.behind(numbers[10]) == 30  # a high watermark keeps counting


def test_a_tail_times_each_page_that_held_records(kinesis, stream, monkeypatch):
    """The pages a tail reads are the pipeline's measure of what a record costs the endpoint
    (`Admission.observe_endpoint_read`): each page with records, its size and its call's time;
    a follow that found nothing new gives none."""
    from autosizer.pipeline import kinesis_source

    monkeypatch.setattr(kinesis_source, "PAGE", 12)
    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(30)])
    tail = kinesis_source.ShardTail(ShardReader(kinesis_client(kinesis.endpoint), stream), 0, 0)
    pages = tail.follow()
    assert [records for records, _ in pages] == [12, 12, 6]
    assert all(0 < seconds < 30 for _, seconds in pages)
    assert tail.follow() == []


def test_a_read_and_a_tail_at_the_shards_tip_stop_without_asking_for_an_empty_page(kinesis, stream):
    """AWS serves a shard five GetRecords a second, shared by every consumer of the stream. A
    page at the tip (`MillisBehindLatest` 0) with fewer records than asked held everything
    there was: the batch's read and the driver's tail stop there, not after one more, empty,
    page (a job keeping up asked 3.0-3.1 a second of each shard that way, 2.1-2.5 without). A
    page of as many as asked is not the end."""
    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(30)])
    client = kinesis_client(kinesis.endpoint)
    calls: list[str] = []
    client.meta.events.register("before-call.kinesis.GetRecords", lambda **_: calls.append("GetRecords"))
    reader = ShardReader(client, stream)
    start = reader.iterator(0, 0)
    assert len(list(reader.records(start, 100))) == 30 and len(calls) == 1
    calls.clear()
    assert len(list(reader.records(reader.iterator(0, 0), 30))) == 30 and len(calls) == 1
    calls.clear()
    assert len(list(reader.records(reader.iterator(0, 0), 10**6))) == 30 and len(calls) == 1
    calls.clear()
    tail = ShardTail(reader, 0, 0)
    tail.follow()
    assert tail.seen == 30 and len(calls) == 1
    calls.clear()
    tail.follow()  # nothing new: one empty page says so
    kinesis.produce(stream, [(b"k%d" % i, b"b") for i in range(5)])
    tail.follow()
    assert tail.seen == 35 and len(calls) == 2


def test_an_idle_peek_asks_no_fresh_iterator_until_its_shards_start_moves(kinesis, stream, tmp_path):
    """Spark asks the source each trigger whether a shard has a record past its start. A peek
    that found none asks next time from the iterator its page handed on: an idle job asked each
    shard a GetShardIterator every trigger (AWS serves five a second a shard, shared by every
    consumer). A record arriving is found from there; a new start takes a fresh iterator."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from autosizer.pipeline.kafka_source import write_plan
    from autosizer.pipeline.kinesis_source import KinesisStreamReader

    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(3)])
    reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
    past = int(list(reader.records(reader.iterator(0, 0), 10))[-1]["SequenceNumber"]) + 1
    plan = tmp_path / "plan.json"
    write_plan(str(plan), {"_epoch": 1, f"{stream}/0": {"start": past, "span": 100}})
    source = KinesisStreamReader({"stream": stream, "endpoint": kinesis.endpoint, "planFile": str(plan)})
    calls: list[str] = []
    client = source._shards().client
    for call in ("GetShardIterator", "GetRecords"):
        client.meta.events.register(f"before-call.kinesis.{call}", lambda call=call, **_: calls.append(call))

    def span() -> int:
        return source.latestOffset({}, ReadAllAvailable())[f"{stream}/0"]["span"]

    assert span() == 0 and calls.count("GetShardIterator") == 1
    calls.clear()
    assert [span() for _ in range(3)] == [0, 0, 0]
    assert calls == ["GetRecords"] * 3, "idle: one GetRecords a peek, no fresh iterator"
    calls.clear()
    kinesis.produce(stream, [(b"k9", b"b")])
    assert span() == 100 and calls == ["GetRecords"]
    numbers = [int(r["SequenceNumber"]) for r in reader.records(reader.iterator(0, past), 10)]
    write_plan(str(plan), {"_epoch": 1, f"{stream}/0": {"start": numbers[-1] + 1, "span": 100}})
    calls.clear()
    assert span() == 0 and calls == ["GetShardIterator", "GetRecords"], "a new start: a fresh iterator"


def test_a_peek_asks_no_call_where_the_agents_tail_counted_a_record_past_the_start(kinesis, stream, tmp_path,
                                                                                  monkeypatch):
    """Each trigger's peek took a GetRecords per shard (and a GetShardIterator where its start had
    moved), though the agent's tail had often counted the records past it already, and idle, the
    tail asked the same shard a second time each probe. The tips file says where each tail got to
    and when it last read its shard to the tip: the peek asks where the tail is behind the start,
    unless the shard was idle at the last peek and the tail read it to its tip just now."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from autosizer.pipeline import kinesis_source
    from autosizer.pipeline.kafka_source import write_plan
    from autosizer.pipeline.kinesis_source import KinesisStreamReader, ShardTail

    monkeypatch.setattr(kinesis_source, "TIP_FRESH_S", 600.0)  # "just now" however slow the machine
    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(3)])
    reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
    numbers = [int(r["SequenceNumber"]) for r in reader.records(reader.iterator(0, 0), 10)]
    tail = ShardTail(reader, 0, 0)
    tail.follow()
    plan, tips = tmp_path / "plan.json", tmp_path / "tips.json"
    write_plan(str(tips), {f"{stream}/0": [tail.last, 0.0]})  # read to its tip long ago (1970)
    source = KinesisStreamReader({"stream": stream, "endpoint": kinesis.endpoint, "planFile": str(plan),
                                  "tipsFile": str(tips)})
    calls: list[str] = []
    for call in ("GetShardIterator", "GetRecords"):
        source._shards().client.meta.events.register(f"before-call.kinesis.{call}",
                                                      lambda call=call, **_: calls.append(call))

    def span(start: int) -> int:
        write_plan(str(plan), {"_epoch": 1, f"{stream}/0": {"start": start, "span": 100}})
        return source.latestOffset({}, ReadAllAvailable())[f"{stream}/0"]["span"]

    assert [span(n) for n in numbers] == [100, 100, 100] and calls == [], "the tail counted them: no call"
    assert span(numbers[-1] + 1) == 0 and calls == ["GetShardIterator", "GetRecords"], "past the tail: a peek"
    calls.clear()
    assert span(numbers[-1] + 1) == 0 and calls == ["GetRecords"], "idle: the tail's tip is old, so a peek"
    calls.clear()
    tail.follow()  # reads to the tip now
    write_plan(str(tips), {f"{stream}/0": [tail.last, tail.tip_at]})
    assert [span(numbers[-1] + 1) for _ in range(3)] == [0, 0, 0] and calls == [], "idle, the tail just looked"
    kinesis.produce(stream, [(b"k9", b"b")])
    assert span(numbers[-1] + 1) == 0 and calls == [], "a record after the tail's look waits for the next"
    tail.follow()
    write_plan(str(tips), {f"{stream}/0": [tail.last, tail.tip_at]})
    assert span(numbers[-1] + 1) == 100 and calls == [], "the tail counted it"
    tips.unlink()  # no tips (a probe not run yet): the peek as before
    assert span(numbers[0]) == 100 and calls[-1] == "GetRecords" and set(calls) == {"GetShardIterator", "GetRecords"}


def test_a_read_rides_through_an_endpoint_restart_shorter_than_its_outage_bound(tmp_path, stream):
    """The endpoint goes away between a batch's iterator and its GetRecords and comes back 3 s
    later with its records (its data kept on disk): a reader with an outage bound asks again
    and reads every record once, in order, where one without it fails (the lag probe's way)."""
    from structlog.testing import capture_logs

    from tests.servers import Kinesis

    kinesis = Kinesis(data_dir=tmp_path / "kinesis").start()
    try:
        kinesis.create_stream(stream, 1)
        kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(30)])
        reader = ShardReader(kinesis_client(kinesis.endpoint, attempts=2), stream, outage_s=60)
        start = reader.starting(0)
        numbers = [int(r["SequenceNumber"]) for r in reader.records(reader.iterator(0, start), 10**6, start)]
        assert len(numbers) == 30
        time.sleep(1.5)  # saved to disk (every second)
        iterator = reader.iterator(0, start)
        kinesis.halt()
        with pytest.raises(unavailable_errors(), match="Could not connect"):
            ShardReader(kinesis_client(kinesis.endpoint, attempts=2), stream).records(iterator, 10).__next__()
        back = threading.Timer(3, kinesis.start)
        back.start()
        with capture_logs() as logs:
            got = [int(r["SequenceNumber"]) for r in reader.records(iterator, 10**6, start, shard=0)]
        back.join()
        assert got == numbers
        retried = [e for e in logs if e["event"] == "kinesis.unavailable_retrying"]
        assert len(retried) == 1 and retried[0]["call"] == f"{stream}/shardId-000000000000's records"
    finally:
        kinesis.stop()


def test_an_expired_iterator_is_taken_again_past_the_last_record_read(tmp_path, stream, monkeypatch):
    """Kinesis expires a shard iterator 300 s after it was issued, and an endpoint outage (with
    `--broker-outage-s` above 300) or a stalled probe can outlast that. Here the emulator's clock
    moves 310 s on between two pages of a read: a batch's read (its shard known) and the lag
    probe's tail take the iterator again past the last record they read, so each record comes
    once, in order; a read that does not know its shard raises the expiry instead."""
    from autosizer.pipeline import kinesis_source
    from autosizer.pipeline.kinesis_source import ShardTail
    from tests.servers import ClockedKinesis

    monkeypatch.setattr(kinesis_source, "PAGE", 30)  # a full first page: a read asks for the next
    kinesis = ClockedKinesis(tmp_path).start()
    try:
        kinesis.create_stream(stream, 1)
        kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(30)])
        reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
        start = reader.starting(0)
        batch = reader.records(reader.iterator(0, start), 10**6, start, shard=0)
        unknown = reader.records(reader.iterator(0, start), 10**6, start)
        tail = ShardTail(reader, 0, start)
        first = [int(next(batch)["SequenceNumber"]) for _ in range(30)]  # the first page, all of it
        assert len([next(unknown) for _ in range(30)]) == 30
        tail.follow()
        assert tail.seen == 30
        kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(30, 50)])
        kinesis.advance(310)  # every iterator above, the next pages' included, is now expired
        rest = [int(r["SequenceNumber"]) for r in batch]
        assert len(rest) == 20 and first + rest == sorted(set(first + rest))
        with pytest.raises(reader.client.exceptions.ExpiredIteratorException):
            next(unknown)
        tail.follow()
        assert tail.seen == 50 and tail.numbers == first + rest
    finally:
        kinesis.stop()


def test_the_emulator_stamps_arrivals_by_the_wall_clock_after_it_steps(tmp_path, stream):
    """The emulator's clock follows a step of the wall clock made after it started
    (`autosizer.embedded.WALL_CLOCK_JS`), as real Kinesis' NTP-kept clock does. Its own clock was
    the start's wall time plus the monotonic clock's count, which a step does not move: a suite
    run (session 73) found the session's emulator 10-33 s behind the host, a job 60 records
    behind read as 33 s late and a timestamp 10 s back refused as in the future. Here the wall
    clock alone steps 30 s on after the start: a record written then is stamped 30 s on (the
    start's clock read it about now), and a time 20 s on is no longer in the emulator's future."""
    from datetime import UTC, datetime, timedelta

    from tests.servers import ClockedKinesis

    kinesis = ClockedKinesis(tmp_path, wall_only=True).start()
    try:
        kinesis.create_stream(stream, 1)
        kinesis.advance(30)
        kinesis.produce(stream, [(b"k", b"0")])
        client = kinesis.client()
        reader = ShardReader(kinesis_client(kinesis.endpoint), stream)
        (record,) = list(reader.records(reader.iterator(0, 0), 10))
        ahead = (record["ApproximateArrivalTimestamp"] - datetime.now(UTC)).total_seconds()
        assert 25 < ahead < 35, ahead
        client.get_shard_iterator(StreamName=stream, ShardId="shardId-000000000000",
                                  ShardIteratorType="AT_TIMESTAMP",
                                  Timestamp=datetime.now(UTC) + timedelta(seconds=20))
    finally:
        kinesis.stop()


def test_records_read_by_the_pipelines_client_carry_the_arrival_time_botocore_reads_in_utc(kinesis, stream):
    """The pipeline's clients parse timestamps with `utc_time` (half the CPU a record costs to
    read, `bench_kinesis.py parse`): the same instants a client on botocore's own parser reads,
    every one in UTC."""
    import boto3

    kinesis.create_stream(stream, 1)
    kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(20)])
    theirs = boto3.session.Session().client("kinesis", endpoint_url=kinesis.endpoint)
    read = {}
    for name, client in (("ours", kinesis_client(kinesis.endpoint)), ("theirs", theirs)):
        reader = ShardReader(client, stream)
        read[name] = [r["ApproximateArrivalTimestamp"] for r in reader.records(reader.iterator(0, 0), 100)]
    assert len(read["ours"]) == 20 and read["ours"] == read["theirs"]
    assert {t.utcoffset().total_seconds() for t in read["ours"]} == {0}
    assert all(t.tzinfo is UTC for t in read["ours"]) and not any(t.tzinfo is UTC for t in read["theirs"])


def test_a_slots_shards_are_read_together_and_come_out_in_the_slots_order(kinesis, stream):
    """A Spark task reads its slot's shards on threads of its own, as a Kafka slot's consumer
    fetches its partitions together: read in turn, a slot of several shards waited for the sum
    of their round trips. Each shard's first GetRecords here waits until every shard's is in
    flight, which a read in turn never gets to (its barrier breaks); the batches are the ones a
    read in turn gives, in the slot's order."""
    from autosizer.pipeline.kinesis_source import ShardRead, read_slot

    kinesis.create_stream(stream, 4)
    kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(400)])
    client = kinesis_client(kinesis.endpoint)
    reads = [ShardRead(stream, shard, 0, 1_000) for shard in (2, 0, 3, 1)]

    def read(threads: int) -> list[tuple[int, list[str]]]:
        return [(b.column("partition")[0].as_py(), b.column("offset").to_pylist())
                for b in read_slot(ShardReader(client, stream), reads, 30.0, threads)]

    in_turn = read(1)
    assert [shard for shard, _ in in_turn] == [2, 0, 3, 1] and sum(len(o) for _, o in in_turn) == 400
    waiting, passed = [threading.Barrier(len(reads), timeout=30)], set()

    def all_in_flight(**_) -> None:
        if threading.get_ident() not in passed:
            passed.add(threading.get_ident())
            waiting[0].wait()

    client.meta.events.register("before-call.kinesis.GetRecords", all_in_flight)
    assert read(16) == in_turn, "together: the same batches, in the slot's order"
    passed.clear()
    waiting[0] = threading.Barrier(len(reads), timeout=2)  # in turn, no second read ever comes
    with pytest.raises(threading.BrokenBarrierError):
        read(1)


def test_a_shard_read_that_fails_fails_the_slots_read_with_its_error(kinesis, stream):
    from autosizer.pipeline.kinesis_source import ShardRead, read_slot

    kinesis.create_stream(stream, 2)
    kinesis.produce(stream, [(b"k%d" % i, b"a") for i in range(40)])
    reads = [ShardRead(stream, 0, 0, 100), ShardRead(stream, 7, 0, 100), ShardRead(stream, 1, 0, 100)]
    with pytest.raises(ValueError, match="has no shard shardId-000000000007"):
        list(read_slot(ShardReader(kinesis_client(kinesis.endpoint), stream), reads, 30.0))
