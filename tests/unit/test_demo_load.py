"""The demo's load shapes (`examples/demo.py --shape`): what each second of the watched run produces."""

from __future__ import annotations

import pytest

from examples.demo import HIGH, LOW, STEP_AT, STEP_S, load_at


@pytest.mark.parametrize("shape", ["step", "ramp", "bursts"])
def test_every_shape_is_low_outside_the_high_phase_and_reaches_high_in_it(shape):
    assert load_at(0, HIGH, shape) == load_at(STEP_AT + STEP_S, HIGH, shape) == LOW
    assert max(load_at(STEP_AT + s, HIGH, shape) for s in range(int(STEP_S))) == HIGH


def test_the_ramp_climbs_over_half_the_phase_and_the_bursts_last_ten_seconds_in_thirty():
    ramp = [load_at(STEP_AT + s, HIGH, "ramp") for s in range(int(STEP_S))]
    assert ramp == sorted(ramp) and ramp[int(STEP_S / 4)] == pytest.approx((LOW + HIGH) / 2)
    bursts = [load_at(STEP_AT + s, HIGH, "bursts") for s in range(30)]
    assert bursts.count(HIGH) == 10 and bursts[:10] == [HIGH] * 10


def test_keeping_up_counts_the_lag_against_the_input_of_the_last_two_seconds():
    """A 10 s burst at 1,200/s leaves about a second of it in flight as it ends: against the
    100/s after it that looked like 12 s behind, against the last two seconds' input it is not."""
    from examples.loadgen import keep_up_verdict

    timeline = [{"t": float(t), "load": load_at(t, HIGH, "bursts"), "factor": 8,
                 "lag": 1200.0 if STEP_AT <= t < STEP_AT + STEP_S and (t - STEP_AT) % 30 == 10 else 50.0}
                for t in range(240)]
    ok, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
    assert ok and "never fell behind" in verdict
    timeline[100]["lag"] = 10_000.0  # 70 s after the step: ten seconds of the trickle and more
    ok, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
    assert "lag back under 2 s of input 71 s after the step, for good" in verdict


def test_a_blip_after_catching_up_is_reported_beside_when_it_caught_up():
    """Session 40's `make demo`: caught up 21 s after the step (after the backlog's peak; its
    first seconds read over, under, far over), then one second at 2.0 s of input 115 s after it,
    which "for good" alone reported as 116 s to catch up. The backlog at the end is the least of
    the last 5 s (the gauge saws with each batch): one second over as the step ends is a batch in
    flight, five are a backlog."""
    from examples.loadgen import keep_up_verdict

    def lag(t: int) -> float:
        if STEP_AT <= t < STEP_AT + 21:  # over, under for a second as the step's records arrive, far over
            return 1_000.0 if t == STEP_AT + 4 else 9_000.0 + 100 * t
        return 2_500.0 if t in (STEP_AT + 40, STEP_AT + 115) else 1_000.0

    timeline = [{"t": float(t), "load": load_at(t, HIGH, "step"), "factor": 8, "lag": lag(t)} for t in range(240)]
    ok, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
    assert ok, verdict
    assert ("lag back under 2 s of input 21 s after the step; over it again in 2 of the 98 s after, "
            "at most 2.1 s of input, back for good 116 s after the step") in verdict
    timeline[int(STEP_AT + STEP_S) - 1]["lag"] = 9_000.0  # and over it as the step ends: a batch in flight
    ok, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
    assert ok and "over it again in 3 of the 98 s after, and when the step ended" in verdict
    assert "backlog at the end of the 120 s step 0.8 s of input" in verdict  # the least of the last 5 s
    for t in range(int(STEP_AT + STEP_S) - 5, int(STEP_AT + STEP_S)):  # over it all the last 5 s: behind
        timeline[t]["lag"] = 3_000.0
    ok, verdict = keep_up_verdict(timeline, STEP_AT, STEP_S)
    assert not ok and "over it again in 6 of the 98 s after, and when the step ended" in verdict
    assert "backlog at the end of the 120 s step 2.5 s of input" in verdict


def test_a_day_of_a_real_trace_is_pressed_into_the_high_phase_between_low_and_high():
    """nyc-flights' second day: no departures in the small hours (LOW), the morning's first bank
    some way in, the busiest second at HIGH, LOW again once the pressed day is over."""
    from autosizer.simulator.traces import load_trace
    from autosizer.simulator.workloads import DAY
    from examples.demo import day_of_trace

    span = 720.0
    load = day_of_trace("nyc-flights", 1, span, HIGH)
    seconds = [load(STEP_AT + s / 10) for s in range(int(span * 10))]
    assert load(0) == load(STEP_AT + span) == LOW
    day = load_trace("nyc-flights").workload.rate[DAY:2 * DAY]
    assert min(seconds) == LOW and max(seconds) <= HIGH
    assert load(STEP_AT + (int(day.argmax()) + 0.5) * span / DAY) == pytest.approx(HIGH)
    for hour in (3, 10, 17):  # the trace's own rate at that hour, mapped
        expected = LOW + (HIGH - LOW) * day[hour * 3600] / day.max()
        assert load(STEP_AT + hour * span / 24) == pytest.approx(expected)


@pytest.mark.parametrize(("day", "span", "fix"), [(7, 720.0, "day must be 0 to 6"), (-1, 720.0, "day must be"),
                                                  (1, 30.0, "run longer")])
def test_a_day_outside_the_trace_or_a_run_too_short_is_refused_by_name(day, span, fix):
    from examples.demo import day_of_trace

    with pytest.raises(ValueError, match=fix):
        day_of_trace("nyc-flights", day, span, HIGH)


def test_a_demo_event_runs_once_when_its_second_comes(capsys):
    """The demos' scheduled events (the Kinesis demo's split and merge, `--expand-at`'s growth)."""
    from examples.demo import run_due

    ran: list[str] = []
    events = {45.0: lambda: ran.append("split") or "split", 75.0: lambda: ran.append("merge") or "merge"}
    run_due(events, 44.9)
    run_due(events, 45.2)
    run_due(events, 46.0)
    assert ran == ["split"] and list(events) == [75.0]
    assert capsys.readouterr().out == "   45s  split\n"
