"""One controller tick: collect → evaluate → decide → guard → act, then journal.

Each step is its own object (collector, evaluator, policy, guards, actuator) so each can be tested
alone; the tick only wires them and owns what lives across ticks: the policy's and the guards'
state. Only the leader ticks past the lease check. An actuation found open in the journal is
resumed before anything new is decided.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import structlog

from autosizer.actuators.base import Actuator, Outcome, Plan
from autosizer.actuators.journal import ActuationJournal, JournalRefused, last_rescale
from autosizer.clock import SYSTEM_CLOCK, Clock, TickSchedule
from autosizer.controller.backoff import BACKOFF_MAX_S, BACKOFF_S, FAILED, Backoff, BackoffStore
from autosizer.controller.collector import PrometheusCollector
from autosizer.controller.evaluator import Evaluation, Evaluator
from autosizer.controller.expansion import ExpansionCheck, ExpansionWatch
from autosizer.controller.history import HistoryStore
from autosizer.controller.journal import DecisionJournal, DecisionRecord
from autosizer.controller.lease import LeaderLease
from autosizer.controller.metrics import DaemonMetrics
from autosizer.controller.overrides import Overrides, OverrideStore
from autosizer.elasticity import Layout
from autosizer.elasticity.store import KeyProblem, MetadataStore, StoreError
from autosizer.pipeline.control import NOT_RUNNING, SILENT_S, ControlChannel, silence
from autosizer.policies.base import Decision, Observation, Policy
from autosizer.policies.guards import Guards, GuardState
from autosizer.policies.history import TRUST_WINDOW_S, InputHistory
from autosizer.redaction import clip, redact

log = structlog.get_logger(__name__)


@dataclass
class Tick:
    store: MetadataStore
    lease: LeaderLease
    overrides: OverrideStore
    collector: PrometheusCollector
    evaluator: Evaluator
    policy: Policy
    guards: Guards
    actuator: Actuator
    actuations: ActuationJournal
    journal: DecisionJournal
    metrics: DaemonMetrics | None = None
    history_store: HistoryStore | None = None  # the input's recent days, for the policy's foresight
    history: InputHistory | None = None  # loaded from it on the first tick
    recall_step_s: float = 15.0  # the step of the last hour read back from Prometheus at that load
    backoff_store: BackoffStore | None = None  # None: no backoff after failed actuations
    backoff_s: float = BACKOFF_S  # the first wait after a failed actuation; doubles per failure
    backoff_max_s: float = BACKOFF_MAX_S
    expansions: ExpansionWatch | None = None  # None: partition counts are not watched
    window_s: float = 0.0  # the input's rate window (`[prometheus] window`); 0: not known
    clock: Clock = SYSTEM_CLOCK
    schedule: TickSchedule | None = None  # the daemon's: ticks stamped with their due times
    policy_state: Any = None
    guard_state: GuardState = field(default_factory=GuardState)
    _reported_errors: tuple[str, ...] = ()
    _wall: float = 0.0
    _history_slot: int | None = None  # the history slot of the last tick that recorded one
    _broken: str | None = None  # how today broke the days' pattern, while it does
    _notes: tuple[str, ...] = ()  # this tick's refused or pending expansions, for its record

    def __call__(self) -> DecisionRecord | None:
        began = time.perf_counter()
        # decisions are stamped when the tick began (when it was due), not when acting ended
        now = self.clock.time()
        self._wall = now if self.schedule is None else self.schedule.stamp(now)
        self._notes = ()
        if self.metrics is not None:
            self.metrics.running_since = time.monotonic()
        try:
            record = self._run(began)
        except Exception as exc:  # a bug or an unforeseen failure: journaled, counted, not raised
            log.exception("tick.crashed", job=self.store.job)
            if self.metrics is not None:
                self.metrics.crashed(f"{type(exc).__name__}: {exc}")
            return self._record(None, None, "error", f"tick crashed: {type(exc).__name__}: {exc}",
                                began)
        else:
            if self.metrics is not None:
                self.metrics.crashed(None)
        finally:
            if self.metrics is not None:
                self.metrics.running_since = None
                self.metrics.last_tick = time.monotonic()
                self.metrics.ticks.inc()
                self.metrics.tick_seconds.observe(time.perf_counter() - began)
        return record

    def _run(self, began: float) -> DecisionRecord | None:
        leader = self.lease.try_acquire()
        if self.metrics is not None:
            self.metrics.leader.set(1 if leader else 0)
        if not leader:
            if self.lease.last_error:  # not a standby by choice: say why, every tick
                return self._record(None, None, "hold", "hold: cannot take the leader lease: "
                                    f"{self.lease.last_error}", began)
            log.debug("tick.standby", job=self.store.job)
            return None
        layout: Layout | None = None
        try:
            layout = self.store.layout()
            return self._lead(layout, began)
        except KeyProblem as exc:  # a key nobody can read: hold, name it, every tick until fixed
            return self._record(layout, None, "hold", f"hold: {exc}", began)
        except StoreError as exc:
            return self._record(layout, None, "error", str(exc), began)

    def _lead(self, layout: Layout, began: float) -> DecisionRecord:
        open_entry = self.actuations.open()
        if open_entry is not None:
            outcome = self._guarded(lambda: self.actuator.resume(open_entry))
            result, reason = self._describe(outcome, open_entry.from_factor,
                                            f"resumed actuation {open_entry.id} from step {open_entry.step}")
            return self._record(layout, open_entry.to_factor, result, reason, began, actuation=outcome)
        overrides = self._read_overrides()
        check = self._check_expansion(layout)
        if check.adopt is not None:
            return self._expand(layout, check, overrides, began)
        samples = self.collector.collect()
        rescaled = last_rescale(self.store)
        since = math.inf if rescaled is None else max(0.0, self._wall - rescaled.at_ms / 1000)
        downtime = None if rescaled is None else rescaled.downtime_s  # the evaluator picks what the policy reads
        evaluation = self.evaluator.evaluate(samples, layout, since, downtime, at=self._wall)
        if rescaled is not None and rescaled.expansion and since < self.window_s:
            evaluation.problems.append(_spans_expansion(self.window_s, since))
        if self.metrics is not None:
            self.metrics.metrics_complete.set(0 if evaluation.problems else 1)
            if not evaluation.problems:
                self.metrics.metrics_age.set(evaluation.observation.age_s)
        decision = self._decide(evaluation, overrides, layout)
        inputs = _inputs(evaluation, samples.seconds)
        if decision.factor == layout.factor:
            if overrides.rescale and not evaluation.problems:
                self._consume_rescale()  # acted on: the decision, cooldown skipped, is to hold
            return self._record(layout, decision.factor, "hold", decision.reason, began, inputs,
                                overrides, details=decision.details)
        if overrides.pause:
            return self._record(layout, decision.factor, "paused",
                                f"paused by override; would go {layout.factor} -> {decision.factor}: "
                                f"{decision.reason}", began, inputs, overrides)
        backoff = self._backoff()
        if backoff.active(self._wall) and not overrides.rescale:
            return self._record(layout, decision.factor, "backoff",
                                f"{backoff.describe(self._wall)}; would go {layout.factor} -> "
                                f"{decision.factor}: {decision.reason}", began, inputs, overrides)
        obs = evaluation.observation
        trusted = not evaluation.problems  # a pin acts without metrics: verify commits only
        plan = Plan(layout.generation, layout.factor, decision.factor, decision.reason,
                    obs.lag_records if trusted else None, obs.input_rate if trusted else 0.0,
                    obs.processed_rate if trusted else 0.0)
        outcome = self._guarded(lambda: self.actuator.act(plan))
        if overrides.rescale and not isinstance(outcome, JournalRefused):
            self._consume_rescale()
        self._after_actuation(backoff, outcome)
        result, reason = self._describe(outcome, layout.factor, decision.reason)
        return self._record(layout, decision.factor, result, reason, began, inputs, overrides,
                            actuation=outcome, details=decision.details)

    def _check_expansion(self, layout: Layout) -> ExpansionCheck:
        if self.expansions is None:
            return ExpansionCheck()
        check = self.expansions.check(layout, int(self._wall * 1000))
        self._notes = check.notes
        return check

    def _expand(self, layout: Layout, check: ExpansionCheck, overrides: Overrides,
                began: float) -> DecisionRecord:
        """Adopt a multiplied partition count through the actuator, journaled like a rescale."""
        grown = check.adopt
        assert grown is not None and self.expansions is not None
        reason = (f"{grown.describe()}{' (asked by `autosizer layout expand`)' if check.asked else ''}; "
                  f"{grown.barrier_summary()}")
        if overrides.pause:
            return self._record(layout, layout.factor, "paused", f"paused by override; would adopt "
                                f"{reason}", began, overrides=overrides)
        backoff = self._backoff()
        if backoff.active(self._wall) and not check.asked:
            return self._record(layout, layout.factor, "backoff", f"{backoff.describe(self._wall)}; "
                                f"would adopt {reason}", began, overrides=overrides)
        coupled = grown.until_ms is not None
        plan = Plan(layout.generation, layout.factor, layout.factor, reason, partitions=grown.counts,
                    barriers=None if coupled else grown.barriers, coupled_until_ms=grown.until_ms)
        outcome = self._guarded(lambda: self.actuator.act(plan))
        if not isinstance(outcome, JournalRefused):
            self.expansions.adopted(check)
        self._after_actuation(backoff, outcome)
        result, why = self._describe(outcome, layout.factor, reason, done="expand")
        return self._record(layout, layout.factor, result, why, began, overrides=overrides,
                            actuation=outcome)

    # --- the steps -----------------------------------------------------------------------------

    def _decide(self, evaluation: Evaluation, overrides: Overrides, layout: Layout) -> Decision:
        """Policy, then guards; a pin replaces both, untrustworthy metrics skip the policy (and the
        history: a pinned job's input is still its input, a partial sample is not)."""
        obs = evaluation.observation
        if not evaluation.problems:
            obs = self._with_history(obs)
        if overrides.factor is not None:
            return Decision(overrides.factor, f"pinned to {overrides.factor} by override")
        if evaluation.problems:
            return Decision(layout.factor, "hold: " + "; ".join([*self._pipeline_down(), *evaluation.problems]))
        wish, self.policy_state = self.policy.decide(obs, self.policy_state)
        decision, self.guard_state = overrides.guards(self.guards).apply(obs, wish, self.guard_state)
        return decision

    def _pipeline_down(self) -> list[str]:
        """Why the metrics are missing, when the pipeline's own report in Redis says so: it failed
        (its error), it stopped reporting, or it never reported. Prometheus shows only that the
        series are gone, and the reason then asked whether Prometheus scrapes the pipeline."""
        try:
            status = ControlChannel(self.store).status()
        except StoreError:
            return []  # Redis' own trouble is reported where the tick reads it
        state = status.get("state")
        if not state:
            return ["the pipeline has never reported to Redis (is it running, with this job's --job and --redis?)"]
        if state == "failed":
            return [f"the pipeline failed: {clip(redact(status.get('error') or 'no error recorded'), 500)}"]
        silent = silence(status, self._wall)
        if silent is not None and silent > SILENT_S:
            return [f"the pipeline last reported {state} {silent:.0f}s ago ({NOT_RUNNING})"]
        return []

    def _with_history(self, obs: Observation) -> Observation:
        """Record this tick's input in the history (Redis too) and hand the history to the policy;
        a Redis failure costs only the write, the history in memory goes on."""
        if self.history_store is None:
            return obs
        if self.history is None:
            self.history = self.history_store.load()
            self._recall_trust_window(self.history, obs.time)
        slot = int(obs.time // self.history.slot_s)
        if slot != self._history_slot:
            if self._history_slot is not None:
                # each new slot, the days as Redis has them: `autosizer history backfill` needs no restart
                self.history = self.history_store.refresh(self.history, self.history.day_of(obs.time))
            self._history_slot = slot
            self._report_pattern(self.history, obs.time)
        day = self.history.record(obs.time, obs.input_rate)
        if day is not None:
            try:
                self.history_store.save(self.history, day)
            except StoreError as exc:
                log.error("history.unwritable", job=self.store.job, error=str(exc))
        return replace(obs, history=self.history)

    def _recall_trust_window(self, history: InputHistory, now: float) -> None:
        """Read the last hour of the input back from Prometheus into the history (slot peaks, so
        what is on record stays): a daemon new to the job, or back after a while down, has no
        record of the hour the trust check reads, and would believe the days for an hour on a
        day that broke them. Prometheus unable to answer costs only that: logged, and the check
        goes on with what is on record."""
        try:
            points = self.collector.input_since(now - TRUST_WINDOW_S, now, self.recall_step_s)
        except ValueError as exc:
            log.warning("history.recall_failed", job=self.store.job, error=str(exc))
            return
        days = {day for at, rate in points if at < now and (day := history.record(at, rate)) is not None}
        for day in sorted(days):
            try:
                self.history_store.save(history, day)
            except StoreError as exc:
                log.error("history.unwritable", job=self.store.job, error=str(exc))
                return
        log.info("history.recalled", job=self.store.job, points=len(points), days_raised=len(days))

    def _report_pattern(self, history: InputHistory, now: float) -> None:
        """Log when today breaks the days' pattern and when it agrees again: the day plan goes off
        and on there, which an operator should not have to piece together from the reasons."""
        broken = history.broken(now)
        if broken and not self._broken:
            log.warning("history.pattern_broken", job=self.store.job, why=broken)
        elif self._broken and not broken:
            log.info("history.pattern_restored", job=self.store.job)
        self._broken = broken

    def _guarded(self, act) -> Outcome | Exception:
        """Run an actuation; a refusal or store failure is reported, never raised into the scheduler."""
        began = time.perf_counter()
        try:
            outcome = act()
        except (StoreError, JournalRefused) as exc:
            return exc
        except Exception as exc:  # an actuator's own failure (a plug-in's too): journaled
            log.exception("actuation.crashed", job=self.store.job)
            return RuntimeError(f"{type(exc).__name__}: {exc}")
        if self.metrics is not None and outcome.result != "dry_run":
            self.metrics.actuation_seconds.observe(time.perf_counter() - began)
        return outcome

    @staticmethod
    def _describe(outcome: Outcome | Exception, factor: int, reason: str = "",
                  done: str | None = None) -> tuple[str, str]:
        """The decision's outcome and reason; a completed actuation is `done` (an expansion), or a
        scale-up or scale-down by the factor it reached."""
        if isinstance(outcome, Exception):
            return "error", f"actuation not done: {outcome}"
        if outcome.result == "done":
            return done or ("scale_up" if outcome.factor > factor else "scale_down"), reason
        return outcome.result, "; ".join(p for p in (reason, outcome.detail) if p)

    def _read_overrides(self) -> Overrides:
        """The overrides; a Redis failure here fails the tick (a pause must never be missed)."""
        found = self.overrides.read()
        if found.errors != self._reported_errors:
            for error in found.errors:
                log.error("override.invalid", job=self.store.job, error=error)
            self._reported_errors = found.errors
        return found

    def _backoff(self) -> Backoff:
        return Backoff() if self.backoff_store is None else self.backoff_store.read()

    def _after_actuation(self, backoff: Backoff, outcome: Outcome | Exception) -> None:
        """A completed rescale clears the backoff; a failed one doubles it. A refusal (lease
        lost, another actuation open) was no attempt and changes nothing."""
        if self.backoff_store is None or isinstance(outcome, JournalRefused):
            return
        result = "error" if isinstance(outcome, Exception) else outcome.result
        if result in FAILED:
            why = f"{result}: {outcome if isinstance(outcome, Exception) else outcome.detail}"
            after = backoff.after_failure(self._wall, why, self.backoff_s, self.backoff_max_s)
            log.warning("actuation.backoff", job=self.store.job, failures=after.failures,
                        wait_s=round(after.until - self._wall, 1), last=why)
        elif result == "done":
            after = Backoff()
        else:
            return
        if after != backoff:
            self._save_backoff(after)

    def _save_backoff(self, backoff: Backoff) -> None:
        try:
            self.backoff_store.save(backoff)  # type: ignore[union-attr]
        except StoreError as exc:
            log.error("backoff.unwritable", job=self.store.job, error=str(exc))

    def _consume_rescale(self) -> None:
        try:
            self.overrides.clear("rescale")
        except StoreError as exc:
            log.error("override.clear_failed", job=self.store.job, error=str(exc))

    def _record(self, layout: Layout | None, target: int | None, outcome: str, reason: str,
                began: float, inputs: dict[str, Any] | None = None, overrides: Overrides | None = None,
                actuation: Outcome | Exception | None = None,
                details: Any = None) -> DecisionRecord:
        factor = layout.factor if layout else 0
        if self._notes:
            reason = "; ".join((reason, *self._notes))
            inputs = {**(inputs or {}), "topology": list(self._notes)}
        applied = None
        if isinstance(actuation, Outcome):
            applied = {**asdict(actuation), "seconds": round(actuation.seconds, 3)}
        elif actuation is not None:
            applied = {"result": "error", "detail": str(actuation)}
        record = DecisionRecord(
            time=self._wall, job=self.store.job, generation=layout.generation if layout else 0,
            factor=factor, target=target or factor, outcome=outcome, reason=reason,
            inputs={**(inputs or {}), **({"policy": _plain(details)} if details else {})},
            overrides=_overrides(overrides), actuation=applied, holder=self.lease.holder,
            tick_ms=round((time.perf_counter() - began) * 1000, 2),
        )
        try:
            self.journal.append(record)
        except StoreError as exc:
            log.error("journal.unwritable", job=self.store.job, error=str(exc))
        if self.metrics is not None:
            self.metrics.decisions.labels(outcome).inc()
            current = actuation.factor if isinstance(actuation, Outcome) else factor
            if current:
                self.metrics.factor.set(current)
        return record


def _inputs(evaluation: Evaluation, prometheus_s: float) -> dict[str, Any]:
    obs = evaluation.observation
    out: dict[str, Any] = {"prometheus_ms": round(prometheus_s * 1000, 1)}
    if evaluation.problems:
        out["problems"] = evaluation.problems
        return out
    out.update(lag_records=round(obs.lag_records, 1),
               lag_seconds=round(float(obs.partitions.lag_seconds.max(initial=0.0)), 2),
               input_rate=round(obs.input_rate, 2), processed_rate=round(obs.processed_rate, 2),
               task_capacity=None if obs.task_capacity is None else round(obs.task_capacity, 2),
               saturated_rate=None if obs.saturated_rate is None else round(obs.saturated_rate, 2),
               capacity=None if obs.task_rate is None else round(obs.capacity(obs.factor, obs.task_rate), 1),
               duty=round(obs.duty, 3),
               cpu_ceiling=None if obs.cpu_ceiling is None else round(obs.cpu_ceiling, 1),
               age_s=round(obs.age_s, 1), since_rescale_s=None if math.isinf(obs.since_rescale_s)
               else round(obs.since_rescale_s, 1), restart_s=round(obs.restart_downtime_s, 2))
    if evaluation.notes:
        out["notes"] = evaluation.notes
    return out


def _overrides(overrides: Overrides | None) -> dict[str, Any]:
    if overrides is None:
        return {}
    out: dict[str, Any] = {name: value for name, (value, _) in overrides.raw.items()}
    if overrides.errors:
        out["errors"] = list(overrides.errors)
    return out


def _plain(details: Any) -> dict[str, Any]:
    """Policy details as JSON-friendly numbers and strings."""
    out = {}
    for key, value in dict(details).items():
        if isinstance(value, float):
            out[key] = round(value, 3) if math.isfinite(value) else None
        elif isinstance(value, (int, str, bool)) or value is None:
            out[key] = value
        else:
            out[key] = str(value)
    return out


def _spans_expansion(window_s: float, since_s: float) -> str:
    """Why a tick whose input window reaches back past an adopted expansion holds. The window
    reads each parent's rise over all of it, its new partitions' records in it until the
    adoption, and each new partition's rise since its first reading, the same records again as a
    rate over a shorter span: run e2's tick 2 s after its 4 -> 8 read 1,535/s of 1,200/s, the
    policy forecast 2,045/s, and held 8 (20% busy) to the run's end: 1,535/s is 52% of factor 4, past
    the 50% a scale-down needs, and the policy remembers a peak for `lull_memory_s` (3 h)."""
    return (f"the input's {window_s:g}s rate window still spans the partition expansion adopted "
            f"{since_s:.0f}s ago (a new partition's records read under its parent until then and as "
            f"its own after: counted twice); the input reads true from {window_s - since_s:.0f}s on")
