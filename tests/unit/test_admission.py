"""Admission: read plans from measured saturated rates, and the capacity they imply."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autosizer.elasticity import Layout
from autosizer.pipeline.admission import (
    Admission,
    AdmissionConfig,
    ReadPlan,
    gap_after_commit,
    job_capacity,
    read_fill,
)
from autosizer.pipeline.slots import TaskProgress


def batch(layout: Layout, rate: float, seconds: float = 1.0):
    """One batch in which every task worked `seconds` at `rate` records/s."""
    return [
        TaskProgress(t.name, "orders", 0, 0, records=int(rate * seconds), busy_ns=int(seconds * 1e9),
                     read=1000)
        for t in layout.virtual_tasks()
    ]


def test_before_any_measurement_a_small_first_batch_whatever_the_factor():
    for factor in (1, 64):
        layout = Layout(topics={"orders": 2}, factor=factor)
        admission = Admission(AdmissionConfig(batch_seconds=3, run_ahead=2, initial_rate=50))
        plan = admission.plan(layout, {("orders", 0): 10, ("orders", 1): None})
        assert plan == {("orders", 0): ReadPlan(10, 2 * 3 * 50)}  # a partition with no start waits


def test_batches_too_quick_to_measure_double_the_assumption():
    layout = Layout(topics={"orders": 1}, factor=1)
    admission = Admission(AdmissionConfig(batch_seconds=1, run_ahead=1, initial_rate=50))
    for expected in (100, 200, 400):
        admission.observe(batch(layout, rate=10_000, seconds=0.001))  # 10 records in 1 ms
        assert admission.plan(layout, {("orders", 0): 0})[("orders", 0)].span == expected
    admission.observe(batch(layout, rate=10_000, seconds=0.5))  # measurable at last
    assert admission.plan(layout, {("orders", 0): 0})[("orders", 0)].span == 10_000


def test_the_span_follows_the_measured_rate_and_a_rescale_borrows_it():
    layout = Layout(topics={"orders": 1}, factor=2)
    admission = Admission(AdmissionConfig(batch_seconds=2, run_ahead=1.5))
    admission.observe(batch(layout, rate=100))
    assert admission.plan(layout, {("orders", 0): 0})[("orders", 0)].span == math.ceil(1.5 * 2 * 200)
    bigger = layout.with_factor(8)
    admission.forget(bigger)  # none of the new tasks is measured: each borrows the median
    assert admission.plan(bigger, {("orders", 0): 7})[("orders", 0)] == ReadPlan(7, math.ceil(1.5 * 2 * 800))


def test_tiny_samples_do_not_move_the_rate():
    layout = Layout(topics={"orders": 1}, factor=1)
    admission = Admission()
    admission.observe(batch(layout, rate=100))
    admission.observe(batch(layout, rate=100_000, seconds=0.001))
    assert admission.rates == {"Partition_0": 100}


def test_capacity_is_set_by_the_busiest_thread_not_the_busiest_bucket():
    from autosizer.elasticity import FACTORS

    layout = Layout(topics={"orders": 1}, factor=2)
    for busiest, capacity in ((800, 125), (500, 200)):
        admission = Admission()
        progress = batch(layout, rate=100)
        for p in progress:  # bucket 0 holds 80% of the partition's input in one lane, or its lanes share it
            p.hottest = tuple(1000.0 if f == 1 else float(busiest) for f in FACTORS)
        admission.observe(progress)
        # One lane with 80% of the input must run on one thread at 100/s: 125/s in key order.
        # Lanes of 50% at most: the two threads share bucket 0's lanes, 200/s.
        assert admission.partition_capacity(layout)[("orders", 0)] == pytest.approx(capacity)


@pytest.mark.parametrize("field,value", [("batch_seconds", float("nan")), ("batch_seconds", 0),
                                         ("run_ahead", 0.5), ("initial_rate", float("inf")),
                                         ("run_ahead", True)])
def test_settings_out_of_range_are_refused_by_name(field, value):
    with pytest.raises(ValueError, match=f"^{field} must be a finite number"):
        AdmissionConfig(**{field: value})


def test_the_job_capacity_pays_the_fixed_cost_of_each_batch():
    layout = Layout(topics={"orders": 1}, factor=2)
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe(batch(layout, rate=100))
    assert job_capacity(admission, layout) == pytest.approx(200)  # nothing measured: no cost yet
    admission.observe_cycle(cycle_s=3.6, slot_s=3.0)
    assert admission.overhead_s == pytest.approx(0.6)
    assert job_capacity(admission, layout) == pytest.approx(200 * 3 / 3.6)


def test_a_larger_factor_is_promised_the_read_its_larger_batches_pay():
    """Kinesis on the emulator read 900 records a slot in 0.27 s at factor 1 and 7,000 in 1.22 s
    at 8: the duty a batch's cost leaves at factor 1 promised factor 8 a third more than it did.
    The cost's read per record scales with the records a saturated batch reads; the rest stays."""
    layout = Layout(topics={"orders": 4}, factor=1)
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe(batch(layout, rate=99))
    for records in (900, 300, 900, 120, 900):  # saturated batches, and ones that kept up
        admission.observe_read(records, 0.13 + 0.000156 * records)
    admission.observe_cycle(cycle_s=3.6, slot_s=3.05, read_records=900, factor=1)
    assert admission.overhead_s == pytest.approx(0.55)
    assert admission.growing_read_s() == pytest.approx(0.000156 * 900)
    assert admission.growing_read_s(8) == pytest.approx(0.000156 * 7200)
    assert admission.duty() == admission.duty(1) == pytest.approx(3 / 3.55)
    grown = 0.55 + 0.000156 * 900 * 7
    assert admission.duty(8) == pytest.approx(3 / (3 + grown))
    eight = Layout(topics={"orders": 4}, factor=8)
    assert job_capacity(admission, eight) == pytest.approx(4 * 8 * 99 * 3 / (3 + grown))  # not 3 / 3.55
    assert job_capacity(admission, layout) == pytest.approx(4 * 99 * 3 / 3.55)
    # measured at 8, the same batches read from there: factor 1 pays less again
    admission.observe_cycle(cycle_s=4.6, slot_s=3.05, read_records=7200, factor=8)
    assert admission.growing_read_s(8) == pytest.approx(0.000156 * 7200)
    assert admission.duty(1) > admission.duty(8)


