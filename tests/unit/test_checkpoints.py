"""Checkpoints by example: the README's worked example, and each rule on its own."""

from __future__ import annotations

import numpy as np
import pytest

from autosizer.elasticity import Checkpoints, Layout, Progress, key_hash


def hash_in_bucket(residue: int, modulus: int) -> int:
    """Some key hash with h mod modulus == residue."""
    return residue + modulus * 12345


def test_worked_example_one_partition_2_to_4_to_2():
    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 100})
    assert cp.start_offsets() == {("orders", 0): 100}
    cp.advance("Partition_0-0-2", "orders", 0, 130)
    cp.advance("Partition_0-1-2", "orders", 0, 120)
    assert cp.start_offsets() == {("orders", 0): 120}

    cp = cp.migrate(layout.with_factor(4))  # split: each child keeps its parent's position
    assert {t.name: cp.position(t.name, "orders", 0) for t in cp.layout.virtual_tasks()} == {
        "Partition_0-0-4": 130, "Partition_0-1-4": 120, "Partition_0-2-4": 130, "Partition_0-3-4": 120,
    }
    cp.advance("Partition_0-0-4", "orders", 0, 150)
    cp.advance("Partition_0-1-4", "orders", 0, 125)
    cp.advance("Partition_0-2-4", "orders", 0, 140)
    cp.advance("Partition_0-3-4", "orders", 0, 160)

    cp = cp.migrate(cp.layout.with_factor(2))  # merge: min, plus a finer mark, no re-processing
    even, odd = cp.progress("Partition_0-0-2")[("orders", 0)], cp.progress("Partition_0-1-2")[("orders", 0)]
    assert even == Progress(140, 4, {0: 150})
    assert odd == Progress(125, 4, {3: 160})
    assert cp.start_offsets() == {("orders", 0): 125}
    # Keys with h mod 4 == 3 were done up to 160 by their old task: skipped until then.
    assert not cp.accepts("Partition_0-1-2", "orders", 0, 159, hash_in_bucket(3, 4))
    assert cp.accepts("Partition_0-1-2", "orders", 0, 160, hash_in_bucket(3, 4))
    assert cp.accepts("Partition_0-1-2", "orders", 0, 125, hash_in_bucket(1, 4))
    # A batch that ends below the mark keeps it; passing it collapses the mark.
    cp.advance("Partition_0-1-2", "orders", 0, 150)
    assert cp.progress("Partition_0-1-2")[("orders", 0)] == Progress(150, 4, {3: 160})
    cp.advance("Partition_0-1-2", "orders", 0, 170)
    assert cp.progress("Partition_0-1-2")[("orders", 0)] == Progress(170, 2)


def test_initial_checkpoints_start_at_the_source_default():
    cp = Checkpoints.initial(Layout(topics={"orders": 2}, factor=4))
    assert cp.start_offsets() == {("orders", 0): None, ("orders", 1): None}
    assert cp.accepts("Partition_0-1-4", "orders", 0, 0, hash_in_bucket(1, 4))
    cp.resolve_defaults({("orders", 0): 500})
    assert cp.start_offsets() == {("orders", 0): 500, ("orders", 1): None}


def test_first_migration_from_plain_partition_offsets_loses_nothing():
    """Samza shipped a gap here: the new task names found no checkpoint and started over."""
    plain = Layout(topics={"orders": 2})
    cp = Checkpoints.from_partition_offsets(plain, {("orders", 0): 120, ("orders", 1): 80})
    cp = cp.migrate(plain.with_factor(8))
    assert cp.start_offsets() == {("orders", 0): 120, ("orders", 1): 80}
    assert all(cp.position(f"Partition_0-{b}-8", "orders", 0) == 120 for b in range(8))


def test_accepts_checks_partition_and_bucket():
    cp = Checkpoints.initial(Layout(topics={"orders": 2}, factor=2))
    assert not cp.accepts("Partition_0-0-2", "orders", 0, 5, hash_in_bucket(1, 2))
    assert not cp.accepts("Partition_0-0-2", "orders", 1, 5, hash_in_bucket(0, 2))


def test_advance_never_moves_backwards():
    cp = Checkpoints.initial(Layout(topics={"orders": 1}))
    cp.advance("Partition_0", "orders", 0, 50)
    cp.advance("Partition_0", "orders", 0, 20)
    assert cp.position("Partition_0", "orders", 0) == 50
    with pytest.raises(KeyError, match="does not read orders\\[3\\]"):
        cp.advance("Partition_0", "orders", 3, 1)


def test_merging_64_to_1_keeps_all_marks_and_coarsens_equal_siblings():
    layout = Layout(topics={"orders": 1}, factor=64)
    cp = Checkpoints.initial(layout)
    for task in layout.virtual_tasks():
        cp.advance(task.name, "orders", 0, 100 + (task.bucket % 2) * 10)
    merged = cp.migrate(layout.with_factor(1))
    assert merged.progress("Partition_0")[("orders", 0)] == Progress(100, 2, {1: 110})
    back = merged.migrate(merged.layout.with_factor(4))
    assert [back.position(f"Partition_0-{b}-4", "orders", 0) for b in range(4)] == [100, 110, 100, 110]


