"""Operator overrides: Redis keys under the job's prefix, read at every tick, expiring by TTL.

  override:factor      pin the factor (a power of two); the policy is not consulted
  override:pause       "true": decide and journal, never actuate
  override:min_factor  raise the guards' floor
  override:max_factor  lower the guards' ceiling
  override:rescale     "true": act on the next decision now, skipping cooldown and scale-down
                       delay; deleted once a tick has acted on it

A value that does not parse is ignored (as if unset) and reported, so a typo never steers the job.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from autosizer.elasticity import validate_factor
from autosizer.elasticity.keys import OVERRIDE_NAMES
from autosizer.elasticity.store import MetadataStore
from autosizer.policies.guards import Guards
from autosizer.redaction import clip

NAMES = OVERRIDE_NAMES
MAX_VALUE_CHARS = 64  # a longer value is garbage; it is refused, and only its start is echoed
TRUE, FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class Overrides:
    factor: int | None = None
    pause: bool = False
    min_factor: int | None = None
    max_factor: int | None = None
    rescale: bool = False
    errors: tuple[str, ...] = ()
    raw: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # name -> (value, ttl ms)

    def guards(self, guards: Guards) -> Guards:
        """The configured guards under these overrides."""
        changes: dict[str, Any] = {}
        if self.min_factor is not None:
            changes["min_factor"] = self.min_factor
        if self.max_factor is not None:
            changes["max_factor"] = self.max_factor
        if self.rescale:
            changes.update(cooldown_s=0.0, scale_down_delay_s=0.0)
        if "min_factor" in changes and "max_factor" not in changes:
            changes["max_factor"] = max(guards.max_factor, changes["min_factor"])
        if "max_factor" in changes and "min_factor" not in changes:
            changes["min_factor"] = min(guards.min_factor, changes["max_factor"])
        return replace(guards, **changes)


def parse(raw: dict[str, tuple[str, int | None]]) -> Overrides:
    """Overrides from key values; each bad value becomes one line in `errors`."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, (text, _) in sorted(raw.items()):
        try:
            if len(text) > MAX_VALUE_CHARS:
                raise ValueError(f"{len(text)} characters; a value is a few characters at most")
            values[name] = _PARSERS[name](text.strip())
        except ValueError as exc:
            errors.append(f"override {name}={clip(text, 40)!r} ignored: {exc}")
    low, high = values.get("min_factor"), values.get("max_factor")
    if low is not None and high is not None and low > high:
        errors.append(f"overrides min_factor={low} and max_factor={high} ignored: min is above max; "
                      "clear one with `autosizer override clear`")
        values.pop("min_factor"), values.pop("max_factor")
    return Overrides(**values, errors=tuple(errors), raw=dict(raw))


def _factor(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise ValueError("not a whole number; use a power of two like 8")
    return validate_factor(int(text))


def _flag(text: str) -> bool:
    if text.lower() in TRUE:
        return True
    if text.lower() in FALSE:
        return False
    raise ValueError("use true or false")


_PARSERS = {"factor": _factor, "pause": _flag, "min_factor": _factor, "max_factor": _factor,
            "rescale": _flag}


class OverrideStore:
    """Reads and writes the override keys of one job."""

    def __init__(self, store: MetadataStore):
        self.store, self.redis = store, store.redis

    def key(self, name: str) -> str:
        return self.store.keys.override(name)

    def read(self) -> Overrides:
        def fetch() -> dict[str, tuple[str, int | None]]:
            pipe = self.redis.pipeline(transaction=False)
            for name in NAMES:
                pipe.get(self.key(name))
                pipe.pttl(self.key(name))
            replies = pipe.execute()
            found = {}
            for name, value, ttl in zip(NAMES, replies[::2], replies[1::2], strict=True):
                if value is not None:
                    found[name] = (value.decode(errors="replace"), ttl if ttl >= 0 else None)
            return found

        return parse(self.store.call(fetch))

    def set(self, name: str, value: str, ttl_s: float | None = None) -> None:
        """Validated like the daemon reads it, so the CLI refuses what the daemon would ignore."""
        if name not in NAMES:
            raise ValueError(f"unknown override {name!r}: use one of {', '.join(NAMES)}")
        found = parse({name: (value, None)})
        if found.errors:
            raise ValueError(found.errors[0])
        if name in ("min_factor", "max_factor"):  # the bounds in force, with this one replaced
            current = self.read()
            bounds = {n: (str(getattr(current, n)), None) for n in ("min_factor", "max_factor")
                      if getattr(current, n) is not None}
            together = parse({**bounds, name: (value, None)})
            if together.errors:
                raise ValueError(together.errors[0])
        px = None if ttl_s is None else max(1, int(ttl_s * 1000))
        self.store.call(lambda: self.redis.set(self.key(name), value, px=px))

    def clear(self, name: str | None = None) -> int:
        names = NAMES if name is None else (name,)
        if name is not None and name not in NAMES:
            raise ValueError(f"unknown override {name!r}: use one of {', '.join(NAMES)}")
        return int(self.store.call(lambda: self.redis.delete(*[self.key(n) for n in names])))
