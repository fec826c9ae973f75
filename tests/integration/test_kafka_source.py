"""The autosizer-kafka source: real broker (noida-db), real local SparkSession."""

from __future__ import annotations

import json
import time

import pytest

from autosizer.pipeline.kafka_source import (
    EPOCH,
    READ_FROM,
    KafkaStreamReader,
    KafkaUnavailable,
    read_slot,
    register,
    write_plan,
)
from tests.servers import Broker, free_port

pytestmark = pytest.mark.integration


def ends(offset: dict) -> dict:
    """Where a batch ends per partition (without the read positions it carries)."""
    return {k: v for k, v in offset.items() if k not in (READ_FROM, EPOCH)}


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


def test_the_ranges_source_hands_each_slot_its_ranges_and_the_slot_reads_them(spark, broker):
    """`autosizer-kafka-ranges` (what the pipeline runs on Kafka): a Spark task receives one row
    per partition of its slot (a partition the slots leave out joins one: `pack`), and
    `read_slot` turns them into exactly the records `autosizer-kafka` delivers for the same
    batch."""
    import pyarrow as pa

    broker.create_topic("orders", 3)
    broker.produce("orders", [(i % 3, f"k{i}".encode(), str(i).encode()) for i in range(300)])
    register(spark)
    options = {"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
               "startingOffsets": json.dumps({"orders/0": 40}), "slots": json.dumps([["orders/0", "orders/2"]])}
    rows: list = []  # one per Spark task: its ranges, the records it read, their partitions
    bootstrap = broker.bootstrap  # the slot function is pickled: no fixture objects in it

    def keep(df, _batch_id):
        def each(batches):
            ranges = pa.Table.from_batches(list(batches))
            records = read_slot(bootstrap, ranges, 10.0)
            yield pa.RecordBatch.from_pylist([{"ranges": ranges.num_rows, "rows": records.num_rows,
                                               "parts": sorted(set(records.column("partition").to_pylist()))}])
        rows.extend(df.mapInArrow(each, "ranges long, rows long, parts array<long>").collect())

    reader = spark.readStream.format("autosizer-kafka-ranges")
    for k, v in options.items():
        reader = reader.option(k, v)
    query = reader.load().writeStream.foreachBatch(keep).trigger(processingTime="200 milliseconds").start()
    try:
        deadline = time.monotonic() + 60
        while sum(r["rows"] for r in rows) < 260 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    assert sum(r["rows"] for r in rows) == 260
    # one task per planned slot: partition 1, in none, joins it rather than run a task of its own
    assert sorted((r["ranges"], r["parts"]) for r in rows) == [(3, [0, 1, 2])]

    from autosizer.pipeline.kafka_source import KafkaRange, read_ranges

    direct = read_slot(broker.bootstrap, pa.table({"topic": ["orders"], "partition": pa.array([0], pa.int32()),
                                                   "start": [40], "end": [100]}), 10.0)
    expected = pa.Table.from_batches(list(read_ranges(broker.bootstrap, [KafkaRange("orders", 0, 40, 100)], 10.0)))
    assert direct.equals(expected) and direct.column("offset").to_pylist() == list(range(40, 100))


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


