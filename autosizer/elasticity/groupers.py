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


def by_lineage(counts: Mapping[str, int], parents: Mapping[tuple[str, int], tuple[int, ...]]) -> list[Group]:
    """Kinesis: a child shard joins its first parent's group, so a split keeps every key in the
    same virtual task (the key's bucket does not depend on the shard) and a merge keeps the first
    parent's keys there; only the other parent's keys move. Groups are named after the root shard
    of their line, and the factor alone sets the parallelism (a split adds no tasks)."""

    def root(topic: str, partition: int) -> int:
        while (topic, partition) in parents and parents[(topic, partition)]:
            partition = parents[(topic, partition)][0]
        return partition

    groups: dict[str, set[tuple[str, int]]] = {}
    for topic, count in sorted(counts.items()):
        for partition in range(count):
            groups.setdefault(f"Shard_{root(topic, partition)}", set()).add((topic, partition))
    return [(name, frozenset(members)) for name, members in sorted(groups.items(), key=lambda g: int(g[0][6:]))]


GROUPERS: dict[str, Grouper] = {
    "partition": by_partition,
    "topic-partition": by_topic_partition,
    "fixed": fixed,
}
