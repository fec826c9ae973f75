"""Replaying real history: a Prometheus range query becomes a simulator workload."""

from __future__ import annotations

import time

import prometheus_client
import pytest

from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.simulator.workloads import build

pytestmark = pytest.mark.integration


def test_a_range_query_replays_as_a_workload(tmp_path):
    registry = prometheus_client.CollectorRegistry()
    records = prometheus_client.Counter("demo_records", "records in", ["partition"], registry=registry)
    port = free_port()
    server, thread = prometheus_client.start_http_server(port, addr="127.0.0.1", registry=registry)
    try:
        with EmbeddedPrometheus([f"127.0.0.1:{port}"], workdir=tmp_path) as prometheus:
            start = time.time()
            while time.time() - start < 12:  # about 100 records/s on each of two partitions
                records.labels("0").inc(10)
                records.labels("1").inc(10)
                time.sleep(0.1)
            workload = build("prometheus", url=prometheus.url, query="rate(demo_records_total[3s])",
                             start=start + 4, end=time.time(), step_s=1)
            with pytest.raises(ValueError, match="no series"):
                build("prometheus", url=prometheus.url, query="nothing_here", start=start, end=time.time())
    finally:
        server.shutdown()
    assert workload.seconds >= 5
    assert 150 < float(workload.rate.mean()) < 250  # the two series are summed
    with pytest.raises(ValueError, match="range query at http://127.0.0.1:1 failed"):
        build("prometheus", url="http://127.0.0.1:1", query="up", start=start, end=time.time())
