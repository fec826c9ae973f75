"""The clock the controller, the actuators and the policies read, injectable so fault timing
(backoff, lease expiry, actuation timeouts) is tested by moving time, not by sleeping; and the
schedule a daemon's ticks are stamped by."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (what is journaled and compared across processes)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (timeouts, durations)."""
        ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ManualClock:
    """Time that moves only when told to (or when something sleeps on it)."""

    def __init__(self, start: float = 1_700_000_000.0):
        self.now = start

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        self.now += seconds


SYSTEM_CLOCK: Clock = SystemClock()


# How late a tick may start and still be stamped with its scheduled time (a quarter of the
# interval at most): the scheduler fires a few milliseconds late, a tick after a long actuation
# seconds late, and that one keeps the time it really ran.
ON_TIME_S = 1.0


@dataclass(frozen=True)
class TickSchedule:
    """When the daemon's ticks are due: `start` + k x `interval_s`, the grid the scheduler fires on.

    A tick is stamped with its due time, not the millisecond it began, so that a timer measured
    from one tick to another (the guards' scale-down delay, the peak memory's slices, the trend
    window) reads the whole intervals the simulator's ticks do. Stamped with the wall clock, the
    tick 20 s after the one that started a 20 s delay, a few milliseconds sooner into its own,
    read "wanted for 20s < 20s" and held a tick longer than the replay (run 163); which side a
    timer fell on was the scheduler's jitter. The due times are exact: `start` is kept to
    1/1024 s, so a whole-second interval added to it leaves no rounding in their differences."""

    start: float
    interval_s: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "start", round(self.start * 1024) / 1024)

    def stamp(self, now: float) -> float:
        """The due time of the tick that began at `now`, if it began on time; else `now`."""
        due = self.start + round((now - self.start) / self.interval_s) * self.interval_s
        return due if abs(now - due) <= min(ON_TIME_S, self.interval_s / 4) else now
