"""`Checkpoints.migrate` for about 10k virtual tasks: splits, merges, merges with marks.

Run: .venv/bin/python benchmarks/bench_migrate.py
Goal: <= 50 ms for 10k virtual tasks. Printed next to a baseline measured in the same run
(copying the same checkpoints through JSON) so the figure can be read on a noisy machine.
"""

from __future__ import annotations

import statistics
import time

from autosizer.elasticity import Checkpoints, Layout


def timed(fn, repeat: int = 7) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    base = Layout(topics={"orders": 40}, factor=256)  # 10,240 virtual tasks
    cp = Checkpoints.initial(base)
    for task in base.virtual_tasks():
        for topic, partition in task.partitions:
            cp.advance(task.name, topic, partition, 1000 + (task.bucket * 7919) % 500)
    merged = cp.migrate(base.with_factor(64))  # carries finer marks
    cases = {
        "split 256 -> 512 (10,240 -> 20,480 tasks)": (cp, base.with_factor(512)),
        "merge 256 -> 128 (10,240 -> 5,120 tasks)": (cp, base.with_factor(128)),
        "merge 256 -> 1 (10,240 -> 40 tasks)": (cp, base.with_factor(1)),
        "split with marks 64 -> 256 (2,560 -> 10,240)": (merged, merged.layout.with_factor(256)),
    }
    json_copy = timed(lambda: Checkpoints.from_json(cp.to_json(), base))
    print(f"{'case':48} {'median ms':>10} {'vs JSON copy':>13}")
    for label, (source, target) in cases.items():
        ms = timed(lambda s=source, t=target: s.migrate(t))
        print(f"{label:48} {ms:10.1f} {ms / json_copy:12.2f}x")
    print(f"{'baseline: JSON round trip of 10,240 tasks':48} {json_copy:10.1f}")


if __name__ == "__main__":
    main()
