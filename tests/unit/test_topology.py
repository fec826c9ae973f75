"""Topology: which broker partition counts a layout adopts (SEP-5), and the refusals."""

from __future__ import annotations

import pytest

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.topology import Topology, expansion, problems, requested, waiting_under

LAYOUT = Layout(topics={"orders": 4, "refunds": 2}, factor=4)
ENDS = {("orders", p): 100 + p for p in range(4)} | {("refunds", p): 7 for p in range(2)}


def test_a_multiplied_count_is_adopted_with_each_parents_end_offset_as_its_barrier():
    topology = Topology({"orders": 8, "refunds": 2}, {"orders": 10_000, "refunds": 0}, ENDS, 12_000)
    grown = expansion(LAYOUT, topology, now_ms=15_000)
    assert grown is not None
    assert dict(grown.counts) == {"orders": 8}
    assert dict(grown.barriers) == {("orders", p): 100 + p for p in range(4)}
    assert grown.seen_s == 5.0
    new = grown.layout(LAYOUT)
    assert new.generation == 2 and new.topics["orders"] == 8 and new.factor == 4
    assert [(b.partition, b.parent, b.offset) for b in new.barriers] == [(4 + p, p, 100 + p) for p in range(4)]
    assert problems(LAYOUT, topology) == []
    lines = grown.barrier_lines()
    assert lines[0] == "orders[4] waits until every task of orders[0] is past offset 100"


def test_a_child_is_read_only_after_every_task_of_its_parent_passed_the_barrier():
    topology = Topology({"orders": 8}, {"orders": 0}, ENDS, 0)
    grown = expansion(Layout(topics={"orders": 4}, factor=2), topology, now_ms=0)
    old = Checkpoints.initial(Layout(topics={"orders": 4}, factor=2))
    for task in old.layout.virtual_tasks():
        for topic, partition in task.partitions:
            old.advance(task.name, topic, partition, 50)
    cp = old.migrate(grown.layout(old.layout))
    assert cp.blocked_partitions() == {("orders", c) for c in range(4, 8)}
    first, second = cp.layout.readers("orders", 0)
    cp.advance(first.name, "orders", 0, 100)
    assert ("orders", 4) in cp.blocked_partitions()  # one task of the parent is still behind
    cp.advance(second.name, "orders", 0, 100)
    assert ("orders", 4) not in cp.blocked_partitions()
    assert cp.start_offsets()[("orders", 4)] == 0  # the child is read from its beginning


@pytest.mark.parametrize(("count", "words"), [
    (6, "not a multiple of the layout's 4: expansion refused"),
    (2, "fewer than the layout's 4"),
])
def test_a_count_that_is_not_a_multiple_or_a_shrink_is_refused_with_the_fix(count, words):
    topology = Topology({"orders": count}, {"orders": 0}, ENDS, 0)
    assert expansion(LAYOUT, topology, now_ms=0) is None
    [problem] = problems(LAYOUT, topology)
    assert words in problem and "the job keeps reading 4" in problem and "fix:" in problem


def test_no_adoption_before_every_parents_end_offset_is_known():
    topology = Topology({"orders": 8}, {"orders": 0}, {("orders", 0): 5}, 0)
    assert expansion(LAYOUT, topology, now_ms=0) is None


def test_an_operator_request_is_checked_against_the_layout_and_the_broker():
    topology = Topology({"orders": 8}, {"orders": 0}, ENDS, 0)
    assert dict(requested(LAYOUT, topology, {"orders": 8}, 0).counts) == {"orders": 8}
    with pytest.raises(ValueError, match="multiple of the layout's 4"):
        requested(LAYOUT, topology, {"orders": 6}, 0)
    with pytest.raises(ValueError, match="unknown topic 'payments'"):
        requested(LAYOUT, topology, {"payments": 8}, 0)
    with pytest.raises(ValueError, match="sees 8 on the broker: create the partitions first"):
        requested(LAYOUT, topology, {"orders": 16}, 0)
    with pytest.raises(ValueError, match="has not reported it yet"):
        requested(LAYOUT, None, {"orders": 8}, 0)


def test_the_report_round_trips_and_a_bad_count_is_named():
    topology = Topology({"orders": 8}, {"orders": 3}, ENDS, 9)
    assert Topology.from_json(topology.to_json()) == topology
    with pytest.raises(ValueError, match=r"counts\[orders\] must be a partition count"):
        Topology.from_json('{"counts": {"orders": 0}}')


def test_with_the_fixed_grouper_every_key_keeps_its_virtual_task_across_an_expansion():
    layout = Layout(topics={"orders": 4}, factor=2, grouper="fixed")
    grown = expansion(layout, Topology({"orders": 8}, {"orders": 0}, ENDS, 0), now_ms=0).layout(layout)
    for child in range(4, 8):
        # a key in child c was in parent c % 4 (Kafka's hash mod 8, then mod 4), bucket unchanged
        assert [t.name for t in grown.readers("orders", child)] == \
               [t.name for t in layout.readers("orders", child % 4)]
    moved = Layout(topics={"orders": 4}, factor=2).with_partitions({"orders": 8}, {})
    assert [t.name for t in moved.readers("orders", 5)] == ["Partition_5-0-2", "Partition_5-1-2"]


def test_an_adoptable_expansions_new_partitions_wait_under_their_parents_and_a_refused_ones_do_not():
    layout = Layout(topics={"orders": 4, "clicks": 2})
    assert waiting_under(layout, {"orders": 8, "clicks": 2}) == {("orders", p): ("orders", p - 4) for p in range(4, 8)}
    assert waiting_under(layout, {"orders": 6, "clicks": 2}) == {}  # refused: an operator's to fix
    assert waiting_under(layout, {"orders": 4}) == {}
