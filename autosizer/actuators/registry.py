"""Actuators by name, through the `autosizer.actuators` entry-point group (built-ins included)."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from autosizer.actuators.base import Actuator, ActuatorContext

GROUP = "autosizer.actuators"


def actuator_names() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def load_actuator(name: str, context: ActuatorContext, settings: dict[str, Any] | None = None) -> Actuator:
    """Instantiate a registered actuator; unknown names and bad settings raise ValueError."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise ValueError(f"unknown actuator {name!r}: installed actuators are {', '.join(actuator_names())}")
    cls = found[0].load()
    try:
        return cls(context, **(settings or {}))
    except TypeError as exc:
        raise ValueError(f"actuator {name!r}: {exc}; see its settings in the README") from None
