"""What a policy sees (`Observation`) and what it answers (`Decision`).

A policy is pure: `decide(observation, state)` returns a decision and the policy's next state,
an explicit value the caller keeps (None to start). The daemon and the simulator call it the same
way, so a policy replayed offline behaves exactly as it would live.

Statistics are columns (numpy arrays, one entry per partition or per virtual task) rather than one
object per row: a simulated week is 40,000 ticks over hundreds of virtual tasks, and a policy
mostly wants sums, maxima and shares anyway.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from autosizer.elasticity import FACTORS, MAX_FACTOR, TopicPartition, validate_factor
from autosizer.policies.history import InputHistory

_add_reduce = np.add.reduce
_max_reduce = np.maximum.reduce
_min_reduce = np.minimum.reduce


def _total(stats: PartitionStats | TaskStats, column: str) -> float:
    """The sum of a column, computed once (a caller holding them already may pass `totals`)."""
    found = stats.totals.get(column)
    if found is None:
        found = stats.totals[column] = float(_add_reduce(getattr(stats, column)))
    return found


PARTITION_COLUMNS = ("lag_records", "lag_seconds", "input_rate", "processed_rate")
TASK_COLUMNS = ("lag_records", "processed_rate", "process_seconds", "busy")


def _as_columns(stats: Any, rows: str, dtypes: Mapping[str, Any]) -> None:
    """Make each column a numpy array of its dtype (no copy when it is one) and check its length."""
    size = len(stats.names)
    for name, dtype in dtypes.items():
        column = getattr(stats, name)
        if type(column) is not np.ndarray or column.dtype != dtype:
            column = np.asarray(column, dtype=dtype)
            object.__setattr__(stats, name, column)
        if column.shape != (size,):
            raise ValueError(f"{name} has {column.size} values for {size} {rows}")


def _unchecked(cls: type, fields: dict[str, Any]) -> Any:
    """An instance of a frozen stats dataclass from columns its caller built itself, as float64
    arrays of the right length, without `_as_columns`' checks: the simulator builds three a
    tick, 40,000 ticks a week, and the checks and the generated `__init__` were about half of its
    observation's cost. Input from anywhere else goes through the checked constructor."""
    made = object.__new__(cls)
    made.__dict__.update(fields)
    return made


