"""`autosizer fit`'s queries on a real Prometheus scraping the pipeline's own exporter, fed
batches through the pipeline's own Admission: what the fit reads back is what was fed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from autosizer.controller.cli import main
from autosizer.controller.collector import range_pieces, range_series
from autosizer.elasticity import FACTORS, Layout
from autosizer.embedded import EmbeddedPrometheus
from autosizer.pipeline.admission import Admission
from autosizer.pipeline.slots import TaskProgress
from autosizer.simulator.fit import FIT_QUERIES, batch_commits, fetch, fitted_run
from autosizer.simulator.traces import load_trace
from tests.daemon_harness import FedExporter
from tests.integration.test_history_backfill import _blocks
from tests.integration.test_pipeline import wait_until

pytestmark = pytest.mark.integration

RATE, DEADLINE, CV = 100.0, 3.0, 0.4  # records/s a task, the batch deadline, the service time's CV


class Saturated(FedExporter):
    """A job 20 s behind: every batch each of its 16 tasks works a whole deadline, its
    records' service times gamma distributed with CV. Partition 3 reads too little to measure
    its hot shares until `late_from` (wall clock); the others from the first batch. Each batch
    also exports its read's fill and commit latency, a pair no other batch has (`fed`)."""

    def __init__(self, late_from: float):
        self.layout, self.admission = Layout(topics={"orders": 4}, factor=4), Admission()
        self.late_from, self.rng = late_from, np.random.default_rng(11)
        self.fed: list[tuple[float, float]] = []
        super().__init__()

    def _feed(self) -> None:
        tasks = self.layout.virtual_tasks()
        self.metrics.started(self.layout, {(t.name, *tp): 0 for t in tasks for tp in t.partitions})
        n, offset = int(RATE * DEADLINE), 0
        while not self.stop.wait(0.2):
            offset += n * 4
            progress = []
            for t in tasks:
                topic, partition = sorted(t.partitions)[0]
                read = n * 4 if partition != 3 or time.time() >= self.late_from else 50
                busy = self.rng.gamma(1 / CV**2, CV**2 / RATE, n).sum()
                progress.append(TaskProgress(t.name, topic, partition, offset, records=n, busy_ns=int(busy * 1e9),
                                             process_ns=int(busy * 1e9), read=read,
                                             hottest=tuple(read / f for f in FACTORS)))
            self.admission.observe(progress)
            self.metrics.observe_batch(progress, {(p.task, p.topic, p.partition): p.next_offset for p in progress},
                                       DEADLINE, admission=self.admission)
            self.fed.append((round(0.05 + len(self.fed) % 10 / 10, 2), round(0.2 + len(self.fed) * 1e-3, 3)))
            self.metrics.observe_commit(*self.fed[-1])
            self.metrics.observe_lag({tp: offset + 20 * 400 for tp in self.layout.partitions()},
                                     {tp: 20.0 for tp in self.layout.partitions()})


def test_the_fit_reads_the_service_times_noise_and_which_shares_were_known_from_prometheus(tmp_path, capsys):
    with Saturated(late_from=time.time() + 12) as job, \
            EmbeddedPrometheus([f"127.0.0.1:{job.port}"], tmp_path / "prom") as prometheus:
        wait_until(lambda: time.time() >= job.late_from - 6, 60, "a few scrapes")
        start = time.time()  # partition 3's shares are still unmeasured here
        wait_until(lambda: time.time() >= job.late_from + 8, 60, "its shares measured and scraped")
        end = time.time()
        # Every scrape up to `end` ingested before either read: the test's fetch read 14 batches
        # and the command's, a moment later, 15 (a scrape at `end` landed in between).
        wait_until(lambda: time.time() >= end + 2, 10, "the scrapes up to the end ingested")
        series = fetch(prometheus.url, start, end, window="3s")
        fitted = fitted_run(series, start, end)
        assert main(["fit", "--prometheus", prometheus.url, "--start", str(start), "--end", str(end),
                     "--adopt-after-s", "45", "--out", str(tmp_path / "run.toml")]) == 0
    # the daemon's setting, which no series holds, as the flag gave it
    assert load_trace(str(tmp_path / "run.toml")).job.adopt_after_s == 45 and fitted.job.adopt_after_s == 300
    # the batches' pairs, read back once each as fed (a scrape every second, a batch every 0.2 s)
    commits = batch_commits(series, start)
    assert len(commits) >= 8 and {(f, round(v, 3)) for _, f, v in commits} <= set(job.fed), (commits, job.fed)
    printed = capsys.readouterr().out
    assert f"commit latency per batch by its read's fill ({len(commits)} warm batches" in printed, printed
    model = fitted.job
    assert model.partitions == 4 and model.batch_seconds == DEADLINE
    assert model.process_seconds == pytest.approx(1 / RATE, rel=0.05)
    assert model.process_cv == pytest.approx(CV, rel=0.25)  # the gauge: how each task strays batch to batch
    assert model.hot_shares_known_at_start == (True, True, True, False)
    # Read every 0.2 s and scraped every second: about 0.1 s from read to scrape plus half the
    # scrape interval, counted from each reading's scrape stamp. (From the range query's steps, a
    # phase of up to a second came on top: run 85.)
    assert 0.45 <= model.metrics_age_s <= 0.9, model.metrics_age_s  # the steps read 1.34 (0.53 here)
    assert model.hot_shares[4] == pytest.approx(np.full(4, 0.25))


def test_the_fit_reads_a_run_longer_than_one_range_query_takes_in_pieces(tmp_path, capsys):
    """Prometheus refuses a range query of more than 11,000 steps, so `autosizer fit` over a run of
    more than three hours at 1 s failed, and its error said to check the URL. Four hours of two
    partitions' watermarks (promtool blocks, a sample a second, 100 records/s each) now read back
    in pieces, a bar counting them: every second once per partition, at the rate written. An
    unreachable Prometheus is one line at once (it was retried three times, six seconds)."""
    now = float(int(time.time()))
    start, end = now - 4 * 3600, now - 60
    _blocks(tmp_path / "prom" / "data", start - 60, now, rate=lambda at, now: 200.0, step_s=1)
    pieces = []
    with EmbeddedPrometheus([], tmp_path / "prom") as prometheus:
        series = fetch(prometheus.url, start, end, window="3s", queries={"input_rate": FIT_QUERIES["input_rate"]})
        range_series(prometheus.url, "autosizer_pipeline_high_watermark", start, end, 1.0,
                     progress=lambda: pieces.append(1))
    assert len(pieces) == range_pieces(start, end, 1.0) == 2  # 14,341 steps: the bar's count
    rates = series["input_rate"]
    assert sorted(labels["partition"] for labels, _ in rates) == ["0", "1"]
    for _, points in rates:
        times = [t for t, _ in points]
        assert times[0] == start and times[-1] == end and times == list(np.arange(start, end + 1))
        assert all(v == pytest.approx(100.0) for _, v in points)
    assert main(["fit", "--prometheus", "http://127.0.0.1:1", "--start", str(start), "--end", str(end),
                 "--out", str(tmp_path / "run.toml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("autosizer: error: Prometheus range query input_rate: the range query at "
                          "http://127.0.0.1:1 failed") and err.count("\n") == 1, err