def test_a_scale_up_from_factor_1_is_promised_at_least_the_read_the_endpoint_serves_a_record_in():
    """At factor 1 a Kinesis slot read 200 records in the time it read 870 (the call's fixed
    part, the emulator's pauses): no line, and factor 8 was promised the read as measured at 1,
    13-35% more than it did. The driver's tails read a burst in pages far larger than they read
    keeping up: the least a big page cost a record beyond the call is the least a record costs
    (the pages below: a rise run's, the emulator busy with the burst's writes, then not), unless
    it is more than the slots' whole read per record; the slots' own line counts where it says
    more."""
    layout = Layout(topics={"orders": 4}, factor=1)
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe(batch(layout, rate=99))
    for records, seconds in ((200, 0.27), (870, 0.21), (650, 0.43), (870, 0.26), (400, 0.16), (870, 0.24)):
        admission.observe_read(records, seconds)
    admission.observe_cycle(cycle_s=3.6, slot_s=3.05, read_records=870, factor=1)
    assert admission.read_cost.per_record() is None and admission.growing_read_s(8) is None
    keeping_up = [(42, 0.0125), (47, 0.0099), (56, 0.0074), (51, 0.0826), (38, 0.0112), (60, 0.0097)]
    admission.observe_endpoint_read(keeping_up)
    assert admission.endpoint_per_record is None and admission.growing_read_s(8) is None
    admission.observe_endpoint_read([(392, 0.438), (504, 0.4509), (788, 0.679)])  # the writes' queue
    busy = admission.endpoint_per_record
    assert busy == pytest.approx((0.679 - 0.0074) / 788)
    # more than the slots' whole reads cost a record, their fixed part and all: a queue, not a cost
    assert busy > admission.read_cost.whole_per_record() and admission.growing_read_s(8) is None
    admission.observe_endpoint_read([(488, 0.0335), (363, 0.0272), *keeping_up])  # the writes done
    floor = admission.endpoint_per_record
    assert floor == pytest.approx((0.0335 - 0.0074) / 488)
    assert admission.growing_read_s() == pytest.approx(floor * 870)
    assert admission.growing_read_s(8) == pytest.approx(8 * floor * 870)
    assert admission.duty(8) < admission.duty(1)
    for records in (900, 300, 900, 120, 900) * 7:  # the window through these alone
        admission.observe_read(records, 0.13 + 0.000156 * records)
    assert admission.growing_read_s(8) == pytest.approx(0.000156 * 870 * 8)


