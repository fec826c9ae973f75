"""Policies and guards: the baselines' arithmetic, guard rules, and registration by entry point."""

from __future__ import annotations

import dataclasses
import math
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.elasticity import FACTORS
from autosizer.elasticity.batch_cost import duty_at
from autosizer.policies import (
    Decision,
    Guards,
    Observation,
    PartitionStats,
    TaskStats,
    Watermarks,
    load_policy,
    policy_names,
)
from autosizer.policies.autosizer_policy import AutosizerState
from autosizer.policies.base import factor_for, frozen
from autosizer.policies.guards import GuardState


def observe(factor=1, lag=0.0, input_rate=1000.0, task_rate=400.0, busy=1.0, partitions=4,
            processed=None, **extra):
    processed = input_rate if processed is None else processed
    parts = PartitionStats.from_rows({("orders", p): (lag / partitions, lag / max(input_rate, 1e-3), input_rate / partitions,
                                                      processed / partitions) for p in range(partitions)})
    n = partitions * factor
    tasks = TaskStats([f"t{i}" for i in range(n)], np.arange(n) // factor, [0.0] * n,
                      [task_rate * busy] * n, [1 / task_rate] * n, [busy] * n)
    parts = extra.pop("partitions_override", parts)
    return Observation(time=extra.pop("time", 0.0), factor=factor, partitions=parts, tasks=tasks, **extra)


def test_factor_for_rounds_up_to_a_power_of_two():
    assert [factor_for(w, 4) for w in (0, 4, 5, 8, 9, 33, 10**9)] == [1, 1, 2, 2, 4, 16, 1024]


def test_lag_threshold_is_kedas_rule_without_the_partition_cap():
    policy = load_policy("lag-threshold", {"lag_threshold": 1000})
    decision, _ = policy.decide(observe(lag=20_000))
    assert decision.factor == 8  # 20 workers over 4 partitions -> 5 each -> 8
    assert "20 workers" in decision.reason


def test_utilization_is_flinks_capacity_formula():
    policy = load_policy("utilization")
    # true rate 400/s per task; target = 3000/0.7 + 0 + 3000*2/300 = 4305/s -> 10.8 tasks -> F=4
    decision, _ = policy.decide(observe(input_rate=3000, task_rate=400, busy=0.5, restart_downtime_s=2.0))
    assert decision.factor == 4
    assert math.isclose(decision.details["task_rate"], 400)


def test_bad_settings_and_unknown_policies_are_refused():
    with pytest.raises(ValueError, match="lag_threshold must be a finite number > 0"):
        load_policy("lag-threshold", {"lag_threshold": 0})
    with pytest.raises(ValueError, match="unknown policy .nope.: installed policies are autosizer, lag-threshold"):
        load_policy("nope")
    with pytest.raises(ValueError, match="has no setting .speed.: its settings are catch_up_seconds"):
        load_policy("utilization", {"speed": 1})
    with pytest.raises(ValueError, match="power of two"):
        Guards(min_factor=3)
    with pytest.raises(ValueError, match="max_step"):
        Guards(max_step=3)


def test_a_third_party_policy_registers_through_the_entry_point(tmp_path, monkeypatch):
    (tmp_path / "tiny_policy.py").write_text(textwrap.dedent('''
        from autosizer.policies import Decision

        class Always:
            name = "always"
            def __init__(self, factor=2):
                self.factor = factor
            def decide(self, observation, state=None):
                return Decision(self.factor, "always"), state
    '''))
    dist = tmp_path / "tiny_policy-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-policy\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[autosizer.policies]\nalways = tiny_policy:Always\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "always" in policy_names()
    decision, _ = load_policy("always", {"factor": 16}).decide(observe())
    assert decision.factor == 16
    sys.modules.pop("tiny_policy", None)


bad = st.sampled_from(["partial", "nan", "stale", "empty"])


@given(bad, st.sampled_from([1, 2, 8, 64]), st.sampled_from([1, 4, 1024]))
def test_bad_data_always_holds(kind, current, wish):
    obs = observe(factor=current)
    if kind == "partial":
        obs = observe(factor=current, complete=False)
    elif kind == "nan":
        obs = observe(factor=current, lag=float("nan"))
    elif kind == "stale":
        obs = observe(factor=current, age_s=3600)
    else:
        obs = Observation(time=0, factor=current, partitions=PartitionStats.from_rows({}))
    decision, _ = Guards(cooldown_s=0, scale_down_delay_s=0).apply(obs, Decision(wish, "wish"))
    assert decision.factor == current
    assert decision.reason.startswith("hold:")


@given(st.sampled_from([1, 2, 4, 8, 16, 64, 256, 1024]), st.sampled_from([1, 2, 8, 32, 1024]),
       st.sampled_from([2, 4, 8]))
def test_guards_clamp_and_limit_the_step(current, wish, step):
    guards = Guards(min_factor=2, max_factor=256, max_step=step, cooldown_s=0, scale_down_delay_s=0)
    decision, _ = guards.apply(observe(factor=current), Decision(wish, "wish"))
    if decision.factor != current:
        assert max(decision.factor / current, current / decision.factor) <= step
        if 2 <= current <= 256:
            assert 2 <= decision.factor <= 256
        elif current > 256:  # above a range an operator just narrowed: one step down towards it
            assert decision.factor < current
        else:
            assert decision.factor > current


def test_an_overload_shortens_the_cooldown_for_a_scale_up_only():
    guards = Guards(cooldown_s=300, overload_cooldown_s=60)
    assert Guards().overload_cooldown_s == 45
    more = Decision(8, "more")
    # Factor 2 on 4 partitions at 400/s per task takes 3,200/s; 4,000/s arrive.
    held, _ = guards.apply(observe(factor=2, input_rate=4000, since_rescale_s=45), more)
    assert held.factor == 2 and "< 60s" in held.reason
    up, _ = guards.apply(observe(factor=2, input_rate=4000, since_rescale_s=75), more)
    assert up.factor == 8
    # Below capacity (only the forecast needs more), the full cooldown holds.
    calm, _ = guards.apply(observe(factor=2, input_rate=3000, since_rescale_s=75), more)
    assert calm.factor == 2 and "< 300s" in calm.reason
    with pytest.raises(ValueError, match="overload_cooldown_s must be >= 0"):
        Guards(overload_cooldown_s=-1)


def test_the_overload_guard_reads_the_input_over_the_last_tick_where_the_rate_window_lags():
    """A ramp: the rate window averages in the minutes before it and reads 3,000/s, under factor
    2's 3,200/s, while the watermarks grew by 4,000/s over the last tick. The guard reads the
    input as the policy does, the more of the two: overloaded, the short cooldown. (It read the
    window alone: `bank-calls`' mornings waited 25 s longer for a scale-up.)"""
    guards, more = Guards(cooldown_s=300, overload_cooldown_s=60), Decision(8, "more")
    names = [("orders", p) for p in range(4)]

    def tick(t: float, read: float) -> Observation:
        marks = Watermarks(names, [read / 4] * 4, [t - 1.0] * 4)
        return observe(factor=2, input_rate=3000, since_rescale_s=t, time=t, watermarks=marks)

    _, state = guards.apply(tick(60, 0.0), more)  # the tick before: its watermarks
    up, state = guards.apply(tick(75, 60_000.0), more, state)  # 60,000 records in 15 s
    assert up.factor == 8, up.reason
    # Without the tick before (a new daemon), the window is all it has: the full cooldown.
    calm, _ = guards.apply(tick(75, 60_000.0), more)
    assert calm.factor == 2 and "< 300s" in calm.reason
    # A hold keeps the watermarks it read for the next tick's growth.
    _, state = guards.apply(tick(60, 0.0), Decision(2, "same"))
    assert state.watermarks is not None and guards.apply(tick(75, 60_000.0), more, state)[0].factor == 8


def test_an_overload_right_after_a_scale_down_skips_the_cooldown_for_a_policy_that_opts_in():
    """Issue 12: a scale-up is never delayed by a cooldown that a scale-down started when the
    input already exceeds the smaller factor's capacity. The default policy opts in."""
    guards = Guards(cooldown_s=300, overload_cooldown_s=60, scale_down_delay_s=0)
    down, state = guards.apply(observe(factor=8, input_rate=500, since_rescale_s=1000), Decision(2, "less"))
    assert down.factor == 2 and state.scaled_down_to == 2
    # Factor 2 on 4 partitions at 400/s per task takes 3,200/s; 4,000/s arrive 5 s later.
    overloaded = observe(factor=2, input_rate=4000, since_rescale_s=5)
    wish, _ = load_policy("autosizer").decide(overloaded)
    assert wish.factor > 2 and wish.undo_scale_down
    up, after = guards.apply(overloaded, wish, state)
    assert up.factor == wish.factor and after.scaled_down_to is None
    assert "undoes the scale-down to 2 5s ago at once" in up.reason
    # A policy that does not opt in (the baselines) waits the overload cooldown.
    plain, _ = guards.apply(overloaded, Decision(8, "more"), state)
    assert plain.factor == 2 and "< 60s" in plain.reason
    # After a scale-up, or with no record of the last change (a restarted daemon): 60 s too.
    held, _ = guards.apply(observe(factor=8, input_rate=40_000, since_rescale_s=5),
                           Decision(32, "more", undo_scale_down=True), after)
    assert held.factor == 8 and "< 60s" in held.reason
    fresh, _ = guards.apply(overloaded, wish)
    assert fresh.factor == 2 and "< 60s" in fresh.reason
    # Without an overload the full cooldown holds, whatever came before.
    calm, _ = guards.apply(observe(factor=2, input_rate=3000, since_rescale_s=5),
                           Decision(8, "more", undo_scale_down=True), GuardState(scaled_down_to=2))
    assert calm.factor == 2 and "< 300s" in calm.reason


