"""The default policy's goals against the two baselines, over the whole trace suite.

Goals that name one kind of trace are checked on it; the comparative ones (fewer rescales, no
more violation, less violation at no more cost) on the suite's totals, since a policy is chosen
for a fleet of jobs rather than one trace.
"""

from __future__ import annotations

import dataclasses
import tomllib

import pytest

from autosizer.actuators.verification import VERIFY_WINDOW_S
from autosizer.policies import Guards, load_policy
from autosizer.simulator.bounds import violation_floor
from autosizer.simulator.engine import simulate
from autosizer.simulator.job import JobModel
from autosizer.simulator.scores import broken_goals, score
from autosizer.simulator.traces import TRACES, Trace, load_trace, real_trace_names, trace_names

POLICIES = ("autosizer", "utilization", "lag-threshold")
REAL = tuple(real_trace_names())
DAY = 86_400
STEPS = ("step-up", "step-down", "outage-backfill", "cpu-bound")  # one change each, a step


SCRAPED_S = 2.0  # how old a daemon behind a 1 s Prometheus scrape reads the metrics
SCRAPED_GROUP = "trace-suite-2s"


@pytest.fixture(scope="module", params=[
    # Under `--dist loadgroup` (`make test`) the tests reading the runs go to one worker, which
    # computes them (about two and a half minutes) once rather than once on every worker.
    pytest.param(SCRAPED_S, id="metrics 2 s old", marks=pytest.mark.xdist_group(SCRAPED_GROUP)),
])
def suite(request):
    """Every trace under every policy, with the metrics each decision reads 2 s old: a daemon
    behind a 1 s Prometheus scrape reads them 1.2-2.0 s old (`autosizer fit` on the demo's runs),
    so every goal below is held where a deployed job meets it. Until session 39 each goal was
    held with fresh metrics too (the tables' idealization, which no daemon reads), and held
    there: `bench_trace_oracle.py --goals --metrics-age 0` lists the same misses at 0 s and 2 s.
    That second copy of the suite cost about 150 s of a worker."""
    return runs_at(request.param)


def runs_at(metrics_age_s: float) -> dict:
    """The suite's runs at one metrics age. The default policy runs behind the shipped actuator
    (its lag check after a scale-down, `VERIFY_WINDOW_S`), as a deployed job runs it; the
    baselines as the traces have them, their own decisions (README, "The actuator's lag check").
    Until session 42 ours ran without the check here and again with it in a test of its own,
    which asserted the same figures: one pass of the suite (about 90 s of a worker) spent on
    a copy."""
    found = {}
    for name in trace_names():
        trace = load_trace(name)
        job = dataclasses.replace(trace.job, metrics_age_s=metrics_age_s)
        for policy in POLICIES:
            shipped = dataclasses.replace(job, verify_window_s=VERIFY_WINDOW_S) if policy == "autosizer" else job
            run = simulate(trace.workload, shipped, load_policy(policy))
            found[name, policy] = (run, score(run))
    return found


def total(suite, policy, field, traces=None):
    return sum(getattr(s, field) for (t, p), (_, s) in suite.items()
               if p == policy and (traces is None or t in traces))


def synthetic():
    return [t for t in trace_names() if t not in REAL]


@pytest.mark.parametrize("trace", STEPS)
def test_one_rescale_converges_after_a_step(suite, trace):
    assert suite[trace, "autosizer"][1].converge_rescales <= 1


def shifted(trace, seconds: int, metrics_age_s: float):
    """The trace's change `seconds` later, read through metrics `metrics_age_s` old."""
    return trace.workload.delayed(seconds), dataclasses.replace(trace.job, metrics_age_s=metrics_age_s)


# No change of theirs lands in a tick: the real traces are 5-minute series over days, and
# `diurnal` is a sine with a day's period, which moves 0.06% of its amplitude in 14 s (every shift
# gives the same figures: `bench_trace_phase.py diurnal`). `diurnal` cost the suite 2 minutes of a worker.
SMOOTH = (*REAL, "diurnal")


