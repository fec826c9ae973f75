"""The Kinesis demo: a job on a Kinesis stream autosized live while its shards split and merge
(`make demo-kinesis`).

It starts the Kinesis emulator (kinesis-local), Redis and Prometheus on free loopback ports, the
enrichment pipeline (`examples.enrich:enrich`, 40 ms lookup per order) with `--source kinesis` on
Spark local as its own process, and the autosizer daemon on its default policy. The load steps from
20 to 150 orders/s and back; meanwhile a shard is split and two shards are merged. The terminal
shows the factor, the shards the layout reads, lag, rates and the last decision; at the end the
keep-up verdict, the exactly-once output and per-customer order are checked and the shards'
lineage is printed.

The load stays within what the emulator serves: kinesis-local answers one call at a time, takes
160-310 records a second of PutRecords while it also serves reads, and serves a record to a
reader in 0.04 ms with no writes, 0.1-0.16 ms under 200 writes/s and 0.3-2 ms past that
(`bench_kinesis.py emulator`). Until session 57 this demo stepped to 400/s at 10 ms a lookup: the
emulator took 217/s of it, the batches' reads waited 4-8 s, and no factor kept up (a real shard
takes 1,000 records/s of writes and serves reads apart from them).

Run: make demo-kinesis   (or: .venv/bin/python examples/kinesis_demo.py [--duration 150] [--cluster])

`bench_sim_vs_real.py --source kinesis --reshard` runs it as it ships and replays it (the fit reads
the layouts it read: 2 shards, then 3, then 2); without `--reshard`, the step alone on 2 shards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
for _name, _value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local"),
                      ("AWS_DEFAULT_REGION", "us-east-1")):
    os.environ.setdefault(_name, _value)  # the emulator takes any credentials

from autosizer.controller.collector import PrometheusCollector  # noqa: E402
from autosizer.controller.config import load_config  # noqa: E402
from autosizer.controller.daemon import Daemon  # noqa: E402
from autosizer.controller.journal import DecisionJournal  # noqa: E402
from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.controller.queries import DEFAULT_QUERIES  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedKinesis, EmbeddedPrometheus, EmbeddedRedis, free_port  # noqa: E402
from autosizer.pipeline.sinks import read_committed  # noqa: E402
from examples.demo import (  # noqa: E402
    CLUSTER_CORES,
    CONFIG,
    SHOWN,
    Finished,
    _keeps_up,
    _wait_for,
    executor_env,
    last_decision,
    run_due,
    spark_master,
)
from examples.loadgen import KinesisStepLoad, check_orders, keep_up_verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STREAM, SHARDS, LOW, HIGH = "orders", 2, 20.0, 150.0
LOOKUP_MS = 40  # each order's lookup (`examples.enrich`): factor 1 does about 40/s on 2 shards
STEP_AT, STEP_S, SPLIT_AT, MERGE_AT = 20.0, 90.0, 45.0, 75.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=150,
                        help=f"seconds to run (default 150; the step is {STEP_AT:g}-{STEP_AT + STEP_S:g} s, "
                             f"the split at {SPLIT_AT:g} s, the merge at {MERGE_AT:g} s)")
    parser.add_argument("--cluster", action="store_true",
                        help=f"run the pipeline on a standalone Spark cluster ({CLUSTER_CORES} cores, started "
                             "from the pyspark package) instead of local[2]")
    args = parser.parse_args()
    if not 60 <= args.duration <= 3600:
        parser.error(f"--duration must be between 60 and 3600 seconds, not {args.duration:g}")
    run(args.duration, cluster=args.cluster)


def run(duration: float, after: Callable[[Finished], None] | None = None, reshard: bool = True,
        policy: str = "autosizer", cluster: bool = False) -> bool:
    """The whole demo; `after(finished)` runs while Prometheus and the emulator are still up (the
    sim-vs-real benchmark's hook). `reshard` False runs the step alone, on the stream's shards;
    `policy` is the daemon's (a benchmark's: the demo ships the default). `cluster` runs the
    pipeline on a standalone Spark cluster (`demo.spark_master`); its executors take their AWS
    credentials from their own host's chain, here this process's environment, which the cluster
    inherits.
    True when the job kept up with the step."""
    configure_logging(level="warning")
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-kinesis-demo-"))
    job, metrics_port = "demo-kinesis", free_port()
    print(f"autosizer Kinesis demo: workdir {workdir}; Ctrl-C stops everything")
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedKinesis() as kinesis, \
            EmbeddedPrometheus([f"127.0.0.1:{metrics_port}"], workdir / "prometheus") as prometheus, \
            contextlib.ExitStack() as spark:
        master = spark_master(spark, workdir, cluster)
        kinesis.create_stream(STREAM, SHARDS)
        store = MetadataStore(redis_server.url, job)
        store.init_layout(Layout(topics={STREAM: SHARDS}, factor=1, source="kinesis"))
        config_path = workdir / "autosizer.toml"
        config_path.write_text(CONFIG.format(job=job, redis=redis_server.url, prometheus=prometheus.url,
                                             listen=free_port()).replace('name = "autosizer"', f'name = "{policy}"'))
        app_env = {"ENRICH_LOOKUP_MS": str(LOOKUP_MS)}
        pipeline = subprocess.Popen(
            [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run", "--source", "kinesis",
             "--kinesis-endpoint", kinesis.endpoint, "--app", "examples.enrich:enrich", "--job", job,
             "--redis", redis_server.url, "--sink", f"file:{workdir / 'enriched'}",
             "--master", master, "--metrics-port", str(metrics_port), *(executor_env(app_env) if cluster else [])],
            cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable, **app_env},
            stdout=(workdir / "pipeline.log").open("w"), stderr=subprocess.STDOUT,
        )
        load = KinesisStepLoad(kinesis, STREAM, rate=LOW, json_values=True)
        daemon = Daemon(load_config(config_path))
        runner = threading.Thread(target=daemon.run, name="daemon", daemon=True)
        probe = PrometheusCollector(prometheus.url, {k: DEFAULT_QUERIES[k] for k in SHOWN}, window="5s")
        ages = PrometheusCollector(prometheus.url, {"lag_seconds": DEFAULT_QUERIES["lag_seconds"]})
        began, timeline = time.time(), []
        try:
            print("starting Spark (about 20 s)...")
            load.start()
            while store.committed_batch(store.current_generation()) < 1:
                if pipeline.poll() is not None:
                    raise SystemExit(f"the pipeline exited: see {workdir / 'pipeline.log'}")
                time.sleep(0.5)
            # as `make demo`: the watched run starts from a job that cleared Spark's start-up backlog
            settle = time.monotonic() + 60
            while time.monotonic() < settle and not _keeps_up(probe, ages):
                time.sleep(0.5)
            runner.start()
            began = time.time()
            watch(store, kinesis, load, probe, duration, timeline, reshard)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping")
        finally:
            ended = time.time()
            total = load.finish() if load.is_alive() else load.sent
            daemon.stopping.set()
            if runner.is_alive():
                runner.join(300)
            kept_up, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
            print(f"\n{verdict}")
            decisions = DecisionJournal(store).last(500)
            print(f"produced {total} orders; waiting for the pipeline to finish them...")
            _wait_for(workdir / "enriched", total)
            pipeline.terminate()
            pipeline.wait(60)
        check_orders(read_committed(workdir / "enriched"), total)
        layout = store.layout()
        lineage = ", ".join(f"{p} from {'+'.join(map(str, ps))}" for (_, p), ps in sorted(layout.parents.items()))
        print(f"shards read at the end: {[p for _, p in layout.partitions()]}; lineage: {lineage or 'none'}; "
              f"retired: {sorted(p for _, p in layout.retired)}; generation {layout.generation}")
        if after is not None:
            after(Finished(prometheus.url, began, ended, config_path, timeline, decisions, topic=STREAM,
                           kinesis=kinesis.endpoint, step=(STEP_AT, STEP_S)))
        print(f"decisions: autosizer decisions --job {job} --redis {redis_server.url} (while running)")
    return kept_up


def watch(store: MetadataStore, kinesis: EmbeddedKinesis, load: KinesisStepLoad, probe: PrometheusCollector,
          duration: float, timeline: list[dict], reshard: bool = True) -> None:
    """Step the load, split and merge shards on schedule; once a second, show the job."""
    journal, began, client = DecisionJournal(store), time.monotonic(), kinesis.client()
    events = {SPLIT_AT: lambda: split_lowest(client), MERGE_AT: lambda: merge_two(client)} if reshard else {}
    while (elapsed := time.monotonic() - began) < duration:
        load.set_rate(HIGH if STEP_AT <= elapsed < STEP_AT + STEP_S else LOW)
        run_due(events, elapsed)
        sums = {name: sum(v for _, v in probe.collect().series.get(name, ())) for name in SHOWN}
        layout = store.layout()
        timeline.append({"t": elapsed, "load": load.rate, "factor": layout.factor, "lag": sums["lag_records"]})
        said = last_decision(journal)
        print(f"{elapsed:5.0f}s  load {load.rate:4.0f}/s  in {sums['input_rate']:4.0f}/s  "
              f"out {sums['processed_rate']:4.0f}/s  lag {sums['lag_records']:5.0f}  factor {layout.factor:2d}  "
              f"shards {','.join(str(p) for _, p in layout.partitions()):8}| {said[:70]}", flush=True)
        time.sleep(max(0.0, 1 - (time.monotonic() - began - elapsed)))


def _open_shards(client) -> list[dict]:
    shards = client.list_shards(StreamName=STREAM)["Shards"]
    return sorted((s for s in shards if "EndingSequenceNumber" not in s["SequenceNumberRange"]),
                  key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def split_lowest(client) -> str:
    shard = _open_shards(client)[0]
    low, high = (int(shard["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
    client.split_shard(StreamName=STREAM, ShardToSplit=shard["ShardId"], NewStartingHashKey=str((low + high) // 2))
    return f"split {shard['ShardId']} at the middle of its hash range"


def merge_two(client) -> str:
    lower, upper = _open_shards(client)[1:3]  # the split's upper child and its neighbour
    client.merge_shards(StreamName=STREAM, ShardToMerge=lower["ShardId"], AdjacentShardToMerge=upper["ShardId"])
    return f"merge {lower['ShardId']} and {upper['ShardId']}"


if __name__ == "__main__":
    main()
