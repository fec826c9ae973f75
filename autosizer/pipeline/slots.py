"""One slot of a micro-batch: the virtual tasks of some partitions, sharing a pool of threads.

A slot is one Spark task. It receives every record of the partitions it owns (read once, fanned
out locally, the seed's own optimisation) and keeps what each virtual task `accepts`. It then
runs as many threads as it has virtual tasks (the seed: "the container can leverage multiple
threads for the multiple virtual tasks"), but a thread is not tied to one task: each task's
records are cut into key lanes (`elasticity.lanes`), a lane runs on one thread at a time in
offset order, and a thread whose lane ran dry takes the ready lane furthest behind in its
partition. Every key keeps its order; with few keys per bucket no thread idles while a heavy
bucket finishes, and two partitions of a slot advance together whatever their offsets.
It returns the outputs and, for every virtual task reading a partition that had records, how far
that task got.

A batch is bounded in time, not in records: lanes take turns until the slot's `Deadline`, then
each stops where it is. A task reports the first offset any of its lanes did not process, and the
lanes that got further as finer marks (the checkpoint skips what they did); the next batch
re-reads each partition from its slowest task.

Pure apart from calling the user's function: no Spark here, so it is tested on its own.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, Protocol

import numpy as np
import pyarrow as pa

from autosizer.elasticity import MAX_FACTOR, Checkpoints, key_hashes
from autosizer.elasticity.lanes import MIN_SHARE_READ, busiest_workers, lane_modulus
from autosizer.redaction import clip

Output = tuple[bytes | None, bytes]
# Where an output came from: its record's topic, partition, offset and key hash (which virtual
# task owns it), and its place among that record's outputs. What lets a sink tell an output it
# already wrote from a new one, and whether that record is committed.
Source = tuple[str, int, int, int, int]
# Seconds; the edges of the process-time histogram (the seed's process-ns).
PROCESS_TIME_BUCKETS = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)
PROCESS_TIME_BUCKETS_NS = tuple(int(b * 1e9) for b in PROCESS_TIME_BUCKETS)
# Rows turned into Python objects at a time: bounds a slot's memory to its Arrow data.
CHUNK_ROWS = 256
# A lane's turn on a thread: short enough that lanes share the threads evenly (and a deadline cuts
# them close together), long enough that taking turns costs well under 1% of the work.
QUANTUM_NS = 20_000_000


class AppFailed(RuntimeError):
    """The app's function raised on a record. The batch fails with it, so nothing of the batch is
    committed and a restart reads the record again: the message names where it is (not its key
    or value, which are the user's data) for an operator to fix the app or the record."""


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

    `next_offset` is the first offset some lane of the task did not process; lanes that got
    further are `marks` (residue of `h mod modulus` -> its first unprocessed offset), empty when
    every lane finished. `pending` counts the records it accepted but left for the
    next batch because the deadline came first (`pending > 0` means the task was saturated);
    `busy_ns` is the wall time threads spent on its lanes, so records / busy time is the rate of
    one thread on its records while they had a backlog; `cpu_ns` is the CPU time those threads
    used meanwhile (their own clocks), so records / CPU time says how many a core could do: what
    caps a CPU-bound job at its cores whatever the factor.
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
    pending: int = 0
    read: int = 0  # every record read from the partition in this batch
    # Per factor in FACTORS: records the partition's busiest thread must process at that factor
    # (its busiest lane, or an even share), among the `read` ones. What a controller needs to
    # know what a rescale would buy (`elasticity.lanes.busiest_workers`).
    hottest: tuple[float, ...] = ()
    marks: dict[int, int] = field(default_factory=dict)
    modulus: int = 1
    cpu_ns: int = 0
    # A batch that read too few of the partition's records to measure its shares alone
    # (MIN_SHARE_READ): its records per residue of h mod MAX_FACTOR, (residue, count) where not 0,
    # which the driver sums over batches until there are enough
    residues: tuple[tuple[int, int], ...] = ()


@dataclass
class SlotResult:
    outputs: list[Output]
    progress: list[TaskProgress]
    wall_ns: int
    records: int = 0  # processed by every task of the slot
    # the most any one of its threads spent on records (`_Lane.busy_ns` summed per thread): the
    # work the simulator's batch charges; the rest of `wall_ns` (accepting the records, cutting
    # lanes, starting the threads) is outside the tasks, as the commit is
    busiest_ns: int = 0
    lanes: list[_Lane] = field(default_factory=list, repr=False)  # in the order of `outputs`

    @property
    def sources(self) -> list[Source]:
        """One per output, in the same order: made only for a sink that asks (`wants_sources`:
        the Kafka sink), as they cost 0.4 us an output where the slot spends 2.4 us on a trivial
        function's record (200,000 records, measured)."""
        return [source for lane in self.lanes for source in lane.sources()]


class _Lane:
    """One key lane of one task in one partition: rows [begin, begin + size) of its `_Work`."""

    __slots__ = ("item", "residue", "begin", "size", "done", "process_ns", "busy_ns", "cpu_ns",
                 "histogram", "outputs", "counts")

    def __init__(self, item: _Work, residue: int, begin: int, size: int):
        self.item, self.residue, self.begin, self.size = item, residue, begin, size
        self.done = self.process_ns = self.busy_ns = self.cpu_ns = 0
        self.histogram = [0] * (len(PROCESS_TIME_BUCKETS) + 1)
        self.outputs: list[Output] = []
        self.counts: list[int] = []  # outputs of each processed record, in offset order

    def sources(self) -> list[Source]:
        """One per output of the lane, in the same order."""
        item, done = self.item, slice(self.begin, self.begin + len(self.counts))
        topic, partition = item.stats.topic, item.stats.partition
        return [(topic, partition, offset, key_hash, i) for offset, key_hash, n in
                zip(item.offsets[done].tolist(), item.hashes[done].tolist(), self.counts, strict=True)
                for i in range(n)]

    @property
    def left(self) -> int:
        return self.size - self.done

    @property
    def next_offset(self) -> int:
        """The lane's first unprocessed record (only while it has one)."""
        return self.item.offsets[self.begin + self.done]

    @property
    def next_rank(self) -> int:
        """That record's place among its partition's records in this batch, in offset order."""
        return self.item.ranks[self.begin + self.done]


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Work:
    """One partition's accepted records for one task, grouped by lane, each lane in offset order;
    `ranks` are the records' rows among all of the partition's records read in the batch, which
    `_accept` holds in offset order."""

    def __init__(self, stats: TaskProgress, records: pa.Table, offsets: np.ndarray, hashes: np.ndarray,
                 ranks: np.ndarray, lanes: np.ndarray, modulus: int, owned_residues: range):
        self.stats, self.records, self.offsets, self.hashes = stats, records, offsets, hashes
        self.ranks = ranks.tolist()  # Python ints: compared on every turn in the pool's heap
        self.modulus, self.owned_residues = modulus, owned_residues
        starts = np.flatnonzero(np.r_[True, lanes[1:] != lanes[:-1]]) if len(lanes) else np.array([], int)
        bounds = [*starts.tolist(), len(lanes)]
        self.lanes = [_Lane(self, int(lanes[b]), b, e - b) for b, e in zip(bounds, bounds[1:], strict=False)]
        self.ns_per_record = 0.0  # the last turn's, to size the next turn's Arrow slice
        # Columns readied once for the turns' slices. A turn converts ~10 rows at 2 ms a record:
        # an Arrow compute call per turn released and retook the GIL among 16 threads, and
        # pyarrow turns a zoned timestamp into a datetime at ~5 us a row, more than everything
        # else a record costs the slot; epoch + microseconds gives the same value (measured).
        self._keys = records.column("key").combine_chunks()
        self._values = records.column("value").combine_chunks()
        stamps, kind = records.column("timestamp"), records.column("timestamp").type
        zoned_us = pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz in ("UTC", "+00:00")
        # microseconds since the epoch when that is exact (no nulls), else the Arrow column
        self._stamps: np.ndarray | pa.Array = (
            stamps.cast(pa.int64()).to_numpy() if zoned_us and stamps.null_count == 0 else stamps.combine_chunks())

    def rows(self, begin: int, count: int) -> zip:
        """(key, value, offset, timestamp) of rows [begin, begin + count), as Python objects."""
        end = begin + count
        if isinstance(self._stamps, np.ndarray):
            times: list = [_EPOCH + timedelta(microseconds=us) for us in self._stamps[begin:end].tolist()]
        else:
            times = self._stamps.slice(begin, count).to_pylist()
        return zip(self._keys.slice(begin, count).to_pylist(), self._values.slice(begin, count).to_pylist(),
                   self.offsets[begin:end].tolist(), times, strict=True)

    def turn_rows(self) -> int:
        """Rows to convert for one turn: what fits in QUANTUM_NS at the measured pace."""
        if self.ns_per_record <= 0:
            return 1
        return max(1, min(CHUNK_ROWS, int(QUANTUM_NS / self.ns_per_record) + 1))

    def finish(self) -> list[Output]:
        """Fold the lanes into the task's progress; its outputs, lane after lane (key order)."""
        stats, outputs = self.stats, []
        cut: dict[int, int] = {}
        for lane in self.lanes:
            stats.records += lane.done
            stats.process_ns += lane.process_ns
            stats.busy_ns += lane.busy_ns
            stats.cpu_ns += lane.cpu_ns
            stats.outputs += len(lane.outputs)
            stats.pending += lane.left
            outputs += lane.outputs
            if lane.left:
                cut[lane.residue] = int(lane.next_offset)
        stats.histogram = tuple(map(sum, zip(*(lane.histogram for lane in self.lanes), strict=True)))
        if cut:  # the lowest cut lane is the task's position, every other lane a mark above it
            low = min(cut.values())
            stats.marks = {r: p for r in self.owned_residues if (p := cut.get(r, stats.next_offset)) > low}
            stats.modulus, stats.next_offset = self.modulus, low
        return outputs


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
    """Process one slot's records: accept per virtual task, cut each task's records into key
    lanes, and run the lanes on one thread per virtual task, each lane in offset order, until
    `deadline` (default: none, everything accepted is processed)."""
    started = time.perf_counter_ns()
    work, progress = _accept(table, checkpoints)
    lanes = [lane for items in work.values() for item in items for lane in item.lanes]
    workers = min(len({p.task for p in progress.values()}), len(lanes))
    busiest = 0
    if workers:
        busiest = _LanePool(lanes, process, deadline or NoDeadline()).run(workers)
    outputs: list[Output] = []
    for name in sorted(work):
        for item in work[name]:
            outputs += item.finish()
    stats = list(progress.values())
    ordered = [lane for name in sorted(work) for item in work[name] for lane in item.lanes]
    return SlotResult(outputs, stats, time.perf_counter_ns() - started, sum(p.records for p in stats),
                      lanes=ordered, busiest_ns=busiest)


class _LanePool:
    """Threads that take the ready lane furthest behind in its partition, give it one turn
    (`QUANTUM_NS` of work, at most CHUNK_ROWS records), and put it back: a lane is never on two
    threads at once, and lanes of every task advance together, so a deadline cuts them close to
    one another. Behind is counted in records of this batch (`_Lane.next_rank`), not in offsets:
    two partitions' offsets say nothing of each other (a topic's partitions drift millions apart,
    a Kinesis shard's sequence numbers live in their own range), and a slot that compared them
    gave every thread to the lower partition until it ran dry, the other one's tasks cut at a
    third of their records (run on the emulator, session 53)."""

    def __init__(self, lanes: list[_Lane], process: ProcessFn, deadline: Deadline):
        self.process, self.deadline = process, deadline
        self.ready = [(lane.next_rank, i, lane) for i, lane in enumerate(lanes) if lane.left]
        heapq.heapify(self.ready)
        self.order = len(lanes)  # tie-breaker for lanes put back
        self.running = 0
        # records processed per task in this batch, for the deadline: counted without a lock
        # (next() on a C iterator is atomic; a lock per record made 32 threads queue for it, 82%
        # instead of 96% of ideal); two lanes of one task may store their counts out of order, so
        # the count read can lag by one, which only lets a record-budget deadline run one over
        self.counters = {lane.item.stats.task: itertools.count(1) for lane in lanes}
        self.done: dict[str, int] = {}
        self.cond = threading.Condition()

    def run(self, workers: int) -> int:
        """Run every lane on `workers` threads; the most any thread spent on records (ns)."""
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="vtask") as pool:
            return max(pool.map(lambda _: self._work(), range(workers)))

    def _work(self) -> int:
        busy = 0
        while (lane := self._take()) is not None:
            cut, before = True, lane.busy_ns
            try:
                cut = self._turn(lane)
            finally:
                busy += lane.busy_ns - before
                self._put_back(lane, cut)
        return busy

    def _take(self) -> _Lane | None:
        with self.cond:
            while not self.ready and self.running:
                self.cond.wait()
            if not self.ready:
                return None
            self.running += 1
            return heapq.heappop(self.ready)[2]

    def _put_back(self, lane: _Lane, cut: bool) -> None:
        with self.cond:
            self.running -= 1
            if lane.left and not cut:
                self.order += 1
                heapq.heappush(self.ready, (lane.next_rank, self.order, lane))
                self.cond.notify()
            elif not self.running:
                self.cond.notify_all()  # nothing left to run: the waiting threads may end

    def _turn(self, lane: _Lane) -> bool:
        """One turn of a lane; True when the deadline cut it (it is not put back)."""
        item, name = lane.item, lane.item.stats.task
        if self.deadline.expired(name, self.done.get(name, 0)):
            return True  # checked before converting rows: past the deadline, lanes just stop
        stats = item.stats
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        rows = item.rows(lane.begin + lane.done, min(lane.left, item.turn_rows()))
        done = 0
        try:
            for key, value, offset, stamp in rows:
                if done and self.deadline.expired(name, self.done.get(name, 0)):
                    return True
                record = Record(key, value, stats.topic, stats.partition, offset, stamp)
                r0 = time.perf_counter_ns()
                try:
                    produced = normalize_outputs(self.process(record))
                except Exception as exc:
                    raise AppFailed(
                        f"the app raised on {stats.topic}[{stats.partition}] at offset {offset}: "
                        f"{type(exc).__name__}: {clip(str(exc), 300)} (nothing of the batch was committed; "
                        f"the pipeline stops on this record again until the app handles it)") from exc
                elapsed = time.perf_counter_ns() - r0
                lane.process_ns += elapsed
                lane.histogram[bisect.bisect_left(PROCESS_TIME_BUCKETS_NS, elapsed)] += 1
                lane.outputs += produced
                lane.counts.append(len(produced))
                lane.done += 1
                done += 1
                self.done[name] = next(self.counters[name])
                if r0 + elapsed - t0 >= QUANTUM_NS:
                    break
            return False
        finally:
            lane.cpu_ns += time.thread_time_ns() - c0  # read within the wall clock's span
            spent = time.perf_counter_ns() - t0
            lane.busy_ns += spent
            if done:
                item.ns_per_record = spent / done


