"""Comparison tables (terminal and markdown) and the timeline PNG of simulated runs."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from autosizer.controller.table import format_table
from autosizer.simulator.engine import Run
from autosizer.simulator.scores import Score

COLUMNS = ("policy", "violation_s", "lag_p50_s", "lag_p99_s", "task_hours", "slot_hours",
           "rescales", "reversals_1h", "converge_rescales")


def table(scores: Sequence[Score], markdown: bool = False, first: str = "policy") -> str:
    rows = [s.row() for s in scores]
    columns = (first, *COLUMNS[1:]) if first != "policy" else COLUMNS
    if not markdown:
        return format_table(rows, columns)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join("-" if r.get(c) is None else str(r.get(c)) for c in columns) + " |"
              for r in rows]
    return "\n".join(lines)


def _bins(series: np.ndarray, points: int, how: str) -> tuple[np.ndarray, np.ndarray]:
    """Downsample to at most `points`: a week at 1 s is 600k points, a plot needs 2k."""
    width = max(1, -(-series.size // points))
    usable = series.size // width * width
    shaped = series[:usable].reshape(-1, width)
    values = shaped.max(axis=1) if how == "max" else shaped.mean(axis=1)
    return np.arange(values.size) * width, values


def plot(runs: Sequence[Run], path: str | Path, slo_s: float = 30.0, title: str = "") -> Path:
    """One row per policy: input rate with the factor over it, and lag in seconds with the SLO."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = runs[0].rate.size > 2 * 3600
    unit, scale = ("h", 3600.0) if hours else ("min", 60.0)
    fig, axes = plt.subplots(len(runs), 2, figsize=(13, 2.6 * len(runs)), squeeze=False,
                             sharex=True)
    for row, run in zip(axes, runs, strict=True):
        t, rate = _bins(run.rate, 2000, "mean")
        _, factor = _bins(run.factor.astype(np.float64), 2000, "max")
        _, lag = _bins(run.lag_seconds, 2000, "max")
        left, right = row
        left.plot(t / scale, rate, color="tab:blue", lw=0.8)
        left.set_ylabel("input records/s", color="tab:blue")
        twin = left.twinx()
        twin.step(t / scale, factor, color="tab:red", lw=1.2, where="post")
        twin.set_ylabel("factor", color="tab:red")
        twin.set_yscale("log", base=2)
        left.set_title(f"{run.policy}: {len(run.rescales)} rescales", loc="left", fontsize=10)
        right.plot(t / scale, lag, color="tab:purple", lw=0.8)
        right.axhline(slo_s, color="grey", ls="--", lw=0.8)
        right.set_ylabel("worst lag (s)")
        right.set_yscale("symlog", linthresh=1.0)
        right.set_ylim(bottom=0)
        right.set_title(f"lag, SLO {slo_s:g}s", loc="left", fontsize=10)
    for ax in axes[-1]:
        ax.set_xlabel(f"time ({unit})")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
