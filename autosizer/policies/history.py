"""The input's recent days, by time of day: what lets a policy scale ahead of a daily ramp.

Anchors such as KEDA's cron windows need an operator to write the schedule down; this learns it.
The controller records every tick's input rate as the peak of its 5-minute slot of the day and
keeps the last `keep_days` days (in Redis, `controller/history.py`; the simulator keeps its
own). Expecting the peak of a window ahead:

- with the same weekday one or two weeks back on record, from those days (a weekly pattern: a
  Monday is not a Sunday), their median;
- otherwise from the last three days that saw the window, their median, once at least two did;
  with one, nothing to scale ahead on, but what it reached sizes a scale-up the input itself
  asks for (`first_days_peak`: a job's second morning is one step, not its first's ladder);
- never when today broke the pattern: when the last hour's completed slots saw input far below
  what the same method expected of them (a holiday, an outage), the history is not trusted
  until the day agrees with it again. Then the policy simply reacts, as it does with no history.
  A day busier than the days is no reason to doubt them: what they expected is then a floor,
  and the policy sizes for the input it sees above it.

Days are the job's (`zone`, an IANA time zone name; UTC by default): traffic that people make
keeps its hour on their clocks, so a history kept in UTC expects a morning ramp an hour off for
the two weeks after a daylight-saving change, and its trust check calls the shifted day broken
(`nyc-flights` over 3 November 2013: five to eight rescales a day for a week). Times in and out
are epoch seconds; inside, each is its wall-clock time read as if it were UTC ("wall seconds"),
so a day is 86,400 of them whatever the offset. A plan made across a change is an hour off past
it, until the next slot plans again.

Pure: no I/O, one truth for the daemon and the simulator.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

T = TypeVar("T")
DAY_S = 86_400
WEEK_DAYS = 7
WEEKLY = (WEEK_DAYS, 2 * WEEK_DAYS)  # days back compared first: the same weekday
RECENT = (1, 2, 3)  # else these, once `min_days` of them are on record
TRUST_WINDOW_S = 3600.0  # the span of today the history's trust check compares with the days


def time_zone(name: object, field_name: str = "timezone") -> ZoneInfo:
    """The IANA time zone `name`, or ValueError naming `field_name` and the fix."""
    fix = f"{field_name} must be an IANA time zone name such as UTC, America/New_York or Europe/London"
    if not isinstance(name, str) or not name or name != name.strip():
        raise ValueError(f"{fix}, not {name!r}")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{fix}; {name!r} is not one") from None


@dataclass
class InputHistory:
    slot_s: int = 300
    keep_days: int = 15  # two weeks back, and today
    min_days: int = 2  # recent days needed before the history is believed
    tolerance: float = 0.5  # the last hour may fall short of the expectation by this share
    zone: str = "UTC"  # the job's time zone: its days begin at its midnight
    days: dict[int, np.ndarray] = field(default_factory=dict)  # day number -> peak per slot, NaN unseen
    # this slot's answers: whether the day agrees with the history, and each window's expectation
    _slot: int | None = field(default=None, repr=False, compare=False)
    _broken: str | None = field(default=None, repr=False, compare=False)  # how today broke the pattern
    _answers: dict[tuple[float, bool], float | None] = field(default_factory=dict, repr=False, compare=False)
    _profiles: dict[float, np.ndarray | None] = field(default_factory=dict, repr=False, compare=False)
    _doubts: dict[float, str | None] = field(default_factory=dict, repr=False, compare=False)
    _zone: ZoneInfo | None = field(default=None, init=False, repr=False, compare=False)  # None: UTC
    # the last time `wall` converted, and its answer: a tick asks for the same time several times
    _last_wall: tuple[float, float] = field(default=(math.nan, math.nan), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.slot_s < 1 or DAY_S % self.slot_s:
            raise ValueError(f"history slot_s must divide a day into whole slots, not {self.slot_s!r}")
        if self.keep_days < 2:
            raise ValueError(f"history keep_days must be >= 2, not {self.keep_days!r}")
        self._zone = None if self.zone == "UTC" else time_zone(self.zone, "history timezone")

    @property
    def slots(self) -> int:
        return DAY_S // self.slot_s

    def wall(self, time: float) -> float:
        """Epoch seconds `time` as wall seconds of the job's zone: its clock's time read as UTC."""
        if self._zone is None or not math.isfinite(time):
            return time
        if self._last_wall[0] == time:
            return self._last_wall[1]
        offset = datetime.fromtimestamp(time, self._zone).utcoffset()
        wall = time + (offset.total_seconds() if offset is not None else 0.0)
        self._last_wall = (time, wall)
        return wall

    def day_of(self, time: float) -> int:
        """The number of the job's day that epoch seconds `time` falls in (the days' keys)."""
        return int(self.wall(time) // DAY_S)

    def record(self, time: float, rate: float) -> int | None:
        """Keep `rate` as its slot's peak; the day number when that changed anything (to persist)."""
        if not (math.isfinite(time) and math.isfinite(rate) and rate >= 0):
            return None
        day, slot = divmod(int(self.wall(time) // self.slot_s), self.slots)
        row = self.days.get(day)
        if row is None:
            row = self.days[day] = np.full(self.slots, np.nan)
            for old in [d for d in self.days if d <= day - self.keep_days]:
                del self.days[old]
        if row[slot] >= rate:
            return None
        row[slot] = rate
        return day

    def expected_peak(self, now: float, ahead_s: float, highest: bool = False) -> float | None:
        """The input's expected peak over [now, now + ahead_s), or None when the history cannot
        say (too short, or today broke its pattern). `highest`: the highest of the days it
        compares rather than their median, for a decision that a peak would undo. Answers are the same within a slot, since
        only today's current slot changes: a tick asks once per slot, not once per tick."""
        return self._expected_peak(self.wall(now), ahead_s, highest)

    def _expected_peak(self, now: float, ahead_s: float, highest: bool = False) -> float | None:
        if not self._trusted_at(now):
            return None
        key = (ahead_s, highest)
        if key not in self._answers:
            self._answers[key] = self._expect(now, now + ahead_s, highest)
        return self._answers[key]

    def profile(self, now: float, ahead_s: float) -> np.ndarray | None:
        """The expected peak of each slot from now's over the next `ahead_s` (NaN where the days
        compared never saw it), or None when the history cannot say: what a plan for the coming
        hours is made from. The same days as `expected_peak` are compared, the highest of them taken
        per slot (a plan that ran the job smaller than some recent day needed would be undone)."""
        now = self.wall(now)
        if not self._trusted_at(now):
            return None
        slot = int(now // self.slot_s)
        if ahead_s not in self._profiles:
            self._profiles[ahead_s] = self._profile(slot, max(1, math.ceil(ahead_s / self.slot_s)))
        return self._profiles[ahead_s]

    def first_days_peak(self, now: float, ahead_s: float) -> float | None:
        """While fewer days are on record than the history needs to be believed (a job's second
        day), the highest of those there are over [now, now + ahead_s): too little to scale
        ahead on, enough to size a scale-up the input already asks for, so a morning ramp that
        went 1 -> 2 -> 4 -> 8 -> 16 on the first day is one step on the second. Window by
        window, as a day recorded from its evening on knows the evening only. None where the
        history is believed (its own answers speak), when no day saw the window, or when
        today's last hour fell short of the days as the trust check reads a shortfall."""
        now = self.wall(now)
        if not self._trusted_at(now) or self._expected_peak(now, ahead_s) is not None:
            return None
        if self._disagreement(now, need=1) is not None:
            return None
        found = self._compared(int(now // DAY_S), lambda day: self._peak(day, now, now + ahead_s), need=1)
        return max(found) if found else None

    def doubt(self, now: float, ahead_s: float = 3600.0) -> str | None:
        """Why the history cannot say what the next `ahead_s` holds, in an operator's words (for
        a decision's reasons and `autosizer history show`), or None when it can: a user who
        expected the day plan to act is told which fallback held it back."""
        now = self.wall(now)
        if not self._trusted_at(now):
            return self._broken
        if ahead_s not in self._doubts:  # the same all slot long: it reads the days before today only
            self._doubts[ahead_s] = self._doubt(now, ahead_s)
        return self._doubts[ahead_s]

    def _doubt(self, now: float, ahead_s: float) -> str | None:
        today = int(now // DAY_S)
        if not self._compared(today, lambda day: day if day in self.days else None):
            on = sum(today - k in self.days for k in RECENT)
            return f"{on} of the last three days on record, {self.min_days} needed"
        if self._expected_peak(now, ahead_s) is None:
            return "the days on record never saw this time of day"
        return None

    def broken(self, now: float) -> str | None:
        """How today broke the days' pattern over the last hour, or None when it did not: the
        one fallback a decision names, since the days on record led the operator to expect a plan."""
        self._trusted_at(self.wall(now))
        return self._broken

    def _trusted_at(self, now: float) -> bool:
        """Whether the history may be believed at wall seconds `now`; a new slot judges that
        afresh and forgets the last slot's answers."""
        slot = int(now // self.slot_s)
        if self._slot != slot:
            self._slot, self._broken = slot, self._disagreement(now)
            self._answers, self._profiles, self._doubts = {}, {}, {}
        return self._broken is None

    def _profile(self, slot: int, count: int) -> np.ndarray | None:
        """The days' word on each slot ahead, slot by slot as `_compared` takes it for a window:
        the same weekday's where one or two weeks back saw that slot, else the recent days' where
        `min_days` of them did. Slot by slot, since a day recorded from its evening on (a daemon
        started then, a replay begun at midnight UTC in New York) knows that evening only: taken
        for the whole window it gave its morning from one other day, and its afternoon from none
        (`nyc-flights`' Sundays went 16 -> 32 -> 16 within the hour on such a plan)."""
        today = slot // self.slots
        first = slot - today * self.slots

        def row(day: int) -> np.ndarray | None:  # day's slots from today's `first` on, NaN unseen
            if day not in self.days:
                return None
            parts = [self.days.get(day + k, np.full(self.slots, np.nan)) for k in range(2 + count // self.slots)]
            return np.concatenate(parts)[first:first + count]

        found = np.full(count, np.nan)
        for back, need in ((RECENT, self.min_days), (WEEKLY, 1)):  # weekly last: where it saw a slot, it wins
            rows = [r for r in (row(today - k) for k in back) if r is not None]
            if rows:
                stacked = np.vstack(rows)
                known = (~np.isnan(stacked)).sum(axis=0) >= need
                found[known] = np.nanmax(stacked[:, known], axis=0)
        return None if np.isnan(found).all() else found

    def _expect(self, start: float, end: float, highest: bool = False, need: int | None = None) -> float | None:
        found = self._compared(int(start // DAY_S), lambda day: self._peak(day, start, end), need)
        if not found:
            return None
        return float(max(found) if highest else statistics.median(found))  # a few floats: no array

    def _compared(self, today: int, read: Callable[[int], T | None], need: int | None = None) -> list[T]:
        """`read` of the days today is compared with: the same weekday one and two weeks back if
        either is on record, else the last three days, once at least `need` (`min_days`) of them are."""
        weekly = [v for v in (read(today - k) for k in WEEKLY) if v is not None]
        if weekly:
            return weekly
        recent = [v for v in (read(today - k) for k in RECENT) if v is not None]
        return recent if len(recent) >= (self.min_days if need is None else need) else []

    def _peak(self, day: int, start: float, end: float) -> float | None:
        """Day `day`'s peak over the times of day of [start, end) (start's day standing for
        `day`; a window past midnight reads on into the next day); None if unseen."""
        row = self.days.get(day)
        if row is None:
            return None
        shift = (int(start // DAY_S) - day) * DAY_S
        first = int((start - shift) // self.slot_s) - day * self.slots
        last = max(first + 1, math.ceil((end - shift) / self.slot_s) - day * self.slots)
        values = row[first:last]
        if last > self.slots:
            following = self.days.get(day + 1)
            if following is not None:
                values = np.concatenate([values, following[: last - self.slots]])
        if not values.size or np.isnan(values).all():
            return None
        return float(np.nanmax(values))

    def _disagreement(self, now: float, need: int | None = None) -> str | None:
        """How the last hour's completed slots fell short of what the history said they would
        bring, or None when they did not (or there is nothing to compare). The slot now in
        progress is left out: today has seen only its first seconds, the days its whole peak,
        so a ramp due later in it would read as a broken day. Only a shortfall counts: a
        policy believes the days to scale up ahead of them and to hold a factor they would
        need again, and a busier day needs both as much. Counted both ways, a morning of
        `bank-calls` at 11,836/s where the days had 4,994/s dropped the plan, scaled 32 -> 16
        on the reactive rules and back to 32 within the hour, once the day agreed again. And
        today may come up to a slot later than the days: their last slot of the hour is left
        out of what they expected (a step 10 s before a slot's end read 566/s of 1,200/s there
        on the real job, run 108, where the days had it whole, and the plan went off)."""
        end = (now // self.slot_s) * self.slot_s
        start = end - TRUST_WINDOW_S
        actual = self._peak(int(start // DAY_S), start, end) if start >= 0 else None
        expected = self._expect(start, end - self.slot_s, need=need)
        if actual is None or expected is None:
            return None
        scale = max(actual, expected, self._typical())
        if expected - actual <= self.tolerance * scale:
            return None
        return (f"today broke the days' pattern: the last hour peaked at {actual:.0f}/s where they had "
                f"{expected:.0f}/s (a holiday, an outage?); believed again once the day agrees")

    def _typical(self) -> float:
        """A tenth of the highest peak on record: differences below it are noise at night."""
        highs = [float(np.nanmax(r)) for r in self.days.values() if not np.isnan(r).all()]
        return 0.1 * max(highs) if highs else 0.0
