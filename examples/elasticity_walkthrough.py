"""The README's worked example, run for real: one partition, factor 2 -> 4 -> 2, through Redis.

Starts its own redis-server on a free loopback port (or uses --redis URL), publishes a layout,
processes part of a partition per virtual task, rescales through the store, and prints the
checkpoints before and after each step. It ends by checking every message was processed once.

Run: make demo   (or: .venv/bin/python examples/elasticity_walkthrough.py [--redis URL])
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections import Counter

import redis

from autosizer.controller.logging import configure_logging
from autosizer.controller.table import format_table
from autosizer.elasticity import Checkpoints, Layout, key_hash
from autosizer.elasticity.store import MetadataStore

TOPIC = "orders"
MESSAGES = [(f"customer-{i % 23}".encode(), i) for i in range(200)]  # (key, offset)


def start_redis() -> tuple[subprocess.Popen, str]:
    if shutil.which("redis-server") is None:
        raise SystemExit("redis-server is not installed: run `make setup` first")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="autosizer-demo-")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir,
         "--appendonly", "yes", "--save", ""],
        stdout=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.ConnectionError:
            time.sleep(0.05)
    raise SystemExit("redis-server did not start")


def process(cp: Checkpoints, stops: dict[str, int], done: Counter) -> None:
    """Each virtual task processes what it accepts below its stop offset, then advances."""
    start = cp.start_offsets()[(TOPIC, 0)] or 0
    for task in cp.layout.virtual_tasks():
        stop = stops[task.name]
        for key, offset in MESSAGES[start:stop]:
            if cp.accepts(task.name, TOPIC, 0, offset, key_hash(key, offset)):
                done[offset] += 1
        cp.advance(task.name, TOPIC, 0, stop)


def show(title: str, cp: Checkpoints) -> None:
    print(f"\n== {title}  (generation {cp.layout.generation}, factor {cp.layout.factor}, "
          f"partition start offset {cp.start_offsets()[(TOPIC, 0)]})")
    rows = []
    for task in cp.layout.virtual_tasks():
        p = cp.progress(task.name)[(TOPIC, 0)]
        marks = p.to_dict().get("marks")
        rows.append({"task": task.name, "next": p.next,
                     "finer marks": f"h mod {p.modulus}: {marks}" if marks else None})
    print(format_table(rows, ["task", "next", "finer marks"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", help="use this Redis instead of starting one")
    args = parser.parse_args()
    configure_logging(level="warning")
    proc, url = (None, args.redis) if args.redis else start_redis()
    try:
        store = MetadataStore(url, f"walkthrough-{uuid.uuid4().hex[:6]}")
        done: Counter = Counter()

        layout = Layout(topics={TOPIC: 1}, factor=2)
        store.init_layout(layout, Checkpoints.from_partition_offsets(layout, {(TOPIC, 0): 100}))
        for offset in range(100):
            done[offset] += 1  # processed before the job adopted virtual tasks
        cp = store.checkpoints()
        show("factor 2, adopted from a plain checkpoint at offset 100", cp)

        process(cp, {"Partition_0-0-2": 130, "Partition_0-1-2": 120}, done)
        store.commit(cp.layout.generation, {t.name: cp.progress(t.name) for t in cp.layout.virtual_tasks()})
        show("after a batch: bucket 0 reached 130, bucket 1 reached 120", store.checkpoints())

        cp = store.migrate(1, layout.with_factor(4))
        show("split 2 -> 4: each child keeps its parent's position", cp)

        process(cp, {"Partition_0-0-4": 150, "Partition_0-1-4": 125,
                     "Partition_0-2-4": 140, "Partition_0-3-4": 160}, done)
        store.commit(cp.layout.generation, {t.name: cp.progress(t.name) for t in cp.layout.virtual_tasks()})
        show("after a batch at factor 4", store.checkpoints())

        cp = store.migrate(2, cp.layout.with_factor(2))
        show("merge 4 -> 2: the minimum, plus finer marks for what children did beyond it", cp)

        process(cp, {"Partition_0-0-2": 200, "Partition_0-1-2": 200}, done)
        store.commit(cp.layout.generation, {t.name: cp.progress(t.name) for t in cp.layout.virtual_tasks()})
        show("after draining the partition: marks collapsed", store.checkpoints())

        twice = sorted(o for o, c in done.items() if c > 1)
        missing = sorted(set(range(len(MESSAGES))) - set(done))
        print(f"\nprocessed {len(done)} of {len(MESSAGES)} messages; "
              f"duplicates: {len(twice)}, missing: {len(missing)}")
        if twice or missing:
            raise SystemExit(f"exactly-once violated: duplicates {twice[:5]}, missing {missing[:5]}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
