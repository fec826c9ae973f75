"""The actuation journal: the step an actuation is at, in one Redis hash, written under the lease.

Each write is a script that first checks the caller still holds the leader lease (and, to begin,
that the layout generation is the one the plan starts from and no other actuation is open), so a
daemon that lost its lease cannot advance a rescale another daemon now owns. A daemon that starts
and finds an entry resumes it from its step; `history` keeps finished entries for `status`.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace

import redis

from autosizer.clock import SYSTEM_CLOCK, Clock
from autosizer.elasticity.keys import JOURNAL_BEGIN, JOURNAL_WRITE
from autosizer.elasticity.layout import Layout
from autosizer.elasticity.store import MetadataStore

STEPS = ("drain", "migrate", "start", "verify")



class JournalRefused(RuntimeError):
    """The journal would not take the write: lease lost, another actuation open, or stale layout."""


@dataclass(frozen=True)
class Entry:
    id: str
    from_generation: int
    from_factor: int
    to_factor: int
    step: str
    reason: str
    lag_before: float | None = None
    input_rate: float = 0.0
    processed_rate: float = 0.0
    rollback: bool = False
    started_ms: int = 0
    drain_ms: int = 0  # when the drain was requested: the restart downtime runs from here
    result: str = ""
    partitions: dict[str, int] | None = None  # an expansion: the topics' new counts
    barriers: list[list] | None = None  # an expansion: [topic, parent, end offset] per parent
    coupled_until_ms: int | None = None  # an expansion without barriers: its children coupled until then

    @property
    def expansion(self) -> bool:
        return self.partitions is not None

    def next_layout(self, layout: Layout) -> Layout:
        """The generation this actuation publishes after `layout` (its from_generation)."""
        if self.partitions is None:
            return layout.with_factor(self.to_factor)
        return layout.with_partitions(self.partitions, {(t, p): o for t, p, o in self.barriers or ()},
                                      until_ms=self.coupled_until_ms)

    @property
    def to_generation(self) -> int:
        return self.from_generation + 1

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Entry:
        return cls(**json.loads(raw))


class ActuationJournal:
    def __init__(self, store: MetadataStore, holder: str, clock: Clock = SYSTEM_CLOCK):
        self.store, self.redis, self.holder, self.clock = store, store.redis, holder, clock
        self.key, self.history_key = store.keys.actuation, store.keys.actuations
        self._begin = self.redis.register_script(JOURNAL_BEGIN)
        self._write = self.redis.register_script(JOURNAL_WRITE)

    def open(self) -> Entry | None:
        raw = self.store.call(lambda: self.redis.get(self.key))
        return None if raw is None else self.store.parse(self.key, raw, Entry.from_json)

    def history(self, count: int = 10) -> list[Entry]:
        raw = self.store.call(lambda: self.redis.lrange(self.history_key, 0, count - 1))
        return [self.store.parse(self.history_key, r, Entry.from_json) for r in raw]

    def begin(self, from_generation: int, from_factor: int, to_factor: int, reason: str,
              lag_before: float | None = None, input_rate: float = 0.0,
              processed_rate: float = 0.0, rollback: bool = False,
              partitions: Mapping[str, int] | None = None,
              barriers: Mapping[tuple[str, int], int] | None = None,
              coupled_until_ms: int | None = None) -> Entry:
        """Open an actuation at its first step; a rollback replaces the open one it undoes."""
        entry = Entry(uuid.uuid4().hex[:12], from_generation, from_factor, to_factor, STEPS[0],
                      reason, lag_before, input_rate, processed_rate, rollback,
                      int(self.clock.time() * 1000),
                      partitions=None if partitions is None else dict(partitions),
                      barriers=None if barriers is None else [[t, p, o] for (t, p), o in sorted(barriers.items())],
                      coupled_until_ms=coupled_until_ms)
        self._run(self._begin, [self.store.keys.leader, self.key, self.store.keys.current],
                  [self.holder, from_generation, entry.to_json(), "1" if rollback else "0"])
        return entry

    def advance(self, entry: Entry, step: str, **changes: object) -> Entry:
        moved = replace(entry, step=step, **changes)
        self._run(self._write, [self.store.keys.leader, self.key, self.history_key],
                  [self.holder, entry.id, moved.to_json(), ""])
        return moved

    def finish(self, entry: Entry, result: str) -> Entry:
        done = replace(entry, step="finished", result=result)
        self._run(self._write, [self.store.keys.leader, self.key, self.history_key],
                  [self.holder, entry.id, "", done.to_json()])
        return done

    def _run(self, script, keys: list[str], args: list[object]) -> None:
        try:
            self.store.call(lambda: script(keys=keys, args=args))
        except redis.ResponseError as exc:
            reason = {"NOT_LEADER": "this daemon no longer holds the leader lease",
                      "BUSY": "another actuation is open",
                      "STALE": "the layout generation changed since the decision",
                      "GONE": "the actuation was finished or replaced elsewhere"}
            code = str(exc).split()[0]
            raise JournalRefused(f"actuation journal refused the write: {reason.get(code, str(exc))}") from None


@dataclass(frozen=True)
class LastRescale:
    at_ms: int
    downtime_s: float  # drain request to first commit of the new generation, as measured
    expansion: bool = False  # an adopted partition expansion, not a factor change


def record_rescale(store: MetadataStore, downtime_s: float, now: float | None = None,
                   expansion: bool = False) -> None:
    """Mark the time of the last layout change: the guards' cooldown and the policies'
    restart-downtime estimate read it, and after an expansion the tick's input check."""
    at = time.time() if now is None else now
    store.call(lambda: store.redis.hset(store.keys.rescale, mapping={
        "at_ms": int(at * 1000), "downtime_s": round(downtime_s, 3), "expansion": int(expansion)}))


def last_rescale(store: MetadataStore) -> LastRescale | None:
    raw = store.call(lambda: store.redis.hgetall(store.keys.rescale))
    if not raw:
        return None
    return store.parse(store.keys.rescale, raw,
                       lambda r: LastRescale(int(r[b"at_ms"]), float(r[b"downtime_s"]),
                                             r.get(b"expansion", b"0") == b"1"))
