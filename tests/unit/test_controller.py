"""The daemon's pure parts: config, overrides, evaluation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.controller.collector import Samples
from autosizer.controller.commands import parse_duration
from autosizer.controller.config import ConfigError, load_config
from autosizer.controller.evaluator import Evaluator
from autosizer.controller.overrides import parse
from autosizer.elasticity import FACTORS, Layout
from autosizer.elasticity.layout import Barrier
from autosizer.policies.base import Decision
from autosizer.policies.guards import Guards


def write(tmp_path, text: str):
    path = tmp_path / "autosizer.toml"
    path.write_text(text)
    return path


def test_config_file_then_environment(tmp_path):
    path = write(tmp_path, '[job]\nname = "orders"\n[guards]\nmax_factor = 64\n'
                           '[policy]\nname = "utilization"\n[policy.settings]\ntarget_utilization = 0.6\n')
    config = load_config(path, {"AUTOSIZER_DAEMON_INTERVAL_S": "5", "AUTOSIZER_GUARDS_MIN_FACTOR": "2",
                                "AUTOSIZER_POLICY_CATCH_UP_SECONDS": "120",
                                "AUTOSIZER_REDIS_URL": "redis://10.0.0.1:6380/1"})
    assert config.job.name == "orders" and config.job.redis_url == "redis://10.0.0.1:6380/1"
    assert config.daemon.interval_s == 5.0 and config.daemon.lease_ttl_s == 30.0
    assert (config.guards.min_factor, config.guards.max_factor) == (2, 64)
    assert config.policy.name == "utilization"
    assert config.policy.settings == {"target_utilization": 0.6, "catch_up_seconds": 120}
    assert config.actuator.name == "restart-in-driver"
    assert "autosizer_pipeline_lag_records" in config.prometheus.queries["lag_records"]


@pytest.mark.parametrize("text, env, message", [
    ("[job]\nname = 'x'\n[guards]\nmax_factor = 3\n", {}, "invalid elasticity factor 3"),
    ("[job]\nname = 'x'\n[daemon]\ninterval_s = 'soon'\n", {}, "interval_s = 'soon' must be a number"),
    ("[job]\nname = 'x'\n[daemon]\nintervall_s = 5\n", {}, "unknown setting 'intervall_s' in [daemon]"),
    ("[jobs]\nname = 'x'\n", {}, "unknown section [jobs]"),
    ("[job]\nname = 'x'\n", {"AUTOSIZER_DAEMON_LEASE_TTL_S": "10"}, "must be at least twice interval_s"),
    ("[daemon]\ninterval_s = 5\n", {}, "no job name"),
    ("[job]\nname = 'x'\n[prometheus.queries]\nlag = 'up'\n", {}, "unknown query 'lag'"),
    ("[job\nname = 'x'\n", {}, "is not valid TOML"),
    ("[job]\nname = 'x'\n[guards]\nmin_factor = 8\nmax_factor = 2\n", {}, "min_factor 8 is above max_factor 2"),
    ("[job]\nname = 'x'\ntimezone = 'New York'\n", {}, "[job] timezone must be an IANA time zone name such as"),
    ("[job]\nname = 'x'\n", {"AUTOSIZER_JOB_TIMEZONE": "EST+5"}, "[job] timezone must be an IANA time zone name"),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, text, env, message):
    with pytest.raises(ConfigError) as raised:
        load_config(write(tmp_path, text), env)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_missing_config_file_names_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="not found: pass --config"):
        load_config(tmp_path / "nope.toml", {})


def test_overrides_parse_valid_values_and_apply_to_guards():
    found = parse({"factor": ("8", 1000), "pause": ("true", None), "min_factor": ("4", None),
                   "rescale": ("1", None)})
    assert (found.factor, found.pause, found.min_factor, found.rescale, found.errors) == (8, True, 4, True, ())
    guards = found.guards(Guards(min_factor=1, max_factor=2, cooldown_s=300))
    assert (guards.min_factor, guards.max_factor, guards.cooldown_s, guards.scale_down_delay_s) == (4, 4, 0, 0)


@pytest.mark.parametrize("name, value, message", [
    ("factor", "6", "invalid elasticity factor 6"),
    ("factor", "eight", "not a whole number"),
    ("max_factor", "2048", "invalid elasticity factor 2048"),
    ("pause", "maybe", "use true or false"),
])
def test_garbage_overrides_are_ignored_with_one_error_each(name, value, message):
    found = parse({name: (value, None), "min_factor": ("2", None)})
    assert getattr(found, name) in (None, False)
    assert found.min_factor == 2, "a bad key must not take good ones down with it"
    assert len(found.errors) == 1 and message in found.errors[0] and "ignored" in found.errors[0]


def test_conflicting_min_and_max_overrides_are_both_ignored():
    found = parse({"min_factor": ("16", None), "max_factor": ("4", None)})
    assert found.min_factor is None and found.max_factor is None and "min is above max" in found.errors[0]


@given(st.dictionaries(st.sampled_from(["factor", "pause", "min_factor", "max_factor", "rescale"]),
                       st.text(max_size=12)))
def test_any_override_text_parses_to_valid_values_or_errors(raw):
    found = parse({k: (v, None) for k, v in raw.items()})
    for name in ("factor", "min_factor", "max_factor"):
        assert getattr(found, name) in (None, *FACTORS)
    found.guards(Guards())  # whatever was accepted makes valid guards


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "30m", "2h", "1d")] == [90, 90, 1800, 7200, 86400]
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("2 hours")


LAYOUT = Layout(topics={"orders": 2}, factor=2)


def samples(**series) -> Samples:
    base = {
        "lag_records": [({"topic": "orders", "partition": "0"}, 100.0), ({"topic": "orders", "partition": "1"}, 50.0)],
        "input_rate": [({"topic": "orders", "partition": "0"}, 30.0), ({"topic": "orders", "partition": "1"}, 20.0)],
        "processed_rate": [({"topic": "orders", "partition": "0"}, 25.0)],
        "task_busy": [({"task": t.name}, 0.5) for t in LAYOUT.virtual_tasks()]
                     + [({"task": "an-old-generation-task"}, 1.0)],
        "task_processed_rate": [({"task": t.name, "topic": "orders", "partition": "0"}, 10.0)
                                for t in LAYOUT.virtual_tasks()],
        "age_seconds": [({}, 1.5)],
    }
    base.update(series)
    return Samples(time=100.0, series=base)


def test_evaluator_builds_the_observation_of_the_current_layout():
    evaluation = Evaluator().evaluate(samples(), LAYOUT, since_rescale_s=42, restart_downtime_s=7)
    obs = evaluation.observation
    assert evaluation.problems == [] and obs.complete and obs.factor == 2
    assert obs.lag_records == 150 and obs.input_rate == 50 and obs.processed_rate == 25
    assert obs.partitions.processed_rate[1] == 0, "no processed series means nothing processed"
    assert obs.partitions.lag_seconds[0] == pytest.approx(100 / 30), "estimated from lag and rate"
    assert len(obs.tasks) == 4 and obs.tasks.total("busy") == 2.0, "old generation's task ignored"
    assert obs.task_capacity == pytest.approx(40 / 2)
    assert (obs.age_s, obs.since_rescale_s, obs.restart_downtime_s) == (1.5, 42, 7)


def test_evaluator_reads_the_watermarks_only_when_every_partition_has_one_and_its_read_time():
    def series(name, values):
        return {name: [({"topic": "orders", "partition": str(p)}, v) for p, v in enumerate(values)]}

    full = Evaluator().evaluate(samples(**series("high_watermark", [700.0, 300.0]),
                                        **series("high_watermark_time", [99.0, 98.5])), LAYOUT)
    marks = full.observation.watermarks
    assert marks is not None and list(marks.offsets) == [700, 300] and list(marks.times) == [99, 98.5]
    assert not any("watermark" in n for n in full.notes)
    for partial in (series("high_watermark", [700.0, 300.0]),
                    {**series("high_watermark", [700.0]), **series("high_watermark_time", [99.0, 98.5])}):
        evaluation = Evaluator().evaluate(samples(**partial), LAYOUT)
        assert evaluation.observation.watermarks is None and evaluation.observation.complete
        assert any("the input is the rate window's alone" in n for n in evaluation.notes)


def test_a_stalled_lag_probe_makes_the_metrics_as_old_as_its_last_reading():
    """A probe stuck behind a slow broker keeps exporting its last reading (no input, the same
    lag) while Prometheus scrapes on: the observation is as old as that reading, so the guards
    hold rather than read "no input" as a reason to scale down."""
    stalled = {"high_watermark": [({"topic": "orders", "partition": str(p)}, 500.0) for p in (0, 1)],
               "high_watermark_time": [({"topic": "orders", "partition": str(p)}, 20.0) for p in (0, 1)]}
    evaluation = Evaluator().evaluate(samples(**stalled), LAYOUT)
    assert evaluation.observation.age_s == 80.0
    assert "the pipeline's lag probe last read the broker 80s ago (its metrics were scraped 2s ago)" in evaluation.notes
    decision, _ = Guards(max_age_s=60).apply(evaluation.observation, Decision(1, "input 0/s fits 1"))
    assert (decision.factor, decision.reason) == (2, "hold: stale metrics (80s old > 60s)")


def test_a_partition_without_lag_makes_the_observation_partial():
    evaluation = Evaluator().evaluate(
        samples(lag_records=[({"topic": "orders", "partition": "0"}, 1.0)]), LAYOUT)
    assert not evaluation.observation.complete
    assert evaluation.problems == ["no lag_records for orders[1]: is Prometheus scraping the pipeline's /metrics?"]


def test_partitions_that_joined_the_layout_and_are_not_read_yet_hold_saying_so():
    """Runs u3 and u4: the daemon's tick found a split's children in the layout before the
    pipeline's probe had read them, and held asking whether Prometheus scraped the pipeline,
    whose other partitions' series were all there. A partition outside any re-shard or
    expansion, or every partition missing, still names the scrape."""
    grown = Layout(topics={"orders": 4}, initial_partitions={"orders": 2}, factor=2,
                   barriers=(Barrier("orders", 2, 0, 100), Barrier("orders", 3, 1, 100)))
    evaluation = Evaluator().evaluate(samples(), grown)
    assert not evaluation.observation.complete
    assert evaluation.problems == [
        "no lag_records or input_rate for orders[2], orders[3] yet: they joined the layout (a re-shard or an "
        "expansion) and the pipeline's probe has not read them so far; the next tick reads them (if not, see "
        "the pipeline's log)"]
    lost = samples(lag_records=[({"topic": "orders", "partition": str(p)}, 1.0) for p in (1, 2, 3)],
                   input_rate=[({"topic": "orders", "partition": str(p)}, 1.0) for p in (0, 1, 3)])
    assert Evaluator().evaluate(lost, grown).problems == [
        "no lag_records for orders[0]: is Prometheus scraping the pipeline's /metrics?",
        "no input_rate for orders[2] yet: it joined the layout (a re-shard or an expansion) and the pipeline's "
        "probe has not read it so far; the next tick reads it (if not, see the pipeline's log)"]
    nothing = Evaluator().evaluate(samples(lag_records=[], input_rate=[]), grown)
    assert nothing.problems == [f"no {name} for orders[0], orders[1], orders[2], orders[3]: is Prometheus scraping "
                                "the pipeline's /metrics?" for name in ("lag_records", "input_rate")]


@pytest.mark.parametrize("scrapes, window, held", [(0, "30s", True), (1, "30s", True), (2, "30s", False),
                                                   (1, "", True), (None, "30s", False)])
# (None: a query overridden away, or a Prometheus before `vector`: nothing to judge by)
def test_a_window_with_fewer_than_two_scrapes_holds_and_names_the_window(scrapes, window, held):
    """Under Prometheus' default one-minute scrape the daemon's 30 s window holds one scrape or
    none: no rate can be read, and the tick held on "no virtual task busy enough to measure
    capacity" for ever. It holds on the cause now, before any series is called missing."""
    series = {} if scrapes is None else {"scrapes_in_window": [({}, float(scrapes))]}
    given = samples(processed_rate=[], task_busy=[], task_processed_rate=[], **series)
    given.window = window
    evaluation = Evaluator().evaluate(given, LAYOUT)
    if held:
        within = f"the rate window ({window})" if window else "the rate window"
        assert evaluation.problems == [f"{within} holds {scrapes} scrape of the pipeline's metrics and a rate "
                                       "needs two: make [prometheus] window four scrape intervals or more, or "
                                       "scrape the pipeline every 1-5 s (where the policy's goals were measured); "
                                       "a pipeline started within the window has one too"]
        assert not evaluation.observation.complete
    else:
        assert not any("scrape of the pipeline" in p for p in evaluation.problems)


