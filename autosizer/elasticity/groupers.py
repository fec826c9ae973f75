"""Groupers: which partitions one virtual task reads, before the factor cuts them into buckets.

Each grouper maps partition counts to named groups of `(topic, partition)`; the layout then makes
`factor` virtual tasks of every group, one per key bucket. They mirror Samza's groupers:
GroupByPartition, GroupBySystemStreamPartition and SEP-5's GroupByPartitionFixedTasks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

Group = tuple[str, frozenset[tuple[str, int]]]
Grouper = Callable[[Mapping[str, int], Mapping[str, int]], list[Group]]


def by_partition(counts: Mapping[str, int], initial: Mapping[str, int]) -> list[Group]:
    """One group per partition number, reading that partition of every topic that has it."""
    return [
        (f"Partition_{p}", frozenset((t, p) for t, n in counts.items() if p < n))
        for p in range(max(counts.values()))
    ]


def by_topic_partition(counts: Mapping[str, int], initial: Mapping[str, int]) -> list[Group]:
    """One group per (topic, partition)."""
    return [(f"{t}_{p}", frozenset({(t, p)})) for t in sorted(counts) for p in range(counts[t])]


def fixed(counts: Mapping[str, int], initial: Mapping[str, int]) -> list[Group]:
    """SEP-5: partition p joins group p % initial count, so keys keep their task after expansion."""
    return [
        (
            f"Partition_{g}",
            frozenset((t, p) for t, n in counts.items() for p in range(n) if p % initial[t] == g),
        )
        for g in range(max(initial.values()))
    ]


GROUPERS: dict[str, Grouper] = {
    "partition": by_partition,
    "topic-partition": by_topic_partition,
    "fixed": fixed,
}
