"""Policies by name, through the `autosizer.policies` entry-point group (built-ins included)."""

from __future__ import annotations

from typing import Any

from autosizer import plugins
from autosizer.policies.base import Policy

GROUP = "autosizer.policies"


def policy_names() -> list[str]:
    return plugins.names(GROUP)


def load_policy(name: str, settings: dict[str, Any] | None = None) -> Policy:
    """Instantiate a registered policy; unknown names and bad settings raise ValueError."""
    return plugins.load(GROUP, "policy", name, (), dict(settings or {}))
