"""What no policy can beat on a trace: the yardstick beside a goal that is out of reach.

A goal such as "half the violation-seconds of `lag-threshold`" cannot be met where the work is
slower than the SLO at every factor (one hot key's records in one lane, CPU past the cores): the
least lateness any factor held from the start achieves is then above it. Tests and the trace
oracle benchmark read that floor from here, so both name the same bound.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from autosizer.elasticity import FACTORS
from autosizer.policies import Decision, Observation
from autosizer.simulator.engine import simulate
from autosizer.simulator.scores import score
from autosizer.simulator.traces import Trace


class Hold:
    """Never rescale: what a job achieves at its start factor."""

    name = "hold"

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]:
        return Decision(observation.factor, "hold"), state


def violation_floor(trace: Trace) -> tuple[int, int]:
    """(the least violation-seconds any factor held from the start achieves, the start factor's
    own): factors from 1 up to the first whose capacity is twice the trace's peak, or that adds
    no capacity (more buckets past that change nothing)."""
    job, peak = trace.job, float(np.max(trace.workload.rate))
    found: list[int] = []
    at_start = None
    for factor in FACTORS:
        held = score(simulate(trace.workload, replace(job, start_factor=factor), Hold())).violation_s
        found.append(held)
        at_start = held if factor == job.start_factor else at_start
        if job.capacity(factor) >= 2 * peak or (
                factor > 1 and job.capacity(factor) <= 1.001 * job.capacity(factor // 2)):
            break
    if at_start is None:
        at_start = score(simulate(trace.workload, job, Hold())).violation_s
    return min(found), at_start