@pytest.mark.parametrize("metrics_age_s", [SCRAPED_S, 8.0])
@pytest.mark.parametrize("trace", [t for t in trace_names() if t not in SMOOTH])
def test_no_goal_is_lost_wherever_the_change_lands_in_a_tick(trace, metrics_age_s):
    """The suite's changes land on a tick, which then reads them whole. A real one lands anywhere
    in the 15 s tick, and the daemon's metrics are a scrape old (2 s at a 1 s scrape, 8 s at 15 s),
    so the first tick after it may have seen one second of it. Every synthetic trace delayed 0, 3,
    ..., 12 s (`benchmarks/bench_trace_phase.py` prints the figures at 0, 2, ..., 14 s) keeps
    every per-trace goal its unmoved run keeps (one rescale to converge, scale-up within a
    minute, no reversal within the hour) and rescales no more often. The step traces converge in one rescale and are never late:
    `step-up` went 4 -> 8 -> 16 with the step 8-12 s before a tick, until that tick waited for the
    next to see the jump whole; `cpu-bound` went 1 -> 2 -> 4 where that second read as a rise too
    small for a jump, until the first tick past the band waited too. `cpu-bound` is late at every
    factor (the cores cap it): there it is no later than `utilization`, as the second goal asks,
    which it was not at 4 s and 8 s while a tick that already needed the cores' ceiling waited.
    (`SMOOTH`'s traces have no change for seconds to move.) The ages a daemon reads, 2 s behind a
    1 s scrape to 8 s behind a 15 s one; never fresh, which no daemon reads (until session 38 this
    ran at 0 s too, and held there). The step traces move by every second: at odd ones `step-up`
    went 4 -> 8 -> 16 again (session 43), where noise on the ticks before the step's edge looked
    like a ramp, which is sized at once rather than waited for (`forecast._ramp_before`). The
    other traces move by 3 s, five phases of the tick (by 2 s until session 73: `workday`'s four
    days cost 70 s of a worker at eight shifts, when CI took 1,142 s of its 1,200)."""
    base = load_trace(trace)
    runs = []
    for seconds in range(0, 15, 1 if trace in STEPS else 3):
        workload, job = shifted(base, seconds, metrics_age_s)
        result = score(simulate(workload, job, load_policy("autosizer")))
        runs.append(result)
        assert not broken_goals(result, runs[0]), (seconds, result, runs[0])
        assert result.rescales <= runs[0].rescales, (seconds, result, runs[0])
        if trace not in STEPS:
            continue
        assert result.converge_rescales <= 1, (seconds, result)
        if trace == "cpu-bound":
            util = score(simulate(workload, job, load_policy("utilization")))
            assert result.violation_s <= util.violation_s, (seconds, result, util)
        else:
            assert result.violation_s == 0, (seconds, result)


# The traces of hours, where a second run costs a second or less; the days-long ones get the
# same comparison from `bench_trace_oracle.py --goals --verify-window 30` (BENCHMARKS). Read
# from the files, as `real_trace_names` does: loading the real series here cost every process
# that collects the tests 1.6 CPU-s.
HOURS_LONG = [t for t in trace_names()
              if tomllib.loads((TRACES / f"{t}.toml").read_text())["workload"].get("seconds", 0) <= 6 * 3600]


@pytest.mark.parametrize("trace", trace_names())
def test_behind_the_shipped_actuator_no_scale_down_of_ours_is_rolled_back(suite, trace):
    """The suite runs the default policy behind the shipped actuator (30 s lag check after a
    scale-down, the daemon waiting it out, a rollback when the backlog grows faster than
    before): none of its scale-downs falls behind there, so every goal below holds where a
    deployed daemon runs it. (`lag-threshold`'s figures move with the check: README, "The
    actuator's lag check".)"""
    run, _ = suite[trace, "autosizer"]
    assert run.job.verify_window_s == VERIFY_WINDOW_S
    assert not [r for r in run.rescales if r.reason.startswith("rolled back")]


@pytest.mark.parametrize("trace", HOURS_LONG)
def test_the_tables_figures_without_the_check_are_the_same_as_behind_it(suite, trace):
    """The tables (BENCHMARKS, `bench_trace_oracle.py`) run every policy as its trace has it,
    without the check: for the default policy that changes no figure, as none of its scale-downs
    is rolled back and none waits out a window that a decision of its needed."""
    trace_ = load_trace(trace)
    bare = simulate(trace_.workload, dataclasses.replace(trace_.job, metrics_age_s=SCRAPED_S), load_policy("autosizer"))
    assert score(bare) == suite[trace, "autosizer"][1]