def test_accept_mask_matches_accepts():
    layout = Layout(topics={"orders": 1}, factor=8)
    cp = Checkpoints.initial(layout)
    for task in layout.virtual_tasks():
        cp.advance(task.name, "orders", 0, 10 * task.bucket)
    cp = cp.migrate(layout.with_factor(2))
    rng = np.random.default_rng(1)
    offsets = rng.integers(0, 100, 2000)
    hashes = np.array([key_hash(bytes([i % 251, i // 251]), 0) for i in range(2000)], dtype=np.uint64)
    for task in cp.layout.virtual_tasks():
        mask = cp.accept_mask(task.name, "orders", 0, offsets, hashes)
        expected = [cp.accepts(task.name, "orders", 0, int(o), int(h)) for o, h in zip(offsets, hashes, strict=True)]
        assert mask.tolist() == expected


def test_accept_mask_takes_positions_past_64_bits_kinesis_sequence_numbers():
    """The same marks, shifted past int64 as Kinesis sequence numbers are: the same answers."""
    base = 49680501210742014425489285105919902383745293300178878466
    layout = Layout(topics={"orders": 1}, factor=8)
    narrow, wide = Checkpoints.initial(layout), Checkpoints.initial(layout)
    for task in layout.virtual_tasks():
        narrow.advance(task.name, "orders", 0, 10 * task.bucket)
        wide.advance(task.name, "orders", 0, base + 10 * task.bucket)
    narrow, wide = narrow.migrate(layout.with_factor(2)), wide.migrate(layout.with_factor(2))
    offsets = np.random.default_rng(2).integers(0, 100, 500)
    hashes = np.array([key_hash(bytes([i % 251, i // 251]), 0) for i in range(500)], dtype=np.uint64)
    shifted = np.array([base + int(o) for o in offsets], dtype=object)
    for task in wide.layout.virtual_tasks():
        expected = narrow.accept_mask(task.name, "orders", 0, offsets, hashes)
        assert wide.accept_mask(task.name, "orders", 0, shifted, hashes).tolist() == expected.tolist()


def test_expansion_children_wait_for_their_parent_barrier():
    layout = Layout(topics={"orders": 2}, factor=2, grouper="fixed")
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 0, ("orders", 1): 0})
    grown = layout.with_partitions({"orders": 4})
    cp = cp.migrate(grown)
    assert cp.blocked_partitions() == {("orders", 2), ("orders", 3)}  # barriers unresolved
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 0, ("orders", 1): 0})
    cp = cp.migrate(grown.resolve_barriers({("orders", 0): 30, ("orders", 1): 0}))
    assert cp.blocked_partitions() == {("orders", 2)}
    assert cp.start_offsets()[("orders", 3)] == 0
    assert not cp.accepts("Partition_0-0-2", "orders", 2, 0, hash_in_bucket(0, 2))
    with pytest.raises(ValueError, match="waiting for its parent's barrier"):
        cp.advance("Partition_0-0-2", "orders", 2, 5)
    cp.advance("Partition_0-0-2", "orders", 0, 30)
    assert cp.blocked_partitions() == {("orders", 2)}  # the other bucket is not done yet
    cp.advance("Partition_0-1-2", "orders", 0, 31)
    assert cp.blocked_partitions() == frozenset()


def test_startpoint_overrides_the_checkpoint_and_drops_marks():
    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 100})
    cp = cp.migrate(layout.with_factor(1))
    cp.apply_startpoint("Partition_0", "orders", 0, 40)
    assert cp.progress("Partition_0")[("orders", 0)] == Progress(40, 1)


def test_json_round_trip_and_generation_check():
    layout = Layout(topics={"orders": 1}, factor=4)
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 9}).migrate(layout.with_factor(2))
    cp.advance("Partition_0-1-2", "orders", 0, 12)
    again = Checkpoints.from_json(cp.to_json(), cp.layout)
    assert again.to_json() == cp.to_json()
    with pytest.raises(ValueError, match="belong to generation 2 but the layout is generation 1"):
        Checkpoints.from_json(cp.to_json(), layout)
    with pytest.raises(ValueError, match="must be a later generation"):
        cp.migrate(layout)


def test_lane_marks_raise_each_residue_and_keep_a_merges_finer_marks():
    """A deadline cut lanes at different offsets: each residue takes the higher of its old and
    new position, at the finer modulus, and the marks collapse once every lane passes them."""
    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.from_partition_offsets(layout, {("orders", 0): 100})
    task = "Partition_0-0-2"
    # lanes mod 8 of bucket 0 are residues 0, 2, 4, 6: lane 2 stopped at 105, lane 6 at 110
    cp.advance(task, "orders", 0, 105, {6: 110, 0: 120, 4: 120}, 8)
    assert cp.progress(task)[("orders", 0)] == Progress(105, 8, {0: 120, 4: 120, 6: 110})
    assert not cp.accepts(task, "orders", 0, 109, hash_in_bucket(6, 8))
    assert cp.accepts(task, "orders", 0, 110, hash_in_bucket(6, 8))
    assert cp.accepts(task, "orders", 0, 105, hash_in_bucket(2, 8))
    # an older, finer mark (a merge's, mod 16) that is ahead survives a coarser lane's lower cut
    merged = Checkpoints(layout, {task: {("orders", 0): Progress(105, 16, {2: 130})}})
    merged.advance(task, "orders", 0, 112, {2: 125}, 8)  # lane 2 mod 8: residues 2 and 10 mod 16
    entry = merged.progress(task)[("orders", 0)]
    assert entry.position(hash_in_bucket(2, 16)) == 130  # its old mark was higher
    assert entry.position(hash_in_bucket(10, 16)) == 125
    assert entry.position(hash_in_bucket(0, 16)) == 112
    merged.advance(task, "orders", 0, 140)  # every lane past every mark: plain again
    assert merged.progress(task)[("orders", 0)] == Progress(140, 2)


def test_lane_marks_need_a_modulus_that_refines_the_factor():
    cp = Checkpoints.initial(Layout(topics={"orders": 1}, factor=4))
    for modulus in (None, 2, 12):
        with pytest.raises(ValueError, match="power-of-two modulus"):
            cp.advance("Partition_0-0-4", "orders", 0, 5, {0: 9}, modulus)
