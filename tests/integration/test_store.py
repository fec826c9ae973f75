"""The Redis store against a real redis-server (AOF on): fencing, atomic migration, startpoints."""

from __future__ import annotations

import threading
import time

import pytest

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.startpoints import Startpoint, StartpointKey
from autosizer.elasticity.store import (
    KeyProblem,
    LayoutExists,
    MetadataStore,
    NoLayout,
    StaleGeneration,
    StoreUnavailable,
)
from tests.servers import RedisServer, free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def store(redis_server, job) -> MetadataStore:
    return MetadataStore(redis_server.url, job)


def test_layout_and_checkpoints_round_trip(store):
    layout = Layout(topics={"orders": 4, "clicks": 2}, factor=2)
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 120, ("clicks", 1): 7})
    store.init_layout(layout, cp)
    assert store.current_generation() == 1
    assert store.layout() == layout
    assert store.checkpoints().to_json() == cp.to_json()


def test_init_refuses_to_overwrite_and_missing_layout_is_explained(store):
    with pytest.raises(NoLayout, match="autosizer layout init"):
        store.layout()
    store.init_layout(Layout(topics={"orders": 1}))
    with pytest.raises(LayoutExists, match="already has layout generation 1"):
        store.init_layout(Layout(topics={"orders": 1}))


def test_commit_is_fenced_by_generation_and_writes_nothing_when_refused(store):
    layout = Layout(topics={"orders": 2}, factor=2)
    store.init_layout(layout)
    cp = store.checkpoints()
    cp.advance("Partition_0-0-2", "orders", 0, 10)
    store.commit(1, {"Partition_0-0-2": cp.progress("Partition_0-0-2")})
    assert store.checkpoints().position("Partition_0-0-2", "orders", 0) == 10

    store.migrate(1, layout.with_factor(4))
    cp.advance("Partition_0-0-2", "orders", 0, 50)
    with pytest.raises(StaleGeneration, match="generation 1 refused: the current generation is 2"):
        store.commit(1, {"Partition_0-0-2": cp.progress("Partition_0-0-2")})
    assert store.checkpoints(1).position("Partition_0-0-2", "orders", 0) == 10
    assert store.checkpoints().position("Partition_0-0-4", "orders", 0) == 10
    assert store.checkpoints().position("Partition_0-2-4", "orders", 0) == 10


def test_migrate_matches_the_model_and_refuses_a_stale_source(store):
    layout = Layout(topics={"orders": 3}, factor=4)
    cp = Checkpoints.initial(layout)
    for i, task in enumerate(layout.virtual_tasks()):
        for topic, partition in task.partitions:
            cp.advance(task.name, topic, partition, 10 * i)
    store.init_layout(layout, cp)
    new = store.migrate(1, layout.with_factor(1))
    assert new.to_json() == cp.migrate(layout.with_factor(1)).to_json()
    assert store.checkpoints().to_json() == new.to_json()
    with pytest.raises(StaleGeneration, match="migration for layout generation 1 refused"):
        store.migrate(1, layout.with_factor(8))


def test_readers_never_see_half_a_migration(store):
    # The writer keeps every generation: 24 migrations in a tight loop would otherwise prune the
    # one a reader just read as current before it reads its layout (5 migrations between two
    # Redis calls, which a real job's drain-migrate-start cycle never makes).
    store = MetadataStore(store.url, store.job, keep_generations=100)
    layout = Layout(topics={"orders": 8}, factor=1)
    store.init_layout(layout)
    failures: list[str] = []
    stop = threading.Event()

    def read() -> None:
        reader = MetadataStore(store.url, store.job)
        while not stop.is_set():
            try:
                cp = reader.checkpoints()
            except Exception as exc:  # noqa: BLE001 - a reader that dies must fail the test, not end it
                failures.append(f"{type(exc).__name__}: {exc}")
                return
            names = {t.name for t in cp.layout.virtual_tasks()}
            if len(names) != 8 * cp.layout.factor:
                failures.append(f"generation {cp.layout.generation}: {len(names)} tasks")

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for factor in [2, 4, 8, 16, 8, 4, 2, 1] * 3:
            store.migrate(store.current_generation(), store.layout().with_factor(factor))
    finally:
        stop.set()
        thread.join()
    assert failures == []
    assert store.current_generation() == 25


def test_old_generations_are_pruned(redis_server, job):
    store = MetadataStore(redis_server.url, job, keep_generations=3)
    store.init_layout(Layout(topics={"orders": 1}))
    for factor in [2, 4, 8, 16]:
        store.migrate(store.current_generation(), store.layout().with_factor(factor))
    with pytest.raises(NoLayout):
        store.layout(2)
    assert store.layout(3).factor == 4