def test_a_pipeline_not_scraped_at_all_is_said_so_not_a_short_window():
    """With no series at all `scrapes_in_window` still reads 0 (`or vector(0)`): the cause is
    then that nothing scrapes the pipeline, and the window is not blamed."""
    nothing = Samples(time=1.0, series={"scrapes_in_window": [({}, 0.0)]}, window="30s")
    problems = Evaluator().evaluate(nothing, LAYOUT).problems
    assert problems and not any("rate window" in p for p in problems)
    assert any("is Prometheus scraping" in p for p in problems)


@pytest.mark.parametrize("selector, others, blamed", [('job="order"', 2.0, True), ("", 2.0, False),
                                                      ('job="order"', 0.0, False)])
def test_a_selector_that_matches_no_pipeline_prometheus_scrapes_is_named(selector, others, blamed):
    """A misspelt selector (`job="order"` for `job="orders"`) held on "is Prometheus scraping the
    pipeline's /metrics?" while Prometheus was. With no selector, or no pipeline scraped at all,
    that question stays."""
    nothing = Samples(time=1.0, series={"scrapes_in_window": [({}, 0.0)], "pipelines_any": [({}, others)]},
                      window="30s", selector=selector)
    problems = Evaluator().evaluate(nothing, LAYOUT).problems
    named = [p for p in problems if p.startswith("[prometheus] selector")]
    if blamed:
        assert named == [f"[prometheus] selector {selector!r} matches no pipeline series, and Prometheus scrapes "
                         "2 pipeline(s) under other labels: compare the selector with the labels of "
                         "autosizer_pipeline_batches_total there (or this job's pipeline is not scraped)"]
        assert len(problems) == 1
    else:
        assert not named and any("is Prometheus scraping" in p for p in problems)