def test_without_a_read_measured_every_factor_pays_the_same_cost():
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_cycle(cycle_s=3.6, slot_s=3.0)
    assert admission.growing_read_s() is None
    assert admission.duty(1) == admission.duty(64) == pytest.approx(3 / 3.6)


def test_the_job_capacity_stops_at_what_the_cores_do_at_the_cpu_a_record_costs():
    """Two tasks at 100/s whose records cost 8 ms of CPU each: on one core the job does 125/s,
    not 200/s; with no cores given (or no CPU measured) the tasks' rates alone."""
    layout = Layout(topics={"orders": 1}, factor=2)
    admission = Admission(AdmissionConfig(batch_seconds=3))
    progress = batch(layout, rate=100)
    for p in progress:
        p.cpu_ns = int(p.records * 0.008 * 1e9)
    admission.observe(progress)
    assert admission.cpu_per_record == pytest.approx(0.008)
    assert job_capacity(admission, layout, cores=1) == pytest.approx(125)
    assert job_capacity(admission, layout, cores=4) == pytest.approx(200)
    assert job_capacity(admission, layout) == pytest.approx(200)


@pytest.mark.parametrize("observe, attribute", [
    ("observe_read_boundary", "read_boundary_s"),  # Kafka never measures one: its trigger cuts the records
    ("observe_gap", "gap_s"),  # measured only where batches run back to back
])
def test_a_batchs_read_boundary_and_gap_are_smoothed_and_a_clock_step_back_ignored(observe, attribute):
    admission = Admission(AdmissionConfig(batch_seconds=3))
    assert getattr(admission, attribute) is None
    getattr(admission, observe)(0.2)
    getattr(admission, observe)(-0.5)
    assert getattr(admission, attribute) == pytest.approx(0.2)
    for _ in range(40):
        getattr(admission, observe)(0.4)
    assert getattr(admission, attribute) == pytest.approx(0.4, abs=0.01)


def test_the_commit_latency_is_measured_on_every_batch_and_not_in_the_capacity():
    layout = Layout(topics={"orders": 1}, factor=2)
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe(batch(layout, rate=100))
    admission.observe_latency(0.2)
    assert admission.commit_latency_s == pytest.approx(0.2)  # the first batch is taken as is
    admission.observe_latency(-1.0)  # a clock step back: ignored
    assert admission.commit_latency_s == pytest.approx(0.2)
    assert job_capacity(admission, layout) == pytest.approx(200)  # the saturated overhead's, alone


def test_the_busiest_thread_is_counted_at_every_factor():
    from autosizer.elasticity import FACTORS, MAX_FACTOR
    from autosizer.elasticity.lanes import busiest_workers

    residues = np.zeros(MAX_FACTOR, dtype=np.int64)
    residues[[0, 1, 2, 3]] = [40, 30, 20, 10]  # residue 0 is also lane 0 at every factor
    residues[512] = 100  # lane 0 up to factor 32 (modulus 512), its own lane from factor 64
    hottest = busiest_workers(residues)
    assert len(hottest) == len(FACTORS)
    # F=1: one thread does all 200; F=2, 4: lane 0 (40 + 100) outweighs an even half or quarter
    assert hottest[:3] == (200, 140, 140)
    assert hottest[FACTORS.index(64)] == 100  # residue 512 alone: one thread carries it
    assert hottest[-1] == 100

    layout = Layout(topics={"orders": 1}, factor=2)
    admission = Admission()
    progress = batch(layout, rate=100)
    for p in progress:
        p.hottest = hottest
        p.read = 200
    admission.observe(progress)
    assert admission.hot_shares[("orders", 0)][:3] == pytest.approx((1.0, 0.7, 0.7))


