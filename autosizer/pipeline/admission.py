"""Admission: how much of each partition one micro-batch reads, from what the job measured.

A batch is bounded in time (`batch_seconds`, enforced per virtual task by the slot's deadline),
so admission only has to give every task enough work to stay busy until that deadline, without
reading far more than it can use. Per partition the plan is a read position and a span:

- `from`: the slowest reader's position (the checkpoints' start offset), so work a task left at
  the deadline is read again; tasks that are ahead skip what they already did.
- `span`: `run_ahead` batches' worth of the partition's measured capacity (the sum of its tasks'
  saturated rates), so a light bucket may run at most that far ahead of its slowest sibling, and a
  re-read is never longer than one span.

Rates are measured, not configured: a task's saturated rate is the records it processed over the
wall time its thread worked on them in a batch (it had a backlog throughout that time), smoothed
over batches. A task not measured yet (a new layout after a rescale) borrows the median of the
measured tasks. Before anything is measured, a partition is assumed to do `initial_rate` records
per second whatever its factor: a small first batch that the first measurement corrects, and that
doubles for every batch too short to measure (a fast function's first batch can be). A rescale
therefore raises the admitted amount with no operator action.

Pure: no Spark, no I/O. The agent feeds it each batch's progress and hands `plan()` to the source.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from autosizer.elasticity import FACTORS, MAX_FACTOR, Layout
from autosizer.elasticity.batch_cost import CostDrift, PageCost, ReadCost, duty_at
from autosizer.elasticity.lanes import MIN_SHARE_READ, busiest_worker_shares
from autosizer.elasticity.layout import TopicPartition
from autosizer.pipeline.slots import TaskProgress

SMOOTHING = 0.5  # weight of the newest batch in a task's saturated rate and input share
MIN_SAMPLE_NS = 20_000_000  # 20 ms of work: shorter samples are timer noise
# A batch's rate strays from the smoothed one by its own noise plus the smoothed rate's, which
# holds SMOOTHING / (2 - SMOOTHING) of a batch's variance: the squared strays over-read by this
NOISE_OF_SMOOTHED = 1 + SMOOTHING / (2 - SMOOTHING)
BASE_BATCHES = 4  # a new factor's first warm batches: where its part neither work nor read starts


@dataclass(frozen=True)
class AdmissionConfig:
    """The three knobs of a time-bounded batch; the defaults are what `pipeline run` uses."""

    batch_seconds: float = 3.0
    run_ahead: float = 1.5
    initial_rate: float = 50.0  # records/s per partition, before anything is measured

    def __post_init__(self) -> None:
        for name, low in (("batch_seconds", 0.05), ("run_ahead", 1.0), ("initial_rate", 1e-3)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < low:
                raise ValueError(f"{name} must be a finite number >= {low}, not {value!r}")


@dataclass(frozen=True)
class ReadPlan:
    """Where one partition's next batch starts reading, and how far past that it may read."""

    start: int
    span: int