def test_a_partition_the_read_plan_leaves_out_is_not_read_until_a_plan_lists_it(broker, tmp_path):
    """An expansion child behind its barrier (or a partition the layout does not have yet) is left
    out of the agent's plan; the next plan that lists it releases it in the same query."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    broker.create_topic("orders", 2)
    broker.produce("orders", [(i % 2, None, b"x") for i in range(20)])
    plan = tmp_path / "plan.json"
    write_plan(str(plan), {"_epoch": 1, "orders/0": {"start": 0, "span": 100}})
    reader = KafkaStreamReader({
        "kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders", "planFile": str(plan),
    })
    start = reader.initialOffset()
    first = reader.latestOffset(start, ReadAllAvailable())
    assert ends(first) == {"orders/0": 10, "orders/1": 0}
    write_plan(str(plan), {"_epoch": 1, "orders/0": {"start": 10, "span": 100},
                           "orders/1": {"start": 0, "span": 100}})
    assert ends(reader.latestOffset(first, ReadAllAvailable())) == {"orders/0": 10, "orders/1": 10}
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


def test_a_broker_back_within_the_outage_bound_is_ridden_through_when_each_attempt_fails_at_once(tmp_path):
    """The bound is attempts x timeout in time, however fast an attempt fails: with the broker
    down, a watermark read fails at once ("Unknown partition"), and the attempts and their
    back-offs alone took 0.6 s of this 4 s bound, so a broker back after 2 s failed the query
    (session 78: the pipeline failed 5 s into a 10 s restart at the default 25 s bound)."""
    import threading

    broker = Broker(workdir=tmp_path / "broker").start()  # its data outlives the stop
    try:
        broker.create_topic("orders", 2)
        broker.produce("orders", [(0, b"k", b"v")] * 3)
        reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
                                    "kafka.retries": "2", "kafka.timeoutMs": "2000"})
        assert reader._watermarks("orders", 0) == (0, 3)
        broker.stop()
        back = threading.Timer(2.0, broker.start)
        back.start()
        try:
            assert reader._watermarks("orders", 0) == (0, 3)
        finally:
            back.join()
        reader.stop()
    finally:
        broker.stop()


def test_a_partition_that_appears_at_run_time_is_read_from_its_start(broker):
    """The topic grows 1 -> 2 partitions after a batch: the new partition is read from offset 0."""
    from confluent_kafka.admin import AdminClient, NewPartitions
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    broker.create_topic("orders", 1)
    broker.produce("orders", [(0, None, b"x") for _ in range(10)])
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders"})
    first = reader.latestOffset({"orders/0": 4}, ReadAllAvailable())
    assert ends(first) == {"orders/0": 10}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions("orders", 2)])["orders"].result(10)
    broker.produce("orders", [(1, None, b"x") for _ in range(10)])
    end = reader.latestOffset(first, ReadAllAvailable())
    assert ends(end) == {"orders/0": 10, "orders/1": 10}
    slots = reader.partitions(first, end)
    assert sorted((r.partition, r.start, r.end) for s in slots for r in s.ranges) == [(1, 0, 10)]
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
    assert ends(reader.latestOffset({"orders/0": 1}, ReadAllAvailable())) == {"orders/0": 5}
    reader.stop()


def test_the_read_plan_sets_where_a_batch_starts_and_how_far_it_reads(broker, tmp_path):
    """The agent's plan wins over where the previous batch ended: a partition is read again from
    its slowest task, at most `span` records past it, and the offset records where it started."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    broker.create_topic("orders", 2)
    broker.produce("orders", [(i % 2, None, b"x") for i in range(40)])
    plan = tmp_path / "plan.json"
    reader = KafkaStreamReader({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": "orders",
                                "planFile": str(plan)})
    previous = {"orders/0": 12, "orders/1": 20}
    write_plan(str(plan), {"orders/0": {"start": 5, "span": 4}, "orders/1": {"start": 20, "span": 100}})
    end = reader.latestOffset(previous, ReadAllAvailable())
    assert end == {"orders/0": 9, "orders/1": 20, READ_FROM: {"orders/0": 5, "orders/1": 20}}
    slots = reader.partitions(previous, end)
    assert [(r.partition, r.start, r.end) for s in slots for r in s.ranges] == [(0, 5, 9)]
    # No new data and no progress: the same offset, so Spark runs no batch.
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    reader.stop()


def test_the_lag_probe_reads_every_partitions_record_on_every_probe(broker):
    """The probe assigns, reads one record a partition and unassigns, every second. A consumer
    with a capped queue found no record for half the partitions on most probes, so the lag
    series went blind; one left assigned waded through every record fetched behind it."""
    from autosizer.pipeline.agent import KafkaOffsets

    broker.create_topic("probed", 4)
    broker.produce("probed", ((i % 4, b"k%d" % i, b"x" * 100) for i in range(8_000)))
    probe = KafkaOffsets(broker.bootstrap)
    try:
        for round_ in range(8):
            wanted = {("probed", p): 100 * round_ + 7 * p for p in range(4)}
            found = probe.timestamps_at(wanted)
            assert set(found) == set(wanted), (round_, sorted(found))
            assert all(stamp > 0 for stamp in found.values())
    finally:
        probe.close()
