"""Compile the simulator's kernels into numba's on-disk cache ahead of their first use.

A fresh checkout compiles every kernel variant on its first simulation (about 25 s of one core),
and `make test`'s workers each did so at once on a fresh machine. `make setup` runs this once;
with the cache in place it takes about a second. `python -m autosizer.simulator.warm`.
"""

from __future__ import annotations

import time

import numpy as np
import structlog

from autosizer.elasticity import FACTORS
from autosizer.policies import load_policy
from autosizer.policies.day_plan import day_plan
from autosizer.simulator import workloads
from autosizer.simulator.engine import simulate
from autosizer.simulator.job import JobModel

log = structlog.get_logger("autosizer.simulator.warm")

# A plain job, a re-shard (a split whose parent closed) and a Kafka expansion that waited: each
# holds the kernels to a different set of limits, and each runs continuous and in batches.
_LAYOUTS = {
    "plain": {},
    "split": {"partitions": 3, "partition_weights": (1.0, 0.0, 0.0), "layout_changes_s": (120.0,),
              "layout_weights": ((0.0, 0.5, 0.5),), "layout_closed_s": (110.0,)},
    "expansion": {"partitions": 4, "partition_weights": (0.5, 0.5, 0.0, 0.0), "layout_changes_s": (120.0,),
                  "layout_weights": ((0.25, 0.25, 0.25, 0.25),), "layout_waits_s": (30.0,),
                  "layout_restarts": (True,)},
}


def compile_kernels() -> None:
    """Run one short simulation of every kernel variant (the default policy over a step), and
    plan one day (the learned day's planner is compiled where the simulator runs)."""
    began = time.monotonic()
    load = workloads.step(before=100, after=600, at=60, seconds=240)
    for layout in _LAYOUTS.values():
        for batch_seconds in (0.0, 1.0):
            job = JobModel(process_seconds=0.005, batch_seconds=batch_seconds, **layout)
            simulate(load, job, load_policy("autosizer"), tick_s=15)
    capacities = np.asarray(FACTORS, dtype=np.float64) * 100.0
    day_plan(np.array([50.0, 400.0, np.nan]), capacities, 1, 300.0, 3600.0)
    log.info("simulator kernels compiled", seconds=round(time.monotonic() - began, 1))


if __name__ == "__main__":
    compile_kernels()
