"""Re-sharding a Kinesis layout: children join once every parent is closed and finished."""

from __future__ import annotations

import pytest

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.shards import Shard, WaitingCounts, apply, reshard, waiting_under

STREAM = "clicks"


def kinesis(count: int = 2, factor: int = 2) -> Layout:
    return Layout(topics={STREAM: count}, factor=factor, source="kinesis")


def test_a_split_waits_for_its_parent_to_be_finished_then_both_children_join():
    layout = kinesis()
    listed = [Shard(0, closed=True), Shard(1), Shard(2, (0,)), Shard(3, (0,))]
    assert reshard(layout, listed, finished=[]) is None  # closed, but records left
    change = reshard(layout, listed, finished=[0])
    assert change.adopted == {2: (0,), 3: (0,)} and change.retired == {0}
    nxt = apply(layout, change)
    assert nxt.generation == 2 and nxt.partitions() == [(STREAM, 1), (STREAM, 2), (STREAM, 3)]
    assert nxt.parents == {(STREAM, 2): (0,), (STREAM, 3): (0,)}
    assert {t.name for t in nxt.virtual_tasks()} == {f"Partition_{p}-{b}-2" for p in (1, 2, 3) for b in (0, 1)}


def test_a_merge_child_waits_for_both_parents():
    layout = apply(kinesis(), reshard(kinesis(), [Shard(0, closed=True), Shard(1), Shard(2, (0,)), Shard(3, (0,))], [0]))
    listed = [Shard(1, closed=True), Shard(2), Shard(3, (0,), closed=True), Shard(4, (3, 1))]
    assert reshard(layout, listed, finished=[1]).adopted == {}  # 1 leaves, 4 still waits for 3
    layout = apply(layout, reshard(layout, listed, finished=[1]))
    assert layout.partitions() == [(STREAM, 2), (STREAM, 3)]
    change = reshard(layout, listed, finished=[3])
    assert change.adopted == {4: (3, 1)} and change.retired == {3}
    assert apply(layout, change).partitions() == [(STREAM, 2), (STREAM, 4)]


def test_an_open_shard_never_leaves_and_an_expired_one_does():
    layout = kinesis()
    assert reshard(layout, [Shard(0), Shard(1)], finished=[0, 1]) is None
    change = reshard(layout, [Shard(1)], finished=[])  # shard 0 past retention
    assert change.retired == {0} and change.adopted == {}


def test_a_child_shard_starts_at_its_first_record_and_a_retired_one_takes_its_progress_along():
    layout = kinesis(factor=2)
    cp = Checkpoints.initial(layout)
    for task in layout.virtual_tasks():
        for tp in task.partitions:
            cp.advance(task.name, *tp, 10**40 + task.bucket)
    nxt = apply(layout, reshard(layout, [Shard(0, closed=True), Shard(1), Shard(2, (0,)), Shard(3, (0,))], [0]))
    moved = cp.migrate(nxt)
    assert moved.start_offsets() == {(STREAM, 1): 10**40, (STREAM, 2): 0, (STREAM, 3): 0}
    assert moved.blocked_partitions() == frozenset()


def test_a_kinesis_layout_round_trips_and_refuses_what_does_not_fit():
    layout = apply(kinesis(), reshard(kinesis(), [Shard(0, closed=True), Shard(1), Shard(2, (0,)), Shard(3, (0,))], [0]))
    again = Layout.from_json(layout.to_json())
    assert again == layout and again.retired == {(STREAM, 0)}
    with pytest.raises(ValueError, match="one stream"):
        Layout(topics={"a": 1, "b": 1}, source="kinesis")
    with pytest.raises(ValueError, match="fixed grouper"):
        Layout(topics={"a": 1}, grouper="fixed", source="kinesis")
    with pytest.raises(ValueError, match="every shard"):
        Layout(topics={"a": 1}, source="kinesis", retired=frozenset({("a", 0)}))
    with pytest.raises(ValueError, match="Kinesis layout"):
        Layout(topics={"a": 2}, retired=frozenset({("a", 0)}))
    with pytest.raises(ValueError, match="re-shards"):
        kinesis().with_partitions({STREAM: 4})
    with pytest.raises(ValueError, match="unknown layout source"):
        Layout(topics={"a": 1}, source="pulsar")


