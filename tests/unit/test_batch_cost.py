"""A batch's fixed cost at another factor than the one it was measured at: the read's part per
record grows with the records a saturated batch reads, the rest stays (`elasticity.batch_cost`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.elasticity.batch_cost import ReadCost, batch_duty, duty_at, overhead_at


def test_a_line_through_batches_of_different_sizes_finds_the_reads_cost_per_record():
    """Kinesis on the emulator: about 0.13 s whatever a slot reads, and 0.16 ms a record."""
    cost = ReadCost()
    for records in (900, 7000, 3000, 400, 5200, 1800):
        cost.observe(records, 0.13 + 0.00016 * records)
    assert cost.per_record() == pytest.approx(0.00016)


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
    cost.observe(130, 0.043)  # the backlog's last batch: a line at last
    assert cost.per_record() == pytest.approx((0.06 - 0.043) / (870 - 130), rel=0.01)


def test_a_line_that_falls_or_starts_below_nothing_is_clipped():
    cost = ReadCost()
    for records, seconds in ((1000, 0.5), (5000, 0.1), (3000, 0.3)):  # larger reads faster: noise
        cost.observe(records, seconds)
    assert cost.per_record() == 0.0
    steep = ReadCost()
    for records, seconds in ((1000, 0.0), (2000, 1.0), (3000, 2.0)):  # -1 s fixed: not a cost
        steep.observe(records, seconds)
    assert steep.per_record() == pytest.approx(steep.seconds / steep.records)


@given(st.lists(st.tuples(st.integers(1, 100_000), st.floats(0, 30, allow_nan=False)), min_size=1, max_size=40))
def test_the_part_that_grows_never_exceeds_the_read_it_was_measured_in(batches):
    cost = ReadCost()
    for records, seconds in batches:
        cost.observe(records, seconds)
    per_record = cost.per_record()
    if per_record is not None:
        assert per_record >= 0
        assert per_record * cost.records <= cost.seconds * (1 + 1e-9) + 1e-12


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
