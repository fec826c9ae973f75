"""A slot: accept per virtual task, one thread per task, offset order, progress for every task."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from autosizer.elasticity import Checkpoints, Layout, key_bucket
from autosizer.pipeline.kafka_source import ARROW_SCHEMA
from autosizer.pipeline.slots import CHUNK_ROWS, WallDeadline, normalize_outputs, run_slot


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


def test_threads_as_many_as_virtual_tasks_and_every_key_in_offset_order():
    layout = Layout(topics={"orders": 1}, factor=4)
    cp = Checkpoints.initial(layout)
    keys = keys_in_buckets(4, 3)
    rows = [(keys[o % 4][o // 4 % 3], b"v%d" % o, "orders", 0, o) for o in range(40)]
    barrier = threading.Barrier(4, timeout=30)  # releases only if four records run at once
    seen: dict[bytes, list[int]] = {}
    threads: set[str] = set()
    lock = threading.Lock()

    def process(record):
        if record.offset < 4:
            barrier.wait()
        with lock:
            seen.setdefault(record.key, []).append(record.offset)
            threads.add(threading.current_thread().name)
        return record.value

    result = run_slot(records_table(rows), cp, process)
    assert len(threads) == 4
    for offsets in seen.values():
        assert offsets == sorted(offsets)
    assert sorted(v for _, v in result.outputs) == sorted(b"v%d" % o for o in range(40))
    assert {(p.task, p.next_offset, p.records) for p in result.progress} == {
        (f"Partition_0-{b}-4", 40, 10) for b in range(4)
    }
    assert all(not p.marks for p in result.progress)


def keys_in_lanes(factor: int, bucket: int, lanes: int) -> list[bytes]:
    """One key in each of `lanes` different lanes of one bucket."""
    from autosizer.elasticity.lanes import lane_modulus

    found: dict[int, bytes] = {}
    i = 0
    while len(found) < lanes:
        key = f"key-{i}".encode()
        if key_bucket(key, 0, factor) == bucket:
            found.setdefault(key_bucket(key, 0, lane_modulus(factor)), key)
        i += 1
    return list(found.values())


def test_the_keys_of_one_busy_bucket_run_on_every_thread():
    """Two virtual tasks, every key in one of them: the idle task's thread takes the busy task's
    lanes (the barrier needs two records of bucket 0 at once), each key still in order."""
    layout = Layout(topics={"orders": 1}, factor=2)
    keys = keys_in_lanes(2, 0, 4)
    rows = [(keys[o % 4], b"v%d" % o, "orders", 0, o) for o in range(40)]
    barrier = threading.Barrier(2, timeout=30)
    seen: dict[bytes, list[int]] = {}
    lock = threading.Lock()

    def process(record):
        if record.offset < 2:
            barrier.wait()
        with lock:
            seen.setdefault(record.key, []).append(record.offset)

    result = run_slot(records_table(rows), Checkpoints.initial(layout), process)
    assert all(offsets == sorted(offsets) for offsets in seen.values())
    assert sum(map(len, seen.values())) == 40
    by_task = {p.task: p for p in result.progress}
    assert by_task["Partition_0-0-2"].records == 40 and by_task["Partition_0-0-2"].next_offset == 40


def test_a_slots_work_is_its_busiest_threads_time_on_records_not_its_wall_time():
    """The work the simulator charges a batch is its busiest thread's time on records; the rest
    of the slot's wall time (accepting the records, cutting lanes, starting threads) is a fixed
    cost like the commit. Every record in one task's lanes, shared by two threads: the busiest
    thread worked about half that task's time, and less than the slot's wall."""
    layout = Layout(topics={"orders": 1}, factor=2)
    keys = keys_in_lanes(2, 0, 4)
    rows = [(keys[o % 4], b"v%d" % o, "orders", 0, o) for o in range(40)]
    barrier = threading.Barrier(2, timeout=30)  # both threads take lanes

    def process(record):
        if record.offset < 2:
            barrier.wait()
        time.sleep(0.005)

    result = run_slot(records_table(rows), Checkpoints.initial(layout), process)
    task = max(result.progress, key=lambda p: p.busy_ns)
    assert task.records == 40
    assert task.busy_ns / 2 <= result.busiest_ns < task.busy_ns
    assert result.busiest_ns < result.wall_ns


def test_lanes_cut_by_the_deadline_resume_each_at_its_own_record():
    """A deadline cuts a task's lanes at different offsets: the task reports the lowest as its
    position and the others as marks; advanced into the checkpoint, the next batch skips exactly
    what was done."""
    from autosizer.elasticity.lanes import lane_modulus

    layout = Layout(topics={"orders": 1}, factor=1)
    keys = keys_in_lanes(1, 0, 3)
    rows = [(keys[o % 3], b"%d" % o, "orders", 0, o) for o in range(30)]
    cp = Checkpoints.initial(layout)
    done: list[int] = []
    first = run_slot(records_table(rows), cp, lambda r: done.append(r.offset), RecordBudget({}, default=7))
    (progress,) = first.progress
    assert progress.records == 7 and progress.pending == 23
    assert progress.modulus == lane_modulus(1) and progress.marks
    lanes = {key_bucket(k, 0, progress.modulus): k for k in keys}
    for residue, mark in progress.marks.items():  # a mark is its lane's first record not done
        undone = [o for o in range(30) if rows[o][0] == lanes.get(residue) and o not in done]
        assert mark == min(undone, default=30)  # a lane without records: the read end
    assert progress.next_offset == min(o for o in range(30) if o not in done)
    cp.advance(progress.task, "orders", 0, progress.next_offset, progress.marks, progress.modulus)
    run_slot(records_table(rows), cp, lambda r: done.append(r.offset))
    assert sorted(done) == list(range(30))  # every record once
    for key in keys:
        mine = [o for o in done if rows[o][0] == key]
        assert mine == sorted(mine)


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


class RecordBudget:
    """A deadline counted in records per task: deterministic, for tests."""

    def __init__(self, budgets: dict[str, int], default: int = 10**9):
        self.budgets, self.default = budgets, default

    def expired(self, task: str, done: int) -> bool:
        return done >= self.budgets.get(task, self.default)


def test_a_task_cut_by_the_deadline_resumes_at_its_first_unprocessed_record():
    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.initial(layout)
    keys = keys_in_buckets(2, 1)
    heavy, light = "Partition_0-0-2", "Partition_0-1-2"
    rows = [(keys[0][0] if o % 4 else keys[1][0], b"x", "orders", 0, o) for o in range(20)]
    result = run_slot(records_table(rows), cp, lambda r: r.value, RecordBudget({heavy: 6}))
    by_task = {p.task: p for p in result.progress}
    done_heavy = [o for o in range(20) if o % 4][:6]
    assert by_task[heavy].records == 6 and by_task[heavy].pending == 15 - 6
    assert by_task[heavy].next_offset == [o for o in range(20) if o % 4][6]
    assert by_task[light].records == 5 and by_task[light].pending == 0
    assert by_task[light].next_offset == 20  # the light task finished: it is ahead of its sibling
    assert (by_task[heavy].read, by_task[light].read) == (20, 20)  # each reader saw the partition's records
    assert len(result.outputs) == len(done_heavy) + 5 == result.records


def test_kinesis_sequence_numbers_are_ordered_as_numbers_and_cut_past_64_bits():
    """Decimal text of different lengths, out of order: processed in numeric order, and a task
    cut at its deadline resumes at its first unprocessed sequence number."""
    from autosizer.pipeline.kinesis_source import ARROW_SCHEMA as KINESIS_SCHEMA

    layout = Layout(topics={"clicks": 1}, factor=2)
    keys = keys_in_buckets(2, 1)
    heavy = "Partition_0-0-2"
    numbers = [9 * 10**18 + i * 10**20 for i in range(12)]  # from below 2^63 to far past it
    rows = [(keys[0][0], b"%d" % i, "clicks", 0, str(n)) for i, n in enumerate(numbers)][::-1]
    table = pa.Table.from_pylist(
        [dict(zip(("key", "value", "topic", "partition", "offset"), r, strict=True)) | {"timestamp": None}
         for r in rows], schema=KINESIS_SCHEMA)
    seen = []
    result = run_slot(table, Checkpoints.initial(layout), lambda r: seen.append(r.offset),
                      RecordBudget({heavy: 7}))
    assert seen == numbers[:7]
    (progress,) = [p for p in result.progress if p.task == heavy]
    assert progress.next_offset == numbers[7] and progress.pending == 5


def test_a_wall_deadline_still_processes_one_record_per_task():
    layout = Layout(topics={"orders": 1}, factor=1)
    rows = [(b"k", b"x", "orders", 0, o) for o in range(5)]
    result = run_slot(records_table(rows), Checkpoints.initial(layout), lambda r: r.value,
                      WallDeadline(0.0))
    (progress,) = result.progress
    assert (progress.records, progress.next_offset, progress.pending) == (1, 1, 4)


def test_a_task_reading_two_partitions_takes_turns_so_neither_starves():
    layout = Layout(topics={"orders": 1, "payments": 1}, factor=1)  # one task reads both
    rows = [(b"k%d" % o, b"x", topic, 0, o) for topic in ("orders", "payments") for o in range(2000)]
    result = run_slot(records_table(rows), Checkpoints.initial(layout), lambda r: None,
                      RecordBudget({}, default=CHUNK_ROWS * 3))
    done = {p.topic: p.records for p in result.progress}
    assert done["orders"] > 0 and done["payments"] > 0
    assert sum(done.values()) == CHUNK_ROWS * 3
    for p in result.progress:
        assert 0 < p.next_offset <= p.records  # every record below the position was done


class SlotBudget:
    """A deadline for the whole slot, counted in records: what a wall deadline is to threads that
    share the slot's lanes, without the clock."""

    def __init__(self, records: int):
        self.records, self.done, self.lock = records, 0, threading.Lock()

    def count(self, _record) -> None:
        time.sleep(0.001)  # a turn then holds about 20 records, so the slot's lanes take turns
        with self.lock:
            self.done += 1

    def expired(self, task: str, done: int) -> bool:
        return self.done >= self.records


