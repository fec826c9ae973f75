"""Topology: the partition counts the broker has, against the layout's, and what to do about it.

The pipeline owns the broker connection, so it reports what it sees (`Topology`, written to Redis
only while a count differs from the layout); the daemon reads that report and, through
`expansion`, either adopts a multiplied count as the next layout generation (SEP-5: each new
partition waits behind its parent's end offset, the barrier) or refuses a count that is not a
multiple. No I/O here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from autosizer.elasticity.layout import Layout, TopicPartition


@dataclass(frozen=True)
class Topology:
    """What the pipeline saw on the broker: each topic's partition count, since when (ms) it has
    seen that count, and the end offset (high watermark) of each partition the layout reads."""

    counts: Mapping[str, int]
    since_ms: Mapping[str, int]
    ends: Mapping[TopicPartition, int] = field(default_factory=dict)
    at_ms: int = 0  # when this report was written

    def to_json(self) -> str:
        return json.dumps({"counts": dict(self.counts), "since_ms": dict(self.since_ms),
                           "ends": [[t, p, o] for (t, p), o in sorted(self.ends.items())],
                           "at_ms": self.at_ms}, sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Topology:
        data: dict[str, Any] = json.loads(raw)
        counts = {str(t): _count(n, f"counts[{t}]") for t, n in data["counts"].items()}
        return cls(counts, {str(t): int(v) for t, v in data.get("since_ms", {}).items()},
                   {(str(t), int(p)): int(o) for t, p, o in data.get("ends", ())},
                   int(data.get("at_ms", 0)))


@dataclass(frozen=True)
class Expansion:
    """A layout's topics multiplied: the new counts and each parent partition's barrier offset."""

    counts: Mapping[str, int]  # only the topics that grew
    barriers: Mapping[TopicPartition, int]  # parent partition -> its end offset at adoption
    old: Mapping[str, int]
    seen_s: float  # how long the broker has had the new counts
    since_ms: int | None = None  # when the pipeline first saw them
    # None: the children wait behind the barriers; else they are coupled to their parents until
    # then (`coupling`), the barriers unused
    until_ms: int | None = None

    def describe(self) -> str:
        grown = ", ".join(f"{t} {self.old[t]} -> {n}" for t, n in sorted(self.counts.items()))
        return f"partition expansion {grown}"

    def coupled(self, adopt_after_s: float) -> Expansion:
        """Adopted now, its children read behind their parents until the producers have had
        `adopt_after_s` since the broker's new counts to move their keys."""
        since_ms = self.since_ms if self.since_ms is not None else 0
        return replace(self, until_ms=since_ms + round(adopt_after_s * 1000))

    def barrier_summary(self, most: int = 8) -> str:
        """The parents' barrier offsets, the first `most` of them (or when the coupling ends)."""
        if self.until_ms is not None:
            when = time.strftime("%H:%M:%S", time.gmtime(self.until_ms / 1000))
            return f"new partitions read behind their parents until {when} UTC, then free"
        items = [f"{t}[{p}]@{o}" for (t, p), o in sorted(self.barriers.items())]
        more = f" and {len(items) - most} more" if len(items) > most else ""
        return "barriers " + ", ".join(items[:most]) + more

    def barrier_lines(self) -> list[str]:
        """One line per new partition: the parent it waits for and the offset it waits for."""
        lines = []
        for topic, count in sorted(self.counts.items()):
            old = self.old[topic]
            for child in range(old, count):
                parent = child % old
                if self.until_ms is not None:
                    lines.append(f"{topic}[{child}] is read behind every task of {topic}[{parent}] until "
                                 f"{self.barrier_summary().split(' until ')[1]}")
                    continue
                lines.append(f"{topic}[{child}] waits until every task of {topic}[{parent}] is past "
                             f"offset {self.barriers[(topic, parent)]}")
        return lines

    def layout(self, layout: Layout) -> Layout:
        """The next generation (barriers resolved, or the children coupled)."""
        if self.until_ms is not None:
            return layout.with_partitions(dict(self.counts), until_ms=self.until_ms)
        return layout.with_partitions(dict(self.counts), dict(self.barriers))


