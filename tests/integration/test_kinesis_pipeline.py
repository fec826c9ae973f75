"""The pipeline on Kinesis end to end: the real emulator (kinesis-local), real Redis, Spark local."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.pipeline.agent import PipelineAgent, PipelineConfig
from autosizer.pipeline.control import ControlChannel
from autosizer.pipeline.sinks import FileSink, read_committed
from tests.daemon_harness import stop as stop_process
from tests.integration.test_pipeline import (
    failure_of,
    rescale,
    ride_through_a_restart,
    run_in_thread,
    wait_until,
)
from tests.integration.test_pipeline_process import workdirs

pytestmark = pytest.mark.integration
KEYS = 40
ROOT = Path(__file__).resolve().parents[2]


def echo(record):
    """Output = the input's identity: shard, sequence number, per-key sequence."""
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


class KinesisProducer(threading.Thread):
    """PutRecords of 10 every 0.1 s until stopped: key i % KEYS with a per-key sequence. (The
    emulator spends time in proportion to the records a stream holds on every record put: a
    faster producer makes the test slower, not harder.)"""

    def __init__(self, kinesis, stream: str):
        super().__init__(daemon=True)
        self.kinesis, self.stream = kinesis, stream
        self.stopped = threading.Event()
        self.total = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            batch = [(b"key-%d" % ((self.total + j) % KEYS), b"%d" % ((self.total + j) // KEYS))
                     for j in range(10)]
            self.kinesis.produce(self.stream, batch)
            self.total += len(batch)
            time.sleep(0.1)


def check_once_in_key_order(table, total: int) -> None:
    values = [v.decode().split(":") for v in table.column("value").to_pylist()]
    ids = [(int(s), int(n)) for s, n, _ in values]
    assert len(ids) == len(set(ids)), "a record was output twice"
    assert len(ids) == total, f"{total - len(ids)} records missing"
    last: dict[bytes, int] = {}
    for key, (_, _, seq) in zip(table.column("key").to_pylist(), values, strict=True):
        assert last.get(key, -1) + 1 == int(seq), f"{key!r} out of order or a gap"
        last[key] = int(seq)


def pipeline_process(kinesis, redis_url: str, job: str, out, log, *flags: str) -> subprocess.Popen:
    """`autosizer pipeline run --source kinesis` as its own process, logging to `log`."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run", "--source", "kinesis",
         "--kinesis-endpoint", kinesis.endpoint, "--app", "tests.apps:echo", "--job", job,
         "--redis", redis_url, "--sink", f"file:{out}", "--master", "local[2]", "--metrics-port", "0",
         *flags],
        cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        stdout=log.open("w"), stderr=subprocess.STDOUT)


def kinesis_agent(spark, kinesis, redis_server, job: str, stream: str, shards: int, tmp_path, factor: int = 2,
                  process=echo, **config):
    """A stream of `shards` shards, a job on it at `factor`, and its agent in the test's session
    writing Parquet files: (store, agent, sink)."""
    kinesis.create_stream(stream, shards)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={stream: shards}, factor=factor, source="kinesis"))
    sink = FileSink(tmp_path / "out")
    agent = PipelineAgent(spark, PipelineConfig(
        job=job, redis_url=redis_server.url, bootstrap="", trigger_seconds=0.3, source="kinesis",
        kinesis_endpoint=kinesis.endpoint, **config), process, sink)
    return store, agent, sink


def _outputs_by_batch(out) -> list[tuple[tuple[int, int], int, bytes, int]]:
    """(generation, batch), shard, key, per-key sequence of every committed output, in commit order."""
    import re

    import pyarrow.parquet as pq

    rows = []
    for marker in sorted(out.glob("generation=*/batch=*/_COMMITTED"),
                         key=lambda m: tuple(map(int, re.findall(r"=(\d+)", m.parent.as_posix())[-2:]))):
        when = tuple(map(int, re.findall(r"=(\d+)", marker.parent.as_posix())[-2:]))
        for part in sorted(marker.parent.glob("slot-*.parquet")):
            table = pq.read_table(part)
            for key, value in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
                shard, _, seq = value.decode().split(":")
                rows.append((when, int(shard), key, int(seq)))
    return rows


def test_a_kinesis_job_that_kept_up_then_fell_behind_at_factor_1_scales_its_read_by_its_tails_pages(
        spark, kinesis, stream, redis_server, job, tmp_path):
    """At factor 1 a slot's reads hardly tell a record's part from the call's, and a scale-up
    would be promised the read as measured there. The driver's tails read the light input in
    small pages and the burst in big ones: their least cost a record is the read's floor, and
    the pipeline exports the read scaled by it (`batch_read_seconds`) before any rescale. Each
    warm batch's read fill is its shards' read against their planned spans, as on Kafka."""
    from tests.apps import slow_echo

    store, agent, _ = kinesis_agent(spark, kinesis, redis_server, job, stream, 2, tmp_path, factor=1,
                                    process=slow_echo, batch_seconds=1.0)
    seen: list[bool] = []
    fills: list[float | None] = []

    def on_batch(a, progress):
        seen.append(any(p.pending for p in progress))
        fills.append(a.metrics.batch_fill)

    agent.on_batch = on_batch
    producer = KinesisProducer(kinesis, stream)
    stop, thread, errors = run_in_thread(agent)
    try:
        producer.start()
        wait_until(lambda: len(seen) >= 4 and agent.admission.endpoint_cost.small, 60, "light batches", errors)
        kinesis.produce(stream, [(b"key-%d" % (i % KEYS), b"burst") for i in range(3000)])
        wait_until(lambda: sum(seen) >= 3 and agent.admission.endpoint_per_record is not None, 90,
                   "saturated batches and the tails' big pages", errors)
        time.sleep(1.0)  # the metrics of a batch after both
        assert not errors
        # where each tail got to, for the source's peek (it asks no call of a shard counted past its start)
        tips = json.loads(Path(agent._tips_file).read_text())
        assert set(tips) == {f"{stream}/0", f"{stream}/1"}
        assert all(last > 0 and tip_at > 0 for last, tip_at in tips.values()), "each tail read its shard to the tip"
    finally:
        producer.stopped.set()
        stop.set()
        thread.join(60)
        agent.close()
    admission = agent.admission
    assert admission.endpoint_cost.big and admission.endpoint_per_record > 0
    read = admission.growing_read_s(1)
    assert read is not None and read > 0, "the read's floor, before any rescale"
    assert admission.growing_read_s(8) == pytest.approx(8 * read)
    assert admission.duty(8) < admission.duty(1)
    assert agent.metrics.read_s is not None and agent.metrics.read_s > 0  # as the last batch left it
    assert "autosizer_pipeline_batch_read_seconds" in {family.name for family in agent.metrics.collect()}
    # a slot takes what its shards hold when it reads: the records are cut after the trigger,
    # before the commit (`read_boundary_seconds`, which the fit reads)
    assert 0 < admission.read_boundary_s <= admission.commit_latency_s
    assert "autosizer_pipeline_read_boundary_seconds" in {family.name for family in agent.metrics.collect()}
    # the shards' reads against their spans (keyed alike: a Kinesis plan's stream and shard index)
    measured = [f for f in fills if f is not None]
    assert measured and all(0 < f <= 1 for f in measured) and max(measured) == 1.0, fills


def test_a_split_childs_records_count_under_its_parent_until_the_parent_is_done(
        spark, kinesis, stream, redis_server, job, tmp_path):
    """A child shard is read only once its parent is done, and the layout adopts it then; until
    then its records are input the daemon must see and backlog behind the parent's tasks. Counted
    nowhere, a split hid half a shard's input from the daemon for as long as the parent took to
    drain (the Kinesis demo read 91/s of 150/s 10 s after its split). Once adopted, the children
    are read in the slot the query was planned with, not in Spark tasks of their own: on 2 cores
    a split's third task ran each batch behind in two waves (runs v5, v7, v8)."""
    from tests.apps import slow_echo

    store, agent, _ = kinesis_agent(spark, kinesis, redis_server, job, stream, 1, tmp_path, factor=1,
                                    process=slow_echo, batch_seconds=1.0)
    batches: list[tuple[set[int], set[int]]] = []  # each batch's shards read and the Spark tasks it ran
    agent.on_batch = lambda a, progress: batches.append(({p.partition for p in progress if p.records},
                                                         set(a.metrics.slots)))
    kinesis.produce(stream, [(b"key-%d" % (i % KEYS), b"backlog") for i in range(4000)])  # 20 s at 5 ms a record
    stop, thread, errors = run_in_thread(agent)
    try:
        wait_until(lambda: store.committed_batch(1) >= 1, 90, "the first commit", errors)
        client = kinesis.client()
        low = client.list_shards(StreamName=stream)["Shards"][0]["HashKeyRange"]
        middle = (int(low["StartingHashKey"]) + int(low["EndingHashKey"])) // 2
        client.split_shard(StreamName=stream, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(middle))
        kinesis.wait_active(stream)
        kinesis.produce(stream, [(b"key-%d" % (i % KEYS), b"after") for i in range(200)])
        wait_until(lambda: agent.metrics.waiting.get((stream, 0)) == 200, 30,
                   "the children's 200 records counted under their parent", errors)
        assert store.layout().partitions() == [(stream, 0)], "the parent is not done: no child adopted"
        assert agent.metrics.high_watermarks == {(stream, 0): 4200}, "input: the parent's and its children's"
        assert agent.metrics.partition_lag()[(stream, 0)] >= 200
        wait_until(lambda: store.layout().partitions() == [(stream, 1), (stream, 2)], 90, "the children", errors)
        wait_until(lambda: sum(agent.metrics.high_watermarks.values()) == 200, 30, "the children's own tails", errors)
        wait_until(lambda: any({1, 2} <= read for read, _ in batches), 30, "a batch of both children", errors)
        assert all(tasks == {0} for read, tasks in batches if {1, 2} <= read), batches
        assert not errors
    finally:
        stop.set()
        thread.join(60)
        agent.close()


def test_split_merge_rescale_regroup_and_kill_9_on_a_live_kinesis_stream(kinesis, stream, redis_server, job,
                                                                         tmp_path):
    """Issue 15's acceptance: a live keyed producer; a shard split, two shards merged, the factor
    1 -> 8 -> 2, the pipeline killed with -9 once. Every record once, per-key order with no gap,
    and every child shard's first record committed after its parents' last ones. The re-shards
    are taken under the `lineage` grouper (a child joins its first parent's line of tasks), and
    the last rescale changes the grouper to `partition` (tasks per shard), so both groupers and a
    change between them run live. (Until session 76 each grouper ran the whole scenario, 54 s of
    a worker for the second; a split under `partition` is taken live in the split test above, a
    merge under it in `test_shards.py` only. The kill lands mid-run by construction, the producer
    live: it replaced a kill -9 test of its own on a stream written in advance, 100 s of the
    suite; and a 1 -> 8 -> 2 test without the split and merge, 30 s, whose check of the 64-bit
    positions is below.)"""
    kinesis.create_stream(stream, 2)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={stream: 2}, factor=1, grouper="lineage", source="kinesis"))
    control = ControlChannel(store)
    out = tmp_path / "out"
    client = kinesis.client()

    def start(log: str) -> subprocess.Popen:
        return pipeline_process(kinesis, redis_server.url, job, out, tmp_path / log,
                                "--trigger", "0.3", "--batch-seconds", "1")

    def adopted(shard: int) -> bool:
        return (stream, shard) in store.layout().partitions()

    producer = KinesisProducer(kinesis, stream)
    pipeline = start("first.log")
    try:
        producer.start()
        wait_until(lambda: store.committed_batch(1) >= 2, 120, "the first commits")
        low = client.list_shards(StreamName=stream)["Shards"][0]["HashKeyRange"]
        middle = (int(low["StartingHashKey"]) + int(low["EndingHashKey"])) // 2
        client.split_shard(StreamName=stream, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(middle))
        wait_until(lambda: adopted(2) and adopted(3), 60, "the split's children to join the layout")
        rescale(store, control, 8)
        kinesis.wait_active(stream)
        client.merge_shards(StreamName=stream, ShardToMerge="shardId-000000000003",
                            AdjacentShardToMerge="shardId-000000000001")
        wait_until(lambda: adopted(4), 60, "the merge's child to join the layout")
        # the merge's child joins its first parent's line (3's, which is 0's), not 1's
        assert {t.name.split("-")[0] for t in store.layout().virtual_tasks()
                if (stream, 4) in t.partitions} == {"Shard_0"}, store.layout().virtual_tasks()
        killed = pipeline.pid
        assert workdirs(killed), "the pipeline's work directory is named by its pid"
        pipeline.send_signal(signal.SIGKILL)
        pipeline.wait(30)
        pipeline = start("second.log")
        assert control.wait_for(f"running@{store.current_generation()}", 120), control.status()
        rescale(store, control, 2, grouper="partition")
        time.sleep(2)
        producer.stopped.set()
        producer.join(60)
        total = producer.total
        wait_until(lambda: read_committed(out).num_rows >= total, 180, "every record")
        time.sleep(1)  # a duplicate would show up as extra rows
        assert not workdirs(killed), "the second pipeline removed the killed one's work directory"
        assert workdirs(pipeline.pid)
    finally:
        producer.stopped.set()
        if pipeline.poll() is None:
            pipeline.send_signal(signal.SIGTERM)
            try:
                pipeline.wait(60)
            except subprocess.TimeoutExpired:
                pipeline.kill()
    check_once_in_key_order(read_committed(out), total)
    # the shards' positions are sequence numbers past 64 bits, kept whole
    assert all(o > 2**63 for o in store.checkpoints().start_offsets().values())
    layout = store.layout()
    assert layout.partitions() == [(stream, 2), (stream, 4)] and layout.factor == 2
    assert layout.parents == {(stream, 2): (0,), (stream, 3): (0,), (stream, 4): (3, 1)}
    assert layout.grouper == "partition" and {t.name: t.partitions for t in layout.virtual_tasks()} == {
        f"Partition_{s}-{b}-2": {(stream, s)} for s in (2, 4) for b in range(2)}
    rows = _outputs_by_batch(out)
    first = {s: min(w for w, shard, _, _ in rows if shard == s) for s in (2, 3, 4)}
    last = {s: max(w for w, shard, _, _ in rows if shard == s) for s in (0, 1, 3)}
    for child, parents in ((2, (0,)), (3, (0,)), (4, (3, 1))):
        assert all(first[child] > last[p] for p in parents), (child, first, last)


