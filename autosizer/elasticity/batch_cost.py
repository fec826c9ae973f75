"""A micro-batch's fixed cost, and the share of a saturated job's time it leaves the tasks (the
duty), at the running factor and at any other.

A saturated batch works its deadline and pays a fixed cost besides: the trigger and Spark's
planning, the tasks' start, the commit, and the read of the records it takes. All of it but the
read is the same at any factor. The read grows with the records a batch takes, and at saturation
those grow with the factor: a partition's span is `run_ahead` batches of its tasks' rates, F
tasks' worth. On Kafka the read is small (0.11 s of a 3.31 s cycle at F = 8); on Kinesis it is
not (1.22 s of 4.58 s on the emulator; on AWS a shard serves 2 MB/s), so a duty measured at
factor 1 promised factor 8 a capacity it did not have.

Pure: the pipeline's admission, the daemon's evaluator and the simulator's job share it.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

READ_MEMORY = 0.9  # weight a batch's read keeps per batch after it
READ_WINDOW = 32  # the reads a line is drawn through (the oldest weighs 0.9^31 = 0.04)
MIN_SPREAD = 0.2  # the records' coefficient of variation a line through the reads needs
SIGNIFICANT = 2.0  # standard errors a slope must stand above 0 to be believed
BIG_PAGE = 4  # a page this many times the typical one's records shows what a record costs


def batch_duty(deadline_s: float | None, overhead_s: float | None) -> float:
    """The share of a saturated job's time its tasks work: deadline / (deadline + a batch's fixed
    cost); 1 without batches or without a measure of either."""
    if deadline_s is None or overhead_s is None or not deadline_s > 0 or not overhead_s >= 0:
        return 1.0
    return deadline_s / (deadline_s + overhead_s)


@dataclass(frozen=True)
class _Line:
    """A weighted least-squares line through (records, seconds): its slope, and whether the
    points tell it (sizes spread enough, the slope SIGNIFICANT standard errors above flat)."""

    slope: float
    told: bool


def _fit_line(points: Sequence[tuple[float, float, float]]) -> _Line:
    """The line through (records, seconds, weight) points."""
    w = sum(weight for _, _, weight in points)
    if not w:
        return _Line(0.0, False)
    mean_x = sum(x * weight for x, _, weight in points) / w
    mean_y = sum(y * weight for _, y, weight in points) / w
    var_x = sum(weight * (x - mean_x) ** 2 for x, _, weight in points) / w
    if var_x <= (MIN_SPREAD * mean_x) ** 2:
        return _Line(0.0, False)
    slope = sum(weight * (x - mean_x) * (y - mean_y) for x, y, weight in points) / w / var_x
    n = w * w / sum(weight * weight for _, _, weight in points)  # the batches the weights amount to
    if n <= 2:
        return _Line(slope, False)
    residual = sum(weight * (y - mean_y - slope * (x - mean_x)) ** 2 for x, y, weight in points) / w
    return _Line(slope, slope > SIGNIFICANT * math.sqrt(residual / (n - 2) / var_x))


@dataclass
class ReadCost:
    """What a slot's read of a batch costs: a part every batch pays whatever it reads (a
    GetShardIterator and a first GetRecords per Kinesis shard, a fetch's round trips) and a part
    per record. A line through recent batches' (records, seconds), weighted toward the newest
    (the pipeline's saturated batches', which read at one load on the endpoint: session 91).
    Where their sizes hardly differ (a steady backlog reads the same span every batch), or the
    reads scatter more than their records add, the line cannot be told from its points, and
    nothing is said: the whole read per record would have promised Kafka's factor 16 a fifth
    less than it did (its 0.06 s read at factor 1 is nearly all the fetch's fixed part; 0.13 s
    at 16). Nor is a line one batch draws: a Kinesis job that kept up, then fell behind, read
    200-650 records in 0.16-0.43 s and then 873 in 2.67 s, its read waiting while the emulator
    took the backlog's 5,928 writes; that batch alone drew a slope that promised factor 8 0.61
    of what it did (`bench_kinesis.py rise`). Kinesis on the emulator (`bench_kinesis.py
    factor`): 0.27 s for 900 records a slot at F = 1, 1.22 s for 7,000 at F = 8."""

    reads: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=READ_WINDOW))
    # `per_record` as the reads last told it: a line and one more for each read left out, about
    # 1 ms, which the pipeline's gauges and duty read several times a batch
    _told: tuple[float | None] | None = field(default=None, init=False, repr=False, compare=False)

    def observe(self, records: int, seconds: float) -> None:
        if records > 0 and math.isfinite(seconds) and seconds >= 0:
            self.reads.append((records, seconds))
            self._told = None

    def _points(self) -> list[tuple[float, float, float]]:
        newest = len(self.reads) - 1
        return [(x, y, READ_MEMORY ** (newest - i)) for i, (x, y) in enumerate(self.reads)]

    def per_record(self) -> float | None:
        """Seconds a record adds to a read: the line's slope, or None where the batches cannot
        tell it (then a larger factor is promised what this one pays): their sizes too alike,
        the slope within SIGNIFICANT standard errors of nothing (Kafka's reads at factor 1
        scatter by 0.01-0.02 s around 0.05 s, and a line through them and the backlog's last
        batch promised factor 64 0.86 of what it did), or the line gone without any one batch.
        Otherwise the least slope a batch's absence leaves, at most the whole read per record
        (a line that starts below nothing is noise too)."""
        if self._told is None:
            self._told = (self._per_record(),)
        return self._told[0]

    def _per_record(self) -> float | None:
        points = self._points()
        whole = _fit_line(points)
        if not whole.told:
            return None
        slopes = [whole.slope]
        for i in range(len(points)):
            line = _fit_line(points[:i] + points[i + 1:])
            if not line.told:
                return None
            slopes.append(line.slope)
        return min(*slopes, self.whole_per_record())

    def whole_per_record(self) -> float:
        """The recent reads' seconds over their records (weighted): a read's fixed part and all."""
        points = self._points()
        records = sum(x * weight for x, _, weight in points)
        return sum(y * weight for _, y, weight in points) / records if records else 0.0


@dataclass
class PageCost:
    """What a record costs an endpoint to serve, at least, from the pages a reader on the side
    takes (the driver's Kinesis tails): beyond the call's own time (its quickest small page),
    the least any big page (BIG_PAGE times the typical one's records or more) cost a record.
    Not a line: an endpoint busy elsewhere only makes a page dearer, and a line through such
    pages says what the endpoint's queue cost. The emulator serves one call at a time, and
    while it took a burst's 5,928 writes a tail's pages of 240-790 records took 0.13-0.78 s,
    then 488 took 0.034 s (`bench_kinesis.py rise`)."""

    small: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=READ_WINDOW))
    big: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=READ_WINDOW))

    def observe(self, records: int, seconds: float) -> None:
        """A page read; pages big against the typical one of the last READ_WINDOW move aside,
        so a backlog's first pages count once the pages after them show what small is."""
        if records <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        self.small.append((records, seconds))
        big = BIG_PAGE * statistics.median(r for r, _ in self.small)
        if any(r >= big for r, _ in self.small):
            pages = list(self.small)
            self.big.extend(p for p in pages if p[0] >= big)
            self.small = deque((p for p in pages if p[0] < big), maxlen=READ_WINDOW)

    def per_record(self) -> float | None:
        """Seconds a record adds to a page at least, or None before a small page and a big one
        whose records took at least the call's own time: less is within a call's own scatter
        (keeping up, a tail's pages of 38-65 records took 0.007-0.013 s), and a page of 40
        records among pages of 10 would say a call's noise over 40 was a record's cost."""
        if not self.small or not self.big:
            return None
        call = min(seconds for _, seconds in self.small)
        told = [(seconds - call) / records for records, seconds in self.big if seconds - call >= call]
        return min(told) if told else None


class CostDrift:
    """How far a batch's part that is neither its tasks' work nor its read (planning, a slot's
    setup, the commit) has moved since saturated cycles last measured the fixed cost. That part
    does not grow with a batch's fill, so every warm batch measures it, and it falls as a fresh
    pipeline warms up by as much as the cycles' cost does: between cycles the cost moves with it
    (session 81; the figures are `Admission.overhead_s`'s). At a factor no cycle measured (a
    scale-up the job then keeps up at) the part's level holds more tasks' setup, so only its moves
    there count, from the mean of its first `base_batches` there; its level is what `elsewhere`
    tells, for a cost built at that factor from its parts (`Admission.overhead_s`)."""

    def __init__(self, weight: float, base_batches: int = 4):
        self.weight, self.base_batches = weight, base_batches
        self.cycle: float | None = None  # the part, as the cycles measured it (smoothed)
        self._now: float | None = None  # the part, smoothed over warm batches at `_at`
        self._at: int | None = None  # the factor it follows
        self._base: float | None = None  # where it started there
        self._carried = 0.0  # how far it moved at factors before, since the last cycle
        self._settling: tuple[int, list[float]] | None = None  # a new factor's first figures

    def measured(self, seconds: float, factor: int | None, changed: bool) -> None:
        """A saturated cycle at `factor` (a factor other than the last cycles' if `changed`)
        spent `seconds` on the part: the cost is measured again, nothing carried."""
        self.cycle = self._smooth(None if changed else self.cycle, seconds)
        if changed or self._now is None or self._at != factor:
            self._now = self.cycle
        self._at, self._base, self._carried, self._settling = factor, self.cycle, 0.0, None

    def observe(self, seconds: float, factor: int) -> None:
        """A warm batch with records at `factor` spent `seconds` on the part."""
        if seconds < 0 or self.cycle is None:
            return
        if factor == self._at:
            self._now = self._smooth(self._now, seconds)
            return
        if self._settling is None or self._settling[0] != factor:
            self._settling = (factor, [])
        firsts = self._settling[1]
        firsts.append(seconds)
        if len(firsts) >= self.base_batches:
            self._carried += self._moved()
            self._now = self._base = statistics.fmean(firsts)
            self._at, self._settling = factor, None

    def elsewhere(self, cycled: int | None) -> tuple[int, float] | None:
        """The factor the part now follows and its level there, where that is not `cycled`, the
        factor the cycles measured (None there, or before a new factor's first `base_batches`)."""
        if self._at is None or self._now is None or cycled is None or self._at == cycled:
            return None
        return self._at, self._now

    def applied(self, cost_s: float, floor_s: float) -> float:
        """The cycles' `cost_s`, moved as the part moved since; never below what of it is not
        the part (the read, the gap after a commit), nor below `floor_s`."""
        if self.cycle is None:
            return cost_s
        return max(cost_s - self.cycle, floor_s, cost_s + self._carried + self._moved())

    def _moved(self) -> float:
        return 0.0 if self._now is None or self._base is None else self._now - self._base

    def _smooth(self, old: float | None, new: float) -> float:
        return new if old is None else old + self.weight * (new - old)


def overhead_at(overhead_s: float, read_s: float | None, running: int, factor: int) -> float:
    """The fixed cost at `factor` of batches that cost `overhead_s` at the `running` factor,
    `read_s` of it reading (at most all of it): the read scales with the factor, the rest
    stays. An unknown or unusable read scales nothing."""
    if read_s is None or not math.isfinite(read_s) or read_s <= 0 or running <= 0:
        return overhead_s
    read = min(read_s, overhead_s)
    return overhead_s - read + read * factor / running


def duty_at(deadline_s: float | None, overhead_s: float | None, read_s: float | None,
            running: int, factor: int) -> float:
    """`batch_duty` at `factor`, from a cost measured at the `running` one (`overhead_at`)."""
    if overhead_s is None or not overhead_s >= 0:
        return batch_duty(deadline_s, overhead_s)
    return batch_duty(deadline_s, overhead_at(overhead_s, read_s, running, factor))