def test_a_scale_up_the_input_outgrew_is_followed_at_once_for_a_policy_that_opts_in():
    """Session 90: a ramp seen at a 15 s tick as two jumps was sized 1 -> 2 on the first, and the
    second waited the overload cooldown with the input already past 2's capacity (run k26). When
    the last change these guards let through was a scale-up and the input exceeds the factor it
    reached, it fell short: a policy that opts in (the default one) goes on at once."""
    guards = Guards(cooldown_s=300, overload_cooldown_s=60, scale_down_delay_s=0)
    up, state = guards.apply(observe(factor=2, input_rate=500, since_rescale_s=1000), Decision(8, "more"))
    assert up.factor == 8 and state.scaled_up_from == 2
    # Factor 8 on 4 partitions at 400/s per task takes 12,800/s; 20,000/s arrive 10 s later.
    outgrown = observe(factor=8, input_rate=20_000, since_rescale_s=10)
    wish, _ = load_policy("autosizer").decide(outgrown)
    assert wish.factor > 8 and wish.extend_scale_up
    more, after = guards.apply(outgrown, wish, state)
    assert more.factor == wish.factor and after.scaled_up_from == 8
    assert "; the scale-up 2 -> 8 10s ago fell short, at once: the input exceeds 8's capacity" in more.reason
    # A policy that does not opt in (the baselines) waits the overload cooldown.
    plain, _ = guards.apply(outgrown, Decision(32, "more"), state)
    assert plain.factor == 8 and "< 60s" in plain.reason
    # After a scale-down, or with no record of the last change (a restarted daemon): 60 s too.
    opted = Decision(32, "more", extend_scale_up=True)
    for before in (GuardState(scaled_down_to=8), None):
        held, _ = guards.apply(outgrown, opted, before)
        assert held.factor == 8 and "< 60s" in held.reason
    # Without an overload (12,000/s fit 8) the full cooldown holds.
    calm, _ = guards.apply(observe(factor=8, input_rate=12_000, since_rescale_s=10), opted, state)
    assert calm.factor == 8 and "< 300s" in calm.reason
    # Past the overload cooldown nothing is skipped, and the reason says nothing of it.
    later, _ = guards.apply(observe(factor=8, input_rate=20_000, since_rescale_s=70), opted, state)
    assert later.factor == 32 and later.reason == "more"


@given(st.lists(st.tuples(st.sampled_from([1, 2, 8, 32]), st.sampled_from([500.0, 2000.0, 40_000.0]),
                          st.sampled_from([5.0, 50.0, 400.0]), st.booleans(), st.booleans(), st.booleans()),
                min_size=1, max_size=12))
def test_a_cooldown_is_skipped_only_to_undo_or_extend_the_guards_own_last_change(steps):
    """Whatever the sequence of wishes: a change inside the overload cooldown either is a
    scale-up that opted in while the input exceeds the factor's capacity (4 partitions at 400/s
    per task), undoing the last change these guards let through (a scale-down to this factor,
    `undo_scale_down`) or going on from it (a scale-up, `extend_scale_up`); or is a step back
    the policy judged (`undo_scale_up`) to where the last change these guards let through (a
    scale-up) started."""
    guards = Guards(cooldown_s=300, overload_cooldown_s=60, scale_down_delay_s=0)
    factor, state, last_down_to, last_up_from = 8, None, None, None
    for wish, rate, since, undo, useless, extend in steps:
        obs = observe(factor=factor, input_rate=rate, since_rescale_s=since)
        decision, state = guards.apply(
            obs, Decision(wish, "wish", undo_scale_down=undo, undo_scale_up=useless, extend_scale_up=extend),
            state)
        if decision.factor != factor and since < 60:
            if decision.factor > factor:
                assert rate >= 4 * factor * 400
                assert (undo and last_down_to == factor) or (extend and last_up_from is not None)
            else:
                assert useless and last_up_from == decision.factor
        if decision.factor != factor:
            last_down_to = decision.factor if decision.factor < factor else None
            last_up_from = factor if decision.factor > factor else None
            factor = decision.factor
        assert state.scaled_down_to == last_down_to and state.scaled_up_from == last_up_from


def test_cooldown_and_lazy_scale_down():
    guards = Guards(cooldown_s=300, scale_down_delay_s=600)
    up, _ = guards.apply(observe(factor=2, since_rescale_s=100), Decision(8, "more"))
    assert up.factor == 2 and "cooldown" in up.reason
    state = None
    for t in (0, 300, 599):
        down, state = guards.apply(observe(factor=8, time=t), Decision(2, "less"), state)
        assert down.factor == 8 and "scale-down" in down.reason
    down, state = guards.apply(observe(factor=8, time=600), Decision(2, "less"), state)
    assert down.factor == 2
    # A wish that goes away resets the delay.
    _, state = guards.apply(observe(factor=8, time=0), Decision(2, "less"))
    _, state = guards.apply(observe(factor=8, time=100), Decision(8, "same"), state)
    down, _ = guards.apply(observe(factor=8, time=650), Decision(2, "less"), state)
    assert down.factor == 8


def test_a_holds_reason_never_reads_its_wait_as_already_done():
    """Rounded, 299.7 s of a 300 s cooldown read "300s < 300s" (run 163's daemon read "wanted for
    20s < 20s"): the time waited is rounded down and the limit shown as it was set."""
    cooldown = Guards(cooldown_s=300).apply(observe(factor=2, since_rescale_s=299.7), Decision(8, "more"))[0]
    assert "299s since the last rescale < 300s" in cooldown.reason
    guards, state = Guards(cooldown_s=0, scale_down_delay_s=20.4), None
    for t in (0.0, 19.9996):
        down, state = guards.apply(observe(factor=8, time=t), Decision(1, "less"), state)
    assert down.factor == 8 and down.reason == "hold: scale-down to 1 wanted for 19s < 20.4s: less"


def test_a_guards_hold_of_a_wish_to_move_says_what_the_policy_wanted_and_why():
    """The CPU-bound demo at the shipped clocks: its policy judged 1 -> 2 useless and wanted 1,
    and for four minutes the journal read only "hold: cooldown, 71s since the last rescale <
    300s"."""
    verdict = "scale-up 1 -> 2: measured throughput under backlog 450/s before, 458/s after: back to 1"
    held = Guards(cooldown_s=300).apply(observe(factor=2, since_rescale_s=71.4), Decision(1, verdict))[0]
    assert held.factor == 2
    assert held.reason == f"hold: cooldown, 71s since the last rescale < 300s; wants 1: {verdict}"
    assert held.details["wish"] == 1 and held.details["policy"] == verdict


def test_autosizer_steps_back_from_an_ineffective_scale_up_and_remembers_the_ceiling():
    policy = load_policy("autosizer")
    # At F=4 the job does 6,400/s under a backlog (22 s behind). After the move to 8 each task
    # manages half as much (CPU-bound): the throughput measured under backlog did not grow.
    behind = {"input_rate": 9000, "lag": 200_000, "processed": 6400, "busy": 1.0}
    first, state = policy.decide(observe(factor=4, task_rate=400, time=0, **behind))
    assert first.factor > 4
    decision, state = policy.decide(observe(factor=8, task_rate=200, time=300, since_rescale_s=15,
                                            **behind), state)
    assert decision.factor == 8 and "settling" in decision.reason
    decision, state = policy.decide(observe(factor=8, task_rate=200, time=390, since_rescale_s=105,
                                            **behind), state)
    assert decision.factor == 4 and "ceiling" in decision.reason
    assert "measured throughput under backlog 6400/s before, 6400/s after" in decision.reason
    assert decision.details["throughput_before"] == decision.details["throughput_after"] == 6400
    # Later, more input would want more tasks, but the ceiling holds for ceiling_memory_s.
    decision, _ = policy.decide(observe(factor=4, input_rate=12000, task_rate=400, busy=1.0,
                                        time=900, since_rescale_s=500), state)
    assert decision.factor == 4 and "learned ceiling" in decision.reason


def test_the_step_back_from_a_useless_scale_up_skips_the_cooldown_and_the_scale_down_delay():
    """The guards let 4 -> 8 through; 105 s later the policy judges it useless and steps back:
    at once, not after the 300 s cooldown and the 600 s delay, which would idle 8's extra tasks.
    Only back to where the guards' own last scale-up started, and only when the policy says so."""
    policy, guards = load_policy("autosizer"), Guards(cooldown_s=300, scale_down_delay_s=600)
    behind = {"input_rate": 9000, "lag": 200_000, "processed": 6400, "busy": 1.0}
    wish, state = policy.decide(observe(factor=4, task_rate=400, time=0, since_rescale_s=1000, **behind))
    up, guarded = guards.apply(observe(factor=4, task_rate=400, time=0, since_rescale_s=1000, **behind), wish)
    assert up.factor == 8 and guarded.scaled_up_from == 4
    _, state = policy.decide(observe(factor=8, task_rate=200, time=300, since_rescale_s=15, **behind), state)
    judged = observe(factor=8, task_rate=200, time=390, since_rescale_s=105, **behind)
    verdict, state = policy.decide(judged, state)
    assert verdict.factor == 4 and verdict.undo_scale_up
    back, after = guards.apply(judged, verdict, guarded)
    assert back.factor == 4 and "steps back at once, 105s after the scale-up it undoes" in back.reason
    assert after.scaled_up_from is None and after.scaled_down_to == 4  # a scale-down like any other
    # The ceiling's later ticks ask the same while the job is still above it.
    again, _ = policy.decide(observe(factor=8, task_rate=200, time=405, since_rescale_s=120, **behind), state)
    assert again.factor == 4 and again.undo_scale_up and "learned ceiling" in again.reason
    # With no record of that scale-up (a restarted daemon), or to another factor: the guards' waits.
    fresh, _ = guards.apply(judged, verdict)
    assert fresh.factor == 8 and "cooldown" in fresh.reason
    other, _ = guards.apply(judged, verdict, GuardState(scaled_up_from=2))
    assert other.factor == 8 and "cooldown" in other.reason
    # A plain scale-down (no verdict) waits both.
    plain, _ = guards.apply(judged, Decision(4, "less"), guarded)
    assert plain.factor == 8 and "cooldown" in plain.reason


def test_a_scale_up_is_judged_on_the_median_tick_under_backlog_not_on_one():
    """A rate window holds one, two or three batches' commits, so one tick can read double. The
    job does about 400/s at 1 and 380/s at the factor it tried: judged on the last tick on each
    side it would have "gained" +88% (760/s) and stayed; on the medians it goes back."""
    policy = load_policy("autosizer")
    behind = dict(input_rate=1000, lag=200_000, task_rate=100)
    state = None
    for t, done in zip((0, 5, 10, 15), (400, 410, 820, 400), strict=True):
        decision, state = policy.decide(observe(factor=1, time=t, processed=done, **behind), state)
    tried = decision.factor
    assert tried > 1
    for since, done in ((5, 0), (20, 190), (35, 380), (40, 760), (45, 370), (55, 380), (65, 760)):
        decision, state = policy.decide(observe(factor=tried, time=15 + since, since_rescale_s=since,
                                                processed=done, **behind), state)
    assert decision.factor == 1, decision.reason
    assert "measured throughput under backlog 400/s before, 380/s after" in decision.reason


