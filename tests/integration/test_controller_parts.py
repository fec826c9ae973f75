"""The daemon's parts on real Redis and a real Prometheus, and the daemon process itself, without
Spark: the pipeline's own exporter is fed batches here and scraped by Prometheus."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from structlog.testing import capture_logs

from autosizer.actuators.base import ActuatorContext
from autosizer.actuators.journal import ActuationJournal, JournalRefused, record_rescale
from autosizer.actuators.registry import actuator_names, load_actuator
from autosizer.controller.cli import main
from autosizer.controller.collector import PrometheusCollector
from autosizer.controller.config import load_config
from autosizer.controller.daemon import build_tick
from autosizer.controller.history import HistoryStore
from autosizer.controller.journal import DecisionJournal
from autosizer.controller.lease import LeaderLease
from autosizer.controller.metrics import DaemonMetrics
from autosizer.controller.overrides import OverrideStore
from autosizer.controller.queries import DEFAULT_QUERIES
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.pipeline.control import ControlChannel
from autosizer.policies.history import DAY_S, InputHistory
from tests.daemon_harness import AUTOSIZER, ROOT, scraped_job, start_daemon, stop, write_config
from tests.integration.test_pipeline import wait_until

pytestmark = pytest.mark.integration


def test_leader_lease_is_exclusive_and_taken_over_after_expiry(redis_server, job):
    store = MetadataStore(redis_server.url, job)
    first, second = LeaderLease(store, ttl_s=1.0), LeaderLease(store, ttl_s=1.0)
    assert first.try_acquire() and not second.try_acquire()
    assert first.try_acquire(), "the holder renews"
    time.sleep(1.2)  # the holder stops renewing: dead
    assert second.try_acquire() and not first.try_acquire()
    assert first.current_holder()[0] == second.holder
    second.release()
    assert first.try_acquire(), "a released lease is free at once"


def test_actuation_journal_is_fenced_by_lease_generation_and_open_entry(redis_server, job, capsys):
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    lease = LeaderLease(store, ttl_s=5)
    journal = ActuationJournal(store, lease.holder)
    with pytest.raises(JournalRefused, match="no longer holds the leader lease"):
        journal.begin(1, 1, 2, "test")
    assert lease.try_acquire()
    with pytest.raises(JournalRefused, match="generation changed"):
        journal.begin(7, 1, 2, "decided on an old layout")
    entry = journal.begin(1, 1, 2, "test", lag_before=10.0)
    with pytest.raises(JournalRefused, match="another actuation is open"):
        journal.begin(1, 1, 4, "a second one")
    entry = journal.advance(entry, "migrate")
    assert journal.open() == entry
    # status says why the job is restarting while it does: the decision is journaled after
    assert main(["status", "--job", job, "--redis", redis_server.url]) == 0
    assert "actuation  1 -> 2 at step migrate, begun 0s ago: test\n" in capsys.readouterr().out
    assert main(["decisions", "--job", job, "--redis", redis_server.url]) == 0
    assert capsys.readouterr().out == ("no decisions yet\nrescaling now: 1 -> 2 at step migrate, begun 0s ago: "
                                       "test (journaled when it ends)\n")
    from examples.demo import last_decision  # the demo's screen too
    assert last_decision(DecisionJournal(store)) == "rescaling 1 -> 2 (migrate): test"
    lease.release()
    with pytest.raises(JournalRefused, match="leader lease"):
        journal.advance(entry, "start")
    assert journal.open().step == "migrate", "a refused write changes nothing"


def test_actuators_are_registered_by_name(redis_server, job):
    assert {"restart-in-driver", "spark-submit", "dry-run"} <= set(actuator_names())
    context = ActuatorContext(MetadataStore(redis_server.url, job), None)
    with pytest.raises(ValueError, match="unknown actuator 'kubectl'"):
        load_actuator("kubectl", context)
    with pytest.raises(ValueError, match="command is required"):
        load_actuator("spark-submit", context, {"pid_file": "/tmp/x.pid"})
    with pytest.raises(ValueError, match="drain_timeout_s must be a number"):
        load_actuator("restart-in-driver", context, {"drain_timeout_s": "soon"})


def test_tick_decides_from_prometheus_honours_overrides_and_holds_when_it_is_gone(redis_server, job, tmp_path):
    with scraped_job(redis_server, job, tmp_path, rate=400) as (store, config, prometheus, exporter):
        metrics = DaemonMetrics(config.daemon.interval_s)
        tick = build_tick(config, metrics)
        collector = PrometheusCollector(prometheus.url, DEFAULT_QUERIES, window="10s")
        record = tick()
        assert record.outcome == "dry_run" and record.target > 1, record
        # how old the metrics were, for an operator to alert on (the test's Prometheus scrapes each second)
        age = metrics.registry.get_sample_value("autosizer_daemon_metrics_age_seconds")
        assert age == pytest.approx(record.inputs["age_s"], abs=0.06) and 0 <= age < 5
        assert metrics.registry.get_sample_value("autosizer_daemon_metrics_complete") == 1.0
        assert record.inputs["input_rate"] > 300 and record.inputs["task_capacity"] > 0
        # the CPU a record costs (1 ms) and the cores (2): at most 2,000/s at any factor
        assert record.inputs["cpu_ceiling"] == pytest.approx(2000, rel=0.05)
        # the watermarks and when the pipeline read them reach the policy through Prometheus
        assert not any("watermark" in note for note in record.inputs.get("notes", ())), record.inputs
        # The tick recorded its input in today's slot, in Redis: a new daemon knows the day. (The
        # slot's peak: the last hour read back from Prometheus at the first load is in it too.)
        learned, now = HistoryStore(store).load(), record.time
        slot = learned.days[int(now // DAY_S)][int(now % DAY_S // learned.slot_s)]
        assert slot >= record.inputs["input_rate"] * 0.99 and slot < 2 * record.inputs["input_rate"], slot

        overrides = OverrideStore(store)
        overrides.set("factor", "8")
        store.redis.set(store.keys.key("override", "max_factor"), "banana")
        record = tick()
        assert (record.outcome, record.target, record.reason) == ("dry_run", 8, "pinned to 8 by override; would rescale 1 -> 8")
        assert record.overrides["errors"] == ["override max_factor='banana' ignored: not a whole number; use a power of two like 8"]
        overrides.set("pause", "true", ttl_s=1.0)
        assert tick().outcome == "paused"
        time.sleep(1.2)  # the pause expires by itself
        assert tick().outcome == "dry_run"

        overrides.clear("factor")
        prometheus.stop()
        record = tick()
        assert record.outcome == "hold" and "prometheus unreachable" in record.reason and record.target == 1
        assert metrics.registry.get_sample_value("autosizer_daemon_metrics_complete") == 0.0  # held blind
        prometheus.start()
        wait_until(lambda: not collector.collect().problems, 60, "Prometheus back")

        # The restart the policy read, in the journal: assumed before the job's first rescale,
        # then the journal's drain to first commit, then the pipeline's own measure of the stop.
        wait_until(lambda: tick().inputs.get("restart_s") == 10.0, 30, "a tick with inputs")
        record_rescale(store, 3.2)
        assert tick().inputs["restart_s"] == 3.2
        exporter.metrics.restarted(0.8)
        wait_until(lambda: tick().inputs.get("restart_s") == 0.8, 30, "the restart gauge through Prometheus")
        status = subprocess.run([AUTOSIZER, "status", "--job", job, "--redis", redis_server.url], cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
        assert "(drain to first commit 3.2s; the policy reads a restart of 0.80s)" in status.stdout, status.stdout


def test_a_short_window_or_a_misspelt_selector_on_a_real_prometheus_holds_and_says_so(tmp_path, capsys):
    """The pipeline scraped every 5 s: a 3 s window holds one scrape or none (every rate query
    comes back empty), a 30 s one six. The evaluator calls the first incomplete, naming the window and the
    fix; the second is whole. A selector matching no label of the scrape (`job="autosizr"`) is named."""
    from autosizer.controller.evaluator import Evaluator
    from tests.daemon_harness import Exporter

    layout = Layout(topics={"orders": 2}, factor=1)
    with Exporter(layout, rate=150, capacity=100) as exporter, \
            EmbeddedPrometheus([f"127.0.0.1:{exporter.port}"], tmp_path / "prom", scrape_interval="5s") as prometheus:
        wide = PrometheusCollector(prometheus.url, DEFAULT_QUERIES, window="30s")
        wait_until(lambda: (_single_value(wide.collect(), "scrapes_in_window") or 0) >= 3, 60, "three scrapes")
        narrow = Evaluator().evaluate(PrometheusCollector(prometheus.url, DEFAULT_QUERIES, window="3s").collect(), layout)
        whole = Evaluator().evaluate(wide.collect(), layout)
        misspelt = Evaluator().evaluate(PrometheusCollector(prometheus.url, DEFAULT_QUERIES, selector='job="autosizr"',
                                                            window="30s").collect(), layout)
        fit = ["fit", "--prometheus", prometheus.url, "--start", str(time.time() - 20), "--end", str(time.time()),
               "--out", str(tmp_path / "run.toml")]
        assert main([*fit, "--window", "3s"]) == 2  # `autosizer fit` says the same of its own window
        assert "the rate window (3s) holds" in capsys.readouterr().err
    assert misspelt.problems == ["[prometheus] selector 'job=\"autosizr\"' matches no pipeline series, and Prometheus "
                                 "scrapes 1 pipeline(s) under other labels: compare the selector with the labels of "
                                 "autosizer_pipeline_batches_total there (or this job's pipeline is not scraped)"]
    assert re.match(r"the rate window \(3s\) holds [01] scrape of the pipeline's metrics and a rate needs two: "
                    r"make \[prometheus\] window four scrape intervals or more", narrow.problems[0]), narrow.problems
    assert not narrow.observation.complete
    assert whole.problems == [] and whole.observation.complete and whole.observation.processed_rate > 0


def _single_value(samples, name: str) -> float | None:
    values = [v for _, v in samples.series.get(name, ())]
    return max(values) if values else None


def test_a_tick_whose_rate_window_spans_an_adopted_expansion_holds_without_asking_the_policy(redis_server, job,
                                                                                             tmp_path):
    """Run e2 (the Kafka demo grown 4 -> 8): the tick 2 s after the adoption read 1,535/s of
    1,200/s, each parent's rise over the window holding its child's records until the adoption
    and each child's since its first reading the same records again; the policy remembered that
    as a peak and held twice the factor the input needed to the run's end. Such a tick holds, the
    policy and the history left out; the window after it, or after a factor change, reads."""
    with scraped_job(redis_server, job, tmp_path, rate=400) as (store, config, _, _):
        tick = build_tick(config)
        assert tick.window_s == 4.0
        ControlChannel(store).report("running@1", generation=1, batches=4)  # the pipeline is up
        record_rescale(store, 2.0, time.time() - 1.0, expansion=True)
        held = tick()
        assert held.outcome == "hold" and held.target == 1, held
        assert held.reason == ("hold: the input's 4s rate window still spans the partition expansion adopted 1s ago "
                "(a new partition's records read under its parent until then and as its own after: counted "
                "twice); the input reads true from 3s on")
        assert tick.policy_state is None and tick.history is None  # neither the policy nor the days read it
        record_rescale(store, 2.0, time.time() - 5.0, expansion=True)
        after = tick()
        assert "partition expansion" not in after.reason and tick.policy_state is not None, after
        record_rescale(store, 2.0, time.time() - 1.0)  # a factor change: its window reads the input true
        assert "partition expansion" not in tick().reason


def test_a_scheduled_tick_and_the_observation_its_policy_reads_are_stamped_with_its_due_time(redis_server, job,
                                                                                            tmp_path):
    from autosizer.clock import ManualClock, TickSchedule

    with scraped_job(redis_server, job, tmp_path, rate=400) as (_, config, _, _):
        clock = ManualClock(1_800_000_000.25)
        tick = build_tick(config, clock=clock)
        tick.schedule = TickSchedule(clock.now, 15.0)
        clock.advance(0.0124)  # the scheduler fired a little late
        first = tick()
        clock.now = tick.schedule.start + 15.0121  # and a little less late the next time
        second = tick()
        assert (first.time, second.time) == (tick.schedule.start, tick.schedule.start + 15.0)
        assert tick.policy_state.times[-2:] == (first.time, second.time)  # the trend's times too
        clock.now = tick.schedule.start + 35.0  # a tick held up past its slack keeps its own time
        assert tick().time == tick.schedule.start + 35.0


def test_the_tick_reads_the_commit_latency_for_a_batchs_cost_until_the_pipeline_measures_it(redis_server, job,
                                                                                              tmp_path):
    """The pipeline measures a batch's fixed cost only from two saturated batches back to back,
    and a job that keeps up never runs them; every batch with records measures its commit
    latency, most of that cost. Until the cost shows, the tick's duty reads the latency (not 1:
    run 145's daemon read 388/s where its job did about 365/s); then the cost."""
    with scraped_job(redis_server, job, tmp_path, rate=400) as (_, config, _, exporter):
        tick = build_tick(config, DaemonMetrics(config.daemon.interval_s))
        assert tick().inputs["duty"] == 1.0  # no deadline, no cost: batches as if free
        exporter.metrics.deadline_s, exporter.metrics.commit_latency_s = 3.0, 0.3
        wait_until(lambda: tick().inputs.get("duty") == round(3 / 3.3, 3), 30, "the latency read for the cost")
        stand_in = "a batch's fixed cost is not measured yet: its commit latency (0.30s) stands in"
        assert stand_in in tick().inputs.get("notes", ()), "the decision says what the duty rests on"
        exporter.metrics.gap_s = 0.2  # the gap after a commit, once a batch ran past its interval
        wait_until(lambda: tick().inputs.get("duty") == round(3 / 3.5, 3), 30, "the latency and the gap read")
        both = "a batch's fixed cost is not measured yet: its commit latency and the gap after it (0.30 + 0.20s) stand in"
        assert both in tick().inputs.get("notes", ())
        exporter.metrics.overhead_s = 1.0
        wait_until(lambda: tick().inputs.get("duty") == 0.75, 30, "the measured cost")
        assert not any("commit latency" in note for note in tick().inputs.get("notes", ()))


