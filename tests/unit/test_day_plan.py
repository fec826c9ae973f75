"""The day plan: the cheapest run of factors through the hours the history expects."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autosizer.elasticity import FACTORS
from autosizer.policies.day_plan import _cheapest, _compiled, day_plan

SLOT = 300
CAPACITY = np.array([1000.0 * f for f in FACTORS])  # 1,000/s per factor step, at the plan's utilization


def rescales(plan: np.ndarray, current: int) -> int:
    return int((np.diff(np.concatenate(([current], plan))) != 0).sum())


def test_a_morning_ramp_is_one_jump_not_a_ladder():
    """Night at 0, a ramp through 1,500 / 5,000 / 10,000 to 25,000/s in 25 min, a long day:
    a level held for five minutes does not pay for its rescale, so the plan goes 1 -> 32 once."""
    expected = np.array([0] * 12 + [1500, 5000, 10000, 20000, 25000] + [25000] * 100, dtype=float)
    plan = day_plan(expected, CAPACITY, 1, SLOT, 3600)
    assert set(plan[:12]) == {1} and set(plan[12:]) == {32}
    assert rescales(plan, 1) == 1


def test_a_short_lull_is_held_and_a_long_night_is_not():
    day, short, night = [20000.0] * 24, [500.0] * 6, [500.0] * 72
    held = day_plan(np.array(day + short + day), CAPACITY, 32, SLOT, 3600)
    assert set(held) == {32}  # half an hour at 1 saves less than two rescales cost
    dropped = day_plan(np.array(day + night + day), CAPACITY, 32, SLOT, 3600)
    assert dropped[30] == 1 and rescales(dropped, 32) == 2


def test_unknown_slots_hold_the_level_before_them():
    plan = day_plan(np.array([3000.0, np.nan, np.nan, 9000.0]), CAPACITY, 4, SLOT, 60)
    assert list(plan[:3]) == [4, 4, 4] and plan[3] == 16


def test_a_level_beyond_every_factor_gets_the_largest():
    plan = day_plan(np.array([10.0 ** 9]), CAPACITY, 1, SLOT, 3600)
    assert plan[0] == FACTORS[-1]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 40_000), min_size=1, max_size=60), st.sampled_from(FACTORS[:7]),
       st.floats(1, 20_000))
def test_the_plan_covers_every_slot_and_costs_no_more_than_following_each_level(levels, current, cost_s):
    expected = np.array(levels)
    plan = day_plan(expected, CAPACITY, current, SLOT, cost_s)
    index = np.searchsorted(FACTORS, plan)
    assert (CAPACITY[index] >= expected).all()
    follow = np.array([FACTORS[int(np.argmax(level <= CAPACITY))] for level in expected])
    price = max(int(follow.max()), current) * cost_s

    def total(run: np.ndarray) -> float:
        return float(run.sum()) * SLOT + rescales(run, current) * price

    assert total(plan) <= total(follow) + 1e-6


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0.0, 1.0, 7.5, 300.0, 2.5e4, np.inf]), min_size=11, max_size=11),
                min_size=1, max_size=40),
       st.integers(0, 10), st.floats(0, 1e5))
def test_the_compiled_path_and_the_plain_one_are_the_same(rows, start, price):
    """The simulator runs the cheapest path compiled (numba is loaded for its kernels), a daemon
    as plain Python (loading numba for one plan per slot took its RSS from 83 to 200 MB): one
    source, the same path, ties and unreachable factors included."""
    step = np.array(rows)
    assert (_compiled()(step, start, price) == _cheapest(step, start, price)).all()


def test_a_daemon_plans_without_loading_numba():
    """The daemon's process never imports numba: its plan runs the plain path."""
    script = ("import sys, numpy as np\n"
              "import autosizer.controller.daemon\n"
              "from autosizer.elasticity import FACTORS\n"
              "from autosizer.policies.day_plan import day_plan\n"
              "plan = day_plan(np.array([0.0] * 12 + [25000.0] * 24), np.array([1000.0 * f for f in FACTORS]), "
              "1, 300, 3600)\n"
              "assert set(plan[12:]) == {32}, plan\n"
              "print('numba' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"
