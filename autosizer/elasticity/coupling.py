"""Coupling: an expansion's new partition read only behind its parent, step by step, until the
producers have moved its keys.

A producer sends a moved key to its old partition until it refreshes its metadata (every 5
minutes by default in the Java client and librdkafka), then to the new one. A barrier taken at
adoption has to wait that long, and the moved keys' records waited with it (run e5: their oldest
was 316 s old at the shipped 300 s). A coupled child is adopted at once and read behind its
parent instead: the pipeline's probe takes a step every second, the child's end offset and,
later, the parent's. A child record below a step's child end was written before the step's
parent end was read, and its key's records in the parent were written before it (a producer
sends a moved key to the new partition only after the old one took its last), so they lie below
that parent end. The child is therefore read up to a step's child end once every task of the
parent has passed the step's parent end. The last step, taken once the producers have
refreshed (`Barrier.until_ms`), has no child end: past it the child is free. No I/O here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Coupling:
    """One child's steps, in the order taken: (child end, parent end). `final` is the parent's end
    once the producers have refreshed (None until then)."""

    steps: tuple[tuple[int, int], ...] = ()
    final: int | None = None

    def limit(self, parent_done: int | None) -> int | None:
        """Where the child may be read up to (0: not at all), None once it is free. `parent_done`:
        the lowest position of the parent's tasks (None: one has not started)."""
        if parent_done is None:
            return 0
        if self.final is not None and parent_done >= self.final:
            return None
        return max((child for child, parent in self.steps if parent <= parent_done), default=0)

    def step(self, child_end: int, parent_end: int) -> Coupling:
        """A new step (none once final: the child's limit then waits only for the final)."""
        if self.final is not None:
            return self
        return replace(self, steps=(*self.steps, (child_end, parent_end)))

    def close(self, parent_end: int) -> Coupling:
        """The producers have refreshed: past `parent_end` the child is free."""
        return self if self.final is not None else replace(self, final=parent_end)

    def pruned(self, parent_done: int | None) -> Coupling:
        """Without the steps the parent passed, but the one that sets the limit."""
        if parent_done is None:
            return self
        passed = [s for s in self.steps if s[1] <= parent_done]
        if len(passed) < 2:
            return self
        best = max(passed)
        return replace(self, steps=(best, *(s for s in self.steps if s[1] > parent_done)))

def couplings_to_json(couplings: Mapping[TopicPartition, Coupling]) -> str:
    return json.dumps([{"topic": t, "partition": p, "steps": [list(s) for s in c.steps], "final": c.final}
                       for (t, p), c in sorted(couplings.items())], sort_keys=True)


def couplings_from_json(raw: str | bytes) -> dict[TopicPartition, Coupling]:
    data: Any = json.loads(raw)
    out: dict[TopicPartition, Coupling] = {}
    for row in data:
        steps = tuple((int(child), int(parent)) for child, parent in row["steps"])
        final = row.get("final")
        out[(str(row["topic"]), int(row["partition"]))] = Coupling(steps, None if final is None else int(final))
    return out
