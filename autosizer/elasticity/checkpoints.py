"""Checkpoints: what each virtual task has processed, and how that survives a rescale.

Per virtual task and partition a `Progress` holds `next`, the offset below which every message of
the task's keys is done, plus finer "marks": residues of `h mod modulus` (modulus a power of two
above the task's factor) whose keys are done up to a higher offset. Marks exist because a merged
task inherits children that stopped at different offsets. Samza falls back to the minimum and
re-processes; here the merged task keeps the children's marks and skips what they already did.
Marks collapse into `next` once it passes them, and a split hands each child exactly the marks of
its keys, so nothing is lost or processed twice across any sequence of factors.

`None` as a position means "nothing processed yet: start at the source's default".
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from autosizer.elasticity.coupling import Coupling
from autosizer.elasticity.layout import Barrier, Layout, TopicPartition

CHECKPOINTS_FORMAT = 1


class Progress:
    """One virtual task's position in one partition."""

    __slots__ = ("next", "modulus", "marks")

    def __init__(self, next: int | None, modulus: int, marks: dict[int, int] | None = None):
        self.next = next
        self.modulus = modulus
        self.marks = marks or None

    def position(self, key_hash: int) -> int | None:
        """The first offset not yet processed for keys with this hash."""
        if self.marks:
            return self.marks.get(key_hash % self.modulus, self.next)
        return self.next

    def copy(self) -> Progress:
        return Progress(self.next, self.modulus, dict(self.marks) if self.marks else None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Progress) and (self.next, self.modulus, self.marks) == (
            other.next,
            other.modulus,
            other.marks,
        )

    def __repr__(self) -> str:
        if not self.marks:
            return f"Progress(next={self.next})"
        return f"Progress(next={self.next}, modulus={self.modulus}, marks={self.marks})"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"next": self.next}
        if self.marks:
            out["modulus"] = self.modulus
            out["marks"] = {str(r): v for r, v in sorted(self.marks.items())}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], factor: int) -> Progress:
        marks = {int(r): int(v) for r, v in (data.get("marks") or {}).items()}
        return cls(data.get("next"), int(data.get("modulus", factor)), marks or None)


TaskProgress = dict[TopicPartition, Progress]


