"""Layout: names, groupers, factor validation, expansion rules and JSON formats."""

from __future__ import annotations

import json

import pytest

from autosizer.elasticity import Layout


def names(layout: Layout) -> list[str]:
    return [t.name for t in layout.virtual_tasks()]


def test_defaults():
    layout = Layout(topics={"orders": 4, "clicks": 4}, factor=2, grouper="partition")
    assert layout.generation == 1
    assert layout.initial_partitions == {"orders": 4, "clicks": 4}
    assert len(layout.virtual_tasks()) == 8


@pytest.mark.parametrize("factor", [0, 3, 6, 2048, -2, 1.0, "2", True])
def test_factor_must_be_a_power_of_two_up_to_1024(factor):
    with pytest.raises(ValueError, match=r"power of two from 1 to 1024 \(1, 2, 4, .* 1024\)"):
        Layout(topics={"orders": 1}, factor=factor)


def test_partition_grouper_reads_one_partition_number_of_every_topic():
    layout = Layout(topics={"orders": 2, "clicks": 3}, factor=2)
    assert names(layout) == [
        "Partition_0-0-2", "Partition_0-1-2", "Partition_1-0-2", "Partition_1-1-2",
        "Partition_2-0-2", "Partition_2-1-2",
    ]
    task = layout.task("Partition_1-1-2")
    assert (task.bucket, task.factor) == (1, 2)
    assert task.partitions == {("orders", 1), ("clicks", 1)}
    assert layout.task("Partition_2-0-2").partitions == {("clicks", 2)}


def test_topic_partition_grouper_and_factor_one_names():
    layout = Layout(topics={"orders": 2}, grouper="topic-partition")
    assert names(layout) == ["orders_0", "orders_1"]
    assert names(Layout(topics={"orders": 1})) == ["Partition_0"]
    assert names(Layout(topics={"orders": 1}, factor=2, grouper="topic-partition")) == [
        "orders_0-0-2", "orders_0-1-2",
    ]


def test_unknown_task_and_grouper_errors_name_the_fix():
    layout = Layout(topics={"orders": 1})
    with pytest.raises(KeyError, match="unknown virtual task 'x'.*autosizer layout show"):
        layout.task("x")
    with pytest.raises(ValueError, match="unknown grouper 'zz' for a kafka layout: use one of fixed, partition"):
        Layout(topics={"orders": 1}, grouper="zz")
    with pytest.raises(ValueError, match="use one of fixed, partition, topic-partition$"):
        Layout(topics={"orders": 1}, grouper="lineage")  # shards' lineage is Kinesis's


def test_with_factor_and_with_partitions_return_the_next_generation():
    layout = Layout(topics={"orders": 4}, factor=2)
    assert layout.with_factor(8).generation == 2
    assert layout.with_factor(8).factor == 8
    grown = layout.with_partitions({"orders": 8})
    assert (grown.generation, grown.topics, grown.initial_partitions) == (2, {"orders": 8}, {"orders": 4})
    barrier = grown.barrier("orders", 5)
    assert (barrier.parent, barrier.offset) == (1, None)
    assert grown.resolve_barriers({("orders", 1): 77}).barrier("orders", 5).offset == 77
    with pytest.raises(ValueError, match="power of two"):
        layout.with_factor(12)


def test_fixed_grouper_keeps_keys_with_their_task_after_expansion():
    layout = Layout(topics={"orders": 2}, factor=2, grouper="fixed")
    grown = layout.with_partitions({"orders": 8})
    assert names(grown) == names(layout)
    assert grown.task("Partition_1-0-2").partitions == {("orders", p) for p in (1, 3, 5, 7)}


@pytest.mark.parametrize("grouper", ["fixed", "partition", "topic-partition"])
def test_expansion_must_multiply_and_never_shrink(grouper):
    layout = Layout(topics={"orders": 4}, grouper=grouper)
    with pytest.raises(ValueError, match="must be a multiple of 4"):
        layout.with_partitions({"orders": 6})
    with pytest.raises(ValueError, match="only grow"):
        layout.with_partitions({"orders": 2})
    with pytest.raises(ValueError, match="unknown topic 'nope'"):
        layout.with_partitions({"nope": 8})
    with pytest.raises(ValueError, match="not a multiple of its initial 4"):
        Layout(topics={"orders": 6}, initial_partitions={"orders": 4}, grouper=grouper)


def test_json_round_trip_and_reading_a_layout_written_without_buckets():
    layout = Layout(topics={"orders": 4}, factor=4, grouper="fixed", generation=7)
    layout = layout.with_partitions({"orders": 8}, barriers={("orders", 0): 10})
    assert Layout.from_json(layout.to_json()) == layout
    legacy = Layout.from_json(json.dumps({"topics": {"orders": 3}}))
    assert (legacy.factor, legacy.generation, legacy.grouper) == (1, 1, "partition")
    assert names(legacy) == ["Partition_0", "Partition_1", "Partition_2"]
    with pytest.raises(ValueError, match="newer than this autosizer reads"):
        Layout.from_json(json.dumps({"format": 99, "topics": {"orders": 1}}))
    with pytest.raises(ValueError, match="not valid JSON"):
        Layout.from_json("{")
