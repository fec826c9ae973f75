"""The Kafka sink's exactly-once read-back against a real broker and a real Redis, step by step
as the agent calls it (recover, prepare, write per slot, commit, finalize), without Spark."""

from __future__ import annotations

import signal
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.pipeline.sinks import JOB_HEADER, SOURCE_HEADER, KafkaSink
from tests.servers import Broker

pytestmark = pytest.mark.integration
TASK = "Partition_0"


def outputs(offsets: range) -> tuple[list, list]:
    """The outputs of records `offsets` of orders[0], one each, and their sources."""
    return ([(b"k%d" % (o % 3), b"%d" % o) for o in offsets],
            [("orders", 0, o, 1000 + o, 0) for o in offsets])


def in_topic(broker) -> list[tuple[bytes, dict]]:
    """(value, headers) of every record in `enriched`, in order."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "log_level": 0})
    end = consumer.get_watermark_offsets(TopicPartition("enriched", 0), timeout=10)[1]
    consumer.assign([TopicPartition("enriched", 0, 0)])
    seen: list = []
    for _ in range(60):  # polls of up to 0.5 s
        if len(seen) >= end:
            break
        seen += [(m.value(), dict(m.headers() or ())) for m in consumer.consume(100, timeout=0.5)
                 if m.error() is None]
    consumer.close()
    assert len(seen) == end, "enriched was not read to its end"
    return seen


def pause(process) -> None:
    """SIGSTOP, until the kernel shows the process stopped: a signal sent once was now and then
    not in effect before the next write (2 runs in 10 delivered it in full)."""
    for _ in range(100):
        process.send_signal(signal.SIGSTOP)
        time.sleep(0.02)
        with open(f"/proc/{process.pid}/status") as status:
            if any(line.split()[:2] == ["State:", "T"] for line in status):
                return
    raise AssertionError(f"process {process.pid} did not stop")


def one_partition_job(broker, redis_server, job: str) -> tuple[MetadataStore, Layout, Checkpoints]:
    """An empty one-partition `enriched` topic, and a job reading orders[0] at F = 1: its store,
    layout and first checkpoints."""
    broker.create_topic("enriched", 1)
    store = MetadataStore(redis_server.url, job)
    layout = Layout(topics={"orders": 1}, factor=1)
    store.init_layout(layout)
    return store, layout, Checkpoints.initial(layout)


def commit(sink: KafkaSink, store: MetadataStore, cp: Checkpoints, batch: int, done_to: int) -> None:
    """Batch `batch` commits orders[0] up to `done_to`, as the agent commits, then the sink finalizes."""
    cp.advance(TASK, "orders", 0, done_to)
    store.commit(1, {TASK: cp.progress(TASK)}, batch=batch)
    sink.finalize(1, batch)


def test_a_redo_writes_only_what_its_dead_attempt_did_not_and_the_marks_wait_for_a_cut_tail(
        broker, redis_server, job):
    store, _, cp = one_partition_job(broker, redis_server, job)

    dead = KafkaSink(broker.bootstrap, "enriched")
    dead.recover(store)
    dead.prepare(1, 1, cp)
    assert store.sink_marks("enriched") == {0: 0}, "a new job's marks: the topic's ends"
    dead.write(1, 1, 0, *outputs(range(10)))  # then the pipeline died: no commit, no finalize
    dead.close()

    redo = KafkaSink(broker.bootstrap, "enriched")  # the restarted pipeline
    redo.recover(store)
    redo.prepare(1, 1, cp)
    assert len(redo.written) == 10
    redo.write(1, 1, 0, *outputs(range(15)))
    assert [v for v, _ in in_topic(broker)] == [b"%d" % o for o in range(15)], "each output once"
    assert in_topic(broker)[3][1] == {JOB_HEADER: job.encode(), SOURCE_HEADER: b"orders:0:3:1003:0"}
    # the redo's deadline cut its tasks at offset 6: records 6-14 are written but not committed
    commit(redo, store, cp, 1, 6)
    assert store.sink_marks("enriched") == {0: 0}, "outputs of unprocessed records lie past the marks"

    redo.prepare(1, 2, cp)
    assert redo.written == frozenset(outputs(range(6, 15))[1])
    assert store.sink_marks("enriched") == {0: 6}, "the marks move up to the first output still to redo"
    redo.write(1, 2, 0, *outputs(range(6, 20)))
    assert [v for v, _ in in_topic(broker)] == [b"%d" % o for o in range(20)]
    commit(redo, store, cp, 2, 20)
    redo.prepare(1, 3, cp)  # everything in the topic is done now
    assert redo.written == frozenset() and store.sink_marks("enriched") == {0: 20}
    redo.write(1, 3, 0, *outputs(range(20, 22)))
    commit(redo, store, cp, 3, 22)
    assert store.sink_marks("enriched") == {0: 22}, "a clean batch moves the marks to the topic's end"
    redo.close()


def test_a_topic_the_job_never_wrote_to_starts_its_marks_at_its_end(broker, redis_server, job):
    """Records another producer left in the topic are not read back, ever: a job's marks start at
    the topic's end the first time it prepares a batch for it."""
    store, _, cp = one_partition_job(broker, redis_server, job)
    broker.produce("enriched", [(0, b"k", b"someone else's") for _ in range(5)])
    sink = KafkaSink(broker.bootstrap, "enriched")
    sink.recover(store)
    sink.prepare(1, 1, cp)
    assert store.sink_marks("enriched") == {0: 5} and sink.written == frozenset()
    sink.close()


