"""Re-sharding (seed 003): which Kinesis shards join a layout and which leave it. Pure.

A child shard's keys had their older records in its parents, so a child is adopted only once every
parent is retired: closed (Kinesis writes no more to it) and finished (no record at or past the
slowest task's position), i.e. every virtual task that read it has processed all its records. A
split's two children join together; a merge's child waits for both parents. A shard of the layout
that Kinesis no longer lists (past the stream's retention) leaves too: there is nothing left to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from autosizer.elasticity.layout import Layout


@dataclass(frozen=True)
class Shard:
    """One shard as ListShards reports it: its number, its parents' numbers, and whether it is
    closed (it has an ending sequence number: a split or merge made it a parent)."""

    index: int
    parents: tuple[int, ...] = ()
    closed: bool = False


@dataclass(frozen=True)
class Reshard:
    """Shards that join the layout (with their parents) and shards that leave it."""

    adopted: dict[int, tuple[int, ...]]
    retired: frozenset[int]

    def describe(self) -> str:
        joined = ", ".join(f"{i} (from {'+'.join(map(str, ps)) or 'none'})" for i, ps in sorted(self.adopted.items()))
        return f"adopt [{joined}], retire {sorted(self.retired)}"


def reshard(layout: Layout, listed: Iterable[Shard], finished: Iterable[int]) -> Reshard | None:
    """What the next generation changes, or None. `finished`: shards of the layout with no record
    at or past their slowest task's position (only closed ones can stay so)."""
    ((stream, _),) = layout.topics.items()
    shards = {s.index: s for s in listed}
    live = {p for _, p in layout.partitions()}
    done = set(finished)
    leaving = {i for i in live if i not in shards or (shards[i].closed and i in done)}
    gone = {p for _, p in layout.retired} | leaving
    joining = {s.index: s.parents for s in shards.values()
               if s.index not in live and s.index not in gone and all(p in gone for p in s.parents)}
    if not leaving and not joining:
        return None
    if not (live - leaving) and not joining:
        return None  # a stream keeps an open shard: its child is not listed yet
    return Reshard(joining, frozenset(leaving))


def waiting_under(layout: Layout, listed: Iterable[Shard]) -> dict[int, int]:
    """Listed shards the layout has not adopted yet, each under the layout's shard whose line it
    continues (its lowest live ancestor): a child's records wait for that shard's tasks to finish
    it, so the pipeline counts them there, as input and as backlog. Counted nowhere, a split hid
    its children's input from the daemon until their parent was done: the Kinesis demo's input
    read 91/s of 150/s 10 s after a split, and a merge's child had no input rate at all at the
    tick after it joined (run u1)."""
    shards = {s.index: s for s in listed}
    live = {p for _, p in layout.partitions()}

    def owner(index: int, seen: frozenset[int]) -> int | None:
        found = [p if p in live else owner(p, seen | {p}) for p in shards[index].parents
                 if p not in seen and (p in live or p in shards)]
        found = [p for p in found if p is not None]
        return min(found) if found else None

    waiting = {}
    for index in shards:
        if index not in live:
            line = owner(index, frozenset({index}))
            if line is not None:
                waiting[index] = line
    return waiting


@dataclass
class WaitingCounts:
    """What each live shard's watermark counts of the children waiting under it: a child's
    records since it came under that shard. A merge's child waits under its lower parent, then
    under the other once the first is done: counted whole there, the other's watermark would
    jump by every record the child took in meanwhile, a burst of input that never was."""

    lines: dict[int, tuple[int, int]] = field(default_factory=dict)  # child -> (its shard, its count then)

    def under(self, waiting: Mapping[int, int], seen: Mapping[int, int]) -> dict[int, int]:
        """Per live shard, the records its waiting children (`waiting_under`) added to its input;
        `seen`: each child's records counted since its first."""
        lines: dict[int, tuple[int, int]] = {}
        added: dict[int, int] = {}
        for child, shard in waiting.items():
            was, base = self.lines.get(child, (shard, 0))
            if was != shard:
                base = seen[child]
            lines[child] = (shard, base)
            added[shard] = added.get(shard, 0) + seen[child] - base
        self.lines = lines
        return added


def apply(layout: Layout, change: Reshard) -> Layout:
    """The next generation of `layout` under `change`."""
    ((stream, _),) = layout.topics.items()
    return layout.with_shards(stream, change.adopted, change.retired)
