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
from autosizer.elasticity import Layout
from autosizer.embedded import EmbeddedPrometheus
from tests.daemon_harness import Exporter, FedExporter
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


def readings(collector: PrometheusCollector, name: str = "input_rate") -> list[float]:
    return [value for _, value in collector.collect().series.get(name, ())]


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


# the shipped query before session 58: a partition younger than the window fell to rate()
YOUNG_BY_RATE = ("max by (topic, partition) (clamp_min((autosizer_pipeline_high_watermark{$selector}"
                 " - autosizer_pipeline_high_watermark{$selector} offset $window)"
                 " / (autosizer_pipeline_high_watermark_time_seconds{$selector}"
                 " - autosizer_pipeline_high_watermark_time_seconds{$selector} offset $window > 0), 0))"
                 " or max by (topic, partition) (rate(autosizer_pipeline_high_watermark{$selector}[$window]))")


class JoiningProbe(JitteredProbe):
    """Partition 0 alone, then partition 1 joins (a re-shard's child), its watermark counting
    from its first record: both grow RATE a second."""

    def __init__(self) -> None:
        super().__init__()
        self.joined: float | None = None

    def _feed(self) -> None:
        rng, began = np.random.default_rng(5), time.time()
        while not self.stop.wait(rng.uniform(0.3, 1.0)):
            at = time.time()
            marks = {("orders", 0): int(RATE * (at - began))}
            if self.joined is not None:
                marks[("orders", 1)] = int(RATE * (at - self.joined))
            self.metrics.observe_lag(marks, dict.fromkeys(marks, 0.0), at=at)


def test_a_partition_younger_than_the_window_reads_its_growth_since_its_first_reading(tmp_path):
    """A shard that joined has no reading a window back; `rate()` stood in and read it at a
    fraction (the Kinesis demo's split children: 91/s of the 150/s input 3 s after joining)."""
    with JoiningProbe() as probe, EmbeddedPrometheus([f"127.0.0.1:{probe.port}"], tmp_path / "prom") as prometheus:
        shipped = PrometheusCollector(prometheus.url, {"input_rate": DEFAULT_QUERIES["input_rate"]}, window="10s")
        before = PrometheusCollector(prometheus.url, {"input_rate": YOUNG_BY_RATE}, window="10s")
        wait_until(lambda: len(readings(shipped)) == 1, 60, "the first scrapes")
        probe.joined = time.time()

        def young(collector: PrometheusCollector) -> float | None:
            rates = {labels["partition"]: v for labels, v in collector.collect().series.get("input_rate", ())}
            return rates.get("1")

        wait_until(lambda: young(shipped) is not None, 30, "two readings of the young partition")
        exact, rated = [], []
        for _ in range(6):  # the window's first half after it joined
            exact.append(young(shipped))
            rated.append(young(before))
            time.sleep(0.5)
    assert all(r is not None and abs(r / RATE - 1) < 0.01 for r in exact), exact
    assert all(r is None or r / RATE < 0.8 for r in rated), f"rate() over a window the series did not fill: {rated}"


class LeavingProbe(JitteredProbe):
    """Partitions 0 and 1, then 0 leaves the layout (a retired shard): the probe reads 1 alone."""

    def __init__(self) -> None:
        super().__init__()
        self.left = False

    def _feed(self) -> None:
        rng, began = np.random.default_rng(5), time.time()
        while not self.stop.wait(rng.uniform(0.3, 1.0)):
            at = time.time()
            marks = {("orders", p): int(RATE * (at - began)) for p in ((1,) if self.left else (0, 1))}
            self.metrics.observe_lag(marks, dict.fromkeys(marks, 0.0), at=at)


def test_a_partition_that_left_the_layout_is_no_input_however_recent_its_readings():
    """A retired shard's series stops; `rate()` over a range still reads it a window long (run
    r3's terminal: 205-223/s of a 150/s input for 2 s after each re-shard)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, LeavingProbe() as probe, \
            EmbeddedPrometheus([f"127.0.0.1:{probe.port}"], tmp) as prometheus:
        shipped = PrometheusCollector(prometheus.url, {"input_rate": DEFAULT_QUERIES["input_rate"]}, window="10s")
        ranged = DEFAULT_QUERIES["input_rate"].replace(" and autosizer_pipeline_high_watermark{$selector})", ")")
        assert ranged != DEFAULT_QUERIES["input_rate"]
        before = PrometheusCollector(prometheus.url, {"input_rate": ranged}, window="10s")
        wait_until(lambda: len(readings(shipped)) == 2, 60, "the first scrapes")
        time.sleep(3)
        probe.left = True
        time.sleep(3)  # two scrapes without partition 0
        left = [sorted(labels["partition"] for labels, _ in c.collect().series.get("input_rate", ()))
                for c in (shipped, before)]
    assert left[0] == ["1"], left
    assert left[1] == ["0", "1"], f"the range read the retired partition: {left}"


# the shipped query before session 72: the records counted by task, the CPU by one series
CEILING_BY_TASK = ("max(autosizer_pipeline_cores{$selector})"
                   " * sum(rate(autosizer_pipeline_records_in_total{$selector}[$window]))"
                   " / (sum(rate(autosizer_pipeline_cpu_seconds_total{$selector}[$window])) > 0)")


def ceiling(collector: PrometheusCollector) -> float | None:
    found = readings(collector, "cpu_ceiling")
    return found[0] if found else None


def test_the_cores_ceiling_reads_the_cpu_a_record_costs_through_a_rescale(tmp_path):
    """A rescale starts new tasks' record counters, and its first batch takes the records that
    waited through the restart. The ceiling counts the records as it counts the CPU, by one
    series, so the window that holds the restart reads it as the windows before (1 ms a record
    on 2 cores: 2,000/s). Counted by task it read a fraction of it there."""
    layout = Layout(topics={"orders": 2}, factor=1)
    with Exporter(layout, rate=800, capacity=800, restart_s=2.0) as exporter, \
            EmbeddedPrometheus([f"127.0.0.1:{exporter.port}"], tmp_path / "prom") as prometheus:
        shipped = PrometheusCollector(prometheus.url, {"cpu_ceiling": DEFAULT_QUERIES["cpu_ceiling"]}, window="5s")
        by_task = PrometheusCollector(prometheus.url, {"cpu_ceiling": CEILING_BY_TASK}, window="5s")
        wait_until(lambda: ceiling(shipped) is not None, 60, "the first scrapes")
        time.sleep(5)  # a window of factor 1
        exporter.layout = layout.with_factor(8)
        time.sleep(2.5)  # the restart: no batch
        kept, fell = [], []
        for _ in range(12):  # the window after the restart's first batch
            kept.append(ceiling(shipped))
            fell.append(ceiling(by_task))
            time.sleep(0.5)
    assert all(r is not None and abs(r / 2000 - 1) < 0.05 for r in kept), kept
    assert min(r for r in fell if r is not None) < 0.7 * 2000, f"records counted by task: {fell}"