def test_a_tiny_batch_does_not_move_the_busiest_thread_share():
    """A backlog's last batch can read a few records of one key: one lane with all of the input,
    if believed, which would cut the exported capacity by more than half."""
    from autosizer.elasticity import FACTORS

    layout = Layout(topics={"orders": 1}, factor=8)
    admission = Admission()
    even = batch(layout, rate=100)
    for p in even:
        p.hottest = tuple(1000.0 / f for f in FACTORS)
    admission.observe(even)
    before = admission.partition_capacity(layout)[("orders", 0)]
    tail = batch(layout, rate=100)
    for p in tail:
        p.read, p.hottest = 3, tuple(3.0 for _ in FACTORS)  # 3 records, all in one lane
    admission.observe(tail)
    assert admission.hot_shares[("orders", 0)][FACTORS.index(8)] == pytest.approx(1 / 8)
    assert admission.partition_capacity(layout)[("orders", 0)] == pytest.approx(before)


def _noisy_batches(admission: Admission, cv: float, records: list[int], rng, tasks: int = 16) -> list[float]:
    """Batches in which each task did n records (one n a batch, from `records`) whose service
    times (mean 10 ms) have this CV, gamma distributed; the service CV after each batch."""
    seen = []
    for n in records:
        admission.observe([TaskProgress(f"t{i}", "orders", 0, 0, records=n,
                                        busy_ns=int(rng.gamma(1 / cv**2, cv**2 * 0.01, n).sum() * 1e9))
                           for i in range(tasks)])
        seen.append(admission.service_cv)
    return seen


@pytest.mark.parametrize("cv", [0.05, 0.3, 1.0])
def test_the_service_times_noise_is_read_from_how_a_tasks_rate_strays_batch_to_batch(cv):
    """Saturated (300 records a batch) or at a trickle (5-40, what a low load gives a task): the
    median over batches reads the records' CV back within 15% either way."""
    rng = np.random.default_rng(5)
    for records in ([300] * 200, list(rng.integers(5, 40, 200))):
        admission = Admission()
        seen = _noisy_batches(admission, cv, records, rng)
        assert seen[0] is None  # one batch: nothing to stray from yet
        assert float(np.median(seen[1:])) == pytest.approx(cv, rel=0.15), records[:3]


def test_the_service_noise_is_not_read_from_a_task_new_to_the_layout_or_too_quick_to_time():
    admission = Admission()
    _noisy_batches(admission, 0.2, [300] * 20, np.random.default_rng(2), tasks=4)
    before = admission.service_cv
    admission.observe([TaskProgress("new", "orders", 0, 0, records=300, busy_ns=int(9e9))])  # 3x slower
    admission.observe([TaskProgress("t0", "orders", 0, 0, records=1, busy_ns=1_000_000)])  # 1 ms
    assert admission.service_cv == before


def test_batches_too_small_to_measure_the_shares_are_summed_until_they_are_enough():
    """A trickle (25 records a batch, 4 keys): each batch alone would read its busiest lane's
    random excess as the share, so small batches are summed per residue until they reach 200
    records, and the shares are what one batch of them all would have measured. Until then the
    partition has none (read as even)."""
    from autosizer.elasticity import FACTORS, MAX_FACTOR
    from autosizer.elasticity.lanes import busiest_worker_shares

    layout = Layout(topics={"orders": 1}, factor=4)
    rng = np.random.default_rng(4)
    admission, total = Admission(), np.zeros(MAX_FACTOR)
    keys = np.array([3, 130, 517, 1000])  # four keys' residues, one lane each from factor 4
    for i in range(8):
        counts = np.bincount(rng.choice(keys, 25), minlength=MAX_FACTOR)
        total += counts
        small = batch(layout, rate=100)
        for p in small:
            p.read, p.hottest = 25, (25.0,) * len(FACTORS)
            p.residues = tuple((int(r), int(counts[r])) for r in np.flatnonzero(counts))
        admission.observe(small)
        if i < 7:
            assert ("orders", 0) not in admission.hot_shares  # 25 x (i + 1) < 200
    assert admission.hot_shares[("orders", 0)] == pytest.approx(busiest_worker_shares(total))
    assert admission.hot_shares[("orders", 0)][FACTORS.index(4)] < 0.3  # about a quarter each