def test_fewer_rescales_than_utilization_and_no_more_violation(suite):
    # The synthetic traces' start factors were chosen for even buckets, so several open with a
    # rescale that sizing by the hottest bucket needs: there the margin is thin.
    traces = synthetic()
    ours, theirs = total(suite, "autosizer", "rescales", traces), total(suite, "utilization", "rescales", traces)
    assert ours <= theirs, (ours, theirs)
    assert total(suite, "autosizer", "violation_s") <= total(suite, "utilization", "violation_s")


def test_a_third_fewer_rescales_than_utilization_on_real_traffic_and_no_more_violation(suite):
    ours, theirs = total(suite, "autosizer", "rescales", REAL), total(suite, "utilization", "rescales", REAL)
    assert ours <= 0.7 * theirs, (ours, theirs)
    assert total(suite, "autosizer", "violation_s", REAL) <= total(suite, "utilization", "violation_s", REAL)


@pytest.mark.parametrize("trace", (*REAL, "diurnal", "workday"))
def test_daily_cycles_at_most_four_rescales_a_day_and_no_reversal_within_an_hour(suite, trace):
    """Every day of the trace counts, the first two (no history yet: the policy reacts) too."""
    run, result = suite[trace, "autosizer"]
    assert result.rescales <= 4 * run.factor.size / DAY, result.rescales
    assert result.reversals_1h == 0


@pytest.mark.parametrize("trace", trace_names())
def test_scale_up_within_a_minute_of_a_sustained_overload(suite, trace):
    assert suite[trace, "autosizer"][1].scale_up_delay_s <= 60


@pytest.mark.parametrize("trace", trace_names())
def test_half_the_violation_of_lag_threshold_wherever_any_policy_could(suite, trace):
    """Per trace. Where the work is slower than the SLO at every factor (one hot key's lane,
    CPU past the cores), the least lateness any factor held from the start achieves is above half
    of lag-threshold's, and no policy can meet the goal: the floor is computed, not assumed."""
    ours, theirs = suite[trace, "autosizer"][1].violation_s, suite[trace, "lag-threshold"][1].violation_s
    if ours <= 0.5 * theirs:
        return
    floor, _ = violation_floor(load_trace(trace))
    assert floor > 0.5 * theirs, (ours, theirs, floor)


# Where a comparative goal is missed on a trace, and why (README, "What would meet each missed
# goal"); every other trace is held to it one by one, so none that meets it slips back unseen.
COSTLIER_THAN_LAG_THRESHOLD = {
    "nyc-flights": "no schedule of <= 4 rescales a day costs as little (the oracle bound)",
    "cpu-bound": "the floor is above half of lag-threshold's lateness",
    "hot-key": "the floor is above half of lag-threshold's lateness",
    "flash-crowd": "the 3-hour peak memory without history; a shorter one breaks nyc-flights",
    "outage-backfill": "the backfill sized at the target; 90% would meet it with no band left",
    "step-down": "the 3-hour peak memory without history; a shorter one breaks nyc-flights",
    "noise-spikes": "only factor 8 held is as cheap, riding the bursts at 22 s of lag",
    "sawtooth": "only factor 8 held is as cheap, 88 s behind at every tooth",
}
NO_THIRD_FEWER_THAN_UTILIZATION = {
    "fast-ramp": "four doublings in 10 minutes, one rescale each; a longer ramp lead breaks workday",
    "slow-ramp": "one rescale per doubling; fewer is a 4x step hours early",
    "sawtooth": "70% of one is none, and holding 8 waits 88 s at every tooth (scale-up goal)",
    "step-down": "70% of one is none, and the step needs its one (converge goal)",
}


@pytest.mark.parametrize("trace", [t for t in trace_names() if t not in COSTLIER_THAN_LAG_THRESHOLD])
def test_half_the_violation_of_lag_threshold_at_no_more_cost_per_trace(suite, trace):
    ours, theirs = suite[trace, "autosizer"][1], suite[trace, "lag-threshold"][1]
    assert ours.violation_s <= 0.5 * theirs.violation_s, (ours, theirs)
    assert ours.task_hours <= theirs.task_hours, (ours, theirs)


@pytest.mark.parametrize("trace", [t for t in trace_names() if t not in NO_THIRD_FEWER_THAN_UTILIZATION])
def test_a_third_fewer_rescales_than_utilization_and_no_more_violation_per_trace(suite, trace):
    ours, theirs = suite[trace, "autosizer"][1], suite[trace, "utilization"][1]
    assert ours.rescales <= 0.7 * theirs.rescales, (ours, theirs)
    assert ours.violation_s <= theirs.violation_s, (ours, theirs)