def test_startpoint_is_deleted_only_after_a_commit_passes_it(store):
    layout = Layout(topics={"orders": 2}, factor=2)
    store.init_layout(layout)
    store.set_startpoint(StartpointKey("orders", 0), Startpoint.specific(5, created_ms=1))
    store.set_startpoint(StartpointKey("orders", 1), Startpoint.specific(9, created_ms=1))
    fanned = store.fan_out_startpoints(layout, now_ms=2)
    assert set(fanned.startpoints) == {
        StartpointKey("orders", p, f"Partition_{p}-{b}-2") for p in (0, 1) for b in (0, 1)
    }
    cp = store.checkpoints()
    for key, sp in store.startpoints().items():
        pinned = sp.resolve(key.topic, key.partition, resolver=None)  # specific needs no source
        assert store.pin_startpoint(key, sp, pinned)
        cp.apply_startpoint(key.task, key.topic, key.partition, pinned.resolved_offset)
    # Partition 0 had messages: its tasks commit past 5. Partition 1 was idle: they stay at 9.
    cp.advance("Partition_0-0-2", "orders", 0, 8)
    cp.advance("Partition_0-1-2", "orders", 0, 8)
    store.commit(1, {t.name: cp.progress(t.name) for t in layout.virtual_tasks()})
    assert set(store.startpoints()) == {
        StartpointKey("orders", 1, "Partition_1-0-2"),
        StartpointKey("orders", 1, "Partition_1-1-2"),
    }


def test_pinned_startpoints_are_folded_into_checkpoints_by_a_migration(store):
    layout = Layout(topics={"orders": 1}, factor=2)
    store.init_layout(layout, Checkpoints.from_partition_offsets(layout, {("orders", 0): 100}))
    store.set_startpoint(StartpointKey("orders", 0, "Partition_0-1-2"), Startpoint.specific(40))
    new = store.migrate(1, layout.with_factor(4))
    assert new.position("Partition_0-1-4", "orders", 0) == 40
    assert new.position("Partition_0-3-4", "orders", 0) == 40
    assert new.position("Partition_0-0-4", "orders", 0) == 100
    assert store.startpoints() == {}


def test_set_startpoint_rejects_unknown_targets(store):
    store.init_layout(Layout(topics={"orders": 2}, factor=2))
    with pytest.raises(ValueError, match="unknown partition orders\\[7\\]"):
        store.set_startpoint(StartpointKey("orders", 7), Startpoint.oldest())
    with pytest.raises(KeyError, match="unknown virtual task 'nope'"):
        store.set_startpoint(StartpointKey("orders", 0, "nope"), Startpoint.oldest())
    with pytest.raises(ValueError, match="does not read orders\\[0\\]"):
        store.set_startpoint(StartpointKey("orders", 0, "Partition_1-0-2"), Startpoint.oldest())


def test_auth_url_and_clear_errors(tmp_path, job):
    server = RedisServer(tmp_path / "auth", password="s3cret").start()
    try:
        store = MetadataStore(server.url, job)
        store.init_layout(Layout(topics={"orders": 1}))
        assert store.layout().topics == {"orders": 1}
        wrong = MetadataStore(server.url.replace("s3cret", "nope"), job)
        with pytest.raises(StoreUnavailable, match="refused the credentials") as err:
            wrong.layout()
        assert "nope" not in str(err.value)
        assert "before the host as :PASSWORD@" in str(err.value)  # a hint the redaction leaves whole
    finally:
        server.stop()
    with pytest.raises(StoreUnavailable, match="cannot reach Redis .* start redis-server"):
        MetadataStore(f"redis://127.0.0.1:{free_port()}/0", job).layout()


def test_everything_survives_a_redis_restart(tmp_path, job):
    server = RedisServer(tmp_path / "durable").start()
    try:
        store = MetadataStore(server.url, job)
        layout = Layout(topics={"orders": 2}, factor=2)
        store.init_layout(layout)
        cp = store.checkpoints()
        cp.advance("Partition_1-1-2", "orders", 1, 33)
        store.commit(1, {"Partition_1-1-2": cp.progress("Partition_1-1-2")})
        store.migrate(1, layout.with_factor(1))
        store.set_startpoint(StartpointKey("orders", 0), Startpoint.timestamp(1_700_000_000_000))
        before = (store.layout().to_json(), store.checkpoints().to_json(), store.startpoints())

        server.restart()

        after = MetadataStore(server.url, job)
        assert (after.layout().to_json(), after.checkpoints().to_json(), after.startpoints()) == before
        assert after.checkpoints(1).position("Partition_1-1-2", "orders", 1) == 33
    finally:
        server.stop()


