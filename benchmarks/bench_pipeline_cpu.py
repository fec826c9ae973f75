"""The pipeline's CPU at its defaults against each default it has to save CPU, turned off, side
by side in one run:

- `no-gc-freeze`: the Python workers' modules walked by PySpark's collection after every task
  (`--no-gc-freeze`), where by default they are frozen out of it;
- `hadoop-checkpoint`: Spark's checkpoint of the query written as Spark and Hadoop write by
  default (FileContext's manager, the checksummed local file system), where by default it goes
  through the FileSystem API to the plain local file system (`agent.SCRATCH_CHECKPOINT`).

The job as a user runs it: `autosizer pipeline run` at its defaults (1 s trigger, local[*]), a
10 ms-per-record app, a steady load on two partitions, at factor 1 and at factor 8. Each run
waits for the first batch, lets the JIT settle, then reads the CPU of the pipeline's whole
process tree (driver, JVM, Python workers, and what they reaped) over a fixed window.

    .venv/bin/python benchmarks/bench_pipeline_cpu.py [--against no-gc-freeze,hadoop-checkpoint]
        [--rate 50] [--factors 1,8] [--rounds 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis, free_port  # noqa: E402
from examples.loadgen import StepLoad  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 2
SETTLE_S, WINDOW_S = 45.0, 40.0
# Each default turned off, as a user would turn it off.
AGAINST = {
    "no-gc-freeze": ["--no-gc-freeze"],
    "hadoop-checkpoint": [
        "--conf", "spark.sql.streaming.checkpointFileManagerClass="
                  "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager",
        "--conf", "spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem",
    ],
}


def tree_cpu(pid: int) -> float:
    """CPU-seconds of a process and its descendants, with the children each has reaped (forked
    Python workers, Hadoop's shell calls); children of every thread, not only the main one."""
    total, stack = 0.0, [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
            for thread in os.listdir(f"/proc/{current}/task"):
                stack += [int(c) for c in Path(f"/proc/{current}/task/{thread}/children").read_text().split()]
        except OSError:
            continue  # exited meanwhile: its parent's reaped time has it
    return total


def measure(flags: list[str], factor: int, rate: float, workdir: Path) -> float:
    """Cores the pipeline used over the window, at a steady `rate` records/s."""
    redis = EmbeddedRedis(workdir=workdir / "redis").start()
    broker = EmbeddedBroker(workdir=workdir / "broker").start()
    job = f"gc-{uuid.uuid4().hex[:8]}"
    load = None
    pipeline = None
    try:
        broker.create_topic("orders", PARTITIONS)
        store = MetadataStore(redis.url, job)
        store.init_layout(Layout(topics={"orders": PARTITIONS}, factor=factor))
        load = StepLoad(broker, "orders", PARTITIONS, rate=rate)
        load.start()
        command = [str(ROOT / ".venv" / "bin" / "autosizer"), "pipeline", "run", "--app", "benchmarks.apps:sleep_10ms",
                   "--job", job, "--redis", redis.url, "--bootstrap", broker.bootstrap,
                   "--sink", f"file:{workdir / 'out'}", "--metrics-port", str(free_port())]
        pipeline = subprocess.Popen(command + flags, cwd=ROOT,
                                    stdout=(workdir / "pipeline.log").open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while store.committed_batch(1) < 1:
            if pipeline.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the pipeline did not commit a batch: see {workdir / 'pipeline.log'}")
            time.sleep(0.5)
        time.sleep(SETTLE_S)
        before = tree_cpu(pipeline.pid)
        time.sleep(WINDOW_S)
        return (tree_cpu(pipeline.pid) - before) / WINDOW_S
    finally:
        if load is not None:
            load.stop.set()
        if pipeline is not None:
            pipeline.terminate()
            pipeline.wait(60)
        broker.stop()
        redis.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=",".join(AGAINST),
                        help=f"defaults to turn off, comma-separated (default: all of {', '.join(AGAINST)})")
    parser.add_argument("--rate", type=float, default=50.0, help="records/s in all (default 50)")
    parser.add_argument("--factors", default="1,8", help="layouts to run, comma-separated (default 1,8)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each mode per factor, alternating")
    args = parser.parse_args()
    against = args.against.split(",")
    if unknown := sorted(set(against) - set(AGAINST)):
        parser.error(f"--against {','.join(unknown)}: choose from {', '.join(AGAINST)}")
    modes = {"defaults": [], **{name: AGAINST[name] for name in against}}
    for factor in (int(f) for f in args.factors.split(",")):
        cores: dict[str, list[float]] = {mode: [] for mode in modes}
        for round_ in range(args.rounds):
            for mode, flags in modes.items():
                with tempfile.TemporaryDirectory(prefix="bench-cpu-") as tmp:
                    used = measure(flags, factor, args.rate, Path(tmp))
                cores[mode].append(used)
                print(f"factor {factor} round {round_ + 1} {mode}: {used:.2f} cores", flush=True)
        ours = statistics.median(cores["defaults"])
        for mode in against:
            theirs = statistics.median(cores[mode])
            print(f"factor {factor}, {args.rate:g}/s: {ours:.2f} cores at the defaults, {theirs:.2f} with {mode}: "
                  f"ratio {ours / theirs:.2f}", flush=True)


if __name__ == "__main__":
    main()
