"""`dry-run`: the daemon decides and journals as usual, and nothing changes. For trying a policy
on a live job before letting it act.

It takes (and checks, and ignores) the restarting actuators' timeouts, so switching a config
between `restart-in-driver` and `dry-run` is one line (`AUTOSIZER_ACTUATOR_NAME=dry-run`)."""

from __future__ import annotations

from autosizer.actuators.base import ActuatorContext, Outcome, Plan, number
from autosizer.actuators.journal import Entry


class DryRun:
    name = "dry-run"

    def __init__(self, context: ActuatorContext, drain_timeout_s: float = 120.0,
                 start_timeout_s: float = 180.0, verify_timeout_s: float = 180.0,
                 verify_window_s: float = 30.0, verify_lag_slack: float = 0.25):
        self.context = context
        for name, value, low in (("drain_timeout_s", drain_timeout_s, 1),
                                 ("start_timeout_s", start_timeout_s, 1),
                                 ("verify_timeout_s", verify_timeout_s, 1),
                                 ("verify_window_s", verify_window_s, 0),
                                 ("verify_lag_slack", verify_lag_slack, 0)):
            number(name, value, low)

    def act(self, plan: Plan) -> Outcome:
        if plan.partitions is not None:
            return Outcome("dry_run", plan.from_factor, plan.from_generation,
                           f"would adopt partition counts {dict(plan.partitions)}")
        return Outcome("dry_run", plan.from_factor, plan.from_generation,
                       f"would rescale {plan.from_factor} -> {plan.to_factor}")

    def resume(self, entry: Entry) -> Outcome:
        # Another actuator left this entry; a dry run must not finish someone else's rescale.
        return Outcome("dry_run", entry.from_factor, entry.from_generation,
                       f"actuation {entry.id} is open at step {entry.step}; dry-run leaves it")
