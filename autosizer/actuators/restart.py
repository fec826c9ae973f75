"""The rescale every restarting actuator shares: stop → migrate → start → verify, journaled.

Each step is journaled before it runs, and each is safe to run again, so a daemon killed anywhere
resumes from the journal: a drain request is idempotent, the migration only happens while the old
generation is still current, a start request to a running pipeline does nothing, and verification
simply starts over. If the pipeline does not stop in time, the old layout is resumed ("aborted").
If the new generation does not commit in time, or lag is worse after the verification window, the
same path runs backwards to the previous factor ("rolled_back"). Lag is "worse" when, over the
verification window after the first commit, the backlog grows faster than it did before the
rescale by more than `verify_lag_slack` of the input rate.

Subclasses say how to stop and start the pipeline.
"""

from __future__ import annotations

import os
import time

import structlog

from autosizer.actuators.base import ActuatorContext, Outcome, Plan, number
from autosizer.actuators.journal import Entry, record_rescale
from autosizer.actuators.verification import (
    VERIFY_LAG_SLACK,
    VERIFY_WINDOW_S,
    lag_got_worse,
    slowest,
    tail_times,
)

log = structlog.get_logger(__name__)

# Fault injection for the crash tests: after journaling this step, stop here until killed.
HOLD_AT_STEP = "AUTOSIZER_HOLD_AT_STEP"


