"""Numbers from users (CLI flags, config, environment, override keys), checked in one place.

Every parser here accepts ASCII only (Python's int() and float() also take '٣', '1_000' and
'  +5 '), refuses NaN and infinities, and checks a range, so a bad value is one line naming the
field, what it got and what to give instead. A file a command will write is checked the same
way, before the work.
"""

from __future__ import annotations

import argparse
import math
import numbers
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

MAX_OFFSET = 2**63 - 1  # Kafka offsets are signed 64-bit
MAX_SEQUENCE = 10**56 - 1  # Kinesis sequence numbers have up to 56 digits
_WHOLE = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def whole(text: Any, field: str, low: int | None = None, high: int | None = None) -> int:
    """A whole number in [low, high]; ValueError naming `field` otherwise."""
    value = _parsed(text, field, _WHOLE, int, "a whole number like 8")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be a whole number, not {_show(text)}")
    return _in_range(value, field, low, high)


def finite(value: Any, field: str, low: float | None = None, high: float | None = None) -> float:
    """A finite number in [low, high] (a string is parsed); ValueError naming `field` otherwise."""
    number = _parsed(value, field, _DECIMAL, float, "a number like 30")
    if isinstance(number, bool) or not isinstance(number, (int, float)):
        raise ValueError(f"{field} must be a number, not {_show(value)}")
    if not math.isfinite(number):
        raise ValueError(f"{field} must be a finite number, not {_show(value)}")
    return float(_in_range(number, field, low, high))


def is_real(value: Any) -> bool:
    """A value already typed (a TOML number, a keyword argument) that is a real number: numpy's
    count, a bool does not (TOML's `true` would pass as 1). Finiteness and range are the caller's."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str, field: str, example: str = "90s, 30m, 2h or 1d") -> float:
    """Seconds from a finite number with an optional unit (s, m, h, d; seconds without one);
    ValueError naming `field` otherwise. The caller checks the range it allows."""
    number, unit = (text[:-1], text[-1]) if text and text[-1] in UNITS else (text, "s")
    try:
        return finite(number, field) * UNITS[unit]
    except ValueError:
        raise ValueError(f"{field} {text[:40]!r} is not a duration: use {example}") from None


def output_file(path: str, field: str) -> Path:
    """A file a command writes when its work is done, checked before the work starts: a simulation
    of minutes or a fit of a long run must not end in a traceback because a directory is missing."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{field} {path!r} is a directory: name a file in it")
    parent = target.parent
    if not parent.is_dir():
        raise ValueError(f"{field} {path!r}: no directory {str(parent)!r}; create it or write elsewhere")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{field} {path!r}: the directory {str(parent)!r} is not writable; write elsewhere")
    return target


def _parsed(value: Any, field: str, pattern: re.Pattern[str], convert: Callable[[str], Any],
            what: str) -> Any:
    """A string converted when it is all `pattern` (ASCII only); anything else unchanged."""
    if not isinstance(value, str):
        return value
    stripped = value.strip()
    if not pattern.fullmatch(stripped):
        raise ValueError(f"{field} must be {what}, not {_show(value)}")
    return convert(stripped)


def argtype(field: str, kind: Callable[..., Any], low: float | None = None,
            high: float | None = None) -> Callable[[str], Any]:
    """An argparse `type=` from `whole` or `finite`."""

    def parse(text: str) -> Any:
        try:
            return kind(text, field, low, high)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _in_range(value: Any, field: str, low: float | None, high: float | None) -> Any:
    if low is not None and value < low:
        raise ValueError(f"{field} must be >= {_bound(low)}, not {_show(value)}")
    if high is not None and value > high:
        raise ValueError(f"{field} must be <= {_bound(high)}, not {_show(value)}")
    return value


def _bound(value: float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
