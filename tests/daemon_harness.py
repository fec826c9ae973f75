"""Real processes for the daemon tests: the pipeline and the daemon as `autosizer` subprocesses,
Prometheus scraping the pipeline, and a config written for short ticks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from autosizer.controller.collector import PrometheusCollector
from autosizer.controller.config import load_config
from autosizer.controller.queries import DEFAULT_QUERIES
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.pipeline.metrics import PipelineMetrics, serve
from autosizer.pipeline.slots import PROCESS_TIME_BUCKETS, TaskProgress
from tests.integration.test_pipeline import wait_until

ROOT = Path(__file__).resolve().parents[1]
AUTOSIZER = str(Path(sys.executable).parent / "autosizer")

# Short everything: ticks every 2 s over 10 s rate windows, scraped every second.
FAST = {
    "daemon": {"interval_s": 2.0, "lease_ttl_s": 6.0, "log_level": "info"},
    "prometheus": {"window": "4s", "timeout_s": 2.0},
    "guards": {"cooldown_s": 8.0, "scale_down_delay_s": 6.0, "max_age_s": 10.0, "max_factor": 8},
    "policy": {"name": "autosizer", "settings": {
        "settle_s": 8.0, "horizon_s": 10.0, "trend_window_s": 20.0, "catch_up_seconds": 30.0,
        "lull_memory_s": 24.0}},
    "actuator": {"name": "restart-in-driver", "settings": {
        "drain_timeout_s": 60.0, "start_timeout_s": 90.0, "verify_timeout_s": 90.0,
        "verify_window_s": 6.0}},
}


def toml(sections: dict) -> str:
    """Just enough TOML for the config: tables of scalars and one level of sub-tables."""
    lines: list[str] = []

    def table(name: str, values: dict) -> None:
        lines.append(f"[{name}]")
        subs = {k: v for k, v in values.items() if isinstance(v, dict)}
        for key, value in values.items():
            if not isinstance(value, dict):
                lines.append(f"{key} = {json.dumps(value)}")
        for key, value in subs.items():
            table(f"{name}.{key}", value)

    for name, values in sections.items():
        table(name, values)
    return "\n".join(lines) + "\n"


def write_config(path: Path, job: str, redis_url: str, prometheus_url: str, **changes: dict) -> Path:
    sections = {name: json.loads(json.dumps(values)) for name, values in FAST.items()}
    sections["job"] = {"name": job, "redis_url": redis_url}
    sections["prometheus"]["url"] = prometheus_url
    sections["daemon"]["listen"] = f"127.0.0.1:{free_port()}"
    for name, values in changes.items():
        if name in ("policy", "actuator"):  # another plug-in: its own settings only
            sections[name] = values
            continue
        for key, value in values.items():
            if isinstance(value, dict):
                sections[name].setdefault(key, {}).update(value)
            else:
                sections.setdefault(name, {})[key] = value
    path.write_text(toml(sections))
    return path


def start_daemon(config: Path, log: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([AUTOSIZER, "run", "--config", str(config), "--json-logs"],
                            cwd=ROOT, env={**os.environ, **env}, stdout=log.open("a"),
                            stderr=subprocess.STDOUT)


def pipeline_command(redis_url: str, bootstrap: str, job: str, out: Path, metrics_port: int,
                     app: str = "tests.apps:slow_echo", trigger: float = 1.0,
                     max_records: int = 4000, sink: str | None = None) -> list[str]:
    """The pipeline as a user starts it: the product's 1 s trigger. Until session 38 it was
    0.5 s here (and in the Kinesis daemon test's own command): `test_daemon.py` cost 343 CPU-s
    against 290, chaos, expansion and the Kinesis daemon test 497 against 455, for no check of
    theirs (a saturated batch starts the next at once either way). `sink`: `kafka:TOPIC`, or
    (default) Parquet files in `out`."""
    return [AUTOSIZER, "pipeline", "run", "--app", app, "--job", job, "--redis", redis_url,
            "--bootstrap", bootstrap, "--sink", sink or f"file:{out}", "--master", "local[2]",
            "--trigger", str(trigger), "--metrics-port", str(metrics_port),
            "--max-records", str(max_records)]


def start_pipeline(redis_url: str, bootstrap: str, job: str, out: Path, log: Path, metrics_port: int,
                   **options) -> subprocess.Popen:
    return subprocess.Popen(pipeline_command(redis_url, bootstrap, job, out, metrics_port, **options),
                            cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
                            stdout=log.open("a"), stderr=subprocess.STDOUT)


def first_batch(store, proc: subprocess.Popen, log: Path) -> bool:
    """Whether generation 1 committed a batch; fails at once, with the pipeline's last words,
    when the pipeline exited instead of making the caller wait out its timeout. Its last lines,
    not `embedded._cause`'s first complaint: Spark's start-up warns "Unable to load
    native-hadoop" before the pipeline's own one-line error, which it prints last."""
    if proc.poll() is not None:
        words = log.read_text(errors="replace").strip().splitlines()[-3:]
        raise AssertionError(f"the pipeline exited ({proc.returncode}) before its first batch: "
                             + " | ".join(words))
    return store.committed_batch(1) >= 1


def lag_below(prometheus_url: str, records: float) -> Callable[[], bool]:
    """A wait's condition: the pipeline's lag gauge, summed as the daemon's query reads it from
    Prometheus, is under `records`. What a daemon started next reads on its first tick, which
    the sink's output does not tell: a Kinesis run's output was within 25 records of the load
    while the gauge the first tick read was 78 (it scaled 1 -> 2 -> 1 for it)."""
    collector = PrometheusCollector(prometheus_url, {"lag_records": DEFAULT_QUERIES["lag_records"]})

    def below() -> bool:
        lag = collector.lag()
        return lag is not None and lag < records

    return below


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


class FedExporter:
    """The pipeline's own exporter on a loopback port, fed batches by `_feed` on a thread from
    `with` until its end."""

    def __init__(self) -> None:
        self.metrics = PipelineMetrics("test")
        self.port = free_port()
        serve(self.metrics, self.port)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._feed, daemon=True)

    def _feed(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> FedExporter:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


class Exporter(FedExporter):
    """The pipeline's exporter with batches fed at a steady pace: `rate` in, `capacity` done,
    each record costing `cpu_s` of CPU on `cores` cores. Setting `layout` rescales it as the
    agent's restart does: no batch for `restart_s`, then the new layout's tasks, whose first batch
    takes the records that waited."""

    def __init__(self, layout: Layout, rate: float, capacity: float, cpu_s: float = 0.001, cores: int = 2,
                 restart_s: float = 2.0):
        self.layout, self.rate, self.capacity, self.cpu_s = layout, rate, capacity, cpu_s
        self.restart_s = restart_s
        super().__init__()
        self.metrics.observe_cores(cores)

    def _feed(self) -> None:
        layout, produced, done, waited = None, 0.0, 0.0, 0.0
        while not self.stop.wait(0.25):
            if layout is not self.layout:
                if layout is not None and not self.stop.wait(self.restart_s):
                    waited = self.restart_s
                layout, tasks = self.layout, self.layout.virtual_tasks()
                self.metrics.started(layout, {(t.name, *tp): 0 for t in tasks for tp in t.partitions})
            produced += self.rate * (0.25 + waited)
            done = min(produced, done + self.capacity * (0.25 + waited))
            each = len(tasks)
            records, waited = int(self.capacity * (0.25 + waited) / each), 0.0
            histogram = (0,) * (len(PROCESS_TIME_BUCKETS) - 1) + (records, 0)
            progress = [TaskProgress(t.name, *sorted(t.partitions)[0], int(done / each), records=records,
                                     process_ns=int(0.25e9 * 0.9), histogram=histogram,
                                     cpu_ns=int(records * self.cpu_s * 1e9)) for t in tasks]
            positions = {(p.task, p.topic, p.partition): p.next_offset for p in progress}
            self.metrics.observe_batch(progress, positions, 0.25)
            self.metrics.observe_lag({tp: int(produced / len(layout.partitions()))
                                      for tp in layout.partitions()}, {tp: 3.0 for tp in layout.partitions()})


@contextlib.contextmanager
def scraped_job(redis_server, job: str, tmp_path, rate: float,
                prometheus_flags: tuple[str, ...] = ()) -> Iterator[tuple[MetadataStore, Any, Any, Exporter]]:
    """A job at factor 1 whose exporter is fed `rate` in and 100/s done, scraped by a real
    Prometheus (started with `prometheus_flags`) until its input shows over the window; a
    dry-run daemon's config for it. Yields (store, config, prometheus, exporter)."""
    layout = Layout(topics={"orders": 2}, factor=1)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(layout)
    with Exporter(layout, rate=rate, capacity=100) as exporter, \
            EmbeddedPrometheus([f"127.0.0.1:{exporter.port}"], tmp_path / "prom",
                               flags=prometheus_flags) as prometheus:
        config = load_config(write_config(tmp_path / "a.toml", job, redis_server.url, prometheus.url,
                                          actuator={"name": "dry-run", "settings": {}}, daemon={"listen": ""}), {})
        collector = PrometheusCollector(prometheus.url, DEFAULT_QUERIES, window="10s")
        wait_until(lambda: not collector.collect().problems and collector.lag() is not None, 60, "a first scrape")
        wait_until(lambda: sum(v for _, v in collector.collect().series["input_rate"]) > 0.75 * rate, 60,
                   "the input rate over the window")
        yield store, config, prometheus, exporter