def test_collection_problems_pass_through_as_they_are():
    broken = Samples(time=1.0, problems=["prometheus unreachable at http://x (ConnectionError): start it"])
    evaluation = Evaluator().evaluate(broken, LAYOUT)
    assert evaluation.problems == broken.problems and not evaluation.observation.complete
    assert math.isnan(evaluation.observation.lag_records) or np.isnan(evaluation.observation.partitions.lag_records).all()


def test_the_config_reference_in_deploy_loads_and_shows_the_defaults():
    from pathlib import Path

    from autosizer.controller.config import DaemonSection, PrometheusSection

    config = load_config(Path(__file__).resolve().parents[2] / "deploy" / "autosizer.toml", {})
    assert config.daemon == DaemonSection() and config.prometheus == PrometheusSection()
    assert config.guards == Guards() and config.policy.name == "autosizer"
    assert config.actuator.name == "restart-in-driver"
    from autosizer.actuators.restart import RestartActuator

    defaults = RestartActuator.__init__.__defaults__
    assert tuple(config.actuator.settings.values()) == defaults


def test_evaluator_reads_the_pipelines_capacity_measurements():
    names = [t.name for t in LAYOUT.virtual_tasks()]
    measured = samples(
        task_saturated_rate=[({"task": n}, r) for n, r in zip(names, (90.0, 100.0, 110.0, 400.0), strict=True)]
        + [({"task": "an-old-generation-task"}, 1e6), ({"task": names[0]}, float("nan"))],
        hot_share=[({"topic": "orders", "partition": "1", "factor": "2"}, 0.75),
                   ({"topic": "orders", "partition": "0", "factor": "3"}, 0.5),  # not a factor
                   ({"topic": "orders", "partition": "0", "factor": "4"}, 1.5)],  # not a share
        batch_deadline_seconds=[({}, 3.0)], batch_overhead_seconds=[({}, 1.0)],
    )
    obs = Evaluator().evaluate(measured, LAYOUT).observation
    assert obs.saturated_rate == pytest.approx(105), "median of the layout's tasks"
    assert obs.task_rate == obs.saturated_rate
    assert obs.duty == pytest.approx(0.75)
    assert list(obs.hot_share(2)) == [0.5, 0.75], "unknown partition 0: even buckets"
    assert list(obs.hot_share(4)) == [0.25, 0.25], "out-of-range values are ignored"
    # No capacity series (an older pipeline, another exporter): the older estimates apply.
    plain = Evaluator().evaluate(samples(), LAYOUT).observation
    assert plain.saturated_rate is None and plain.hot_shares is None and plain.duty == 1.0
    assert plain.cpu_ceiling is None


