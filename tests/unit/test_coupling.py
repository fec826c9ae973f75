"""Coupling: an expansion's new partition read behind its parent, step by step (SEP-5 without the
wait). The property over every interleaving of producers, probes and batches is in
`test_exactly_once_property.py`; these are the rules one at a time."""

from __future__ import annotations

from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.coupling import Coupling, couplings_from_json, couplings_to_json
from autosizer.elasticity.topology import Topology, expansion


def test_a_child_is_read_up_to_the_last_step_whose_parent_end_every_parent_task_passed():
    coupling = Coupling(steps=((0, 100), (40, 130), (75, 170)))
    assert coupling.limit(None) == 0  # a parent task not started: nothing
    assert coupling.limit(99) == 0
    assert coupling.limit(100) == 0  # the first step's child end: nothing was in the child yet
    assert coupling.limit(150) == 40
    assert coupling.limit(10_000) == 75  # past every step, no further than the last child end


def test_past_the_last_step_the_child_is_free_and_no_step_is_taken_after_it():
    coupling = Coupling(steps=((40, 130),)).close(200)
    assert coupling.limit(199) == 40
    assert coupling.limit(200) is None
    assert coupling.step(90, 250) == coupling and coupling.close(300) == coupling


def test_pruning_keeps_the_step_that_sets_the_limit_and_every_step_not_passed():
    coupling = Coupling(steps=((0, 100), (40, 130), (75, 170), (90, 210)))
    pruned = coupling.pruned(180)
    assert pruned.steps == ((75, 170), (90, 210))
    for done in (None, 0, 170, 180, 209, 210, 500):
        assert pruned.limit(done) == coupling.limit(done)


def test_couplings_round_trip_through_json():
    couplings = {("orders", 4): Coupling(((3, 10), (5, 12))), ("orders", 5): Coupling((), 77)}
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


def test_checkpoints_hold_a_coupled_child_until_its_parent_passed_a_step_then_read_it_to_that_step():
    old = Checkpoints.initial(Layout(topics={"orders": 2}, factor=2))
    for task in old.layout.virtual_tasks():
        for topic, partition in task.partitions:
            old.advance(task.name, topic, partition, 50)
    cp = old.migrate(old.layout.with_partitions({"orders": 4}, until_ms=1))
    assert cp.blocked_partitions() == {("orders", 2), ("orders", 3)}  # no steps yet
    cp.couple({("orders", 2): Coupling(((20, 60),)), ("orders", 3): Coupling(((30, 50),))})
    assert cp.blocked_partitions() == {("orders", 2)}  # its parent is at 50, the step at 60
    assert cp.read_limits() == {("orders", 3): 30}
    first, second = cp.layout.readers("orders", 0)
    cp.advance(first.name, "orders", 0, 70)
    assert ("orders", 2) in cp.blocked_partitions()  # one task of the parent is still behind
    cp.advance(second.name, "orders", 0, 65)
    assert cp.blocked_partitions() == frozenset() and cp.read_limits() == {("orders", 2): 20, ("orders", 3): 30}
    cp.couple({("orders", 2): Coupling(((20, 60),), final=65), ("orders", 3): Coupling(((30, 50),), final=90)})
    assert cp.read_limits() == {("orders", 3): 30}  # orders[2] is free: its parent passed the last step
