"""Startpoints: kinds, fan-out and precedence, expiry, resolution and deletion rules."""

from __future__ import annotations

import pytest

from autosizer.elasticity import Layout
from autosizer.elasticity.startpoints import Startpoint, StartpointKey, fan_out

HOUR = 3600 * 1000


class Source:
    def offset_for_timestamp(self, topic, partition, epoch_ms):
        return epoch_ms // 1000

    def oldest_offset(self, topic, partition):
        return 3

    def upcoming_offset(self, topic, partition):
        return 900


def test_kinds_resolve_through_the_source_and_pin():
    source = Source()
    assert Startpoint.specific(42).resolve("t", 0, source).resolved_offset == 42
    assert Startpoint.timestamp(5_000).resolve("t", 0, source).resolved_offset == 5
    assert Startpoint.oldest().resolve("t", 0, source).resolved_offset == 3
    pinned = Startpoint.upcoming().resolve("t", 0, source)
    assert pinned.resolved_offset == 900
    assert pinned.resolve("t", 0, None).resolved_offset == 900  # a restart keeps the pinned offset
    assert Startpoint.from_json(pinned.to_json()) == pinned


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Startpoint.specific(-1), "needs an offset >= 0"),
        (lambda: Startpoint("timestamp", None), "needs epoch milliseconds"),
        (lambda: Startpoint("rewind", 1), "unknown startpoint kind 'rewind'"),
        (lambda: Startpoint("oldest", 5), "takes no position"),
    ],
)
def test_invalid_startpoints_are_refused(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_partition_keyed_startpoint_fans_out_to_every_reader():
    layout = Layout(topics={"orders": 2}, factor=4)
    out = fan_out({StartpointKey("orders", 1): Startpoint.specific(7, created_ms=10)}, layout, now_ms=20)
    assert set(out.startpoints) == {StartpointKey("orders", 1, f"Partition_1-{b}-4") for b in range(4)}


def test_newer_wins_and_a_tie_goes_to_the_task_keyed_one():
    layout = Layout(topics={"orders": 1}, factor=2)
    task = "Partition_0-1-2"
    base = {StartpointKey("orders", 0): Startpoint.specific(1, created_ms=100)}
    older = fan_out({**base, StartpointKey("orders", 0, task): Startpoint.specific(2, created_ms=50)}, layout, now_ms=200)
    assert older.startpoints[StartpointKey("orders", 0, task)].position == 1
    tie = fan_out({**base, StartpointKey("orders", 0, task): Startpoint.specific(2, created_ms=100)}, layout, now_ms=200)
    assert tie.startpoints[StartpointKey("orders", 0, task)].position == 2
    assert tie.startpoints[StartpointKey("orders", 0, "Partition_0-0-2")].position == 1


def test_expired_and_unknown_startpoints_are_reported_not_applied():
    layout = Layout(topics={"orders": 1}, factor=2)
    now = 100 * HOUR
    out = fan_out(
        {
            StartpointKey("orders", 0): Startpoint.specific(1, created_ms=now - 13 * HOUR),
            StartpointKey("orders", 9): Startpoint.oldest(created_ms=now),
            StartpointKey("orders", 0, "Partition_0-0-4"): Startpoint.oldest(created_ms=now),
        },
        layout,
        now_ms=now,
    )
    assert out.startpoints == {}
    assert out.expired == [StartpointKey("orders", 0)]
    assert set(out.unknown) == {StartpointKey("orders", 9), StartpointKey("orders", 0, "Partition_0-0-4")}
    assert fan_out({StartpointKey("orders", 0): Startpoint.specific(1, created_ms=now - 13 * HOUR)},
                   layout, now_ms=now, expiry_ms=24 * HOUR).startpoints


def test_a_startpoint_is_passed_only_by_progress_beyond_it():
    sp = Startpoint.specific(10).resolve("t", 0, None)
    assert not sp.passed_by(None)
    assert not sp.passed_by(10)  # an idle partition keeps its startpoint (SAMZA-2749)
    assert sp.passed_by(11)
    assert not Startpoint.upcoming().passed_by(10**9)  # never applied, never deleted