def test_the_lineage_grouper_keeps_every_key_in_its_task_across_a_split_and_the_first_parents_across_a_merge():
    from autosizer.elasticity import Checkpoints, key_hash

    layout = Layout(topics={STREAM: 2}, factor=4, grouper="lineage", source="kinesis")
    split = apply(layout, reshard(layout, [Shard(0, closed=True), Shard(1), Shard(2, (0,)), Shard(3, (0,))], [0]))
    merged = apply(split, reshard(split, [Shard(1, closed=True), Shard(2), Shard(3, (0,), closed=True),
                                          Shard(4, (3, 1))], [1, 3]))
    assert {t.name for t in split.virtual_tasks()} == {t.name for t in layout.virtual_tasks()}
    assert {t.name for t in merged.virtual_tasks()} == {f"Shard_0-{b}-4" for b in range(4)}
    assert merged.task("Shard_0-1-4").partitions == {(STREAM, 2), (STREAM, 4)}

    def owner(lay: Layout, shard: int, key: bytes) -> str:
        h = key_hash(key, 0)
        (task,) = [t.name for t in lay.readers(STREAM, shard) if t.owns(STREAM, shard, h)]
        return task

    for key in (b"k%d" % i for i in range(50)):
        before = owner(layout, 0, key)
        assert owner(split, 2, key) == owner(split, 3, key) == before  # a split moves no key's task
        assert owner(merged, 4, key) == before  # the first parent's line keeps its tasks
    cp = Checkpoints.initial(layout)
    for task in layout.virtual_tasks():
        for tp in task.partitions:
            cp.advance(task.name, *tp, 10**30)
    moved = cp.migrate(split)
    assert moved.position("Shard_0-1-4", STREAM, 2) == 0 and moved.position("Shard_1-1-4", STREAM, 1) == 10**30


def test_a_child_not_adopted_yet_counts_under_the_live_shard_whose_line_it_continues():
    layout = kinesis(3)
    # 0 split into 3 and 4, and 4 split again into 5 and 6 before 0 was done; 1 and 2 merged into 7
    listed = [Shard(0, closed=True), Shard(1, closed=True), Shard(2, closed=True), Shard(3, (0,)),
              Shard(4, (0,), closed=True), Shard(5, (4,)), Shard(6, (4,)), Shard(7, (1, 2))]
    assert waiting_under(layout, listed) == {3: 0, 4: 0, 5: 0, 6: 0, 7: 1}
    # once 1 left, the merge's child waits under 2 alone; a shard with no live ancestor (its
    # parents retired: it joins at the next probe) counts nowhere
    later = apply(layout, reshard(layout, listed, finished=[1]))
    assert waiting_under(later, listed) == {3: 0, 4: 0, 5: 0, 6: 0, 7: 2}
    assert waiting_under(kinesis(2), [Shard(0), Shard(1), Shard(9, (8,))]) == {}


def test_a_merge_child_that_moves_to_its_other_parent_adds_only_what_it_takes_in_from_then():
    """A merge's child waits under its lower parent, then under the other once the first is done:
    the other's watermark must not jump by every record the child took in meanwhile."""
    counts = WaitingCounts()
    assert counts.under({4: 1}, {4: 30}) == {1: 30}
    assert counts.under({4: 1}, {4: 50}) == {1: 50}
    assert counts.under({4: 3}, {4: 60}) == {3: 0}  # 1 is done: 4 counts under 3 from here
    assert counts.under({4: 3}, {4: 75}) == {3: 15}
    assert counts.under({}, {}) == {} and counts.lines == {}  # adopted: its own watermark now
