"""InputHistory: what the recorded days lead a policy to expect, and when it says nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autosizer.policies.history import DAY_S, InputHistory

HOUR = 3600


def days_of(history: InputHistory, days: range, rate_at) -> InputHistory:
    """Record one sample a minute of `rate_at(seconds into the day, day)`."""
    for day in days:
        for second in range(0, DAY_S, 60):
            history.record(day * DAY_S + second, rate_at(second, day))
    return history


def office(second: float, day: int = 0) -> float:
    return 10_000.0 if 8 * HOUR <= second < 18 * HOUR else 500.0


def test_nothing_is_expected_before_two_days_are_on_record():
    history = days_of(InputHistory(), range(1), office)
    assert history.expected_peak(1 * DAY_S + 7 * HOUR, 3600) is None
    days_of(history, range(1, 2), office)
    assert history.expected_peak(2 * DAY_S + 7.5 * HOUR, 3600) == 10_000.0


def test_the_window_ahead_is_read_from_the_same_times_of_day():
    history = days_of(InputHistory(), range(3), office)
    today = 3 * DAY_S
    assert history.expected_peak(today + 6 * HOUR, 3600) == 500.0, "the ramp is two hours away"
    assert history.expected_peak(today + 7.5 * HOUR, 3600) == 10_000.0
    assert history.expected_peak(today + 23.5 * HOUR, 3600) == 500.0, "past midnight: the next day"


def test_a_weekday_is_expected_from_the_same_weekday_once_a_week_is_on_record():
    def weekdays(second: float, day: int) -> float:
        return office(second) if day % 7 < 5 else 500.0  # days 5 and 6 are a weekend

    history = days_of(InputHistory(), range(8), weekdays)
    # Day 12 is a weekend day: the three days before are weekdays, the same day a week back is not.
    days_of(history, range(8, 12), weekdays)
    assert history.expected_peak(12 * DAY_S + 9 * HOUR, 3600) == 500.0


def test_a_day_that_breaks_the_pattern_is_not_trusted():
    history = days_of(InputHistory(), range(3), office)
    holiday = 3 * DAY_S
    for second in range(0, 11 * HOUR, 60):  # 08:00-11:00 brought nothing like the usual 10,000/s
        history.record(holiday + second, 500.0)
    assert history.expected_peak(holiday + 11 * HOUR, 3600) is None
    for second in range(11 * HOUR, 13 * HOUR, 60):  # the afternoon is an office day again
        history.record(holiday + second, 10_000.0)
    assert history.expected_peak(holiday + 13 * HOUR, 3600) == 10_000.0


def test_a_day_busier_than_the_days_is_still_believed():
    """What the days expected is a floor on a busier day: the policy still scales up ahead of
    them and keeps the factor they would need again (the input above it is sized as it comes)."""
    history = days_of(InputHistory(), range(3), office)
    busy = 3 * DAY_S
    for second in range(0, 11 * HOUR, 60):  # 08:00-11:00 brought 25,000/s, not the usual 10,000/s
        history.record(busy + second, 25_000.0 if second >= 8 * HOUR else 500.0)
    assert history.broken(busy + 11 * HOUR) is None
    assert history.expected_peak(busy + 11 * HOUR, 3600) == 10_000.0



def test_the_history_says_why_it_cannot_say():
    """Each fallback in words: too few days, a time of day never seen, a day that broke the pattern."""
    history = days_of(InputHistory(), range(1), office)
    assert history.doubt(DAY_S + 7 * HOUR) == "1 of the last three days on record, 2 needed"
    days_of(history, range(1, 3), office)
    today = 3 * DAY_S
    assert history.doubt(today + 7 * HOUR) is None and history.broken(today + 7 * HOUR) is None
    for second in range(0, 10 * HOUR, 60):  # 08:00-10:00 brought 500/s, not 10,000/s
        history.record(today + second, 500.0)
    why = history.doubt(today + 10 * HOUR)
    assert why == history.broken(today + 10 * HOUR)
    assert why is not None and "peaked at 500/s where they had 10000/s" in why
    sparse = InputHistory()
    for day in range(3):  # only the mornings seen
        for second in range(0, 6 * HOUR, 60):
            sparse.record(day * DAY_S + second, 500.0)
    assert sparse.doubt(3 * DAY_S + 12 * HOUR) == "the days on record never saw this time of day"

def test_a_ramp_due_later_in_the_slot_now_in_progress_does_not_break_the_day():
    """The days' 08:00 slot peaked at the ramp two minutes in; today's has seen 30 quiet seconds.
    Only completed slots are judged, so the history still speaks at 08:00:30."""
    def late(second: float, day: int = 0) -> float:
        return 10_000.0 if 8 * HOUR + 120 <= second < 18 * HOUR else 500.0

    history = days_of(InputHistory(), range(3), late)
    today = 3 * DAY_S
    for second in range(0, 8 * HOUR + 31, 30):
        history.record(today + second, late(second))
    assert history.expected_peak(today + 8 * HOUR + 30, 3600) == 10_000.0

def test_a_step_a_little_later_than_the_days_does_not_break_the_day():
    """The days stepped to 1,200/s two minutes before the end of a slot; today steps 10 s
    before it, and the daemon's rate window has read a third of it by the slot's last tick (run
    108: 566/s for 1,200/s). At the slot boundary that slot is judged: today is less than a slot
    later, which is no shortfall, and the day plan stays on."""
    def step(at: float):
        return lambda second, day=0: 1_200.0 if 9 * HOUR - at <= second < 10 * HOUR else 100.0

    history = days_of(InputHistory(), range(3), step(120))
    today = 3 * DAY_S
    for second in range(0, 9 * HOUR - 10, 60):
        history.record(today + second, 100.0)
    history.record(today + 9 * HOUR - 5, 400.0)  # a third of the step, read 5 s before the boundary
    history.record(today + 9 * HOUR + 5, 1_200.0)
    assert history.broken(today + 9 * HOUR + 10) is None
    assert history.expected_peak(today + 9 * HOUR + 10, 3600) == 1_200.0
    for second in range(9 * HOUR + 60, 10 * HOUR + 15 * 60, 60):  # then a holiday's level
        history.record(today + second, 100.0)
    assert "today broke the days' pattern" in (history.broken(today + 10 * HOUR + 10 * 60) or "")


def test_the_highest_of_the_days_for_a_decision_a_peak_would_undo():
    history = days_of(InputHistory(), range(3), lambda s, d: 1000.0 * (d + 1))
    assert history.expected_peak(3 * DAY_S, 3600) == 2000.0  # the median
    assert history.expected_peak(3 * DAY_S, 3600, highest=True) == 3000.0


def test_old_days_are_dropped_and_bad_samples_ignored():
    history = days_of(InputHistory(keep_days=3), range(6), office)
    assert sorted(history.days) == [3, 4, 5]
    assert history.record(6 * DAY_S, math.nan) is None
    assert history.record(6 * DAY_S, -1.0) is None
    with pytest.raises(ValueError, match="slot_s"):
        InputHistory(slot_s=7)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1e6), min_size=3 * 24, max_size=3 * 24), st.floats(0, 3 * DAY_S),
       st.floats(60, 4 * HOUR))
def test_an_expectation_is_a_peak_that_was_recorded(hourly, now, ahead):
    history = InputHistory(tolerance=10.0)  # trust every day: this checks the arithmetic
    for i, rate in enumerate(hourly):
        history.record(i * HOUR, rate)
    found = history.expected_peak(3 * DAY_S + now % DAY_S, ahead, highest=True)
    assert found is None or found in set(hourly)
    assert found is None or found <= max(hourly)


def test_recorded_peaks_keep_the_highest_sample_of_each_slot():
    history = InputHistory()
    for rate in (5.0, 9.0, 7.0):
        history.record(100.0, rate)
    assert history.days[0][0] == 9.0 and np.isnan(history.days[0][1])


def test_the_profile_ahead_is_the_highest_of_the_days_per_slot():
    history = days_of(InputHistory(), range(3), lambda s, d: office(s) * (1 + 0.1 * d))
    profile = history.profile(3 * DAY_S + 7 * HOUR, 2 * HOUR)
    assert profile is not None and profile.size == 24
    assert profile[:12].max() == pytest.approx(500 * 1.2) and profile[12:].min() == pytest.approx(12_000)
    assert days_of(InputHistory(), range(1), office).profile(DAY_S + 7 * HOUR, HOUR) is None


def test_the_profile_reads_on_past_midnight():
    history = days_of(InputHistory(), range(3), office)
    profile = history.profile(3 * DAY_S + 23 * HOUR, 10 * HOUR)
    assert profile is not None and profile.size == 120
    assert profile[:108].max() == 500 and profile[108:].min() == 10_000  # 08:00 the next morning


NEW_YORK = "America/New_York"
FALL_BACK = 1_383_451_200  # 3 November 2013, 04:00 UTC: New York's midnight that day (EDT)


def new_york_office(history: InputHistory, days: range) -> InputHistory:
    """`office` on New York's clock, one sample a minute from FALL_BACK + each day: the clocks
    went back an hour at 02:00 on day 0, so 08:00 was 12:00 UTC before it and 13:00 after."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    zone = ZoneInfo(NEW_YORK)
    for day in days:
        for second in range(0, DAY_S, 60):
            at = FALL_BACK + day * DAY_S + second
            local = datetime.fromtimestamp(at, zone)
            history.record(at, office(local.hour * HOUR + local.minute * 60))
    return history


