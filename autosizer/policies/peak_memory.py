"""The peak memory: the highest input per slice of the last hours, which a scale-down must fit
(a lull or an outage is not less work, and what it held back comes back). One number a slice
stands for all its ticks: the policy's state stays the same size whatever the tick."""

from __future__ import annotations

import heapq
import math


def remember_peak(peaks: tuple[tuple[float, float], ...], now: float, rate: float,
                  memory_s: float) -> tuple[tuple[float, float], ...]:
    """The highest input per twelfth of `memory_s`, the slices older than that dropped: twelve
    numbers stand for the memory's ticks, however many there were (NaN readings are left out)."""
    slice_s = memory_s / 12
    if peaks and peaks[-1][0] > now - slice_s and peaks[0][0] > now - memory_s:  # most ticks
        if not rate > peaks[-1][1]:  # not higher (or NaN): nothing to change
            return peaks
        return (*peaks[:-1], (peaks[-1][0], rate))
    kept = list(recent_peaks(peaks, now, memory_s))
    if not math.isfinite(rate):
        return tuple(kept)
    if kept and kept[-1][0] > now - slice_s:
        kept[-1] = (kept[-1][0], max(kept[-1][1], rate))
    else:
        kept.append((now, rate))
    return tuple(kept)


def recent_peaks(peaks: tuple[tuple[float, float], ...], now: float,
                 memory_s: float) -> tuple[tuple[float, float], ...]:
    """The slices of `peaks` that began within the last `memory_s` (none when it is <= 0)."""
    return tuple(p for p in peaks if p[0] > now - memory_s)


def usual_level(peaks: tuple[tuple[float, float], ...]) -> float:
    """The input's usual level: the second-highest of the slices' peaks (0 with none), a level it
    reached twice in the memory: one burst is noise, a burst that recurs is load."""
    highest = heapq.nlargest(2, (r for _, r in peaks))
    return highest[-1] if highest else 0.0