def test_a_scale_up_is_judged_against_the_capacity_measured_before_it_not_on_its_first_tick():
    """The CPU-bound demo (run c1): factor 1 measured 454/s and did about 500/s under backlog;
    the first tick at 2 read the CPU a record costs over a rate window holding the restart, which
    put factor 1 at 363/s. Judged against that, a scale-up that bought nothing read +43% and
    stayed; judged against what was measured before it, it goes back."""
    policy = load_policy("autosizer")
    behind = dict(input_rate=1000, lag=60_000)
    state = None
    for t in (0, 5, 10, 15):
        decision, state = policy.decide(observe(factor=1, time=t, processed=500, task_rate=130,
                                                cpu_ceiling=700, **behind), state)
    assert decision.factor == 2, decision.reason
    for since, ceiling in ((1, 388), (35, 700), (45, 700), (55, 700), (65, 700)):
        decision, state = policy.decide(observe(factor=2, time=15 + since, since_rescale_s=since, processed=500,
                                                task_rate=65, cpu_ceiling=ceiling, **behind), state)
    assert decision.factor == 1, decision.reason
    assert "measured throughput under backlog 500/s before, 500/s after" in decision.reason


def test_a_backlogs_first_tick_does_not_judge_a_scale_up_by_a_rate_window_reaching_back_before_it():
    """Run n3, the demo's step at the shipped clocks (a 15 s tick over a 30 s rate window): the
    job kept up at 100/s until the step at 30 s, and the first tick behind, at 45 s, read a
    processed rate of 202/s over a window half before the step, where factor 1 did 331/s
    behind. Taken for the throughput before 1 -> 8, it judged the scale-up "+1240% of the +700%
    promised". The capacity measured before it stands in until a tick's window is past the last
    tick that kept up."""
    policy = load_policy("autosizer")
    state = None
    for t in (0, 15, 30):
        decision, state = policy.decide(observe(factor=1, time=t, input_rate=100, task_rate=85,
                                                since_rescale_s=1000), state)
    decision, state = policy.decide(observe(factor=1, time=45, input_rate=1200, lag=13_200, processed=202,
                                            task_rate=85, since_rescale_s=1000), state)
    assert decision.factor == 8, decision.reason
    for since in (15, 30, 45, 60):
        decision, state = policy.decide(observe(factor=8, time=45 + since, input_rate=1200, task_rate=85,
                                                since_rescale_s=since), state)
    assert decision.factor == 8, decision.reason
    assert "scale-up 1 -> 8 measured capacity 340/s before, 2720/s after (+700% of the +700% promised)" in decision.reason


def test_a_scale_up_is_judged_on_what_the_lag_says_the_job_did_not_on_its_rate_windows():
    """Run c1, the CPU-bound demo at a 5 s tick over a 10 s rate window: batches of about 2,000
    records, so a window read either ~520/s or ~340/s, and the medians of the last six ticks were
    499/s at 1 and 518/s at 2: +14% of the +39% promised, kept, though the job did 472/s and
    469/s by its lag (the watermarks' growth less the lag's). Judged on that, it goes back."""
    policy = load_policy("autosizer")
    names = tuple(("orders", p) for p in range(4))

    def tick(t: float, factor: int, done: float, window: float, **extra) -> Observation:
        """1,000/s in, the job `done` records/s by its lag since 0 s; its rate window reads `window`."""
        lag = (1000 - done) * t + 20_000
        parts = PartitionStats.from_rows({n: (lag / 4, lag / 1000, 250, window / 4) for n in names})
        marks = Watermarks(names, np.full(4, 250.0 * t), np.full(4, t - 1.0))
        return observe(factor=factor, time=t, partitions_override=parts, watermarks=marks, cpu_ceiling=632,
                       input_rate=1000, **extra)

    state, readings = None, (512, 513, 341, 503, 334, 495)
    for k, window in enumerate(readings):
        decision, state = policy.decide(tick(5.0 * k, 1, 472, window, task_rate=113.5), state)
    assert decision.factor == 2, decision.reason
    for since, window in ((1, 265), (31, 523), (36, 519), (41, 517), (46, 518), (51, 352), (56, 523), (61, 523)):
        decision, state = policy.decide(tick(25 + since, 2, 469, window, task_rate=65, since_rescale_s=since),
                                        state)
    assert decision.factor == 1, decision.reason
    assert "measured throughput under backlog 454/s before, 469/s after (+3% of the +39% promised)" in decision.reason


def judged(before: dict, after: dict) -> Decision:
    """The default policy's decision 100 s (settled) after a rescale from `before` to `after`."""
    policy = load_policy("autosizer")
    _, state = policy.decide(observe(**before))
    decision, _ = policy.decide(observe(time=100, since_rescale_s=100, **after), state)
    return decision


def test_autosizer_keeps_the_useful_part_of_a_scale_up():
    """CPU-bound on 16 tasks' worth of cores: 1 -> 16 bought 4x, not 16x; 4 delivers as much."""
    decision = judged(dict(factor=1, task_rate=400, input_rate=9000, lag=300_000, processed=1600),
                      dict(factor=16, task_rate=100, input_rate=9000, lag=300_000, processed=6400))
    assert decision.factor == 4 and "4 delivers as much: back to 4" in decision.reason


def test_autosizer_keeps_a_scale_up_whose_measured_throughput_grew():
    behind = dict(factor=4, task_rate=400, input_rate=9000, lag=200_000, processed=6400)
    # Still behind after the move to 16, but the job now does 9,800/s.
    decision = judged(behind, dict(factor=16, task_rate=400, input_rate=9000, lag=100_000, processed=9800))
    assert decision.factor == 16
    assert "scale-up 4 -> 16 measured throughput under backlog 6400/s before, 9800/s after" in decision.reason
    # A scale-up that caught up is judged on the capacity measured after it (the task rate there).
    decision = judged(behind, dict(factor=16, task_rate=400, input_rate=9000))
    assert decision.factor == 16
    assert "scale-up 4 -> 16 measured capacity 6400/s before, 25600/s after" in decision.reason


def test_autosizer_does_not_take_records_late_to_the_broker_for_a_backlog():
    """The demo at factor 32: the producer fell behind, so records were 12 s old on arrival,
    but the job processed each batch's input (a few hundred records waiting). Its rate then is
    the input rate, not what it can do flat out, and must not judge 16 -> 32 ineffective."""
    late = PartitionStats.from_rows({("orders", p): (200, 12.0, 220, 218) for p in range(4)})
    decision = judged(dict(factor=16, task_rate=100, input_rate=1200, lag=40_000, processed=1065),
                      dict(factor=32, task_rate=100, input_rate=880, partitions_override=late))
    assert "back to" not in decision.reason and "ceiling" not in decision.reason
    assert "scale-up 16 -> 32 measured capacity" in decision.reason  # not "throughput under backlog"


def test_autosizer_does_not_scale_down_into_a_lull_but_does_when_the_level_drops():
    policy = load_policy("autosizer")
    state = None
    for t in range(0, 3600, 15):  # an hour at 8,000/s on 8: 62% of its 12,800/s, in band
        decision, state = policy.decide(observe(factor=8, input_rate=8000, task_rate=400, time=t), state)
        assert decision.factor == 8
    for t in range(3600, 4800, 15):  # 20 min with no input: the usual level is 8,000/s
        decision, state = policy.decide(observe(factor=8, input_rate=0, task_rate=400, time=t), state)
        assert decision.factor == 8
    assert "a lull, not less work" in decision.reason
    for t in range(4800, 4800 + 3 * 3600, 15):  # three hours (the memory) at 1,000/s: the level now
        decision, state = policy.decide(observe(factor=8, input_rate=1000, task_rate=400, time=t), state)
        if t < 3600 + 3 * 3600 - 900:  # while 8,000/s is within the memory, the step would be undone
            assert decision.factor == 8
    assert decision.factor < 8 and "fits" in decision.reason
    with pytest.raises(ValueError, match="lull_memory_s"):
        load_policy("autosizer", {"lull_memory_s": 0})


def test_a_scale_up_says_where_a_batchs_read_leaves_the_tasks_less_time():
    """Kinesis on the emulator: a batch's read grows with the factor (0.14 s of a 0.55 s cost at
    factor 1), so factor 8's tasks work less of a batch's time than factor 1's, and its capacity
    is less than eight times factor 1's; the reason says why. Without a read that grows, nothing
    is said."""
    policy = load_policy("autosizer")
    duties = np.array([duty_at(3.0, 0.55, 0.14, 1, f) for f in FACTORS])
    up, _ = policy.decide(observe(factor=1, input_rate=1200, task_rate=100, processed=400,
                                  duty=float(duties[0]), duties=duties))
    assert up.factor == 8, up.reason
    eight, one = duties[FACTORS.index(8)], duties[0]
    assert f"tasks work {eight:.0%} of a batch's time there, {one:.0%} at 1: the read grows" in up.reason
    assert up.details["capacity"] == pytest.approx(float(one) * 100 * 4)
    flat, _ = policy.decide(observe(factor=1, input_rate=1200, task_rate=100, processed=400, duty=float(duties[0])))
    assert "tasks work" not in flat.reason
    # A difference that whole percents hide is given to a tenth (run k24 read "93% there, 93% at 1").
    near = np.array([0.928] + [0.934] * (len(FACTORS) - 1))
    close, _ = policy.decide(observe(factor=1, input_rate=1200, task_rate=100, processed=400, duty=0.928,
                                     duties=near))
    assert "tasks work 93.4% of a batch's time there, 92.8% at 1: the read grows" in close.reason, close.reason


def test_autosizer_sizes_by_the_hottest_bucket_and_the_batch_overhead():
    """The demo's case: 1,200/s over 4 partitions at 100/s per task. Even buckets at F=4 would
    run at 75%, but 50 keys per partition put a third of a partition in its busiest bucket."""
    policy = load_policy("autosizer")
    even, _ = policy.decide(observe(factor=1, input_rate=1200, task_rate=100, processed=400))
    assert even.factor == 4
    hot = np.full((4, 11), np.nan)
    hot[:, :5] = [1.0, 0.56, 0.34, 0.2, 0.12]  # factors 1, 2, 4, 8, 16
    measured, _ = policy.decide(observe(factor=1, input_rate=1200, task_rate=100, processed=400,
                                        hot_shares=hot, duty=0.85))
    assert measured.factor == 8
    assert "busiest thread 20.0%" in measured.reason
    # 0.85 * 100 / 0.2 per partition, 4 partitions
    assert measured.details["capacity"] == pytest.approx(0.85 * 100 / 1.0 * 4)
    assert "measured capacity 1700/s" in measured.reason