class RestartActuator:
    name = "restart"

    def __init__(self, context: ActuatorContext, drain_timeout_s: float = 120.0,
                 start_timeout_s: float = 180.0, verify_timeout_s: float = 180.0,
                 verify_window_s: float = VERIFY_WINDOW_S, verify_lag_slack: float = VERIFY_LAG_SLACK):
        self.context, self.store, self.journal = context, context.store, context.journal
        self.clock = context.clock
        self.drain_timeout = number("drain_timeout_s", drain_timeout_s, 1)
        self.start_timeout = number("start_timeout_s", start_timeout_s, 1)
        self.verify_timeout = number("verify_timeout_s", verify_timeout_s, 1)
        self.verify_window = number("verify_window_s", verify_window_s)
        self.slack = number("verify_lag_slack", verify_lag_slack)

    def longest_s(self) -> float:
        """The longest an actuation may take with its rollback, each way bounded by the timeouts
        (the daemon's /healthz allows a tick this long)."""
        return 2 * (self.stop_limit + self.start_timeout + self.verify_timeout + self.verify_window)

    @property
    def stop_limit(self) -> float:
        """How long `stop` may wait."""
        return self.drain_timeout

    # --- what subclasses provide ---------------------------------------------------------------

    def stop(self, generation: int) -> bool:
        """Stop processing `generation` after its in-flight batch; False if it did not in time."""
        raise NotImplementedError

    def start(self, generation: int) -> bool:
        """Run the now-current `generation`; False if it did not start in time."""
        raise NotImplementedError

    # --- the rescale ---------------------------------------------------------------------------

    def act(self, plan: Plan) -> Outcome:
        entry = self.journal.begin(plan.from_generation, plan.from_factor, plan.to_factor,
                                   plan.reason, plan.lag_before, plan.input_rate, plan.processed_rate,
                                   partitions=plan.partitions, barriers=plan.barriers,
                                   coupled_until_ms=plan.coupled_until_ms)
        return self.resume(entry)

    def resume(self, entry: Entry) -> Outcome:
        began = self.clock.monotonic()
        steps: list[str] = []
        log.info("actuation.step", id=entry.id, step=entry.step, from_factor=entry.from_factor,
                 to_factor=entry.to_factor, rollback=entry.rollback)
        self._hold_here(entry.step)
        if entry.step == "drain":
            if not entry.drain_ms:
                entry = self.journal.advance(entry, "drain", drain_ms=int(self.clock.time() * 1000))
            steps.append("drain")
            if not self.stop(entry.from_generation):
                self.start(entry.from_generation)
                self.journal.finish(entry, "aborted")
                return self._outcome("aborted", entry.from_factor, entry.from_generation,
                                     f"the pipeline did not stop within {self.drain_timeout:.0f}s; "
                                     "the old layout was resumed", began, steps)
            entry = self._advance(entry, "migrate")
        if entry.step == "migrate":
            steps.append("migrate")
            current = self.store.current_generation()
            if current == entry.from_generation:
                layout = self.store.layout(entry.from_generation)
                self.store.migrate(entry.from_generation, entry.next_layout(layout))
            elif current != entry.to_generation:
                self.journal.finish(entry, "failed")
                return self._outcome("failed", entry.from_factor, current or 0,
                                     f"layout generation is {current}, neither {entry.from_generation} "
                                     f"nor {entry.to_generation}: someone else changed it", began, steps)
            entry = self._advance(entry, "start")
        if entry.step == "start":
            steps.append("start")
            started = self.start(entry.to_generation)
            entry = self._advance(entry, "verify")
            if not started:
                return self._roll_back(entry, f"generation {entry.to_generation} did not start "
                                              f"within {self.start_timeout:.0f}s", began, steps)
        steps.append("verify")
        failure, downtime = self._verify(entry)
        if failure is not None:
            return self._roll_back(entry, failure, began, steps)
        record_rescale(self.store, downtime, self.clock.time(), expansion=entry.expansion)
        self.journal.finish(entry, "rolled_back" if entry.rollback else "done")
        return self._outcome("rolled_back" if entry.rollback else "done", entry.to_factor,
                             entry.to_generation, "", began, steps)

    def _advance(self, entry: Entry, step: str) -> Entry:
        entry = self.journal.advance(entry, step)
        log.info("actuation.step", id=entry.id, step=step)
        self._hold_here(step)
        return entry

    def _committed(self, generation: int) -> bool | None:
        """None until `generation` committed a batch; then whether the pipeline has since moved
        to a later generation on its own (a Kinesis re-shard, taken in place from a running
        generation, so a commit under a later generation also answers for this one)."""
        current = self.store.current_generation() or generation
        for g in range(generation, current + 1):
            if self.store.committed_batch(g) >= 1:
                return current > generation
        return None

    def _verify(self, entry: Entry) -> tuple[str | None, float]:
        """(None, downtime) when the new generation committed a batch and lag did not get worse;
        else (why, downtime). Downtime runs from the drain request to that first commit."""
        deadline = self.clock.monotonic() + self.verify_timeout
        while (moved := self._committed(entry.to_generation)) is None:
            if self.clock.monotonic() > deadline:
                return (f"generation {entry.to_generation} committed no batch within "
                        f"{self.verify_timeout:.0f}s"), self._downtime(entry)
            self.clock.sleep(0.2)
        downtime = self._downtime(entry)
        if (entry.rollback or self.verify_window <= 0 or entry.lag_before is None
                or entry.to_factor > entry.from_factor or entry.expansion or moved):
            # After a Kinesis re-shard (the pipeline took a later generation in place) there is
            # no layout of this actuation left to roll back to: commits are the check.
            # A scale-up cannot make the backlog grow faster; the policy judges whether it
            # helped. Watching its lag would only keep the daemon from its next tick. After an
            # expansion the new partitions' backlog joins the lag: commits are the check.
            return None, downtime
        first, tail = self.context.lag(), self._tail_readings()
        if first is None or not tail:
            log.warning("actuation.verify_lag_unknown", id=entry.id,
                        detail="no lag reading around the verification window; checked commits only")
            return None, downtime
        seconds, last = slowest(first, tail)
        worse = lag_got_worse(first, last, seconds, entry.input_rate, entry.processed_rate, self.slack)
        if worse is None:  # logged too: a check passed near its limit explains what came next
            log.info("actuation.lag_check_passed", id=entry.id, lag_first=first, lag_last=last,
                     window_s=round(seconds, 2), input_rate=entry.input_rate,
                     processed_rate=entry.processed_rate, slack=self.slack)
        return (None if worse is None else f"under factor {entry.to_factor}: {worse}"), downtime

    def _tail_readings(self) -> list[tuple[float, float]]:
        """The lag at `tail_times` of the window (seconds since its start, as read), the unknown
        ones left out."""
        began, readings = self.clock.monotonic(), []
        for due in tail_times(self.verify_window):
            self.clock.sleep(max(0.0, due - (self.clock.monotonic() - began)))
            seconds, lag = self.clock.monotonic() - began, self.context.lag()
            if lag is not None and seconds > 0:  # a growth needs time (a clock that stood still)
                readings.append((seconds, lag))
        return readings

    def _roll_back(self, entry: Entry, why: str, began: float, steps: list[str]) -> Outcome:
        if entry.expansion:
            # A topic cannot lose partitions: the expanded layout stays, and the failure backs off.
            self.journal.finish(entry, "failed")
            log.error("actuation.expansion_failed", id=entry.id, error=why)
            return self._outcome("failed", entry.to_factor, entry.to_generation,
                                 f"{why} (an expansion is not rolled back: the topic keeps its new "
                                 "partitions; the pipeline runs the expanded layout once it starts)",
                                 began, steps)
        if entry.rollback:
            self.journal.finish(entry, "failed")
            log.error("actuation.rollback_failed", id=entry.id, error=why)
            return self._outcome("failed", entry.to_factor, entry.to_generation,
                                 f"rollback failed: {why}", began, steps)
        log.warning("actuation.rolling_back", id=entry.id, error=why)
        back = self.journal.begin(entry.to_generation, entry.to_factor, entry.from_factor,
                                  f"rollback: {why}", rollback=True)
        result = self.resume(back)
        detail = why if result.result == "rolled_back" else f"{why}; {result.detail}"
        return self._outcome(result.result, result.factor, result.generation, detail, began,
                             steps + result.steps)

    def _downtime(self, entry: Entry) -> float:
        return max(0.0, self.clock.time() - entry.drain_ms / 1000) if entry.drain_ms else 0.0

    def _outcome(self, result: str, factor: int, generation: int, detail: str, began: float,
                 steps: list[str]) -> Outcome:
        return Outcome(result, factor, generation, detail, self.clock.monotonic() - began, steps)

    @staticmethod
    def _hold_here(step: str) -> None:
        if os.environ.get(HOLD_AT_STEP) == step:
            log.warning("actuation.held_for_fault_injection", step=step, env=HOLD_AT_STEP)
            while True:
                time.sleep(3600)
