"""Invariant 2: exactly once and per-key order across any sequence of splits, merges and expansions.

Processing is simulated in pure Python with start_offsets/accepts/advance/migrate, the way the
pipeline uses them: each step reads every readable partition from its start offset to some end,
each virtual task processes a prefix of what it accepts and advances to where it stopped.
"""

from __future__ import annotations

import itertools
import os
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosizer.elasticity import Checkpoints, Layout, key_hash

EXAMPLES = int(os.environ.get("AUTOSIZER_PROPERTY_EXAMPLES", "1200"))
FACTORS = [1, 2, 4, 8, 16, 32, 64]


class Log:
    """An in-memory topic: per partition, a list of (key, global sequence number)."""

    def __init__(self) -> None:
        self.partitions: dict[tuple[str, int], list[tuple[bytes | None, int]]] = defaultdict(list)
        self.seq = 0

    def produce(self, topic: str, partition: int, key: bytes | None) -> None:
        self.partitions[(topic, partition)].append((key, self.seq))
        self.seq += 1


def run_step(cp: Checkpoints, log: Log, processed: list, draw_fraction, *, finish=False) -> None:
    blocked = cp.blocked_partitions()
    starts = cp.start_offsets()
    batch: dict[tuple[str, int], tuple[int, int]] = {}
    for tp, start in starts.items():
        if tp in blocked:
            continue
        begin = 0 if start is None else start
        size = len(log.partitions[tp])
        end = begin + int(round(draw_fraction() * max(0, size - begin)))
        batch[tp] = (begin, end)
    for task in cp.layout.virtual_tasks():
        for tp in sorted(task.partitions):
            if tp not in batch:
                continue
            begin, end = batch[tp]
            stop = begin + int(round(draw_fraction() * (end - begin)))
            for offset in range(begin, stop):
                key, seq = log.partitions[tp][offset]
                if cp.accepts(task.name, tp[0], tp[1], offset, key_hash(key, offset)):
                    processed.append((task.name, tp, offset, key, seq))
            if finish or stop > begin or draw_fraction() < 0.5:
                cp.advance(task.name, tp[0], tp[1], stop)


def check(log: Log, processed: list, *, order_within_partition: bool) -> None:
    seen = [(tp, off) for _, tp, off, _, _ in processed]
    assert len(seen) == len(set(seen)), "a message was processed twice"
    total = sum(len(v) for v in log.partitions.values())
    assert len(seen) == total, f"{total - len(seen)} messages were never processed"
    last: dict[object, int] = {}
    for _, tp, off, key, seq in processed:
        # Null keys are ordered by offset alone; keyed messages by key (within their partition
        # when the producer spread one key over several partitions, as Kafka orders no further).
        ident = (tp, off) if key is None else ((tp, key) if order_within_partition else key)
        assert last.get(ident, -1) < seq, f"key {key!r} processed out of order"
        last[ident] = seq


def drain(cp: Checkpoints, log: Log, processed: list) -> None:
    for _ in range(200):
        run_step(cp, log, processed, lambda: 1.0, finish=True)
        if all(
            s is not None and s >= len(log.partitions[tp]) for tp, s in cp.start_offsets().items()
        ):
            return
    raise AssertionError("processing did not finish")


keys = st.one_of(st.none(), st.binary(min_size=0, max_size=3))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grouper=st.sampled_from(["partition", "topic-partition", "fixed"]),
    first=st.sampled_from(FACTORS),
    ops=st.lists(
        st.tuples(st.sampled_from(FACTORS), st.lists(st.tuples(st.integers(0, 3), keys), max_size=12)),
        min_size=1,
        max_size=6,
    ),
    fractions=st.lists(st.floats(0, 1), min_size=8, max_size=64),
)
def test_rescales_process_every_message_exactly_once_in_key_order(grouper, first, ops, fractions):
    fraction = itertools.cycle(fractions)
    log = Log()
    layout = Layout(topics={"a": 2, "b": 2}, factor=first, grouper=grouper)
    cp = Checkpoints.initial(layout)
    processed: list = []
    for factor, messages in ops:
        for partition, key in messages:
            log.produce("a" if partition < 2 else "b", partition % 2, key)
        run_step(cp, log, processed, lambda: next(fraction))
        cp = cp.migrate(cp.layout.with_factor(factor))
        run_step(cp, log, processed, lambda: next(fraction))
    drain(cp, log, processed)
    check(log, processed, order_within_partition=True)


def murmur_like_partition(key: bytes | None, count: int, seq: int) -> int:
    # Any hash works as long as partition = hash % count, the property SEP-5 relies on.
    return (key_hash(key, seq) >> 7) % count if key is not None else seq % count


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grouper=st.sampled_from(["fixed", "partition", "topic-partition"]),
    first=st.sampled_from(FACTORS),
    ops=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(FACTORS), st.just("expand")),
            st.lists(keys, max_size=12),
        ),
        min_size=1,
        max_size=6,
    ),
    fractions=st.lists(st.floats(0, 1), min_size=8, max_size=64),
)
def test_expansions_keep_exactly_once_and_key_order(grouper, first, ops, fractions):
    fraction = itertools.cycle(fractions)
    log = Log()
    layout = Layout(topics={"a": 2}, factor=first, grouper=grouper)
    cp = Checkpoints.initial(layout)
    processed: list = []
    for op, messages in ops:
        count = cp.layout.topics["a"]
        for key in messages:
            log.produce("a", murmur_like_partition(key, count, log.seq), key)
        run_step(cp, log, processed, lambda: next(fraction))
        if op == "expand" and count < 16:
            ends = {("a", p): len(log.partitions[("a", p)]) for p in range(count)}
            new_layout = cp.layout.with_partitions({"a": count * 2}, barriers=ends)
        else:
            new_layout = cp.layout.with_factor(op if op != "expand" else cp.layout.factor)
        cp = cp.migrate(new_layout)
        run_step(cp, log, processed, lambda: next(fraction))
    drain(cp, log, processed)
    check(log, processed, order_within_partition=False)
