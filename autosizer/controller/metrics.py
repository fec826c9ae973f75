"""The daemon's own /metrics and /healthz, on one small HTTP server.

/healthz answers 200 while ticks keep finishing (the last within three intervals, or the one
running, an actuation say, began less than `max_tick_s` ago), else 503, so systemd or Kubernetes
restarts a daemon whose scheduler is stuck.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)


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
        self.tick_seconds = Histogram("autosizer_daemon_tick_seconds", "Tick duration, actuation included",
                                      registry=self.registry)
        self.actuation_seconds = Histogram(
            "autosizer_daemon_actuation_seconds", "Actuation duration, drain to verified",
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600), registry=self.registry)
        self.last_tick = time.monotonic()  # start counts as a tick: healthy until proven stuck
        self.running_since: float | None = None
        self.max_tick_s = 900.0

    def healthy(self) -> bool:
        now = time.monotonic()
        if self.running_since is not None:
            return now - self.running_since < self.max_tick_s
        return now - self.last_tick < 3 * self.interval_s


def serve(metrics: DaemonMetrics, address: str) -> ThreadingHTTPServer:
    host, port = address.rsplit(":", 1)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            if self.path.startswith("/metrics"):
                body, status, kind = generate_latest(metrics.registry), 200, CONTENT_TYPE_LATEST
            elif self.path.startswith("/healthz"):
                ok = metrics.healthy()
                body, status, kind = (b"ok\n" if ok else b"stuck: no tick finished lately\n"), (
                    200 if ok else 503), "text/plain"
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
