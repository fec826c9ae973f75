"""The decision journal: every tick's decision, holds included, with its inputs and reason.

One Redis stream per job (`decisions`, capped) that `autosizer decisions` and `status` read, and the
same record as one structlog JSON event, so logs and Redis tell the same story.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import structlog

from autosizer.elasticity.store import MetadataStore
from autosizer.redaction import scrub

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class DecisionRecord:
    time: float
    job: str
    generation: int
    factor: int  # running when decided
    target: int  # what the decision asked for
    outcome: str  # hold, scale_up, scale_down, expand, paused, backoff, dry_run, aborted, rolled_back, failed, error
    reason: str
    inputs: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    actuation: dict[str, Any] | None = None
    holder: str = ""
    tick_ms: float = 0.0

    def to_json(self) -> str:
        """Scrubbed: no URL credentials, no string longer than a screen (an override value may
        be megabytes; journaling it every tick would bloat the stream)."""
        return json.dumps(scrub(asdict(self)), sort_keys=True, default=str)


class DecisionJournal:
    def __init__(self, store: MetadataStore, max_length: int = 10_000):
        self.store, self.redis = store, store.redis
        self.key = store.keys.decisions
        self.max_length = max_length

    def append(self, record: DecisionRecord) -> None:
        """Log the record, then add it to the stream (a Redis outage loses only the stream copy)."""
        event = log.warning if record.outcome in ("error", "failed", "rolled_back", "aborted") else log.info
        event("decision", **asdict(record))
        self.store.call(lambda: self.redis.xadd(self.key, {"record": record.to_json()},
                                                maxlen=self.max_length, approximate=True))

    def last(self, count: int = 20) -> list[dict[str, Any]]:
        """The newest `count` records, oldest first."""
        raw = self.store.call(lambda: self.redis.xrevrange(self.key, count=count))
        return [scrub(json.loads(fields[b"record"])) for _, fields in reversed(raw)]
