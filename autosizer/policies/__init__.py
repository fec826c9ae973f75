"""Scaling policies: pure functions from an observation window to a desired factor and a reason.

Policies import only `autosizer.elasticity`. They are found by name through the entry-point group
`autosizer.policies`, so a third-party package adds one without touching the core.
"""

from autosizer.policies.base import (
    Decision,
    Observation,
    PartitionStats,
    Policy,
    TaskStats,
    Watermarks,
)
from autosizer.policies.guards import Guards
from autosizer.policies.registry import load_policy, policy_names

__all__ = [
    "Decision",
    "Guards",
    "Observation",
    "PartitionStats",
    "Policy",
    "TaskStats",
    "Watermarks",
    "load_policy",
    "policy_names",
]
