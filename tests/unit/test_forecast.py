"""The input ahead (`policies/forecast.py`) and the peak memory (`policies/peak_memory.py`): the
pure series functions the default policy sizes and scales down by."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.policies.forecast import _sure_slope, forecast_input, trend
from autosizer.policies.peak_memory import recent_peaks, remember_peak, usual_level

TICK = 5.0


def ticks(n: int) -> tuple[float, ...]:
    return tuple(TICK * k for k in range(n))


def ramp(flat: int, rising: int, level: float = 1000.0, step: float = 100.0) -> tuple[float, ...]:
    """`flat` ticks at `level`, then `rising` ticks each `step` above the one before."""
    return (level,) * flat + tuple(level + step * (k + 1) for k in range(rising))


@pytest.mark.parametrize("rising", range(3, 21))
def test_a_ramp_is_projected_no_further_than_it_has_lasted(rising):
    """A ramp that has risen for a minute is as likely to stop within the next as to go on: it is
    projected over its own age (at least the restart), not the whole restart-and-horizon (run
    63's one-minute demo ramp projected two minutes on went 8 -> 16 -> 8)."""
    rates = ramp(10, rising)
    slope, age = 100.0 / TICK, rising * TICK
    ahead = forecast_input(ticks(len(rates)), rates, rates, False, restart_downtime_s=10.0, horizon_s=120.0)
    assert ahead - rates[-1] <= slope * max(10.0, age) + 1e-6
    if rising >= 5:  # five clean rises: a ramp, not a jump or noise
        assert ahead > rates[-1]


def test_nothing_is_projected_on_the_tick_after_a_wait():
    """The tick after a wait sees the rise whole: it is sized as read (a ramp shows in the tick
    after it)."""
    rates = ramp(10, 10)
    assert forecast_input(ticks(20), rates, rates, True, 10.0, 120.0) == rates[-1]
    assert forecast_input(ticks(20), rates, rates, False, 10.0, 120.0) > rates[-1]


@given(st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), min_size=1, max_size=40),
       st.booleans(), st.floats(min_value=0.0, max_value=600.0), st.floats(min_value=0.0, max_value=600.0))
def test_the_forecast_is_finite_and_never_below_the_input_now(rates, waited, restart_s, horizon_s):
    """A fall is left to the scale-down rules: the forecast only ever adds a rise to the input now."""
    series = tuple(rates)
    ahead = forecast_input(ticks(len(series)), series, series, waited, restart_s, horizon_s)
    assert math.isfinite(ahead) and ahead >= series[-1]


@given(st.lists(st.tuples(st.floats(min_value=0.1, max_value=600.0),
                          st.one_of(st.floats(min_value=0.0, max_value=1e6), st.just(math.nan))),
                min_size=1, max_size=200))
def test_the_peak_memory_forgets_only_what_is_older_than_it(readings):
    """Whatever the ticks read (gaps, NaN), the memory holds about twelve slices, none older than
    itself, and never forgets a peak younger than the memory less one slice."""
    memory, now, peaks, seen = 3600.0, 0.0, (), []
    for gap, rate in readings:
        now += gap
        peaks = remember_peak(peaks, now, rate, memory)
        seen.append((now, rate))
        assert len(peaks) <= 13 and all(start > now - memory for start, _ in peaks)
        kept = [r for t, r in seen if t > now - memory + memory / 12 and math.isfinite(r)]
        if kept:
            assert max(r for _, r in peaks) >= max(kept)
    assert recent_peaks(peaks, now, 0.0) == ()


def test_the_usual_level_is_the_second_highest_peak():
    """One burst is noise, a level reached twice is load."""
    assert usual_level(((0.0, 100.0), (300.0, 5000.0), (600.0, 120.0))) == 120.0
    assert usual_level(((0.0, 100.0),)) == 100.0
    assert usual_level(()) == 0.0


def test_a_jump_after_a_noisy_tick_that_read_more_is_still_projected():
    """The demo's step (session 21): 100/s read as 107, 102, 91, 102, then the step's first tick
    read 557/s in the rate window (1,010/s from the watermarks). The tick before it rose by noise,
    and "the tick before rose" was taken for a jump's first tick: the step was not projected, the
    job went 1 -> 4, and held at 4 at 84% (where one step to 8 would have left room). The tick
    before a jump's second is the jump's own first, a rise by a quarter or more, not any rise."""
    times = tuple(5.0 * k for k in range(8))
    demo = (83.8, 99.4, 98.0, 107.1, 101.8, 91.3, 101.9, 556.7)
    assert trend(times, demo) > 0
    # a jump seen over two ticks: its second is not projected (it is seen in full by then)
    assert trend(times, (100.0, 99.0, 101.0, 103.0, 101.0, 99.0, 550.0, 1200.0)) == 0.0
    # nor is a lone noisy tick a jump
    assert trend(times, (100.0, 99.0, 101.0, 103.0, 100.0, 97.0, 95.0, 118.0)) == 0.0
    # an outage's zeros are no jump, so the backfill after them is a first tick, and projects
    assert trend(times, (0.0,) * 7 + (6000.0,)) > 0
    # a daemon's sixth tick already projects a jump (the Kinesis demo's step: 281/s after 50/s)
    assert trend(times[:6], (50.0, 48.0, 52.0, 50.0, 49.0, 281.0)) > 0
    assert trend(times[:5], (50.0, 48.0, 52.0, 49.0, 281.0)) == 0.0  # five: too few to tell


@given(st.lists(st.floats(min_value=0.0, max_value=1e6, allow_nan=False), min_size=8, max_size=40))
def test_the_trend_is_a_finite_rise_no_steeper_than_the_last_tick(rates):
    """Whatever the input read, the projection never falls (a fall is left to the scale-down
    rules), is finite, and never rises faster than the last tick rose."""
    times = tuple(5.0 * k for k in range(len(rates)))
    rise = trend(times, tuple(rates))
    assert math.isfinite(rise) and rise >= 0
    assert rise <= max(0.0, (rates[-1] - rates[-2]) / 5.0) + 1e-9


def test_the_five_tick_slope_keeps_a_clean_ramp_and_drops_scatter():
    times = (0.0, 5.0, 10.0, 15.0, 20.0)
    assert _sure_slope(times, tuple(100.0 + 20.0 * t for t in times)) == pytest.approx(20.0)
    assert _sure_slope(times, (1200.0, 1080.0, 1300.0, 1150.0, 1250.0)) < 5.0
    assert _sure_slope((), ()) == _sure_slope((5.0, 5.0, 5.0), (1.0, 2.0, 3.0)) == 0.0  # no line to fit
