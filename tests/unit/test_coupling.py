"""Coupling: an expansion's new partition read behind its lineage, step by step (SEP-5 without the
wait). The property over every interleaving of producers, probes and batches is in
`test_exactly_once_property.py`; these are the rules one at a time."""

from __future__ import annotations

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.coupling import Coupling, couplings_from_json, couplings_to_json
from autosizer.elasticity.topology import Topology, expansion


def test_a_child_is_read_up_to_the_last_step_whose_parent_end_every_parent_task_passed():
    coupling = Coupling(steps=((0, (100,)), (40, (130,)), (75, (170,))))
    assert coupling.limit((None,)) == 0  # a parent task not started: nothing
    assert coupling.limit((99,)) == 0
    assert coupling.limit((100,)) == 0  # the first step's child end: nothing was in the child yet
    assert coupling.limit((150,)) == 40
    assert coupling.limit((10_000,)) == 75  # past every step, no further than the last child end


def test_a_step_counts_once_every_ancestor_passed_its_end_and_only_for_the_lineage_it_was_taken_for():
    coupling = Coupling(steps=((0, (10, 100)), (40, (30, 130))))
    assert coupling.limit((50, 120)) == 0  # the parent is past both steps, the grandparent neither
    assert coupling.limit((50, 130)) == 40
    assert coupling.limit((50, None)) == 0
    assert coupling.limit((50,)) == 0 and coupling.limit(()) == 0  # another layout's lineage
    assert coupling.close((60, 200)).limit((60, 199)) == 40
    assert coupling.close((60, 200)).limit((60, 200)) is None


def test_past_the_last_step_the_child_is_free_and_no_step_is_taken_after_it():
    coupling = Coupling(steps=((40, (130,)),)).close((200,))
    assert coupling.limit((199,)) == 40
    assert coupling.limit((200,)) is None
    assert coupling.step(90, (250,)) == coupling and coupling.close((300,)) == coupling


def test_pruning_keeps_the_step_that_sets_the_limit_and_every_step_not_passed():
    coupling = Coupling(steps=((0, (5, 100)), (40, (9, 130)), (75, (9, 170)), (90, (30, 210))))
    pruned = coupling.pruned((20, 180))
    assert pruned.steps == ((75, (9, 170)), (90, (30, 210)))
    for done in ((None, None), (0, 0), (9, 170), (20, 180), (29, 500), (30, 209), (30, 210), (99, 500)):
        assert pruned.limit(done) == coupling.limit(done)


def test_couplings_round_trip_through_json():
    couplings = {("orders", 4): Coupling(((3, (10,)), (5, (12,)))), ("orders", 5): Coupling((), (77, 9)),
                 ("orders", 9): Coupling(((1, (4, 6)),))}
    assert couplings_from_json(couplings_to_json(couplings)) == couplings


def test_an_adopted_expansion_couples_its_children_until_adopt_after_s_past_the_broker_having_them():
    layout = Layout(topics={"orders": 2}, factor=2)
    topology = Topology({"orders": 4}, {"orders": 10_000}, {("orders", 0): 50, ("orders", 1): 60}, 12_000)
    grown = expansion(layout, topology, now_ms=12_000).coupled(300)
    assert grown.until_ms == 310_000
    new = grown.layout(layout)
    assert [(b.partition, b.parent, b.offset, b.until_ms, b.coupled) for b in new.barriers] == [
        (2, 0, None, 310_000, True), (3, 1, None, 310_000, True)]
    assert Layout.from_json(new.to_json()) == new
    assert grown.barrier_lines()[0].startswith("orders[2] is read behind every task of orders[0] until ")


def test_a_childs_lineage_runs_through_every_generation_up_to_a_partition_the_topic_started_with():
    layout = Layout(topics={"orders": 2}, factor=1)
    grown = layout.with_partitions({"orders": 4}, until_ms=1).with_partitions({"orders": 8}, until_ms=2)
    assert grown.lineage("orders", 6) == (2, 0)
    assert grown.lineage("orders", 5) == (1,)  # 5 % 4 = 1, a partition the topic started with
    assert grown.lineage("orders", 3) == (1,)
    assert grown.lineage("orders", 0) == ()


def test_checkpoints_hold_a_coupled_child_until_its_parent_passed_a_step_then_read_it_to_that_step():
    old = Checkpoints.initial(Layout(topics={"orders": 2}, factor=2))
    for task in old.layout.virtual_tasks():
        for topic, partition in task.partitions:
            old.advance(task.name, topic, partition, 50)
    cp = old.migrate(old.layout.with_partitions({"orders": 4}, until_ms=1))
    assert cp.blocked_partitions() == {("orders", 2), ("orders", 3)}  # no steps yet
    cp.couple({("orders", 2): Coupling(((20, (60,)),)), ("orders", 3): Coupling(((30, (50,)),))})
    assert cp.blocked_partitions() == {("orders", 2)}  # its parent is at 50, the step at 60
    assert cp.read_limits() == {("orders", 3): 30}
    first, second = cp.layout.readers("orders", 0)
    cp.advance(first.name, "orders", 0, 70)
    assert ("orders", 2) in cp.blocked_partitions()  # one task of the parent is still behind
    cp.advance(second.name, "orders", 0, 65)
    assert cp.blocked_partitions() == frozenset() and cp.read_limits() == {("orders", 2): 20, ("orders", 3): 30}
    cp.couple({("orders", 2): Coupling(((20, (60,)),), final=(65,)),
               ("orders", 3): Coupling(((30, (50,)),), final=(90,))})
    assert cp.read_limits() == {("orders", 3): 30}  # orders[2] is free: its parent passed the last step


def test_a_grandchild_waits_for_its_grandparent_however_far_its_parent_is():
    """A producer still writing by 2 partitions after 2 -> 4 -> 8 sends key k to orders[0]; once it
    refreshes it sends k to orders[6] (6 % 4 = 2, 2 % 2 = 0). orders[2] may be all read while
    orders[0] still holds k's older record: orders[6] waits for orders[0] too."""
    old = Checkpoints.initial(Layout(topics={"orders": 2}, factor=1))
    layout = old.layout.with_partitions({"orders": 4}, until_ms=1).with_partitions({"orders": 8}, until_ms=2)
    cp = old.migrate(layout)
    for task in cp.layout.virtual_tasks():
        for topic, partition in task.partitions:
            if cp.layout.barrier(topic, partition) is None:
                cp.advance(task.name, topic, partition, 6)  # orders[0] and [1]: k's record at 6 unread
    cp.couple({("orders", 2): Coupling(((4, (5,)),), final=(7,)),
               ("orders", 6): Coupling(((1, (4, 7)),), final=(4, 7))})
    assert cp.read_limits()[("orders", 2)] == 4
    (reader,) = cp.layout.readers("orders", 2)
    cp.advance(reader.name, "orders", 2, 4)  # orders[2] all read
    assert ("orders", 6) in cp.blocked_partitions()  # orders[0] is at 6, the step wants 7
    (first,) = cp.layout.readers("orders", 0)
    cp.advance(first.name, "orders", 0, 7)
    assert ("orders", 6) not in cp.blocked_partitions() and ("orders", 6) not in cp.read_limits()
