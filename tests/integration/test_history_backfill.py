"""`autosizer history backfill` and `show` against a real Prometheus holding days of a job's
input (written as TSDB blocks by promtool, as if it had scraped the pipeline all along) and a
real Redis."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from autosizer.controller.daemon import build_tick
from autosizer.controller.history import HistoryStore
from autosizer.controller.metrics import DaemonMetrics
from autosizer.elasticity.store import MetadataStore
from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.policies.history import DAY_S, TRUST_WINDOW_S, InputHistory
from tests.daemon_harness import AUTOSIZER, ROOT, scraped_job, write_config

pytestmark = pytest.mark.integration

STEP_S = 15  # the pipeline's watermarks as a 15 s scrape kept them
QUIET, BUSY = 100.0, 400.0  # records/s over the job's two partitions


def _rate(at: float, now: float) -> float:
    """The job's input at `at`: BUSY from 10 to 40 minutes past now's time of day on every
    past day (what the next hour should expect), 900/s today (which the backfill leaves to the
    daemon), QUIET otherwise."""
    if at >= now // DAY_S * DAY_S:
        return 900.0
    return BUSY if 600 <= (at - now) % DAY_S < 2400 else QUIET


def _blocks(data: Path, start: float, now: float, rate: Callable[[float, float], float] = _rate,
            step_s: float = STEP_S) -> None:
    """The two partitions' high watermarks from `start` to `now` at `rate(at, now)` in all, one
    sample every `step_s`, as promtool turns OpenMetrics into the blocks Prometheus reads at start."""
    times = np.arange(start, now, step_s)
    rates = np.array([rate(t, now) for t in times]) / 2
    marks = np.concatenate([[0.0], np.cumsum(rates[:-1] * step_s)])
    lines = ["# TYPE autosizer_pipeline_high_watermark gauge"]
    for partition in (0, 1):
        lines += [f'autosizer_pipeline_high_watermark{{topic="orders",partition="{partition}"}} {m:.0f} {t:.0f}'
                  for t, m in zip(times, marks, strict=True)]
    data.mkdir(parents=True)
    source = data.parent / "input.om"
    source.write_text("\n".join(lines) + "\n# EOF\n")
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", "-q", str(source), str(data)],
                   check=True, capture_output=True, timeout=300)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOSIZER, "history", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_backfill_fills_the_past_days_from_prometheus_and_show_reads_them(redis_server, job, tmp_path):
    now = time.time()
    start = (now // DAY_S - 3) * DAY_S
    _blocks(tmp_path / "prom" / "data", start, now)
    with EmbeddedPrometheus([], tmp_path / "prom") as prometheus:
        # the shipped tick and rate window, as a deployed daemon reads the input
        config = write_config(tmp_path / "a.toml", job, redis_server.url, prometheus.url,
                              daemon={"interval_s": 15.0, "lease_ttl_s": 45.0}, prometheus={"window": "30s"})
        filled = _cli("backfill", "--config", str(config), "--days", "3", "--json")
        assert filled.returncode == 0, filled.stderr
        again = _cli("backfill", "--config", str(config), "--days", "3")
        down = _cli("backfill", "--config", str(config), "--prometheus", f"http://127.0.0.1:{free_port()}")
    today = int(now // DAY_S)
    assert len(json.loads(filled.stdout)["days"]) == 3
    assert again.returncode == 0 and "nothing to add" in again.stdout, "a second backfill changes nothing"
    assert down.returncode == 2 and "the range query at http://127.0.0.1:" in down.stderr
    assert len(down.stderr.strip().splitlines()) == 1, down.stderr

    history = HistoryStore(MetadataStore(redis_server.url, job)).load()
    assert sorted(history.days) == [today - 3, today - 2, today - 1], "today is left to the daemon"
    for day in sorted(history.days):
        row = history.days[day]
        slots = (np.arange(history.slots) * history.slot_s + day * DAY_S - now) % DAY_S
        busy = (slots >= 600 + history.slot_s) & (slots < 2400 - history.slot_s)  # whole slots inside it
        quiet = (slots >= 2400 + 2 * history.slot_s) & (slots < DAY_S - 2 * history.slot_s)
        quiet &= ~np.isnan(row)  # the first slots of the first day precede the first rate
        assert np.allclose(row[busy], BUSY, rtol=0.05), row[busy]
        assert np.allclose(row[quiet], QUIET, rtol=0.05), row[quiet]

    shown = _cli("show", "--config", str(config), "--json")
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert [r["peak/s"] == pytest.approx(BUSY, rel=0.05) for r in report["days"]] == [True] * 3
    # what the policy would read of the next hour: BUSY (10-40 minutes ahead on every past day)
    expected = history.expected_peak(time.time(), 3600.0)
    assert report["next_hour_peak"] == (None if expected is None else pytest.approx(expected, rel=0.01))
    assert report["doubt"] == history.doubt(time.time(), 3600.0)
    status = subprocess.run([AUTOSIZER, "status", "--config", str(config)], cwd=ROOT, capture_output=True,
                            text=True, timeout=60).stdout
    assert "history    3 day(s) on record; " in status, status
    text = _cli("show", "--config", str(config))
    assert "slots seen" in text.stdout.lower() and "288/288" in text.stdout, text.stdout
    assert (f"next hour: recent days expect up to {expected:.0f}/s" if expected is not None
            else "next hour: the history cannot say") in text.stdout, text.stdout


def test_history_commands_refuse_bad_input_in_one_line(redis_server, job):
    target = ("--job", job, "--redis", redis_server.url)
    empty = _cli("show", *target)
    assert empty.returncode == 0 and "no days on record" in empty.stdout, empty.stdout
    status = subprocess.run([AUTOSIZER, "status", *target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert "history    none on record: the policy reacts" in status.stdout, status.stdout
    for args, says in ((("backfill", *target), "no Prometheus given: pass --prometheus URL"),
                       (("backfill", *target, "--prometheus", "127.0.0.1:9090"), "must start with http://"),
                       (("backfill", *target, "--days", "15"), "--days must be"),
                       (("backfill", *target, "--days", "nan"), "--days must be")):
        out = _cli(*args)
        assert out.returncode == 2 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    # Redis out of reach: an error, not "no days on record" (which `show` printed, exiting 0)
    gone = ("--job", job, "--redis", f"redis://:hunter2@127.0.0.1:{free_port()}/0")
    for args in (("show", *gone), ("backfill", *gone, "--prometheus", "http://127.0.0.1:9")):
        out = _cli(*args)
        assert out.returncode == 2 and out.stderr.startswith("autosizer: error: cannot reach Redis"), out
        assert "no days on record" not in out.stdout and "hunter2" not in out.stdout + out.stderr, out
    # days kept in a zone this machine cannot read: named, with the fix
    store = MetadataStore(redis_server.url, job)
    store.redis.hset(store.keys.history, "zone", "Mars/Olympus")
    out = _cli("show", *target)
    assert out.returncode == 2 and "kept in zone 'Mars/Olympus'" in out.stderr and "history backfill" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_show_and_status_say_why_the_history_cannot_say(redis_server, job):
    """One day on record: both name the fallback (two of the last three days are needed), not
    only that the policy reacts."""
    store = MetadataStore(redis_server.url, job)
    saved = HistoryStore(store)
    history, yesterday = InputHistory(), int(time.time() // DAY_S) - 1
    for second in range(0, DAY_S, 300):
        history.record(yesterday * DAY_S + second, QUIET)
    saved.save(history, yesterday)
    target = ("--job", job, "--redis", redis_server.url)
    shown = _cli("show", *target)
    assert "next hour: the history cannot say (1 of the last three days on record, 2 needed): the policy reacts" \
        in shown.stdout, shown.stdout
    status = subprocess.run([AUTOSIZER, "status", *target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert ("history    1 day(s) on record; they cannot say of the next hour (1 of the last three days on "
            "record, 2 needed)") in status.stdout, status.stdout



def test_a_new_daemon_reads_the_last_hour_back_and_sees_a_broken_day_on_its_first_tick(redis_server, job, tmp_path):
    """Three days in Redis ran 400/s through this hour and on; today ran 50/s, which Prometheus
    kept (blocks, as if it had scraped the job all along) but no daemon saw. A new daemon's
    first tick reads the hour back from Prometheus, so the days are not believed at once: it
    reacts and says why. (With no record of the hour it would trust them for an hour and scale
    ahead for a peak this day will not have.)"""
    now = time.time()
    # sampled each second, as the harness' Prometheus scrapes (its daemon reads 4 s rate windows)
    _blocks(tmp_path / "prom" / "data", now - TRUST_WINDOW_S - 900, now, lambda at, _: 50.0, step_s=1.0)
    history, saved = InputHistory(), HistoryStore(MetadataStore(redis_server.url, job))
    for back in (1, 2, 3):
        for ago in range(-2 * 3600, 3600, 60):
            history.record(now - back * DAY_S + ago, 400.0 if -3600 <= ago < 1200 else 50.0)
    for day in history.days:
        saved.save(history, day)
    with scraped_job(redis_server, job, tmp_path, rate=50) as (store, config, _, _), capture_logs() as logged:
        ticked = time.time()  # the blocks end at `now`: the hour read back holds data up to there
        record = build_tick(config, DaemonMetrics(config.daemon.interval_s))()
    assert "no day plan: today broke the days' pattern: the last hour peaked at 50/s where they had 400/s" \
        in record.reason, record.reason
    assert "the day plan runs" not in record.reason and record.target == 1, record
    (recalled,) = [e for e in logged if e["event"] == "history.recalled"]
    # every point the hour has: the blocks' seconds within it (the job's start-up between `now`
    # and the tick, a few seconds on a loaded machine, is an hour's end with no block yet)
    assert recalled["points"] >= (TRUST_WINDOW_S - (ticked - now)) / config.daemon.interval_s - 2
    today = HistoryStore(store).load().days[int(now // DAY_S)]
    hour = today[int(now % DAY_S // 300) - 11:int(now % DAY_S // 300)]  # the completed slots read back
    assert np.allclose(hour, 50.0, rtol=0.05), hour



def test_a_prometheus_that_refuses_the_hour_costs_the_read_back_only(redis_server, job, tmp_path):
    """A query limit the ticks' instant queries stay under but the hour's range query does not
    (`--query.max-samples`): the read-back is logged as failed and the tick decides as before,
    with what is on record (nothing of today's hour, so the days are believed)."""
    now, history = time.time(), InputHistory()
    _blocks(tmp_path / "prom" / "data", now - TRUST_WINDOW_S - 900, now, lambda at, _: 50.0, step_s=1.0)
    saved = HistoryStore(MetadataStore(redis_server.url, job))
    for back in (1, 2, 3):
        for ago in range(-2 * 3600, 3600, 60):
            history.record(now - back * DAY_S + ago, 400.0 if 600 <= ago < 1200 else 50.0)
    for day in history.days:
        saved.save(history, day)
    with scraped_job(redis_server, job, tmp_path, rate=50, prometheus_flags=("--query.max-samples=200",)) \
            as (_, config, _, _), capture_logs() as logged:
        record = build_tick(config, DaemonMetrics(config.daemon.interval_s))()
    (failed,) = [e for e in logged if e["event"] == "history.recall_failed"]
    assert "sample" in failed["error"], failed
    assert not [e for e in logged if e["event"] == "history.recalled"]
    assert record.outcome == "dry_run" and "the day plan runs" in record.reason, record.reason

def test_the_demos_days_are_believed_and_its_holiday_is_not(redis_server, job):
    """`examples/demo.py --history [same|holiday]` through a real Redis: the days like today make
    the next hour expect the step; the days today broke are named as such, as a daemon loading
    them would read them."""
    from examples.demo import HIGH, LOW, load_at, seed_history

    began, step = time.time(), lambda second: load_at(second, HIGH, "step")
    for holiday, job_name in ((False, job), (True, job + "-holiday")):
        store = MetadataStore(redis_server.url, job_name)
        seed_history(store, began, 240, step, holiday=holiday)
        history = HistoryStore(store).load()
        if holiday:
            assert history.expected_peak(began, 3600.0) is None
            assert history.doubt(began) == history.broken(began)
            assert f"the last hour peaked at {LOW:.0f}/s where they had {HIGH:.0f}/s" in history.doubt(began)
        else:
            assert history.doubt(began) is None and history.expected_peak(began, 3600.0) == HIGH