@functools.cache
def _defaults(cls: type) -> tuple[frozenset[str], dict[str, Any], tuple[tuple[str, Any], ...]]:
    """A dataclass's required fields, its fields' defaults, and its default factories."""
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} checks its fields in __post_init__: build it with its constructor")
    required, fixed, factories = set(), {}, []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            fixed[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            factories.append((f.name, f.default_factory))
        else:
            required.add(f.name)
    return frozenset(required), fixed, tuple(factories)


def frozen(cls: type, **fields: Any) -> Any:
    """`cls(**fields)` for a frozen dataclass with no `__post_init__`, without its generated
    `__init__`, which sets each field through `object.__setattr__`: a policy's state of 21
    fields and an observation of 19 cost 14 us each that way, a tenth of a simulated tick
    (40,000 a week). Defaults fill what is not given; a required field missing is the same
    TypeError the constructor raises, an unknown one too."""
    required, fixed, factories = _defaults(cls)
    if not required <= fields.keys() or not fields.keys() <= cls.__dataclass_fields__.keys():
        missing = sorted(required - fields.keys()) or sorted(fields.keys() - cls.__dataclass_fields__.keys())
        raise TypeError(f"{cls.__name__}: fields {missing} missing or unknown")
    made = object.__new__(cls)
    values = made.__dict__
    values.update(fixed)
    for name, factory in factories:
        if name not in fields:
            values[name] = factory()
    values.update(fields)
    return made


@dataclass(frozen=True, eq=False)
class PartitionStats:
    """Per partition over the observation window: lag (records, seconds) and rates (records/s)."""

    names: Sequence[TopicPartition]
    lag_records: np.ndarray
    lag_seconds: np.ndarray
    input_rate: np.ndarray
    processed_rate: np.ndarray
    totals: dict[str, float] = field(default_factory=dict, repr=False)  # column sums, filled lazily

    def __post_init__(self) -> None:
        _as_columns(self, "partitions", {c: np.float64 for c in PARTITION_COLUMNS})

    @classmethod
    def unchecked(cls, names: Sequence[TopicPartition], lag_records: np.ndarray, lag_seconds: np.ndarray,
                  input_rate: np.ndarray, processed_rate: np.ndarray, totals: dict[str, float]) -> PartitionStats:
        """From float64 columns of `len(names)` each, unchecked (`_unchecked`)."""
        return _unchecked(cls, {"names": names, "lag_records": lag_records, "lag_seconds": lag_seconds,
                                "input_rate": input_rate, "processed_rate": processed_rate, "totals": totals})

    @classmethod
    def from_rows(cls, rows: Mapping[TopicPartition, tuple[float, float, float, float]]) -> PartitionStats:
        """From {partition: (lag_records, lag_seconds, input_rate, processed_rate)}."""
        columns = np.array(list(rows.values()), dtype=np.float64).reshape(-1, 4).T
        return cls(tuple(rows), *columns)

    def __len__(self) -> int:
        return len(self.names)

    total = _total


@dataclass(frozen=True, eq=False)
class TaskStats:
    """Per virtual task over the window; `partition` indexes `PartitionStats.names`.

    `process_seconds` is the time one record takes, `busy` the fraction of the window spent
    processing (0..1), so `processed_rate / busy` is what the task could do flat out.
    """

    names: Sequence[str]
    partition: np.ndarray
    lag_records: np.ndarray
    processed_rate: np.ndarray
    process_seconds: np.ndarray
    busy: np.ndarray
    totals: dict[str, float] = field(default_factory=dict, repr=False)  # column sums, filled lazily

    def __post_init__(self) -> None:
        _as_columns(self, "virtual tasks", {"partition": np.int64, **{c: np.float64 for c in TASK_COLUMNS}})

    @classmethod
    def unchecked(cls, names: Sequence[str], partition: np.ndarray, lag_records: np.ndarray,
                  processed_rate: np.ndarray, process_seconds: np.ndarray, busy: np.ndarray,
                  totals: dict[str, float]) -> TaskStats:
        """From an int64 `partition` and float64 columns of `len(names)` each, unchecked (`_unchecked`)."""
        return _unchecked(cls, {"names": names, "partition": partition, "lag_records": lag_records,
                                "processed_rate": processed_rate, "process_seconds": process_seconds,
                                "busy": busy, "totals": totals})

    @classmethod
    def empty(cls) -> TaskStats:
        return cls((), [], [], [], [], [])

    def __len__(self) -> int:
        return len(self.names)

    total = _total


@dataclass(frozen=True, eq=False)
class Watermarks:
    """Each partition's high watermark (records ever written to it; Kinesis: counted since the
    shard's tail started) and the Unix time it was read. Two ticks' watermarks give the input
    between them with no batch in it: lag and processed records move by whole batches, so
    over one tick their sum swings by a batch either way."""

    names: Sequence[TopicPartition]
    offsets: np.ndarray
    times: np.ndarray

    def __post_init__(self) -> None:
        _as_columns(self, "partitions", {"offsets": np.float64, "times": np.float64})

    @classmethod
    def unchecked(cls, names: Sequence[TopicPartition], offsets: np.ndarray, times: np.ndarray) -> Watermarks:
        """From float64 columns of `len(names)` each, unchecked (`_unchecked`)."""
        return _unchecked(cls, {"names": names, "offsets": offsets, "times": times})

    def rate_since(self, earlier: Watermarks) -> float | None:
        """Records/s written since `earlier`, summed over the partitions; None when the two
        cannot tell: another set of partitions, a watermark that went back (a topic recreated,
        a Kinesis tail restarted), or one not read again since."""
        if not len(self.names) or (self.names is not earlier.names and tuple(self.names) != tuple(earlier.names)):
            return None
        with np.errstate(invalid="ignore"):  # inf - inf: NaN, unknown
            span, grown = self.times - earlier.times, self.offsets - earlier.offsets
        if not (_min_reduce(span) > 0 and _min_reduce(grown) >= 0):  # a NaN is the minimum and fails both
            return None
        return float(_add_reduce(grown / span))


# The processing stop a rescale costs, as the daemon assumes it until the job has measured one
# (the pipeline's restart gauge, or the journal's last rescale): a Spark query's restart.
DOWNTIME_UNMEASURED_S = 10.0


@dataclass(frozen=True, eq=False)
class Observation:
    time: float
    factor: int
    partitions: PartitionStats
    tasks: TaskStats = field(default_factory=TaskStats.empty)
    since_rescale_s: float = math.inf
    restart_downtime_s: float = 2.0
    complete: bool = True  # False when the collector got only part of the series
    age_s: float = 0.0  # how old the newest sample is
    # What the pipeline measured of its own capacity (None/unknown: the older estimates apply):
    saturated_rate: float | None = None  # records/s one virtual task does while it has a backlog
    # (partitions, len(FACTORS)): the busiest thread's share of each partition's input at each
    # factor (an even share, or its busiest key lane); NaN where unknown (even is assumed there)
    hot_shares: np.ndarray | None = None
    duty: float = 1.0  # share of a saturated job's time its tasks work (the rest: batch overhead)
    # The duty at each factor in FACTORS (None: `duty` at every one). A batch's read grows with
    # the factor, the rest of its fixed cost does not (`elasticity.batch_cost`).
    duties: np.ndarray | None = None
    # records/s the job's cores could process at most, whatever the factor: cores / the CPU time a
    # record costs (None: not measured, no cap). A CPU-bound job stops gaining there.
    cpu_ceiling: float | None = None
    history: InputHistory | None = None  # the input by time of day over recent days, if recorded
    watermarks: Watermarks | None = None  # each partition's high watermark and when it was read
    cache: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def lag_records(self) -> float:
        return self.partitions.total("lag_records")

    @property
    def input_rate(self) -> float:
        return self.partitions.total("input_rate")

    @property
    def processed_rate(self) -> float:
        return self.partitions.total("processed_rate")

    @property
    def task_capacity(self) -> float | None:
        """Records/s one virtual task manages flat out: Σ processed rate / Σ busy fraction.

        (Properties, not cached_property: the sums are cached in the stats' `totals`, and 3.11's
        cached_property takes a lock on every access.)

        Summing before dividing weights each task by how busy it was, so nearly idle tasks (whose
        ratio is mostly noise) count for little; None when no task was measurably busy.
        """
        busy = self.tasks.total("busy")
        if busy < 0.01:
            return None
        return self.tasks.total("processed_rate") / busy

    @property
    def task_rate(self) -> float | None:
        """Records/s one virtual task really does flat out: the pipeline's saturated rate (which
        includes per-record framework cost), else the user-function estimate `task_capacity`."""
        if self.saturated_rate is not None and math.isfinite(self.saturated_rate) and self.saturated_rate > 0:
            return self.saturated_rate
        return self.task_capacity

    def hot_share(self, factor: int) -> np.ndarray:
        """Per partition, the busiest thread's share of its input at `factor` (1/factor unknown)."""
        return self._shares()[:, FACTORS.index(factor)]

    def _shares(self) -> np.ndarray:
        """(partitions, len(FACTORS)) hot shares, unknown ones filled with even buckets. A caller
        that already holds the filled table hands it in `cache["shares"]` (the simulator does, on
        every tick of a replay)."""
        found = self.cache.get("shares")
        if found is None:
            found = self.cache["shares"] = filled_hot_shares(self.hot_shares, self.partition_count)
        return found

    def capacities(self, task_rate: float) -> np.ndarray:
        """`capacity` at every factor in FACTORS, at once (a policy compares them all)."""
        key = ("capacities", task_rate)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self._capacities(task_rate)
        return found

    def capacity_list(self, task_rate: float) -> list[float]:
        """`capacities` as a list of floats: a policy walking the factors one by one compares
        Python floats faster than numpy's."""
        key = ("capacity list", task_rate)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = self.capacities(task_rate).tolist()
        return found

    def _capacities(self, task_rate: float) -> np.ndarray:
        """Weighted by each partition's share of the input; evenly when the input is unknown or
        zero. One pass per observation: a simulated week asks for it on 40,000 ticks."""
        count = self.partition_count
        if not count:
            return np.zeros(len(FACTORS))
        shares = self._shares()
        total = self.partitions.total("input_rate")
        if math.isfinite(total) and total > 0:
            busiest = _max_reduce(self.partitions.input_rate[:, None] * shares, axis=0) / total
        else:
            busiest = _max_reduce(shares, axis=0) / count
        duties = self.duties if self.duties is not None else self.duty  # a scalar spreads as `np.full` would
        capacities = (duties * task_rate) / busiest
        if self.cpu_ceiling is not None and math.isfinite(self.cpu_ceiling) and self.cpu_ceiling > 0:
            return np.minimum(capacities, duties * self.cpu_ceiling)
        return capacities

    def duty_by_factor(self) -> np.ndarray:
        """The duty at each factor in FACTORS: `duties`, or `duty` at every one."""
        return self.duties if self.duties is not None else np.full(len(FACTORS), self.duty)

    def cores_cap(self, factor: int) -> float | None:
        """Records/s the cores allow at `factor` (`cpu_ceiling` times that factor's duty)."""
        if self.cpu_ceiling is None:
            return None
        return float(self.duty_by_factor()[FACTORS.index(factor)]) * self.cpu_ceiling

    def capacity(self, factor: int, task_rate: float) -> float:
        """Records/s the job can take at `factor` in key order: per partition the busiest thread
        saturates first (`task_rate / hot share`), the partition that fills first at today's input
        mix caps the job, the cores cap it (`cpu_ceiling`), and the batch overhead at `factor`
        takes its share of the time."""
        return float(self.capacities(task_rate)[FACTORS.index(factor)])

    def problems(self) -> list[str]:
        """Why this observation cannot be trusted (empty when it can)."""
        found = []
        if not self.complete:
            found.append("partial metrics")
        if not len(self.partitions):
            found.append("no partitions observed")
        p, t = self.partitions, self.tasks
        # One sum per column: NaN or ±inf anywhere makes the total non-finite. (A loop: the
        # guards ask every tick, and a generator's frames cost more than the sums.)
        total = 0.0
        for column in PARTITION_COLUMNS:
            total += p.total(column)
        for column in TASK_COLUMNS:
            total += t.total(column)
        if not math.isfinite(total):
            found.append("missing or NaN values")
        return found


@dataclass(frozen=True)
class Decision:
    factor: int
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)
    # a scale-up the guards may let through at once when it undoes the scale-down they last let
    # through and the input already exceeds the smaller factor's capacity (`Guards`); a policy
    # opts in, since a rule that scales down eagerly would then flap at the speed of a restart
    undo_scale_down: bool = False
    # a scale-down the guards may let through at once when it returns to the factor the scale-up
    # they last let through started from, which the policy judged to have bought nothing (the
    # cores cap the job): holding the extra tasks for the cooldown and the lazy scale-down's
    # delay protects nothing, as the policy remembers that factor as a ceiling
    undo_scale_up: bool = False
    # a scale-up the guards may let through at once when the last change they let through was a
    # scale-up and the input already exceeds the factor it reached's capacity: it fell short, and
    # waiting the cooldown turns one ramp into a ladder; a policy opts in, since one that sizes by
    # the lag alone would read a restart's own backlog as a need for more
    extend_scale_up: bool = False

    def __post_init__(self) -> None:
        validate_factor(self.factor)


