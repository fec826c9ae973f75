"""The pipeline's /metrics at many virtual tasks: lines, bytes and the driver's time to render a
scrape, which grow with the factor and are paid in the driver every scrape (every second under
the daemon's 1 s scrape).

Run: .venv/bin/python benchmarks/bench_metrics.py [--repeat 5] [--against OTHER/autosizer/pipeline/metrics.py]

Each layout's exporter is fed one batch (every task busy, records in every time bucket, its
saturated rate measured) and lag for every partition, then rendered as Prometheus renders a scrape (`generate_latest`).
`--against` renders another revision's `metrics.py` (a worktree's) beside this one, the order
flipped each round, and prints the ratio of their render times.
"""

from __future__ import annotations

import argparse
import inspect
import time

from prometheus_client import CollectorRegistry, generate_latest
from revision import other_revision  # benchmarks/, run as a script

from autosizer.elasticity import Layout
from autosizer.pipeline import metrics as this_metrics
from autosizer.pipeline.admission import Admission
from autosizer.pipeline.slots import PROCESS_TIME_BUCKETS, TaskProgress

LAYOUTS = ((8, 64), (64, 64))  # (partitions, factor): 512 and 4,096 virtual tasks


def fed(module, layout: Layout) -> CollectorRegistry:
    """A registry holding `module`'s exporter after one batch of every task and a lag reading."""
    exporter, tasks = module.PipelineMetrics("bench"), layout.virtual_tasks()
    exporter.started(layout, {(t.name, *tp): 0 for t in tasks for tp in t.partitions})
    histogram = (1,) * (len(PROCESS_TIME_BUCKETS) + 1)
    read = 10 * layout.factor
    progress = [TaskProgress(t.name, *sorted(t.partitions)[0], 10, records=10, process_ns=10**8,
                             histogram=histogram, busy_ns=10**8, read=read, cpu_ns=10**8)
                for t in tasks]
    admission = Admission()  # what a running job's exporter holds: every task's measured rate
    admission.observe(progress)
    positions = {(p.task, p.topic, p.partition): p.next_offset for p in progress}
    if "wall_ns" in inspect.signature(exporter.observe_batch).parameters:  # before session 70
        # which exported each task's share of its partition's input, kept by the admission then
        admission.shares = {(p.task, p.topic, p.partition): 1 / layout.factor for p in progress}
        exporter.observe_batch(progress, {t.name: 10**9 for t in tasks}, positions, 1.0, admission=admission)
    else:
        exporter.observe_batch(progress, positions, 1.0, admission=admission)
    exporter.observe_lag({tp: 100 for tp in layout.partitions()}, {tp: 1.0 for tp in layout.partitions()})
    registry = CollectorRegistry()
    registry.register(exporter)
    return registry


def render_s(registry: CollectorRegistry, repeat: int) -> tuple[float, bytes]:
    generate_latest(registry)  # warm
    began = time.perf_counter()
    for _ in range(repeat):
        text = generate_latest(registry)
    return (time.perf_counter() - began) / repeat, text


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--against", metavar="METRICS_PY", help="another revision's autosizer/pipeline/metrics.py")
    args = parser.parse_args()
    other = other_revision(args.against, "autosizer/pipeline/metrics.py") if args.against else None
    for partitions, factor in LAYOUTS:
        layout = Layout(topics={"orders": partitions}, factor=factor)
        tasks = len(layout.virtual_tasks())
        mine = fed(this_metrics, layout)
        if other is None:
            seconds, text = render_s(mine, args.repeat)
            count = text.count(b"\n")
            print(f"{tasks:6,} tasks: {count:7,} lines ({count / tasks:.1f} a task), "
                  f"{len(text) / 1e6:5.1f} MB, render {seconds:.3f} s a scrape", flush=True)
            continue
        theirs, totals, lines = fed(other, layout), {"this": 0.0, "other": 0.0}, {}
        for i in range(args.repeat):
            pair = (("this", mine), ("other", theirs))
            for label, registry in pair if i % 2 == 0 else pair[::-1]:
                seconds, text = render_s(registry, 1)
                totals[label] += seconds
                lines[label] = text.count(b"\n")
        print(f"{tasks:6,} tasks: this {lines['this']:7,} lines, {totals['this'] / args.repeat:.3f} s; other "
              f"{lines['other']:7,} lines, {totals['other'] / args.repeat:.3f} s a scrape: this / other "
              f"{totals['this'] / totals['other']:.2f}", flush=True)


if __name__ == "__main__":
    main()
