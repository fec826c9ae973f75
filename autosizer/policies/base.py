"""What a policy sees (`Observation`) and what it answers (`Decision`).

A policy is pure: `decide(observation, state)` returns a decision and the policy's next state,
an explicit value the caller keeps (None to start). The daemon and the simulator call it the same
way, so a policy replayed offline behaves exactly as it would live.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from autosizer.elasticity import MAX_FACTOR, TopicPartition, validate_factor


@dataclass(frozen=True)
class PartitionStats:
    """One partition over the observation window (rates in records/s)."""

    lag_records: float
    lag_seconds: float
    input_rate: float
    processed_rate: float


@dataclass(frozen=True)
class TaskStats:
    """One virtual task over the window: its rate, time per record and busy fraction (0..1)."""

    lag_records: float
    processed_rate: float
    process_seconds: float
    busy: float


@dataclass(frozen=True)
class Observation:
    time: float
    factor: int
    partitions: Mapping[TopicPartition, PartitionStats]
    tasks: Mapping[str, TaskStats] = field(default_factory=dict)
    since_rescale_s: float = math.inf
    restart_downtime_s: float = 2.0
    complete: bool = True  # False when the collector got only part of the series
    age_s: float = 0.0  # how old the newest sample is

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def lag_records(self) -> float:
        return sum(p.lag_records for p in self.partitions.values())

    @property
    def input_rate(self) -> float:
        return sum(p.input_rate for p in self.partitions.values())

    @property
    def processed_rate(self) -> float:
        return sum(p.processed_rate for p in self.partitions.values())

    def problems(self) -> list[str]:
        """Why this observation cannot be trusted (empty when it can)."""
        found = []
        if not self.complete:
            found.append("partial metrics")
        if not self.partitions:
            found.append("no partitions observed")
        numbers = [v for p in self.partitions.values() for v in vars(p).values()]
        numbers += [v for t in self.tasks.values() for v in vars(t).values()]
        if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in numbers):
            found.append("missing or NaN values")
        return found


@dataclass(frozen=True)
class Decision:
    factor: int
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_factor(self.factor)


class Policy(Protocol):
    name: str

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]: ...


def factor_for(workers: float, partitions: int) -> int:
    """The smallest power-of-two factor giving at least `workers` virtual tasks in all."""
    per_partition = max(1.0, workers / max(1, partitions))
    return min(MAX_FACTOR, 1 << max(0, math.ceil(math.log2(per_partition - 1e-9))))


def positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"policy setting {name} must be a number > 0, not {value!r}")
    return float(value)
