"""The input's recent days in Redis, so a restarted (or newly elected) daemon still knows the day.

One hash per job (`history`): a field per day number, holding that day's peak input per
5-minute slot as a JSON list (null: not seen), and `zone`, the time zone whose midnights begin
the days (`[job] timezone`; a hash without one was kept in UTC). A tick that raises its slot's
peak rewrites only today's field; days past `keep_days` are deleted when the history is loaded
and as a new day begins. Days kept in another zone than the daemon's are dropped when it loads
them (their slots are hours off: a plan from them would scale an hour early or late), and
`autosizer history backfill` records them again from Prometheus in the new zone. The daemon
reads the days again at each new slot (`refresh`), keeping its own today.
Losing Redis loses only the foresight: the policy reacts as it does with no history, and says so
in its reasons.

`backfill` fills the past days from Prometheus (`PrometheusCollector.input_since`, the daemon's own
input query, summed), so a daemon deployed on a job Prometheus has watched for days plans from its
first day instead of reacting for two.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable

import numpy as np
import structlog

from autosizer.elasticity.store import MetadataStore, StoreError
from autosizer.policies.history import InputHistory
from autosizer.redaction import clip

log = structlog.get_logger(__name__)
ZONE_FIELD = "zone"  # the hash's field naming the days' time zone; every other field is a day
RECORDED_IN = "UTC"  # the zone of a hash that names none: every history before zones were kept


class HistoryStore:
    def __init__(self, store: MetadataStore, keep_days: int = 15, zone: str | None = None):
        """`zone`: the daemon's `[job] timezone`, which days kept in another are dropped for;
        None (a command that only reads or adds to the history) takes the zone on record."""
        self.store, self.redis = store, store.redis
        self.key = store.keys.history
        self.keep_days = keep_days
        self.zone = zone
        self.log = log.bind(job=store.job)

    def load(self, strict: bool = False) -> InputHistory:
        """The history on record; an unreadable day is skipped (and logged), not fatal. A daemon
        that cannot read the history at all plans as with none; a command an operator runs
        (`strict`) raises instead, since "no days on record" would then be untrue."""
        return self._read(strict) or InputHistory(keep_days=self.keep_days, zone=self.zone or RECORDED_IN)

    def refresh(self, history: InputHistory, today: int) -> InputHistory:
        """The days as Redis has them now (a backfill since, another daemon's writes), today's
        slots the higher of Redis' and `history`'s; `history` itself if Redis cannot be read."""
        stored = self._read()
        if stored is None:
            return history
        mine, theirs = history.days.get(today), stored.days.get(today)
        if mine is not None:
            stored.days[today] = mine.copy() if theirs is None else np.fmax(mine, theirs)
        return stored

    def _read(self, strict: bool = False) -> InputHistory | None:
        try:
            raw = self.store.call(lambda: self.redis.hgetall(self.key))
        except StoreError as exc:
            if strict:
                raise
            self.log.error("history.unreadable", error=str(exc))
            return None
        recorded = raw.pop(ZONE_FIELD.encode(), b"").decode(errors="replace") or RECORDED_IN
        zone = self.zone or recorded
        try:
            history = InputHistory(keep_days=self.keep_days, zone=zone)
        except ValueError as exc:  # a zone on record that this machine's zone database lacks
            if strict:
                raise ValueError(f"the history's days are kept in zone {clip(zone, 40)!r}, which this machine "
                                 "cannot read: install tzdata (pip install tzdata), or record them again in "
                                 "the daemon's zone with `autosizer history backfill --config ...`") from None
            self.log.error("history.unreadable", error=str(exc))
            return None
        if raw and recorded != zone:
            self._drop_days(raw, recorded, zone)
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

    def _drop_days(self, raw: dict[bytes, bytes], recorded: str, zone: str) -> None:
        """Delete the days kept in `recorded`, now that the job's days are `zone`'s."""
        self.log.warning("history.zone_changed", recorded=recorded, zone=zone, days_dropped=len(raw),
                         fix="autosizer history backfill --config ... records the past days again in the new zone")

        def write() -> None:
            pipe = self.redis.pipeline()
            pipe.hdel(self.key, *raw)
            pipe.hset(self.key, ZONE_FIELD, zone)
            pipe.execute()

        try:
            self.store.call(write)
        except StoreError as exc:
            self.log.error("history.unwritable", error=str(exc))

    def save(self, history: InputHistory, day: int) -> None:
        """Write day `day` and drop the days the history no longer keeps."""
        row = history.days.get(day)
        if row is None:
            return
        text = json.dumps([None if math.isnan(v) else round(float(v), 3) for v in row])

        def write() -> None:
            pipe = self.redis.pipeline()
            pipe.hset(self.key, mapping={str(day): text, ZONE_FIELD: history.zone})
            pipe.hdel(self.key, str(day - self.keep_days))  # the day that just fell out, if any
            pipe.execute()

        self.store.call(write)

    def backfill(self, points: Iterable[tuple[float, float]], now: float) -> dict[int, int]:
        """Record (time, input rate) points from before `now`'s day into the days on record,
        each slot keeping its peak, as the daemon's ticks would have; slots raised per day.
        Today's field is left to the daemon, which rewrites it from memory on its next tick."""
        history = self.load()
        today = history.day_of(now)
        raised: Counter[int] = Counter()
        for time, rate in sorted(points):
            if history.day_of(time) < today and (day := history.record(time, rate)) is not None:
                raised[day] += 1
        for day in sorted(raised):
            if day in history.days:  # not dropped past keep_days by a later day
                self.save(history, day)
        return {day: count for day, count in raised.items() if day in history.days}