@pytest.mark.parametrize("source", ["kafka", "kinesis"])
def test_partitions_far_apart_in_offsets_share_the_slots_threads(source):
    """Two partitions in one slot, one a million offsets past the other (a real topic's
    partitions drift apart; a Kinesis shard's sequence numbers have their own range): cut by one
    deadline, each has done about half of the slot's records. Ordered by offset, the lower one
    took every thread and the other none."""
    from autosizer.pipeline.kinesis_source import ARROW_SCHEMA as KINESIS_SCHEMA

    layout = Layout(topics={"orders": 2}, factor=1)
    start = {0: 10**6, 1: 0} if source == "kafka" else {0: 49_600 * 10**51, 1: 49_590 * 10**51}
    rows = [(b"key-%d" % i, b"x", "orders", p, start[p] + i * (1 if source == "kafka" else 10**20))
            for p in (0, 1) for i in range(400)]
    if source == "kafka":
        table = records_table(rows)
    else:
        table = pa.Table.from_pylist(
            [dict(zip(("key", "value", "topic", "partition"), r[:4], strict=True))
             | {"offset": str(r[4]), "timestamp": None} for r in rows], schema=KINESIS_SCHEMA)
    budget = SlotBudget(200)
    result = run_slot(table, Checkpoints.initial(layout), budget.count, budget)
    done = {p.partition: p.records for p in result.progress}
    assert sum(done.values()) >= 200
    assert 60 <= done[0] <= 140 and 60 <= done[1] <= 140, done


