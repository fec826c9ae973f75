"""`autosizer run`: the controller daemon. Builds the tick from the config and runs it on an
APScheduler interval (no overlapping runs, missed runs coalesced into one), serves /metrics and
/healthz, keeps the leader lease warm, and on SIGTERM lets the running tick finish, then releases
the lease so a standby takes over at once.
"""

from __future__ import annotations

import logging
import signal
import threading
from datetime import UTC, datetime

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from autosizer.actuators.base import ActuatorContext
from autosizer.actuators.journal import ActuationJournal
from autosizer.actuators.registry import load_actuator
from autosizer.clock import SYSTEM_CLOCK, Clock, TickSchedule
from autosizer.controller.backoff import BackoffStore
from autosizer.controller.collector import PrometheusCollector
from autosizer.controller.config import Config
from autosizer.controller.evaluator import Evaluator
from autosizer.controller.expansion import ExpansionWatch
from autosizer.controller.history import HistoryStore
from autosizer.controller.journal import DecisionJournal
from autosizer.controller.lease import LeaderLease
from autosizer.controller.metrics import DaemonMetrics, serve
from autosizer.controller.overrides import OverrideStore
from autosizer.controller.tick import Tick
from autosizer.elasticity.store import MetadataStore
from autosizer.policies.registry import load_policy

log = structlog.get_logger(__name__)


def build_tick(config: Config, metrics: DaemonMetrics | None = None,
               clock: Clock = SYSTEM_CLOCK) -> Tick:
    """Every part of a tick from the config; bad plug-in names or settings raise ValueError.
    `clock` is the one the tick, the actuation journal and the actuator read."""
    store = MetadataStore(config.job.redis_url, config.job.name)
    lease = LeaderLease(store, config.daemon.lease_ttl_s)
    p = config.prometheus
    collector = PrometheusCollector(p.url, p.queries, p.selector, p.window, p.timeout_s)
    actuations = ActuationJournal(store, lease.holder, clock)
    context = ActuatorContext(store, actuations, collector.lag, clock)
    return Tick(
        store=store, lease=lease, overrides=OverrideStore(store), collector=collector,
        evaluator=Evaluator(), policy=load_policy(config.policy.name, dict(config.policy.settings)),
        guards=config.guards,
        actuator=load_actuator(config.actuator.name, context, dict(config.actuator.settings)),
        actuations=actuations, journal=DecisionJournal(store, config.daemon.journal_length),
        metrics=metrics, history_store=HistoryStore(store, zone=config.job.timezone),
        recall_step_s=config.daemon.interval_s,
        backoff_store=BackoffStore(store),
        backoff_s=config.daemon.backoff_s, backoff_max_s=config.daemon.backoff_max_s, clock=clock,
        expansions=ExpansionWatch(store, config.daemon.adopt_after_s), window_s=p.window_s,
    )


def max_tick_seconds(actuator: object, interval_s: float) -> float:
    """The longest a healthy tick may run: the actuator's longest actuation (a forward one and its
    rollback), plus one interval of slack; 900 s for an actuator that does not say."""
    longest = getattr(actuator, "longest_s", None)
    return 900.0 if longest is None else longest() + max(60.0, interval_s)


class Daemon:
    def __init__(self, config: Config):
        self.config = config
        self.metrics = DaemonMetrics(config.daemon.interval_s)
        self.tick = build_tick(config, self.metrics)
        self.metrics.checks.append(self.tick.lease.problem)
        self.metrics.max_tick_s = max_tick_seconds(self.tick.actuator, config.daemon.interval_s)
        self.stopping = threading.Event()
        self.scheduler = BackgroundScheduler(timezone="UTC")
        # A tick that runs long (an actuation) makes APScheduler skip, and say so, at every
        # interval; that is the intended no-overlap behaviour, not news.
        logging.getLogger("apscheduler").setLevel(logging.ERROR)
        self.server = None

    def run(self) -> None:
        """Tick until SIGTERM or SIGINT (or `stopping` is set)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, lambda *_: self.stopping.set())
            signal.signal(signal.SIGINT, lambda *_: self.stopping.set())
            signal.signal(signal.SIGHUP, lambda *_: log.warning(
                "daemon.sighup_ignored", job=self.config.job.name,
                detail="the config is read at start: restart the daemon to apply a change"))
        self.metrics.ticks_scheduled()
        if self.config.daemon.listen:
            self.server = serve(self.metrics, self.config.daemon.listen)
        self.tick.lease.start()
        # The ticks are due on a grid the tick knows, so it stamps each with its due time.
        self.tick.schedule = TickSchedule(self.tick.clock.time() + 0.01, self.config.daemon.interval_s)
        due = datetime.fromtimestamp(self.tick.schedule.start, UTC)  # the scheduler's grid is the stamps
        self.scheduler.add_job(
            self._tick, "interval", seconds=self.config.daemon.interval_s, id="tick",
            max_instances=1, coalesce=True, misfire_grace_time=None, start_date=due, next_run_time=due,
        )
        self.scheduler.start()
        log.info("daemon.started", job=self.config.job.name, config=self.config.source,
                 policy=self.config.policy.name, actuator=self.config.actuator.name,
                 interval_s=self.config.daemon.interval_s, holder=self.tick.lease.holder,
                 listen=self.config.daemon.listen or None)
        try:
            self.stopping.wait()
        finally:
            self.shutdown()

    def _tick(self) -> None:
        try:
            self.tick()
        except Exception:  # one bad tick must not kill the daemon; the next one tries again
            log.exception("tick.crashed", job=self.config.job.name)

    def shutdown(self) -> None:
        log.info("daemon.stopping", job=self.config.job.name,
                 detail="waiting for the running tick to finish")
        self.scheduler.shutdown(wait=True)
        self.tick.lease.release()
        if self.server is not None:
            self.server.shutdown()
        log.info("daemon.stopped", job=self.config.job.name)