def test_in_the_jobs_time_zone_a_ramp_keeps_its_hour_across_a_daylight_saving_change():
    """Three New York office days (the last the day the clocks went back), then Monday: kept in
    UTC the days ramped at 12:00 UTC, so at 11:30 UTC Monday (06:30 local) the next hour is
    expected at 10,000/s, and at 13:00 UTC Monday's hour of 500/s reads as a broken day. Kept in
    New York's time the ramp is at 08:00 as it is on the clock, and the day agrees."""
    monday = FALL_BACK + DAY_S + 3600  # New York's Monday midnight, 05:00 UTC (EST)
    for zone, early, broken in (("UTC", 10_000.0, True), (NEW_YORK, 500.0, False)):
        history = new_york_office(InputHistory(zone=zone), range(-2, 1))
        # Monday as the daemon records it: quiet until the ramp at 08:00 local (13:00 UTC)
        for second in range(0, 8 * HOUR + 5 * 60, 60):
            history.record(monday + second, office(second))
        assert history.expected_peak(monday + 6.5 * HOUR, 3600) == early, zone
        assert (history.broken(monday + 8 * HOUR) is not None) == broken, zone
        assert history.expected_peak(monday + 8 * HOUR, 3600) == (None if broken else 10_000.0), zone


@settings(max_examples=200, deadline=None)
@given(st.floats(0, 4e9), st.sampled_from(["UTC", NEW_YORK, "Europe/London", "Asia/Kolkata",
                                           "Australia/Lord_Howe", "Pacific/Chatham"]))
