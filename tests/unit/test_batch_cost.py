"""A batch's fixed cost at another factor than the one it was measured at: the read's part per
record grows with the records a saturated batch reads, the rest stays (`elasticity.batch_cost`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.elasticity.batch_cost import PageCost, ReadCost, batch_duty, duty_at, overhead_at


def test_a_line_through_batches_of_different_sizes_finds_the_reads_cost_per_record():
    """Kinesis on the emulator: about 0.13 s whatever a slot reads, and 0.16 ms a record."""
    cost = ReadCost()
    for records in (900, 7000, 3000, 400, 5200, 1800):
        cost.observe(records, 0.13 + 0.00016 * records)
    assert cost.per_record() == pytest.approx(0.00016)


def test_a_backlog_and_its_last_batch_say_nothing_reads_at_two_factors_tell_kinesis_reads_cost_per_record():
    """Kinesis at factor 1: a span of about 900 records a slot read in 0.24-0.29 s, then the
    backlog's last batch: a line that one batch draws (the last 228 records of one run read in
    0.232 s, a slot's read at factor 1 being nearly all its fixed part). Then the same job at
    factor 8 (7,000 records a slot in 1.06-1.24 s): the line holds without any one batch."""
    cost = ReadCost()
    for records, seconds in ((905, 0.25), (898, 0.29), (902, 0.27), (900, 0.24), (310, 0.17)):
        cost.observe(records, seconds)
    assert cost.per_record() is None
    for records, seconds in ((7010, 1.06), (6990, 1.24), (7000, 1.15)):
        cost.observe(records, seconds)
    assert cost.per_record() == pytest.approx((1.15 - 0.26) / (7000 - 900), rel=0.25)


def test_one_slow_read_draws_no_line():
    """A Kinesis job that kept up and then fell behind (`bench_kinesis.py rise`): its slots read
    195-656 records in 0.16-0.43 s, then 873 in 2.67 s while the emulator took the backlog's
    writes; that batch's slope promised factor 8 0.61 of what it did. The next batches read as
    the first did."""
    cost = ReadCost()
    for records, seconds in ((656, 0.186), (499, 0.428), (307, 0.220), (195, 0.163), (216, 0.425),
                             (206, 0.326), (873, 2.672)):
        cost.observe(records, seconds)
    assert cost.per_record() is None
    for records, seconds in ((870, 0.261), (873, 0.257), (871, 0.259), (673, 0.257), (95, 0.169)):
        cost.observe(records, seconds)
        assert cost.per_record() is None


def test_batches_of_one_size_say_nothing_of_what_a_record_adds():
    """A steady backlog reads the same span every batch: the read's fixed part cannot be told
    from the rest. Kafka's read at factor 1 was 0.06 s of 870 records, nearly all of it the
    fetch's fixed part (0.13 s at factor 16): counted per record, factor 16 was promised a fifth
    less than it did."""
    cost = ReadCost()
    for _ in range(5):
        cost.observe(870, 0.06)
    assert cost.per_record() is None
    assert ReadCost().per_record() is None
    cost.observe(130, 0.043)  # the backlog's last batch: one batch draws no line
    assert cost.per_record() is None
    cost.observe(130, 0.043)  # two do
    assert cost.per_record() == pytest.approx((0.06 - 0.043) / (870 - 130), rel=0.01)


def test_a_line_that_falls_or_that_noise_could_draw_says_nothing():
    falling = ReadCost()
    for records, seconds in ((1000, 0.5), (5000, 0.1), (3000, 0.3)):  # larger reads faster
        falling.observe(records, seconds)
    assert falling.per_record() is None
    # Kafka's reads at factor 1 (a throwaway driver's print): 0.02-0.07 s for 863-880 records,
    # then the backlog's last batch, 129 in 0.043 s. A line through them promised factor 64
    # 0.86 of what it did; the slope is within two standard errors of nothing.
    kafka = ReadCost()
    for records, seconds in ((863, 0.022), (865, 0.050), (877, 0.052), (879, 0.053), (879, 0.047),
                             (877, 0.057), (880, 0.074), (729, 0.048), (129, 0.043)):
        kafka.observe(records, seconds)
    assert kafka.per_record() is None


def test_a_line_that_starts_below_nothing_counts_at_most_the_whole_read_per_record():
    steep = ReadCost()
    for records, seconds in ((1000, 0.0), (2000, 1.0), (3000, 2.0), (4000, 3.0)):  # -1 s fixed: not a cost
        steep.observe(records, seconds)
    assert steep.per_record() == pytest.approx(steep.whole_per_record())
    assert steep.whole_per_record() < 0.001


@given(st.lists(st.tuples(st.integers(1, 100_000), st.floats(0, 30, allow_nan=False)), min_size=1, max_size=40))
def test_the_part_that_grows_never_exceeds_the_read_it_was_measured_in(batches):
    cost = _fed(ReadCost(), batches)
    per_record = cost.per_record()
    if per_record is not None:
        assert 0 <= per_record <= cost.whole_per_record() * (1 + 1e-9)


def test_the_read_grows_with_the_factor_and_the_rest_of_the_cost_stays():
    # a 1.5 s cost at factor 8, 1.1 s of it the growing read: at 1, 0.4 + 1.1 / 8
    assert overhead_at(1.5, 1.1, 8, 1) == pytest.approx(0.4 + 1.1 / 8)
    assert overhead_at(1.5, 1.1, 8, 8) == pytest.approx(1.5)
    assert overhead_at(0.5, 0.1, 1, 8) == pytest.approx(0.4 + 0.8)
    assert overhead_at(0.5, 2.0, 1, 2) == pytest.approx(1.0), "a read is at most the whole cost"
    for unknown in (None, float("nan"), -1.0, 0.0):
        assert overhead_at(0.5, unknown, 1, 8) == 0.5
    assert duty_at(3.0, 0.5, 0.1, 1, 8) == pytest.approx(3 / (3 + 1.2))
    assert duty_at(3.0, 0.5, 0.1, 1, 1) == batch_duty(3.0, 0.5)
    assert duty_at(3.0, None, 0.1, 1, 8) == 1.0 and duty_at(None, 0.5, 0.1, 1, 8) == 1.0


def test_a_page_costs_a_record_at_least_what_the_quietest_big_page_did_beyond_the_call():
    """A tail's pages in a Kinesis rise run: keeping up (38-60 records), then the burst's pages
    while the emulator took its writes one call at a time (1 ms a record), then two after. A line
    through them would have said the writes' queue; the least big page says the endpoint."""
    cost = PageCost()
    for records, seconds in ((42, 0.0125), (47, 0.0099), (56, 0.0074), (51, 0.0826), (38, 0.0112)):
        cost.observe(records, seconds)
    assert cost.per_record() is None, "pages alike tell nothing"
    cost.observe(150, 0.02)  # under BIG_PAGE times the typical page: one more small page
    assert cost.per_record() is None
    for records, seconds in ((392, 0.438), (504, 0.4509), (788, 0.679), (488, 0.0335), (363, 0.0272)):
        cost.observe(records, seconds)
    assert cost.per_record() == pytest.approx((0.0335 - 0.0074) / 488)