def test_startpoints_of_every_kind_apply_once_on_kinesis(spark, kinesis, stream, redis_server, job, tmp_path):
    """Timestamp (AT_TIMESTAMP), a sequence number, oldest and upcoming, each taken at a start
    and used up: the output shows exactly where each one put the shard, once."""
    from autosizer.elasticity.startpoints import Startpoint, StartpointKey

    store, agent, sink = kinesis_agent(spark, kinesis, redis_server, job, stream, 1, tmp_path)
    control = ControlChannel(store)
    kinesis.produce(stream, [(b"k%d" % i, b"a%d" % i) for i in range(10)])
    time.sleep(0.1)
    stamp_ms = int(time.time() * 1000)
    time.sleep(0.1)
    kinesis.produce(stream, [(b"k%d" % i, b"b%d" % i) for i in range(10)])
    store.set_startpoint(StartpointKey(stream, 0), Startpoint.timestamp(stamp_ms))

    def values() -> list[str]:
        return [v.decode().split(":")[2] for v in read_committed(sink.path).column("value").to_pylist()]

    def restart_with(startpoint: Startpoint | None) -> None:
        generation = store.current_generation()
        control.request("drain")
        assert control.wait_for(f"stopped@{generation}", 60), control.status()
        if startpoint is not None:
            store.set_startpoint(StartpointKey(stream, 0), startpoint)
        control.request("start")
        assert control.wait_for(f"running@{generation}", 60), control.status()

    stop, thread, errors = run_in_thread(agent)
    try:
        wait_until(lambda: len(values()) >= 10, 60, "the records after the timestamp", errors)
        assert sorted(values()) == sorted(f"b{i}" for i in range(10))  # none of batch a
        wait_until(lambda: not store.startpoints(), 30, "the timestamp startpoint to be used up")
        restart_with(None)  # used up: a start does not apply it again
        kinesis.produce(stream, [(b"k%d" % i, b"c%d" % i) for i in range(10)])
        wait_until(lambda: len(values()) >= 20, 60, "batch c", errors)
        c3 = int(next(v for v in read_committed(sink.path).column("value").to_pylist()
                      if v.decode().endswith(":c3")).decode().split(":")[1])
        restart_with(Startpoint.specific(c3))  # a sequence number: c3..c9 once more
        wait_until(lambda: len(values()) >= 27, 60, "from c3 again", errors)
        restart_with(Startpoint.oldest())  # the whole shard once more
        wait_until(lambda: len(values()) >= 57, 60, "the whole shard again", errors)
        restart_with(Startpoint.upcoming())  # nothing old: only what comes next
        kinesis.produce(stream, [(b"k%d" % i, b"d%d" % i) for i in range(5)])
        wait_until(lambda: len(values()) >= 62, 60, "batch d", errors)
        time.sleep(1.5)
        assert not errors
    finally:
        stop.set()
        thread.join(60)
        agent.close()
    out = values()
    assert sorted(out[20:27]) == sorted(f"c{i}" for i in range(3, 10))
    assert sorted(out[27:57]) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
                                        + [f"c{i}" for i in range(10)])
    assert sorted(out[57:]) == sorted(f"d{i}" for i in range(5)), "upcoming: only the new records, once"


