"""The lag check after a scale-down, one rule for the restart actuator and the simulator.

A scale-down too far shows within seconds: the backlog grows faster than it did before. The
actuator watches the lag for `VERIFY_WINDOW_S` after the new generation's first commit and rolls
back when it grew faster than before the rescale by more than `VERIFY_LAG_SLACK` of the input
(a scale-up is judged by the policy instead: more tasks cannot make the backlog grow faster).
The daemon is inside the actuation all that while, so it does not tick; the simulator runs the
same rule, so a policy that scales down too far is scored with the rollback and the wait a real
daemon gets (run 82's 8 -> 1 kept the daemon 30.8 s).

The backlog is a sawtooth: it falls at each commit and grows by the input until the next. The
first reading comes just after a commit, at a trough; one reading at the window's end lands
anywhere up to a batch's input higher, which a short window read as growth (a Kinesis job at
2/s, a 6 s window: a healthy 4 -> 1 rolled back on 4-8 records, session 76). So the lag is read
every `READ_EVERY_S` over the window's last `VERIFY_TAIL` too, and the growth is the slowest
from the first reading to any of those: a trough's where the backlog holds, the end's where it
grows and then levels off (as the old one reading judged), the same wherever it grows steadily.
"""

from __future__ import annotations

VERIFY_WINDOW_S = 30.0
VERIFY_LAG_SLACK = 0.25
VERIFY_TAIL = 1 / 3  # the share of the window, at its end, read every READ_EVERY_S
READ_EVERY_S = 1.0


def tail_times(window_s: float) -> list[float]:
    """Seconds after the first reading at which the lag is read again: every `READ_EVERY_S`
    over the window's last `VERIFY_TAIL`, and at its end."""
    start = window_s - window_s * VERIFY_TAIL
    count = int((window_s - start) / READ_EVERY_S)
    return [t for t in (start + i * READ_EVERY_S for i in range(count + 1)) if t < window_s] + [window_s]


def slowest(first: float, readings: list[tuple[float, float]]) -> tuple[float, float]:
    """The (seconds, lag) reading over which the backlog grew the slowest from `first`, the
    latest of equal ones."""
    return min(readings, key=lambda r: ((r[1] - first) / r[0], -r[0]))


def lag_got_worse(first: float, last: float, window_s: float, input_rate: float,
                  processed_rate: float, slack: float = VERIFY_LAG_SLACK) -> str | None:
    """Why the new layout falls behind (None when it does not): the backlog grew from `first` to
    `last` records over `window_s` faster than it grew before the rescale (the input over what was
    processed, both records/s when decided), by more than `slack` of the input."""
    growth = (last - first) / window_s
    before = max(0.0, input_rate - processed_rate)
    allowed = before + slack * input_rate
    if growth > allowed:
        return (f"lag grew {_figure(growth)}/s over {_figure(window_s)}s ({first:.0f} -> {last:.0f} "
                f"records), more than the {_figure(allowed)}/s allowed (it grew {_figure(before)}/s before)")
    return None


def _figure(value: float) -> str:
    """Whole from 100 up, else three digits: a reason reads "2860/s", not "2.86e+03/s", and
    "0.525/s", not "1/s" beside a growth of 1.17/s rounded the same way."""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