def problems(layout: Layout, topology: Topology) -> list[str]:
    """Counts the layout cannot adopt, each one line naming the fix; the job keeps its layout."""
    out = []
    for topic, count in sorted(topology.counts.items()):
        old = layout.topics.get(topic)
        if old is None or count == old:
            continue
        if count < old:
            out.append(f"topic {topic} has {count} partitions on the broker, fewer than the layout's "
                       f"{old}: Kafka cannot remove partitions, so the topic was recreated; the job "
                       f"keeps reading {old} (fix: restore the topic, or start the job again with "
                       "`autosizer layout init`)")
        elif count % old:
            out.append(f"topic {topic} has {count} partitions on the broker, not a multiple of the "
                       f"layout's {old}: expansion refused (keys would lose their parent partition); "
                       f"the job keeps reading {old} (fix: grow the topic to a multiple of {old}, "
                       f"e.g. {old * (count // old + 1)})")
    return out


def waiting_under(layout: Layout, counts: Mapping[str, int]) -> dict[TopicPartition, TopicPartition]:
    """Partitions the broker has that the layout has not adopted yet, each under the partition
    its keys moved from (`p % the layout's count`), where the count is a multiple the daemon
    will adopt (a refused count's partitions wait for an operator, not for the job). Producers
    move keys to them as they refresh their metadata, from before the daemon's next tick adopts
    them: their records are the topic's input all the same. Counted nowhere (before
    session 58), once producers had moved half the keys of a 4 -> 8 expansion the daemon's input
    read half of what arrived until the adoption (from the code; no run measured it)."""
    waiting: dict[TopicPartition, TopicPartition] = {}
    for topic, old in layout.topics.items():
        count = counts.get(topic, old)
        if count > old and count % old == 0:
            waiting.update({(topic, p): (topic, p % old) for p in range(old, count)})
    return waiting


def expansion(layout: Layout, topology: Topology, now_ms: int,
              topics: Iterable[str] | None = None) -> Expansion | None:
    """The multiplied counts to adopt (of `topics`, default all), with each parent's end offset as
    its barrier; None when nothing grew by a multiple, or when a parent's end offset is not known
    yet."""
    wanted = set(topology.counts if topics is None else topics)
    counts = {t: n for t, n in topology.counts.items() if t in wanted
              and t in layout.topics and n > layout.topics[t] and n % layout.topics[t] == 0}
    if not counts:
        return None
    barriers: dict[TopicPartition, int] = {}
    for topic in counts:
        for parent in range(layout.topics[topic]):
            end = topology.ends.get((topic, parent))
            if end is None:
                return None
            barriers[(topic, parent)] = end
    since = max(topology.since_ms.get(t, now_ms) for t in counts)
    return Expansion(counts, barriers, dict(layout.topics), max(0.0, (now_ms - since) / 1000), since_ms=since)


def requested(layout: Layout, topology: Topology | None, asked: Mapping[str, int],
              now_ms: int) -> Expansion:
    """An operator's `layout expand`: checked against the layout and what the pipeline saw.
    ValueError (one line, with the fix) when it cannot be adopted."""
    for topic, count in asked.items():
        if topic not in layout.topics:
            raise ValueError(f"unknown topic {topic!r}: the layout has {', '.join(sorted(layout.topics))}")
        old = layout.topics[topic]
        if count <= old or count % old:
            raise ValueError(f"{topic}={count}: the new count must be a multiple of the layout's {old} "
                             f"and larger (e.g. {2 * old})")
        seen = None if topology is None else topology.counts.get(topic)
        if seen != count:
            where = "has not reported it yet" if seen is None else f"sees {seen}"
            raise ValueError(f"{topic}={count}: the running pipeline {where} on the broker: create the "
                             f"partitions first (e.g. kafka-topics --alter --topic {topic} --partitions "
                             f"{count}); it reports within a few seconds")
    assert topology is not None
    found = expansion(layout, topology, now_ms, topics=asked)
    if found is None:
        raise ValueError("the pipeline has not reported the parents' end offsets yet: try again in a "
                         "few seconds")
    return found


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a partition count >= 1, not {value!r}")
    return value