def test_autosizer_says_when_the_keys_cap_the_job_and_no_larger_factor_helps():
    """Run 112's job: 16 customers on 4 partitions, so from factor 4 each partition's busiest
    thread runs one customer, a quarter of the partition, whatever the factor. 1,200/s needs more
    than the 1,360/s factor 4 gives at the target; no factor gives more, and the reason said only
    "need 4" beside a capacity below the forecast. It now says the keys are the limit."""
    policy = load_policy("autosizer")
    few = np.full((4, 11), 0.25)
    few[:, :2] = [1.0, 0.5]  # factors 1 and 2; from 4 on, one customer a thread
    busy = dict(input_rate=1200, task_rate=100, processed=400, hot_shares=few, duty=0.85)
    up, state = policy.decide(observe(factor=1, lag=5000, **busy))
    assert up.factor == 4
    assert "more buckets add little past 4: the busiest thread's keys are 25.0% of their partition" in up.reason
    assert "tops out near 1360/s" in up.reason
    held, _ = policy.decide(observe(factor=4, time=60.0, **{**busy, "processed": 1200}))
    assert held.factor == 4 and "utilization 88%" in held.reason and "more buckets add little" in held.reason
    # room to spare at the top factor: nothing more is wanted, nothing to explain
    quiet, _ = policy.decide(observe(factor=4, time=60.0, **{**busy, "input_rate": 300, "processed": 300}))
    assert "more buckets" not in quiet.reason
    # many keys: a larger factor still takes more, so no such note (the demo's 200 customers)
    many = np.full((4, 11), np.nan)
    many[:, :5] = [1.0, 0.56, 0.34, 0.2, 0.12]
    grows, _ = policy.decide(observe(factor=1, lag=5000, **{**busy, "hot_shares": many}))
    assert grows.factor == 8 and "more buckets" not in grows.reason


def test_autosizer_goes_straight_to_the_factor_where_the_measured_cores_cap_the_job():
    """4 partitions at 400/s per task, records costing 2.5 ms of CPU on 8 cores: the cores do
    3,200/s whatever the factor. 9,000/s behind needs more than any factor gives: without the CPU
    measured the policy asks for 8 (then learns the ceiling by trying); with it, for 2, the
    smallest factor that reaches what the cores allow, and it says so."""
    policy = load_policy("autosizer")
    behind = dict(factor=1, task_rate=400, input_rate=9000, lag=200_000, processed=1600)
    blind, _ = policy.decide(observe(**behind))
    assert blind.factor == 8 and "cores" not in blind.reason
    capped, _ = policy.decide(observe(cpu_ceiling=8 / 0.0025, **behind))
    assert capped.factor == 2
    assert "the cores cap the job at 3200/s whatever the factor" in capped.reason
    # A job that keeps up is not told about the cores: nothing more is wanted.
    idle, _ = policy.decide(observe(cpu_ceiling=1600 / 0.84, input_rate=200, task_rate=400))
    assert idle.factor == 1 and "cores" not in idle.reason
    # A ceiling far above the input changes nothing (I/O-bound work measures little CPU).
    assert policy.decide(observe(cpu_ceiling=1e6, **behind))[0].factor == 8
    # The demo's CPU-bound run: factor 1 measured at 84% of the ceiling, which the Python workers
    # never quite reach (1 -> 2 promised +16% there and measured -32%): it holds, and says why.
    held, _ = policy.decide(observe(cpu_ceiling=1600 / 0.84, **behind))
    assert held.factor == 1 and "the cores cap the job" in held.reason
    # and the lag grows there: the hold says so, not that the job is catching up (the CPU-bound
    # demo read "catching up" for a minute while its lag grew by about 500/s)
    assert held.reason.startswith("hold: falling behind: input 9000/s over the 1600/s measured at 1;")
    obs = observe(cpu_ceiling=3200.0, duty=0.5)
    assert obs.capacity(1, 400) == pytest.approx(0.5 * 1600)  # below the cap: the tasks' own
    assert obs.capacity(4, 400) == pytest.approx(0.5 * 3200)  # capped: duty x the cores' rate


def test_observation_capacity_follows_the_partition_that_fills_first():
    hot = np.full((2, 11), np.nan)
    hot[:, 1] = [0.5, 0.75]  # at F=2 partition 1's busiest bucket gets three quarters
    obs = observe(factor=2, partitions=2, input_rate=1000, hot_shares=hot, duty=0.5)
    # per partition: 100/0.5 = 200/s and 100/0.75 = 133/s; input is even, so partition 1 caps:
    assert obs.capacity(2, 100) == pytest.approx(0.5 * 2 * 100 / 0.75)
    assert obs.capacity(4, 100) == pytest.approx(0.5 * 2 * 4 * 100)  # unknown: even buckets
    # the same figures as floats, for a policy walking the factors one by one
    assert obs.capacity_list(100) == obs.capacities(100).tolist()
    assert obs.task_rate == pytest.approx(400)  # no saturated rate: the user-function estimate
    assert observe(saturated_rate=250.0).task_rate == 250.0


def test_autosizer_never_scales_down_while_catching_up_and_leaves_a_hot_key_out():
    policy = load_policy("autosizer")
    backlog = observe(factor=8, input_rate=100, task_rate=400, busy=1.0, lag=50_000)
    decision, _ = policy.decide(backlog)
    assert decision.factor == 8 and decision.reason.startswith("hold: catching up on lag 50000 at ")
    quiet, _ = policy.decide(observe(factor=8, input_rate=100, task_rate=400, busy=0.1))
    assert quiet.factor == 1
    # One task holds 90% of the lag: more buckets cannot split its key, so it is left out.
    hot = observe(factor=2, input_rate=1000, task_rate=400, busy=0.8, lag=10_000)
    lags = np.full(len(hot.tasks), 1000 / (len(hot.tasks) - 1))
    lags[0] = 9000
    tasks = TaskStats(hot.tasks.names, hot.tasks.partition, lags, hot.tasks.processed_rate,
                      hot.tasks.process_seconds, hot.tasks.busy)
    hot = Observation(time=0, factor=2, partitions=hot.partitions, tasks=tasks)
    decision, _ = policy.decide(hot)
    assert "hot key in t0" in decision.reason and decision.details["lag"] == pytest.approx(1000)
    with pytest.raises(ValueError, match="must be below target_utilization"):
        load_policy("autosizer", {"scale_down_utilization": 0.9})


def test_a_job_that_keeps_up_just_past_the_target_is_left_alone_until_the_band_is_passed():
    """Factor 2 on 4 partitions at 400/s per task takes 3,200/s. 2,700/s is 84%: past the 80%
    target, within the 90% band, nobody behind: no rescale for a forecast that one tick's noise
    can push either way. Past the band, or behind, it sizes at the target as before."""
    policy = load_policy("autosizer")
    inside, _ = policy.decide(observe(factor=2, input_rate=2700))
    assert inside.factor == 2
    assert inside.reason == "hold: utilization 84% of measured 3200/s, within the 90% scale-up band and nobody behind"
    past, _ = policy.decide(observe(factor=2, input_rate=3000))
    assert past.factor == 4
    behind, _ = policy.decide(observe(factor=2, input_rate=2700, lag=30_000))
    assert behind.factor == 4
    no_band, _ = load_policy("autosizer", {"scale_up_utilization": 0.8}).decide(
        observe(factor=2, input_rate=2700))
    assert no_band.factor == 4
    with pytest.raises(ValueError, match="scale_up_utilization 0.7 must be at least target_utilization"):
        load_policy("autosizer", {"scale_up_utilization": 0.7})


def office_days(level=8_000.0, days=3):
    """Office days on record: 500/s at night, `level` from 08:00 to 18:00."""
    from autosizer.policies.history import DAY_S, InputHistory

    history = InputHistory()
    for second in range(0, days * DAY_S, 60):
        history.record(second, level if 8 * 3600 <= second % DAY_S < 18 * 3600 else 500.0)
    return history


def test_autosizer_follows_the_day_plan_in_one_jump_and_gives_a_missing_day_its_hour():
    """Three office days on record (500/s at night, 8,000/s from 08:00 to 18:00) on 4
    partitions at 400/s per task: the plan runs 8 for the day (8,000/s fits 80% of its
    12,800/s, not of 4's 6,400/s), and from factor 1 that is one rescale half an hour ahead, not
    1 -> 4 -> 8.
    When the day then does not come (a holiday), the factor is kept for `day_ahead_s` before a
    scale-down may undo it: no reversal within the hour."""
    from autosizer.policies.history import DAY_S

    history = office_days()
    policy = load_policy("autosizer")
    state, factor, decisions = None, 1, []
    start = 3 * DAY_S + 7 * 3600
    for t in range(start, start + 3 * 3600, 15):
        decision, state = policy.decide(observe(factor=factor, input_rate=500, task_rate=400, time=t,
                                                history=history), state)
        history.record(t, 500.0)
        if decision.factor != factor:
            decisions.append((t, factor, decision.factor, decision.reason))
            factor = decision.factor
    t, old, new, reason = decisions[0]
    assert (old, new) == (1, 8) and t < 3 * DAY_S + 8 * 3600 and "the day plan runs 8" in reason
    assert all(t2 - t >= policy.day_ahead for t2, _, _, _ in decisions[1:])


def test_the_day_plan_sizes_the_days_peak_at_the_target_and_a_scale_down_keeps_its_margin():
    """Office days of 4,800/s: 75% of factor 4's 6,400/s. The plan sizes the day as a scale-up
    would, at the 80% target, so the morning is 1 -> 4 and the day runs 4; sized at
    `plan_utilization` (70%) it ran 8 all day (`nyc-flights`, `workday`: a fifth to a third more
    task-hours, session 65). The margin stays where a miss is a reversal: a job at 8 before the
    day's peak does not step down to 4, which would run the peak ahead past 70%."""
    from autosizer.policies.history import DAY_S

    history, policy = office_days(4_800.0), load_policy("autosizer")
    morning = 3 * DAY_S + 7 * 3600 + 30 * 60
    decision, _ = policy.decide(observe(factor=1, input_rate=500, task_rate=400, time=morning, history=history), None)
    assert decision.factor == 4 and decision.reason.startswith("the day plan runs 4"), decision.reason
    at_8 = observe(factor=8, input_rate=500, task_rate=400, time=morning, history=history)
    held, _ = policy.decide(at_8, None)
    assert held.factor == 8 and "recent days expect 4800/s within 60 min" in held.reason, held.reason
    lowered, _ = load_policy("autosizer", {"plan_utilization": 0.8}).decide(at_8, None)  # no margin
    assert lowered.factor == 4, lowered.reason


def test_within_the_hour_of_a_scale_down_a_trend_waits_for_the_input_to_pass_the_band():
    """8 -> 16 for a bank's slope seven minutes after 16 -> 8 was a reversal (`nyc-flights`'
    Saturdays, one daemon through 2013). After a scale-down the forecast alone does not scale up
    while the input runs within the 90% band of the factor's 12,800/s; the input past the band
    does, on its tick. With no scale-down before, the same slope scales up ahead of the band."""
    def climb(scaled_down: bool) -> list[tuple[float, float, int, str]]:
        policy, state = load_policy("autosizer"), None
        if scaled_down:
            _, state = policy.decide(observe(factor=16, input_rate=6_000, time=0), None)
        steps = []
        for k, rate in enumerate(range(6_000, 13_000, 500)):
            decision, state = policy.decide(observe(factor=8, input_rate=rate, time=15 * (k + 1)), state)
            steps.append((15 * (k + 1), rate, decision.factor, decision.reason))
            if decision.factor != 8:
                break
        return steps

    waited = climb(scaled_down=True)
    *held, (_, rate, factor, reason) = waited
    assert factor == 16 and rate > 0.9 * 12_800, (rate, reason)
    assert any("the job scaled down" in r and "is within the 90% band of 12800/s" in r for *_, r in held), held
    ahead = climb(scaled_down=False)
    assert ahead[-1][2] == 16 and ahead[-1][1] <= 0.9 * 12_800, ahead[-1]


