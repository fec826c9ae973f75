"""What a batch costs the Kafka sink, side by side in one run, three ways:
- `old`: the way the sink wrote until session 45, at least once across crashes: a new idempotent
  producer for every slot of every batch, no header;
- `plain`: the same writes through one producer kept for the worker, no header, no marks: what
  at least once costs with the producer kept;
- `exactly once`: `KafkaSink` as shipped: read the topic's ends, write the outputs with their
  source header through the kept producer, read the ends again and store the marks in Redis.

A clean run, the case every batch but a redo is: nothing lies past the marks, so nothing is read
back. Real broker (noida-db) and Redis on loopback; `--outputs` a batch (default 1,000), output
topics of 2 and 32 partitions.

Then a topic shared with another producer, which writes `--others` records (default 10,000)
into it between two batches: the shipped sink against the same sink reading back past its marks
every batch, as it did until session 46 (patched in here, not a setting), interleaved.

    .venv/bin/python benchmarks/bench_kafka_sink.py [--outputs 1000] [--batches 30] [--others 10000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Checkpoints, Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis  # noqa: E402
from autosizer.pipeline.sinks import KafkaSink  # noqa: E402


def batch_outputs(batch: int, count: int) -> tuple[list, list]:
    first = batch * count
    return ([(b"key-%d" % (o % 200), b"order %d enriched" % o) for o in range(first, first + count)],
            [("orders", 0, o, o * 7919, 0) for o in range(first, first + count)])


def plain_write(producer, topic: str, outputs: list) -> None:
    """The outputs through `producer`, no header, no marks."""
    for key, value in outputs:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(60) == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outputs", type=int, default=1000, help="outputs a batch")
    parser.add_argument("--batches", type=int, default=30, help="batches a side and topic")
    parser.add_argument("--others", type=int, default=10000,
                        help="another producer's records a batch on the shared topic")
    args = parser.parse_args()
    configure_logging(level="warning")  # the every-batch side logs each read-back
    with EmbeddedBroker() as broker, EmbeddedRedis(Path(tempfile.mkdtemp())) as redis_server:
        from confluent_kafka import Producer

        def new_producer() -> Producer:
            return Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "log_level": 0})

        kept = new_producer()
        print("ms a batch (median)  old  plain  exactly-once  (of it: ends + marks)  exactly-once/old  exactly-once/plain")
        for partitions in (2, 32):
            for side in ("old", "plain", "sink"):
                broker.create_topic(f"{side}-{partitions}", partitions)
            store = MetadataStore(redis_server.url, f"bench-{partitions}")
            layout = Layout(topics={"orders": 1}, factor=1)
            store.init_layout(layout)
            checkpoints = Checkpoints.initial(layout)
            sink = KafkaSink(broker.bootstrap, f"sink-{partitions}")
            sink.recover(store)
            old, plain, exact, bookkeeping = [], [], [], []
            for batch in range(args.batches):  # interleaved, so every side meets the same machine
                outputs, sources = batch_outputs(batch, args.outputs)
                began = time.perf_counter()
                plain_write(new_producer(), f"old-{partitions}", outputs)
                old.append(time.perf_counter() - began)
                began = time.perf_counter()
                plain_write(kept, f"plain-{partitions}", outputs)
                plain.append(time.perf_counter() - began)
                began = time.perf_counter()
                sink.prepare(1, batch + 1, checkpoints)
                prepared = time.perf_counter()
                sink.write(1, batch + 1, 0, outputs, sources)
                written = time.perf_counter()
                sink.finalize(1, batch + 1)
                done = time.perf_counter()
                exact.append(done - began)
                bookkeeping.append(prepared - began + done - written)
            sink.close()
            o, p, e = (statistics.median(side) * 1000 for side in (old, plain, exact))
            print(f"{partitions:>2} partitions {o:>11.1f}  {p:>5.1f}  {e:>12.1f}  {statistics.median(bookkeeping) * 1000:>21.1f}"
                  f"  {e / o:>16.3f}  {e / p:>18.2f}")
        shared(broker, redis_server, kept, args)


def shared(broker, redis_server, others, args) -> None:
    """Median ms a batch on a topic another producer writes `args.others` records to between
    batches: the shipped sink, and one that reads back past its marks every batch."""
    print(f"\nshared topic ({args.others:,} records of another producer's between batches)")
    print("ms a batch (median)  read back every batch  shipped  shipped/every batch")
    for partitions in (2, 32):
        sinks = {}
        for side in ("every", "shipped"):
            topic = f"shared-{side}-{partitions}"
            broker.create_topic(topic, partitions)
            store = MetadataStore(redis_server.url, f"bench-shared-{side}-{partitions}")
            store.init_layout(Layout(topics={"orders": 1}, factor=1))
            sinks[side] = KafkaSink(broker.bootstrap, topic)
            sinks[side].recover(store)
        checkpoints = Checkpoints.initial(Layout(topics={"orders": 1}, factor=1))
        times: dict[str, list[float]] = {side: [] for side in sinks}
        for batch in range(args.batches):
            outputs, sources = batch_outputs(batch, args.outputs)
            for side, sink in sinks.items():
                for n in range(args.others):
                    others.produce(sink.topic, key=b"theirs-%d" % n, value=b"someone else's")
                    others.poll(0)
                assert others.flush(60) == 0
                if side == "every":
                    sink._settled = False  # the sink before session 46
                began = time.perf_counter()
                sink.prepare(1, batch + 1, checkpoints)
                sink.write(1, batch + 1, 0, outputs, sources)
                sink.finalize(1, batch + 1)
                times[side].append(time.perf_counter() - began)
        every, shipped = (statistics.median(times[side]) * 1000 for side in ("every", "shipped"))
        for sink in sinks.values():
            sink.close()
        print(f"{partitions:>2} partitions {every:>28.1f}  {shipped:>7.1f}  {shipped / every:>19.2f}")


if __name__ == "__main__":
    main()
