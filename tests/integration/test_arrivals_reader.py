"""The readers of a topic's record times (`autosizer fit --bootstrap`, the sim-vs-real benchmark)
against a real broker, and of a Kinesis stream's (`--kinesis-stream`) on the emulator: each
record counted once, in the second it was stamped, and none from before the run."""

from __future__ import annotations

import time

import pytest
import structlog

from autosizer.simulator.arrivals import read_arrivals, read_kinesis_arrivals
from tests.servers import Broker, Kinesis

pytestmark = pytest.mark.integration


def produce(broker: Broker, partitions: int, count: int) -> tuple[float, float]:
    """`count` records spread over the partitions; the window their timestamps fall in."""
    before = time.time()
    broker.produce("orders", [(i % partitions, b"k%d" % i, b"%d" % i) for i in range(count)])
    return before, time.time()


def assert_counted_when_written(counted, start: float, end: float, written: dict[tuple[float, float], int]) -> None:
    """Each record of the run once, none from before or after it, each write's records in the
    seconds the write took."""
    per_second = [sum(c for _, points in counted for t, c in points if round(t - start) == s)
                  for s in range(int(end - start) + 1)]
    assert sum(per_second) == sum(written.values()), "each record of the run once, none before or after it"
    for (first, last), count in written.items():
        seconds = range(int(first - start), int(last - start) + 1)
        assert sum(per_second[s] for s in seconds) == count, f"{count} records in seconds {list(seconds)}"


def test_each_record_is_counted_in_the_second_it_was_stamped(broker: Broker):
    broker.create_topic("orders", 2)
    produce(broker, 2, 10)  # before the run: not its load
    time.sleep(0.05)
    start = time.time()
    early = produce(broker, 2, 30)
    time.sleep(max(0.0, start + 2.2 - time.time()))
    late = produce(broker, 2, 20)
    end = time.time()
    time.sleep(1.3)
    produce(broker, 2, 40)  # after the window's last second: neither counted nor read
    with structlog.testing.capture_logs() as logs:
        counted = read_arrivals(broker.bootstrap, ["orders"], start, end, late_s=0.0)
    assert [e["read"] for e in logs if e["event"] == "arrivals.read"] == [50], "stops past the window"
    assert sorted(labels["partition"] for labels, _ in counted) == ["0", "1"]
    assert_counted_when_written(counted, start, end, {early: 30, late: 20})
    assert all(labels == {"topic": "orders", "partition": labels["partition"]} for labels, _ in counted)


def test_a_log_ending_in_a_transactions_marker_is_read_to_its_end(broker: Broker):
    """A transaction's commit marker takes the log's last offset and reaches no consumer: the
    reader waited for it until its stall timeout and failed. It ends at the consumer's position."""
    from confluent_kafka import Producer

    broker.create_topic("orders", 1)
    start = time.time()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "orders", "log_level": 0})
    producer.init_transactions(10)
    producer.begin_transaction()
    for i in range(5):
        producer.produce("orders", b"%d" % i, partition=0)
    producer.commit_transaction(10)
    counted = read_arrivals(broker.bootstrap, ["orders"], start, time.time(), timeout_s=5.0)
    assert sum(c for _, points in counted for _, c in points) == 5


def put(kinesis: Kinesis, stream: str, count: int, tag: str) -> tuple[float, float]:
    """`count` records under many keys (so every shard gets some); the window they arrived in."""
    before = time.time()
    kinesis.produce(stream, [(b"%s-%d" % (tag.encode(), i), b"%d" % i) for i in range(count)])
    return before, time.time()


def test_each_kinesis_record_is_counted_in_the_second_it_arrived_closed_shards_too(kinesis: Kinesis, stream: str):
    kinesis.create_stream(stream, 2)
    client = kinesis.client()
    put(kinesis, stream, 10, "before")  # before the run: not its load
    time.sleep(1.1)
    start = time.time()
    early = put(kinesis, stream, 30, "early")
    shard = client.list_shards(StreamName=stream)["Shards"][0]
    low, high = (int(shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    client.split_shard(StreamName=stream, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2))
    kinesis.wait_active(stream)
    time.sleep(max(0.0, start + 2.2 - time.time()))
    late = put(kinesis, stream, 20, "late")  # into the split's children
    end = time.time()
    time.sleep(1.3)
    put(kinesis, stream, 40, "after")  # past the window's last second: not counted
    with structlog.testing.capture_logs() as logs:
        counted = read_kinesis_arrivals(stream, start, end, endpoint=kinesis.endpoint, late_s=0.0)
    assert [e["shards"] for e in logs if e["event"] == "arrivals.read"] == [4], "the parent shards and the children"
    assert_counted_when_written(counted, start, end, {early: 30, late: 20})
    closed = {labels["partition"] for labels, points in counted if sum(c for _, c in points)}
    assert "0" in closed or "1" in closed, "the split parent's records of the run are counted"
    assert all(labels == {"topic": stream, "partition": labels["partition"]} for labels, _ in counted)


def test_a_stream_that_is_not_there_is_one_line_naming_the_flags(kinesis: Kinesis, stream: str):
    with pytest.raises(ValueError, match=r"^reading the record times of Kinesis stream .* check --kinesis-stream"):
        read_kinesis_arrivals(stream, time.time() - 10, time.time(), endpoint=kinesis.endpoint)


def test_an_endpoint_away_past_the_bound_is_one_line_naming_the_flags(stream):
    """Asked again (a throttle or a restart passes) until `outage_s`, then one line."""
    from autosizer.embedded import free_port

    with pytest.raises(ValueError, match=r"^reading the record times of Kinesis stream .* failed \(Could not connect "
                                         r".*, for 1s\); check --kinesis-stream and --kinesis-endpoint$"):
        read_kinesis_arrivals(stream, time.time() - 10, time.time(), endpoint=f"http://127.0.0.1:{free_port()}",
                              outage_s=1.0)