class Checkpoints:
    """Every virtual task's progress under one layout. `advance` mutates; `migrate` returns new."""

    def __init__(self, layout: Layout, progress: Mapping[str, TaskProgress]):
        self.layout = layout
        self._progress: dict[str, TaskProgress] = {}
        for task in layout.virtual_tasks():
            given = progress.get(task.name, {})
            self._progress[task.name] = {
                tp: given[tp] if tp in given else Progress(None, task.factor)
                for tp in sorted(task.partitions)
            }
        unknown = set(progress) - set(self._progress)
        if unknown:
            raise ValueError(
                f"checkpoints name tasks {sorted(unknown)[:3]} that layout generation "
                f"{layout.generation} does not have: migrate them with the layout they belong to"
            )
        self._blocked: frozenset[TopicPartition] | None = None
        self._couplings: Mapping[TopicPartition, Coupling] = {}

    @classmethod
    def _complete(cls, layout: Layout, progress: dict[str, TaskProgress]) -> Checkpoints:
        """Wrap a progress map that already covers every task and partition (migrate builds
        one), skipping the validation that dominates the cost of a 10k-task migration."""
        cp = cls.__new__(cls)
        cp.layout, cp._progress, cp._blocked, cp._couplings = layout, progress, None, {}
        return cp

    # --- construction --------------------------------------------------------------------------

    @classmethod
    def initial(cls, layout: Layout) -> Checkpoints:
        """Nothing processed: every start offset is None, the source's default applies."""
        return cls(layout, {})

    @classmethod
    def from_partition_offsets(
        cls, layout: Layout, offsets: Mapping[TopicPartition, int]
    ) -> Checkpoints:
        """Adopt plain per-partition positions of a job that ran without virtual tasks."""
        progress = {
            task.name: {
                tp: Progress(offsets[tp], task.factor) for tp in task.partitions if tp in offsets
            }
            for task in layout.virtual_tasks()
        }
        return cls(layout, progress)

    # --- reading -------------------------------------------------------------------------------

    def progress(self, task_name: str) -> TaskProgress:
        """A copy of one task's progress per partition (what a commit carries)."""
        return {tp: p.copy() for tp, p in self._task(task_name).items()}

    def position(self, task_name: str, topic: str, partition: int) -> int | None:
        """The task's `next` offset in one partition (finer marks may be ahead of it)."""
        return self._entry(task_name, topic, partition).next

    def start_offsets(self) -> dict[TopicPartition, int | None]:
        """Per partition, the lowest next offset of the tasks that read it (None: source default)."""
        out: dict[TopicPartition, int | None] = {}
        for tp in self.layout.partitions():
            nexts = [self._progress[t.name][tp].next for t in self.layout.readers(*tp)]
            out[tp] = None if any(n is None for n in nexts) else min(nexts)  # type: ignore[type-var]
        return out

    def blocked_partitions(self) -> frozenset[TopicPartition]:
        """Expansion children that must not be read yet: a parent is not done below its barrier,
        or a coupled child's lineage has passed none of its steps.

        The pipeline reads none of these in a batch; once every task of the parent has passed
        the barrier, the child starts at its beginning, so each moved key's old messages come first.
        """
        if self._blocked is None:
            blocked: set[TopicPartition] = set()
            for barrier in sorted(self.layout.barriers, key=lambda b: (b.topic, b.partition)):
                parent = (barrier.topic, barrier.parent)
                if parent in blocked:
                    blocked.add((barrier.topic, barrier.partition))
                elif barrier.coupled:
                    if self._coupling_limit(barrier) == 0:
                        blocked.add((barrier.topic, barrier.partition))
                elif barrier.offset is None or (done := self._done(parent)) is None or done < barrier.offset:
                    blocked.add((barrier.topic, barrier.partition))
            self._blocked = frozenset(blocked)
        return self._blocked

    def read_limits(self) -> dict[TopicPartition, int]:
        """Coupled children read in part: the offset each may be read up to (below), behind its
        lineage (`coupling`). Children free or blocked are not in it."""
        blocked = self.blocked_partitions()
        out: dict[TopicPartition, int] = {}
        for barrier in self.layout.barriers:
            tp = (barrier.topic, barrier.partition)
            if barrier.coupled and tp not in blocked and (limit := self._coupling_limit(barrier)) is not None:
                out[tp] = limit
        return out

    @property
    def couplings(self) -> Mapping[TopicPartition, Coupling]:
        return self._couplings

    def couple(self, couplings: Mapping[TopicPartition, Coupling]) -> None:
        """The coupled children's steps, as the pipeline's probe took them."""
        self._couplings = dict(couplings)
        self._blocked = None

    def lineage_done(self, topic: str, partition: int) -> tuple[int | None, ...]:
        """Per ancestor of a child (`Layout.lineage`), the lowest next offset of the tasks that
        read it (None: one has not started)."""
        return tuple(self._done((topic, a)) for a in self.layout.lineage(topic, partition))

    def _done(self, parent: TopicPartition) -> int | None:
        nexts = [self._progress[t.name][parent].next for t in self.layout.readers(*parent)]
        return None if not nexts or any(n is None for n in nexts) else min(nexts)  # type: ignore[type-var]

    def _coupling_limit(self, barrier: Barrier) -> int | None:
        coupling = self._couplings.get((barrier.topic, barrier.partition), Coupling())
        return coupling.limit(self.lineage_done(barrier.topic, barrier.partition))

    def accepts(
        self, task_name: str, topic: str, partition: int, offset: int, key_hash: int
    ) -> bool:
        """True iff the message belongs to the task and the task has not processed it yet."""
        task = self.layout.task(task_name)
        if not task.owns(topic, partition, key_hash):
            return False
        if (topic, partition) in self.blocked_partitions():
            return False
        position = self._progress[task_name][(topic, partition)].position(key_hash)
        return position is None or offset >= position

    def accept_mask(
        self,
        task_name: str,
        topic: str,
        partition: int,
        offsets: np.ndarray,
        key_hashes: np.ndarray,
    ) -> np.ndarray:
        """Vectorized `accepts` over one partition's messages (offsets and uint64 key hashes).
        Offsets are int64, or Python ints in an object array when positions outgrow 64 bits
        (Kinesis sequence numbers)."""
        task = self.layout.task(task_name)
        hashes = np.asarray(key_hashes, dtype=np.uint64)
        wide = np.asarray(offsets).dtype == object
        offsets = np.asarray(offsets, dtype=object if wide else np.int64)
        if (topic, partition) not in task.partitions or (
            topic,
            partition,
        ) in self.blocked_partitions():
            return np.zeros(len(offsets), dtype=bool)
        mine = (hashes & np.uint64(task.factor - 1)) == np.uint64(task.bucket)
        progress = self._progress[task_name][(topic, partition)]
        if progress.next is None and not progress.marks:
            return mine
        floor = np.full(len(offsets), -1 if progress.next is None else progress.next,
                        object if wide else np.int64)
        if progress.marks:
            residues = hashes & np.uint64(progress.modulus - 1)
            for residue, mark in progress.marks.items():
                floor[residues == np.uint64(residue)] = mark
        return mine & (offsets >= floor).astype(bool)

    # --- progress ------------------------------------------------------------------------------

    def advance(self, task_name: str, topic: str, partition: int, next_offset: int,
                marks: Mapping[int, int] | None = None, modulus: int | None = None) -> None:
        """Record that every message of the task in this partition below `next_offset` is done,
        and, for the residues of `h mod modulus` in `marks`, below their mark instead (the lanes a
        deadline cut at different offsets).

        Never moves a position backwards and keeps finer marks above the new positions (after a
        merge a batch can end below a child's old mark).
        """
        entry = self._entry(task_name, topic, partition)
        # Only a barrier's child can be blocked, and only a parent's progress can release one: a
        # batch advances every task of every partition, and rechecking each barrier's readers on
        # every advance made a property test's expansions spend half their time here.
        if self.layout.barrier(topic, partition) is not None and (topic, partition) in self.blocked_partitions():
            raise ValueError(
                f"{topic}[{partition}] is an expansion child still waiting for its parent's "
                "barrier: do not read or advance it until blocked_partitions() releases it"
            )
        task = self.layout.task(task_name)
        if marks:
            if modulus is None or modulus < task.factor or modulus & (modulus - 1):
                raise ValueError(f"marks need a power-of-two modulus >= the factor {task.factor}, "
                                 f"not {modulus!r}")
            replaced = _raise_marks(entry, next_offset, modulus, marks, task.factor, task.bucket)
            entry.next, entry.modulus, entry.marks = replaced.next, replaced.modulus, replaced.marks
        else:
            self._raise_next(entry, next_offset, task.factor)
        if self._blocked and any(b.parent == partition and b.topic == topic and (topic, b.partition) in self._blocked
                                 for b in self.layout.barriers):
            self._blocked = None  # positions only rise: a released child stays released

    def resolve_defaults(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Pin "source default" positions to the concrete offsets the source resolved them to."""
        for tp, offset in offsets.items():
            for task in self.layout.readers(*tp):
                entry = self._progress[task.name][tp]
                if entry.next is None:
                    self._raise_next(entry, offset, task.factor)
        self._blocked = None

    def apply_startpoint(self, task_name: str, topic: str, partition: int, offset: int) -> None:
        """An operator's startpoint wins: the task restarts at `offset`, finer marks dropped."""
        entry = self._entry(task_name, topic, partition)
        entry.next, entry.modulus, entry.marks = offset, self.layout.task(task_name).factor, None
        self._blocked = None

    @staticmethod
    def _raise_next(entry: Progress, next_offset: int, factor: int) -> None:
        if entry.next is not None and next_offset <= entry.next:
            return
        entry.next = next_offset
        if entry.marks:
            entry.marks = {r: v for r, v in entry.marks.items() if v > next_offset} or None
            if entry.marks is None:
                entry.modulus = factor

    # --- rescale -------------------------------------------------------------------------------

    def migrate(self, new_layout: Layout) -> Checkpoints:
        """The same progress under another layout: any factor, grouper or partition expansion.

        Exactly once: every key's position is carried to the one new task that owns it; a split
        copies it, a merge keeps each child's position as a finer mark over the minimum.
        Partitions added by an expansion start at offset 0 behind their barrier, so do Kinesis
        child shards (position 0: the shard's start); topics new to the layout start at the
        source's default. Retired shards leave with their progress.
        """
        if new_layout.generation <= self.layout.generation:
            raise ValueError(
                f"cannot migrate generation {self.layout.generation} to generation "
                f"{new_layout.generation}: the new layout must be a later generation"
            )
        old_factor, factor = self.layout.factor, new_layout.factor
        by_partition: dict[TopicPartition, list[Progress]] = {
            tp: [self._progress[t.name][tp] for t in self.layout.readers(*tp)]
            for tp in self.layout.partitions()
        }
        progress: dict[str, TaskProgress] = {}
        for task in new_layout.virtual_tasks():
            entries: TaskProgress = {}
            for tp in task.partitions:
                olds = by_partition.get(tp)
                if olds is None:
                    # an expansion child behind its barrier, or an adopted Kinesis child shard,
                    # is read from its first record; a topic new to the layout from the default
                    adopted = new_layout.source == "kinesis"
                    start = 0 if adopted or new_layout.barrier(*tp) is not None else None
                    entries[tp] = Progress(start, factor)
                elif factor >= old_factor:
                    parent = olds[task.bucket % old_factor]
                    entries[tp] = (
                        _restrict(parent, factor, task.bucket)
                        if parent.marks
                        else Progress(parent.next, factor)
                    )
                else:
                    children = olds[task.bucket :: factor]
                    entries[tp] = _merge(children, old_factor, factor, task.bucket)
            progress[task.name] = entries
        migrated = Checkpoints._complete(new_layout, progress)
        migrated._couplings = self._couplings  # a coupled child's steps hold in any layout
        return migrated

    # --- serialization -------------------------------------------------------------------------

    def task_to_json(self, task_name: str) -> str:
        """One task's progress as JSON: the unit a commit writes."""
        return encode_task_progress(self._task(task_name))

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": CHECKPOINTS_FORMAT,
                "generation": self.layout.generation,
                "factor": self.layout.factor,
                "tasks": {name: _entries(tps) for name, tps in self._progress.items()},
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes, layout: Layout) -> Checkpoints:
        try:
            data = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"checkpoints are not valid JSON ({exc})") from exc
        if data.get("generation", layout.generation) != layout.generation:
            raise ValueError(
                f"checkpoints belong to generation {data.get('generation')} but the layout is "
                f"generation {layout.generation}: load the layout they were written under"
            )
        tasks = data.get("tasks", {})
        return cls(layout, {name: decode_task_progress(v, layout) for name, v in tasks.items()})

    @classmethod
    def from_task_json(cls, layout: Layout, tasks: Mapping[str, str | bytes]) -> Checkpoints:
        """Rebuild from per-task JSON documents, as the store keeps them."""
        return cls(layout, {name: decode_task_progress(json.loads(v), layout) for name, v in tasks.items()})

    def _task(self, task_name: str) -> TaskProgress:
        try:
            return self._progress[task_name]
        except KeyError:
            self.layout.task(task_name)  # raises the descriptive error
            raise

    def _entry(self, task_name: str, topic: str, partition: int) -> Progress:
        entries = self._task(task_name)
        try:
            return entries[(topic, partition)]
        except KeyError:
            raise KeyError(
                f"virtual task {task_name!r} does not read {topic}[{partition}]"
            ) from None


