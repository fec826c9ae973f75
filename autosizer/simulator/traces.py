"""The trace suite: named workload + job pairs in `traces/*.toml`, shared by tests and the CLI.

A trace file is data, so an operator can add one (or point `--trace` at a path) without code:
`description`, a `[workload]` table (`kind` plus that workload's settings), and a `[job]` table
(JobModel's settings, with `[job.skew]` for KeySkew's).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from autosizer.simulator import workloads
from autosizer.simulator.job import JobModel, KeySkew
from autosizer.simulator.workloads import Workload

TRACES = Path(__file__).with_name("traces")


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


def load_trace(name_or_path: str) -> Trace:
    path = Path(name_or_path)
    if not path.suffix:
        path = TRACES / f"{name_or_path}.toml"
    if not path.is_file():
        raise ValueError(f"unknown trace {name_or_path!r}: use a .toml path or one of {', '.join(trace_names())}")
    try:
        data = tomllib.loads(path.read_text())
        spec = dict(data["workload"])
        job = dict(data.get("job", {}))
    except (tomllib.TOMLDecodeError, KeyError) as exc:
        raise ValueError(f"{path}: {exc}; a trace needs a [workload] table with a kind") from None
    skew = KeySkew(**job.pop("skew", {}))
    for name in ("partition_weights", "hot_share_table_measured", "hot_shares_known_at_start"):  # TOML arrays are lists
        if isinstance(job.get(name), list):
            job[name] = tuple(tuple(v) if isinstance(v, list) else v for v in job[name])
    if spec.get("kind") == "csv" and "path" in spec and not Path(str(spec["path"])).is_absolute():
        spec["path"] = str(path.parent / str(spec["path"]))  # beside the trace, not the cwd
    try:
        model = JobModel(**job, skew=skew)
    except TypeError as exc:
        raise ValueError(f"{path}: [job] {exc}") from None
    workload = workloads.build(spec.pop("kind", ""), **spec)
    return Trace(path.stem, data.get("description", ""), workload, model)
