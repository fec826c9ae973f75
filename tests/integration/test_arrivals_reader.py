"""The reader of a topic's record times (`autosizer fit --bootstrap`, the sim-vs-real benchmark)
against a real broker: each record counted once, in the second its producer stamped, and none
from before the run."""

from __future__ import annotations

import time

import pytest
import structlog

from autosizer.simulator.arrivals import read_arrivals
from tests.servers import Broker

pytestmark = pytest.mark.integration


def produce(broker: Broker, partitions: int, count: int) -> tuple[float, float]:
    """`count` records spread over the partitions; the window their timestamps fall in."""
    before = time.time()
    broker.produce("orders", [(i % partitions, b"k%d" % i, b"%d" % i) for i in range(count)])
    return before, time.time()


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
    per_second = [sum(c for _, points in counted for t, c in points if round(t - start) == s)
                  for s in range(int(end - start) + 1)]
    assert sum(per_second) == 50, "each record of the run once, none of the 10 before it"
    for (first, last), count in ((early, 30), (late, 20)):
        seconds = range(int(first - start), int(last - start) + 1)
        assert sum(per_second[s] for s in seconds) == count, f"{count} records in seconds {list(seconds)}"
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