def test_evaluator_scales_the_batches_read_to_each_factor():
    """At factor 2 a batch costs 1 s, 0.4 s of it the read that grows with the records a
    saturated batch reads: factor 8 reads four times as many and pays 0.6 + 1.6 s, factor 1
    0.6 + 0.2 s. Without the read series every factor pays the 1 s measured at 2."""
    names = [t.name for t in LAYOUT.virtual_tasks()]
    series = {"task_saturated_rate": [({"task": n}, 100.0) for n in names],
              "batch_deadline_seconds": [({}, 3.0)], "batch_overhead_seconds": [({}, 1.0)]}
    obs = Evaluator().evaluate(samples(**series, batch_read_seconds=[({}, 0.4)]), LAYOUT).observation
    duties = dict(zip(FACTORS, obs.duty_by_factor(), strict=True))
    assert obs.duty == duties[2] == pytest.approx(0.75)
    assert duties[8] == pytest.approx(3 / 5.2) and duties[1] == pytest.approx(3 / 3.8)
    flat = Evaluator().evaluate(samples(**series), LAYOUT).observation
    assert list(flat.duty_by_factor()) == pytest.approx([0.75] * len(FACTORS))
    assert obs.capacity(8, 100.0) / flat.capacity(8, 100.0) == pytest.approx((3 / 5.2) / 0.75)
    assert obs.capacity(2, 100.0) == pytest.approx(flat.capacity(2, 100.0))