def test_busy_time_measures_the_saturated_rate():
    layout = Layout(topics={"orders": 1}, factor=1)
    rows = [(b"k", b"x", "orders", 0, o) for o in range(20)]
    result = run_slot(records_table(rows), Checkpoints.initial(layout), lambda r: time.sleep(0.005))
    (progress,) = result.progress
    rate = progress.records / (progress.busy_ns / 1e9)
    assert 0 < rate <= 200  # at most one record per 5 ms while it worked


def test_cpu_time_tells_work_on_a_core_from_waiting():
    """A record that spins for 2 ms of its thread's CPU costs at least that much CPU, however
    loaded the machine; one that sleeps 5 ms costs a small share of its wall time."""
    layout = Layout(topics={"orders": 1}, factor=1)
    rows = [(b"k", b"x", "orders", 0, o) for o in range(20)]

    def spin(_record):
        until = time.thread_time_ns() + 2_000_000
        while time.thread_time_ns() < until:
            pass

    (spun,) = run_slot(records_table(rows), Checkpoints.initial(layout), spin).progress
    assert 20 * 2_000_000 <= spun.cpu_ns <= spun.busy_ns
    (slept,) = run_slot(records_table(rows), Checkpoints.initial(layout), lambda r: time.sleep(0.005)).progress
    assert 0 < slept.cpu_ns < 0.5 * slept.busy_ns


