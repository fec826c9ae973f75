"""Invariant 2 under time-bounded batches: deadline-cut positions and run-ahead windows.

Each batch is built the way the pipeline builds it: `Admission.plan`'s rule (read each partition
from its slowest task, at most a span past it) with random spans standing for the run-ahead
window, the real `run_slot` with random per-task deadlines (counted in records), and the agent's
`advance` of every progress entry; rescales are interleaved. Every message must be processed
exactly once, in key order.
"""

from __future__ import annotations

import os
import threading

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosizer.elasticity import Checkpoints, Layout
from autosizer.pipeline.slots import NoDeadline, run_slot
from tests.unit.test_exactly_once_property import Log, check
from tests.unit.test_slots import records_table

EXAMPLES = int(os.environ.get("AUTOSIZER_PROPERTY_EXAMPLES", "1200")) // 8
FACTORS = [1, 2, 4, 8, 16]
TOPICS = {"a": 2, "b": 1}


class Budget:
    def __init__(self, records: dict[str, int]):
        self.records = records

    def expired(self, task: str, done: int) -> bool:
        return done >= self.records.get(task, 1)


def table(log: Log, ranges: dict) -> pa.Table:
    return records_table((key, b"%d" % seq, t, p, o) for (t, p), (begin, end) in ranges.items()
                         for o, (key, seq) in enumerate(log.partitions[(t, p)][begin:end], start=begin))


def run_batch(cp: Checkpoints, log: Log, spans, deadline, processed: list) -> None:
    """One micro-batch: plan, read, run the slot, advance as the agent does."""
    ranges = {}
    for tp, start in cp.start_offsets().items():
        begin = start or 0
        ranges[tp] = (begin, min(len(log.partitions[tp]), begin + next(spans)))
    lock = threading.Lock()

    def process(record):
        with lock:
            processed.append((None, (record.topic, record.partition), record.offset, record.key,
                              int(record.value)))

    result = run_slot(table(log, ranges), cp, process, deadline)
    for p in result.progress:
        cp.advance(p.task, p.topic, p.partition, p.next_offset, p.marks, p.modulus)


keys = st.one_of(st.none(), st.binary(min_size=0, max_size=2))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grouper=st.sampled_from(["partition", "topic-partition", "fixed"]),
    first=st.sampled_from(FACTORS),
    steps=st.lists(
        st.tuples(
            st.lists(st.tuples(st.integers(0, 2), keys), max_size=30),  # new messages
            st.one_of(st.none(), st.sampled_from(FACTORS)),  # rescale after the batch, or not
            st.dictionaries(st.integers(0, 15), st.integers(1, 6), max_size=16),  # budgets by bucket
        ),
        min_size=1, max_size=8,
    ),
    spans=st.lists(st.integers(1, 40), min_size=1, max_size=16),
)
def test_deadline_cut_batches_process_every_message_once_in_key_order(grouper, first, steps, spans):
    log = Log()
    cp = Checkpoints.initial(Layout(topics=TOPICS, factor=first, grouper=grouper))
    cp.resolve_defaults({tp: 0 for tp in cp.layout.partitions()})
    span = iter(spans * 1000)
    processed: list = []
    for messages, rescale, budgets in steps:
        for where, key in messages:
            log.produce(*(("a", where) if where < 2 else ("b", 0)), key)
        budget = Budget({t.name: budgets.get(t.bucket, 1) for t in cp.layout.virtual_tasks()})
        run_batch(cp, log, span, budget, processed)
        if rescale is not None and rescale != cp.layout.factor:
            cp = cp.migrate(cp.layout.with_factor(rescale))
    for _ in range(100):  # drain: whole spans, no deadline
        if all(cp.start_offsets()[tp] >= len(log.partitions[tp]) for tp in cp.layout.partitions()):
            break
        run_batch(cp, log, iter(lambda: 10**6, None), NoDeadline(), processed)
    check(log, processed, order_within_partition=True)
