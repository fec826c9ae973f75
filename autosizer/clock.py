"""The clock the controller, the actuators and the policies read, injectable so fault timing
(backoff, lease expiry, actuation timeouts) is tested by moving time, not by sleeping."""

from __future__ import annotations

import time
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