class Policy(Protocol):
    name: str

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]: ...


def filled_hot_shares(table: np.ndarray | None, partitions: int) -> np.ndarray:
    """A hot-share table with every entry usable: unknown (NaN, <= 0) or missing ones are even
    buckets, and no bucket holds less than an even share."""
    even = np.broadcast_to(1.0 / np.asarray(FACTORS, dtype=np.float64), (partitions, len(FACTORS)))
    if table is None or table.shape != even.shape:
        return np.array(even)
    known = np.isfinite(table) & (table > 0)
    return np.where(known, np.maximum(np.where(known, table, 0.0), even), even)


def factor_for(workers: float, partitions: int) -> int:
    """The smallest power-of-two factor giving at least `workers` virtual tasks in all."""
    per_partition = max(1.0, workers / max(1, partitions))
    return min(MAX_FACTOR, 1 << max(0, math.ceil(math.log2(per_partition - 1e-9))))


def positive(name: str, value: float) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            or not math.isfinite(value)):
        raise ValueError(f"policy setting {name} must be a finite number > 0, not {value!r}")
    return float(value)


def fraction(name: str, value: float) -> float:
    positive(name, value)
    if value > 1:
        raise ValueError(f"policy setting {name} must be in (0, 1], not {value!r}")
    return float(value)
