"""`pack`: one micro-batch's reads in the query's planned slots, one Spark task each."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autosizer.pipeline.kafka_source import pack


def test_a_read_in_a_planned_slot_stays_in_it():
    assert pack([["t/0", "t/2"], ["t/1"]], {"t/0": "a", "t/1": "b", "t/2": "c"}) == [("a", "c"), ("b",)]


def test_a_reshards_children_join_the_planned_slots_instead_of_running_as_extra_tasks():
    """Shard 0 split into 2 and 3 while the query ran with slots [0] and [1] on two cores: three
    tasks would run the third after a core came free, two waves a batch."""
    packed = pack([["s/0"], ["s/1"]], {"s/1": "one", "s/2": "two", "s/3": "three"})
    assert packed == [("two", "three"), ("one",)]


def test_an_adopted_partition_goes_to_the_slot_with_the_fewest_reads():
    packed = pack([["t/0", "t/1"], ["t/2"]], {"t/0": 0, "t/1": 1, "t/2": 2, "t/3": 3})
    assert packed == [(0, 1), (2, 3)]


def test_without_planned_slots_each_read_is_a_task():
    assert pack([], {"t/0": 0, "t/1": 1}) == [(0,), (1,)]


@given(st.lists(st.lists(st.integers(0, 20), max_size=4), min_size=1, max_size=6),
       st.sets(st.integers(0, 30), max_size=12))
def test_every_read_lands_once_and_no_batch_runs_more_tasks_than_slots_planned(planned, partitions):
    slots = [[f"t/{p}" for p in members] for members in planned]
    reads = {f"t/{p}": p for p in partitions}
    packed = pack(slots, reads)
    assert sorted(r for group in packed for r in group) == sorted(partitions)
    assert len(packed) <= len(slots)
    assert all(packed)