def test_a_batchs_fill_is_its_fullest_partitions_read_over_the_span_planned_for_it():
    """Two partitions planned 300 records each: one read 150 and one 60 -> half full; a read past
    its span (a plan written before a rescale shrank it) counts as full; a partition the plan
    did not have (an expansion child behind its barrier) tells nothing."""
    def read(partition: int, records: int) -> TaskProgress:
        return TaskProgress(f"t{partition}", "orders", partition, 0, records=records, read=records)

    spans = {("orders", 0): 300, ("orders", 1): 300}
    assert read_fill([read(0, 150), read(1, 60)], spans) == pytest.approx(0.5)
    assert read_fill([read(0, 450)], spans) == 1.0
    assert read_fill([read(2, 100)], spans) is None
    assert read_fill([], spans) is None


def test_the_gap_after_a_commit_is_read_only_where_the_last_batch_ran_past_its_trigger():
    """Spark fires the next batch on the first tick of its interval after the last trigger, or at
    once where the last batch ran past it: only then is a trigger's distance from the last commit
    the gap after a commit and no wait, saturated or not (run k8 kept up at 87% busy, its batches
    straddling the 1 s trigger, and had no gap measured when only saturated pairs counted)."""
    # the last batch, triggered at 10.0, committed at 11.04, past 11.0: this one fired at 11.07
    assert gap_after_commit(10.0, 11.04, 11.07, 1.0) == pytest.approx(0.03)
    assert gap_after_commit(10.0, 10.95, 11.0, 1.0) is None  # it waited for its tick
    assert gap_after_commit(None, 11.04, 11.07, 1.0) is None  # a query's first batch, or one after none
    assert gap_after_commit(10.0, 11.04, 12.5, 1.0) is None  # no data at the due tick: a wait
    assert gap_after_commit(10.0, 11.04, 11.0, 1.0) is None  # a clock step back


def test_a_querys_first_batches_stand_in_for_the_commit_latency_only_until_a_warm_one_measures_it():
    """A query's first two batches wait for its JVM and Python workers (run k8b: 1.4 s, where
    warm batches waited 0.15-0.17 s). Smoothed in, the first still held the gauge at 0.29 s four
    seconds on, and a daemon read a capacity 3% short from it; now it only stands in until the
    first warm batch, which replaces it, and a restarted query's cold batches leave the figure."""
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_latency(1.4, warm=False)
    assert admission.commit_latency_s == pytest.approx(1.4)  # better than none: a batch costs something
    admission.observe_latency(0.6, warm=False)
    assert admission.commit_latency_s == pytest.approx(1.0)
    admission.observe_latency(0.16)
    assert admission.commit_latency_s == pytest.approx(0.16)  # the first warm batch replaces them
    admission.observe_latency(0.18)
    assert admission.commit_latency_s == pytest.approx(0.17)
    admission.observe_latency(1.2, warm=False)  # a restart's first batch
    assert admission.commit_latency_s == pytest.approx(0.17)


def test_the_fixed_cost_moves_with_every_batchs_part_that_is_neither_work_nor_read():
    """Session 81, `local[2]` at factor 1: a start-up backlog's cycles cost 0.28 s, 0.18 s of it
    neither the tasks' work nor the read; 90 s of keeping up later that part read 0.10 s, and the
    next backlog's cycles cost 0.20 s. A job that keeps up measures no cycle, but every batch
    measures that part: the cost follows it, at the factor the cycles were measured at."""
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_cycle(cycle_s=3.283, slot_s=3.0, read_records=870, factor=1, unread_s=0.182)
    assert admission.overhead_s == pytest.approx(0.283)
    for _ in range(8):  # a trickle, warm by now
        admission.observe_unread(0.10, factor=1)
    assert admission.overhead_s == pytest.approx(0.283 + 0.10 - 0.182, abs=1e-3)
    assert admission.cycle_overhead_s == pytest.approx(0.283), "what the cycles measured stays as it was"
    admission.observe_unread(0.5, factor=4)  # another factor's batch: its setup is another's
    assert admission.overhead_s == pytest.approx(0.201, abs=1e-3)