def retried_task(bootstrap: str, redis_url: str, job: str) -> None:
    """Run in its own process (a SparkContext of its own: `local[1,2]` lets a task fail once
    and be retried): one task writes ten outputs through the sink, then fails; Spark runs it
    again, and the second attempt writes the same ten outputs."""
    from pyspark import TaskContext
    from pyspark.sql import SparkSession

    store = MetadataStore(redis_url, job)
    layout = store.layout()
    sink = KafkaSink(bootstrap, "enriched")
    sink.recover(store)
    sink.prepare(1, 1, Checkpoints.initial(layout))

    def task(_rows):
        attempt = TaskContext.get().attemptNumber()
        sink.write(1, 1, 0, *outputs(range(10)))
        if attempt == 0:
            raise RuntimeError("the executor was lost after its outputs reached the topic")
        yield attempt

    spark = SparkSession.builder.master("local[1,2]").config("spark.ui.enabled", "false").getOrCreate()
    try:
        assert spark.sparkContext.parallelize([0], 1).mapPartitions(task).collect() == [1]
    finally:
        spark.stop()


def test_a_retried_spark_task_leaves_out_what_its_first_attempt_wrote(broker, redis_server, job):
    """A Spark task retried within its batch (a cluster retries a failed task, up to
    `spark.task.maxFailures`) reads back what the batch wrote since `prepare`: each output once."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    broker.create_topic("enriched", 1)
    MetadataStore(redis_server.url, job).init_layout(Layout(topics={"orders": 1}, factor=1))
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from tests.integration.test_kafka_sink import retried_task; "
                               "retried_task(*sys.argv[1:])", broker.bootstrap, redis_server.url, job],
        cwd=root, env={**os.environ, "PYSPARK_PYTHON": sys.executable}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [v for v, _ in in_topic(broker)] == [b"%d" % o for o in range(10)]


def test_another_jobs_outputs_of_the_same_records_are_not_taken_for_this_jobs(broker, redis_server, job):
    """Two jobs may read one topic and write to one topic: what the other wrote for the same
    records (its own job header) is read past, and this job's redo writes its own outputs."""
    store, layout, _ = one_partition_job(broker, redis_server, job)
    other = MetadataStore(redis_server.url, job + "-other")
    other.init_layout(layout)
    sink = KafkaSink(broker.bootstrap, "enriched")
    sink.recover(store)
    sink.prepare(1, 1, Checkpoints.initial(layout))  # the marks: the empty topic's end
    theirs = KafkaSink(broker.bootstrap, "enriched")
    theirs.recover(other)
    theirs.prepare(1, 1, Checkpoints.initial(layout))
    theirs.write(1, 1, 0, *outputs(range(5)))
    sink.prepare(1, 1, Checkpoints.initial(layout))  # a redo: five records of theirs past our marks
    assert sink.written == frozenset()
    sink.write(1, 1, 0, *outputs(range(5)))
    assert [h[JOB_HEADER] for _, h in in_topic(broker)] == [job.encode() + b"-other"] * 5 + [job.encode()] * 5
    sink.close()
    theirs.close()


def test_another_producer_is_read_past_only_by_a_batch_after_a_failed_one(broker, redis_server, job):
    """Between two clean batches the job writes nothing, so what another producer wrote since is
    not read back (a shared topic cost a read of its traffic every batch until session 46). A
    batch that failed after its outputs reached the topic leaves the next one to read back: the
    redo writes each output once."""
    from structlog.testing import capture_logs

    store, _, cp = one_partition_job(broker, redis_server, job)
    sink = KafkaSink(broker.bootstrap, "enriched")
    sink.recover(store)
    with capture_logs() as logged:
        for batch, (begin, end) in enumerate(((0, 5), (5, 10), (10, 15)), start=1):
            sink.prepare(1, batch, cp)
            sink.write(1, batch, 0, *outputs(range(begin, end)))
            commit(sink, store, cp, batch, end)
            broker.produce("enriched", [(0, b"k", b"someone else's") for _ in range(20)])
    assert not [e for e in logged if e["event"] == "sink.read_back"], "clean batches read nothing back"
    assert store.sink_marks("enriched") == {0: 55}, "the marks still follow the topic's end"

    sink.prepare(1, 4, cp)  # batch 4 writes, then fails before its commit
    sink.write(1, 4, 0, *outputs(range(15, 20)))
    broker.produce("enriched", [(0, b"k", b"someone else's") for _ in range(20)])
    with capture_logs() as logged:
        sink.prepare(1, 4, cp)  # its redo reads 20 + 5 + 20 records past the marks
    assert [(e["records"], e["already_written"]) for e in logged if e["event"] == "sink.read_back"] == [(45, 5)]
    sink.write(1, 4, 0, *outputs(range(15, 25)))
    ours = [v for v, h in in_topic(broker) if h.get(JOB_HEADER) == job.encode()]
    assert ours == [b"%d" % o for o in range(25)], "each output once, in order"
    sink.close()