class Admission:
    """Measured per-task capacity, turned into each batch's read plan."""

    def __init__(self, config: AdmissionConfig | None = None):
        self.config = config or AdmissionConfig()
        self.rates: dict[str, float] = {}  # saturated records/s per virtual task
        # Per partition and factor in FACTORS: the busiest key bucket's share of the input
        self.hot_shares: dict[TopicPartition, tuple[float, ...]] = {}
        self._seed: float | None = None  # the last median rate, kept across a rescale
        # a saturated batch's fixed cost, outside the tasks, as its cycles measured it, and how
        # far the part of it neither work nor read has moved since (`overhead_s`)
        self.cycle_overhead_s: float | None = None
        self.drift = CostDrift(SMOOTHING, BASE_BATCHES)
        # what a slot's read costs, and the records the slowest-reading slot of a saturated
        # batch read, at the layout's factor then (`growing_read_s`)
        self.read_cost = ReadCost()
        # what a record costs the endpoint to serve, from the driver's tails' pages (Kinesis:
        # `observe_endpoint_read`), and what they last told
        self.endpoint_cost = PageCost()
        self.endpoint_per_record: float | None = None
        self.saturated_read: float | None = None
        self.cycle_read_s: float | None = None  # that slot's seconds on its read (`overhead_s`)
        self.factor: int | None = None
        self.commit_latency_s: float | None = None  # trigger to commit, outside the tasks
        self._latency_warm = False  # whether a warm batch measured it (`observe_latency`)
        self.read_boundary_s: float | None = None  # trigger to the records' cut (Kinesis)
        self.gap_s: float | None = None  # a commit to the next trigger, batches back to back
        self.cpu_per_record: float | None = None  # CPU seconds the slots' threads spent a record
        # per partition, records per residue of h mod MAX_FACTOR over small batches, until they
        # are enough to measure the hot shares (`_count_shares`)
        self._trickle: dict[TopicPartition, np.ndarray] = {}
        # the squared coefficient of variation of a record's service time (`service_cv`)
        self._service_variance: float | None = None
        self._assumed = self.config.initial_rate  # per partition, until a task is measured

    # --- measuring -----------------------------------------------------------------------------

    def observe(self, progress: Iterable[TaskProgress]) -> None:
        """Fold one committed batch into the saturated rates and the input shares."""
        records: dict[str, int] = {}
        busy: dict[str, int] = {}
        seen: set[TopicPartition] = set()
        progress_list = list(progress)
        for p in progress_list:
            tp = (p.topic, p.partition)
            if tp not in seen:  # every reader of a partition carries the same counts
                seen.add(tp)
                self._count_shares(tp, p)
            records[p.task] = records.get(p.task, 0) + p.records
            busy[p.task] = busy.get(p.task, 0) + p.busy_ns
        cpu, done = sum(p.cpu_ns for p in progress_list), sum(records.values())
        if cpu and done:
            self.cpu_per_record = _smooth(self.cpu_per_record, cpu / 1e9 / done)
        measured, noise = False, []
        for task, ns in busy.items():
            if ns >= MIN_SAMPLE_NS and records[task]:
                rate, old = records[task] / (ns / 1e9), self.rates.get(task)
                if old:
                    noise.append((rate / old - 1) ** 2 * records[task])
                self.rates[task] = _smooth(old, rate)
                measured = True
        if noise:
            self._service_variance = _smooth(self._service_variance, statistics.fmean(noise) / NOISE_OF_SMOOTHED)
        if not measured and any(records.values()) and self.typical_rate() is None:
            self._assumed *= 2  # too quick to measure: the function is faster than assumed

    def _count_shares(self, tp: TopicPartition, p: TaskProgress) -> None:
        """Fold a partition's busiest-thread counts into its hot shares: a batch that read
        MIN_SHARE_READ records by itself; smaller ones (a trickle) by their records per residue,
        summed over batches until they reach it. A sum of each small batch's busiest count would
        overstate the busiest lane (the largest of a few records per lane is a large share); a
        sum of residues is the count one large batch would have made. At 25/s a partition
        (run 66) no batch reads 200, and the shares waited for a backlog before."""
        if p.read >= MIN_SHARE_READ and p.hottest:
            self._trickle.pop(tp, None)
            shares = [n / p.read for n in p.hottest]
        elif p.residues:
            counts = self._trickle.setdefault(tp, np.zeros(MAX_FACTOR))
            residues, n = zip(*p.residues, strict=True)
            counts[list(residues)] += n  # each residue once a batch
            if counts.sum() < MIN_SHARE_READ:
                return
            shares = list(busiest_worker_shares(self._trickle.pop(tp)))
        else:
            return
        old = self.hot_shares.get(tp)
        self.hot_shares[tp] = tuple(_smooth(None if old is None else old[i], v) for i, v in enumerate(shares))

    @property
    def service_cv(self) -> float | None:
        """How much a record's service time varies (its coefficient of variation), from how far
        each task's rate in a batch strays from its smoothed rate: over n records the rate
        strays by CV / sqrt(n), the smoothed one by a third as much again in variance. Measured
        at any load, for `autosizer fit`: near saturation a batch waits on its slowest task, so
        the simulator's queues need this noise (the demo's 10 ms sleep is steady; a remote call
        is not)."""
        return None if self._service_variance is None else math.sqrt(self._service_variance)

    def observe_cycle(self, cycle_s: float, slot_s: float, read_records: int = 0, factor: int | None = None,
                      unread_s: float | None = None, read_s: float | None = None) -> None:
        """A saturated batch took `cycle_s` from the previous commit to its own, of which its
        busiest thread worked `slot_s` on records: the rest (scheduling, reading, a slot's setup,
        committing, Spark's own bookkeeping) is the fixed cost every batch pays. Its slowest-reading slot read
        `read_records` at the layout's `factor`: a larger factor reads more (`growing_read_s`).
        Of its cost, `unread_s` came before its commit and was not its read (`observe_unread`),
        and that slot spent `read_s` on its read."""
        if cycle_s > 0 and slot_s >= 0:
            changed = factor is not None and factor != self.factor
            self.cycle_overhead_s = _smooth(self.cycle_overhead_s, max(0.0, cycle_s - slot_s))
            if unread_s is not None and unread_s >= 0:
                self.drift.measured(unread_s, factor, changed)
            if factor and read_records > 0:
                same = self.factor == factor and self.saturated_read is not None
                self.saturated_read = _smooth(self.saturated_read if same else None, read_records)
                if read_s is not None and read_s >= 0:
                    self.cycle_read_s = _smooth(self.cycle_read_s if same else None, read_s)
                self.factor = factor

    def observe_unread(self, seconds: float, factor: int) -> None:
        """A warm batch with records at `factor` spent `seconds` from its trigger to its commit on
        other than its tasks' work and its slowest slot's read (`CostDrift`)."""
        self.drift.observe(seconds, factor)

    @property
    def overhead_s(self) -> float | None:
        """A saturated batch's fixed cost now: what its cycles measured, moved by as much as every
        batch's part that is neither work nor read has moved since (`observe_unread`), at the
        factor they were measured at and at each factor the job ran at since. A job that starts
        on a backlog and then keeps up measures the cost in its first minute only, while its JVM
        and Python workers are still warming up, and held that all run (run n4: 0.642 s where the step's batches paid about 0.4 s). Every
        batch measures the rest: over a backlog, 90 s kept up and a backlog again (session 81,
        batch by batch, one run each) the cycles read 0.28 -> 0.20 s (`local[2]`, factor 1),
        0.41 -> 0.24 s (factor 4) and 0.50 -> 0.27 s (a standalone cluster, factor 4), the part
        neither work nor read 0.18 -> 0.11, 0.24 -> 0.12 and 0.32 -> 0.14 s with them, and read
        as much while kept up (0.10, 0.12); `bench_fixed_cost.py` checks the exported figure.
        Never below the part of the cost that is read and after the commit, nor below the gap
        after a commit (`gap_s`), which is a part of it.

        At a factor no cycle measured (a scale-up the job then keeps up at), the cost is built
        there from its parts instead (`_built_elsewhere`), once its first batches there show its
        part neither work nor read (`CostDrift.elsewhere`): the daemon and `autosizer fit` read
        the gauge as the running factor's cost, and the cycles' figure, moved, left out the new
        factor's tasks' setup and its larger read (run p4 showed 0.18-0.21 s at factor 4 and its
        replay ran the step's batches there 7% short; run q2, built, 0.30-0.33 s in the step)."""
        if self.cycle_overhead_s is None:
            return None
        built = self._built_elsewhere()
        return built[1] if built else self.drift.applied(self.cycle_overhead_s, self.gap_s or 0.0)

    @property
    def overhead_factor(self) -> int | None:
        """The factor `overhead_s` is the cost at: the cycles', or the one it was built at."""
        built = self._built_elsewhere()
        return built[0] if built else self.factor

    def _built_elsewhere(self) -> tuple[int, float] | None:
        """The fixed cost at the factor the job runs at, where no cycle measured it, from what
        its batches there measure: the gap after a commit, the part neither work nor read, and
        the read a saturated batch takes there (the cycles' read, its growing part scaled to
        that factor, `growing_read_s`). A cycle's cost is those three (session 81: 0.205 against
        0.202 s measured, 0.236 against 0.240, 0.267 against 0.266)."""
        elsewhere = self.drift.elsewhere(self.factor)
        if elsewhere is None or self.cycle_read_s is None:
            return None
        factor, unread = elsewhere
        grows = self.growing_read_s() or 0.0  # the part of the cycles' read that scales
        read = self.cycle_read_s + grows * (factor / self.factor - 1)  # type: ignore[operator]
        return factor, (self.gap_s or 0.0) + unread + read

    def observe_gap(self, seconds: float) -> None:
        """A batch was triggered `seconds` after the last one's commit, which ran past its
        trigger's interval (`gap_after_commit`): the part of the fixed cost that follows a commit
        (the batch function's rest, Spark's offset log, the trigger). The rest comes before the
        commit and grows with what a batch reads, so a batch far from full starts its successor
        sooner than the fixed cost says:
        run u5's batches at 56% busy started on their 1 s trigger where a replay charging every
        batch the saturated 0.67 s ran them back to back."""
        if seconds >= 0:
            self.gap_s = _smooth(self.gap_s, seconds)

    def observe_read(self, records: int, seconds: float) -> None:
        """A saturated batch's slowest-reading slot read `records` in `seconds` (any such batch
        but a query's first two, whose reads wait for the Python workers to start)."""
        self.read_cost.observe(records, seconds)

    def observe_endpoint_read(self, pages: Iterable[tuple[int, float]]) -> None:
        """Pages a tail on the driver read, as (records, seconds a GetRecords took). At factor 1
        a Kinesis slot reads 200 records in the time it reads 870, its call's fixed part and the
        emulator's pauses hiding the records' part, so a scale-up from 1 was promised its read
        as measured there: factor 8 13-35% more than it did (`bench_kinesis.py rise`). A tail
        reads a burst or a backlog in pages far larger than it reads keeping up, and those say
        what a record costs the endpoint at least (`PageCost`). Called on the probe's thread,
        which alone reads `endpoint_cost`; the batches read the float it leaves."""
        for records, seconds in pages:
            self.endpoint_cost.observe(records, seconds)
        self.endpoint_per_record = self.endpoint_cost.per_record()

    def observe_latency(self, seconds: float, warm: bool = True) -> None:
        """Any batch with records took `seconds` from its trigger (Kafka's read boundary: the
        trigger plans its end offsets; a Kinesis batch cuts later, `observe_read_boundary`) to
        its commit, beyond its tasks' work (the busiest thread's time on records: a slot's
        setup is in this, `SlotResult.busiest_ns`). Its records' lag waits that
        long; a saturated batch's overhead also holds what comes after the commit (Spark's own
        offset commit, the gap to the next batch), so at low load the lag follows this instead.

        A query's first two batches (not `warm`) wait for its JVM and Python workers: they stand
        in only until a warm batch measures it, which replaces them. Smoothed in, the first
        batch's 1.4 s still held the gauge at 0.29 s four seconds on (run k8b, warm batches
        0.15-0.17 s), and run k13's daemon read factor 1's capacity as 353/s where the job does
        363-366/s warm. Warm batches wait longer at first too (run k15 read 0.33 s from them at
        its first tick): that part is the job's own, and the simulator models it
        (`JobModel.commit_warmup_s`). After a restart the last query's figure stands."""
        if seconds < 0 or (not warm and self._latency_warm):
            return
        self.commit_latency_s = _smooth(None if warm and not self._latency_warm else self.commit_latency_s,
                                        seconds)
        self._latency_warm = self._latency_warm or warm

    def observe_read_boundary(self, seconds: float) -> None:
        """A Kinesis batch's records were cut `seconds` after its trigger: a slot takes what its
        shards hold when it reads them (its earliest slot's read end), where Kafka's trigger plans
        the end offsets. At low load a record waits for its commit that much less than the commit
        latency says: run r4's job showed 1.0 s of lag where its replay, cutting at the trigger,
        showed 1.2-1.3 s, at both factors."""
        if seconds >= 0:
            self.read_boundary_s = _smooth(self.read_boundary_s, seconds)

    def growing_read_s(self, factor: int | None = None) -> float | None:
        """Of a saturated batch's fixed cost at `factor` (default: the one it was measured at),
        the time its slowest-reading slot spends on the records it reads, the read's own fixed
        part left out: the records a saturated batch reads grow with the factor (a partition's
        span is `run_ahead` batches of its F tasks' rates), and so does this. None before a
        saturated batch was measured. A record costs at least what the endpoint takes to serve
        it (`observe_endpoint_read`), unless that is more than the slots' whole read per record,
        their reads' fixed part and all: then the tails' pages waited on something else (the
        emulator's writes: 0.7-3.7 ms a record in a burst's pages, the slots' reads 0.3)."""
        if self.saturated_read is None or self.factor is None:
            return None
        whole = self.read_cost.whole_per_record()
        floor = self.endpoint_per_record
        told = [p for p in (self.read_cost.per_record(), floor if floor is not None and floor <= whole else None)
                if p is not None]
        if not told:
            return None
        return max(told) * self.saturated_read * (factor or self.factor) / self.factor

    def duty(self, factor: int | None = None) -> float:
        """The share of a saturated job's time its tasks can work at `factor` (default: the
        factor its cost was measured at): deadline / (deadline + cost), the cost's growing read
        scaled to `factor` (`elasticity.batch_cost`)."""
        built = self._built_elsewhere()
        running, cost = built if built else (self.factor or factor or 1, self.overhead_s or 0.0)
        return duty_at(self.config.batch_seconds, cost, self.growing_read_s(running), running, factor or running)

    def forget(self, layout: Layout) -> None:
        """Drop tasks the layout no longer has; their median still seeds the new tasks."""
        names = {t.name for t in layout.virtual_tasks()}
        self._seed = self.typical_rate()
        self.rates = {t: r for t, r in self.rates.items() if t in names}

    def typical_rate(self) -> float | None:
        """The median measured saturated rate of a task, or None before any measurement."""
        if self.rates:
            return statistics.median(self.rates.values())
        return self._seed

    def task_rate(self, task: str) -> float | None:
        """The task's saturated rate, or the median of the measured ones, or None."""
        return self.rates.get(task) or self.typical_rate()

    # --- planning ------------------------------------------------------------------------------

    def plan(self, layout: Layout, starts: Mapping[TopicPartition, int | None]) -> dict[TopicPartition, ReadPlan]:
        """Per partition with a known start: read from the slowest task, `run_ahead` batches of
        the partition's capacity (each task's rate split evenly over the partitions it reads)."""
        out: dict[TopicPartition, ReadPlan] = {}
        for tp, start in starts.items():
            if start is None:
                continue
            span = math.ceil(self.config.run_ahead * self.config.batch_seconds * self._capacity(layout, tp))
            out[tp] = ReadPlan(start, max(1, span))
        return out

    def _capacity(self, layout: Layout, tp: TopicPartition) -> float:
        """Records/s the partition's tasks do together when each has work (each task's rate split
        evenly over the partitions it reads), or the assumption before any measurement."""
        rates = [(self.task_rate(t.name), len(t.partitions)) for t in layout.readers(*tp)]
        if any(rate is None for rate, _ in rates):
            return self._assumed
        return sum(rate / shared for rate, shared in rates)  # type: ignore[operator]

    # --- what a controller reads ---------------------------------------------------------------

    def partition_capacity(self, layout: Layout) -> dict[TopicPartition, float]:
        """Records/s a partition can take in key order: its tasks' threads share its key lanes,
        so the busiest thread (an even share, or the busiest lane: `hot_shares`) fills first; a
        partition whose lanes are not measured yet assumes even ones."""
        index = FACTORS.index(layout.factor)
        out: dict[TopicPartition, float] = {}
        for tp in layout.partitions():
            readers = layout.readers(*tp)
            rate = statistics.mean(
                (self.task_rate(t.name) or self._assumed / layout.factor) / len(t.partitions) for t in readers)
            measured = self.hot_shares.get(tp)
            share = max(1 / len(readers), measured[index] if measured else 0.0)
            out[tp] = rate / share
        return out