@pytest.mark.parametrize("traces", ["synthetic", "real"])
def test_no_more_cost_than_lag_threshold_over_the_suite(suite, traces):
    # On the suite's totals: per trace, several synthetic traces and nyc-flights cost more (on
    # nyc-flights no schedule of <= 4 rescales a day costs as little: BENCHMARKS.md, "The trace
    # suite"). Both policies run under the same default guards.
    traces = synthetic() if traces == "synthetic" else REAL
    assert total(suite, "autosizer", "task_hours", traces) <= total(suite, "lag-threshold", "task_hours", traces)
    assert total(suite, "autosizer", "slot_hours", traces) <= total(suite, "lag-threshold", "slot_hours", traces)


def test_recorded_days_have_the_job_ready_for_a_morning_ramp_too_steep_to_follow(suite):
    """The workday trace's 08:00 ramp (500 -> 30,000/s in 2 min) outruns a reacting policy: two
    rescales into the ramp and lag near the 30 s SLO on the first morning (80 s before the
    first tick of a jump waited for the next). The second still reacts, one day being too little
    to scale ahead on, but in one rescale sized for the day on record (it was two, lag at 29 s).
    From the third day the history expects it and the job is sized before 08:00;
    `utilization`, which has no history, misses every morning."""
    run, _ = suite["workday", "autosizer"]
    peak = [float(run.lag_seconds[d * DAY:(d + 1) * DAY].max()) for d in range(4)]
    assert peak[0] > 20, "the first morning is too steep to follow without history"
    second = [r for r in run.rescales if DAY + 8 * 3600 <= r.time < DAY + 9 * 3600]
    assert len(second) == 1 and "the day on record reached" in second[0].reason, second
    assert peak[1] < peak[0], peak
    assert max(peak[2], peak[3]) < 10, peak
    assert all(r.time < 8 * 3600 + 2 * DAY or r.time > 9 * 3600 + 2 * DAY for r in run.rescales
               if r.new > r.old and 2 * DAY <= r.time < 3 * DAY), "sized before the ramp, not during it"
    baseline, _ = suite["workday", "utilization"]
    assert (baseline.lag_seconds[2 * DAY:] > 30).sum() > 0


def test_cpu_bound_work_is_not_scaled_past_the_useful_factor(suite):
    """The CPU a record costs and the cores, both measured, cap what any factor can do: the step
    goes straight to the factor at the cores (before that was measured: 1 -> 8, then back to 4
    once 8 bought nothing)."""
    run, _ = suite["cpu-bound", "autosizer"]
    useful = load_trace("cpu-bound").job.useful_factor()
    assert [(r.old, r.new) for r in run.rescales] == [(1, useful)]
    assert "cores cap" in run.rescales[0].reason
    # The utilization baseline, which measures a task's rate at the current factor, keeps going.
    assert suite["cpu-bound", "utilization"][0].factor.max() > 2 * useful


def test_an_outage_upstream_is_not_a_reason_to_scale_down(suite):
    """20 min of no input, then the backlog upstream at 3x: `utilization`'s 300 s window never
    sees the lull; a policy that scaled down during it meets the backfill small and behind a
    cooldown (before the lull rule: 16 -> 4 at the end of the lull, lag peaking near 450 s)."""
    assert suite["outage-backfill", "autosizer"][1].reversals_1h == 0
    run, result = suite["outage-backfill", "autosizer"]
    workload = load_trace("outage-backfill").workload
    start, back, _ = workload.changes
    assert run.factor[start:back].min() >= run.factor[start - 1]
    assert result.violation_s <= suite["outage-backfill", "utilization"][1].violation_s


class WithoutExtend:
    """The default policy without its opt-in to follow a scale-up that fell short at once
    (`Decision.extend_scale_up`): what the guards' overload cooldown alone does."""

    name = "autosizer"

    def __init__(self):
        self.policy = load_policy("autosizer")

    def decide(self, observation, state=None):
        decision, state = self.policy.decide(observation, state)
        return dataclasses.replace(decision, extend_scale_up=False), state


