"""The daemon's input reading against a real Prometheus: the watermark's growth between the
probe's reads a window apart, over the time between those reads, is the input to the record,
however the probe's reads fall between scrapes. Prometheus' `rate()` takes each reading at its
scrape instead, up to a probe interval after the read, and strays with where the reads fell."""

from __future__ import annotations

import time

import numpy as np
import pytest

from autosizer.controller.collector import PrometheusCollector
from autosizer.controller.queries import DEFAULT_QUERIES
from autosizer.embedded import EmbeddedPrometheus
from tests.daemon_harness import FedExporter
from tests.integration.test_pipeline import wait_until

pytestmark = pytest.mark.integration
RATE = 1000.0  # records/s a partition
RATE_QUERY = "max by (topic, partition) (rate(autosizer_pipeline_high_watermark{$selector}[$window]))"


class JitteredProbe(FedExporter):
    """Four partitions' watermarks, each growing RATE a second, read at random moments 0.3-1 s
    apart, as the pipeline's probe reads them between batches."""

    def _feed(self) -> None:
        rng, began = np.random.default_rng(5), time.time()
        while not self.stop.wait(rng.uniform(0.3, 1.0)):
            at = time.time()
            marks = {("orders", p): int(RATE * (at - began)) for p in range(4)}
            self.metrics.observe_lag(marks, dict.fromkeys(marks, 0.0), at=at)


def readings(collector: PrometheusCollector) -> list[float]:
    return [value for _, value in collector.collect().series.get("input_rate", ())]


def test_the_input_is_the_watermarks_growth_over_the_probes_read_times(tmp_path):
    with JitteredProbe() as probe, EmbeddedPrometheus([f"127.0.0.1:{probe.port}"], tmp_path / "prom") as prometheus:
        shipped = PrometheusCollector(prometheus.url, {"input_rate": DEFAULT_QUERIES["input_rate"]}, window="5s")
        scraped = PrometheusCollector(prometheus.url, {"input_rate": RATE_QUERY}, window="5s")
        wait_until(lambda: len(readings(shipped)) == 4, 60, "the first scrapes")
        time.sleep(6)  # a window's reads behind the newest: until then rate() stands in (its first read 30% of it here)
        exact, astray = [], []
        for _ in range(12):
            exact += readings(shipped)
            astray += readings(scraped)
            time.sleep(0.5)
    assert len(exact) == 48 and max(abs(r / RATE - 1) for r in exact) < 0.005, exact
    assert max(abs(r / RATE - 1) for r in astray) > 0.02, f"rate() reads each reading at its scrape: {astray}"
