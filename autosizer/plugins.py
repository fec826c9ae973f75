"""Plug-ins (policies, actuators) by name through entry-point groups, built-ins included.

Settings are checked against the plug-in's constructor before it is called, so a typo is one line
listing the settings it has, not a Python TypeError."""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any


def names(group: str) -> list[str]:
    return sorted(ep.name for ep in entry_points(group=group))


def load(group: str, kind: str, name: str, args: tuple[Any, ...], settings: dict[str, Any]) -> Any:
    """Instantiate plug-in `name` of `group`; unknown names and settings raise ValueError."""
    found = [ep for ep in entry_points(group=group) if ep.name == name]
    if not found:
        plural = "policies" if kind == "policy" else f"{kind}s"
        raise ValueError(f"unknown {kind} {name!r}: installed {plural} are {', '.join(names(group))}")
    cls = found[0].load()
    known = settings_of(cls)
    if known is not None:
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"{kind} {name!r} has no setting {unknown[0]!r}: its settings are "
                             f"{', '.join(sorted(known)) or '(none)'}")
    try:
        return cls(*args, **settings)
    except TypeError as exc:
        raise ValueError(f"{kind} {name!r}: {exc}; see its settings in the README") from None


def settings_of(cls: type) -> set[str] | None:
    """The keyword settings `cls` takes, following `**settings` passed on to base classes (None
    when it takes any)."""
    known: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        params = list(inspect.signature(init).parameters.values())[1:]  # self
        known |= {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
                  and p.default is not p.empty}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return known
    return None
