"""The daemon's tick schedule: ticks stamped with their due times, so tick-to-tick timers read
whole intervals as the simulator's ticks do, whatever milliseconds the scheduler was late by."""

from __future__ import annotations

import os

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autosizer.clock import ON_TIME_S, TickSchedule
from autosizer.policies import Decision, Guards
from tests.unit.test_policies import observe

EXAMPLES = int(os.environ.get("AUTOSIZER_PROPERTY_EXAMPLES", "1200"))


@settings(max_examples=EXAMPLES, deadline=None)
@given(start=st.floats(1e9, 4e9), interval=st.integers(1, 3600), ticks=st.integers(0, 100_000),
       late=st.floats(0.0, 1.0), first_late=st.floats(0.0, 1.0))
@example(start=2**31 - 1e-7, interval=1, ticks=1, late=0.0, first_late=0.0)  # across a power of two
def test_a_tick_on_time_is_stamped_whole_intervals_after_the_first(start, interval, ticks, late, first_late):
    schedule = TickSchedule(start, float(interval))
    slack = min(ON_TIME_S, interval / 4)
    first = schedule.stamp(schedule.start + first_late * slack)
    later = schedule.stamp(schedule.start + ticks * interval + late * slack)
    assert first == schedule.start and abs(schedule.start - start) <= 1 / 2048
    assert later - first == ticks * interval  # exactly: no rounding left to decide a timer


def test_a_tick_that_began_late_keeps_the_time_it_ran():
    schedule = TickSchedule(1_800_000_000.25, 15.0)
    assert schedule.stamp(1_800_000_000.25 + 30.9) == 1_800_000_000.25 + 30.0  # on time: due
    assert schedule.stamp(1_800_000_000.25 + 35.0) == 1_800_000_000.25 + 35.0  # after an actuation
    assert TickSchedule(0.0, 2.0).stamp(0.6) == 0.6  # a quarter of a short interval is the slack


def test_a_scale_down_waits_its_delay_to_the_tick_whatever_the_ticks_jitter():
    """Run 163: the tick 20 s after the one that started the delay collected its metrics a few
    milliseconds sooner into its own, read "wanted for 20s < 20s" and held a tick longer than the
    replay."""
    guards, start = Guards(cooldown_s=0, scale_down_delay_s=20), 1_795_906_948.0
    began = [start + 5 * k + late for k, late in enumerate((0.0124, 0.0121, 0.0119, 0.0122, 0.0114))]

    def first_scale_down(times):
        state = None
        for t in times:
            decision, state = guards.apply(observe(factor=8, time=t), Decision(1, "input fits 1"), state)
            if decision.factor == 1:
                return t - times[0]
        return None

    assert first_scale_down(began) is None  # as the wall clock stamped them: 19.999 s < 20 s
    schedule = TickSchedule(start, 5.0)
    assert first_scale_down([schedule.stamp(t) for t in began]) == 20.0
