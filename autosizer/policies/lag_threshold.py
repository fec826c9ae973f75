"""`lag-threshold`: KEDA's Kafka scaler rule, the simple baseline.

Workers ∝ total lag / threshold, rounded up to a power-of-two factor. KEDA caps at the partition
count; here the cap is the largest factor, which is the point of virtual tasks.
"""

from __future__ import annotations

import math
from typing import Any

from autosizer.policies.base import Decision, Observation, factor_for, positive


class LagThreshold:
    name = "lag-threshold"

    def __init__(self, lag_threshold: float = 1000.0):
        self.lag_threshold = positive("lag_threshold", lag_threshold)

    def decide(self, observation: Observation, state: Any = None) -> tuple[Decision, Any]:
        workers = math.ceil(observation.lag_records / self.lag_threshold)
        factor = factor_for(workers, observation.partition_count)
        return Decision(factor, f"lag {observation.lag_records:.0f} records / threshold "
                                f"{self.lag_threshold:.0f} = {workers} workers",
                        {"workers": workers}), state
