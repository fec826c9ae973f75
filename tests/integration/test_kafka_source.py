"""The autosizer-kafka source: real Tansu broker, real local SparkSession."""

from __future__ import annotations

import json
import time

import pytest

from autosizer.pipeline.kafka_source import KafkaStreamReader, KafkaUnavailable, register
from tests.servers import free_port

pytestmark = pytest.mark.integration


def collect(spark, options: dict[str, str], min_rows: int, timeout: float = 60.0):
    register(spark)
    batches: list[list] = []

    def keep(df, batch_id):
        batches.append([tuple(r) for r in df.select("topic", "partition", "offset", "key", "value").collect()])

    reader = spark.readStream.format("autosizer-kafka")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = reader.load().writeStream.foreachBatch(keep).trigger(processingTime="200 milliseconds").start()
    try:
        deadline = time.monotonic() + timeout
        while sum(len(b) for b in batches) < min_rows and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    return batches


def test_reads_every_record_once_from_starting_offsets(spark, broker):
    broker.create_topic("orders", 3)
    broker.produce("orders", [(i % 3, f"k{i}".encode(), str(i).encode()) for i in range(300)])
    batches = collect(spark, {
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
        "startingOffsets": json.dumps({"orders/0": 40}),
    }, min_rows=260)
    rows = [r for b in batches for r in b]
    assert len(rows) == 260 == len(set(rows))
    assert min(r[2] for r in rows if r[1] == 0) == 40
    for partition in range(3):
        offsets = [r[2] for r in rows if r[1] == partition]
        assert offsets == sorted(offsets) == list(range(offsets[0], 100))


def test_admission_control_caps_each_batch(spark, broker):
    broker.create_topic("orders", 2)
    broker.produce("orders", [(i % 2, None, b"x") for i in range(200)])
    batches = collect(spark, {
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders", "maxRecordsPerBatch": "30",
    }, min_rows=200)
    sizes = [len(b) for b in batches if b]
    assert sum(sizes) == 200
    assert max(sizes) <= 30
    assert {r[1] for r in batches[0]} == {0, 1}  # both partitions get a share


def test_held_partitions_are_not_advanced(broker):
    broker.create_topic("orders", 2)
    broker.produce("orders", [(i % 2, None, b"x") for i in range(20)])
    reader = KafkaStreamReader({
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
        "holdPartitions": json.dumps(["orders/1"]),
    })
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) == {"orders/0": 10, "orders/1": 0}
    reader.stop()


def test_unknown_topic_and_unreachable_broker_fail_clearly(broker):
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "nope"})
    with pytest.raises(ValueError, match="unknown topic 'nope'"):
        reader.initialOffset()
    reader.stop()
    down = KafkaStreamReader({
        "kafka.bootstrap.servers": f"127.0.0.1:{free_port()}", "subscribe": "orders",
        "kafka.retries": "2", "kafka.timeoutMs": "500",
    })
    with pytest.raises(KafkaUnavailable, match="did not answer .* start the broker"):
        down.initialOffset()
    down.stop()


def test_a_partition_that_appears_at_run_time_is_read_from_its_start(broker):
    """Tansu cannot add partitions (no CreatePartitions), so the earlier plan is simulated:
    `start` does not know partition 1, as if it appeared after the previous batch."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    broker.create_topic("orders", 2)
    broker.produce("orders", [(i % 2, None, b"x") for i in range(20)])
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders"})
    end = reader.latestOffset({"orders/0": 4}, ReadAllAvailable())
    assert end == {"orders/0": 10, "orders/1": 10}
    slots = reader.partitions({"orders/0": 4}, end)
    assert sorted((r.partition, r.start, r.end) for s in slots for r in s.ranges) == [(0, 4, 10), (1, 0, 10)]
    reader.stop()


def test_a_pause_file_admits_no_new_data(broker, tmp_path):
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    broker.create_topic("orders", 1)
    broker.produce("orders", [(0, None, b"x") for _ in range(5)])
    pause = tmp_path / "paused"
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
                                "pauseFile": str(pause)})
    pause.touch()
    assert reader.latestOffset({"orders/0": 1}, ReadAllAvailable()) == {"orders/0": 1}
    pause.unlink()
    assert reader.latestOffset({"orders/0": 1}, ReadAllAvailable()) == {"orders/0": 5}
    reader.stop()
