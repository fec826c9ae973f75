"""What every actuator receives and returns.

An actuator is built with an `ActuatorContext` (the job's store, its actuation journal and a lag
probe) plus its own settings from `[actuator.settings]`, and answers two calls: `act(plan)` for a
new decision and `resume(entry)` for an actuation a previous daemon left in the journal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from autosizer.actuators.journal import ActuationJournal, Entry
from autosizer.checks import finite
from autosizer.clock import SYSTEM_CLOCK, Clock
from autosizer.elasticity.store import MetadataStore


@dataclass(frozen=True)
class Plan:
    from_generation: int
    from_factor: int
    to_factor: int
    reason: str
    lag_before: float | None = None  # records, when decided (None: unknown, verify commits only)
    input_rate: float = 0.0  # records/s, when decided
    processed_rate: float = 0.0
    # A partition expansion (SEP-5) instead of a factor change: the topics' new counts, and each
    # parent partition's end offset when it was adopted (its children's barrier).
    partitions: Mapping[str, int] | None = None
    barriers: Mapping[tuple[str, int], int] | None = None
    # ... or, with no barriers, the children coupled to their parents until this time (`coupling`)
    coupled_until_ms: int | None = None


@dataclass(frozen=True)
class Outcome:
    """How an actuation ended: done, dry_run, aborted (old layout kept), rolled_back or failed."""

    result: str
    factor: int  # the factor running afterwards
    generation: int
    detail: str = ""
    seconds: float = 0.0
    steps: list[str] = field(default_factory=list)


@dataclass
class ActuatorContext:
    store: MetadataStore
    journal: ActuationJournal
    lag: Callable[[], float | None] = lambda: None  # total records behind, now; None if unknown
    clock: Clock = SYSTEM_CLOCK


class Actuator(Protocol):
    name: str

    def act(self, plan: Plan) -> Outcome: ...

    def resume(self, entry: Entry) -> Outcome: ...


def number(name: str, value: Any, minimum: float = 0.0) -> float:
    if isinstance(value, str):  # a string is never read as a number here; say so
        raise ValueError(f"actuator setting {name} must be a number >= {minimum:g}, not {value!r}")
    try:
        return finite(value, f"actuator setting {name}", minimum, 7 * 86400)
    except ValueError:
        raise ValueError(f"actuator setting {name} must be a finite number >= {minimum:g} "
                         f"(seconds at most a week), not {value!r}") from None