def test_rediss_url_with_auth(tmp_path, job):
    server = RedisServer(tmp_path / "tls", password="s3cret", tls=True).start()
    try:
        assert server.url.startswith("rediss://")
        store = MetadataStore(server.url, job)
        layout = Layout(topics={"orders": 2}, factor=2)
        store.init_layout(layout)
        assert store.layout() == layout
        plain = MetadataStore(server.url.replace("rediss://", "redis://").split("?")[0], job)
        with pytest.raises(StoreUnavailable):
            plain.layout()
    finally:
        server.stop()


def test_a_store_with_an_outage_limit_rides_through_a_redis_restart(tmp_path, job):
    """The pipeline's store: a call made while Redis is down waits for it, then succeeds."""
    server = RedisServer(tmp_path / "outage").start()
    try:
        waits: list[float] = []

        def sleep(seconds: float) -> None:
            waits.append(seconds)
            time.sleep(seconds)

        store = MetadataStore(server.url, job, outage_s=30, sleep=sleep)
        store.init_layout(Layout(topics={"orders": 2}, factor=2))
        server.stop()
        restart = threading.Timer(1.5, server.start)
        restart.start()
        assert store.current_generation() == 1
        assert waits, "the call should have been retried while Redis was down"
        restart.join()
    finally:
        server.stop()


def test_past_the_outage_limit_a_call_fails_with_one_line_naming_the_limit(job):
    slept: list[float] = []
    clock = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    store = MetadataStore(f"redis://:pw@127.0.0.1:{free_port()}/0", job, outage_s=5,
                          sleep=sleep, monotonic=lambda: clock[0])
    with pytest.raises(StoreUnavailable, match=r"unreachable for 5s, past the 5s outage limit") as err:
        store.layout()
    assert "pw" not in str(err.value) and "\n" not in str(err.value)
    assert slept[:4] == [0.1, 0.2, 0.4, 0.8] and max(slept) <= 2.0, "capped exponential backoff"
    assert sum(slept) == pytest.approx(5.0)


def test_wrong_credentials_are_not_retried_through_the_outage_limit(tmp_path, job):
    server = RedisServer(tmp_path / "auth2", password="s3cret").start()
    try:
        waits: list[float] = []
        wrong = MetadataStore(server.url.replace("s3cret", "nope"), job, outage_s=600,
                              sleep=waits.append)
        with pytest.raises(StoreUnavailable, match="refused the credentials"):
            wrong.layout()
        assert waits == [], "refused credentials fail at once, no retry"
    finally:
        server.stop()


@pytest.mark.parametrize("key, bad", [
    ("layout:current", lambda r, k: r.hset(k, "a", "1")),
    ("startpoints", lambda r, k: r.set(k, "x")),
    ("checkpoints:1", lambda r, k: (r.delete(k), r.rpush(k, "x"))),
])
def test_a_key_of_the_wrong_type_is_named_with_its_fix(store, key, bad):
    store.init_layout(Layout(topics={"orders": 2}, factor=2))
    full = store.keys.key(*key.split(":"))
    if key == "layout:current":
        store.redis.delete(full)
    bad(store.redis, full)
    with pytest.raises(KeyProblem) as err:
        store.checkpoints() if key != "startpoints" else store.startpoints()
    assert full in str(err.value) and "not a " in str(err.value)


@pytest.mark.parametrize("key, value", [
    ("layout:current", "١"),  # a non-ASCII digit int() would take
    ("layout:current", "abc"),
    ("layout:1", "{not json"),
    ("batch:1", "-3"),
])
def test_unreadable_content_is_named_with_its_fix(store, key, value):
    store.init_layout(Layout(topics={"orders": 2}, factor=2))
    full = store.keys.key(*key.split(":"))
    store.redis.set(full, value)
    with pytest.raises(KeyProblem, match="cannot read") as err:
        store.layout() if key != "batch:1" else store.committed_batch(1)
    assert full in str(err.value)


def test_the_sink_marks_round_trip_and_a_bad_sink_key_is_named_with_its_fix(store):
    """The Kafka sink's marks: None until written for that topic, replaced whole (a job has one
    sink), and a key of the wrong type or content a `KeyProblem` naming the key and the fix."""
    assert store.sink_marks("enriched") is None
    store.set_sink_marks("enriched", {0: 5, 1: 7})
    assert store.sink_marks("enriched") == {0: 5, 1: 7}
    store.set_sink_marks("other", {})
    assert store.sink_marks("other") == {} and store.sink_marks("enriched") is None
    store.redis.delete(store.keys.sink)
    store.redis.set(store.keys.sink, "oops")
    with pytest.raises(KeyProblem, match="holds a string, not a hash: delete it"):
        store.sink_marks("enriched")
    store.redis.delete(store.keys.sink)
    store.redis.hset(store.keys.sink, mapping={"enriched:known": 1, "enriched:0": "x"})
    with pytest.raises(KeyProblem, match="cannot read"):
        store.sink_marks("enriched")
