"""The daemon's own /metrics and /healthz, on one small HTTP server.

/healthz answers 200 while the daemon can do its job, else 503 with one line saying why, so
systemd or Kubernetes can restart it and an operator can read the cause:
- no tick finished within three intervals, or the running one (an actuation) began more than
  `max_tick_s` ago (derived from the actuator's timeouts);
- the last three ticks crashed;
- any registered check fails (the lease's: Redis silent or refusing the credentials for longer
  than a lease period, or the lease thread dead).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from autosizer.redaction import redact


class DaemonMetrics:
    def __init__(self, interval_s: float):
        self.registry = CollectorRegistry()
        self.interval_s = interval_s
        self.ticks = Counter("autosizer_daemon_ticks", "Controller ticks run", registry=self.registry)
        self.decisions = Counter("autosizer_daemon_decisions", "Decisions by outcome", ["outcome"],
                                 registry=self.registry)
        self.factor = Gauge("autosizer_daemon_factor", "Elasticity factor of the current layout",
                            registry=self.registry)
        self.leader = Gauge("autosizer_daemon_leader", "1 while this daemon holds the leader lease",
                            registry=self.registry)
        # The policy's goals were measured with metrics up to 4 s old (a 1-5 s scrape); alert on it.
        self.metrics_age = Gauge("autosizer_daemon_metrics_age_seconds",
                                 "How old the newest pipeline sample the last tick read was",
                                 registry=self.registry)
        # 0 while the leader's ticks hold on incomplete metrics: nothing sizes the job then, and
        # /healthz stays 200 (the daemon works; its inputs do not), so an alert watches this
        self.metrics_complete = Gauge("autosizer_daemon_metrics_complete",
                                      "1 when the last tick read every metric it needs, 0 when it held without",
                                      registry=self.registry)
        self.tick_seconds = Histogram("autosizer_daemon_tick_seconds", "Tick duration, actuation included",
                                      registry=self.registry)
        self.actuation_seconds = Histogram(
            "autosizer_daemon_actuation_seconds", "Actuation duration, drain to verified",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600), registry=self.registry)
        self.last_tick = time.monotonic()  # start counts as a tick: healthy until proven stuck
        self.running_since: float | None = None
        self.max_tick_s = 900.0
        self.crashes = 0  # consecutive
        self.last_crash = ""
        self.checks: list[Callable[[], str | None]] = []

    def ticks_scheduled(self) -> None:
        """Start the "no tick finished" clock when the ticks are scheduled, not when this object
        was built: a slow start (imports, Redis, the actuator's setup on 2 busy cores) read as
        `stuck` for the seconds before the first tick, then `ok` while it ran."""
        self.last_tick = time.monotonic()

    def crashed(self, error: str | None) -> None:
        """Count a crashed tick (`error`), or reset the count after one that did not crash."""
        if error is None:
            self.crashes = 0
        else:
            self.crashes, self.last_crash = self.crashes + 1, error

    def problem(self) -> str | None:
        """Why the daemon cannot do its job now, or None when it can."""
        now = time.monotonic()
        if self.running_since is not None and now - self.running_since >= self.max_tick_s:
            return f"stuck: a tick has run for {now - self.running_since:.0f}s (limit {self.max_tick_s:.0f}s)"
        if self.running_since is None and now - self.last_tick >= 3 * self.interval_s:
            return f"stuck: no tick finished in {now - self.last_tick:.0f}s"
        if self.crashes >= 3:
            return f"ticks crashing: {self.crashes} in a row, last: {self.last_crash[:200]}"
        for check in self.checks:
            found = check()
            if found:
                return found
        return None

    def healthy(self) -> bool:
        return self.problem() is None


def serve(metrics: DaemonMetrics, address: str) -> ThreadingHTTPServer:
    host, port = address.rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path.startswith("/metrics"):
                body, status, kind = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith("/healthz"):
                problem = metrics.problem()
                body = b"ok\n" if problem is None else redact(problem).encode() + b"\n"
                status, kind = (200 if problem is None else 503), "text/plain"
            else:
                body, status, kind = b"not found: try /metrics or /healthz\n", 404, "text/plain"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    try:
        server = ThreadingHTTPServer((host, int(port)), Handler)
    except OSError as exc:
        raise ValueError(f"cannot serve /metrics on {address} ({exc.strerror}): pick a free port "
                         "in [daemon] listen, or \"\" for none") from None
    threading.Thread(target=server.serve_forever, name="autosizer-http", daemon=True).start()
    return server
