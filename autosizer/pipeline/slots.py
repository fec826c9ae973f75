"""One slot of a micro-batch: the virtual tasks of some partitions, each on its own thread.

A slot is one Spark task. It receives every record of the partitions it owns (read once, fanned
out locally, the seed's own optimisation), keeps what each virtual task `accepts`, and runs each
virtual task on its own thread in offset order (the seed: "the container can leverage multiple
threads for the multiple virtual tasks"). It returns the outputs and, for every virtual task
reading a partition that had records, how far that task got.

A batch is bounded in time, not in records: each task works until the slot's `Deadline`, then
stops where it is and reports the first offset it did not process. A task that runs out of work
simply finishes, so a light bucket never waits for a heavy sibling inside a batch, and the next
batch re-reads each partition from its slowest task (the light tasks skip what they did).

Pure apart from calling the user's function: no Spark here, so it is tested on its own.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from autosizer.elasticity import FACTORS, MAX_FACTOR, Checkpoints, key_hashes

Output = tuple[bytes | None, bytes]
# Seconds; the edges of the process-time histogram (the seed's process-ns).
PROCESS_TIME_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
PROCESS_TIME_BUCKETS_NS = tuple(int(b * 1e9) for b in PROCESS_TIME_BUCKETS)
# Rows turned into Python objects at a time, and the turn a task gives each of its partitions:
# bounds a slot's memory to its Arrow data, and no partition of a task starves another.
CHUNK_ROWS = 256


class Record(NamedTuple):
    """What the user's function receives: one Kafka message (a NamedTuple: cheap per record)."""

    key: bytes | None
    value: bytes | None
    topic: str
    partition: int
    offset: int
    timestamp: datetime | None


ProcessFn = Callable[[Record], Any]


class Deadline(Protocol):
    """When a virtual task must stop taking records in this batch."""

    def expired(self, task: str, done: int) -> bool:
        """True once `task`, having processed `done` records in this batch, must stop."""
        ...


class NoDeadline:
    """Every task processes everything it accepts (tests, and draining a bounded batch)."""

    def expired(self, task: str, done: int) -> bool:
        return False


class WallDeadline:
    """`seconds` of wall time from the slot's start, or sooner once `stop()` says so (checked
    every `check_every_s`: a drain need not wait for a saturated batch's full budget). Every
    task processes at least one record, so a batch always makes progress even when one record
    takes longer than the budget."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic,
                 stop: Callable[[], bool] | None = None, check_every_s: float = 0.2):
        self.clock, self.stop, self.check_every_s = clock, stop, check_every_s
        self.at = clock() + seconds
        self._next_check = clock() + check_every_s
        self._lock = threading.Lock()

    def expired(self, task: str, done: int) -> bool:
        now = self.clock()
        if self.stop is not None and now >= self._next_check:
            with self._lock:  # one task thread asks, the others read the answer
                if now >= self._next_check:
                    self._next_check = now + self.check_every_s
                    if self.stop():
                        self.at = min(self.at, now)
        return done > 0 and now >= self.at


@dataclass
class TaskProgress:
    """How one virtual task did in one partition during one batch.

    `owned` counts the records of the task's keys among everything read from the partition (its
    share of the input); `pending` counts those it accepted but left for the next batch because
    the deadline came first (`pending > 0` means the task was saturated); `busy_ns` is the wall
    time its thread spent on them, so records / busy time is its rate while it had a backlog.
    """

    task: str
    topic: str
    partition: int
    next_offset: int
    records: int = 0
    outputs: int = 0
    process_ns: int = 0
    histogram: tuple[int, ...] = ()
    busy_ns: int = 0
    owned: int = 0
    pending: int = 0
    read: int = 0  # every record read from the partition in this batch, the share's denominator
    # Per factor in FACTORS: records of the partition's busiest key bucket at that factor, among
    # the `read` ones. What a controller needs to know what a rescale would buy (hot buckets).
    hottest: tuple[int, ...] = ()


@dataclass
class SlotResult:
    outputs: list[Output]
    progress: list[TaskProgress]
    wall_ns: int
    records: int = 0  # processed by every task of the slot


@dataclass
class _Work:
    """One partition's accepted records for one task, taken in offset order."""

    stats: TaskProgress
    records: pa.Table
    done: int = 0
    histogram: list[int] = field(default_factory=lambda: [0] * (len(PROCESS_TIME_BUCKETS) + 1))

    @property
    def left(self) -> int:
        return self.records.num_rows - self.done


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


def run_slot(table: pa.Table, checkpoints: Checkpoints, process: ProcessFn,
             deadline: Deadline | None = None) -> SlotResult:
    """Process one slot's records: accept per virtual task, then a thread per task, in offset
    order, each until `deadline` (default: none, everything accepted is processed)."""
    started = time.perf_counter_ns()
    deadline = deadline or NoDeadline()
    work, progress = _accept(table, checkpoints)

    def run_task(name: str) -> list[Output]:
        outputs: list[Output] = []
        queue = [item for item in work[name] if item.left]
        done = 0
        while queue:
            for item in list(queue):
                t0 = time.perf_counter_ns()
                done, cut = _run_chunk(name, item, process, deadline, done, outputs)
                item.stats.busy_ns += time.perf_counter_ns() - t0
                if cut:
                    _stop_at_deadline(queue)
                    return outputs
                if not item.left:
                    queue.remove(item)
        return outputs

    outputs: list[Output] = []
    if work:
        with ThreadPoolExecutor(max_workers=len(work), thread_name_prefix="vtask") as pool:
            for produced in pool.map(run_task, sorted(work)):
                outputs += produced
    for items in work.values():
        for item in items:
            item.stats.histogram = tuple(item.histogram)
    stats = list(progress.values())
    return SlotResult(outputs, stats, time.perf_counter_ns() - started, sum(p.records for p in stats))