def test_a_tick_without_the_pipelines_metrics_says_what_the_pipeline_reported(redis_server, job, tmp_path,
                                                                             capsys):
    """Prometheus up, the pipeline's series gone: the hold named Prometheus' scrape as the suspect
    whether the pipeline had failed, been killed or never started. The pipeline's own report in
    Redis says which; a secret in its error stays out of the journal."""
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    with EmbeddedPrometheus([], tmp_path / "prom") as prometheus:
        config = load_config(write_config(tmp_path / "a.toml", job, redis_server.url, prometheus.url,
                                          actuator={"name": "dry-run", "settings": {}}, daemon={"listen": ""}), {})
        tick = build_tick(config)
        never = tick()
        assert never.outcome == "hold" and never.target == 1
        assert never.reason.startswith("hold: the pipeline has never reported to Redis"), never.reason
        assert "is Prometheus scraping the pipeline's /metrics?" in never.reason  # what Prometheus says stays
        control = ControlChannel(store)
        control.report("failed", generation=1, batches=3,
                       error="Kafka at 127.0.0.1:9092 did not answer list topics; redis://:hunter2@10.0.0.5:6379/0")
        failed = tick()
        assert "the pipeline failed: Kafka at 127.0.0.1:9092 did not answer list topics" in failed.reason
        assert "hunter2" not in json.dumps(DecisionJournal(store).last(1))
        store.redis.hset(store.keys.agent, mapping={"state": "running@1", "heartbeat_ms": int((time.time() - 90) * 1000)})
        killed = tick()
        assert "the pipeline last reported running@1 9" in killed.reason and "s ago" in killed.reason
        assert main(["status", "--job", job, "--redis", redis_server.url]) == 0  # it said "running@1"
        assert "s ago): not running (killed, or its host gone?)" in capsys.readouterr().out
        control.report("running@1", generation=1, batches=4)  # alive: the metrics are the question
        alive = tick()
        assert alive.reason.startswith("hold: no ") and "the pipeline" not in alive.reason.split(":")[1]
        assert main(["status", "--job", job, "--redis", redis_server.url]) == 0
        assert "not running" not in capsys.readouterr().out


