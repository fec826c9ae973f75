"""The pipeline as a process (`autosizer pipeline run`): kill -9 mid-run, then restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.pipeline.sinks import read_committed
from tests.apps import APP_SETTING
from tests.integration.test_pipeline import (
    check_exactly_once_in_key_order,
    slow_python,
    spark_checkpoint_files,
    topic_outputs,
    wait_until,
)

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
AUTOSIZER = str(Path(sys.executable).parent / "autosizer")


def start_pipeline(redis_server, broker, job, out: Path, log: Path, python: str = sys.executable) -> subprocess.Popen:
    env = {**os.environ, "PYSPARK_PYTHON": python}
    return subprocess.Popen(
        [AUTOSIZER, "pipeline", "run", "--app", "tests.apps:echo", "--job", job,
         "--redis", redis_server.url, "--bootstrap", broker.bootstrap, "--sink", f"file:{out}",
         "--master", "local[2]", "--trigger", "0.2", "--max-records", "150", "--metrics-port", "0"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
    )


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the pipeline drains), then kill if it does not exit in time."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()


def kill_9_mid_run_then_finish(start, store, out: Path, total: int, logs: Path) -> None:
    """`start(log)` a pipeline process (its log `logs / log`), kill -9 it after a few commits
    (mid-run), start another and let it finish all `total` records, never exiting. The killed
    one's work directory, which nothing of its own removes any more, is gone once the second
    has started."""
    first = start("first.log")
    try:
        wait_until(lambda: store.committed_batch(1) >= 2, 120, "a few committed batches")
        assert workdirs(first.pid), "the pipeline's work directory is named by its pid"
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    done_before = read_committed(out).num_rows
    assert 0 < done_before < total, "the kill must land mid-run"
    second = start("second.log")
    try:
        wait_until(lambda: read_committed(out).num_rows >= total or second.poll() is not None, 180, "every record")
        assert second.poll() is None, "the pipeline exited: " + " | ".join(
            (logs / "second.log").read_text().splitlines()[-3:])
        time.sleep(1)  # a duplicate would show up as extra rows
        assert not workdirs(first.pid), "the second pipeline removed the killed one's work directory"
        (workdir,) = workdirs(second.pid)
        written, checksums = spark_checkpoint_files(workdir)
        assert written and not checksums, "Spark's checkpoint goes through the plain local file system"
    finally:
        stop(second)


def workdirs(pid: int) -> list[Path]:
    """A pipeline's work directories, by the driver's pid in their names (the test's TMPDIR is
    the pipelines')."""
    return list(Path(tempfile.gettempdir()).glob(f"autosizer-agent-{pid}-*"))


def test_kill_9_mid_run_loses_nothing_and_duplicates_nothing_and_a_too_slow_python_start_is_ridden_through(
        redis_server, broker, job, tmp_path):
    """kill -9 mid-run, then a pipeline started again on a loaded node. Spark gives the Python
    process it starts for a query's source (its streaming source runner) a fixed 10 s to connect
    back, and on a loaded node it can take longer: with four test workers on two cores a
    pipeline restarted after a kill failed so, 10 s after it started, and exited (session 78).
    Here the restarted pipeline's first streaming source runner takes 12 s (a wrapper around the
    interpreter): it starts a new query, and the same process outputs every record once, in key
    order. (Its own test until session 79, a pipeline process of its own: 33-43 s of a worker.)"""
    broker.create_topic("orders", 4)
    total = 2000
    broker.produce("orders", [((i % 40) % 4, b"key-%d" % (i % 40), b"%d" % (i // 40)) for i in range(total)])
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 4}, factor=4))
    out = tmp_path / "out"
    slow = str(slow_python(tmp_path, 12, once=True))

    def start(log: str) -> subprocess.Popen:
        return start_pipeline(redis_server, broker, job, out, tmp_path / log,
                              python=slow if log == "second.log" else sys.executable)

    kill_9_mid_run_then_finish(start, store, out, total, tmp_path)
    check_exactly_once_in_key_order(read_committed(out), total)
    # an operator reads the restarted process's start in its log (info is the default level)
    text = (tmp_path / "second.log").read_text()
    assert "pipeline.started" in text
    assert "pipeline.query_restarting" in text and "Python worker failed to connect back" in text


def test_the_same_pipeline_runs_on_a_standalone_spark_cluster_with_the_users_spark_settings(redis_server, broker, job, tmp_path):
    """On a standalone cluster, with a Spark setting of the user's, and through the loss of its
    executor mid-run (SIGKILL after the first half of the records, in a batch or between two:
    the worker starts another executor, and Spark runs a lost task again): every record once,
    in key order, and the pipeline never exits. The app reads a setting from its environment,
    which reaches the executors' Python workers through `--conf spark.executorEnv.NAME=value`
    (README, Engines), not from the driver's environment, where it is set to another value."""
    from autosizer.embedded import EmbeddedSparkCluster

    broker.create_topic("orders", 2)
    total = 400
    records = [((i % 40) % 2, b"key-%d" % (i % 40), b"%d" % (i // 40)) for i in range(total)]
    broker.produce("orders", records[:200])
    MetadataStore(redis_server.url, job).init_layout(Layout(topics={"orders": 2}, factor=4))
    out = tmp_path / "out"
    with EmbeddedSparkCluster(cores=2, memory="1g", workdir=tmp_path / "spark") as cluster:
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, APP_SETTING: "from-the-driver"}
        proc = subprocess.Popen(
            [AUTOSIZER, "pipeline", "run", "--app", "tests.apps:echo_with_setting", "--job", job,
             "--redis", redis_server.url, "--bootstrap", broker.bootstrap, "--sink", f"file:{out}",
             "--master", cluster.master_url, "--trigger", "0.5", "--metrics-port", "0",
             # a user's Spark setting wins over the pipeline's own: Hadoop's default file system
             "--conf", "spark.hadoop.fs.file.impl=org.apache.hadoop.fs.LocalFileSystem",
             "--conf", f"spark.executorEnv.{APP_SETTING}=from-executor-env"],
            cwd=ROOT, env=env, stdout=(tmp_path / "driver.log").open("w"), stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: read_committed(out).num_rows >= 200 or proc.poll() is not None, 240, "the first records")
            assert proc.poll() is None, "the pipeline exited: " + " | ".join(
                (tmp_path / "driver.log").read_text().splitlines()[-3:])
            (executor,) = executors(cluster)
            os.kill(executor, signal.SIGKILL)
            broker.produce("orders", records[200:])
            wait_until(lambda: read_committed(out).num_rows >= total, 240, "every message")
            assert proc.poll() is None, "the pipeline exited"
            assert executors(cluster) and executors(cluster) != [executor], "the worker started another executor"
            (workdir,) = workdirs(proc.pid)
            written, checksums = spark_checkpoint_files(workdir)
            assert written and checksums, "--conf spark.hadoop.fs.file.impl reached the session"
        finally:
            stop(proc)
        app_logs = list((tmp_path / "spark" / "work").glob("app-*"))
    assert app_logs, "the driver did not run its executors on the standalone worker"
    check_exactly_once_in_key_order(read_committed(out), total)


def executors(cluster) -> list[int]:
    """The pids of the cluster's executor JVMs (the worker's children)."""
    assert cluster.worker is not None
    children = subprocess.run(["pgrep", "-P", str(cluster.worker.pid)], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in children
            if "CoarseGrainedExecutorBackend" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")]


def test_metrics_port_0_is_bound_by_the_kernel_and_returned():
    """Port 0 is picked in the bind itself, so nothing can take it between pick and bind."""
    import urllib.request

    from autosizer.pipeline.metrics import PipelineMetrics, serve

    port = serve(PipelineMetrics("job"), 0)
    assert port > 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert b"autosizer_pipeline" in reply.read()


def test_a_metrics_port_in_use_is_one_line_naming_the_fix():
    import socket

    from autosizer.pipeline.metrics import PipelineMetrics, serve

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=f"cannot serve /metrics on 127.0.0.1:{port}.*--metrics-port"):
            serve(PipelineMetrics("job"), port)


def test_a_kafka_sink_crash_between_outputs_and_commit_writes_nothing_twice(redis_server, broker, job, tmp_path):
    """One slot's outputs reach the topic; the pipeline dies (SIGKILL, every process of it)
    before the batch commits; the restarted pipeline redoes the batch. Each input's output is
    in the topic once, in key order: the redo left out what the dead one wrote (it was written
    twice until session 45, the Kafka sink being at least once across crashes)."""
    broker.create_topic("orders", 2)
    broker.create_topic("enriched", 2)
    total = 400
    broker.produce("orders", [((i % 40) % 2, b"key-%d" % (i % 40), b"%d" % (i // 40)) for i in range(total)])
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=2))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "AUTOSIZER_TEST_DIE_AT": "1:100",
           "AUTOSIZER_TEST_DIE_FLAG": str(tmp_path / "died")}

    def start(log: str) -> subprocess.Popen:
        return subprocess.Popen(
            [AUTOSIZER, "pipeline", "run", "--app", "tests.apps:echo_dying_once", "--job", job,
             "--redis", redis_server.url, "--bootstrap", broker.bootstrap, "--sink", "kafka:enriched",
             "--master", "local[2]", "--trigger", "0.2", "--metrics-port", "0"],
            cwd=ROOT, env=env, stdout=(tmp_path / log).open("w"), stderr=subprocess.STDOUT,
            start_new_session=True)  # its own process group: what the app kills

    first = start("first.log")
    try:
        assert first.wait(120) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
    assert store.committed_batch(1) == 0, "the batch died before its commit"
    written_by_the_dead = topic_outputs(broker.bootstrap, "enriched").num_rows
    assert 0 < written_by_the_dead < total, "one slot's outputs reached the topic before the crash"
    second = start("second.log")
    try:
        wait_until(lambda: sum(o or 0 for o in store.checkpoints().start_offsets().values()) >= total, 120,
                   "every record committed")
        time.sleep(1)  # a duplicate would show up as extra records
    finally:
        stop(second)
    check_exactly_once_in_key_order(topic_outputs(broker.bootstrap, "enriched"), total)
    assert f"already_written={written_by_the_dead}" in (tmp_path / "second.log").read_text()