def _accept(table: pa.Table, checkpoints: Checkpoints) -> tuple[dict[str, list[_Work]], dict]:
    """Per virtual task, the records it accepts in each partition, cut into lanes, and a progress
    entry for every task reading a partition that had records (one without records still
    advances)."""
    layout = checkpoints.layout
    known = set(layout.partitions())
    blocked = checkpoints.blocked_partitions()
    modulus = lane_modulus(layout.factor)
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
        hottest = busiest_workers(residues)
        few = np.flatnonzero(residues)
        small = tuple(zip(few.tolist(), residues[few].tolist(), strict=True)) if len(offsets) < MIN_SHARE_READ else ()
        lanes_of = (hashes & np.uint64(modulus - 1)).astype(np.int64)
        end = int(offsets[-1]) + 1
        for task in layout.readers(topic, partition):
            mask = checkpoints.accept_mask(task.name, topic, partition, offsets, hashes)
            stats = TaskProgress(task.name, topic, partition, end, read=len(offsets), hottest=hottest, residues=small)
            progress[(task.name, topic, partition)] = stats
            if mask.any():
                lanes = lanes_of[mask]
                order = np.argsort(lanes, kind="stable")  # by lane, each still in offset order
                chosen = records.filter(pa.array(mask)).select(["key", "value", "offset", "timestamp"])
                work.setdefault(task.name, []).append(_Work(
                    stats, chosen.take(pa.array(order)), offsets[mask][order], hashes[mask][order],
                    np.flatnonzero(mask)[order], lanes[order], modulus,
                    range(task.bucket, modulus, task.factor)))
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