def test_the_days_known_ramp_waits_for_the_input_to_pass_the_band():
    """Office days of 10,500/s: 82% of factor 8's 12,800/s, past the 80% target, inside the 90%
    band. From factor 1 the plan climbs to 16, sized at the target as a scale-up is; the factor
    the job runs is kept to the band, as a tick keeps it, so a plan made at 8 runs 8 (the June
    mornings of `nyc-flights`, one daemon through 2013, went 1 -> 16 -> 32: the bank took 81%
    of 16 as measured at 16, 79% as measured at 1). And on a day that runs as the days did, the
    forecast of the ramp into that peak does not scale up while the input stays inside the band
    (the evening banks projected 19,100/s and went 16 -> 32 -> 16, where 18,571/s came, 90% of
    16): the input past the band does, on its tick. With no days on record the same slope
    scales up ahead of the band."""
    from autosizer.policies.history import DAY_S, InputHistory

    history, policy = office_days(10_500.0), load_policy("autosizer")
    morning = 3 * DAY_S + 7 * 3600 + 30 * 60
    climbed, _ = policy.decide(observe(factor=1, input_rate=500, task_rate=400, time=morning, history=history), None)
    assert climbed.factor == 16 and climbed.reason.startswith("the day plan runs 16"), climbed.reason
    kept, _ = policy.decide(observe(factor=8, input_rate=500, task_rate=400, time=morning, history=history), None)
    assert kept.factor == 8, kept.reason

    def climb(days) -> list[tuple[float, int, str]]:
        policy, state, steps = load_policy("autosizer"), None, []
        start = 3 * DAY_S + 9 * 3600
        for second in range(3 * DAY_S, start, 60):
            days.record(second, 10_500.0 if second >= 3 * DAY_S + 8 * 3600 else 500.0)
        for k, rate in enumerate(range(8_000, 13_000, 250)):
            decision, state = policy.decide(observe(factor=8, input_rate=rate, time=start + 15 * k,
                                                    history=days), state)
            steps.append((rate, decision.factor, decision.reason))
            if decision.factor != 8:
                break
        return steps

    *held, (rate, factor, reason) = climb(office_days(10_500.0))
    assert factor == 16 and rate > 0.9 * 12_800, (rate, reason)
    assert any("recent days peaked at 10500/s within 60 min and the input" in r for *_, r in held), held
    *_, (rate, factor, reason) = climb(InputHistory())
    assert factor == 16 and rate <= 0.9 * 12_800, (rate, reason)


def test_a_scale_up_the_input_asks_for_is_sized_for_the_plans_step_within_the_hour():
    """Office days on record (the plan runs 8 from 08:00); the input passes factor 1's band
    early. Within the hour of the plan's step the scale-up goes to 8 at once: a step to 2 would
    be followed by the plan's 2 -> 8 (`nyc-flights`' weekday mornings went 1 -> 2 at 10:02 and
    2 -> 32 at 10:25, a rescale a day more). Further ahead than the hour, the input's own size;
    and on a day that already ran below the plan (a step ahead of the input was not needed), the
    input's own size too: a step ahead waits for the input there."""
    from autosizer.policies.autosizer_policy import AutosizerState
    from autosizer.policies.history import DAY_S

    def scale_up(minute: int, missed: bool = False):
        policy, history = load_policy("autosizer"), office_days()
        state = AutosizerState(missed=3) if missed else None  # day 3: the day of the ticks
        for k, rate in enumerate([500, 1500]):
            decision, state = policy.decide(observe(factor=1, input_rate=rate, task_rate=400,
                                                    time=3 * DAY_S + minute * 60 + 15 * k, history=history), state)
        return decision

    near = scale_up(7 * 60 + 5)
    assert near.factor == 8, near.reason
    assert near.reason.startswith("the day plan runs 8 in 55 min") and "need 2" in near.reason, near.reason
    far = scale_up(6 * 60 + 50)
    assert far.factor == 2 and "day plan" not in far.reason, far.reason
    below = scale_up(7 * 60 + 5, missed=True)
    assert below.factor == 2 and "day plan" not in below.reason, below.reason


def test_a_decision_names_the_broken_day_that_switched_the_day_plan_off():
    """Office days on record, and a holiday: by 09:30 the last hour ran 500/s where the days had
    8,000/s, so the policy reacts, and says why it does not follow the plan the days would make.
    A history too short to use is only noted in the details: it is every new job's first days."""
    from autosizer.policies.history import DAY_S, InputHistory

    history = office_days()
    for second in range(3 * DAY_S, 3 * DAY_S + 9 * 3600 + 1800, 60):
        history.record(second, 500.0)
    decision, _ = load_policy("autosizer").decide(
        observe(factor=8, input_rate=500, task_rate=400, time=3 * DAY_S + 9 * 3600 + 1800, history=history), None)
    assert "no day plan: today broke the days' pattern: the last hour peaked at 500/s where they had 8000/s" \
        in decision.reason, decision.reason
    assert decision.details["history"] in decision.reason

    short = InputHistory()
    for second in range(0, DAY_S, 60):
        short.record(second, 500.0)
    decision, _ = load_policy("autosizer").decide(
        observe(factor=1, input_rate=500, task_rate=400, time=DAY_S + 7 * 3600, history=short), None)
    assert decision.details["history"] == "1 of the last three days on record, 2 needed"
    assert "day plan" not in decision.reason, decision.reason


def test_with_the_day_on_record_the_evening_scale_down_waits_an_hour_not_the_lull_memory():
    """The same office days: at 18:00 the input drops from 8,000 to 500/s. The history says no
    peak comes back before 08:00, so the look-back a scale-down must clear is the hour the
    history looks ahead (`day_ahead_s`), not the 3-hour lull memory a job with no history needs
    (it cannot tell an evening from a lull)."""
    from autosizer.policies.history import DAY_S

    def evening(history):
        policy, state, factor = load_policy("autosizer"), None, 8
        drop = 3 * DAY_S + 18 * 3600
        for t in range(drop - 3600, drop + 5 * 3600, 15):
            rate = 8_000.0 if t < drop else 500.0
            decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=400, time=t,
                                                    history=history), state)
            if history is not None:
                history.record(t, rate)
            if decision.factor != factor:
                return (t - drop) / 60, factor, decision.factor, decision.reason
        return None

    history = office_days()
    minutes, old, new, reason = evening(history)
    assert (old, new) == (8, 1) and 45 <= minutes <= 60 and "the day plan runs 1" in reason
    minutes, old, new, _ = evening(None)
    assert (old, new) == (8, 1) and 150 <= minutes <= 180


def test_with_the_day_on_record_a_scale_up_for_a_peak_it_did_not_expect_is_kept_for_the_hour():
    """Office days of 6,000/s, and at 11:10 a 4-minute burst of 20,000/s they never had: 8 -> 16. With
    the days on record the scale-down looks back over the hour only, and the 15-minute slice that
    remembers the burst began at 11:00, so it left that memory at 12:00, 50 minutes after the
    scale-up (`nyc-flights`' June afternoons went 16 -> 32 -> 16 in 59 minutes, day after day).
    The hour runs from the scale-up, whatever slice the peak fell in."""
    from autosizer.policies.history import DAY_S

    history, policy, state, factor, decisions = office_days(6_000.0), load_policy("autosizer"), None, 8, []
    burst, held = 3 * DAY_S + 11 * 3600 + 600, []
    for t in range(burst - 3600 - 600, burst + 2 * 3600, 15):
        rate = 20_000.0 if burst <= t < burst + 240 else 6_000.0
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=400, time=t,
                                                history=history), state)
        history.record(t, rate)
        if decisions and t - decisions[0][0] < policy.day_ahead:
            held.append(decision.reason)
        if decision.factor != factor:
            decisions.append((t, factor, decision.factor, decision.reason))
            factor = decision.factor
    (up, old, new, _), *later = decisions
    assert (old, new) == (8, 16) and up - burst < 60, decisions
    assert all(t - up >= policy.day_ahead for t, *_ in later), later
    assert "hold: scaled up 50 min ago" in held[50 * 4], held[50 * 4]


def test_after_a_scale_down_the_day_plan_steps_back_up_within_the_hour_only_when_the_input_needs_it():
    """The office days, and the job scaled down from 8 to 4 at 07:35 (a day called broken, then
    believed again: `nyc-flights`' Friday after Thanksgiving went 16 -> 8 -> 16 in 12 minutes).
    The plan runs 8 from 07:30, half an hour ahead of the 08:00 rise, but going back up ahead of
    the input would undo a step taken minutes ago: it waits, and scales up when the input comes."""
    from autosizer.policies.history import DAY_S

    history, policy = office_days(), load_policy("autosizer")
    start = 3 * DAY_S + 7 * 3600 + 35 * 60
    _, state = policy.decide(observe(factor=8, input_rate=500, task_rate=400, time=start - 15, history=history), None)
    factor, decisions = 4, []
    for t in range(start, start + 3600, 15):
        rate = 8_000.0 if t >= 3 * DAY_S + 8 * 3600 else 500.0
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=400, time=t,
                                                history=history), state)
        history.record(t, rate)
        if t == start:
            assert decision.factor == 4 and "the day plan runs 8" in decision.reason \
                and "scaled down 0 min ago" in decision.reason, decision.reason
        if decision.factor != factor:
            decisions.append((t, factor, decision.factor, decision.reason))
            factor = decision.factor
    (t, old, new, reason), = decisions
    assert (old, new) == (4, 8) and 0 <= t - (3 * DAY_S + 8 * 3600) <= 60, (t, reason)
    assert "forecast" in reason

    # without the scale-down, the plan's step comes half an hour ahead of the rise
    decision, _ = policy.decide(observe(factor=4, input_rate=500, task_rate=400, time=start, history=history), None)
    assert decision.factor == 8 and decision.reason.startswith("the day plan runs 8"), decision.reason