def test_a_stop_request_ends_the_batch_before_its_deadline():
    now = [0.0]
    asked = []
    deadline = WallDeadline(3.0, clock=lambda: now[0], stop=lambda: asked.append(now[0]) or now[0] >= 1.0,
                            check_every_s=0.2)
    assert not deadline.expired("t", 1)
    now[0] = 0.5
    assert not deadline.expired("t", 1)  # asked, and no drain yet
    now[0] = 1.1
    assert deadline.expired("t", 1)  # the drain was seen: stop now, not at 3 s
    assert not deadline.expired("t", 0)  # still one record per task
    assert asked == [0.5, 1.1]


def test_every_reader_reports_the_partitions_busiest_thread_at_every_factor():
    from collections import Counter

    from autosizer.elasticity import FACTORS
    from autosizer.elasticity.lanes import lane_modulus

    layout = Layout(topics={"orders": 1}, factor=2)
    keys = [f"customer-{i % 7}".encode() for i in range(70)] + [b"hot"] * 30  # 7 keys, one hot
    rows = [(k, b"x", "orders", 0, o) for o, k in enumerate(keys)]
    result = run_slot(records_table(rows), Checkpoints.initial(layout), lambda r: None)
    expected = tuple(max(100 / f, *Counter(key_bucket(k, 0, lane_modulus(f)) for k in keys).values())
                     for f in FACTORS)
    assert {p.hottest for p in result.progress} == {expected}
    assert expected[0] == 100 and expected[1] == 50  # F=1: everything; F=2: an even half
    assert expected[-1] == 30  # F=1024: the hot key alone on one thread
    # 100 records are too few to measure the shares alone: the readers also carry the records per
    # residue of h mod 1024, which the driver sums over batches (Admission)
    residues = {p.residues for p in result.progress}
    assert len(residues) == 1 and sum(n for _, n in residues.pop()) == 100
    many = [(f"k{o % 50}".encode(), b"x", "orders", 0, o) for o in range(300)]
    assert all(p.residues == () for p in run_slot(records_table(many), Checkpoints.initial(layout),
                                                       lambda r: None).progress)


def test_the_function_receives_each_records_own_fields_and_timestamp():
    """Rows become Python objects column by column (a zoned timestamp as epoch + microseconds,
    not pyarrow's slower conversion): every field must equal what pyarrow itself gives."""
    from datetime import UTC, datetime, timedelta

    layout = Layout(topics={"orders": 1}, factor=2)
    cp = Checkpoints.initial(layout)
    base = datetime(2026, 11, 24, 18, 0, tzinfo=UTC)
    table = records_table((b"k%d" % (o % 7), b"v%d" % o, "orders", 0, o) for o in range(600))
    stamps = pa.array([base + timedelta(milliseconds=37 * o) for o in range(600)], pa.timestamp("us", tz="UTC"))
    table = table.set_column(5, "timestamp", stamps)
    got: dict[int, tuple] = {}
    lock = threading.Lock()

    def process(record):
        with lock:
            got[record.offset] = (record.key, record.value, record.topic, record.partition, record.timestamp)

    run_slot(table, cp, process)
    expected = {r["offset"]: (r["key"], r["value"], r["topic"], r["partition"], r["timestamp"])
                for r in table.to_pylist()}
    assert got == expected
    assert all(isinstance(v[4], datetime) and v[4].tzinfo is not None for v in got.values())


def test_every_output_names_its_record_its_key_hash_and_its_place_among_the_records_outputs():
    """What the Kafka sink reads back to leave out what a dead attempt wrote: a record with no
    output has no source, one with two has indexes 0 and 1, and the key hash is the one that
    places the record in its virtual task."""
    from autosizer.elasticity import key_hashes

    layout = Layout(topics={"orders": 1}, factor=2)
    rows = [(b"key-%d" % (o % 5), b"%d" % o, "orders", 0, o) for o in range(30)]
    result = run_slot(records_table(rows), Checkpoints.initial(layout),
                      lambda r: [r.value] * (int(r.value) % 3))  # 0, 1 or 2 outputs a record
    assert len(result.sources) == len(result.outputs) == sum(o % 3 for o in range(30))
    hashes = key_hashes(pa.array([r[0] for r in rows], pa.binary()), list(range(30)))
    for (_, value), (topic, partition, offset, key_hash, index) in zip(result.outputs, result.sources, strict=True):
        assert (topic, partition, value) == ("orders", 0, b"%d" % offset)
        assert key_hash == int(hashes[offset]) and index < offset % 3
    assert {(s[2], s[4]) for s in result.sources} == {(o, i) for o in range(30) for i in range(o % 3)}
