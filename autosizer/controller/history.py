"""The input's recent days in Redis, so a restarted (or newly elected) daemon still knows the day.

One hash per job (`history`): a field per UTC day number, holding that day's peak input per
5-minute slot as a JSON list (null: not seen). A tick that raises its slot's peak rewrites only
today's field; days past `keep_days` are deleted when the history is loaded and as a new day
begins. Losing Redis loses only the
foresight: the policy reacts as it does with no history, and says so in its reasons.
"""

from __future__ import annotations

import json
import math

import numpy as np
import structlog

from autosizer.elasticity.store import MetadataStore, StoreError
from autosizer.policies.history import InputHistory

log = structlog.get_logger(__name__)


class HistoryStore:
    def __init__(self, store: MetadataStore, keep_days: int = 15):
        self.store, self.redis = store, store.redis
        self.key = store.keys.history
        self.keep_days = keep_days
        self.log = log.bind(job=store.job)

    def load(self) -> InputHistory:
        """The history on record; an unreadable day is skipped (and logged), not fatal."""
        history = InputHistory(keep_days=self.keep_days)
        try:
            raw = self.store.call(lambda: self.redis.hgetall(self.key))
        except StoreError as exc:
            self.log.error("history.unreadable", error=str(exc))
            return history
        for field, value in raw.items():
            try:
                day, row = int(field), json.loads(value)
                if len(row) != history.slots:
                    raise ValueError(f"{len(row)} slots, not {history.slots}")
                history.days[day] = np.array([math.nan if v is None else float(v) for v in row])
            except (ValueError, TypeError) as exc:
                self.log.error("history.bad_day", day=str(field), error=str(exc))
        newest = max(history.days, default=0)
        stale = [d for d in history.days if d <= newest - self.keep_days]
        for day in stale:
            del history.days[day]
        if stale:
            try:
                self.store.call(lambda: self.redis.hdel(self.key, *map(str, stale)))
            except StoreError as exc:
                self.log.error("history.unwritable", error=str(exc))
        return history

    def save(self, history: InputHistory, day: int) -> None:
        """Write day `day` and drop the days the history no longer keeps."""
        row = history.days.get(day)
        if row is None:
            return
        text = json.dumps([None if math.isnan(v) else round(float(v), 3) for v in row])

        def write() -> None:
            pipe = self.redis.pipeline()
            pipe.hset(self.key, str(day), text)
            pipe.hdel(self.key, str(day - self.keep_days))  # the day that just fell out, if any
            pipe.execute()

        self.store.call(write)