def test_on_the_second_day_a_morning_ramp_is_met_at_the_size_the_first_day_reached():
    """One office day on record (8,000/s from 08:00), and the second morning ramps up the same
    way, doubling every 5 minutes. One day is too little to scale ahead on, so the job waits for
    the input as on its first day; but the scale-up the ramp's first step asks for is sized for
    the half hour the day on record had ahead, 1 -> 8, where sizing each step went 1 -> 2 -> 4 ->
    8 (`nyc-flights`' second mornings: 1 -> 2 -> 4 -> 8 -> 16 in 16 minutes). Kept for the hour."""
    from autosizer.policies.history import DAY_S

    history, policy, state, factor, decisions = office_days(days=1), load_policy("autosizer"), None, 1, []
    opens = DAY_S + 8 * 3600
    for t in range(opens - 600, opens + 2 * 3600, 15):
        step = (t - opens) // 300
        rate = 500.0 if step < 0 else min(8_000.0, 1_500.0 * 2 ** step)
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=400, time=t,
                                                history=history), state)
        history.record(t, rate)
        if decision.factor != factor:
            decisions.append((t, factor, decision.factor, decision.reason))
            factor = decision.factor
    (t, old, new, reason), = decisions
    assert (old, new) == (1, 8) and 0 <= t - opens <= 60, decisions
    assert "the day on record reached 8000/s within 30 min, sized for it" in reason, reason


def test_a_jump_the_day_on_record_sizes_is_not_waited_for():
    """A jump's first tick waits to see the rest of it, unless the one day on record already
    sizes it: the rest is what that day says. `workday`'s second morning (metrics 8 s old) read
    500/s, the ramp's edge (848/s), then 3,942/s, waited a tick for what the day had sized at
    once, and its lag peaked at 33 s against 22."""
    from autosizer.policies.history import DAY_S

    history, policy, state = office_days(days=1), load_policy("autosizer"), None
    opens = DAY_S + 8 * 3600
    for k, rate in enumerate([500.0] * 6 + [848.0, 3942.0]):
        decision, state = policy.decide(observe(factor=1, input_rate=rate, task_rate=400,
                                                time=opens - 105 + 15 * k, history=history), state)
    assert decision.factor == 8 and not decision.details.get("waited"), decision.reason
    assert "the day on record reached 8000/s within 30 min, sized for it" in decision.reason


def two_peak_days(busy, lull, days=3):
    """Days of 500/s at night, `busy` 06:00-08:00 and 18:00-21:00, `lull` between."""
    from autosizer.policies.history import DAY_S, InputHistory

    def level(second):
        hour = second % DAY_S / 3600
        return busy if 6 <= hour < 8 or 18 <= hour < 21 else lull if 8 <= hour < 18 else 500.0

    history = InputHistory()
    for second in range(0, days * DAY_S, 60):
        history.record(second, level(second))
    return history, level


def test_a_day_below_its_days_waits_for_the_input_once_a_step_ahead_of_it_was_not_needed():
    """Days on record peak at 12,000/s morning and evening (16 at 70%); today is a Saturday
    planned from weekdays, at about half of them (still within the trust check's tolerance). The
    plan's 1 -> 16 at 05:30 was not needed (6,200/s fits 8) and went 16 -> 8 at 08:00; its 8 -> 16
    for the evening would be undone the same way (`nyc-flights`' fresh weeks: Saturdays and
    Sundays went 1 -> 32 -> 16 -> 32 -> 16). Once today did not need a step ahead of the input,
    the next waits for the input. A day that needed its morning step takes the evening's."""
    from autosizer.policies.history import DAY_S

    def day(busy, lull):
        history, days_level = two_peak_days(12_000.0, 6_000.0)
        _, today = two_peak_days(busy, lull, days=0)
        policy, state, factor, decisions, reasons = load_policy("autosizer"), None, 1, [], {}
        for t in range(3 * DAY_S + 5 * 3600, 3 * DAY_S + 23 * 3600, 15):
            decision, state = policy.decide(observe(factor=factor, input_rate=today(t), task_rate=400, time=t,
                                                    history=history), state)
            history.record(t, today(t))
            reasons[t - 3 * DAY_S] = decision.reason
            if decision.factor != factor:
                decisions.append((factor, decision.factor))
                factor = decision.factor
        return decisions, reasons

    decisions, reasons = day(6_200.0, 3_500.0)
    assert decisions == [(1, 16), (16, 8), (8, 1)], decisions
    assert "today did not need a step up ahead of the input already" in reasons[17 * 3600 + 1800]
    decisions, _ = day(12_000.0, 6_000.0)
    assert decisions == [(1, 16), (16, 8), (8, 16), (16, 1)], decisions


def marks(offsets, at, partitions=16):
    """Watermarks of `partitions` partitions holding `offsets` records in all, read at `at`."""
    return Watermarks([("orders", p) for p in range(partitions)], [offsets / partitions] * partitions,
                      [at] * partitions)


def test_autosizer_reads_a_step_from_the_watermarks_before_the_rate_window_shows_it():
    """A step from 6,000 to 22,000/s, 15 s ago: the 30 s rate window still averages in the time
    before it (14,000/s), the watermarks grew by the whole step over the tick. The forecast is
    what arrives now, so one rescale covers it."""
    policy = load_policy("autosizer")
    steady = {"task_rate": 100, "busy": 1.0, "partitions": 16, "since_rescale_s": 9999}
    _, state = policy.decide(observe(factor=4, input_rate=6000, processed=6000, lag=0, time=0,
                                     watermarks=marks(1_000_000, 0.0), **steady))
    behind = {"input_rate": 14000, "processed": 6400, "lag": 234_000, "time": 15}
    decision, _ = policy.decide(observe(factor=4, watermarks=marks(1_330_000, 15.0), **behind, **steady),
                                state)
    assert decision.details["forecast"] == pytest.approx(22000)
    window_only, _ = policy.decide(observe(factor=4, watermarks=marks(1_330_000, 15.0), **behind, **steady))
    assert window_only.details["forecast"] == pytest.approx(14000), "no earlier tick: the window's rate"
    assert (decision.factor, window_only.factor) == (32, 16)


def test_autosizer_is_not_misled_by_a_batch_committing_between_two_ticks():
    """1,000/s arriving, batches of 5 s committing at once: the lag swings between 0 and 5,000
    and the processed rate of a 10 s window between 500 and 1,000/s. Processed plus the lag's
    growth over one 5 s tick read up to 2,000/s; the watermarks read what arrives, every tick."""
    policy = load_policy("autosizer")
    state, forecasts = None, []
    for k in range(24):
        t = 5.0 * k
        swing = {"lag": 5000.0 if k % 2 else 0.0, "processed": 500.0 if k % 2 else 1000.0}
        decision, state = policy.decide(observe(factor=4, input_rate=1000, task_rate=400, time=t,
                                                watermarks=marks(1000 * t, t), partitions=4, **swing), state)
        forecasts.append(decision.details.get("forecast"))
    assert forecasts[1:] == pytest.approx([1000.0] * 23)
    assert max(r for _, r in state.peaks) == pytest.approx(1000)


@pytest.mark.parametrize("change", ["another partition", "went back", "not read again", "unknown"])
def test_watermarks_that_cannot_tell_leave_the_rate_window_in_charge(change):
    before = marks(10_000, 0.0, partitions=2)
    after = {"another partition": Watermarks([("orders", 0), ("orders", 2)], [9000, 9000], [5.0, 5.0]),
             "went back": Watermarks(before.names, [9000, 10], [5.0, 5.0]),
             "not read again": Watermarks(before.names, [9000, 9000], [5.0, 0.0]),
             "unknown": Watermarks(before.names, [9000, math.nan], [5.0, 5.0])}[change]
    assert after.rate_since(before) is None
    assert marks(20_000, 5.0, partitions=2).rate_since(before) == pytest.approx(2000)
    policy = load_policy("autosizer")
    _, state = policy.decide(observe(input_rate=1000, time=0, watermarks=before, partitions=2))
    decision, _ = policy.decide(observe(input_rate=1000, time=5, watermarks=after, partitions=2), state)
    assert decision.details["forecast"] == pytest.approx(1000)


def test_a_step_is_not_projected_as_a_ramp_once_the_rate_window_holds_it():
    """100 -> 1,200/s at 5 s ticks over a 10 s rate window (the demo's clocks): the window reads
    650/s, then 1,200/s. The short and long slopes still rise for eight ticks; with them alone the
    forecast was 1,200 + 20/s/s x 122 s. A ramp at the same average slope keeps its trend, over
    as long as it has lasted (`ramp_age`: the ramp starts with the daemon here)."""
    policy = load_policy("autosizer")

    def forecasts(rate) -> list[float]:
        state, out = None, []
        for k in range(16):
            decision, state = policy.decide(observe(factor=16, input_rate=rate(k), task_rate=400, time=5.0 * k,
                                                    restart_downtime_s=2.0), state)
            out.append(decision.details["forecast"])
        return out

    step = forecasts(lambda k: 100.0 if k < 8 else 650.0 if k == 8 else 1200.0)
    assert step[10:] == pytest.approx([1200.0] * 6)
    ramp = forecasts(lambda k: 100.0 + 110.0 * k)
    assert all(f > 100.0 + 110.0 * k + 0.9 * 22.0 * 5.0 * (k - 1) for k, f in enumerate(ramp) if k >= 8), ramp


def test_a_30s_rate_window_taking_in_a_step_is_not_projected_as_a_ramp():
    """A 5 s tick over the default 30 s rate window. 100 -> 1,200/s: the watermarks show the step
    within a tick, the window rises over six ticks, a clean line the five-tick test passes (the
    demo's run 41 forecast 4,174/s for 1,200/s from a window's rise, and went 8 -> 32). With the
    watermarks' series beside it, the forecast is the input from the tick after the step on; a
    ramp seen the same way keeps its trend."""
    policy = load_policy("autosizer")

    def forecasts(rate) -> list[float]:
        state, out, offsets = None, [], 0.0
        for k in range(20):
            t = 5.0 * k
            offsets += 5.0 * rate(t)
            window = sum(rate(u) for u in np.arange(t - 29.5, t + 0.5, 1.0)) / 30.0
            decision, state = policy.decide(observe(factor=16, input_rate=window, task_rate=400, time=t,
                                                    restart_downtime_s=2.0, watermarks=marks(offsets, t)),
                                            state)
            out.append(decision.details["forecast"])
        return out

    step = forecasts(lambda t: 100.0 if t < 50 else 1200.0)
    assert step[11:] == pytest.approx([1200.0] * 9), step
    ramp = forecasts(lambda t: 100.0 + 22.0 * t)
    assert all(f > 100.0 + 22.0 * 5 * k + 1000 for k, f in enumerate(ramp) if k >= 10), ramp


def test_a_batch_boundary_in_the_rate_window_does_not_make_a_scale_up_look_useless():
    """At the scale-up tick the window held two batches' commits: 40/s processed where the tasks
    measure 20/s flat out. Judged against 40/s, factor 2's 40/s was "+0%": back to 1 and a
    ceiling there for hours, with the lag growing (a real run on 2 busy cores, 18/s for 9/s)."""
    policy = load_policy("autosizer")
    job = {"input_rate": 5, "task_rate": 10, "partitions": 2}
    decision, state = policy.decide(observe(factor=1, lag=10_000, processed=40, time=0, **job))
    assert decision.factor == 2
    for t in range(15, 120, 15):
        decision, state = policy.decide(observe(factor=2, lag=0, time=t, since_rescale_s=t - 5, **job), state)
        assert "did not help" not in decision.reason and "back to 1" not in decision.reason, decision.reason
    assert state.ceiling is None


