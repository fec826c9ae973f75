"""Startpoints (Samza SEP): an operator's requested start position that wins over checkpoints.

A startpoint is keyed by partition, or by partition and virtual task. When a layout generation
starts, a partition-keyed startpoint fans out to every virtual task reading that partition; where
both exist the newer wins (a tie goes to the task-keyed one). A startpoint stays until its task
has committed progress past it, so a partition with no new messages keeps it (SAMZA-2749).
Timestamp, oldest and upcoming positions are resolved to offsets by the source (`OffsetResolver`),
once, and the resolved offset is pinned so a restart does not move an "upcoming" start forward.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from autosizer.elasticity.layout import Layout

Kind = Literal["specific", "timestamp", "oldest", "upcoming"]
KINDS: tuple[str, ...] = ("specific", "timestamp", "oldest", "upcoming")
DEFAULT_EXPIRY_MS = 12 * 3600 * 1000


class OffsetResolver(Protocol):
    """What a source answers so timestamp/oldest/upcoming startpoints become offsets."""

    def offset_for_timestamp(self, topic: str, partition: int, epoch_ms: int) -> int:
        """The first offset whose timestamp is at or after `epoch_ms` (the end if none)."""
        ...

    def oldest_offset(self, topic: str, partition: int) -> int: ...

    def upcoming_offset(self, topic: str, partition: int) -> int:
        """The offset the next produced message will get (the high watermark)."""
        ...


@dataclass(frozen=True)
class Startpoint:
    """A requested start position. `position` is an offset or epoch ms, by `kind`."""

    kind: Kind
    position: int | None = None
    created_ms: int = 0
    resolved_offset: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown startpoint kind {self.kind!r}: use one of {', '.join(KINDS)}")
        if self.kind in ("specific", "timestamp"):
            if isinstance(self.position, bool) or not isinstance(self.position, int) or self.position < 0:
                what = "an offset" if self.kind == "specific" else "epoch milliseconds"
                raise ValueError(f"a {self.kind} startpoint needs {what} >= 0, not {self.position!r}")
        elif self.position is not None:
            raise ValueError(f"an {self.kind} startpoint takes no position")

    @classmethod
    def specific(cls, offset: int, created_ms: int | None = None) -> Startpoint:
        return cls("specific", offset, _now_ms(created_ms))

    @classmethod
    def timestamp(cls, epoch_ms: int, created_ms: int | None = None) -> Startpoint:
        return cls("timestamp", epoch_ms, _now_ms(created_ms))

    @classmethod
    def oldest(cls, created_ms: int | None = None) -> Startpoint:
        return cls("oldest", None, _now_ms(created_ms))

    @classmethod
    def upcoming(cls, created_ms: int | None = None) -> Startpoint:
        return cls("upcoming", None, _now_ms(created_ms))

    def resolve(self, topic: str, partition: int, resolver: OffsetResolver) -> Startpoint:
        """This startpoint with its offset pinned (unchanged if it is already pinned)."""
        if self.resolved_offset is not None:
            return self
        if self.kind == "specific":
            offset = self.position
        elif self.kind == "timestamp":
            offset = resolver.offset_for_timestamp(topic, partition, self.position)  # type: ignore[arg-type]
        elif self.kind == "oldest":
            offset = resolver.oldest_offset(topic, partition)
        else:
            offset = resolver.upcoming_offset(topic, partition)
        return replace(self, resolved_offset=int(offset))  # type: ignore[arg-type]

    def passed_by(self, committed_next: int | None) -> bool:
        """True once a commit moved the task past the pinned offset, so the startpoint can go.

        A commit that stays at the offset (no new messages) does not pass it (SAMZA-2749).
        """
        return (
            self.resolved_offset is not None
            and committed_next is not None
            and committed_next > self.resolved_offset
        )

    def expired(self, now_ms: int, expiry_ms: int = DEFAULT_EXPIRY_MS) -> bool:
        return now_ms - self.created_ms > expiry_ms

    def describe(self) -> str:
        if self.kind == "specific":
            return f"offset {self.position}"
        if self.kind == "timestamp":
            return f"timestamp {self.position} ms"
        return self.kind

    def to_json(self) -> str:
        data: dict[str, Any] = {"kind": self.kind, "created_ms": self.created_ms}
        if self.position is not None:
            data["position"] = self.position
        if self.resolved_offset is not None:
            data["resolved_offset"] = self.resolved_offset
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Startpoint:
        data = json.loads(text)
        return cls(
            data["kind"], data.get("position"), int(data["created_ms"]), data.get("resolved_offset")
        )


@dataclass(frozen=True, order=True)
class StartpointKey:
    """Partition, plus the virtual task when the startpoint targets only one task."""

    topic: str
    partition: int
    task: str | None = None

    def encode(self) -> str:
        return json.dumps([self.topic, self.partition, self.task])

    @classmethod
    def decode(cls, text: str | bytes) -> StartpointKey:
        topic, partition, task = json.loads(text)
        return cls(topic, int(partition), task)


@dataclass(frozen=True)
class FanOut:
    """The task-keyed startpoints a generation starts with, and what was dropped on the way."""

    startpoints: dict[StartpointKey, Startpoint]
    expired: list[StartpointKey]
    unknown: list[StartpointKey]


def fan_out(
    startpoints: Mapping[StartpointKey, Startpoint],
    layout: Layout,
    now_ms: int | None = None,
    expiry_ms: int = DEFAULT_EXPIRY_MS,
) -> FanOut:
    """Re-key every startpoint by task for this layout (seed 004's fanOutStartpointsToTasks)."""
    now = _now_ms(now_ms)
    out: dict[StartpointKey, Startpoint] = {}
    expired: list[StartpointKey] = []
    unknown: list[StartpointKey] = []
    known = set(layout.partitions())
    # Partition-keyed first, then task-keyed, so a task-keyed one of equal age wins the tie.
    for key in sorted(startpoints, key=lambda k: (k.task is not None, k)):
        sp = startpoints[key]
        if sp.expired(now, expiry_ms):
            expired.append(key)
            continue
        if (key.topic, key.partition) not in known:
            unknown.append(key)
            continue
        if key.task is None:
            targets = [t.name for t in layout.readers(key.topic, key.partition)]
        else:
            if not layout.has_task(key.task) or (key.topic, key.partition) not in (
                layout.task(key.task).partitions
            ):
                unknown.append(key)
                continue
            targets = [key.task]
        for name in targets:
            target = StartpointKey(key.topic, key.partition, name)
            current = out.get(target)
            if current is None or sp.created_ms >= current.created_ms:
                out[target] = sp
    return FanOut(out, expired, unknown)


def _now_ms(value: int | None) -> int:
    return int(time.time() * 1000) if value is None else int(value)
