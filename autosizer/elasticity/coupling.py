"""Coupling: an expansion's new partition read only behind its lineage, step by step, until the
producers have moved its keys.

A producer sends a moved key to its old partition until it refreshes its metadata (every 5
minutes by default in the Java client and librdkafka), then to the new one. A barrier taken at
adoption has to wait that long, and the moved keys' records waited with it (run e5: their oldest
was 316 s old at the shipped 300 s). A coupled child is adopted at once and read behind its
lineage instead: its parent, and the parent's own parent while the parent is an expansion child
too (a producer that missed a generation moves a key from its grandparent straight to it).
The pipeline's probe takes a step every second: the child's end offset at the probe before, and
each ancestor's end now. A child record below a step's child end was written before the step's
ancestor ends were read, and its key's older records, in whichever ancestor the producer wrote
them to, were written before it (a producer moves a key only to a descendant of its old
partition), so they lie below those ends. The child is therefore read up to a step's child end
once every task of each ancestor has passed that ancestor's end. The last step, taken once the
producers have refreshed (`Barrier.until_ms`), has no child end: past it the child is free.
No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

TopicPartition = tuple[str, int]
Ends = tuple[int, ...]  # one end offset per ancestor, the parent first (`Layout.lineage`)
Step = tuple[int, Ends]  # (the child's end at the probe before, each ancestor's end now)


def passed(ends: Ends, done: Sequence[int | None]) -> bool:
    """Every task of each ancestor is at or past its end (a lineage of another length never is:
    the steps were taken for another layout)."""
    return len(ends) == len(done) > 0 and all(d is not None and d >= e for d, e in zip(done, ends, strict=True))


@dataclass(frozen=True)
class Coupling:
    """One child's steps, in the order taken. `final` is each ancestor's end once the producers
    have refreshed (None until then)."""

    steps: tuple[Step, ...] = ()
    final: Ends | None = None

    def limit(self, done: Sequence[int | None]) -> int | None:
        """Where the child may be read up to (0: not at all), None once it is free. `done`: per
        ancestor, the lowest position of its tasks (None: one has not started)."""
        if self.final is not None and passed(self.final, done):
            return None
        return max((child for child, ends in self.steps if passed(ends, done)), default=0)

    def step(self, child_end: int, ends: Ends) -> Coupling:
        """A new step (none once final: the child's limit then waits only for the final)."""
        if self.final is not None:
            return self
        return replace(self, steps=(*self.steps, (child_end, tuple(ends))))

    def close(self, ends: Ends) -> Coupling:
        """The producers have refreshed: past `ends` the child is free."""
        return self if self.final is not None else replace(self, final=tuple(ends))

    def pruned(self, done: Sequence[int | None]) -> Coupling:
        """Without the steps the lineage passed, but the one that sets the limit."""
        gone = [s for s in self.steps if passed(s[1], done)]
        if len(gone) < 2:
            return self
        best = max(gone, key=lambda s: s[0])
        return replace(self, steps=(best, *(s for s in self.steps if not passed(s[1], done))))


def couplings_to_json(couplings: Mapping[TopicPartition, Coupling]) -> str:
    return json.dumps([{"topic": t, "partition": p, "steps": [[child, list(ends)] for child, ends in c.steps],
                        "final": None if c.final is None else list(c.final)}
                       for (t, p), c in sorted(couplings.items())], sort_keys=True)


def couplings_from_json(raw: str | bytes) -> dict[TopicPartition, Coupling]:
    data: Any = json.loads(raw)
    out: dict[TopicPartition, Coupling] = {}
    for row in data:
        steps = tuple((int(child), tuple(int(e) for e in ends)) for child, ends in row["steps"])
        final = row.get("final")
        out[(str(row["topic"]), int(row["partition"]))] = Coupling(
            steps, None if final is None else tuple(int(e) for e in final))
    return out
