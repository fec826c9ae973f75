"""Daemon costs: tick time excluding the Prometheus round trip (goal p99 <= 20 ms) and the daemon
process's peak RSS (goal <= 150 MB).

One run, side by side: the same ticks timed whole and without their Prometheus queries, on a job of
64 partitions at factor 8 (512 virtual tasks) whose exporter (in its own process) is scraped by a
real Prometheus, with real Redis; then the daemon as a process (dry-run actuator) ticking twice a
second for a while. Three past days of the same input are on record in Redis, as a deployed
daemon's are from its third day, so the ticks plan the day ahead (`day_plan`) as such a daemon's
do: without them the benchmark missed a daemon that plans at 200 MB (session 69).

Run: .venv/bin/python benchmarks/bench_daemon.py [--ticks 300]
"""

from __future__ import annotations

import argparse
import multiprocessing
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.controller.config import load_config  # noqa: E402
from autosizer.controller.daemon import build_tick  # noqa: E402
from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.elasticity import Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import EmbeddedPrometheus, EmbeddedRedis  # noqa: E402
from examples.demo import seed_history  # noqa: E402
from tests.daemon_harness import AUTOSIZER, ROOT, Exporter, write_config  # noqa: E402

PARTITIONS, FACTOR = 64, 8
RATE = 20_000  # records/s the exporter shows


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def serve_exporter(layout: Layout, port_out) -> None:
    """The job's exporter in its own process: its scrapes must not take the GIL from the ticks."""
    with Exporter(layout, rate=RATE, capacity=15_000) as exporter:
        port_out.put(exporter.port)
        exporter.thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=300)
    parser.add_argument("--rss-seconds", type=float, default=60)
    args = parser.parse_args()
    configure_logging(level="error")
    work = Path(tempfile.mkdtemp(prefix="autosizer-bench-daemon-"))
    layout = Layout(topics={"orders": PARTITIONS}, factor=FACTOR)
    ports: multiprocessing.Queue = multiprocessing.Queue()
    feeder = multiprocessing.Process(target=serve_exporter, args=(layout, ports), daemon=True)
    feeder.start()
    with EmbeddedRedis(work / "redis") as redis_server, \
            EmbeddedPrometheus([f"127.0.0.1:{ports.get(timeout=30)}"], work / "prometheus") as prometheus:
        store = MetadataStore(redis_server.url, "bench")
        store.init_layout(layout)
        seed_history(store, time.time(), 3600, lambda _: RATE)  # the demo's three past days: this hour at RATE
        config = write_config(work / "bench.toml", "bench", redis_server.url, prometheus.url,
                              actuator={"name": "dry-run", "settings": {}}, daemon={"listen": ""})
        tick = build_tick(load_config(config, {}))
        while not (tick().inputs.get("input_rate")):  # until Prometheus has two scrapes
            time.sleep(1)
        doubt = tick().inputs.get("policy", {}).get("history")  # the policy's doubt of the days, if any
        assert doubt is None, f"the days seeded are not believed: {doubt}"
        whole, without = [], []
        for _ in range(args.ticks):
            record = tick()
            whole.append(record.tick_ms)
            without.append(record.tick_ms - record.inputs["prometheus_ms"])
            time.sleep(0.02)
        fast = write_config(work / "rss.toml", "bench", redis_server.url, prometheus.url,
                            actuator={"name": "dry-run", "settings": {}},
                            daemon={"interval_s": 0.5, "lease_ttl_s": 2.0, "log_level": "warning"})
        daemon = subprocess.Popen([AUTOSIZER, "run", "--config", str(fast)], cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=(work / "daemon.log").open("w"))
        time.sleep(args.rss_seconds)
        status = Path(f"/proc/{daemon.pid}/status").read_text()
        peak_kb = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1])
        daemon.terminate()
        daemon.wait(30)
        ticks = len(store.redis.xrange(store.keys.key("decisions"))) - args.ticks
    feeder.terminate()
    p50, p99 = percentile(without, 50), percentile(without, 99)
    print(f"{PARTITIONS} partitions x factor {FACTOR} = {PARTITIONS * FACTOR} virtual tasks, {args.ticks} ticks")
    print(f"tick excluding Prometheus: p50 {p50:.1f} ms, p99 {p99:.1f} ms (goal p99 <= 20 ms: "
          f"{'met' if p99 <= 20 else 'MISSED'}; {p99 / 20:.2f} of the goal)")
    print(f"whole tick:                p50 {percentile(whole, 50):.1f} ms, p99 {percentile(whole, 99):.1f} ms "
          f"(Prometheus share of the median tick {1 - p50 / percentile(whole, 50):.0%})")
    print(f"daemon peak RSS after {args.rss_seconds:.0f} s and ~{ticks} ticks: {peak_kb / 1024:.0f} MB "
          f"(goal <= 150 MB: {'met' if peak_kb / 1024 <= 150 else 'MISSED'}; {peak_kb / 1024 / 150:.2f} of the goal)")


if __name__ == "__main__":
    main()
