"""Does the fixed cost the pipeline exports while a job keeps up hold for its next backlog?

A saturated batch's fixed cost (`autosizer_pipeline_batch_overhead_seconds`, what the daemon, the
pipeline's admission and `autosizer fit` size every factor by) is measured only from saturated
cycles. A job that starts on a backlog and then keeps up measured it in its first minute, while its
JVM and Python workers were still warming up (run n4 held 0.642 s all run where the step's batches
paid about 0.4 s). Since session 81 every batch moves it by as much as the batch's part that is
neither work nor read has moved (`Admission.overhead_s`).

Each case runs `autosizer pipeline run` as a user does (the demo's app, `examples.enrich:enrich`
at 10 ms a lookup, only the required flags, 4 partitions, 200 keys): a backlog, a trickle of
`--trickle` seconds that the job keeps up with, then a backlog again. It reads the exported gauge
once a second and prints, per case, the gauge at the end of the first backlog (what the pipeline
held before session 81 until a saturated batch came again), at the end of the trickle (what it
holds now), and in the second backlog, once its cycles have measured the cost again (the truth
for both), with each ratio to that.

    .venv/bin/python benchmarks/bench_fixed_cost.py [--cases local:1,local:4,cluster:4]
        [--records 40000] [--trickle 90] [--rate 300]

Each case takes about 3-4 minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis, EmbeddedSparkCluster, free_port  # noqa: E402

PARTITIONS, KEYS, LOOKUP_MS = 4, 200, "10"
GAUGE, OUTPUTS = "autosizer_pipeline_batch_overhead_seconds", "autosizer_pipeline_records_out_total"
ENGINES = ("local", "cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="local:1,local:4,cluster:4",
                        help="ENGINE:FACTOR,... (engine local[2] or a standalone cluster with 2 cores)")
    parser.add_argument("--records", type=int, default=40000, help="each backlog's records")
    parser.add_argument("--trickle", type=float, default=90, help="seconds of keeping up between the backlogs")
    parser.add_argument("--rate", type=float, default=300, help="the trickle's records/s")
    args = parser.parse_args()
    cases = []
    for item in args.cases.split(","):
        engine, _, factor = item.partition(":")
        if engine not in ENGINES or not factor.isdigit() or int(factor) not in (1, 2, 4, 8, 16):
            parser.error(f"--cases takes ENGINE:FACTOR items, ENGINE local or cluster and FACTOR 1-16 "
                         f"a power of two, not {item!r}")
        cases.append((engine, int(factor)))
    if args.records < 1000:
        parser.error(f"--records must be at least 1000 (a backlog of saturated batches), not {args.records}")
    if not (math.isfinite(args.trickle) and 20 <= args.trickle <= 3600):
        parser.error(f"--trickle must be 20 to 3600 seconds, not {args.trickle}")
    if not (math.isfinite(args.rate) and 1 <= args.rate <= 1000):
        parser.error(f"--rate must be 1 to 1000 records/s (factor 1 does about 340/s), not {args.rate}")
    rows = [run(engine, factor, args.records, args.trickle, args.rate) for engine, factor in cases]
    print("\nthe fixed cost the pipeline exports (s), and its ratio to what the second backlog measured")
    print(f"{'case':12} {'1st backlog':>12} {'trickle end':>12} {'2nd backlog':>12}"
          f" {'held / truth':>13} {'now / truth':>12}")
    for (engine, factor), (first, trickle, second) in zip(cases, rows, strict=True):
        print(f"{engine + ' F=' + str(factor):12} {first:12.3f} {trickle:12.3f} {second:12.3f}"
              f" {first / second:13.2f} {trickle / second:12.2f}")


def run(engine: str, factor: int, records: int, trickle_s: float, rate: float) -> tuple[float, float, float]:
    """One case: the gauge at the first backlog's end, the trickle's end and in the second
    backlog."""
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-fixed-cost-"))
    print(f"{engine} at factor {factor}: workdir {workdir}", flush=True)
    produced = 0

    def orders(count: int) -> list[tuple[int, bytes, bytes]]:
        nonlocal produced
        out = [(i % KEYS % PARTITIONS, b"c-%d" % (i % KEYS),
                json.dumps({"order": i, "customer": i % KEYS}).encode()) for i in range(produced, produced + count)]
        produced += count
        return out

    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker, \
            contextlib.ExitStack() as stack:
        broker.create_topic("orders", PARTITIONS)
        broker.produce("orders", orders(records))
        MetadataStore(redis_server.url, "cost").init_layout(Layout(topics={"orders": PARTITIONS}, factor=factor))
        master = "local[2]"
        if engine == "cluster":
            master = stack.enter_context(EmbeddedSparkCluster(cores=2, workdir=workdir / "spark")).master_url
        port = free_port()
        pipeline = subprocess.Popen(
            [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run", "--app", "examples.enrich:enrich",
             "--job", "cost", "--redis", redis_server.url, "--bootstrap", broker.bootstrap,
             "--sink", f"file:{workdir / 'out'}", "--master", master, "--metrics-port", str(port),
             "--conf", f"spark.executorEnv.ENRICH_LOOKUP_MS={LOOKUP_MS}"],
            cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable, "ENRICH_LOOKUP_MS": LOOKUP_MS},
            stdout=(workdir / "pipeline.log").open("w"), stderr=subprocess.STDOUT)
        try:
            first = _until_done(workdir, pipeline, port, produced, "the first backlog")
            end = time.monotonic() + trickle_s
            trickle = first
            while time.monotonic() < end:
                broker.produce("orders", orders(max(1, round(rate / 10))))
                time.sleep(0.1)
                trickle = _scrape(port, trickle)[0]
            print(f"  trickle done: {trickle:.3f} s", flush=True)
            target = produced + records
            broker.produce("orders", orders(records))
            second = _until_done(workdir, pipeline, port, target - records // 4, "three quarters of the second")
        finally:
            pipeline.terminate()
            pipeline.wait(60)
    return first, trickle, second


def _until_done(workdir: Path, pipeline: subprocess.Popen, port: int, records: int, what: str) -> float:
    """Waits until the pipeline has output `records`; the gauge's last reading before."""
    gauge, began = math.nan, time.monotonic()
    while True:
        gauge, done = _scrape(port, gauge)
        if done >= records:
            break
        if pipeline.poll() is not None:
            raise SystemExit(f"the pipeline exited: see {workdir / 'pipeline.log'}")
        if time.monotonic() - began > 900:
            raise SystemExit(f"{what} took over 15 minutes: see {workdir / 'pipeline.log'}")
        time.sleep(1)
    print(f"  {what} done: {gauge:.3f} s", flush=True)
    return gauge


def _scrape(port: int, last: float) -> tuple[float, float]:
    """The exported fixed cost (`last` where the pipeline has not measured it or did not
    answer) and the outputs so far (one per order: `examples.enrich`)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            text = reply.read().decode()
    except OSError:
        return last, 0.0
    gauge, outputs = last, 0.0
    for line in text.splitlines():
        if line.startswith(GAUGE):
            gauge = float(line.rsplit(" ", 1)[1])
        elif line.startswith(OUTPUTS):
            outputs = float(line.rsplit(" ", 1)[1])
    return gauge, outputs


if __name__ == "__main__":
    main()
