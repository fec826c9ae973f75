"""`dry-run`: the daemon decides and journals as usual, and nothing changes. For trying a policy
on a live job before letting it act."""

from __future__ import annotations

from autosizer.actuators.base import ActuatorContext, Outcome, Plan
from autosizer.actuators.journal import Entry


class DryRun:
    name = "dry-run"

    def __init__(self, context: ActuatorContext):
        self.context = context

    def act(self, plan: Plan) -> Outcome:
        return Outcome("dry_run", plan.from_factor, plan.from_generation,
                       f"would rescale {plan.from_factor} -> {plan.to_factor}")

    def resume(self, entry: Entry) -> Outcome:
        # Another actuator left this entry; a dry run must not finish someone else's rescale.
        return Outcome("dry_run", entry.from_factor, entry.from_generation,
                       f"actuation {entry.id} is open at step {entry.step}; dry-run leaves it")
