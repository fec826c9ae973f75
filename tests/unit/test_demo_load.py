"""The demo's load shapes (`examples/demo.py --shape`): what each second of the watched run produces."""

from __future__ import annotations

import pytest

from examples.demo import HIGH, LOW, STEP_AT, STEP_S, load_at


@pytest.mark.parametrize("shape", ["step", "ramp", "bursts"])
def test_every_shape_is_low_outside_the_high_phase_and_reaches_high_in_it(shape):
    assert load_at(0, HIGH, shape) == load_at(STEP_AT + STEP_S, HIGH, shape) == LOW
    assert max(load_at(STEP_AT + s, HIGH, shape) for s in range(int(STEP_S))) == HIGH


def test_the_ramp_climbs_over_half_the_phase_and_the_bursts_last_ten_seconds_in_thirty():
    ramp = [load_at(STEP_AT + s, HIGH, "ramp") for s in range(int(STEP_S))]
    assert ramp == sorted(ramp) and ramp[int(STEP_S / 4)] == pytest.approx((LOW + HIGH) / 2)
    bursts = [load_at(STEP_AT + s, HIGH, "bursts") for s in range(30)]
    assert bursts.count(HIGH) == 10 and bursts[:10] == [HIGH] * 10
