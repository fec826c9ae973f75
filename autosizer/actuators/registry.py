"""Actuators by name, through the `autosizer.actuators` entry-point group (built-ins included)."""

from __future__ import annotations

from typing import Any

from autosizer import plugins
from autosizer.actuators.base import Actuator, ActuatorContext

GROUP = "autosizer.actuators"


def actuator_names() -> list[str]:
    return plugins.names(GROUP)


def load_actuator(name: str, context: ActuatorContext, settings: dict[str, Any] | None = None) -> Actuator:
    """Instantiate a registered actuator; unknown names and bad settings raise ValueError."""
    return plugins.load(GROUP, "actuator", name, (context,), dict(settings or {}))
