"""Kinesis: the source's throughput with bucketing, the re-shard pause, and throughput against
the factor, on the emulator.

Run: .venv/bin/python benchmarks/bench_kinesis.py [throughput] [reshard] [factor] [rise] [calls]
[parse] [emulator] [slot] [--records 40000] [--splits 3] [--keys 100000 200] [--factors 1 2 4 8] [--seconds 15]
(no part named: all eight; `rise` takes the first of --keys)

Spark local[2], the emulator (kinesis-local) and Redis on loopback, the pipeline with
`PipelineConfig`'s defaults (what `autosizer pipeline run --source kinesis` uses).

1. Throughput: a 4-shard stream holding the backlog over 100,000 keys, drained at F = 8 by a
   function that does nothing; records/s from the first to the last commit. Side by side, in the
   same run: the emulator's own read rate (every shard read to its end by one boto3 client on the
   driver), so the ratio says how much of what the emulator serves the pipeline takes.
2. Re-shard pause: a producer writes 200 records/s throughout; each split's pause is the time from
   the SplitShard call to the first committed record of a child shard (the parent must be closed,
   found finished, and the children adopted first).
3. Throughput against the factor: `bench_pipeline.py factor`'s table on a Kinesis stream (the
   same measuring loop, columns and goals), 10 ms of sleep a record, many keys and few. Kinesis
   routes a key by the MD5 of its partition key, so shards hold uneven shares of few keys; the
   lane bound counts the keys where the emulator put them. It checks the capacity the pipeline
   exports (what the daemon sizes with) on a Kinesis source, not only on Kafka's. Up to F = 8,
   15 s of backlog (Kafka's table: F = 16, 30 s): the emulator takes a stream's writes slower the
   longer it is, about with the square of its length (11,856 records in 9 s, 23,713 in 31 s,
   47,427 in 179 s), so F = 16's 30 s, 190,000 records, would take most of an hour to write.
4. Rise: the promise a scale-up reads. A daemon scales a job up from what it measured at the
   running factor, and a batch's read grows with the factor (`elasticity/batch_cost.py`), which
   the pipeline can tell only from reads of different sizes. Three runs a scale-up starts from:
   at factor 1, one keeps up (half its bound for 30 s, batches of what arrived) and then falls
   behind (`--seconds` of its bound at once), one starts on a steady backlog, one on the same
   backlog with input arriving at half its bound for 30 s (the driver's tails then read small
   pages after the backlog's big ones: the read's floor, session 56); and one drains a
   backlog at factor 1 and is rescaled to 4 in its driver after 5 batches (reads at two
   factors). After each batch that left work behind, what its measurements promise each larger
   factor of `--factors`, over what that factor then does draining a backlog (past its start),
   with the cost as measured and with the read scaled.
5. Calls: the GetRecords, GetShardIterator and ListShards calls a pipeline at factor 1 makes of
   each shard a second, idle, keeping up with 100 records/s and draining a backlog, 40 s each,
   counted by an HTTP proxy in front of the emulator (every process's calls: the driver's tail,
   the source's peeks, the executors' reads). AWS serves a shard five of each a second, shared by
   every consumer of the stream.
6. Parse: the CPU a record costs the process that reads it (a Spark task, and the driver's tail,
   which reads every record again), with botocore's timestamp parser and with the pipeline's
   (`kinesis_source.utc_time`), side by side on the same 12,000 records in one run.
7. Emulator: what a record costs a reader while the emulator takes writes, at 0 to 400 writes/s
   asked, and the writes it took meanwhile (session 57: the Kinesis demo's old 400/s step was
   past what it takes, and its reads slowed 25-50 fold).
8. Slot: one Spark task's read of the 4 shards (`kinesis_source.read_slot`), in turn and
   together, side by side, through a proxy on loopback that adds nothing and then 20 ms to
   every call (a region's network; the proxy's own cost is in both). The emulator answers one call at a time, so on loopback only the client's
   own work overlaps.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
for _name, _value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local"),
                      ("AWS_DEFAULT_REGION", "us-east-1")):
    os.environ.setdefault(_name, _value)  # the emulator's; before Spark starts its workers

from bench_pipeline import (  # noqa: E402
    FEW_KEYS,
    RESCALE_AFTER,
    RESCALED,
    drain,
    factor_table,
    ordered_bound,
    rise_feed,
    rise_table,
    steady_feed,
)

from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedKinesis, EmbeddedRedis  # noqa: E402
from autosizer.pipeline.kinesis_source import (  # noqa: E402
    READ_THREADS,
    ShardRead,
    ShardReader,
    kinesis_client,
    read_slot,
)
from autosizer.pipeline.sinks import FileSink, read_committed  # noqa: E402

SHARDS = 4
KEYS = 100_000


def trivial(record):
    return record.value


def sleep_10ms(record):
    """`bench_pipeline`'s work a record, defined here: Spark's workers load a function of the
    script it runs by value, and one imported from another script by its module's name, which
    they cannot import."""
    time.sleep(0.010)
    return record.value


def echo_shard(record):
    return record.key, b"%d" % record.partition


class Run:
    def __init__(self, spark, kinesis: EmbeddedKinesis, redis_server: EmbeddedRedis, workdir: Path):
        self.spark, self.kinesis, self.redis, self.workdir = spark, kinesis, redis_server, workdir

    def agent(self, stream: str, factor: int, fn, shards: int = SHARDS, endpoint: str | None = None):
        """A pipeline agent on `stream`, reading through `endpoint` (default: the emulator)."""
        from autosizer.pipeline.agent import PipelineAgent, PipelineConfig

        job = f"bench-{uuid.uuid4().hex[:6]}"
        store = MetadataStore(self.redis.url, job)
        store.init_layout(Layout(topics={stream: shards}, factor=factor, source="kinesis"))
        config = PipelineConfig(job=job, redis_url=self.redis.url, bootstrap="", source="kinesis",
                                kinesis_endpoint=endpoint or self.kinesis.endpoint)
        return store, PipelineAgent(self.spark, config, fn, FileSink(self.workdir / job))

    def backlog(self, records: int, keys: int = KEYS) -> str:
        """A fresh stream holding `records` records, key `i % keys` (`b"key-k"`) with a 100-byte
        value each; a key whose shard is not the one `shard_of` gives stops the run."""
        stream = f"s{uuid.uuid4().hex[:8]}"
        self.kinesis.create_stream(stream, SHARDS)
        began = time.perf_counter()
        placed = self._writer(stream, keys)(0, records)
        print(f"  produced {records:,} records in {time.perf_counter() - began:.1f} s", flush=True)
        ids = sorted(set(placed))
        expected = shard_of(min(keys, records))
        if any(ids.index(placed[i]) != expected[i] for i in range(len(expected))):
            raise SystemExit("the emulator routed a key to another shard than its MD5 range: fix shard_of")
        return stream

    def factor_run(self, factor: int, records: int, keys: int, promise_to: tuple[int, ...] = ()):
        """The pipeline at `PipelineConfig`'s defaults draining a fresh backlog at `factor`."""
        return self._drain(factor, records, self.backlog(records, keys), promise_to=promise_to)

    def rescaled_run(self, records: int, keys: int, promise_to: tuple[int, ...]):
        """A backlog drained at factor 1, rescaled to RESCALED in its driver after RESCALE_AFTER
        batches (`drain`'s `rescale_to`)."""
        return self._drain(1, records, self.backlog(records, keys), promise_to=promise_to,
                           rescale_to=(RESCALE_AFTER, RESCALED))

    def rise_run(self, light_rate: int, light_s: int, burst: int, keys: int, promise_to: tuple[int, ...]):
        """The pipeline at factor 1 on a stream written `light_rate` records a second for
        `light_s` seconds (it keeps up), then `burst` records at once (it falls behind)."""
        stream = f"s{uuid.uuid4().hex[:8]}"
        self.kinesis.create_stream(stream, SHARDS)
        feed = rise_feed(self._writer(stream, keys), light_rate, light_s, burst)
        return self._drain(1, light_rate * light_s + burst, stream, feed, promise_to)

    def fed_run(self, light_rate: int, light_s: int, burst: int, keys: int, promise_to: tuple[int, ...]):
        """The pipeline at factor 1 on a stream holding `burst` records, written `light_rate`
        records a second for `light_s` seconds more once it runs (a job behind on live traffic)."""
        stream = self.backlog(burst, keys)
        write = self._writer(stream, keys)
        return self._drain(1, burst + light_rate * light_s, stream,
                           lambda: steady_feed(write, burst, light_rate, light_s), promise_to)

    def _writer(self, stream: str, keys: int):
        """`write(first, count)`: records `first` on, key `i % keys` with a 100-byte value each;
        the shard each went to (`EmbeddedKinesis.produce`)."""

        def write(first: int, count: int) -> list[str]:
            return self.kinesis.produce(stream, [(b"key-%d" % (i % keys), b"x" * 100)
                                                 for i in range(first, first + count)])

        return write

    def _drain(self, factor: int, records: int, stream: str, feed=None, promise_to: tuple[int, ...] = (),
               rescale_to: tuple[int, int] | None = None):
        from autosizer.pipeline.agent import PipelineConfig

        job = f"bench-{uuid.uuid4().hex[:6]}"
        config = PipelineConfig(job=job, redis_url=self.redis.url, bootstrap="", source="kinesis",
                                kinesis_endpoint=self.kinesis.endpoint)
        try:
            return drain(self.spark, config, Layout(topics={stream: SHARDS}, factor=factor, source="kinesis"),
                         sleep_10ms, FileSink(self.workdir / job), records, feed=feed, promise_to=promise_to,
                         rescale_to=rescale_to)
        finally:  # the emulator keeps every record in memory, and takes writes slower the more it holds
            self.kinesis.client().delete_stream(StreamName=stream, EnforceConsumerDeletion=True)

    def emulator_read_rate(self, stream: str) -> float:
        reader = ShardReader(kinesis_client(self.kinesis.endpoint), stream)
        began, count = time.perf_counter(), 0
        for shard in range(SHARDS):
            count += sum(1 for _ in reader.records(reader.iterator(shard, 0), 10**9))
        return count / (time.perf_counter() - began)

    def read_under_writes(self, rates: tuple[int, ...] = (0, 100, 200, 300, 400), seconds: float = 12.0,
                          records: int = 1_500) -> list[tuple[int, float, float]]:
        """Per write rate asked: the writes the emulator took (records/s) and what a record cost a
        reader that read `records` of each shard of a 2-shard stream, again and again, meanwhile."""
        from examples.loadgen import KinesisStepLoad

        stream = f"emulator-{uuid.uuid4().hex[:8]}"
        self.kinesis.create_stream(stream, 2)
        self.kinesis.produce(stream, [(b"c%d" % i, b'{"order": 1, "customer": 2, "seq": 3}') for i in range(4_000)])
        reader, out = ShardReader(kinesis_client(self.kinesis.endpoint), stream), []
        for rate in rates:
            load = KinesisStepLoad(self.kinesis, stream, rate=rate, json_values=True)
            load.start()
            time.sleep(3)  # the writes under way
            began, sent, read, spent = time.monotonic(), load.sent, 0, 0.0
            while time.monotonic() - began < seconds:
                for shard in (0, 1):
                    t = time.perf_counter()
                    read += sum(1 for _ in reader.records(reader.iterator(shard, 0), records, 0, shard=shard))
                    spent += time.perf_counter() - t
            took = (load.sent - sent) / (time.monotonic() - began)
            load.finish()
            out.append((rate, took, spent / read * 1000))
        return out

    def parse_cost(self, stream: str, rounds: int = 5) -> tuple[list[float], list[float]]:
        """CPU seconds a record costs the reading process, every shard read to its end, by a
        client on botocore's own timestamp parser and by the pipeline's (`kinesis_client`), one
        after the other in each round (the emulator's own time is not this process's CPU)."""
        import boto3

        own = boto3.session.Session()  # botocore's defaults, not the pipeline's session
        clients = {"botocore": lambda: own.client("kinesis", endpoint_url=self.kinesis.endpoint),
                   "pipeline": lambda: kinesis_client(self.kinesis.endpoint)}
        costs: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(rounds):
            for name, make in clients.items():
                reader = ShardReader(make(), stream)
                began, count = time.process_time(), 0
                for shard in range(SHARDS):
                    count += sum(1 for _ in reader.records(reader.iterator(shard, 0), 10**9))
                costs[name].append((time.process_time() - began) / count)
        return costs["botocore"], costs["pipeline"]

    def pipeline_rate(self, stream: str, records: int) -> float:
        store, agent = self.agent(stream, 8, trivial)
        commits: list[tuple[float, int]] = []
        agent.on_batch = lambda _agent, progress: commits.append(
            (time.perf_counter(), sum(p.records for p in progress)))
        stop = threading.Event()
        thread = threading.Thread(target=agent.run, args=(stop,), daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 600
            while sum(n for _, n in commits) < records and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop.set()
            thread.join(60)
            agent.close()
        first, last = commits[0][0], commits[-1][0]
        return sum(n for _, n in commits[1:]) / (last - first)

    def reshard_pauses(self, splits: int) -> list[float]:
        stream = f"s{uuid.uuid4().hex[:8]}"
        self.kinesis.create_stream(stream, 1)
        store, agent = self.agent(stream, 2, echo_shard, shards=1)
        stop = threading.Event()
        producing = threading.Event()

        def produce() -> None:
            i = 0
            while not producing.wait(0.1):
                self.kinesis.produce(stream, [(b"customer-%d" % ((i + j) % KEYS), b"x") for j in range(20)])
                i += 20

        threads = [threading.Thread(target=agent.run, args=(stop,), daemon=True),
                   threading.Thread(target=produce, daemon=True)]
        for thread in threads:
            thread.start()
        client, pauses = self.kinesis.client(), []
        out = self.workdir / agent.config.job
        try:
            while store.committed_batch(store.current_generation()) < 2:
                time.sleep(0.1)
            for _ in range(splits):
                self.kinesis.wait_active(stream)
                open_shard = next(s for s in client.list_shards(StreamName=stream)["Shards"]
                                  if "EndingSequenceNumber" not in s["SequenceNumberRange"])
                low, high = (int(open_shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
                before = set(store.layout().partitions())
                split_at = time.perf_counter()
                client.split_shard(StreamName=stream, ShardToSplit=open_shard["ShardId"],
                                   NewStartingHashKey=str((low + high) // 2))
                while True:
                    children = {p for _, p in store.layout().partitions()} - {p for _, p in before}
                    committed = {int(v) for v in read_committed(out).column("value").to_pylist()}
                    if children & committed:
                        pauses.append(time.perf_counter() - split_at)
                        break
                    if time.perf_counter() - split_at > 120:
                        raise SystemExit("no child shard's record committed within 120 s")
                    time.sleep(0.05)
                print(f"  split {len(pauses)}: {pauses[-1]:.2f} s to the first committed child record", flush=True)
        finally:
            producing.set()
            stop.set()
            threads[0].join(60)
            agent.close()
        return pauses


class CountingProxy:
    """An HTTP proxy in front of the emulator that counts every call by its operation
    (`X-Amz-Target`), whichever process makes it: the driver's tail, the source's peeks in
    Spark's Python runner, the executors' reads. `delay_s`: a round trip added to every call,
    the network between a job and its region that loopback lacks."""

    def __init__(self, target: str, delay_s: float = 0.0):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import urlparse

        self.counts: collections.Counter[str] = collections.Counter()
        lock, upstream, counts = threading.Lock(), urlparse(target), self.counts

        class Forward(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                import http.client

                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(delay_s)
                with lock:
                    counts[(self.headers.get("X-Amz-Target") or "?").split(".")[-1]] += 1
                conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=60)
                conn.request("POST", self.path, body, {k: v for k, v in self.headers.items()
                                                        if k.lower() not in ("host", "connection")})
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Forward)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def calls_per_shard(run: Run, seconds: float = 40) -> list[tuple[str, dict[str, float], int]]:
    """The Kinesis calls a pipeline at factor 1 makes of each shard a second, through a
    `CountingProxy`: idle, keeping up with 100 records/s, and draining a backlog."""
    proxy = CountingProxy(run.kinesis.endpoint)
    stream = f"s{uuid.uuid4().hex[:8]}"
    run.kinesis.create_stream(stream, SHARDS)
    batches: list[int] = []
    _, agent = run.agent(stream, 1, sleep_10ms, endpoint=proxy.endpoint)
    agent.on_batch = lambda _agent, _progress: batches.append(1)
    stop = threading.Event()
    runner = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    runner.start()
    written = 0

    def light() -> None:
        nonlocal written
        run.kinesis.produce(stream, [(b"key-%d" % (written + i), b"x" * 100) for i in range(100)])
        written += 100

    out = []
    try:
        time.sleep(20)  # the query's start
        for label, each_second in (("idle", None), ("keeping up, 100 records/s", light),
                                   ("draining a backlog", None)):
            if label == "draining a backlog":
                run.kinesis.produce(stream, [(b"key-%d" % i, b"x" * 100) for i in range(20_000)])
            proxy.counts.clear()
            before, began = len(batches), time.perf_counter()
            while time.perf_counter() - began < seconds:
                if each_second is not None:
                    each_second()
                time.sleep(1)
            elapsed = time.perf_counter() - began
            out.append((label, {op: n / elapsed / SHARDS for op, n in proxy.counts.items()}, len(batches) - before))
    finally:
        stop.set()
        runner.join(60)
        agent.close()
        proxy.close()
    return out


def slot_reads(run: Run, per_shard: tuple[int, ...], delays_ms: tuple[float, ...],
               rounds: int = 3) -> list[tuple[int, float, float, float]]:
    """One slot's read of all SHARDS shards (`read_slot`, as a Spark task runs it), in turn (one
    thread: the source before session 89) and together (the default), alternating, the order
    flipped each round; through a proxy that adds `delays_ms` to every call. Per records a shard
    and round trip: the median seconds of each, and together / in turn."""
    out = []
    for records in per_shard:
        stream = run.backlog(records * SHARDS)
        reads = [ShardRead(stream, shard, 0, 10 * records) for shard in range(SHARDS)]
        for delay_ms in delays_ms:
            proxy = CountingProxy(run.kinesis.endpoint, delay_ms / 1000)
            client = kinesis_client(proxy.endpoint)
            took: dict[int, list[float]] = {1: [], READ_THREADS: []}
            try:
                for i in range(rounds + 1):  # the first round warms the connections, and is not counted
                    for threads in (1, READ_THREADS) if i % 2 else (READ_THREADS, 1):
                        began = time.perf_counter()
                        got = sum(b.num_rows for b in read_slot(ShardReader(client, stream), reads, 30.0, threads))
                        if got != records * SHARDS:
                            raise SystemExit(f"a slot read {got} records of {records * SHARDS}")
                        if i:
                            took[threads].append(time.perf_counter() - began)
            finally:
                proxy.close()
            turn, together = statistics.median(took[1]), statistics.median(took[READ_THREADS])
            out.append((records, delay_ms, turn, together))
        run.kinesis.client().delete_stream(StreamName=stream, EnforceConsumerDeletion=True)
    return out


def shard_of(keys: int) -> list[int]:
    """The shard Kinesis routes `b"key-k"` to, for k below `keys`: the MD5 of the partition key
    read as a 128-bit number, in the even hash-key ranges of a new stream's shards (checked
    against the emulator's answer in `Run.backlog`)."""
    return [int.from_bytes(hashlib.md5(b"key-%d" % k).digest(), "big") * SHARDS >> 128 for k in range(keys)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("which", nargs="*",
                        default=["throughput", "reshard", "factor", "rise", "calls", "parse", "emulator",
                                 "slot"])
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--keys", type=int, nargs="+", default=[KEYS, FEW_KEYS],
                        help="key mixes for `factor`: distinct keys over the 4 shards")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="`factor`'s backlog per run, in seconds at the factor's ordered bound")
    args = parser.parse_args()
    configure_logging(level="warning")
    spark = None
    if {"throughput", "reshard", "factor", "rise", "calls"} & set(args.which):  # `parse` alone needs no Spark
        from pyspark.sql import SparkSession

        spark = (SparkSession.builder.master("local[2]").appName("bench-kinesis")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
                 .config("spark.sql.shuffle.partitions", "2").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-bench-"))
    with EmbeddedKinesis() as kinesis, EmbeddedRedis(workdir / "redis") as redis_server:
        run = Run(spark, kinesis, redis_server, workdir)
        if "throughput" in args.which:
            print(f"## source + bucketing: {args.records:,} records, {SHARDS} shards, F = 8, default settings")
            stream = run.backlog(args.records)
            raw = run.emulator_read_rate(stream)
            rate = run.pipeline_rate(stream, args.records)
            print(f"emulator read (one client, driver): {raw:9,.0f} records/s")
            print(f"pipeline (source, buckets, sink):   {rate:9,.0f} records/s  = {rate / raw:.0%} of the "
                  "emulator's read rate")
        if "reshard" in args.which:
            print(f"\n## re-shard pause: {args.splits} splits under a live producer (200 records/s), F = 2")
            pauses = run.reshard_pauses(args.splits)
            print(f"median {statistics.median(pauses):.2f} s ({', '.join(f'{p:.2f}' for p in pauses)})")
        if "factor" in args.which:
            for keys in args.keys:
                print(f"\n## throughput vs factor: sleep 10 ms per record, {SHARDS} shards, {keys:,} keys, "
                      "default settings", flush=True)
                factor_table(lambda factor, records, keys=keys: run.factor_run(factor, records, keys),
                             keys, args.factors, args.seconds, partition_of=shard_of(keys))
        if "rise" in args.which:
            keys = args.keys[0]
            rise_table(lambda light, seconds, burst, to: run.rise_run(light, seconds, burst, keys, to),
                       lambda factor, records, to=(): run.factor_run(factor, records, keys, to),
                       lambda factor: ordered_bound(factor, keys, 1 / 0.0101, shard_of(keys)),
                       tuple(f for f in args.factors if f > 1), args.seconds, f"{SHARDS} shards, {keys:,} keys",
                       lambda records, to: run.rescaled_run(records, keys, to),
                       lambda light, seconds, burst, to: run.fed_run(light, seconds, burst, keys, to))
        if "calls" in args.which:
            print(f"\n## Kinesis calls a shard serves a second, factor 1, {SHARDS} shards, 10 ms a record, default "
                  "settings (AWS: 5 GetRecords and 5 GetShardIterator a second a shard, every consumer's)", flush=True)
            print("| the job | GetRecords | GetShardIterator | ListShards | batches |", flush=True)
            print("| --- | --- | --- | --- | --- |", flush=True)
            for label, rates, batches in calls_per_shard(run):
                print(f"| {label} | {rates.get('GetRecords', 0):.2f} | {rates.get('GetShardIterator', 0):.2f} | "
                      f"{rates.get('ListShards', 0):.2f} | {batches} |", flush=True)
        if "slot" in args.which:
            print(f"\n## a slot's read of {SHARDS} shards: in turn and together ({READ_THREADS} threads at most), "
                  "through a proxy adding a round trip to every call", flush=True)
            print("| records a shard | round trip added | in turn | together | together / in turn |\n"
                  "| --- | --- | --- | --- | --- |", flush=True)
            for records, delay_ms, turn, together in slot_reads(run, (250, 2_500), (0, 20)):
                print(f"| {records:,} | {delay_ms:g} ms | {turn:.3f} s | {together:.3f} s | {together / turn:.2f} |",
                      flush=True)
        if "emulator" in args.which:
            print("\n## the emulator under writes: a reader reading 1,500 records of each of 2 shards over and "
                  "over, 12 s a write rate", flush=True)
            print("| writes asked | writes taken | read, ms a record |\n| --- | --- | --- |", flush=True)
            for rate, took, ms in run.read_under_writes():
                print(f"| {rate}/s | {took:.0f}/s | {ms:.3f} |", flush=True)
        if "parse" in args.which:
            print(f"\n## read CPU a record: 12,000 records, {SHARDS} shards, 100-byte values", flush=True)
            stream = run.backlog(12_000)
            theirs, ours = run.parse_cost(stream)
            for name, costs in (("botocore's timestamp parser", theirs), ("the pipeline's (utc_time)", ours)):
                print(f"{name:29s} {statistics.median(costs) * 1e6:5.1f} us a record "
                      f"({', '.join(f'{c * 1e6:.1f}' for c in costs)})")
            print(f"ratio: {statistics.median(theirs) / statistics.median(ours):.2f}x less CPU a record read")
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main()
