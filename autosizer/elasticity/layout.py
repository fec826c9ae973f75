"""The layout (Samza's job model): which virtual tasks exist and what each one reads.

A layout is immutable. Every change (`with_factor`, `with_partitions`, `with_shards`) returns the
next generation, and the generation fences checkpoint commits, so a pipeline still running an old
layout cannot overwrite the new one's progress.

A Kinesis layout (`source="kinesis"`) holds one stream whose partitions are its shards by number.
Shards split and merge, so its partitions are every number below the count except the `retired`
ones (closed and fully processed), and `parents` records each adopted child's lineage.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from autosizer.elasticity.factor import validate_factor
from autosizer.elasticity.groupers import GROUPERS, by_lineage

LAYOUT_FORMAT = 3
TopicPartition = tuple[str, int]
SOURCES = ("kafka", "kinesis")


@dataclass(frozen=True)
class VirtualTask:
    """One (partition group, key bucket) under factor F: the unit of ordered processing."""

    name: str
    bucket: int
    factor: int
    partitions: frozenset[TopicPartition]

    def owns(self, topic: str, partition: int, key_hash: int) -> bool:
        """True iff a message with this key hash in this partition belongs to this task."""
        return (topic, partition) in self.partitions and key_hash % self.factor == self.bucket


@dataclass(frozen=True)
class Barrier:
    """An expansion child partition waits until its parent is done below `offset`.

    Keys that moved to the child had their older messages in the parent, below the parent's end
    offset at the moment the expansion was adopted; reading the child only after that keeps per-key
    order. `offset` is None until the actuator has read the parent's end offset (`resolve_barriers`),
    and an unresolved barrier keeps the child unread.

    A coupled child (`until_ms` set, `offset` None) is read behind its parent (and the parent's
    own parents, `Layout.lineage`) instead, step by step, until the producers have moved its
    keys at `until_ms` (`coupling`): the daemon adopts an expansion at once and its moved keys
    wait about a second behind their parent, not `adopt_after_s`.
    """

    topic: str
    partition: int
    parent: int
    offset: int | None = None
    until_ms: int | None = None

    @property
    def coupled(self) -> bool:
        return self.offset is None and self.until_ms is not None


@dataclass(frozen=True)
class Layout:
    """Topics with their partition counts, the factor, the grouper and the generation."""

    topics: Mapping[str, int]
    factor: int = 1
    grouper: str = "partition"
    generation: int = 1
    initial_partitions: Mapping[str, int] | None = None
    barriers: tuple[Barrier, ...] = field(default=())
    source: str = "kafka"
    retired: frozenset[TopicPartition] = field(default=frozenset())
    parents: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        topics = _validate_counts(self.topics, "topics")
        if self.source not in SOURCES:
            raise ValueError(f"unknown layout source {self.source!r}: use kafka or kinesis")
        object.__setattr__(self, "retired", frozenset((t, int(p)) for t, p in self.retired))
        if self.source == "kinesis":
            self._validate_shards(topics)
            object.__setattr__(self, "topics", topics)
            object.__setattr__(self, "initial_partitions", dict(topics))
            self._validate_common()
            return
        if self.retired or self.parents:
            raise ValueError("retired partitions and lineage belong to a Kinesis layout (source='kinesis')")
        initial = _validate_counts(
            self.initial_partitions if self.initial_partitions is not None else topics,
            "initial_partitions",
        )
        if set(initial) != set(topics):
            raise ValueError(
                f"initial_partitions names {sorted(initial)} but topics are {sorted(topics)}: "
                "give an initial count for every topic"
            )
        for topic, count in topics.items():
            if count < initial[topic] or count % initial[topic]:
                raise ValueError(
                    f"topic {topic!r} has {count} partitions, which is not a multiple of its "
                    f"initial {initial[topic]}: partitions may only be multiplied"
                )
        object.__setattr__(self, "topics", topics)
        object.__setattr__(self, "initial_partitions", initial)
        self._validate_common()

    def _validate_shards(self, topics: Mapping[str, int]) -> None:
        if len(topics) != 1:
            raise ValueError(f"a Kinesis layout holds one stream, not {sorted(topics)}: one job per stream")
        if self.grouper == "fixed":
            raise ValueError("the fixed grouper keys on Kafka's partition multiples: use partition "
                             "or topic-partition for a Kinesis stream")
        ((stream, count),) = topics.items()
        if any(t != stream or not 0 <= p < count for t, p in self.retired):
            raise ValueError(f"retired shards must be shards of {stream} below {count}: {sorted(self.retired)}")
        if len(self.retired) >= count:
            raise ValueError(f"every shard of {stream} is retired: a stream always has an open shard")

    def _validate_common(self) -> None:
        validate_factor(self.factor)
        known = [*GROUPERS, "lineage"] if self.source == "kinesis" else list(GROUPERS)
        if self.grouper not in known:
            raise ValueError(
                f"unknown grouper {self.grouper!r} for a {self.source} layout: use one of "
                f"{', '.join(sorted(known))}"
            )
        if isinstance(self.generation, bool) or not isinstance(self.generation, int):
            raise ValueError(f"generation must be an integer >= 1, not {self.generation!r}")
        if self.generation < 1:
            raise ValueError(f"generation must be an integer >= 1, not {self.generation!r}")
        object.__setattr__(self, "barriers", tuple(self.barriers))
        object.__setattr__(self, "parents", {(t, int(p)): tuple(int(x) for x in ps)
                                             for (t, p), ps in dict(self.parents).items()})

    # --- virtual tasks -------------------------------------------------------------------------

    @cached_property
    def _tasks(self) -> dict[str, VirtualTask]:
        groups = (by_lineage(self.topics, self.parents) if self.grouper == "lineage"
                  else GROUPERS[self.grouper](self.topics, self.initial_partitions or self.topics))
        tasks: dict[str, VirtualTask] = {}
        for base, members in groups:
            partitions = members - self.retired
            if not partitions:
                continue
            for bucket in range(self.factor):
                name = base if self.factor == 1 else f"{base}-{bucket}-{self.factor}"
                tasks[name] = VirtualTask(name, bucket, self.factor, partitions)
        return tasks

    @cached_property
    def _readers(self) -> dict[TopicPartition, tuple[VirtualTask, ...]]:
        readers: dict[TopicPartition, list[VirtualTask]] = {tp: [] for tp in self.partitions()}
        for task in self._tasks.values():
            for tp in task.partitions:
                readers[tp].append(task)
        return {tp: tuple(sorted(ts, key=lambda t: t.bucket)) for tp, ts in readers.items()}

    def virtual_tasks(self) -> list[VirtualTask]:
        """Every virtual task of this layout, in a stable order."""
        return list(self._tasks.values())

    def task(self, name: str) -> VirtualTask:
        """The virtual task called `name`; KeyError naming the layout when there is none."""
        try:
            return self._tasks[name]
        except KeyError:
            raise KeyError(
                f"unknown virtual task {name!r} in layout generation {self.generation} "
                f"(factor {self.factor}, grouper {self.grouper}): list them with "
                "`autosizer layout show`"
            ) from None

    def has_task(self, name: str) -> bool:
        return name in self._tasks

    def partitions(self) -> list[TopicPartition]:
        """Every (topic, partition) of the layout, sorted."""
        return [(t, p) for t in sorted(self.topics) for p in range(self.topics[t])
                if (t, p) not in self.retired]

    def readers(self, topic: str, partition: int) -> tuple[VirtualTask, ...]:
        """The virtual tasks that read one partition, indexed by bucket."""
        try:
            return self._readers[(topic, partition)]
        except KeyError:
            raise KeyError(f"unknown partition {topic}[{partition}] in this layout") from None

    def barrier(self, topic: str, partition: int) -> Barrier | None:
        """The barrier holding back an expansion child partition, if it is one."""
        return self._barriers.get((topic, partition))

    def lineage(self, topic: str, partition: int) -> tuple[int, ...]:
        """The partitions an expansion child's keys were written to before it: its parent, then
        the parent's parent while that is a child too (a producer that missed a generation
        moves a key from there), up to one the topic started with. Empty for any other."""
        out: list[int] = []
        barrier = self.barrier(topic, partition)
        while barrier is not None:
            out.append(barrier.parent)
            barrier = self.barrier(topic, barrier.parent)
        return tuple(out)

    @cached_property
    def _barriers(self) -> dict[TopicPartition, Barrier]:
        return {(b.topic, b.partition): b for b in self.barriers}

    # --- next generations ----------------------------------------------------------------------

    def with_factor(self, factor: int) -> Layout:
        """The next generation with another elasticity factor."""
        return replace(self, factor=validate_factor(factor), generation=self.generation + 1)

    def with_partitions(
        self,
        counts: Mapping[str, int],
        barriers: Mapping[TopicPartition, int] | None = None,
        until_ms: int | None = None,
    ) -> Layout:
        """The next generation after topics' partition counts were multiplied (SEP-5).

        `barriers` maps a parent partition to its end offset when the expansion was adopted;
        children of a parent left out wait until `resolve_barriers` supplies it. With `until_ms`
        and no barriers the children are coupled to their parents until then (`coupling`).
        """
        if self.source != "kafka":
            raise ValueError("a Kinesis stream re-shards (with_shards); partition expansion is Kafka's")
        new_topics = dict(self.topics)
        added: list[Barrier] = []
        for topic, count in counts.items():
            if topic not in self.topics:
                raise ValueError(f"unknown topic {topic!r}: the layout has {sorted(self.topics)}")
            old = self.topics[topic]
            if isinstance(count, bool) or not isinstance(count, int) or count < old:
                raise ValueError(
                    f"topic {topic!r} cannot go from {old} to {count!r} partitions: "
                    "partition counts only grow"
                )
            if count % old:
                raise ValueError(
                    f"topic {topic!r} cannot go from {old} to {count} partitions: the new count "
                    f"must be a multiple of {old} so every key keeps a parent partition"
                )
            new_topics[topic] = count
            for child in range(old, count):
                offset = (barriers or {}).get((topic, child % old))
                added.append(Barrier(topic, child, child % old, offset, None if offset is not None else until_ms))
        return replace(
            self,
            topics=new_topics,
            generation=self.generation + 1,
            barriers=self.barriers + tuple(added),
        )

    def with_shards(self, stream: str, adopted: Mapping[int, tuple[int, ...]], retired: Iterable[int]) -> Layout:
        """The next generation of a Kinesis layout after a re-shard: `adopted` children (with
        their parents) join, `retired` shards (closed and fully processed) leave."""
        if self.source != "kinesis" or stream not in self.topics:
            raise ValueError(f"with_shards needs the Kinesis layout of stream {stream!r}")
        count = max([self.topics[stream], *(i + 1 for i in adopted)])
        return replace(
            self, topics={stream: count}, generation=self.generation + 1,
            retired=self.retired | {(stream, i) for i in retired},
            parents={**self.parents, **{(stream, i): tuple(ps) for i, ps in adopted.items()}},
        )

    def resolve_barriers(self, offsets: Mapping[TopicPartition, int]) -> Layout:
        """The same generation with unresolved barriers filled from parents' end offsets.

        Only for a layout that has not been published yet: the actuator builds the next
        generation, reads the parents' end offsets from the source, resolves, then publishes.
        """
        resolved = tuple(
            replace(b, offset=offsets[(b.topic, b.parent)])
            if b.offset is None and not b.coupled and (b.topic, b.parent) in offsets
            else b
            for b in self.barriers
        )
        return replace(self, barriers=resolved)

    # --- serialization -------------------------------------------------------------------------

    def to_json(self) -> str:
        """Versioned JSON; `from_json` also reads layouts written without buckets."""
        shards = {} if self.source == "kafka" else {
            "source": self.source,
            "retired": sorted([t, p] for t, p in self.retired),
            "parents": [[t, p, list(ps)] for (t, p), ps in sorted(self.parents.items())],
        }
        return json.dumps(
            {
                # a Kafka layout stays format 2, so an autosizer one version older still reads it
                "format": LAYOUT_FORMAT if shards else 2,
                **shards,
                "generation": self.generation,
                "factor": self.factor,
                "grouper": self.grouper,
                "topics": dict(self.topics),
                "initial_partitions": dict(self.initial_partitions or {}),
                "barriers": [
                    {"topic": b.topic, "partition": b.partition, "parent": b.parent,
                     "offset": b.offset, **({} if b.until_ms is None else {"until_ms": b.until_ms})}
                    for b in self.barriers
                ],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> Layout:
        """Read any layout format; format 1 (no buckets, no factor) means factor 1."""
        try:
            data: dict[str, Any] = json.loads(text)
        except (TypeError, json.JSONDecodeError) as exc:
            raise ValueError(f"layout is not valid JSON ({exc}): rewrite it with `layout init`") from exc
        if not isinstance(data, dict) or "topics" not in data:
            raise ValueError("layout JSON has no 'topics' object: rewrite it with `layout init`")
        version = data.get("format", 1)
        if version > LAYOUT_FORMAT:
            raise ValueError(
                f"layout format {version} is newer than this autosizer reads ({LAYOUT_FORMAT}): "
                "upgrade autosizer"
            )
        return cls(
            topics=data["topics"],
            factor=data.get("factor", 1),
            grouper=data.get("grouper", "partition"),
            generation=data.get("generation", 1),
            initial_partitions=data.get("initial_partitions") or None,
            barriers=tuple(Barrier(**b) for b in data.get("barriers", ())),
            source=data.get("source", "kafka"),
            retired=frozenset((t, p) for t, p in data.get("retired", ())),
            parents={(t, p): tuple(ps) for t, p, ps in data.get("parents", ())},
        )


def _validate_counts(counts: Mapping[str, int], what: str) -> dict[str, int]:
    if not isinstance(counts, Mapping) or not counts:
        raise ValueError(f"{what} must map each topic name to its partition count, e.g. {{'orders': 4}}")
    out: dict[str, int] = {}
    for topic, count in counts.items():
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"{what}: topic names must be non-empty strings, not {topic!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ValueError(f"{what}: topic {topic!r} needs a partition count >= 1, not {count!r}")
        out[topic] = count
    return out
