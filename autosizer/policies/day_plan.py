"""The day plan: the cheapest run of factors through the coming hours the input's history expects.

Reacting to each level of a daily curve costs a rescale per factor it crosses: up through 2, 4,
8, 16 and 32 in the morning, down the same ladder at night. A plan that sees the hours ahead
(`InputHistory.profile`) can skip a level the job would hold only briefly: a rescale is priced as
holding the plan's highest factor for `rescale_cost_s`, and the plan is the run of factors that
covers every slot's expected peak at the lowest total of task-seconds plus rescale prices
(a shortest path over slots × factors, from the current factor). The policy follows its first
steps and checks each against the input it measures, so a plan never holds a job too small.

Pure: no I/O.
"""

from __future__ import annotations

import functools
import sys

import numpy as np

from autosizer.elasticity import FACTORS


def day_plan(expected: np.ndarray, capacities: np.ndarray, current: int, slot_s: float,
             rescale_cost_s: float) -> np.ndarray:
    """Per slot of `expected` (records/s, NaN unknown), the factor the cheapest plan runs.

    `capacities` is what each factor of FACTORS takes at the utilization the plan aims for. A
    slot no factor covers needs the largest; an unknown slot needs what the slot before it did
    (the plan assumes the level holds, neither a ramp nor a lull it has no record of)."""
    factors = np.asarray(FACTORS, dtype=np.float64)
    levels = _filled(expected)
    enough = capacities[None, :] >= levels[:, None]
    enough[:, int(capacities.argmax())] = True
    need = np.where(enough, 0.0, np.inf)
    run_cost = factors * slot_s
    highest = factors[int(enough[levels.argmax()].argmax())] if levels.size else current
    price = max(float(highest), float(current)) * rescale_cost_s
    return np.asarray(FACTORS, dtype=np.int64)[_path()(run_cost[None, :] + need, FACTORS.index(current)
                                                       if current in FACTORS else 0, price)]


def _path():
    """`_cheapest` compiled where numba is loaded already (the simulator's kernels load it: a
    week plans 2,000 times, 0.005 ms a plan compiled, 0.6 ms not), else as it is: a daemon plans
    once per 5-minute slot, and loading numba and LLVM for that took its RSS from 83 to 200 MB."""
    return _compiled() if "numba" in sys.modules else _cheapest


@functools.cache
def _compiled():  # pragma: no cover
    from numba import njit
    return njit(cache=True, nogil=True)(_cheapest)


def _cheapest(step, start, price):
    """Indices of the cheapest path: step[t, f] is slot t's cost at f, a change costs `price`."""
    slots, count = step.shape
    cost = step[0].copy()
    for f in range(count):
        if f != start:
            cost[f] += price
    came = np.zeros((slots, count), dtype=np.int64)
    for t in range(1, slots):
        best = 0
        for f in range(1, count):
            if cost[f] < cost[best]:
                best = f
        switch = cost[best] + price
        for f in range(count):
            if cost[f] <= switch:
                came[t, f] = f
            else:
                came[t, f] = best
                cost[f] = switch
            cost[f] += step[t, f]
    at = 0
    for f in range(1, count):
        if cost[f] < cost[at]:
            at = f
    path = np.empty(slots, dtype=np.int64)
    for t in range(slots - 1, -1, -1):
        path[t] = at
        at = came[t, at]
    return path


def _filled(expected: np.ndarray) -> np.ndarray:
    """NaN slots take the last known level before them (the first known one at the start, 0 if none)."""
    values = np.asarray(expected, dtype=np.float64)
    known = ~np.isnan(values)
    if not known.any():
        return np.zeros(values.shape)
    index = np.where(known, np.arange(values.size), 0)
    np.maximum.accumulate(index, out=index)
    filled = values[index]
    filled[: int(known.argmax())] = values[int(known.argmax())]
    return filled