def test_a_kinesis_endpoint_away_for_less_than_the_outage_bound_is_ridden_through(spark, redis_server, job,
                                                                                  stream, tmp_path):
    """At the defaults a user runs (25 s, `--broker-outage-s`), the Kinesis endpoint restarted
    with 10 s away (its records kept on disk) stalls the pipeline's calls, which then go on:
    every record once, in key order, as a Kafka pipeline rides through a broker's restart."""
    from tests.servers import Kinesis

    def records(begin: int, end: int) -> list[tuple[bytes, bytes]]:
        return [(b"key-%d" % (i % KEYS), b"%d" % (i // KEYS)) for i in range(begin, end)]

    kinesis = Kinesis(data_dir=tmp_path / "kinesis").start()
    try:
        store, agent, sink = kinesis_agent(spark, kinesis, redis_server, job, stream, 2, tmp_path)
        assert agent.config.kinesis_outage_s == 25.0
        kinesis.produce(stream, records(0, 200))

        def halt() -> None:
            time.sleep(1.5)  # the emulator saves its streams every second
            kinesis.halt()

        ride_through_a_restart(agent, sink, halt, kinesis.start, lambda: kinesis.produce(stream, records(200, 400)))
        check_once_in_key_order(read_committed(sink.path), 400)
    finally:
        kinesis.stop()


def test_a_kinesis_endpoint_away_past_the_outage_bound_fails_the_query_in_one_line_and_commits_nothing(
        spark, redis_server, job, stream, tmp_path):
    """Past the bound (3 s here) the query fails, the agent reports one line naming the endpoint
    and the fix (the status an operator reads), and nothing more is committed."""
    from tests.servers import Kinesis

    kinesis = Kinesis().start()
    try:
        store, agent, sink = kinesis_agent(spark, kinesis, redis_server, job, stream, 1, tmp_path,
                                           kinesis_outage_s=3.0)
        kinesis.produce(stream, [(b"k%d" % i, b"%d" % i) for i in range(20)])
        seen: dict = {}

        def meanwhile(errors) -> None:
            wait_until(lambda: read_committed(sink.path).num_rows >= 20, 60, "the first records", errors)
            seen["before"] = store.checkpoints().to_json()
            kinesis.halt()

        message = str(failure_of(agent, meanwhile))
        assert "\n" not in message
        # the first call after the halt: the shard's iterator, or the shards' list where the peeks
        # so far were spared by the tail's counts and the source's reader has not listed them yet
        assert re.search(rf"Kinesis at {re.escape(kinesis.endpoint)} did not answer {stream}"
                         r"(/shardId-000000000000's (iterator|records)|'s shards) ", message), message
        assert "for 3s" in message and "start the endpoint or fix --kinesis-endpoint" in message
        assert store.checkpoints().to_json() == seen["before"]
        assert ControlChannel(store).status()["state"] == "failed"
    finally:
        kinesis.stop()


def test_a_kinesis_job_writes_to_a_kafka_topic_naming_each_records_sequence_number(
        spark, kinesis, broker, redis_server, job, stream, tmp_path):
    """Kinesis in, Kafka out: each output's source header carries its record's sequence number
    (up to 56 digits, past any 64-bit offset) whole, which is what a redo's read-back matches."""
    from confluent_kafka import Consumer, TopicPartition

    from autosizer.pipeline.sinks import SOURCE_HEADER, KafkaSink
    from tests.integration.test_pipeline import run_until, topic_outputs

    store, agent, _ = kinesis_agent(spark, kinesis, redis_server, job, stream, 1, tmp_path)
    broker.create_topic("enriched", 1)
    agent.sink = KafkaSink(broker.bootstrap, "enriched")
    kinesis.produce(stream, [(b"key-%d" % (i % KEYS), b"%d" % (i // KEYS)) for i in range(80)])
    run_until(agent, lambda: topic_outputs(broker.bootstrap, "enriched").num_rows >= 80, "every record")
    table = topic_outputs(broker.bootstrap, "enriched")
    check_once_in_key_order(table, 80)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "check", "log_level": 0})
    consumer.assign([TopicPartition("enriched", 0, 0)])
    headers = [dict(m.headers())[SOURCE_HEADER] for m in consumer.consume(80, timeout=10) if m.error() is None]
    consumer.close()
    sequences = [int(v.decode().split(":")[1]) for v in table.column("value").to_pylist()]
    assert [int(h.decode().split(":")[2]) for h in headers] == sequences[:len(headers)]
    assert headers and all(h.decode().startswith(f"{stream}:0:") for h in headers) and max(sequences) > 2**63


def test_a_kinesis_job_on_a_standalone_cluster_reads_with_the_executors_own_credentials(
        kinesis, stream, redis_server, job, tmp_path, monkeypatch):
    """A cluster's executors do not inherit the driver's environment: here the worker starts
    with no AWS variables at all, as a host with no credential chain, and the driver has all
    three. Without credentials on the executors the query fails in one line naming the fix and
    commits nothing; with an AWS profile handed to them (`spark.executorEnv`, the README's
    Kinesis bullet) every record comes out once, in key order. The region is not handed to
    them: the readers get the one the driver's chain found (NoRegionError before session 80)."""
    from autosizer.embedded import EmbeddedSparkCluster
    from tests.integration.test_pipeline_process import executors

    kinesis.create_stream(stream, 2)
    kinesis.wait_active(stream)
    total = 400
    kinesis.produce(stream, [(b"key-%d" % (i % KEYS), b"%d" % (i // KEYS)) for i in range(total)])
    MetadataStore(redis_server.url, job).init_layout(Layout(topics={stream: 2}, factor=2, source="kinesis"))
    driver_env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    assert all(driver_env.get(name) for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"))
    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)  # the cluster starts without any
    profile = tmp_path / "aws-credentials"
    profile.write_text("[emulator]\naws_access_key_id = local\naws_secret_access_key = local\n")
    out = tmp_path / "out"

    def start(log: str, *flags: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run", "--source", "kinesis",
             "--kinesis-endpoint", kinesis.endpoint, "--app", "tests.apps:echo", "--job", job,
             "--redis", redis_server.url, "--sink", f"file:{out}", "--master", cluster.master_url,
             "--trigger", "0.5", "--metrics-port", "0", *flags],
            cwd=ROOT, env=driver_env, stdout=(tmp_path / log).open("w"), stderr=subprocess.STDOUT)

    with EmbeddedSparkCluster(cores=2, memory="1g", workdir=tmp_path / "spark") as cluster:
        bare = start("bare.log")
        try:
            assert bare.wait(240) != 0
        finally:
            stop_process(bare)
        failed = [line for line in (tmp_path / "bare.log").read_text().splitlines() if "NoCredentialsError" in line]
        assert failed and "the Kinesis reads on Spark's executors found no AWS credentials" in failed[-1], failed
        assert "spark.executorEnv.AWS_PROFILE=NAME" in failed[-1]
        assert not out.exists() or read_committed(out).num_rows == 0, "a batch without credentials committed"

        given = start("given.log", "--conf", f"spark.executorEnv.AWS_SHARED_CREDENTIALS_FILE={profile}",
                      "--conf", "spark.executorEnv.AWS_PROFILE=emulator")
        try:
            wait_until(lambda: (out.exists() and read_committed(out).num_rows >= total) or given.poll() is not None,
                       240, "every record")
            assert given.poll() is None, "the pipeline exited: " + " | ".join(
                (tmp_path / "given.log").read_text().splitlines()[-3:])
            assert executors(cluster), "the reads ran on the standalone worker's executors"
        finally:
            stop_process(given)
    check_once_in_key_order(read_committed(out), total)