def test_autosizer_goes_down_in_one_rescale_when_the_peak_holding_it_soon_leaves_the_memory():
    """16 at 8,000/s for 15 min, 3,000/s for 15 min, then nothing. The 3-hour memory holds 8
    until the 8,000/s slice leaves it, then 4 for the 15 minutes until the 3,000/s slice leaves
    too: two rescales 15 minutes apart. With the hold, 8 waits for both and goes to 1 at once."""
    policy = load_policy("autosizer")  # 400/s per task on 4 partitions: 1,600/s per factor step
    state, factor, path, reasons = None, 16, [16], []
    for t in range(0, 4 * 3600, 15):
        rate = 8000.0 if t < 900 else 3000.0 if t < 1800 else 0.0
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=400, time=t), state)
        reasons.append(decision.reason)
        if decision.factor != factor:
            factor = decision.factor
            path.append(factor)
    assert path == [16, 8, 1]
    assert any("leave the 180-min memory within 120 min" in r for r in reasons)


def test_autosizer_remembers_a_burst_at_the_height_the_backlog_shows():
    """A 30-second burst shows in a 30-second rate window at half its height, but the
    watermarks' growth over the tick has all of it; the peak a scale-down must fit is the
    burst's own."""
    policy = load_policy("autosizer")
    state = None
    for t in range(0, 600, 15):
        _, state = policy.decide(observe(factor=16, input_rate=4000, task_rate=400, time=t,
                                         watermarks=marks(4000 * t, t, partitions=4)), state)
    _, state = policy.decide(observe(factor=16, input_rate=9000, processed=4000, lag=150_000,
                                     task_rate=400, time=600,
                                     watermarks=marks(4000 * 585 + 14_000 * 15, 600, partitions=4)), state)
    assert max(r for _, r in state.peaks) == pytest.approx(14_000)


def test_a_burst_is_not_projected_as_a_ramp_but_a_ramp_is():
    """`noise-spikes`: 4,000/s, then a 30-second burst at 4x, read over two 15 s ticks (7,900 and
    16,000/s). Its ticks rise far past their scatter, but in two ticks of the last four: on the
    second the forecast is the 16,000/s arriving, not that plus the burst's slope over the
    horizon (which went 8 -> 32 where 16 absorbs the bursts). Its first rising tick, which may
    have caught only part of a jump, is still projected; a lone tick a sixth above the level is
    noise, not a jump's first tick, and is not. The same rise spread over four ticks is a ramp,
    and is projected."""
    def forecast(levels):
        policy, state, offsets, decision = load_policy("autosizer"), None, 0.0, None
        for k, rate in enumerate([4000.0] * 40 + levels):
            offsets += rate * 15
            decision, state = policy.decide(observe(factor=16, input_rate=rate, task_rate=100, partitions=16,
                                                    time=15.0 * k, watermarks=marks(offsets, 15.0 * k)), state)
        return decision.details["forecast"]

    assert forecast([7_900.0, 16_000.0]) == pytest.approx(16_000)
    assert forecast([7_900.0]) > 7_900
    assert forecast([4_700.0]) == pytest.approx(4_700)
    assert forecast([7_000.0, 10_000.0, 13_000.0, 16_000.0]) > 16_500  # over the minute it lasted


def test_a_level_after_a_step_and_a_restart_is_not_projected_on_one_noisy_tick():
    """Run 56 (`bench_sim_vs_real.py`, session 21), as the daemon read it every 5 s: 100/s, the
    step to 1,200/s at 30 s, 1 -> 8 at 35 s (the rate window dips across the restart), then a
    tick that read 1,617/s. Three of its last four ticks rose (the window's recovery from the
    restart, and noise) and the eight-tick slope still reached back before the step: forecast
    3,580/s, 8 -> 16 for nothing, and back to 8 a minute later. Noise in five ticks of a level
    does not rise beyond two standard errors of their fit; a ramp does (test below)."""
    rates = [96, 111, 122, 104, 110, 130, 1232, 482, 838, 1214, 1330, 1130, 1617]
    arrivals = [96, 111, 122, 104, 110, 130, 1232, 1202, 1200, 1214, 1330, 1200, 1617]
    policy, state, offsets, decision = load_policy("autosizer"), None, 0.0, None
    for k, (rate, arriving) in enumerate(zip(rates, arrivals, strict=True)):
        offsets += arriving * 5
        factor = 1 if k < 7 else 8
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, task_rate=100, partitions=4,
                                                time=5.0 * (k + 1), since_rescale_s=5.0 * (k - 6) if k > 6 else 9999,
                                                watermarks=marks(offsets, 5.0 * (k + 1), partitions=4)), state)
    assert decision.details["forecast"] == pytest.approx(1617)
    assert decision.factor == 8


def test_a_jump_after_two_noisy_rises_is_projected_as_a_jump():
    """Run 58 (session 21), the daemon's own ticks from its journal: 100/s read as 94, 93, 97, 100,
    then the step's first tick read 602/s in the rate window and 1,054/s from the watermarks.
    Three of the rate window's last four ticks rose, so it went down the ramp path, where five
    ticks this scattered are no ramp: not projected, 1 -> 4 at 1,054/s, held at 4 at 83-90%. A
    jump's first tick is a jump whatever the ticks before it did. (Since session 22 a job nobody
    is 10 s behind in waits for the next tick, which sees the jump whole; one that is, as here
    with 12 s of input waiting, is sized on the projection at once.)"""
    rates = [85.2, 94.78, 105.11, 94.33, 92.56, 96.67, 100.0, 602.33]
    arrivals = [85.2, 100.0, 105.11, 100.0, 100.0, 100.0, 100.0, 1054.0]
    policy, state, offsets, decision = load_policy("autosizer"), None, 0.0, None
    for k, (rate, arriving) in enumerate(zip(rates, arrivals, strict=True)):
        offsets += arriving * 5
        decision, state = policy.decide(observe(factor=1, input_rate=rate, task_rate=98, partitions=4,
                                                lag=12 * rate if k == 7 else 0, restart_downtime_s=1.0,
                                                time=5.0 * k, watermarks=marks(offsets, 5.0 * k, partitions=4)),
                                        state)
    assert decision.details["forecast"] > 1500
    assert decision.factor == 8


def test_a_noisy_level_is_not_projected_as_a_ramp():
    """1,200/s read with a tenth of noise either way, as a real job's ticks read it. With the last
    tick's slope as the only short bound, a tick that read more than the one before was projected
    over the 122 s horizon (3,340/s for 1,200/s in the demo, and a rescale it did not need)."""
    import random

    policy = load_policy("autosizer")
    noise = random.Random(7)
    state, projected = None, []
    for k in range(60):
        rate = 1200.0 * (1 + noise.uniform(-0.1, 0.1)) if k >= 8 else 100.0 * (1 + noise.uniform(-0.1, 0.1))
        decision, state = policy.decide(observe(factor=16, input_rate=rate, task_rate=400, time=5.0 * k,
                                                restart_downtime_s=2.0), state)
        if k >= 17:  # the short slope no longer reaches back to the step
            projected.append(decision.details["forecast"] - rate)
    assert max(projected) < 300, max(projected)  # at most a quarter of a level's worth ahead


def jump(series, factor=4, task_rate=50.0, partitions=16, tick=15.0, behind_s=0.0, **extra):
    """Feed autosizer (rate window, watermarks' rate) per tick; the last tick's backlog is
    `behind_s` seconds of its input; `extra` goes to every observation. Returns every decision."""
    policy, state, offsets, decisions = load_policy("autosizer"), None, 0.0, []
    for k, (rate, arriving) in enumerate(series):
        offsets += arriving * tick
        lag = behind_s * arriving if k == len(series) - 1 else 0.0
        decision, state = policy.decide(observe(factor=factor, input_rate=rate, processed=rate, lag=lag,
                                                task_rate=task_rate, partitions=partitions, time=tick * (k + 1),
                                                since_rescale_s=9999, **extra,
                                                watermarks=marks(offsets, tick * (k + 1), partitions)), state)
        decisions.append(decision)
    return decisions


def test_a_jump_seen_in_part_is_sized_on_the_next_tick_in_one_rescale():
    """`step-up` (2,000 -> 6,000/s) with metrics 8 s old, the step 8 s before a 15 s tick: the
    tick read 2,933/s in the rate window and 3,867/s from the watermarks, went 4 -> 8, and the
    next tick, which read the 6,000/s, waited out the overload cooldown for 16 (two rescales, a
    minute apart; the suite's steps, on a tick with fresh metrics, hid it). Nobody is behind yet,
    so the first tick holds and the next sizes the whole step: one rescale."""
    level = [(2000.0, 2000.0)] * 6
    first, second = jump([*level, (2933.0, 3867.0), (4933.0, 6000.0)])[-2:]
    assert first.factor == 4 and "jumped to 3867/s within the last tick" in first.reason
    assert second.factor == 16 and second.details["forecast"] == pytest.approx(6000)


def test_a_jump_whose_edge_rose_the_tick_before_is_still_sized_on_the_tick_after():
    """Run 113's replay (5 s ticks, a step 100 -> 1,200/s a second before a tick): the watermarks
    read 127/s (the step's edge, a jump of a quarter), then 942/s, then 1,200/s. The 127 was taken
    for the jump's first tick and the 942 for the whole of it: 1 -> 4, and the overload cooldown
    kept it there, where the real daemon (its tick had read 88/s) waited and went 1 -> 8. A tick
    that rose by less than a quarter of the next one's rise saw only the jump's edge."""
    level = [(100.0, 100.0)] * 6
    edge, first, second = jump([*level, (115.0, 127.0), (583.0, 942.0), (1157.0, 1200.0)],
                               factor=1, task_rate=83.75, partitions=4, tick=5.0, behind_s=3.4)[-3:]
    assert edge.factor == 1
    assert first.factor == 1 and "jumped to 942/s within the last tick" in first.reason
    assert second.details["forecast"] == pytest.approx(1200)
    assert second.factor == 8  # 1,200/s and 4,080 records behind need more than 4's 1,340/s (run 113's)
    # a jump seen over two ticks, each a fair share of it, is still sized on its second
    seen = jump([*level, (300.0, 560.0), (900.0, 1200.0)], factor=1, task_rate=83.75, partitions=4, tick=5.0)
    assert seen[-2].details.get("waited") and not seen[-1].details.get("waited")


