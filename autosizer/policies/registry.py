"""Policies by name, through the `autosizer.policies` entry-point group (built-ins included)."""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from autosizer.policies.base import Policy

GROUP = "autosizer.policies"


def policy_names() -> list[str]:
    return sorted(ep.name for ep in entry_points(group=GROUP))


def load_policy(name: str, settings: dict[str, Any] | None = None) -> Policy:
    """Instantiate a registered policy; unknown names and bad settings raise ValueError."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise ValueError(f"unknown policy {name!r}: installed policies are {', '.join(policy_names())}")
    cls = found[0].load()
    try:
        return cls(**(settings or {}))
    except TypeError as exc:
        raise ValueError(f"policy {name!r}: {exc}; see its settings in the README") from None