def test_daemon_process_bad_config_garbage_overrides_healthz_and_sigterm(redis_server, job, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[job]\nname = 'x'\n[guards]\nmax_factor = 6\n")
    run = subprocess.run([AUTOSIZER, "run", "--config", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "[guards] invalid elasticity factor 6: use a power of two" in run.stderr

    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    config = write_config(tmp_path / "a.toml", job, redis_server.url, f"http://127.0.0.1:{free_port()}",
                          actuator={"name": "dry-run", "settings": {}})
    listen = load_config(config, {}).daemon.listen
    cli = [AUTOSIZER, "override"]
    refused = subprocess.run([*cli, "set", "factor", "3", "--config", str(config)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "invalid elasticity factor 3" in refused.stderr
    daemon = start_daemon(config, tmp_path / "daemon.log")
    try:
        store.redis.set(store.keys.key("override", "factor"), "3")  # written behind the CLI's back
        store.redis.set(store.keys.key("override", "pause"), "perhaps")
        wait_until(lambda: len(_decisions(config)) >= 3, 60, "three ticks")
        assert daemon.poll() is None, "the daemon must survive garbage"
        last = _decisions(config)[-1]
        assert last["outcome"] == "hold" and "prometheus unreachable" in last["reason"]
        assert len(last["overrides"]["errors"]) == 2
        status = subprocess.run([AUTOSIZER, "status", "--config", str(config)], cwd=ROOT,
                                capture_output=True, text=True, timeout=60).stdout
        assert "error: override factor='3' ignored: invalid elasticity factor 3" in status
        assert "error: override pause='perhaps' ignored: use true or false" in status
        assert "leader     " in status and "none" not in status.split("leader")[1].splitlines()[0]
        with urllib.request.urlopen(f"http://{listen}/healthz", timeout=5) as response:
            assert response.status == 200
        with urllib.request.urlopen(f"http://{listen}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert 'autosizer_daemon_decisions_total{outcome="hold"}' in text and "autosizer_daemon_factor 1.0" in text
        # healthy, yet blind: every tick holds without Prometheus, which AutosizerBlind watches
        assert "autosizer_daemon_metrics_complete 0.0" in text
        listed = subprocess.run([*cli, "set", "factor", "8", "--ttl", "2h", "--config", str(config)],
                                cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
        assert "factor" in listed and "2.0h" in listed
        daemon.send_signal(signal.SIGHUP)
        ticks = len(_decisions(config))
        wait_until(lambda: len(_decisions(config)) > ticks, 30, "a tick after SIGHUP")
        assert daemon.poll() is None, "SIGHUP does not kill the daemon"
    finally:
        stop(daemon)
    assert daemon.returncode == 0, "SIGTERM is a clean stop"
    assert LeaderLease(store, 1).current_holder()[0] is None, "the lease is released on the way out"
    assert "daemon.stopped" in (tmp_path / "daemon.log").read_text()
    assert "daemon.sighup_ignored" in (tmp_path / "daemon.log").read_text()


def test_healthz_is_503_with_the_reason_when_redis_refuses_the_password(tmp_path, job):
    from tests.servers import RedisServer

    server = RedisServer(tmp_path / "auth", password="r1ght-pass").start()
    try:
        wrong = server.url.replace("r1ght-pass", "wr0ng-pass")
        config = write_config(tmp_path / "w.toml", job, wrong, f"http://127.0.0.1:{free_port()}",
                              actuator={"name": "dry-run", "settings": {}},
                              daemon={"interval_s": 0.5, "lease_ttl_s": 1.0})
        listen = load_config(config, {}).daemon.listen
        daemon = start_daemon(config, tmp_path / "daemon.log")
        try:
            def health() -> tuple[int, str]:
                try:
                    with urllib.request.urlopen(f"http://{listen}/healthz", timeout=5) as response:
                        return response.status, response.read().decode()
                except urllib.error.HTTPError as exc:
                    return exc.code, exc.read().decode()
                except OSError:
                    return 0, ""

            # Any 503 is not enough: the reason is the check (a slow start once answered a
            # transient `stuck` 503, then `ok` while the first tick ran).
            wait_until(lambda: "refused the credentials" in health()[1], 60, "/healthz naming the password")
            for _ in range(3):  # and it stays: the daemon does not flip back to ok
                status, body = health()
                assert status == 503 and "refused the credentials" in body and "wr0ng" not in body
                time.sleep(0.5)
        finally:
            stop(daemon)
    finally:
        server.stop()
    assert "wr0ng" not in (tmp_path / "daemon.log").read_text(), "no secret in the log"


def _decisions(config) -> list[dict]:
    out = subprocess.run([AUTOSIZER, "decisions", "--json", "-n", "50", "--config", str(config)],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout) if out.returncode == 0 else []


def test_history_store_keeps_recent_days_and_skips_a_corrupt_one(redis_server, job):
    store = MetadataStore(redis_server.url, job)
    saved = HistoryStore(store, keep_days=3)
    history = InputHistory(keep_days=3)
    for day in range(5):
        for hour in range(24):
            changed = history.record(day * 86400 + hour * 3600, 100.0 * (day + 1) + hour)
            if changed is not None:
                saved.save(history, changed)
    store.redis.hset(saved.key, "oops", "[1, 2")  # a hand-edited field: logged, skipped
    loaded = saved.load()
    assert sorted(loaded.days) == [2, 3, 4], "days past keep_days are gone from Redis"
    for day in loaded.days:
        np.testing.assert_array_equal(loaded.days[day], history.days[day])


def test_history_days_are_kept_in_the_jobs_time_zone_and_dropped_when_it_changes(redis_server, job, tmp_path):
    """The daemon's `[job] timezone` keys its days in Redis and names the zone there; the history
    commands read the zone on record; a daemon given another zone drops the days (hours off for
    it), says so with the fix, and keeps what it records next; a hash from before zones were
    kept is UTC's."""
    from tests.unit.test_policies import observe

    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    config = load_config(write_config(tmp_path / "z.toml", job, redis_server.url,
                                      f"http://127.0.0.1:{free_port()}", daemon={"listen": ""}),
                         {"AUTOSIZER_JOB_TIMEZONE": "America/New_York"})
    assert config.job.timezone == "America/New_York"
    tick = build_tick(config)
    at = 1_383_541_200 + 3600  # Monday 4 November 2013, 01:00 in New York: 06:00 UTC
    tick._with_history(observe(time=at, input_rate=50.0))
    raw = store.redis.hgetall(store.keys.history)
    monday = at // DAY_S  # the same date in UTC and in New York at that hour
    assert raw[b"zone"] == b"America/New_York" and str(monday).encode() in raw
    assert HistoryStore(store).load().zone == "America/New_York", "a command reads the zone on record"
    evening = at - 2 * 3600  # Sunday 23:00 in New York, Monday 04:00 UTC: Sunday's slot, not Monday's
    tick._with_history(observe(time=evening, input_rate=40.0))
    sunday = HistoryStore(store).load().days[monday - 1]
    assert sunday[23 * 12] == 40.0

    with capture_logs() as logged:
        london = HistoryStore(store, zone="Europe/London").load()
    assert london.zone == "Europe/London" and not london.days
    (changed,) = [e for e in logged if e["event"] == "history.zone_changed"]
    assert changed["recorded"] == "America/New_York" and changed["days_dropped"] == 2
    assert "autosizer history backfill" in changed["fix"] and changed["log_level"] == "warning"
    assert store.redis.hgetall(store.keys.history) == {b"zone": b"Europe/London"}

    store.redis.delete(store.keys.history)  # written before zones were kept: no zone field
    store.redis.hset(store.keys.history, str(monday), json.dumps([1.0] * 288))
    assert HistoryStore(store, zone="UTC").load().days.keys() == {monday}
    assert HistoryStore(store).load().zone == "UTC"


def test_days_in_redis_make_the_tick_scale_ahead_of_the_peak_they_had(redis_server, job, tmp_path):
    """Learn-the-day through the daemon's own parts: three past days in the job's Redis history
    that all peaked 10-20 min from now make a tick at a low, steady input scale up now (the day
    plan's lead), where the same tick without them holds, and so does one with days that today
    does not look like."""
    with scraped_job(redis_server, job, tmp_path, rate=50) as (store, config, _, _):
        first = build_tick(config, DaemonMetrics(config.daemon.interval_s))
        record = first()
        assert (record.outcome, record.target) == ("hold", 1), record
        first.lease.release()  # that daemon stops

        # Three past days: 50/s, as now, but 400/s from 10 to 20 minutes past this time of day.
        # (Recorded at their own times, so a peak past midnight lands on the next day, as it did.)
        now, history, saved = time.time(), InputHistory(), HistoryStore(store)
        for back in (1, 2, 3):
            for ago in range(-2 * 3600, 3600, 60):
                history.record(now - back * 86400 + ago, 400.0 if 600 <= ago < 1200 else 50.0)
        for day in history.days:
            saved.save(history, day)
        second = build_tick(config, DaemonMetrics(config.daemon.interval_s))  # a new daemon: loads them
        record = second()
        assert record.outcome == "dry_run" and record.target > 1, record
        assert "the day plan runs" in record.reason and "recent days reached 400/s" in record.reason, record.reason
        second.lease.release()

        # Days that ran 400/s through the last hour too, where today ran 50/s (a holiday, an
        # outage upstream; today's hour as a daemon running through it recorded it): today broke
        # their pattern, so they are not believed and the tick reacts to the input it sees.
        store.redis.delete(saved.key)
        history = InputHistory()
        for back in (1, 2, 3):
            for ago in range(-2 * 3600, 3600, 60):
                history.record(now - back * 86400 + ago, 400.0 if -3600 <= ago < 1200 else 50.0)
        for ago in range(-3600, 0, 60):
            history.record(now + ago, 50.0)
        for day in history.days:
            saved.save(history, day)
        with capture_logs() as logged:
            record = build_tick(config, DaemonMetrics(config.daemon.interval_s))()
        assert (record.outcome, record.target) == ("hold", 1), record
        assert "the day plan runs" not in record.reason, record.reason
        assert "no day plan: today broke the days' pattern: the last hour peaked at 50/s where they had 400/s" \
            in record.reason, record.reason
        (broken,) = [e for e in logged if e["event"] == "history.pattern_broken"]
        assert broken["why"] in record.reason and broken["log_level"] == "warning"


def test_each_new_slot_the_tick_reads_days_written_since_and_keeps_its_own_today(redis_server, job, tmp_path):
    """A backfill (or another daemon) writes days while a daemon runs: the next tick in a new
    history slot reads them, no restart; today's slots keep the higher of Redis' and its own,
    and a Redis it cannot read leaves its history as it was."""
    from tests.unit.test_policies import observe

    _, tick = _failing_tick(redis_server, job, tmp_path)
    saved, day, slot_s = tick.history_store, 20_000, 300
    start = day * DAY_S + 8 * 3600
    assert tick._with_history(observe(time=start, input_rate=50.0)).history.days.keys() == {day}

    written = InputHistory()  # a backfill: three past days
    for back in (3, 2, 1):
        written.record((day - back) * DAY_S + 8 * 3600, 400.0)
    for each in written.days:
        saved.save(written, each)
    same_slot = tick._with_history(observe(time=start + 60, input_rate=60.0)).history
    assert same_slot.days.keys() == {day} and same_slot.days[day][96] == 60.0, "read once a slot"
    written.record(start, 70.0)  # another daemon read more in today's slot
    saved.save(written, day)

    next_slot = tick._with_history(observe(time=start + slot_s, input_rate=55.0)).history
    assert next_slot.days.keys() == {day - 3, day - 2, day - 1, day}
    assert next_slot.days[day - 1][96] == 400.0
    assert next_slot.days[day][96] == 70.0 and next_slot.days[day][97] == 55.0
    assert HistoryStore(saved.store).load().days[day][97] == 55.0, "and writes today as it has it"

    broken = HistoryStore(MetadataStore(f"redis://127.0.0.1:{free_port()}/0", job))
    kept = broken.refresh(next_slot, day)
    assert kept is next_slot, "Redis unreadable: the history in memory goes on"


def _failing_tick(redis_server, job, tmp_path):
    """A tick whose actuations abort (no pipeline answers the drain), on a manual clock."""
    from autosizer.clock import ManualClock

    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    config = load_config(write_config(
        tmp_path / "fail.toml", job, redis_server.url, f"http://127.0.0.1:{free_port()}",
        daemon={"listen": "", "backoff_s": 60.0, "backoff_max_s": 200.0},
        actuator={"name": "restart-in-driver", "settings": {
            "drain_timeout_s": 1, "start_timeout_s": 1, "verify_timeout_s": 1}}), {})
    tick = build_tick(config, clock=ManualClock())
    return store, tick


def test_a_failed_actuation_backs_off_doubling_and_the_rescale_override_skips_it(redis_server, job, tmp_path):
    store, tick = _failing_tick(redis_server, job, tmp_path)
    overrides = OverrideStore(store)
    overrides.set("factor", "4")  # a pin acts without metrics
    first = tick()
    assert first.outcome == "aborted", first
    backoff = tick.backoff_store.read()
    assert backoff.failures == 1 and backoff.until == pytest.approx(tick.clock.time() + 60)

    tick.clock.advance(30)
    held = tick()
    assert held.outcome == "backoff" and "backing off for 30s more after 1 failed" in held.reason
    assert store.current_generation() == 1

    tick.clock.advance(31)
    assert tick().outcome == "aborted", "the backoff is over: one more attempt"
    backoff = tick.backoff_store.read()
    assert backoff.failures == 2 and backoff.until == pytest.approx(tick.clock.time() + 120)
    tick.clock.advance(10)
    assert tick().outcome == "backoff"

    overrides.set("pause", "true")
    overrides.set("rescale", "true")
    assert tick().outcome == "paused"
    assert overrides.read().rescale, "a paused tick does not consume the rescale one-shot"
    overrides.clear("pause")
    assert tick().outcome == "aborted", "the operator's rescale skips the backoff"
    assert not overrides.read().rescale, "consumed once acted on"
    assert tick.backoff_store.read().until - tick.clock.time() == pytest.approx(200), "capped"


@pytest.mark.parametrize("suffix, poison", [
    ("override:pause", lambda r, k: r.hset(k, "a", "b")),
    ("actuation", lambda r, k: r.set(k, "{not json")),
    ("rescale", lambda r, k: r.hset(k, "at_ms", "soon")),
    ("leader", lambda r, k: r.hset(k, "a", "b")),
])
def test_a_poisoned_key_is_a_hold_naming_the_key_never_a_crash(redis_server, job, tmp_path, suffix, poison):
    store, tick = _failing_tick(redis_server, job, tmp_path)
    key = store.keys.key(*suffix.split(":"))
    poison(store.redis, key)
    OverrideStore(store).set("factor", "4")
    for _ in range(2):  # every tick, not once
        record = tick()
        assert record.outcome == "hold" and key in record.reason, record
        assert "delete it" in record.reason or "override clear" in record.reason
    assert store.current_generation() == 1
    if suffix == "leader":
        tick.lease.last_answer -= 60  # as if a lease period passed
        assert "leader lease could not be taken" in tick.lease.problem()


def test_prometheus_credentials_and_huge_override_values_reach_no_journal_and_no_log(redis_server, job, tmp_path, capsys):
    from autosizer.controller.logging import configure_logging

    configure_logging(level="info")
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    secret_url = f"http://admin:hunter2@127.0.0.1:{free_port()}"
    config = load_config(write_config(tmp_path / "s.toml", job, redis_server.url, secret_url,
                                      actuator={"name": "dry-run", "settings": {}},
                                      daemon={"listen": ""}), {})
    store.redis.set(store.keys.key("override", "max_factor"), "9" * 5_000_000)  # behind the CLI's back
    tick = build_tick(config)
    record = tick()
    assert record.outcome == "hold" and "prometheus unreachable at http://***@127.0.0.1" in record.reason
    stored = store.redis.xrevrange(store.keys.key("decisions"), count=1)[0][1][b"record"]
    assert b"hunter2" not in stored and len(stored) < 20_000, len(stored)
    logged = capsys.readouterr()
    assert "hunter2" not in logged.out + logged.err and len(logged.err) < 50_000
    status = subprocess.run([AUTOSIZER, "decisions", "--json", "--redis", redis_server.url, "--job", job],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "hunter2" not in status.stdout and len(status.stdout) < 20_000


def test_a_multiplied_partition_count_is_adopted_at_once_coupled_until_adopt_after_s_and_a_bad_one_is_refused(
        redis_server, job, tmp_path):
    """The expansion step on a manual clock: the pipeline's report (written here through the
    store, as the pipeline writes it) is adopted at the next tick, its new partitions coupled to
    their parents until `adopt_after_s` after the broker had them; an operator's request adopts
    behind barriers; a count that is not a multiple is named in every decision."""
    import time as _time

    from autosizer.clock import ManualClock
    from autosizer.elasticity.topology import Topology

    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 4}, factor=4))
    config = load_config(write_config(
        tmp_path / "expand.toml", job, redis_server.url, f"http://127.0.0.1:{free_port()}",
        daemon={"listen": "", "adopt_after_s": 60.0}, actuator={"name": "dry-run", "settings": {}}), {})
    clock = ManualClock()
    tick = build_tick(config, clock=clock)
    now_ms = int(clock.time() * 1000)
    ends = {("orders", p): 10 * p for p in range(4)}
    store.report_topology(Topology({"orders": 8}, {"orders": now_ms - 5_000}, ends, now_ms))
    adopted = tick()
    assert adopted.outcome == "dry_run", adopted
    until = _time.strftime("%H:%M:%S", _time.gmtime((now_ms - 5_000 + 60_000) / 1000))
    assert (f"partition expansion orders 4 -> 8; new partitions read behind their parents until {until} UTC, "
            "then free") in adopted.reason, adopted.reason
    assert "would adopt partition counts {'orders': 8}" in adopted.reason

    store.report_topology(Topology({"orders": 6}, {"orders": now_ms}, ends, now_ms))
    for _ in range(2):
        refused = tick()
        assert refused.outcome == "hold"
        assert ("topic orders has 6 partitions on the broker, not a multiple of the layout's 4: "
                "expansion refused") in refused.reason
        (refusal,) = refused.inputs["topology"]
        assert refused.reason.endswith("; " + refusal)  # after why the metrics are missing
    status = subprocess.run([AUTOSIZER, "status", "--job", job, "--redis", redis_server.url],
                            capture_output=True, text=True, cwd=ROOT)
    assert "problem    topic orders has 6 partitions" in status.stdout, status.stdout
    assert "broker     orders=6" in status.stdout

    store.report_topology(Topology({"orders": 8}, {"orders": int(clock.time() * 1000)}, ends, now_ms))
    cli = [AUTOSIZER, "layout", "expand", "--job", job, "--redis", redis_server.url, "--topic", "orders=8"]
    shown = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == ("dry run (add --apply to adopt): partition expansion orders "
                                            "4 -> 8, generation 1 -> 2, 16 -> 32 virtual tasks (grouper partition)")
    assert "  orders[7] waits until every task of orders[3] is past offset 30" in shown.stdout
    assert store.expansion_request() is None, "a dry run asks nothing"
    assert subprocess.run([*cli[:-1], "orders=6"], capture_output=True, text=True, cwd=ROOT).stderr == (
        "autosizer: error: orders=6: the new count must be a multiple of the layout's 4 and larger (e.g. 8)\n")
    assert subprocess.run([*cli, "--apply"], capture_output=True, text=True, cwd=ROOT).returncode == 0
    asked = tick()  # seen 0 s ago, but asked for: adopted now
    assert asked.outcome == "dry_run" and "(asked by `autosizer layout expand`)" in asked.reason, asked
    assert store.expansion_request() is None, "the request is used up"
