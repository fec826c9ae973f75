"""The actuators' unhappy paths on real Redis: a drain nobody answers aborts and keeps the old
layout; a new generation that never commits is rolled back to the old factor by the same path."""

from __future__ import annotations

import sys
import textwrap

import pytest

from autosizer.actuators.base import ActuatorContext, Plan
from autosizer.actuators.journal import ActuationJournal
from autosizer.actuators.registry import load_actuator
from autosizer.controller.lease import LeaderLease
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore

pytestmark = pytest.mark.integration

# A driver that only manages to run factor 1: it commits a first batch under the current
# generation when that generation's factor is 1, and never otherwise (think: CPU-bound past 1).
DRIVER = textwrap.dedent("""
    import signal, sys, time
    from autosizer.elasticity.store import MetadataStore
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    store = MetadataStore(sys.argv[1], sys.argv[2])
    layout = store.layout()
    if layout.factor == 1:
        store.commit(layout.generation, {}, batch=1)
    while True:
        time.sleep(1)
""")


def actuator(store: MetadataStore, name: str, settings: dict):
    lease = LeaderLease(store, ttl_s=30)
    assert lease.try_acquire()
    journal = ActuationJournal(store, lease.holder)
    return load_actuator(name, ActuatorContext(store, journal), settings), journal


def driver(store: MetadataStore, tmp_path, script_text: str, **settings: float):
    """The spark-submit actuator launching `script_text` as the job's driver."""
    script = tmp_path / "driver.py"
    script.write_text(script_text)
    return actuator(store, "spark-submit", {
        "command": [sys.executable, str(script), store.url, store.job],
        "pid_file": str(tmp_path / "driver.pid"), "stop_timeout_s": 5.0, **settings})


def test_a_drain_nobody_answers_aborts_and_keeps_the_old_layout(redis_server, job):
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=2))
    restart, journal = actuator(store, "restart-in-driver", {"drain_timeout_s": 1.0, "start_timeout_s": 1.0})
    outcome = restart.act(Plan(1, 2, 8, "test"))
    assert (outcome.result, outcome.factor, outcome.generation) == ("aborted", 2, 1)
    assert store.layout().generation == 1 and journal.open() is None
    assert journal.history(1)[0].result == "aborted"


def test_a_generation_that_never_commits_is_rolled_back(redis_server, job, tmp_path):
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    submit, journal = driver(store, tmp_path, DRIVER, verify_timeout_s=3.0, verify_window_s=0.0)
    try:
        outcome = submit.act(Plan(1, 1, 4, "test", lag_before=0.0))
        assert (outcome.result, outcome.factor, outcome.generation) == ("rolled_back", 1, 3)
        assert "committed no batch within 3s" in outcome.detail
        assert outcome.steps == ["drain", "migrate", "start", "verify"] * 2
        layout = store.layout()
        assert (layout.generation, layout.factor) == (3, 1) and store.committed_batch(3) == 1
        assert journal.open() is None and journal.history(1)[0].result == "rolled_back"
    finally:
        submit.stop(store.current_generation())


# A driver that runs whatever factor the layout has: it commits a first batch of each generation.
EVERY_FACTOR = textwrap.dedent("""
    import signal, sys, time
    from autosizer.elasticity.store import MetadataStore
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    store = MetadataStore(sys.argv[1], sys.argv[2])
    store.commit(store.layout().generation, {}, batch=1)
    while True:
        time.sleep(1)
""")


