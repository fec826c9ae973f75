"""The lag check after a scale-down, one rule for the restart actuator and the simulator.

A scale-down too far shows within seconds: the backlog grows faster than it did before. The
actuator watches the lag for `VERIFY_WINDOW_S` after the new generation's first commit and rolls
back when it grew faster than before the rescale by more than `VERIFY_LAG_SLACK` of the input
(a scale-up is judged by the policy instead: more tasks cannot make the backlog grow faster).
The daemon is inside the actuation all that while, so it does not tick; the simulator runs the
same rule, so a policy that scales down too far is scored with the rollback and the wait a real
daemon gets (run 82's 8 -> 1 kept the daemon 30.8 s).
"""

from __future__ import annotations

VERIFY_WINDOW_S = 30.0
VERIFY_LAG_SLACK = 0.25


def lag_got_worse(first: float, last: float, window_s: float, input_rate: float,
                  processed_rate: float, slack: float = VERIFY_LAG_SLACK) -> str | None:
    """Why the new layout falls behind (None when it does not): the backlog grew from `first` to
    `last` records over `window_s` faster than it grew before the rescale (the input over what was
    processed, both records/s when decided), by more than `slack` of the input."""
    growth = (last - first) / window_s
    before = max(0.0, input_rate - processed_rate)
    allowed = before + slack * input_rate
    if growth > allowed:
        return (f"lag grew {growth:.0f}/s over {window_s:.0f}s, more than the {allowed:.0f}/s "
                f"allowed (it grew {before:.0f}/s before)")
    return None
