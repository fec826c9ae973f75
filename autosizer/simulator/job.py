"""The simulated job: partitions, key skew, per-record work and the cluster it runs on.

Keys are spread over partitions and key lanes with the pipeline's own `key_hashes`, so the
imbalance a simulated factor sees is the one the real job would see. Each partition is modelled
as two queues: its busiest thread (an even share, or its busiest key lane when that is more), and
the other F − 1 threads sharing the rest evenly. That is enough to show a hot key (one queue that
no factor splits) without a queue per task.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

import numpy as np

from autosizer.checks import is_real
from autosizer.elasticity import FACTORS, MAX_FACTOR, validate_factor
from autosizer.elasticity.batch_cost import batch_duty
from autosizer.elasticity.buckets import key_hashes
from autosizer.elasticity.lanes import busiest_worker_shares
from autosizer.policies.history import time_zone


def _check_types(settings: object, what: str) -> None:
    """Each numeric field holds a number of its kind, before any range is compared: a trace
    file's `partitions = "4"` or `4.5` or `cores = true` is one line naming the setting, not a
    comparison error from inside the check or a TypeError deep in the run."""
    for item in fields(settings):  # annotations are text here (`from __future__ import annotations`)
        value, wanted = getattr(settings, item.name), item.type
        if wanted == "int":
            ok, kind = isinstance(value, numbers.Integral) and not isinstance(value, bool), "a whole number"
        elif wanted in ("float", "float | None"):
            ok = is_real(value) or (value is None and wanted == "float | None")
            kind = "a number"
        else:
            continue
        if not ok:
            raise ValueError(f"{what} {item.name} needs {kind}, not {value!r}")


# What the simulator models at most: it hashes every key of every partition (`JobModel._keys`),
# 2 million keys in about 3 s and 370 MB (1,000 partitions of 2,000), and a run's cost grows with the partitions beside.
MAX_PARTITIONS = 10_000
MAX_KEYS = 2_000_000


@dataclass(frozen=True)
class KeySkew:
    """How keys are distributed: `zipf` 0 is uniform; `hot_key_share` puts one key in front."""

    keys: int = 2000
    zipf: float = 0.0
    hot_key_share: float = 0.0  # of its partition's traffic
    hot_partition: int = 0

    def __post_init__(self) -> None:
        _check_types(self, "job skew setting")
        if self.keys < 1:
            raise ValueError(f"keys must be >= 1, not {self.keys!r}")
        if self.zipf < 0:
            raise ValueError(f"zipf must be >= 0, not {self.zipf!r}")
        if not 0 <= self.hot_key_share < 1:
            raise ValueError(f"hot_key_share must be in [0, 1), not {self.hot_key_share!r}")


@dataclass(frozen=True)
class JobModel:
    partitions: int = 64
    process_seconds: float = 0.01  # mean time one record takes
    process_cv: float = 1.0  # its coefficient of variation (1 = exponential)
    cpu_fraction: float = 0.0  # share of that time on a CPU: 0 is I/O-bound work
    cores: int = 16  # cores of the job's executors; only matters when cpu_fraction > 0
    restart_downtime_s: float = 5.0
    # Each restart a fitted run measured (the pipeline's restart gauge), in order: the k-th
    # rescale stops processing for the k-th, and past the last they come round again, as the
    # load is replayed as the run saw it. A restart varies more than any other cost: run 124's
    # were 0.42, 1.30 and 0.32 s, and with the median for each its replay's lag peak read 0.71 of
    # the real one, with each as measured 0.94. Empty: `restart_downtime_s` every time.
    restarts_measured_s: tuple[float, ...] = ()
    # How old the input and backlog a tick reads are: the pipeline's probe reads the watermarks
    # and lag, Prometheus scrapes them later, and the daemon's query gets the last scrape.
    # 0: read as it happens.
    metrics_age_s: float = 0.0
    # Prometheus' scrape interval. A gauge set at a commit (a batch's fixed cost) is half an
    # interval old on the median. With `input_over_scrapes`, `rate()` over the daemon's window
    # averages the samples inside it, which span one interval less than the window, and scales
    # that mean to the window's edges: a tick reads the input over window - interval (runs 83-88
    # read closest to the real ticks that way). 0: none of that (the trace suite's reading).
    scrape_interval_s: float = 0.0
    # How the daemon reads the input rate. Since session 51: the watermark's growth between the
    # probe's reads a window apart, over the time between them, the whole window (False). Before:
    # Prometheus' `rate()`, over the window less `scrape_interval_s` (True: replays of runs saved
    # then, and a daemon configured with a `rate()` query of its own).
    input_over_scrapes: bool = False
    # For runs of pipelines before session 48 only: how long before the scrape the probe read the
    # high watermark that their backlog gauge (`lag_records`) subtracted the positions at the
    # scrape from, so the commits in between came off it (runs 87-91). Today's gauge subtracts the
    # positions the probe took with the watermark (one moment, as the lag in seconds is): 0.
    lag_probe_age_s: float = 0.0
    # After a scale-down the actuator watches the lag this long before it calls the rescale done
    # (and rolls back a layout that falls behind): the daemon ticks again only after it. The
    # shipped actuator's `verify_window_s`; run 82's 8 -> 1 kept the daemon 30.8 s.
    verify_window_s: float = 30.0
    partition_limit: float = math.inf  # records/s one partition can be read at
    tasks_per_slot: int = 8  # virtual tasks (threads) per executor slot, for the slot cost
    start_factor: int = 1
    skew: KeySkew = field(default_factory=KeySkew)
    # The pipeline's micro-batches (0 batch_seconds: a continuous, fluid job). Defaults are the
    # pipeline's own: a 3 s deadline, run-ahead 1.5, a 1 s trigger, and the fixed cost a batch
    # measured on this project's 2-core machine (`autosizer simulate fit` measures a real one).
    batch_seconds: float = 3.0
    batch_overhead_s: float = 0.6
    batch_overhead_per_task_s: float = 0.0  # more tasks, more to launch and commit per batch
    # A batch's trigger to its commit beyond its work: what a record waits at low load. The
    # overhead above also holds what follows the commit. None: the overhead.
    commit_latency_s: float | None = None
    # How long after its trigger a batch's records are cut: 0 on Kafka (the trigger plans the end
    # offsets); a Kinesis slot takes what its shards hold when it reads (the pipeline's
    # `read_boundary_seconds`), so a record that came after the trigger may make the batch.
    read_boundary_s: float = 0.0
    # Of the fixed cost, what follows a commit before the next trigger (the pipeline's
    # `batch_gap_seconds`, measured with batches back to back). Given, the rest comes before the
    # commit and grows with what a batch reads: from `commit_latency_s` for an empty read to the
    # fixed cost less this for a full one (`run_ahead` batches of the capacity), so a batch far
    # from full commits and starts its successor sooner. None: every batch pays the whole cost.
    batch_gap_s: float | None = None
    # Seconds a batch's commit waits for each record it read, over all its partitions (accepting
    # and hashing them in its slots, cutting lanes, writing and committing the outputs), where the
    # pipeline exported each batch's records (`batch_read_records`, since session 83): the wait is then
    # `commit_latency_s` (an empty read's) plus this for each record, at any factor. The demo
    # waited 0.02-0.08 s longer in its step's high phase than after it at the same factor and
    # fill, and up to 0.04 s longer in 10 s bursts than between them (run b1: 26 us a record),
    # which the line in the fill above missed (b1's burst batches read 0.90 of it). None: that line.
    commit_per_record_s: float | None = None
    # A fresh pipeline's batches wait longer for their commit at first, its JVM and Python workers
    # warming up (the demo's light batches: 0.19-0.30 s in their first 10 s, 0.14-0.17 s after a
    # minute): this much more at the run's second 0, fading by e every `commit_warmup_tau_s`. The
    # daemon's stand-in for a batch's cost reads it too. 0: a job that has run long.
    commit_warmup_s: float = 0.0
    commit_warmup_tau_s: float = 30.0
    trigger_s: float = 1.0
    run_ahead: float = 1.5
    # Measured instead of modelled (`autosizer fit` writes them): each partition's share of the
    # input, and per partition and factor in FACTORS the busiest bucket's share of it.
    partition_weights: tuple[float, ...] = ()
    hot_share_table_measured: tuple[tuple[float, ...], ...] = ()
    # Per partition: whether the pipeline had measured its hot shares when the run began (a
    # batch had read MIN_SHARE_READ of its records). Empty: known wherever the run had input
    # before its start (the job runs before second 0).
    hot_shares_known_at_start: tuple[bool, ...] = ()
    # Where the run's partitions changed (a Kinesis re-shard, a Kafka expansion): from each second
    # of `layout_changes_s` on (from the run's start), each partition's share of the input is that
    # row of `layout_weights`, 0 for a partition not in the layout then; `partition_weights` is
    # the layout the run began with. A job that kept its partitions has none. Without them a
    # fitted re-shard read as every shard at once: the Kinesis demo's split and merge as 5
    # partitions where 2 or 3 were read, twice the capacity at factor 1 (`autosizer fit`).
    layout_changes_s: tuple[float, ...] = ()
    layout_weights: tuple[tuple[float, ...], ...] = ()
    # Per change (empty: 0 and false for each): how long before it the change's new partitions
    # took input that nobody read, and whether adopting it restarted the query. A Kafka
    # expansion is both: producers move keys to the new partitions at once, the daemon adopts
    # them `adopt_after_s` later through its actuator (drain, migrate, restart), and the records
    # they took meanwhile wait whole (the demo's run e1: 25 s of half the input, lag peak 28 s; a
    # replay that read them at once peaked at 10 s). The wait's input counts under each new
    # partition's parent, as the pipeline counts it; only a growth (every partition before keeps a
    # share) can wait. A Kinesis re-shard is neither: its children are read in the running query.
    layout_waits_s: tuple[float, ...] = ()
    layout_restarts: tuple[bool, ...] = ()
    # Per change (empty: 0 for each): the second the partitions it retires took their last record,
    # where it retires some and brings others (a Kinesis split or merge closes its parents; the
    # layout reads the children once the parents are read to their end, which can be some seconds
    # later). The children are not processed before their parents are (seed 003): the parents
    # read nothing past the input at this second, the children read none of their own records
    # before the change, and they continue the parents' queue at the parents' pace up to that
    # input, at their own after. Without it the parents read their children's records as they
    # came, and the children took the parents' backlog at their own pace, twice the parent's
    # after a split: run u4's replay peaked at 0.65 of the real lag (u3's children, read 20 s
    # after the split, were 21.7 s old by then). 0: the children start from the layout's slowest
    # queue, at once.
    layout_closed_s: tuple[float, ...] = ()
    # Per change, a row per partition (empty: each new partition's share in the layout it joins):
    # a re-shard's new partitions' shares of the topic's input from their parents' closing to the
    # change, the records they took while they waited unread. A child's share there can differ
    # from its share after: run v5's split child closed by a merge before it was read held 1,085
    # records (15% of the input while it waited) and took 2.2% of the input after, and a replay
    # that gave it 2.2% throughout counted 150. 0 elsewhere.
    layout_waiting_weights: tuple[tuple[float, ...], ...] = ()
    # Per change, a row per partition (empty: false for each): the new partitions of an adopted
    # expansion whose parents had already processed past the barrier when the query restarted,
    # which the pipeline's first batch read. The barrier is the parents' end offsets at the probe
    # before the daemon's decision, and the last batch before the drain may or may not have passed
    # them, parent by parent: runs e6 and e7 restarted with every new partition held (a first
    # batch of 0.6 s, the parents' alone), e8 and e9 with none (3.4 s, all of them), e11 with one
    # of four. False: it waits until its parent (partition p % n of the n kept) passed the barrier.
    layout_barrier_passed: tuple[tuple[bool, ...], ...] = ()
    # The daemon's `adopt_after_s`: a growth's new partitions are read behind their parents
    # (`coupling`) until this long after they took their first records, then freely; where the
    # adoption came later (a run before session 87, or an operator's `layout expand --apply`,
    # which this cannot tell from one), behind the barrier at the adoption as before.
    adopt_after_s: float = 300.0
    # Whether the pipeline had measured a batch's fixed cost when the run began: it does so only
    # from a batch that left records it read (overran its deadline, or was cut at work by a
    # drain) and followed a saturated one, and until then the daemon reads the commit
    # latency for it (duty 1 before session 49, or without one). A job that has run long has; a
    # fitted run says (the demo's learned it at their step or first rescale).
    overhead_known_at_start: bool = True
    # The fixed cost the pipeline showed when the run began, where it was not the one the job
    # pays (None: the same). A query's second batch still warms up, and at a load that leaves no
    # later batch saturated nothing measures the cost again: run 124 showed 0.59 s until its first
    # rescale where its batches paid 0.30 s (`autosizer fit` takes the gauge's first value; the
    # pipeline skips that batch since session 46). The daemon's duty reads it until the run
    # measures its own.
    overhead_shown_at_start_s: float | None = None
    # Whether the daemon sees the per-task part of the cost as the batches' read that grows with
    # the factor: the real pipeline exports it (`batch_read_seconds`) only where its reads show a
    # slope that stands out, and the real daemon scales nothing otherwise. A fitted run says.
    read_growth_shown: bool = False
    # The rescales the real job made before its pipeline showed that read: at one factor its
    # reads cannot tell the read's fixed part from its records' (a Kinesis slot reads 200 records
    # in the time it reads 870) until a rescale in the driver gives reads of two sizes (session 55,
    # `bench_kinesis.py rise`) or, on Kinesis, its tails read a burst in big pages (session 56).
    # The replay's daemon sees it after as many rescales of its own.
    read_growth_after: int = 0
    # The job's time zone (the daemon's `[job] timezone`): the days its history learns begin at
    # its midnight, so a daily pattern keeps its hour across a daylight-saving change.
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        _check_types(self, "job setting")
        ranges = {  # setting: (within range, the range in words)
            "partitions": (1 <= self.partitions <= MAX_PARTITIONS, f"from 1 to {MAX_PARTITIONS:,}"),
            "process_seconds": (self.process_seconds > 0, "above 0"),
            "process_cv": (self.process_cv >= 0, "0 or more"),
            "cpu_fraction": (0 <= self.cpu_fraction <= 1, "from 0 to 1"),
            "cores": (self.cores >= 1, "1 or more"),
            "restart_downtime_s": (self.restart_downtime_s >= 0, "0 or more"),
            "read_growth_after": (self.read_growth_after >= 0, "0 or more"),
            "metrics_age_s": (self.metrics_age_s >= 0, "0 or more"),
            "scrape_interval_s": (self.scrape_interval_s >= 0, "0 or more"),
            "lag_probe_age_s": (self.lag_probe_age_s >= 0, "0 or more"),
            "verify_window_s": (self.verify_window_s >= 0, "0 or more"),
            "adopt_after_s": (0 <= self.adopt_after_s <= 86400, "from 0 to 86400"),
            "partition_limit": (self.partition_limit > 0, "above 0 (inf: no limit)"),
            "tasks_per_slot": (self.tasks_per_slot >= 1, "1 or more"),
            "batch_seconds": (self.batch_seconds >= 0, "0 or more"),
            "batch_overhead_s": (self.batch_overhead_s >= 0, "0 or more"),
            "batch_overhead_per_task_s": (self.batch_overhead_per_task_s >= 0, "0 or more"),
            "commit_latency_s": (self.commit_latency_s is None or self.commit_latency_s >= 0, "0 or more"),
            "read_boundary_s": (self.read_boundary_s >= 0, "0 or more"),
            "commit_per_record_s": (self.commit_per_record_s is None or self.commit_per_record_s >= 0, "0 or more"),
            "batch_gap_s": (self.batch_gap_s is None or 0 <= self.batch_gap_s <= self.batch_overhead_s,
                            f"from 0 to batch_overhead_s ({self.batch_overhead_s:g}), a part of the fixed cost"),
            "overhead_shown_at_start_s": (self.overhead_shown_at_start_s is None
                                          or self.overhead_shown_at_start_s >= 0, "0 or more"),
            "commit_warmup_s": (self.commit_warmup_s >= 0, "0 or more"),
            "commit_warmup_tau_s": (self.commit_warmup_tau_s > 0, "above 0"),
            "trigger_s": (self.trigger_s > 0, "above 0"),
            "run_ahead": (self.run_ahead >= 1, "1 or more"),
        }
        for name, (ok, words) in ranges.items():
            value = getattr(self, name)
            if not ok or value is not None and not math.isfinite(float(value)) and name != "partition_limit":
                raise ValueError(f"job setting {name} must be {words}, not {value!r}")
        hashed = not (self.partition_weights and self.hot_share_table_measured)  # else measured, not drawn
        if hashed and self.skew.keys * self.partitions > MAX_KEYS:
            raise ValueError(
                f"job setting skew.keys ({self.skew.keys:,} a partition) over {self.partitions:,} partitions is "
                f"{self.skew.keys * self.partitions:,} keys, and the simulator hashes every one: at most "
                f"{MAX_KEYS:,}, so keys = {MAX_KEYS // self.partitions:,} or fewer (with more keys than that "
                "each key's share is small; model one that is not with hot_key_share)")
        validate_factor(self.start_factor)
        time_zone(self.timezone, "job setting timezone")
        weights, table = self.partition_weights, self.hot_share_table_measured
        if weights and (len(weights) != self.partitions or not all(
                math.isfinite(w) and w >= 0 for w in weights) or not sum(weights) > 0):
            raise ValueError(f"job setting partition_weights needs {self.partitions} finite shares "
                             f">= 0 with a positive sum, not {weights!r}")
        if table and (len(table) != self.partitions or any(
                len(row) != len(FACTORS) or not all(math.isfinite(v) and 0 < v <= 1 for v in row)
                for row in table)):
            raise ValueError(f"job setting hot_share_table_measured needs {self.partitions} rows of "
                             f"{len(FACTORS)} shares in (0, 1], one per factor 1..1024")
        if not isinstance(self.overhead_known_at_start, bool):
            raise ValueError(f"job setting overhead_known_at_start needs true or false, not "
                             f"{self.overhead_known_at_start!r}")
        restarts = self.restarts_measured_s
        if restarts and not all(is_real(r) and math.isfinite(r) and r >= 0 for r in restarts):
            raise ValueError(f"job setting restarts_measured_s needs finite seconds >= 0, not {restarts!r}")
        self._check_layouts()
        known = self.hot_shares_known_at_start
        if known and (len(known) != self.partitions or not all(isinstance(k, bool) for k in known)):
            raise ValueError(f"job setting hot_shares_known_at_start needs {self.partitions} booleans "
                             f"(true or false, one a partition), not {known!r}")

    def _check_layouts(self) -> None:
        times, rows = self.layout_changes_s, self.layout_weights
        if not times and not rows:
            return
        if len(times) != len(rows) or not self.partition_weights:
            raise ValueError(f"job setting layout_changes_s ({len(times)}) needs as many rows of layout_weights "
                             f"({len(rows)}), and partition_weights for the layout the run began with")
        if not all(is_real(t) and math.isfinite(t) and t > 0 for t in times) or list(times) != sorted(set(times)):
            raise ValueError(f"job setting layout_changes_s needs rising seconds > 0, not {times!r}")
        for row in rows:
            if len(row) != self.partitions or not all(is_real(w) and math.isfinite(w) and w >= 0 for w in row) \
                    or not sum(row) > 0:
                raise ValueError(f"job setting layout_weights needs rows of {self.partitions} finite shares >= 0 "
                                 f"with a positive sum (0: not in the layout then), not {row!r}")
        waits, restarts = self.layout_waits_s, self.layout_restarts
        if waits and (len(waits) != len(times) or not all(is_real(w) and math.isfinite(w) and w >= 0 for w in waits)):
            raise ValueError(f"job setting layout_waits_s needs one finite wait >= 0 in seconds per layout change "
                             f"({len(times)}), not {waits!r}")
        if restarts and (len(restarts) != len(times) or not all(isinstance(r, bool) for r in restarts)):
            raise ValueError(f"job setting layout_restarts needs one boolean (true or false) per layout change "
                             f"({len(times)}), not {restarts!r}")
        self._check_closings()
        self._check_waiting()
        self._check_barriers()
        before = (0.0, self.partition_weights)
        for at, weights, wait in zip(times, rows, waits or [0.0] * len(times), strict=True):
            if wait and at - wait < before[0]:
                raise ValueError(f"job setting layout_waits_s: the change at {at:g} s cannot wait {wait:g} s, from "
                                 f"before the layout it follows (from {before[0]:g} s)")
            if wait and any(w > 0 and not n > 0 for w, n in zip(before[1], weights, strict=True)):
                raise ValueError(f"job setting layout_waits_s: the change at {at:g} s takes partitions away, and "
                                 f"only a growth (every partition keeps a share) can wait: set its wait to 0")
            before = (at, weights)

    def _check_closings(self) -> None:
        closed, times = self.layout_closed_s, self.layout_changes_s
        if not closed:
            return
        if len(closed) != len(times) or not all(is_real(c) and math.isfinite(c) and c >= 0 for c in closed):
            raise ValueError(f"job setting layout_closed_s needs one finite second >= 0 per layout change "
                             f"({len(times)}; 0: none), not {closed!r}")
        layouts = self.layouts()
        for (_, before), (at, after), close in zip(layouts[:-1], layouts[1:], closed, strict=True):
            if not close:
                continue
            if not close <= at:
                raise ValueError(f"job setting layout_closed_s: the change at {at:g} s retires partitions closed "
                                 f"at {close:g} s, which must lie from 0 s to {at:g} s")
            pairs = list(zip(before, after, strict=True))
            if not (any(b > 0 and not a > 0 for b, a in pairs) and any(a > 0 and not b > 0 for b, a in pairs)):
                raise ValueError(f"job setting layout_closed_s: the change at {at:g} s does not retire partitions "
                                 f"for others (a re-shard): set its closing to 0")

    def _check_waiting(self) -> None:
        rows, times = self.layout_waiting_weights, self.layout_changes_s
        if not rows:
            return
        if len(rows) != len(times) or not all(
                isinstance(row, tuple) and len(row) == self.partitions
                and all(is_real(w) and math.isfinite(w) and w >= 0 for w in row) for row in rows):
            raise ValueError(f"job setting layout_waiting_weights needs a row of {self.partitions} finite shares "
                             f">= 0 per layout change ({len(times)}), not {rows!r}")
        closed = self.layout_closed_s or (0.0,) * len(times)
        for (_, before), (at, after), row, close in zip(self.layouts()[:-1], self.layouts()[1:], rows, closed,
                                                        strict=True):
            if any(w > 0 and not (close and a > 0 and not b > 0) for w, b, a in zip(row, before, after, strict=True)):
                raise ValueError(f"job setting layout_waiting_weights: the change at {at:g} s gives a share to a "
                                 f"partition that did not wait for it: only the new partitions of a re-shard with "
                                 f"a layout_closed_s waited; set the others to 0")

    def _check_barriers(self) -> None:
        passed, times = self.layout_barrier_passed, self.layout_changes_s
        if not passed:
            return
        if len(passed) != len(times) or not all(isinstance(row, tuple) and len(row) == self.partitions
                                                and all(isinstance(p, bool) for p in row) for row in passed):
            raise ValueError(f"job setting layout_barrier_passed needs a row of {self.partitions} booleans (true or "
                             f"false, one a partition) per layout change ({len(times)}), not {passed!r}")
        restarts = self.layout_restarts or (False,) * len(times)
        for (_, before), (at, after), row, restart in zip(self.layouts()[:-1], self.layouts()[1:], passed,
                                                          restarts, strict=True):
            growth = all(a > 0 for b, a in zip(before, after, strict=True) if b > 0)
            if any(row) and not (growth and restart):
                raise ValueError(f"job setting layout_barrier_passed: the change at {at:g} s is not an expansion "
                                 f"adopted by a restart (a growth with layout_restarts true): set its row to false")
            if any(p and not (a > 0 and not b > 0) for p, b, a in zip(row, before, after, strict=True)):
                raise ValueError(f"job setting layout_barrier_passed: the change at {at:g} s marks a partition it "
                                 f"does not bring: only its new partitions can pass its barrier")

    def layouts(self) -> list[tuple[float, tuple[float, ...]]]:
        """(from second, each partition's share) for every layout of the run, the first from 0."""
        return [(0.0, self.partition_weights), *zip(self.layout_changes_s, self.layout_weights, strict=True)]

    def layout_adoptions(self) -> list[tuple[float, tuple[float, ...], float, bool, float, tuple[bool, ...],
                                             tuple[float, ...]]]:
        """Each layout change as (second, shares, wait before it, restarts, its parents' closing,
        the new partitions past its barrier at the restart, its new partitions' shares while they
        waited: empty where not known)."""
        count = len(self.layout_changes_s)
        return list(zip(self.layout_changes_s, self.layout_weights, self.layout_waits_s or (0.0,) * count,
                        self.layout_restarts or (False,) * count, self.layout_closed_s or (0.0,) * count,
                        self.layout_barrier_passed or ((False,) * self.partitions,) * count,
                        self.layout_waiting_weights or ((),) * count, strict=True))

    def in_layout(self, weights: tuple[float, ...]) -> tuple[JobModel, np.ndarray]:
        """This job on the partitions `weights` gives a share to, and their indexes here: what
        one layout of a run whose partitions changed reads (tasks, batch cost and CPU count only
        its partitions)."""
        members = np.flatnonzero(np.asarray(weights, dtype=np.float64) > 0)

        def pick(values: tuple) -> tuple:
            return tuple(values[i] for i in members) if values else values

        return replace(self, partitions=len(members), partition_weights=pick(weights),
                       hot_share_table_measured=pick(self.hot_share_table_measured),
                       hot_shares_known_at_start=pick(self.hot_shares_known_at_start),
                       layout_changes_s=(), layout_weights=(), layout_waits_s=(), layout_restarts=(),
                       layout_closed_s=(), layout_waiting_weights=(), layout_barrier_passed=()), members

    def partitions_words(self) -> str:
        """The partitions as a person reads them: `4 partitions`, or for a run whose layout
        changed `5 partitions, read 2, then 3 from 49 s, then 2 from 78 s`, and where a change's
        new partitions waited `8 partitions, read 4, then 8 from 86 s (unread 26 s before it, then
        a restart)`, or where a re-shard's parents closed before it `(its parents closed at 45 s)`;
        `(..., then a restart, 3 of 4 past the barrier)` where the first batch read new partitions."""
        if not self.layout_changes_s:
            return f"{self.partitions} partitions"
        sizes = [f"{sum(1 for w in self.partition_weights if w > 0)}"]
        before = self.partition_weights
        for at, weights, wait, restarts, closed, passed, _ in self.layout_adoptions():
            how = [f"unread {wait:.0f} s before it"] if wait else []
            how += ["then a restart" if wait else "a restart"] if restarts else []
            new = sum(1 for b, a in zip(before, weights, strict=True) if a > 0 and not b > 0)
            how += [f"{sum(passed)} of {new} past the barrier"] if any(passed) else []
            before = weights
            how += [f"its parents closed at {closed:.0f} s"] if closed else []
            sizes.append(f"{sum(1 for w in weights if w > 0)} from {at:.0f} s" + (f" ({', '.join(how)})" if how else ""))
        return f"{self.partitions} partitions, read {', then '.join(sizes)}"

    def partition_counts(self, seconds: int, tick: int = 1) -> np.ndarray:
        """The partitions the job read in each of the run's `seconds` (its layouts' sizes), each
        change from the `tick` boundary before it, as the simulator applies it."""
        counts = np.full(seconds, self.partitions, dtype=np.int64)
        for at, weights in self.layouts() if self.layout_changes_s else ():
            counts[min(seconds, math.floor(at / tick) * tick):] = sum(1 for w in weights if w > 0)
        return counts

    @cached_property
    def _keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Per key: (weight, hash). Weights sum to 1 over the topic."""
        count = self.skew.keys * self.partitions
        names = [f"key-{i}".encode() for i in range(count)]
        hashes = key_hashes(names, np.zeros(count, dtype=np.int64))
        weights = 1.0 / np.arange(1, count + 1, dtype=np.float64) ** self.skew.zipf
        return weights / weights.sum(), hashes

    @cached_property
    def _partition_of_key(self) -> np.ndarray:
        # The high half of the hash stands in for the producer's partitioner (independent bits).
        return ((self._keys[1] >> np.uint64(32)) % np.uint64(self.partitions)).astype(np.int64)

    @cached_property
    def weights(self) -> np.ndarray:
        """Each partition's share of the topic's input."""
        if self.partition_weights:
            weights = np.asarray(self.partition_weights, dtype=np.float64)
            return weights / weights.sum()
        return np.bincount(self._partition_of_key, self._keys[0], self.partitions)

    @cached_property
    def hot_shares(self) -> dict[int, np.ndarray]:
        """Per factor: each partition's busiest thread's share of it (its busiest key lane or an
        even share, `elasticity.lanes`), hot key included."""
        if self.hot_share_table_measured:
            table = np.asarray(self.hot_share_table_measured, dtype=np.float64)
            return {f: np.maximum(table[:, i], 1.0 / f) for i, f in enumerate(FACTORS)}
        weights, hashes = self._keys
        part = self._partition_of_key
        share = self.weights[part]  # a partition with no share (not in a fitted layout) has no lanes
        within = np.divide(weights, share, out=np.zeros_like(weights), where=share > 0)
        hot = self.skew.hot_key_share
        hot_p = self.skew.hot_partition % self.partitions
        if hot:
            within = np.where(part == hot_p, within * (1 - hot), within)
        residues = (hashes & np.uint64(MAX_FACTOR - 1)).astype(np.int64)
        counts = np.bincount(part * MAX_FACTOR + residues, within, self.partitions * MAX_FACTOR)
        counts = counts.reshape(self.partitions, MAX_FACTOR)
        if hot:
            counts[hot_p, int(key_hashes([b"hot-key"], [0])[0]) & (MAX_FACTOR - 1)] += hot
        table = np.array([busiest_worker_shares(row) for row in counts])
        return {f: table[:, i] for i, f in enumerate(FACTORS)}

    def task_rate(self, factor: int) -> float:
        """Records/s one virtual task manages flat out at `factor`: CPU-bound work shares the cores."""
        per_task = 1.0 / self.process_seconds
        if self.cpu_fraction:
            tasks = self.partitions * factor
            per_task *= min(1.0, self.cores / (tasks * self.cpu_fraction))
        return per_task

    def capacity(self, factor: int) -> float:
        """Records/s the whole job takes at `factor` before some partition falls behind: that
        partition's busiest task saturates first (its share of the topic = partition weight ×
        hot share), the batch overhead taking its part of the time."""
        busiest = float((self.weights * self.hot_shares[factor]).max())
        per_task = self.duty(factor) * self.task_rate(factor)
        return min(per_task / busiest, self.partition_limit / float(self.weights.max()))

    def cpu_ceiling(self) -> float | None:
        """Records/s the cores process at most (cores / CPU seconds a record costs), as the
        pipeline measures it (`autosizer_pipeline_cores` and `..._cpu_seconds_total`); None for
        work that uses no CPU, which no core count caps."""
        cpu = self.process_seconds * self.cpu_fraction
        return self.cores / cpu if cpu > 0 else None

    def useful_factor(self) -> int:
        """The largest factor that still adds capacity (CPU-bound work stops at the cores)."""
        if not self.cpu_fraction:
            return FACTORS[-1]
        best = FACTORS[0]
        for factor in FACTORS:
            if self.partitions * factor * self.task_rate(factor) > 1.0001 * self.partitions * best * self.task_rate(best):
                best = factor
        return best

    def cost_words(self) -> str:
        """A batch's fixed cost as a person reads it: `0.40 s`, `0.40 s + 4.3 ms a task`, and
        `(0.05 s of it after the commit)` where that part is known."""
        per_task = f" + {self.batch_overhead_per_task_s * 1000:.1f} ms a task" if self.batch_overhead_per_task_s else ""
        gap = "" if self.batch_gap_s is None else f" ({self.batch_gap_s:.2f} s of it after the commit)"
        return f"{self.batch_overhead_s:.2f} s{per_task}{gap}"

    def overhead(self, factor: int) -> float:
        """A batch's fixed cost at `factor`: a base plus a share per virtual task."""
        return self.batch_overhead_s + self.batch_overhead_per_task_s * self.partitions * factor

    def latency(self, factor: int) -> float:
        """A batch's trigger to its commit, beyond its work: when its records stop lagging."""
        return self.overhead(factor) if self.commit_latency_s is None else self.commit_latency_s

    def commit_wait(self, factor: int, fill: float, records: float | None = None) -> float:
        """A batch's trigger to its commit beyond its work, for a read `fill` full (0 to 1: the
        fullest partition's read over its `run_ahead` span) of `records` in all: with a wait per
        record fitted (`commit_per_record_s`), the commit latency plus that for each record;
        else the commit latency for an empty read and the fixed cost less the gap after the
        commit for a full one, in step between; without a measured gap, the latency whatever
        the read. `engine._batches` commits its batches so."""
        latency = self.latency(factor)
        if self.commit_per_record_s is not None and records is not None:
            return latency + self.commit_per_record_s * records
        if self.batch_gap_s is None:
            return latency
        return latency + (self.overhead(factor) - self.batch_gap_s - latency) * min(1.0, max(0.0, fill))

    def warmup(self, second: float) -> float:
        """How much longer than `commit_latency_s` a batch waits for its commit `second`s into
        the run, the pipeline still warming up (`commit_warmup_s`)."""
        if not self.commit_warmup_s:
            return 0.0
        return self.commit_warmup_s * math.exp(-max(0.0, second) / self.commit_warmup_tau_s)

    def shown_duty(self, factor: int, measured: bool, second: float = 0.0) -> float:
        """The duty the daemon reads `second`s into the run: the job's own once the run has
        `measured` a batch's fixed cost; before, the cost shown at the start, or where none was
        known the commit latency as the batches then wait (the part of the cost every batch
        measures, `warmup` included: run k15's daemon read 0.33 s four seconds into a fresh
        pipeline's run, and factor 1's capacity 341/s where it did 365/s warm) and the gap after
        a commit where the run measured one (the daemon reads both; runs k9-k19 showed the gap
        within their first second, a fresh pipeline's first batch running past its interval),
        or none (1) without one."""
        if measured or not self.batch_seconds:
            return self.duty(factor)
        if not self.overhead_known_at_start:
            latency = self.commit_latency_s
            return batch_duty(self.batch_seconds, None if latency is None else
                              latency + self.warmup(second) + (self.batch_gap_s or 0.0))
        if self.overhead_shown_at_start_s is not None:
            return batch_duty(self.batch_seconds, self.overhead_shown_at_start_s)
        return self.duty(factor)

    def shown_duties(self, measured: bool, rescales: int = 0) -> np.ndarray | None:
        """The duty the daemon reads at each factor in FACTORS, whatever factor the job runs at:
        once a batch's cost is measured, and where the pipeline showed its read growing
        (`read_growth_shown`, after `read_growth_after` of the run's `rescales`), the job's own
        at each (its per-task part is what a larger factor pays more of, as a batch's read is:
        `elasticity.batch_cost`); else None (`shown_duty` at every factor, as the real daemon
        reads it without the read)."""
        if not (measured or not self.batch_seconds) or not self.batch_overhead_per_task_s:
            return None
        if not self.read_growth_shown or rescales < self.read_growth_after:
            return None
        return np.array([self.duty(f) for f in FACTORS])

    def duty(self, factor: int | None = None) -> float:
        """The share of a saturated job's time its tasks work: deadline / (deadline + fixed cost)."""
        return batch_duty(self.batch_seconds, self.overhead(factor or self.start_factor))

    def hot_share_table(self) -> np.ndarray:
        """(partitions, len(FACTORS)): the busiest bucket's share of each partition, as the
        pipeline exports it (`autosizer_pipeline_hot_share`)."""
        return np.stack([self.hot_shares[f] for f in FACTORS], axis=1)

    def restart_s(self, rescale: int) -> float:
        """The processing stop of the run's `rescale`-th actuation (from 0): its rescales and the
        adoptions that restarted the query, in order, as the run measured them."""
        restarts = self.restarts_measured_s
        return float(restarts[rescale % len(restarts)]) if restarts else float(self.restart_downtime_s)

    def actuation_s(self, factor: int, restart_s: float | None = None) -> float:
        """A rescale's decision to its first committed batch, when the daemon records it: the
        processing stop (`restart_downtime_s` unless given) plus one batch's deadline and wait
        for its commit."""
        cycle = self.batch_seconds + self.latency(factor) if self.batch_seconds else 0.0
        return (self.restart_downtime_s if restart_s is None else restart_s) + cycle

    def slots(self, factor: int) -> int:
        return math.ceil(self.partitions * factor / self.tasks_per_slot)
