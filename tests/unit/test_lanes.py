"""Key lanes: the busiest thread's load at every factor, the rule the pipeline, the policy and the
simulator share (invariant 7)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.elasticity import FACTORS, MAX_FACTOR
from autosizer.elasticity.lanes import (
    LANES_PER_TASK,
    busiest_worker_shares,
    busiest_workers,
    lane_modulus,
)


def test_a_lane_refines_the_bucket_up_to_the_largest_factor():
    assert lane_modulus(1) == LANES_PER_TASK
    assert lane_modulus(16) == 16 * LANES_PER_TASK
    assert lane_modulus(MAX_FACTOR) == MAX_FACTOR  # one lane per task: nothing finer to share
    with pytest.raises(ValueError, match="power of two"):
        lane_modulus(3)


def test_one_hot_key_is_one_threads_work_at_every_factor():
    residues = np.zeros(MAX_FACTOR)
    residues[7] = 600
    residues[100:500] = 1  # 400 records of small keys
    shares = busiest_worker_shares(residues)
    assert shares[0] == 1.0  # F = 1: one thread does everything
    assert all(s == pytest.approx(0.6 + (1 / 1000 if f < 64 else 0), abs=0.02)
               for f, s in zip(FACTORS[1:], shares[1:], strict=True))


def test_an_empty_partition_is_even():
    assert busiest_worker_shares(np.zeros(MAX_FACTOR)) == tuple(1 / f for f in FACTORS)


def test_residue_counts_must_cover_every_residue():
    with pytest.raises(ValueError, match="1024 entries"):
        busiest_workers(np.ones(16))


@given(st.lists(st.integers(0, 1000), min_size=MAX_FACTOR, max_size=MAX_FACTOR))
def test_the_busiest_thread_is_between_an_even_share_and_the_busiest_bucket(counts):
    residues = np.asarray(counts, dtype=np.float64)
    total = residues.sum()
    workers = busiest_workers(residues)
    for factor, load in zip(FACTORS, workers, strict=True):
        bucket = residues.reshape(-1, factor).sum(axis=0).max()
        assert total / factor - 1e-9 <= load <= bucket + 1e-9
    assert all(a >= b - 1e-9 for a, b in zip(workers, workers[1:], strict=False))  # never worse