def test_a_backlogs_pages_count_once_the_pages_after_them_show_what_small_is():
    """A job started on a backlog: a tail's first pages all as large as each other tell
    nothing (no call's own time to take off) until the input's pages after them do."""
    cost = PageCost()
    for records in (1482, 1490, 1475, 1500):
        cost.observe(records, 0.01 + 0.00008 * records)
    assert cost.per_record() is None
    for records in (48, 52, 47, 55):
        cost.observe(records, 0.01 + 0.00008 * records)
    assert cost.per_record() is None, "four of eight small: the median still a backlog's page"
    cost.observe(50, 0.01 + 0.00008 * 50)
    assert cost.per_record() == pytest.approx(0.00008 * (1 - 47 / 1475))  # the call took 47 records' part


@given(st.lists(st.tuples(st.integers(1, 20_000), st.floats(0, 30, allow_nan=False)), min_size=1, max_size=80))
def test_a_pages_cost_a_record_is_never_more_than_a_big_page_paid_whole(pages):
    cost = _fed(PageCost(), pages)
    per_record = cost.per_record()
    if per_record is not None:
        assert per_record >= 0 and any(per_record <= seconds / records for records, seconds in cost.big)


def test_a_big_page_whose_records_took_less_than_a_call_tells_nothing():
    """A slow stream: a tail's pages of 5-12 records, then one of 48 that took 5 ms more than
    the quickest call. That is a call's scatter, not 0.1 ms a record."""
    cost = _fed(PageCost(), [(5, 0.0074), (8, 0.0102), (12, 0.0125), (6, 0.0099), (48, 0.0124)])
    assert cost.big and cost.per_record() is None
    cost.observe(400, 0.0074 + 0.00005 * 400)
    assert cost.per_record() == pytest.approx(0.00005)


def _fed(cost, reads):
    """`cost` having observed each (records, seconds) of `reads`."""
    for records, seconds in reads:
        cost.observe(records, seconds)
    return cost
