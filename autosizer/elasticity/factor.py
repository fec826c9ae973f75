"""The elasticity factor: how many key buckets each partition is cut into.

Only powers of two are allowed, because `h mod 2F` determines `h mod F`: a split then hands each
child a subset of its parent's keys and a merge unions siblings (DESIGN invariant 1).
"""

from __future__ import annotations

MIN_FACTOR = 1
MAX_FACTOR = 1024
FACTORS: tuple[int, ...] = tuple(1 << i for i in range(11))


def validate_factor(factor: object) -> int:
    """Return `factor` as an int, or raise ValueError naming the allowed values."""
    if isinstance(factor, bool) or not isinstance(factor, int) or factor not in FACTORS:
        allowed = ", ".join(str(f) for f in FACTORS)
        raise ValueError(
            f"invalid elasticity factor {factor!r}: use a power of two from 1 to 1024 ({allowed})"
        )
    return factor
