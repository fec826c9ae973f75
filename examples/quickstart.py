"""Quick start: the enrichment app on Spark local, against an embedded broker and Redis.

It starts Redis and the broker (noida-db) on free loopback ports, creates a 4-partition `orders` topic,
keeps producing orders, and runs `examples.enrich:enrich` (2 ms lookup per record) at factor 1:
four ordered workers, about 2,000 records/s at best. Then it rescales to factor 8 (drain →
migrate checkpoints → start) and runs 32 ordered workers on the same 4 partitions. At the end it
checks the exactly-once file sink: every order enriched once, per customer in order.

Run: make quickstart   (or: .venv/bin/python examples/quickstart.py [--seconds 20] [--rate 4000])
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis  # noqa: E402
from autosizer.pipeline.control import ControlChannel  # noqa: E402
from autosizer.pipeline.sinks import FileSink, read_committed  # noqa: E402
from examples.loadgen import check_orders  # noqa: E402

PARTITIONS, CUSTOMERS = 4, 5000


def produce(broker: EmbeddedBroker, rate: float, stop: threading.Event, sent: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "log_level": 0})
    i, started = 0, time.monotonic()
    while not stop.is_set():
        customer = i % CUSTOMERS
        order = {"order": i, "customer": customer, "seq": i // CUSTOMERS, "amount": i % 97}
        producer.produce("orders", key=b"customer-%d" % customer, value=json.dumps(order).encode(),
                         partition=customer % PARTITIONS)
        producer.poll(0)
        i += 1
        ahead = i / rate - (time.monotonic() - started)
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)
    sent.append(i)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15, help="seconds per phase")
    parser.add_argument("--rate", type=float, default=6000, help="orders produced per second")
    args = parser.parse_args()
    configure_logging(level="warning")

    from pyspark.sql import SparkSession

    from autosizer.pipeline.agent import PipelineAgent, PipelineConfig
    from examples.enrich import enrich

    workdir = Path(tempfile.mkdtemp(prefix="autosizer-quickstart-"))
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker:
        broker.create_topic("orders", PARTITIONS)
        job = f"quickstart-{uuid.uuid4().hex[:6]}"
        store = MetadataStore(redis_server.url, job)
        store.init_layout(Layout(topics={"orders": PARTITIONS}, factor=1))
        spark = (SparkSession.builder.master("local[2]").appName("autosizer-quickstart")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        sink = FileSink(workdir / "enriched")
        agent = PipelineAgent(spark, PipelineConfig(job=job, redis_url=redis_server.url,
                                                    bootstrap=broker.bootstrap, trigger_seconds=0.5,
                                                    max_records_per_batch=4_000, metrics_port=0),
                              enrich, sink)
        print(f"broker {broker.bootstrap}, redis {redis_server.url}, metrics "
              f"http://127.0.0.1:{agent.metrics_port}/metrics, output {sink.path}")
        stop_agent, stop_producer, sent = threading.Event(), threading.Event(), []
        runner = threading.Thread(target=agent.run, args=(stop_agent,), daemon=True)
        producer = threading.Thread(target=produce, args=(broker, args.rate, stop_producer, sent), daemon=True)
        runner.start()
        producer.start()
        control = ControlChannel(store)
        try:
            for phase, factor in enumerate((None, 8)):
                if factor is not None:
                    began = time.monotonic()
                    control.request("drain")
                    control.wait_for(f"stopped@{phase}", 60)
                    store.migrate(phase, store.layout().with_factor(factor))
                    control.request("start")
                    control.wait_for(f"running@{phase + 1}", 60)
                    print(f"rescaled to factor {factor} in {time.monotonic() - began:.1f} s")
                report(store, sink, agent, args.seconds)
            stop_producer.set()
            producer.join(60)
            total = sent[0]
            print(f"producer stopped after {total} orders; draining the backlog...")
            deadline = time.monotonic() + 300
            while read_committed(sink.path).num_rows < total and time.monotonic() < deadline:
                time.sleep(0.5)
            check_orders(read_committed(sink.path), total)
        finally:
            stop_agent.set()
            runner.join(60)
            agent.close()
            spark.stop()


def report(store: MetadataStore, sink: FileSink, agent, seconds: float) -> None:
    layout = store.layout()
    while store.committed_batch(layout.generation) < 1:  # Spark's first batch warms it up
        time.sleep(0.2)
    start_rows, start = read_committed(sink.path).num_rows, time.monotonic()
    print(f"factor {layout.factor}: {len(layout.virtual_tasks())} ordered workers on {PARTITIONS} partitions")
    while time.monotonic() - start < seconds:
        time.sleep(min(5.0, seconds))
        rows = read_committed(sink.path).num_rows
        lag = sum(agent.metrics.partition_lag().values())
        print(f"  {rows - start_rows:7d} enriched, {(rows - start_rows) / (time.monotonic() - start):7.0f}/s, lag {lag}")


if __name__ == "__main__":
    main()