@pytest.mark.parametrize("old,new,watched", [(1, 4, False), (4, 1, True)])
def test_only_a_scale_down_is_watched_for_lag_growth(redis_server, job, tmp_path, old, new, watched):
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=old))
    script = tmp_path / "driver.py"
    script.write_text(EVERY_FACTOR)
    readings: list[int] = []
    lease = LeaderLease(store, ttl_s=30)
    assert lease.try_acquire()
    journal = ActuationJournal(store, lease.holder)
    context = ActuatorContext(store, journal, lag=lambda: readings.append(1) or 100.0)
    submit = load_actuator("spark-submit", context, {
        "command": [sys.executable, str(script), redis_server.url, job],
        "pid_file": str(tmp_path / "driver.pid"), "stop_timeout_s": 5.0,
        "verify_timeout_s": 20.0, "verify_window_s": 0.5})
    try:
        outcome = submit.act(Plan(1, old, new, "test", lag_before=100.0, input_rate=10.0))
        assert (outcome.result, outcome.factor) == ("done", new)
        assert bool(readings) == watched  # a scale-up's lag is the policy's to judge
    finally:
        submit.stop(store.current_generation())


@pytest.mark.parametrize("lags,result", [
    ((0, 0, 9), "done"),  # a batch's input at the end, a trough before it: no growth
    ((0, 8, 12), "rolled_back"),  # grows from trough to trough
])
def test_a_scale_downs_lag_check_reads_the_trough_of_the_windows_end(redis_server, job, tmp_path, lags, result):
    """The lag at the first commit, then at 2 and 3 s of a 3 s window (its last third, every
    second): the slowest growth from the first to any of those counts. One reading at the end
    took 9 records in 3 s for growth (3/s where a quarter of 10/s is allowed) and rolled a
    healthy scale-down back."""
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=4))
    script = tmp_path / "driver.py"
    script.write_text(EVERY_FACTOR)
    readings = iter(lags)
    lease = LeaderLease(store, ttl_s=30)
    assert lease.try_acquire()
    context = ActuatorContext(store, ActuationJournal(store, lease.holder), lag=lambda: float(next(readings)))
    submit = load_actuator("spark-submit", context, {
        "command": [sys.executable, str(script), redis_server.url, job],
        "pid_file": str(tmp_path / "driver.pid"), "stop_timeout_s": 5.0,
        "verify_timeout_s": 20.0, "verify_window_s": 3.0})
    try:
        outcome = submit.act(Plan(1, 4, 1, "test", lag_before=0.0, input_rate=10.0, processed_rate=10.0))
        assert outcome.result == result, outcome.detail
        assert next(readings, None) is None  # all three read, no more
    finally:
        submit.stop(store.current_generation())


# A Kinesis driver that takes a re-shard in place as soon as it runs the new generation (the
# pipeline does so between batches), so its first commit lands under the generation after it.
RESHARDS_AT_ONCE = textwrap.dedent("""
    import signal, sys, time
    from autosizer.elasticity.shards import Reshard, apply
    from autosizer.elasticity.store import MetadataStore
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    store = MetadataStore(sys.argv[1], sys.argv[2])
    layout = store.layout()
    if layout.generation == 2:
        store.migrate(2, apply(layout, Reshard({2: (0,), 3: (0,)}, frozenset({0}))))
        store.commit(3, {}, batch=1)
    while True:
        time.sleep(1)
""")


def test_a_reshard_taken_in_place_after_the_start_verifies_the_rescale(redis_server, job, tmp_path):
    """The daemon's rescale to generation 2 is answered by commits under generation 3 (the
    pipeline re-sharded in place): done, not rolled back over a layout that no longer exists."""
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"clicks": 2}, factor=4, source="kinesis"))
    submit, journal = driver(store, tmp_path, RESHARDS_AT_ONCE, verify_timeout_s=20.0, verify_window_s=0.5)
    try:
        outcome = submit.act(Plan(1, 4, 1, "test", lag_before=0.0, input_rate=10.0))
        assert outcome.result == "done", outcome.detail
        layout = store.layout()
        assert (layout.generation, layout.factor) == (3, 1) and layout.partitions() == [
            ("clicks", 1), ("clicks", 2), ("clicks", 3)]
        assert journal.open() is None and journal.history(1)[0].result == "done"
    finally:
        submit.stop(store.current_generation())
