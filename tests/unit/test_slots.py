"""A slot: accept per virtual task, one thread per task, offset order, progress for every task."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from autosizer.elasticity import Checkpoints, Layout, key_bucket
from autosizer.pipeline.kafka_source import ARROW_SCHEMA
from autosizer.pipeline.slots import normalize_outputs, run_slot


def records_table(rows) -> pa.Table:
    """A table in the source's schema from (key, value, topic, partition, offset) tuples."""
    rows = list(rows)
    return pa.table(
        {
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "topic": pa.array([r[2] for r in rows], pa.string()),
            "partition": pa.array([r[3] for r in rows], pa.int32()),
            "offset": pa.array([r[4] for r in rows], pa.int64()),
            "timestamp": pa.array([None] * len(rows), pa.timestamp("us", tz="UTC")),
        },
        schema=ARROW_SCHEMA,
    )


def keys_in_buckets(factor: int, per_bucket: int) -> dict[int, list[bytes]]:
    found: dict[int, list[bytes]] = {b: [] for b in range(factor)}
    i = 0
    while any(len(v) < per_bucket for v in found.values()):
        key = f"key-{i}".encode()
        bucket = key_bucket(key, 0, factor)
        if len(found[bucket]) < per_bucket:
            found[bucket].append(key)
        i += 1
    return found


def test_each_virtual_task_runs_on_its_own_thread_in_offset_order():
    layout = Layout(topics={"orders": 1}, factor=4)
    cp = Checkpoints.initial(layout)
    keys = keys_in_buckets(4, 3)
    rows = [(keys[o % 4][o // 4 % 3], b"v%d" % o, "orders", 0, o) for o in range(40)]
    barrier = threading.Barrier(4, timeout=30)  # releases only if all four tasks run at once
    seen: dict[str, list[int]] = {}
    lock = threading.Lock()

    def process(record):
        if record.offset < 4:
            barrier.wait()
        with lock:
            seen.setdefault(threading.current_thread().name, []).append(record.offset)
        return record.value

    result = run_slot(records_table(rows), cp, process)
    assert len(seen) == 4
    for offsets in seen.values():
        assert offsets == sorted(offsets)
    assert sorted(v for _, v in result.outputs) == sorted(b"v%d" % o for o in range(40))
    assert {(p.task, p.next_offset, p.records) for p in result.progress} == {
        (f"Partition_0-{b}-4", 40, 10) for b in range(4)
    }


def test_skips_what_is_done_and_advances_tasks_without_records():
    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.initial(layout)
    keys = keys_in_buckets(2, 1)
    cp.advance("Partition_0-0-2", "orders", 0, 5)
    rows = [(keys[0][0], b"x", "orders", 0, o) for o in range(10)]  # bucket 0 only
    result = run_slot(records_table(rows), cp, lambda r: None)
    by_task = {p.task: p for p in result.progress}
    assert by_task["Partition_0-0-2"].records == 5  # offsets 0..4 were already done
    assert by_task["Partition_0-1-2"].records == 0
    assert by_task["Partition_0-1-2"].next_offset == 10  # no records in its bucket, still advances


def test_partitions_outside_the_layout_or_blocked_are_not_touched():
    layout = Layout(topics={"orders": 2}, factor=1, grouper="fixed")
    grown = layout.with_partitions({"orders": 4})  # barriers unresolved: 2 and 3 blocked
    cp = Checkpoints.initial(layout).migrate(grown)
    rows = [(b"k", b"x", "orders", p, 0) for p in (0, 2, 5)]
    result = run_slot(records_table(rows), cp, lambda r: r.value)
    assert {(p.topic, p.partition) for p in result.progress} == {("orders", 0)}
    assert len(result.outputs) == 1


def test_outputs_normalize():
    assert normalize_outputs(None) == []
    assert normalize_outputs(b"v") == [(None, b"v")]
    assert normalize_outputs("v") == [(None, b"v")]
    assert normalize_outputs((b"k", b"v")) == [(b"k", b"v")]
    assert normalize_outputs([(b"k", "v"), b"w"]) == [(b"k", b"v"), (None, b"w")]
    with pytest.raises(TypeError, match="encode them first"):
        normalize_outputs([1])