def encode_task_progress(progress: Mapping[TopicPartition, Progress]) -> str:
    """A task's progress as the JSON document stored per task."""
    return json.dumps(_entries(progress), sort_keys=True)


def decode_task_progress(entries: Iterable[Mapping[str, Any]], layout: Layout) -> TaskProgress:
    return {
        (e["topic"], int(e["partition"])): Progress.from_dict(e, layout.factor) for e in entries
    }


def _entries(progress: Mapping[TopicPartition, Progress]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p, **progress[(t, p)].to_dict()} for t, p in sorted(progress)]


# --- the split/merge algebra (pure functions over Progress) --------------------------------------


def _restrict(parent: Progress, factor: int, bucket: int) -> Progress:
    """The parent's progress seen by a child task owning `bucket` of `factor` (a split)."""
    if not parent.marks:
        return Progress(parent.next, factor)
    if parent.modulus <= factor:
        return Progress(parent.marks.get(bucket % parent.modulus, parent.next), factor)
    mask = factor - 1
    marks = {r: v for r, v in parent.marks.items() if r & mask == bucket}
    return _normalize(parent.next, parent.modulus, marks, factor)


def _merge(children: list[Progress], old_factor: int, factor: int, bucket: int) -> Progress:
    """One task owning `bucket` of `factor` from the `old_factor` children it unions (a merge)."""
    if not any(c.marks for c in children):
        nexts = [c.next for c in children]
        if None not in nexts and min(nexts) == max(nexts):  # type: ignore[type-var]
            return Progress(nexts[0], factor)  # siblings in step: nothing finer to remember
    modulus = max([old_factor] + [c.modulus for c in children if c.marks])
    positions: dict[int, int | None] = {}
    for k, child in enumerate(children):
        child_bucket = bucket + k * factor
        if child.marks:
            for r in range(child_bucket, modulus, old_factor):
                positions[r] = child.marks.get(r % child.modulus, child.next)
        else:
            for r in range(child_bucket, modulus, old_factor):
                positions[r] = child.next
    values = list(positions.values())
    low = None if any(v is None for v in values) else min(values)  # type: ignore[type-var]
    marks = {r: v for r, v in positions.items() if v is not None and (low is None or v > low)}
    return _coarsen(low, modulus, marks, factor)


