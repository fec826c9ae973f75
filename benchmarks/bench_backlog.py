"""A 200,000-record backlog through `autosizer pipeline run` with only its required flags.

Goal (issue 10): batches stay bounded (none much longer than twice `--batch-seconds`, 3 s by
default) instead of one batch for the whole backlog, and peak memory is recorded. The pipeline runs
as a user runs it, in its own process (local[2]); this script polls Redis for each committed batch
and samples the memory (PSS) of the driver's process tree every 0.2 s.

Run: .venv/bin/python benchmarks/bench_backlog.py [--records 200000] [--apps sleep10 trivial]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedBroker, EmbeddedRedis, free_port  # noqa: E402
from benchmarks.bench_pipeline import PARTITIONS, produce_backlog  # noqa: E402

APPS = {"sleep10": ("benchmarks.apps:sleep_10ms", 16), "trivial": ("benchmarks.apps:trivial", 1)}


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo += children.get(current, [])
    return out


def pss_by_kind(root: int) -> dict[str, int]:
    """Proportional resident bytes of the pipeline's processes: the driver (Python), the JVM (driver and
    executor in local mode) and the Python workers."""
    kinds = {"driver python": 0, "jvm": 0, "python workers": 0}
    for pid in descendants(root):
        try:
            rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # PSS: Spark forks its Python workers from one daemon, so their RSS counts shared pages
        # many times over; PSS splits each shared page among the processes that map it.
        rss = next((int(line.split()[1]) * 1024 for line in rollup.splitlines() if line.startswith("Pss:")), 0)
        program = cmd.split()[0] if cmd.strip() else ""
        if not program:
            continue  # exited between the listing and the read
        kind = "driver python" if pid == root else "jvm" if "java" in program else "python workers"
        kinds[kind] += rss
    return kinds


def run(app: str, factor: int, records: int, redis_server: EmbeddedRedis, broker: EmbeddedBroker,
        workdir: Path) -> dict:
    topic, job = f"t{uuid.uuid4().hex[:8]}", f"backlog-{uuid.uuid4().hex[:6]}"
    broker.create_topic(topic, PARTITIONS)
    produce_backlog(broker, topic, records, 100_000)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={topic: PARTITIONS}, factor=factor))
    out = workdir / job
    command = [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run", "--app", app,
               "--job", job, "--redis", redis_server.url, "--bootstrap", broker.bootstrap,
               "--sink", f"file:{out}", "--master", "local[2]", "--metrics-port", str(free_port())]
    log = (workdir / f"{job}.log").open("w")
    proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    peak: dict[str, int] = {}
    peak_total = 0
    commits: list[tuple[float, int]] = []
    done = 0
    try:
        while done < records:
            if proc.poll() is not None:
                raise RuntimeError(f"the pipeline exited with {proc.returncode}: see {log.name}")
            kinds = pss_by_kind(proc.pid)
            peak = {k: max(v, peak.get(k, 0)) for k, v in kinds.items()}
            peak_total = max(peak_total, sum(kinds.values()))
            batch = store.committed_batch(1)
            if batch > len(commits):
                commits.append((time.perf_counter(), batch))
                done = sum(int(n) for n in _processed(store))
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(60)
    gaps = [b[0] - a[0] for a, b in zip(commits, commits[1:], strict=False)]
    return {"batches": commits[-1][1], "gaps": gaps, "peak": peak, "peak_total": peak_total}


def _processed(store: MetadataStore) -> list[int]:
    """Records committed so far: every partition's lowest task position (offsets start at 0)."""
    return [o or 0 for o in store.checkpoints(1).start_offsets().values()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--apps", nargs="+", default=list(APPS), choices=list(APPS))
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-backlog-"))
    print(f"## a {args.records:,}-record backlog, `autosizer pipeline run` with only its required "
          "flags (--batch-seconds 3), local[2], 4 partitions, 100,000 keys")
    print("| app | F | batches | median s between commits | longest | peak PSS: driver python / JVM / "
          "python workers | peak PSS, all |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker:
        for name in args.apps:
            app, factor = APPS[name]
            result = run(app, factor, args.records, redis_server, broker, workdir)
            gaps, peak = result["gaps"], result["peak"]
            mib = {k: v / 2**20 for k, v in peak.items()}
            print(f"| {name} | {factor} | {result['batches']} | {statistics.median(gaps):.1f} | "
                  f"{max(gaps):.1f} | {mib['driver python']:.0f} / {mib['jvm']:.0f} / "
                  f"{mib['python workers']:.0f} MiB | {result['peak_total'] / 2**20:.0f} MiB |", flush=True)


if __name__ == "__main__":
    main()