def as_the_suite_runs(trace: Trace) -> JobModel:
    """The trace's job as `runs_at` runs the default policy: metrics 2 s old, the actuator's check."""
    return dataclasses.replace(trace.job, metrics_age_s=SCRAPED_S, verify_window_s=VERIFY_WINDOW_S)


def test_a_fast_ramp_is_followed_without_a_ladder_of_cooldowns(suite):
    """1,000 -> 16,000/s in 10 min. With the full 300 s cooldown between scale-ups the job went
    4 -> 8 -> 32 -> 64 behind the ramp: 169 violation-seconds, lag peaking at 77 s. Once the
    input exceeds the current factor's capacity, the cooldown for a scale-up is 45 s."""
    run, result = suite["fast-ramp", "autosizer"]
    assert result.violation_s == 0 and run.lag_seconds.max() < 30
    # The rule is the guards' (every policy gets it), so the ladder to beat is the same policy
    # under a full cooldown, without its opt-in to skip it after a scale-up that fell short.
    trace = load_trace("fast-ramp")
    ladder = score(simulate(trace.workload, trace.job, WithoutExtend(), Guards(overload_cooldown_s=300)))
    assert result.violation_s < ladder.violation_s


def test_a_scale_up_the_ramp_outgrew_is_followed_at_once_not_after_the_overload_cooldown(suite):
    """Session 90: the demo's 60 s ramp at a 15 s tick went 1 -> 2, then waited the 45 s overload
    cooldown with the input past 2's capacity, and 2 -> 8 (run k26: lag peaking at 22 s). The
    default policy opts in to follow a scale-up the input has outgrown at once. On `fast-ramp`
    the longest wait for a scale-up under a sustained overload falls (47 -> 34 s with the
    suite's metrics 2 s old; 32 -> 0 s fresh) and so does the lag's peak (22.3 -> 18.4 s), at
    the same rescales, task-hours within a tenth of a percent, and no violation either way."""
    run, result = suite["fast-ramp", "autosizer"]
    trace = load_trace("fast-ramp")
    behind = simulate(trace.workload, as_the_suite_runs(trace), WithoutExtend())
    waited = score(behind)
    assert waited.scale_up_delay_s > 30 and result.scale_up_delay_s < waited.scale_up_delay_s
    assert run.lag_seconds.max() < behind.lag_seconds.max()
    assert result.rescales == waited.rescales and result.violation_s == waited.violation_s == 0
    assert result.task_hours <= waited.task_hours * 1.001
    followed = [r for r in run.rescales if "fell short, at once" in r.reason]
    assert followed and all(r.new > r.old for r in followed)


@pytest.mark.parametrize("trace", ["sawtooth", "boundary"])
def test_a_load_that_swings_within_a_factor_band_does_not_flap(suite, trace):
    """A sawtooth whose teeth are as long as the cooldown, and a sine either side of the load
    where 8 needs 16: at most one rescale to settle, never a reversal, never late."""
    _, result = suite[trace, "autosizer"]
    assert result.rescales <= 1 and result.reversals_1h == 0 and result.violation_s == 0
    assert result.rescales <= suite[trace, "utilization"][1].rescales


def test_noise_spikes_are_ridden_out_once_they_recur(suite):
    """30-second bursts at 4x every ~15 min. The first bursts are met with scale-ups; a scale-
    down must then fit the highest input of the last `lull_memory_s` at target, and the bursts
    recur within it, so the factor holds. With the median of the hour's peaks as the only
    check: 7 rescales and 5 reversals in 6 hours; with the second-highest: 3 and 2."""
    run, result = suite["noise-spikes", "autosizer"]
    assert result.violation_s == 0 and result.rescales <= 2 and result.reversals_1h == 0
    assert all(r.new > r.old for r in run.rescales), "no scale-down between bursts"
    assert result.rescales < suite["noise-spikes", "utilization"][1].rescales


def test_a_held_out_day_busier_than_its_days_keeps_the_day_plan():
    """`bank-calls`' data on a week the policy was not tuned on (from 28 April 2003): Thursday's
    morning peaked at 11,836/s where the days on record had 4,994/s. The history then called the
    day broken, the day plan went, the reactive rules scaled 32 -> 16 at 07:35 on 6,950/s and the
    plan, believed again, 16 -> 32 at 08:30: a reversal within the hour. A busier day does not
    make the days wrong about what it needs at least, so the plan holds 32 through the day."""
    trace = load_trace("bank-calls", window={"begin": "2003-04-28"})
    run = simulate(trace.workload, trace.job, load_policy("autosizer"))
    result = score(run)
    assert result.violation_s == 0 and result.reversals_1h == 0
    assert result.rescales <= 4 * 7
    thursday = [r for r in run.rescales if 3 * DAY + 7 * 3600 <= r.time < 3 * DAY + 20 * 3600]
    assert thursday == [], f"Thursday's day plan held: {thursday}"


