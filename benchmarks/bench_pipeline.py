"""Pipeline benchmarks, each measured side by side in one run (one SparkSession, one broker).

Run: .venv/bin/python benchmarks/bench_pipeline.py [factor] [trivial] [source] [downtime] [unordered]
(no argument: all five). Spark local[2]; the backlog is produced before each measurement, and a
rate is records after the first committed batch / time from the first to the last commit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis  # noqa: E402
from autosizer.pipeline.control import ControlChannel  # noqa: E402
from autosizer.pipeline.sinks import FileSink  # noqa: E402

PARTITIONS = 4
KEYS = 100_000


def sleep_2ms(record):
    time.sleep(0.002)
    return record.value


def trivial(record):
    return record.value


class Bench:
    def __init__(self, spark, broker: EmbeddedBroker, redis_server: EmbeddedRedis, workdir: Path):
        self.spark, self.broker, self.redis, self.workdir = spark, broker, redis_server, workdir

    def topic(self, records: int) -> str:
        """A fresh 4-partition topic holding `records` keyed records (batched, then one
        single-message batch per partition: the broker's watermark quirk)."""
        from confluent_kafka import Producer

        name = f"t{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(name, PARTITIONS)
        producer = Producer({"bootstrap.servers": self.broker.bootstrap, "linger.ms": 50,
                             "batch.num.messages": 10000, "log_level": 0})
        for i in range(records - PARTITIONS):
            key = i % KEYS
            producer.produce(name, key=b"key-%d" % key, value=b"%d" % i, partition=key % PARTITIONS)
            if i % 10000 == 0:
                producer.poll(0)
        producer.flush(120)
        self.broker.produce(name, [(p, b"end", b"end") for p in range(PARTITIONS)])
        return name

    def run_pipeline(self, process, factor: int, records: int, max_records: int) -> float:
        """Steady records/s of the autosizer pipeline over a backlog."""
        from autosizer.pipeline.agent import PipelineAgent, PipelineConfig

        topic = self.topic(records)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        store = MetadataStore(self.redis.url, job)
        store.init_layout(Layout(topics={topic: PARTITIONS}, factor=factor))
        commits: list[tuple[float, int]] = []
        agent = PipelineAgent(
            self.spark,
            PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap,
                           trigger_seconds=0.05, max_records_per_batch=max_records),
            process, FileSink(self.workdir / job),
            on_batch=lambda _a, progress: commits.append((time.perf_counter(), sum(p.records for p in progress))),
        )
        stop = threading.Event()
        runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        runner.start()
        while sum(n for _, n in commits) < records:
            time.sleep(0.05)
        stop.set()
        runner.join(60)
        agent.close()
        return steady_rate(commits)

    def run_unordered(self, records: int, ways: int, max_records: int) -> float:
        """The same 2 ms workload cut `ways` ways by offset range, no key order (Spark's
        minPartitions): each slot splits its records into equal chunks, a thread per chunk."""
        import pyarrow as pa

        from autosizer.pipeline.kafka_source import register

        register(self.spark)
        topic = self.topic(records)
        slots = self.spark.sparkContext.defaultParallelism
        chunks = ways // slots
        commits: list[tuple[float, int]] = []

        def slot(batches):
            batches = list(batches)
            if not batches:
                return
            table = pa.Table.from_batches(batches)
            rows = table.column("value").to_pylist()
            size = -(-len(rows) // chunks) if rows else 0

            def work(part):
                for _ in part:
                    time.sleep(0.002)
                return len(part)

            with ThreadPoolExecutor(chunks) as pool:
                done = sum(pool.map(work, [rows[i:i + size] for i in range(0, len(rows), size or 1)]))
            yield pa.RecordBatch.from_pylist([{"n": done}])

        def on_batch(df, _batch_id):
            n = sum(r["n"] for r in df.mapInArrow(slot, "n long").collect())
            commits.append((time.perf_counter(), n))

        groups = [[f"{topic}/{p}" for p in range(PARTITIONS) if p % slots == s] for s in range(slots)]
        return self._stream_rate(topic, records, max_records, on_batch, commits, slots=groups)

    def _stream_rate(self, topic: str, records: int, max_records: int, on_batch, commits,
                     slots: list[list[str]] | None = None) -> float:
        """Run a bare autosizer-kafka query with `on_batch` until `records` are counted."""
        reader = (
            self.spark.readStream.format("autosizer-kafka")
            .option("kafka.bootstrap.servers", self.broker.bootstrap).option("subscribe", topic)
            .option("maxRecordsPerBatch", str(max_records))
        )
        if slots:
            reader = reader.option("slots", json.dumps(slots))
        query = (
            reader.load().writeStream.foreachBatch(on_batch).trigger(processingTime="50 milliseconds")
            .option("checkpointLocation", tempfile.mkdtemp()).start()
        )
        while sum(n for _, n in commits) < records:
            time.sleep(0.05)
        query.stop()
        return steady_rate(commits)

    def run_source(self, records: int) -> float:
        """Records/s through the source and the bucket expression, no user function."""
        from pyspark.sql import functions as F

        from autosizer.pipeline.bucketing import key_bucket_column
        from autosizer.pipeline.kafka_source import register

        register(self.spark)
        topic = self.topic(records)
        commits: list[tuple[float, int]] = []

        def on_batch(df, _batch_id):
            row = df.select(key_bucket_column(8).alias("b")).agg(F.count("b").alias("n")).collect()[0]
            commits.append((time.perf_counter(), row["n"]))

        return self._stream_rate(topic, records, 400_000, on_batch, commits)

    def rescale_downtime(self, rescales: int) -> list[float]:
        """Seconds from the drain request to the first committed batch of the new generation,
        with a producer writing throughout."""
        from autosizer.pipeline.agent import PipelineAgent, PipelineConfig

        topic = f"t{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(topic, PARTITIONS)
        job = f"bench-{uuid.uuid4().hex[:6]}"
        store = MetadataStore(self.redis.url, job)
        store.init_layout(Layout(topics={topic: PARTITIONS}, factor=2))
        agent = PipelineAgent(
            self.spark, PipelineConfig(job=job, redis_url=self.redis.url, bootstrap=self.broker.bootstrap,
                                       trigger_seconds=0.1),
            trivial, FileSink(self.workdir / job))
        stop, producing = threading.Event(), threading.Event()
        runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)

        def produce():
            producer = self.broker.producer()
            i = 0
            while not producing.is_set():
                producer.produce(topic, key=b"k%d" % (i % KEYS), value=b"x", partition=i % PARTITIONS)
                producer.poll(0)
                i += 1
                time.sleep(0.002)
            producer.flush(10)

        feeder = threading.Thread(target=produce, daemon=True)
        feeder.start()
        runner.start()
        control = ControlChannel(store)
        downtimes = []
        try:
            for i in range(rescales):
                generation = store.current_generation()
                while store.committed_batch(generation) < 3:
                    time.sleep(0.05)
                began = time.perf_counter()
                control.request("drain")
                if not control.wait_for(f"stopped@{generation}", 60):
                    raise RuntimeError(f"drain timed out: {control.status()}")
                store.migrate(generation, store.layout().with_factor(8 if i % 2 == 0 else 2))
                control.request("start")
                while store.committed_batch(generation + 1) < 1:
                    time.sleep(0.01)
                downtimes.append(time.perf_counter() - began)
        finally:
            producing.set()
            stop.set()
            runner.join(60)
            feeder.join(10)
            agent.close()
        return downtimes


