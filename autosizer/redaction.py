"""Secrets out of every line autosizer writes: logs, journals, `status`, error messages.

A URL's user-info (`user:password@`) is the only secret autosizer handles (Redis and Prometheus
URLs). It is replaced whole, found by scheme and the last `@` of the token, so a password with an
unencoded `/`, `#`, `?` or `@` (which `urllib.parse` would split wrongly) is hidden too.
"""

from __future__ import annotations

import re
from typing import Any

_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^\s'\"<>]*@")
MAX_VALUE_CHARS = 2000  # a logged or journaled string is cut here (a 5 MB value must not repeat)


def redact(text: str) -> str:
    """`text` with every URL's user-info replaced by `***`."""
    return _USERINFO.sub(r"\1***@", text) if "@" in text else text


def clip(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """`text` cut to `limit` characters, saying how much was left out."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more chars)"


def scrub(value: Any) -> Any:
    """`value` (strings inside dicts, lists and tuples too) redacted and clipped."""
    if isinstance(value, str):
        return clip(redact(value))
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub(v) for v in value)
    if isinstance(value, BaseException):
        return clip(redact(str(value)))
    return value


def scrub_event(_logger: object, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """structlog processor: every value of every log line scrubbed."""
    return {key: scrub(value) for key, value in event.items()}