@pytest.mark.parametrize("begin, why", [
    ("2013-02-25", "Saturday 32 -> 8 at 12:10 where the plan ran 16, and the plan's 8 -> 16 at 13:05"),
    ("2013-11-04", "Sunday 32 -> 2 at 03:25 where the plan ran 4, and the plan's 2 -> 4 at 04:25"),
])
def test_held_out_weeks_of_flights_scale_down_to_the_day_plan_not_below_it(begin, why):
    """`nyc-flights`' data on weeks the policy was not tuned on (`benchmarks/bench_trace_weeks.py`
    found them): a scale-down went below the day plan's factor where the input fit less, and
    the plan took the job back up to its factor within the hour."""
    trace = load_trace("nyc-flights", window={"begin": begin})
    result = score(simulate(trace.workload, trace.job, load_policy("autosizer")))
    assert result.violation_s == 0 and result.reversals_1h == 0, why


def test_flights_keep_their_hours_across_the_clocks_going_back_in_the_jobs_time_zone():
    """`nyc-flights` over 3 November 2013, when New York's clocks went back an hour: the same
    schedule came an hour later in UTC. Its days kept in UTC put the plan's ramp an hour early
    and called each morning a broken day for the week after (7 reversals within the hour; 73
    rescales in the fortnight, 56 since the known ramps wait for the input, session 66, where
    the local days take 44); kept in the airports' time zone (the trace's `timezone`) the days
    line up and the fortnight keeps the goals for real traffic."""
    trace = load_trace("nyc-flights", window={"begin": "2013-10-28", "seconds": 14 * DAY})
    assert trace.job.timezone == "America/New_York"
    local = score(simulate(trace.workload, trace.job, load_policy("autosizer")))
    utc = score(simulate(trace.workload, dataclasses.replace(trace.job, timezone="UTC"), load_policy("autosizer")))
    assert local.violation_s == 0 and local.reversals_1h == 0 and local.rescales <= 4 * 14, local
    assert utc.reversals_1h > 0 and utc.rescales > local.rescales, utc


@pytest.mark.parametrize("begin", ["2013-06-03", "2013-11-18"])
def test_flights_with_a_week_on_record_make_no_reversal_on_a_new_schedule_or_after_thanksgiving(begin):
    """Two fortnights of `nyc-flights` that a fresh week cannot show, the second week with the
    first on record. From 10 June a 15:00 bank of departures the days did not have yet: 16 -> 32
    at 14:56, and with the days on record the scale-down's look-back is the hour, which the
    quarter-hour slice holding the peak left at 15:55 (three reversals). The Friday after
    Thanksgiving, a day called broken: the reactive rules scaled 16 -> 8 and, believed again,
    the plan stepped back to 16 twelve minutes later. The hour now runs from the scale-up, and
    the plan steps up within the hour of a scale-down only when the input needs it."""
    trace = load_trace("nyc-flights", window={"begin": begin, "seconds": 14 * DAY})
    result = score(simulate(trace.workload, trace.job, load_policy("autosizer")))
    assert result.reversals_1h == 0 and result.violation_s == 0, result


def test_a_second_morning_of_flights_is_one_scale_up_sized_for_the_first():
    """`nyc-flights`' week of 8 April 2013, fresh: its second morning (one day on record) ramps
    from 700 to 18,000/s within five minutes. Sizing each step went 1 -> 2 -> 8 -> 16 and ran 2 s
    past the SLO; sized for what the day on record reached within the half hour, the first
    scale-up the ramp asks for is the only one, and nobody is late."""
    trace = load_trace("nyc-flights", window={"begin": "2013-04-08"})
    run = simulate(trace.workload, trace.job, load_policy("autosizer"))
    morning = [r for r in run.rescales if r.new > r.old and DAY + 8 * 3600 <= r.time < DAY + 12 * 3600]
    assert len(morning) == 1 and "the day on record reached" in morning[0].reason, morning
    assert score(run).violation_s == 0
