"""One slot of a micro-batch: the virtual tasks of some partitions, each on its own thread.

A slot is one Spark task. It receives every record of the partitions it owns (read once, fanned
out locally, the seed's own optimisation), keeps what each virtual task `accepts`, and runs each
virtual task on its own thread in offset order (the seed: "the container can leverage multiple
threads for the multiple virtual tasks"). It returns the outputs and, for every virtual task
reading a partition that had records, how far that task got: a task whose bucket had no records
still advances to the end of the batch.

Pure apart from calling the user's function: no Spark here, so it is tested on its own.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from autosizer.elasticity import Checkpoints, key_hashes

Output = tuple[bytes | None, bytes]
# Seconds; the edges of the process-time histogram (the seed's process-ns).
PROCESS_TIME_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)


class Record(NamedTuple):
    """What the user's function receives: one Kafka message (a NamedTuple: cheap per record)."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: datetime | None


ProcessFn = Callable[[Record], Any]
PROCESS_TIME_BUCKETS_NS = tuple(int(b * 1e9) for b in PROCESS_TIME_BUCKETS)


@dataclass
class TaskProgress:
    """How one virtual task did in one partition during one batch."""

    task: str
    topic: str
    partition: int
    next_offset: int
    records: int = 0
    outputs: int = 0
    process_ns: int = 0
    histogram: tuple[int, ...] = ()


@dataclass
class SlotResult:
    outputs: list[Output]
    progress: list[TaskProgress]
    wall_ns: int


def normalize_outputs(result: Any) -> list[Output]:
    """The user's function may return None, a value, a (key, value) pair, or an iterable of them."""
    if result is None:
        return []
    if isinstance(result, (bytes, bytearray, str)) or (
        isinstance(result, tuple) and len(result) == 2 and not isinstance(result[0], tuple)
    ):
        result = [result]
    out: list[Output] = []
    for item in result:
        if isinstance(item, tuple):
            key, value = item
        else:
            key, value = None, item
        out.append((_bytes(key), _bytes(value)))  # type: ignore[arg-type]
    return out


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"outputs must be bytes or str, not {type(value).__name__}: encode them first")


def run_slot(table: pa.Table, checkpoints: Checkpoints, process: ProcessFn) -> SlotResult:
    """Process one slot's records: accept per virtual task, then a thread per task, in order."""
    started = time.perf_counter_ns()
    layout = checkpoints.layout
    known = set(layout.partitions())
    blocked = checkpoints.blocked_partitions()
    work: dict[str, list[tuple[str, int, pa.Table]]] = {}
    progress: dict[tuple[str, str, int], TaskProgress] = {}
    if table.num_rows:
        topics = table.column("topic").to_pylist()
        parts = table.column("partition").to_numpy()
        groups: dict[tuple[str, int], list[int]] = {}
        for i, tp in enumerate(zip(topics, parts.tolist(), strict=True)):
            groups.setdefault(tp, []).append(i)
        for (topic, partition), rows in groups.items():
            if (topic, partition) not in known or (topic, partition) in blocked:
                continue  # not in this layout (yet), or waiting behind a barrier: not advanced
            records = table.take(pa.array(rows)).sort_by("offset")
            offsets = records.column("offset").to_numpy()
            hashes = (
                records.column("h").to_numpy().astype(np.uint64)
                if "h" in records.column_names
                else key_hashes(records.column("key"), offsets)
            )
            end = int(offsets[-1]) + 1
            for task in layout.readers(topic, partition):
                mask = checkpoints.accept_mask(task.name, topic, partition, offsets, hashes)
                progress[(task.name, topic, partition)] = TaskProgress(task.name, topic, partition, end)
                if mask.any():
                    work.setdefault(task.name, []).append((topic, partition, records.filter(pa.array(mask))))

    def run_task(name: str) -> list[Output]:
        outputs: list[Output] = []
        for topic, partition, records in work[name]:
            stats = progress[(name, topic, partition)]
            histogram = [0] * (len(PROCESS_TIME_BUCKETS) + 1)
            stamps = records.column("timestamp").to_pylist()
            for i, row in enumerate(records.select(["key", "value", "offset"]).to_pylist()):
                record = Record(row["key"], row["value"], topic, partition, row["offset"], stamps[i])
                t0 = time.perf_counter_ns()
                produced = normalize_outputs(process(record))
                elapsed = time.perf_counter_ns() - t0
                stats.process_ns += elapsed
                histogram[bisect.bisect_left(PROCESS_TIME_BUCKETS_NS, elapsed)] += 1
                outputs += produced
                stats.outputs += len(produced)
            stats.records = records.num_rows
            stats.histogram = tuple(histogram)
        return outputs

    outputs: list[Output] = []
    if work:
        with ThreadPoolExecutor(max_workers=len(work), thread_name_prefix="vtask") as pool:
            for produced in pool.map(run_task, sorted(work)):
                outputs += produced
    return SlotResult(outputs, list(progress.values()), time.perf_counter_ns() - started)

