from __future__ import annotations

import os
import sys
import uuid

import pytest
import structlog
from hypothesis import settings

from tests import spark_archive
from tests.servers import Broker, Kinesis, RedisServer

# The emulator's credentials for boto3's chain, set before any Spark session starts: Spark's Python
# workers inherit the environment the JVM was started with.
for _name, _value in (("AWS_ACCESS_KEY_ID", "local"), ("AWS_SECRET_ACCESS_KEY", "local"),
                      ("AWS_DEFAULT_REGION", "us-east-1")):
    os.environ.setdefault(_name, _value)

# The tests' Spark drivers live for seconds to minutes, too short for the optimizing JIT to pay
# for itself: compiled by C1 alone they cost a quarter less CPU (`test_expansion.py`: 92 -> 71
# CPU-s), which a suite sharing two cores needs; `pytest_configure` adds the class archive. Tests
# only: a deployed job keeps the JVM's defaults. A developer's own SPARK_SUBMIT_OPTS wins.
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
# Set before this process began: a developer's, or (in an xdist worker) the ones the process
# that started it chose, archive and all.
_OPTIONS_GIVEN = "SPARK_SUBMIT_OPTS" in os.environ
os.environ.setdefault("SPARK_SUBMIT_OPTS", DRIVER_JAVA_OPTIONS)


def pytest_configure(config):
    """The drivers map Spark's classes from a shared archive (`tests/spark_archive.py`), built
    in the background the first time on a machine: set here, in the process that starts the
    xdist workers, which inherit the setting, so one build serves however many workers run."""
    if _OPTIONS_GIVEN:
        return
    path = spark_archive.archive_path()
    if path is None:
        return
    if not path.exists():
        spark_archive.build_in_background(path, DRIVER_JAVA_OPTIONS)
    os.environ["SPARK_SUBMIT_OPTS"] = f"{DRIVER_JAVA_OPTIONS} -XX:SharedArchiveFile={path}"


# No wall-clock deadlines: machines are noisy, and speed goals live in benchmarks/.
settings.register_profile("autosizer", deadline=None)
settings.load_profile("autosizer")


@pytest.fixture(autouse=True)
def _structlog_defaults():
    """Each test starts from structlog's defaults: a CLI `main()` run in-process configures the
    log level for the whole process (warning, for the controller's), and a later test in the same
    worker reading an info event through `capture_logs` then found nothing (its filter drops the
    event before the capture sees it), which made such tests pass or fail by test order."""
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def job() -> str:
    """A fresh job name per test, so tests share one Redis without sharing keys."""
    return f"job-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def spark():
    """A real local SparkSession (2 cores), shared by the tests that need one."""
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (the venv's), not whatever python3 is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    session = (
        SparkSession.builder.master("local[2]")
        .appName("autosizer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kinesis():
    """One Kinesis emulator for the session; tests keep apart by stream name (see `stream`). It
    keeps the host's wall clock however long it runs (`autosizer.embedded.WALL_CLOCK_JS`)."""
    server = Kinesis().start()
    yield server
    server.stop()


@pytest.fixture
def stream() -> str:
    return f"stream-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def broker():
    """A fresh in-memory broker per test: topics and offsets never leak between tests."""
    server = Broker().start()
    yield server
    server.stop()