def test_a_day_is_the_date_on_the_jobs_clock(at, zone):
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    history = InputHistory(zone=zone)
    assert datetime.fromtimestamp(history.day_of(at) * DAY_S, UTC).date() == datetime.fromtimestamp(at, ZoneInfo(zone)).date()
    if zone == "UTC":
        assert history.wall(at) == at


@pytest.mark.parametrize("zone", ["Mars/Base", "", " UTC", "EST 5", 5])
def test_a_time_zone_must_be_an_iana_name(zone):
    with pytest.raises(ValueError, match="timezone must be an IANA time zone name such as UTC, America/New_York"):
        InputHistory(zone=zone)


def test_a_day_recorded_from_its_evening_on_says_nothing_of_its_morning():
    """A daemon started at 20:00 on day 0: a week later the same weekday knows only that
    evening, so the morning comes from the recent days; and on day 2, day 0's evening beside
    the whole day 1 is one day's word on the morning, not the two an expectation needs."""
    history = InputHistory()
    for second in range(20 * HOUR, DAY_S, 60):
        history.record(second, 700.0)
    days_of(history, range(1, 7), office)
    profile = history.profile(7 * DAY_S + 7 * HOUR, 14 * HOUR)
    assert profile is not None
    assert profile[12:20].min() == 10_000.0, "08:00 from the recent days, where the weekday saw nothing"
    assert profile[-12:].max() == 700.0, "20:00 on from the weekday, which saw it"

    early = InputHistory()
    for second in range(20 * HOUR, DAY_S, 60):
        early.record(second, 700.0)
    days_of(early, range(1, 2), office)
    profile = early.profile(2 * DAY_S + 7 * HOUR, 14 * HOUR)
    assert profile is not None and np.isnan(profile[:-12]).all(), "one whole day is not two"
    assert profile[-12:].max() == 700.0, "20:00 on: both days saw it, the higher taken"


def test_one_day_on_record_sizes_what_the_input_asks_for_not_what_is_planned():
    """A job's second day: one day is too little to scale ahead on (`expected_peak` says nothing),
    enough to say how high the coming half-hour went on it, for a scale-up the input asks for."""
    history = days_of(InputHistory(), range(1), office)
    morning = DAY_S + 7.75 * HOUR
    assert history.expected_peak(morning, 1800) is None
    assert history.first_days_peak(morning, 1800) == 10_000.0
    assert history.first_days_peak(DAY_S + 6 * HOUR, 1800) == 500.0, "the ramp is two hours away"


def test_the_first_days_say_nothing_where_the_history_is_believed_or_the_day_fell_short():
    history = days_of(InputHistory(), range(2), office)
    assert history.first_days_peak(2 * DAY_S + 7.75 * HOUR, 1800) is None, "two days: the plan speaks"

    short = days_of(InputHistory(), range(1), office)
    for second in range(0, 10 * HOUR, 60):  # 08:00-10:00 brought 500/s, not 10,000/s
        short.record(DAY_S + second, 500.0)
    assert short.first_days_peak(DAY_S + 10 * HOUR, 1800) is None, "a day below the one on record"

    evening = InputHistory()  # a daemon started at 20:00: day 0 saw its evening only
    for second in range(20 * HOUR, DAY_S, 60):
        evening.record(second, 700.0)
    days_of(evening, range(1, 2), office)
    assert evening.first_days_peak(2 * DAY_S + 7.75 * HOUR, 1800) == 10_000.0, "day 1's word on the morning"
    assert evening.first_days_peak(2 * DAY_S + 20.5 * HOUR, 1800) is None, "both saw the evening: believed"