@pytest.mark.parametrize(("value", "ceiling"), [(3200.0, 3200.0), (0.0, None), (float("nan"), None),
                                                 (float("inf"), None), (-1.0, None)])
def test_evaluator_reads_the_cores_ceiling_only_when_it_is_a_rate(value, ceiling):
    """No CPU measured (an idle window divides by nothing) is no cap, not a cap at zero."""
    obs = Evaluator().evaluate(samples(cpu_ceiling=[({}, value)]), LAYOUT).observation
    assert obs.cpu_ceiling == ceiling


@pytest.mark.parametrize(("gauge", "downtime"), [([({}, 0.7)], 0.7), ([], 3.2), ([({}, 0.0)], 3.2),
                                                 ([({}, float("nan"))], 3.2)])
def test_the_pipelines_restart_gauge_is_the_downtime_the_policy_reads(gauge, downtime):
    """The input piles up while nothing is processed: the pipeline's own measure of that stop
    (drain to the next generation's first batch) wins over the journal's drain to first commit
    that the tick passes in, which holds a batch's work more; with no gauge (no rescale yet in
    this pipeline's life, or another exporter) the tick's figure stands."""
    obs = Evaluator().evaluate(samples(restart_seconds=gauge), LAYOUT, 60.0, 3.2).observation
    assert obs.restart_downtime_s == downtime
    # nothing measured either way (no rescale yet): a query restart assumed
    unmeasured = Evaluator().evaluate(samples(restart_seconds=[]), LAYOUT).observation
    assert unmeasured.restart_downtime_s == 10.0


def test_a_partition_read_once_so_far_holds_for_its_input_rate_and_says_it_joined():
    """A shard that joined the layout a scrape ago has one watermark reading, and a rate needs
    two: the tick holds, and says why rather than ask whether Prometheus scrapes the pipeline."""
    joined = samples(input_rate=[({"topic": "orders", "partition": "0"}, 100.0)],
                     high_watermark=[({"topic": "orders", "partition": str(p)}, 500.0) for p in (0, 1)],
                     high_watermark_time=[({"topic": "orders", "partition": str(p)}, 99.0) for p in (0, 1)])
    evaluation = Evaluator().evaluate(joined, LAYOUT)
    assert not evaluation.observation.complete
    assert evaluation.problems == ["no input_rate for orders[1] yet: its watermark was read once so far (joined "
                                   "the layout: a re-shard or an expansion); the next tick reads it"]
    both = Evaluator().evaluate(samples(input_rate=[], high_watermark=joined.series["high_watermark"],
                                        high_watermark_time=joined.series["high_watermark_time"]), LAYOUT)
    assert both.problems[0].startswith("no input_rate for orders[0], orders[1] yet: their watermarks were read once")


def test_health_counts_no_tick_finished_from_when_the_ticks_are_scheduled_not_from_construction():
    from autosizer.controller.metrics import DaemonMetrics

    metrics = DaemonMetrics(0.5)
    metrics.last_tick -= 10  # a slow start: 10 s between building the daemon and its scheduler
    assert metrics.problem().startswith("stuck: no tick finished")
    metrics.ticks_scheduled()
    assert metrics.problem() is None