def read_fill(progress: Iterable[TaskProgress], spans: Mapping[TopicPartition, int]) -> float | None:
    """How full a batch's read was: its fullest partition's records read over the span its plan
    allowed (`run_ahead` batches of the partition's capacity), at most 1. The part of a batch's
    fixed cost before its commit grows with the records a batch reads (the simulator takes it
    as a line in this, from the commit latency for none to the fixed cost less the gap for a
    full read), so the pipeline exports it with each batch's latency for a fit to check the
    line. None where the batch read no partition its plan had."""
    fills = [min(1.0, p.read / spans[(p.topic, p.partition)]) for p in progress
             if spans.get((p.topic, p.partition), 0) > 0]
    return max(fills) if fills else None


def gap_after_commit(last_trigger: float | None, last_commit: float | None, trigger: float,
                     interval_s: float) -> float | None:
    """The part of a batch's fixed cost after its commit (Spark's offset log, its progress, the
    next trigger), as this batch's `trigger` shows it, or None where it does not. Spark fires a
    batch on the first tick of its `interval_s` after the last trigger, or at once when the last
    batch ran past that tick; only then is this trigger's distance from the last commit the gap
    and no wait. Until session 67 the gap was taken only between two saturated batches, so a
    job that kept up with batches straddling a 1 s trigger (run k8, 87% busy) had none measured,
    and its replay started each batch at the last one's commit: 0.99 s batches where the real
    ones ran 1.07 s apart. A gap of a whole interval or more waited for data at a due tick."""
    if last_trigger is None or last_commit is None or last_commit - last_trigger < interval_s:
        return None
    gap = trigger - last_commit
    return gap if 0 <= gap < interval_s else None


def job_capacity(admission: Admission, layout: Layout, cores: int | None = None) -> float:
    """Records/s the whole job can take in key order, the fixed cost of its batches included,
    for input spread evenly over the partitions (Kafka's default partitioner): the partition
    with the least capacity fills first, and `cores` at the CPU a record costs cap the job
    (the policy's `cpu_ceiling`). A controller that knows each partition's input rate compares
    it with `partition_capacity` instead."""
    capacity = admission.partition_capacity(layout)
    tasks = len(capacity) * min(capacity.values(), default=0.0)
    if cores and admission.cpu_per_record:
        tasks = min(tasks, cores / admission.cpu_per_record)
    return tasks * admission.duty(layout.factor)


def _smooth(old: float | None, new: float) -> float:
    return new if old is None else old + SMOOTHING * (new - old)