def test_a_redo_under_a_new_layout_still_finds_what_the_dead_attempt_wrote(broker, redis_server, job):
    """A rescale between the crash and the redo (the checkpoints split from F = 1 to 4): the key
    hash in each output's header finds the new virtual task that owns its record, and that task
    has not processed it, so the redo leaves the output out."""
    store, layout, cp = one_partition_job(broker, redis_server, job)
    cp.advance(TASK, "orders", 0, 3)  # records 0-2 done before
    dead = KafkaSink(broker.bootstrap, "enriched")
    dead.recover(store)
    dead.prepare(1, 1, cp)
    dead.write(1, 1, 0, *outputs(range(3, 10)))
    dead.close()
    redo = KafkaSink(broker.bootstrap, "enriched")
    redo.recover(store)
    redo.prepare(2, 1, cp.migrate(layout.with_factor(4)))
    assert redo.written == frozenset(outputs(range(3, 10))[1])
    redo.close()


def test_a_write_the_broker_did_not_take_leaves_nothing_to_land_after_its_retry(redis_server, job, tmp_path):
    """A write that could not deliver fails its task, and Spark retries it, which reads back what
    its batch wrote. The failed write's producer kept its queue and went on retrying it in the
    background (the raised error holds it), so outputs landed once the broker came back, after
    the retry's read-back: written twice. Now what never left the producer is dropped before the
    error is raised."""
    broker = Broker(workdir=tmp_path / "broker").start()  # its data outlives the stop
    try:
        store, _, cp = one_partition_job(broker, redis_server, job)
        sink = KafkaSink(broker.bootstrap, "enriched", delivery_s=3)
        sink.recover(store)
        sink.prepare(1, 1, cp)
        sink.write(1, 1, 0, *outputs(range(3)))
        broker.stop()
        with pytest.raises(RuntimeError, match="7 undelivered") as failed:
            sink.write(1, 1, 0, *outputs(range(3, 10)))
        broker.start()
        time.sleep(12)  # the old producer's reconnect backoff is at most 10 s
        assert failed.value is not None  # still held, as Spark's report of the failure holds it
        assert [v for v, _ in in_topic(broker)] == [b"%d" % o for o in range(3)]
        sink.close()
    finally:
        broker.stop()


def test_a_write_to_a_broker_that_stopped_answering_fails_with_nothing_left_in_flight(redis_server, job, tmp_path):
    """The broker takes the request in and answers nothing (a paused process). The write waits
    its `delivery_s` and `timeout_s`, and its producer has then given up on every message, so it
    retries none in the background after the retried task's read-back. Until session 48
    librdkafka's own message timeout (300 s) kept them in flight ("7 still in flight to the
    broker"), free to land after the redo wrote them again. Once the broker answers again, the
    redo reads back whatever landed and writes the rest: each output once."""
    broker = Broker(workdir=tmp_path / "broker").start()
    try:
        store, _, cp = one_partition_job(broker, redis_server, job)
        sink = KafkaSink(broker.bootstrap, "enriched", timeout_s=3, delivery_s=3)
        sink.recover(store)
        sink.prepare(1, 1, cp)
        sink.write(1, 1, 0, *outputs(range(3)))
        pause(broker.process)
        try:
            with pytest.raises(RuntimeError, match="7 undelivered") as failed:
                sink.write(1, 1, 0, *outputs(range(3, 10)))
        finally:
            broker.process.send_signal(signal.SIGCONT)
        assert "Message timed out" in str(failed.value)
        assert "in flight" not in str(failed.value)
        sink.close()
        time.sleep(2)  # what the paused broker had taken in lands now, or never
        redo = KafkaSink(broker.bootstrap, "enriched", timeout_s=3, delivery_s=3)
        redo.recover(store)
        redo.prepare(1, 1, cp)
        redo.write(1, 1, 0, *outputs(range(10)))
        commit(redo, store, cp, 1, 10)
        assert [v for v, _ in in_topic(broker)] == [b"%d" % o for o in range(10)]
        redo.close()
    finally:
        broker.stop()