def _raise_marks(entry: Progress, next_offset: int, modulus: int, marks: Mapping[int, int],
                 factor: int, bucket: int) -> Progress:
    """`entry` raised, residue by residue, to `marks` (else `next_offset`): each residue keeps the
    higher of its old and new position, at the finer of the two moduli."""
    finest = max(modulus, entry.modulus if entry.marks else factor)
    positions = {}
    for r in range(bucket, finest, factor):
        new = marks.get(r % modulus, next_offset)
        old = entry.position(r)
        positions[r] = new if old is None or new > old else old
    low = min(positions.values())
    return _coarsen(low, finest, {r: v for r, v in positions.items() if v > low}, factor)


def _normalize(next: int | None, modulus: int, marks: dict[int, int], factor: int) -> Progress:
    """Collapse marks into `next` when every residue of the task is marked."""
    if marks and len(marks) == modulus // factor:
        next = min(marks.values())
        marks = {r: v for r, v in marks.items() if v > next}
    return _coarsen(next, modulus, marks, factor)


def _coarsen(next: int | None, modulus: int, marks: dict[int, int], factor: int) -> Progress:
    """Halve the marks' modulus while sibling residues agree, so marks stay as few as possible."""
    while marks and modulus > factor:
        half = modulus // 2
        coarser: dict[int, int] = {}
        for r, v in marks.items():
            if marks.get(r ^ half) != v:
                return Progress(next, modulus, marks)
            coarser[r & (half - 1)] = v
        marks, modulus = coarser, half
    if not marks:
        return Progress(next, factor)
    return Progress(next, modulus, marks)