def test_at_a_factor_no_cycle_measured_the_fixed_cost_is_built_from_its_parts_there():
    """A scale-up the job then keeps up at measures no cycle there, but every batch there measures
    the part neither work nor read, which holds the new factor's tasks' setup (more tasks), and
    the read a saturated batch takes there grows with the factor. The daemon and `autosizer fit`
    read the gauge as the running factor's cost: it is the gap after a commit, that part, and the
    cycles' read with its growing part scaled (run p4 showed factor 1's cost, moved, at 4)."""
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_gap(0.031)
    for records in (200, 900, 400, 700, 300, 870):  # a read: 0.05 s a call and 20 us a record
        admission.observe_read(records, 0.05 + 2e-5 * records)
    admission.observe_cycle(cycle_s=3.283, slot_s=3.0, read_records=870, factor=1, unread_s=0.182,
                            read_s=0.05 + 2e-5 * 870)
    for _ in range(8):
        admission.observe_unread(0.10, factor=1)
    moved = admission.overhead_s
    assert moved == pytest.approx(0.201, abs=1e-3) and admission.overhead_factor == 1
    for _ in range(3):  # the new factor's first batches: not yet where its part stands
        admission.observe_unread(0.25, factor=4)
    assert admission.overhead_s == pytest.approx(moved) and admission.overhead_factor == 1
    admission.observe_unread(0.25, factor=4)
    read_at_4 = 0.05 + 2e-5 * 870 * 4
    assert admission.growing_read_s(4) == pytest.approx(2e-5 * 870 * 4)
    assert admission.overhead_factor == 4
    assert admission.overhead_s == pytest.approx(0.031 + 0.25 + read_at_4, abs=1e-6)
    assert admission.duty(4) == pytest.approx(3 / (3 + admission.overhead_s))
    for _ in range(12):  # it keeps following the part there as the new query warms up
        admission.observe_unread(0.15, factor=4)
    assert admission.overhead_s == pytest.approx(0.031 + 0.15 + read_at_4, abs=1e-3)
    admission.observe_cycle(cycle_s=3.3, slot_s=3.0, read_records=3400, factor=4, unread_s=0.2, read_s=0.12)
    assert admission.overhead_s == pytest.approx(admission.cycle_overhead_s), "a cycle measures it again"
    assert admission.overhead_factor == 4


def test_without_the_cycles_read_a_new_factor_moves_the_cost_by_its_parts_moves():
    """Before the cycles' read is known nothing can be built at another factor: the cost is the
    cycles', moved by the part's moves there from its first batches (its level holds more
    tasks' setup than the cycles' factor had), never below the cycles' read and gap."""
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_cycle(cycle_s=3.283, slot_s=3.0, read_records=870, factor=1, unread_s=0.182)
    for _ in range(8):
        admission.observe_unread(0.10, factor=1)
    for _ in range(4):  # the new factor's first batches: where it starts
        admission.observe_unread(0.25, factor=4)
    assert admission.overhead_s == pytest.approx(0.201, abs=1e-3)
    for _ in range(8):
        admission.observe_unread(0.20, factor=4)
    assert admission.overhead_s == pytest.approx(0.201 - 0.05, abs=1e-3)
    for _ in range(20):  # never below the read and the gap its cycles held: 0.283 - 0.182
        admission.observe_unread(0.0, factor=4)
    assert admission.overhead_s == pytest.approx(0.101, abs=1e-3)
    admission.observe_cycle(cycle_s=3.3, slot_s=3.0, read_records=3400, factor=4, unread_s=0.2)
    assert admission.overhead_s == pytest.approx(admission.cycle_overhead_s), "a cycle measures it again"


def test_the_fixed_cost_never_falls_below_its_read_and_the_gap_after_a_commit():
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_gap(0.04)
    admission.observe_cycle(cycle_s=3.3, slot_s=3.0, read_records=870, factor=1, unread_s=0.2)
    for _ in range(20):
        admission.observe_unread(0.0, factor=1)
    assert admission.overhead_s == pytest.approx(0.1, abs=1e-4)  # 0.3 less the 0.2 that went
    admission.observe_gap(0.2)
    admission.observe_gap(0.2)
    assert admission.overhead_s == pytest.approx(admission.gap_s) and admission.gap_s > 0.1


def test_without_the_part_measured_the_fixed_cost_is_what_the_cycles_measured():
    admission = Admission(AdmissionConfig(batch_seconds=3))
    admission.observe_unread(0.1, factor=1)  # before any cycle: nothing to move
    admission.observe_cycle(cycle_s=3.3, slot_s=3.0)
    admission.observe_unread(0.1, factor=1)
    assert admission.overhead_s == pytest.approx(0.3)
