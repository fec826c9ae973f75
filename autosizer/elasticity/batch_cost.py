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
from dataclasses import dataclass

READ_MEMORY = 0.9  # weight a batch's read keeps per batch after it
MIN_SPREAD = 0.2  # the records' coefficient of variation a line through the reads needs
SIGNIFICANT = 2.0  # standard errors a slope must stand above 0 to be believed


def batch_duty(deadline_s: float | None, overhead_s: float | None) -> float:
    """The share of a saturated job's time its tasks work: deadline / (deadline + a batch's fixed
    cost); 1 without batches or without a measure of either."""
    if deadline_s is None or overhead_s is None or not deadline_s > 0 or not overhead_s >= 0:
        return 1.0
    return deadline_s / (deadline_s + overhead_s)


@dataclass
class ReadCost:
    """What a slot's read of a batch costs: a part every batch pays whatever it reads (a
    GetShardIterator and a first GetRecords per Kinesis shard, a fetch's round trips) and a part
    per record. A line through recent batches' (records, seconds), weighted toward the newest.
    Where their sizes hardly differ (a steady backlog reads the same span every batch), or the
    reads scatter more than their records add, the line cannot be told from its points, and
    nothing is said: the whole read per record would have promised Kafka's factor 16 a fifth
    less than it did (its 0.06 s read at factor 1 is nearly all the fetch's fixed part; 0.13 s
    at 16). Kinesis on the emulator (`bench_kinesis.py factor`):
    0.27 s for 900 records a slot at F = 1, 1.22 s for 7,000 at F = 8, about 0.13 s fixed and
    0.16 ms a record."""

    weight: float = 0.0
    weight_sq: float = 0.0
    records: float = 0.0
    seconds: float = 0.0
    records_sq: float = 0.0
    seconds_sq: float = 0.0
    product: float = 0.0

    def observe(self, records: int, seconds: float) -> None:
        if records <= 0 or not math.isfinite(seconds) or seconds < 0:
            return
        keep = READ_MEMORY
        self.weight = keep * self.weight + 1
        self.weight_sq = keep * keep * self.weight_sq + 1
        self.records = keep * self.records + records
        self.seconds = keep * self.seconds + seconds
        self.records_sq = keep * self.records_sq + records * records
        self.seconds_sq = keep * self.seconds_sq + seconds * seconds
        self.product = keep * self.product + records * seconds

    def per_record(self) -> float | None:
        """Seconds a record adds to a read: the line's slope, or None where the batches cannot
        tell it (then a larger factor is promised what this one pays): their sizes too alike,
        or the slope within SIGNIFICANT standard errors of nothing (Kafka's reads at factor 1
        scatter by 0.01-0.02 s around 0.05 s, and a line through them and the backlog's last
        batch promised factor 64 0.86 of what it did). A line that starts below nothing is
        noise too: the slope is at most the whole read per record."""
        if not self.weight:
            return None
        w = self.weight
        mean_x, mean_y = self.records / w, self.seconds / w
        var_x = self.records_sq / w - mean_x**2
        if var_x <= (MIN_SPREAD * mean_x) ** 2:
            return None
        slope = (self.product / w - mean_x * mean_y) / var_x
        n = w * w / self.weight_sq  # the batches the weights amount to
        if n <= 2:
            return None
        residual = max(0.0, self.seconds_sq / w - mean_y**2 - slope * (self.product / w - mean_x * mean_y))
        error = math.sqrt(residual / (n - 2) / var_x)
        if slope <= SIGNIFICANT * error:
            return None
        return min(slope, mean_y / mean_x)


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