def test_a_jump_is_sized_at_once_when_the_job_is_already_behind():
    """A tick's wait is for a job that can afford it: 10 s of input waiting (`backlog_s`) is not."""
    level = [(2000.0, 2000.0)] * 6
    decision = jump([*level, (2933.0, 3867.0)], behind_s=12.0)[-1]
    assert decision.factor > 4 and "jumped" not in decision.reason


def test_the_tick_after_a_jumps_first_is_not_projected_as_a_ramp():
    """Run 60's step (5 s ticks), replayed with the wait: the watermarks read 757/s then 1,200/s
    (the step landed mid-tick), the rate window 428 then 979/s. Two rises of a quarter in a row
    looked like a ramp and forecast 2,790/s: 1 -> 16 and back to 8 45 s later. The tick after a
    jump's first sizes for what it reads; a ramp shows in the tick after it."""
    level = [(100.0, 100.0), (99.0, 101.0), (101.0, 99.0), (100.0, 100.0), (102.0, 101.0), (100.0, 100.0)]
    decisions = jump([*level, (428.0, 757.0), (979.0, 1200.0)], factor=1, task_rate=98.0,
                     partitions=4, tick=5.0)
    assert decisions[-2].factor == 1
    assert decisions[-1].details["forecast"] == pytest.approx(1200)
    assert decisions[-1].factor == 4  # 1,568/s there: 1,200/s at 77%, no backlog in this feed


@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=1e5, allow_nan=False),
                          st.floats(min_value=0.0, max_value=1e5, allow_nan=False)), min_size=7, max_size=30))
def test_a_jump_is_never_waited_for_two_ticks_in_a_row(series):
    """Whatever the input reads, the wait on a jump's first tick is one tick: the next one is
    either no jump or a second jump in a row (a ramp), and sizes."""
    decisions = jump(series)
    waited = [bool(d.details.get("waited")) for d in decisions]
    assert not any(a and b for a, b in zip(waited, waited[1:], strict=False))


@given(st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=7, max_size=30))
def test_a_rise_past_the_band_is_never_waited_for_two_ticks_in_a_row(series):
    """Levels about the scale-up band, where the rise past it (not only a jump) waits: still one
    tick at most, then the job is sized."""
    decisions = jump([(rate, rate) for rate in series], factor=1, task_rate=50.0)
    waited = [bool(d.details.get("waited")) for d in decisions]
    assert not any(a and b for a, b in zip(waited, waited[1:], strict=False))


def test_a_step_seen_as_a_small_rise_past_the_band_is_sized_on_the_next_tick():
    """`cpu-bound` (500 -> 2,700/s at factor 1) with the step a second before a 15 s tick: the
    tick read 647/s, under a quarter above the ticks before (no jump), but past the 90% band of
    factor 1's 646/s. Sized on it, 1 -> 2; the next tick read 2,727/s and waited out the overload
    cooldown for 4, a minute later. That tick now waits, and the next sizes the whole step."""
    level = [(500.0, 500.0), (499.0, 501.0), (501.0, 499.0), (498.0, 498.0), (508.0, 519.0)]
    first, second = jump([*level, (583.0, 647.0), (1687.0, 2727.0)], factor=1, task_rate=646 / 16)[-2:]
    assert first.factor == 1 and "rose past the scale-up band to 647/s" in first.reason
    assert second.details["forecast"] == pytest.approx(2727)
    assert second.factor == 8  # 2,727/s at 53% of 8's 5,168/s; 4's 2,584/s is short


def test_a_jump_that_already_needs_the_most_any_factor_can_do_is_sized_at_once():
    """`cpu-bound` with metrics 4 or 8 s old: the step's first tick read most of it and already
    needed the cores' ceiling (factor 4: 2,584/s of the 2,667/s any factor can do). Seeing the
    rest could not change the factor, and the wait cost 126 violation-seconds (12,560 against
    utilization's 12,479 at 4 s). A wait is only for a rise whose rest could need more."""
    level = [(500.0, 500.0)] * 6
    decision = jump([*level, (1300.0, 2400.0)], factor=1, task_rate=646 / 16, cpu_ceiling=2667.0)[-1]
    assert decision.factor == 4 and not decision.details.get("waited")
    assert "the cores cap the job at 2667/s" in decision.reason
    # the same tick without the cores' ceiling: the rest of the jump could need more, so it waits
    assert jump([*level, (1300.0, 2400.0)], factor=1, task_rate=646 / 16)[-1].details.get("waited")


def test_noise_before_a_steps_edge_is_no_ramp():
    """`step-up` (2,000 -> 6,000/s, 15 s ticks) with the step 2 s before a tick: the ticks before
    it read 1,993, 2,011 and 2,060/s by noise, then 2,534/s, past the band of 4's 2,585/s. Three
    rises in four looked like a ramp, which is sized at once: 4 -> 8, and the next tick (6,069/s)
    waited out the overload cooldown for 16. A ramp rises beyond its scatter before the band."""
    noise = [2000.0, 1995.0, 2000.0, 2010.0, 1993.0, 2011.0, 2060.0]
    first, second = jump([*[(r, r) for r in noise], (2297.0, 2534.0), (4302.0, 6069.0)],
                         task_rate=2585 / 64)[-2:]
    assert first.factor == 4 and "rose past the scale-up band to 2534/s" in first.reason
    assert second.factor == 16 and second.details["forecast"] == pytest.approx(6069)


def test_a_jump_whose_projection_alone_needs_the_top_still_waits():
    """Run 115 (the demo, 5 s ticks, the cores capping the job at 5,105/s): the step's first tick
    saw part of 100 -> 1,200/s with 4 s of it waiting, projected it to 2,006/s, which needed 16,
    the cores' top, and went 1 -> 16 unwaited where 8 covers the step (49% there). The wait is
    skipped only when what the tick saw, unprojected, needs the top."""
    level = [(100.0, 100.0)] * 6
    for seen in (900.0, 1050.0, 1200.0):
        decision = jump([*level, (640.0, seen)], factor=1, task_rate=95.2, partitions=4, tick=5.0,
                        behind_s=4.0, cpu_ceiling=6723.0, duty=0.759)[-1]
        assert decision.details["forecast"] > 1900  # projected: 16's worth
        assert decision.factor == 1 and decision.details.get("waited"), (seen, decision.reason)


def test_a_ramp_past_the_band_is_sized_at_once():
    """A ramp that reaches the band is projected, not waited for: the wait is for a rise that
    one tick may have seen in part, and a ramp shows in every tick."""
    ramp = [(400.0 + 40.0 * k, 400.0 + 40.0 * k) for k in range(7)]
    decision = jump(ramp, factor=1)[-1]
    assert decision.factor > 1 and not decision.details.get("waited")


def test_a_ramp_is_projected_no_further_than_it_has_lasted():
    """Run 63, `examples/demo.py --shape ramp` on a daemon started 30 s before the ramp: 100 ->
    1,200/s over 60 s at 5 s ticks. At its end the ramp's slope was projected over the restart
    and the 120 s horizon, 2,777/s for the 1,200/s it levelled at: 8 -> 16 at 35% of 8's
    capacity, and back to 8 fifty seconds later. Projected over the minute it had lasted, the
    forecast stays inside the band; a ramp that goes on is projected further as it goes on."""
    level = [(100.0, 100.0)] * 6
    ramp = [(100.0 + 1100.0 * k / 12, 100.0 + 1100.0 * k / 12) for k in range(1, 13)]
    decisions = jump([*level, *ramp, *[(1200.0, 1200.0)] * 4], factor=8, task_rate=98.6, partitions=4, tick=5.0)
    assert max(d.factor for d in decisions) == 8  # no scale-up (the level before it fits less)
    end = decisions[len(level) + len(ramp) - 1]
    assert 1200 < end.details["forecast"] < 1200 + 1100 / 60 * 62  # the slope over the minute, and the restart
    longer = jump([*level, *[(100.0 + 1100.0 * k / 12, 100.0 + 1100.0 * k / 12) for k in range(1, 25)]],
                  factor=8, task_rate=98.6, partitions=4, tick=5.0)
    assert longer[-1].details["forecast"] > 2300 + 1100 / 60 * 62  # two minutes on: further than a minute


def test_a_hold_below_the_scale_down_band_names_the_input_that_keeps_the_factor():
    """`make demo` sat at 3% of factor 8 for minutes after its step, its reason the utilization
    alone: the rate window's highest input held the factor, and the reason now says so; once it
    leaves the window the peak memory's reason takes over."""
    policy = load_policy("autosizer")
    state = None
    for t in range(0, 600, 15):
        decision, state = policy.decide(observe(factor=8, input_rate=8000, task_rate=400, time=t), state)
    reasons = []
    for t in range(600, 1350, 15):
        decision, state = policy.decide(observe(factor=8, input_rate=500, task_rate=400, time=t), state)
        assert decision.factor == 8
        reasons.append(decision.reason)
    assert reasons[0] == ("hold: utilization 4% of measured 12800/s; input 500/s would fit less, "
                          "but it reached 8000/s within the last 10 min")
    assert reasons[-1] == "hold: input 500/s would fit less, but it reached 8000/s within 180 min"
    steady, _ = policy.decide(observe(factor=8, input_rate=5000, task_rate=400))
    assert steady.reason == "hold: utilization 39% of measured 12800/s"  # a factor below would not fit it


def test_a_frozen_value_built_without_its_init_is_the_one_its_constructor_builds():
    """`frozen` skips a frozen dataclass's generated `__init__` (14 us a tick for an observation,
    as much for the policy's state): what it builds must be field for field what the constructor
    builds, defaults and fresh default factories included, and a call the constructor refuses
    must be refused too."""
    stats = PartitionStats.from_rows({("t", 0): (5.0, 1.0, 10.0, 9.0)})
    made = frozen(Observation, time=3.0, factor=2, partitions=stats, since_rescale_s=4.0)
    built = Observation(3.0, 2, stats, since_rescale_s=4.0)
    assert made.__dict__.keys() == built.__dict__.keys()
    assert all(made.__dict__[k] is built.__dict__[k] for k in made.__dict__ if k not in ("tasks", "cache"))
    assert len(made.tasks) == 0 and made.cache == {} and made.cache is not frozen(
        Observation, time=3.0, factor=2, partitions=stats).cache  # a factory's value is each one's own
    assert made.lag_records == 5.0 and made.restart_downtime_s == 2.0
    state = frozen(AutosizerState, factor=4)
    assert state == AutosizerState(factor=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.factor = 8  # type: ignore[misc]
    with pytest.raises(TypeError, match="partitions"):
        frozen(Observation, time=3.0, factor=2)
    with pytest.raises(TypeError, match="fcator"):
        frozen(AutosizerState, fcator=4)
    with pytest.raises(TypeError, match="__post_init__"):
        frozen(Decision, factor=3, reason="")  # it checks its factor there