def steady_rate(commits: list[tuple[float, int]]) -> float:
    """Records after the first commit over the time from the first commit to the last."""
    if len(commits) < 2:
        raise RuntimeError("need at least two committed batches: give the benchmark more records")
    return sum(n for _, n in commits[1:]) / (commits[-1][0] - commits[0][0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", nargs="*", default=["factor", "trivial", "source", "downtime", "unordered"])
    parser.add_argument("--seconds", type=float, default=8.0, help="target steady seconds per run")
    parser.add_argument("--batch-seconds", type=float, default=2.0,
                        help="admission control: ideal seconds of work per micro-batch")
    parser.add_argument("--verbose", action="store_true", help="log the agent's steps")
    args = parser.parse_args()
    configure_logging(level="info" if args.verbose else "warning")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("autosizer-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-bench-"))
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker:
        bench = Bench(spark, broker, redis_server, workdir)
        ideal_per_task = 1 / 0.00208  # a 2 ms sleep measures 2.08 ms on these machines
        if "factor" in args.which:
            print("\n## throughput vs factor (sleep 2 ms per record, 4 partitions)")
            base = None
            for factor in (1, 2, 4, 8, 16):
                ideal = PARTITIONS * factor * ideal_per_task
                records = int(ideal * args.seconds)
                rate = bench.run_pipeline(sleep_2ms, factor, records, max_records=int(ideal * args.batch_seconds))
                base = base or rate
                print(f"F={factor:2d}: {rate:8.0f} records/s  = {rate / base:5.2f}x the F=1 rate "
                      f"(goal >= {0.8 * factor:.1f}x), {rate / ideal:4.0%} of the ideal {ideal:.0f}/s", flush=True)
        if "trivial" in args.which:
            print("\n## trivial function: bucketed (F=8) vs unbucketed (F=1)")
            one = bench.run_pipeline(trivial, 1, 400_000, max_records=100_000)
            eight = bench.run_pipeline(trivial, 8, 400_000, max_records=100_000)
            print(f"F=1: {one:8.0f}/s   F=8: {eight:8.0f}/s   loss {1 - eight / one:+.1%} (goal <= 5%)", flush=True)
        if "source" in args.which:
            print("\n## source + bucketing (no user function)")
            rate = bench.run_source(2_000_000)
            print(f"{rate:10.0f} records/s (goal >= 250,000)", flush=True)
        if "downtime" in args.which:
            print("\n## rescale downtime: drain -> migrate -> first batch of the new layout committed")
            downtimes = bench.rescale_downtime(5)
            print(f"median {statistics.median(downtimes):.2f} s over {len(downtimes)} rescales "
                  f"({', '.join(f'{d:.2f}' for d in downtimes)}) (goal <= 2 s)", flush=True)
        if "unordered" in args.which:
            print("\n## against the unordered limit: 32 ways by offset range vs F=8 (32 ordered workers)")
            ideal = 32 * ideal_per_task
            records = int(ideal * args.seconds)
            batch = int(ideal * args.batch_seconds)
            unordered = bench.run_unordered(records, 32, max_records=batch)
            ordered = bench.run_pipeline(sleep_2ms, 8, records, max_records=batch)
            print(f"batches of {args.batch_seconds:g} s: unordered: {unordered:8.0f}/s   virtual tasks F=8: {ordered:8.0f}/s   "
                  f"= {ordered / unordered:.0%} of the unordered rate (goal >= 90%)", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
