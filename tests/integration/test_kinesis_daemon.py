"""The daemon drives a Kinesis job as it drives a Kafka one: the emulator, Redis, Prometheus, the
Spark pipeline (`--source kinesis`) and the daemon, each its own process, under a load step.

The job is slow per record (100 ms) so that a step to 50 records/s needs factor 4. The emulator
(kinesis-mock) takes time in proportion to the records a stream holds for every record put
(500 records: 0.25 s into an empty stream, 5 s into one of 20,000), so a test that writes tens of
thousands stalls the load, the pipeline's reads and its probe's tails alike."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from autosizer.controller.journal import DecisionJournal
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.pipeline.sinks import read_committed
from examples.loadgen import KinesisStepLoad
from tests.daemon_harness import (
    AUTOSIZER,
    ROOT,
    first_batch,
    lag_below,
    start_daemon,
    stop,
    write_config,
)
from tests.integration.test_pipeline import check_exactly_once_in_key_order, wait_until

pytestmark = pytest.mark.integration


def test_the_daemon_scales_a_kinesis_job_up_under_a_step_and_back_down(kinesis, stream, redis_server, job,
                                                                      tmp_path):
    kinesis.create_stream(stream, 2)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={stream: 2}, factor=1, source="kinesis"))
    decisions = DecisionJournal(store)
    out, port = tmp_path / "out", free_port()
    prometheus = EmbeddedPrometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus").start()
    pipeline = subprocess.Popen(
        [AUTOSIZER, "pipeline", "run", "--source", "kinesis", "--kinesis-endpoint", kinesis.endpoint,
         "--app", "tests.apps:slower_echo", "--job", job, "--redis", redis_server.url,
         "--sink", f"file:{out}", "--master", "local[2]", "--metrics-port", str(port)],
        cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        stdout=(tmp_path / "pipeline.log").open("w"), stderr=subprocess.STDOUT)
    load = KinesisStepLoad(kinesis, stream, rate=5)
    daemon = None
    try:
        load.start()
        wait_until(lambda: first_batch(store, pipeline, tmp_path / "pipeline.log"), 180,
                   "the pipeline's first batch")
        # the start-up's backlog drained before the daemon reads it (it scaled 1 -> 8 -> 1 for it),
        # to within 5 s of input as the daemon reads it: a job keeping up here reads 0-4 s behind
        # on a busy machine (the output within 10 records of the load took a suite run 53 s to
        # see, a gauge under 3 s another 70 s), the start-up leaves 15 s and more
        wait_until(lag_below(prometheus.url, 5 * 5), 120, "the start-up's backlog drained")
        config = write_config(tmp_path / "daemon.toml", job, redis_server.url, prometheus.url)
        daemon = start_daemon(config, tmp_path / "daemon.log")
        wait_until(lambda: any(d["inputs"].get("task_capacity") for d in decisions.last(5)), 120,
                   "a decision with a measured task capacity")
        # Spark's start-up left a backlog, which the daemon's first tick may scale up for (a suite
        # run went 1 -> 4 on 18 s of it, and then 50/s fitted 4): the step comes once the job
        # keeps up at factor 1, so that what the daemon does next answers the step
        wait_until(lambda: (d := decisions.last(1)[0])["inputs"].get("lag_seconds", 99) < 5 and d["factor"] == 1,
                   240, "the job to keep up at factor 1 before the step")
        stepped = time.time()
        load.set_rate(50)  # factor 1 runs 2 tasks of < 10/s: far behind; 2 at most 40/s
        wait_until(lambda: any(d["outcome"] == "scale_up" and d["time"] > stepped for d in decisions.last(60)),
                   180, "a scale-up under the step")
        # the tails' counts reach the daemon: a backlog in records and an input rate. The scale-up
        # may come before any backlog (the input alone can show more than the capacity), so any
        # decision since the step may show them (one before it proves nothing about the step)
        wait_until(lambda: any(d["time"] > stepped and d["inputs"].get("lag_records", 0) > 0
                               and d["inputs"].get("input_rate", 0) > 0 for d in decisions.last(60)),
                   120, "a decision since the step that reads the tails' backlog")
        wait_until(lambda: (d := decisions.last(1)[0])["inputs"].get("lag_seconds", 99) < 5
                   and d["inputs"].get("input_rate", 0) > 35 and d["factor"] >= 4, 300,
                   "lag to recover under the step")  # 2 cores shared with another test
        factor, dropped = store.layout().factor, time.time()
        load.set_rate(2)
        wait_until(lambda: any(d["outcome"] == "scale_down" and d["time"] > dropped
                               for d in decisions.last(50)), 180, "a scale-down after the step")
        wait_until(lambda: store.layout().factor < factor, 60, "the scale-down to be done")
        status = subprocess.run([AUTOSIZER, "status", "--config", str(config)], capture_output=True,
                                text=True, cwd=ROOT, timeout=60)
        assert status.returncode == 0 and "running@" in status.stdout, status.stdout + status.stderr
        total = load.finish()
        wait_until(lambda: read_committed(out).num_rows >= total, 240, f"all {total} records")
        time.sleep(1.5)  # a duplicate would show up as extra rows
    except AssertionError:
        _show(decisions)
        raise
    finally:
        load.stop.set()
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
        stop(pipeline)
        prometheus.stop()
    check_exactly_once_in_key_order(read_committed(out), total)


def _show(decisions: DecisionJournal) -> None:
    """The daemon's last decisions, into the failure's captured output: what it saw and did."""
    for d in decisions.last(40):
        seen = {k: d["inputs"].get(k) for k in ("lag_seconds", "lag_records", "input_rate", "processed_rate",
                                                  "age_s", "notes")}
        print(round(d["time"], 1), d["outcome"], d["factor"], "->", d["target"], seen, d["reason"][:160])
