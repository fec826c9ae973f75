"""Real processes for the daemon tests: the pipeline and the daemon as `autosizer` subprocesses,
Prometheus scraping the pipeline, and a config written for short ticks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from autosizer.embedded import free_port

ROOT = Path(__file__).resolve().parents[1]
AUTOSIZER = str(Path(sys.executable).parent / "autosizer")

# Short everything: ticks every 2 s over 10 s rate windows, scraped every second.
FAST = {
    "daemon": {"interval_s": 2.0, "lease_ttl_s": 6.0, "log_level": "info"},
    "prometheus": {"window": "4s", "timeout_s": 2.0},
    "guards": {"cooldown_s": 8.0, "scale_down_delay_s": 6.0, "max_age_s": 10.0, "max_factor": 8},
    "policy": {"name": "autosizer", "settings": {
        "settle_s": 8.0, "horizon_s": 10.0, "trend_window_s": 20.0, "catch_up_seconds": 30.0}},
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


def start_pipeline(redis_url: str, bootstrap: str, job: str, out: Path, log: Path, metrics_port: int,
                   app: str = "tests.apps:slow_echo", trigger: float = 0.5,
                   max_records: int = 4000) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    return subprocess.Popen(
        [AUTOSIZER, "pipeline", "run", "--app", app, "--job", job, "--redis", redis_url,
         "--bootstrap", bootstrap, "--sink", f"file:{out}", "--master", "local[2]",
         "--trigger", str(trigger), "--metrics-port", str(metrics_port),
         "--max-records", str(max_records)],
        cwd=ROOT, env=env, stdout=log.open("a"), stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen, timeout: float = 60) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