def _accept(table: pa.Table, checkpoints: Checkpoints) -> tuple[dict[str, list[_Work]], dict]:
    """Per virtual task, the records it accepts in each partition, and a progress entry for
    every task reading a partition that had records (one without records still advances)."""
    layout = checkpoints.layout
    known = set(layout.partitions())
    blocked = checkpoints.blocked_partitions()
    work: dict[str, list[_Work]] = {}
    progress: dict[tuple[str, str, int], TaskProgress] = {}
    if not table.num_rows:
        return work, progress
    topics = table.column("topic").to_pylist()
    parts = table.column("partition").to_numpy()
    groups: dict[tuple[str, int], list[int]] = {}
    for i, tp in enumerate(zip(topics, parts.tolist(), strict=True)):
        groups.setdefault(tp, []).append(i)
    for (topic, partition), rows in groups.items():
        if (topic, partition) not in known or (topic, partition) in blocked:
            continue  # not in this layout (yet), or waiting behind a barrier: not advanced
        records, offsets = _in_offset_order(table.take(pa.array(rows)))
        hashes = (
            records.column("h").to_numpy().astype(np.uint64)
            if "h" in records.column_names
            else key_hashes(records.column("key"), _low_bits(offsets))
        )
        residues = np.bincount((hashes & np.uint64(MAX_FACTOR - 1)).astype(np.int64),
                               minlength=MAX_FACTOR)
        owned = residues.reshape(-1, layout.factor).sum(axis=0)
        hottest = busiest_buckets(residues)
        end = int(offsets[-1]) + 1
        for task in layout.readers(topic, partition):
            mask = checkpoints.accept_mask(task.name, topic, partition, offsets, hashes)
            stats = TaskProgress(task.name, topic, partition, end, owned=int(owned[task.bucket]),
                                 read=len(offsets), hottest=hottest)
            progress[(task.name, topic, partition)] = stats
            if mask.any():
                chosen = records.filter(pa.array(mask)).select(["key", "value", "offset", "timestamp"])
                work.setdefault(task.name, []).append(_Work(stats, chosen))
    return work, progress


def _in_offset_order(records: pa.Table) -> tuple[pa.Table, np.ndarray]:
    """One partition's records sorted by position, and the positions: int64 (Kafka offsets), or
    Python ints parsed from decimal text (Kinesis sequence numbers, up to 56 digits)."""
    column = records.column("offset")
    if pa.types.is_integer(column.type):
        records = records.sort_by("offset")
        return records, records.column("offset").to_numpy()
    positions = np.array([int(v) for v in column.to_pylist()], dtype=object)
    order = np.argsort(positions, kind="stable")
    return records.take(pa.array(order)), positions[order]


def _low_bits(offsets: np.ndarray) -> np.ndarray:
    """Positions as int64 for hashing a null key by its record: a wide position's low 63 bits
    (still one fixed value per record)."""
    if offsets.dtype != object:
        return offsets
    return np.array([int(o) & (2**63 - 1) for o in offsets], dtype=np.int64)


def busiest_buckets(residues: np.ndarray) -> tuple[int, ...]:
    """Per factor in FACTORS, the records of the busiest bucket, from counts per residue of
    `h mod MAX_FACTOR` (bucket b at factor f holds the residues r with r mod f == b)."""
    return tuple(int(residues.reshape(-1, f).sum(axis=0).max()) for f in FACTORS)


def _run_chunk(name: str, item: _Work, process: ProcessFn, deadline: Deadline, done: int,
               outputs: list[Output]) -> tuple[int, bool]:
    """Up to CHUNK_ROWS of one partition's records for one task; (records done, cut short)."""
    stats = item.stats
    rows = item.records.slice(item.done, CHUNK_ROWS).to_pylist()
    for row in rows:
        if deadline.expired(name, done):
            return done, True
        record = Record(row["key"], row["value"], stats.topic, stats.partition, int(row["offset"]),
                        row["timestamp"])
        t0 = time.perf_counter_ns()
        produced = normalize_outputs(process(record))
        elapsed = time.perf_counter_ns() - t0
        stats.process_ns += elapsed
        item.histogram[bisect.bisect_left(PROCESS_TIME_BUCKETS_NS, elapsed)] += 1
        outputs += produced
        stats.outputs += len(produced)
        stats.records += 1
        item.done += 1
        done += 1
    return done, False


def _stop_at_deadline(queue: list[_Work]) -> None:
    """Every unfinished partition of a task resumes at its first unprocessed accepted record:
    all of the task's messages below it are done (processed, or skipped as already done)."""
    for item in queue:
        if item.left:
            item.stats.next_offset = int(item.records.column("offset")[item.done].as_py())
            item.stats.pending = item.left
