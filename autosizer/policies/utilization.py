"""`utilization`: Flink's autoscaler / DS2 rule, the strong baseline.

True processing rate of a virtual task = its processed rate / its busy fraction. The target
capacity covers the input at the target utilization, plus the lag and the input that piles up
during a restart, both caught up within `catch_up_seconds`. The factor is the smallest power of
two whose virtual tasks cover it.
"""

from __future__ import annotations

from typing import Any

from autosizer.policies.base import (
    Decision,
    Observation,
    factor_for,
    fraction,
    positive,
)


class Utilization:
    name = "utilization"

    def __init__(self, target_utilization: float = 0.7, catch_up_seconds: float = 300.0):
        self.target = fraction("target_utilization", target_utilization)
        self.catch_up = positive("catch_up_seconds", catch_up_seconds)

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]:
        per_task = observation.task_capacity
        if per_task is None:
            return Decision(observation.factor, "hold: no busy virtual task to measure capacity"), state
        target = (
            observation.input_rate / self.target
            + observation.lag_records / self.catch_up
            + observation.input_rate * observation.restart_downtime_s / self.catch_up
        )
        workers = target / per_task
        factor = factor_for(workers, observation.partition_count)
        return Decision(factor, f"target {target:.0f} records/s at {per_task:.0f}/s per task "
                                f"= {workers:.1f} tasks",
                        {"target_rate": target, "task_rate": per_task, "workers": workers}), state
