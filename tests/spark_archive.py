"""A class-data-sharing archive for the tests' Spark drivers, built once per machine.

The suite starts about forty Spark drivers on two cores, and each spends most of its start loading
and verifying the same few thousand Spark classes. A dynamic CDS archive (JDK 13+: written by
`-XX:ArchiveClassesAtExit`, mapped by `-XX:SharedArchiveFile`) hands them over ready-made: a local
session's start and first job cost about 9 CPU-s instead of 17 on the development machine. Tests
only, as the C1-only flag beside it: a deployed driver starts a few times a day and keeps the JVM's
defaults.

The archive is named after the JVM's and PySpark's versions, so an upgrade builds a new one; a
JVM that cannot use it (none yet, another classpath, a damaged file) runs without it, so the
worst case is the old cost, never a failed test.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVES = ROOT / ".tools" / "spark-cds"
BUILD_TIMEOUT_S = 600  # the training job's JVM writing the archive at its exit


def archive_path() -> Path | None:
    """Where this JVM's and PySpark's archive lives (None without a `java` to ask)."""
    import pyspark

    try:
        version = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    tag = hashlib.sha1(f"{version}\n{pyspark.__version__}".encode()).hexdigest()[:12]
    return ARCHIVES / f"driver-{tag}.jsa"


def build_in_background(path: Path, java_options: str) -> None:
    """Start writing the archive (`_build`, its own process) and return at once: the suite starts
    beside it, and a driver that starts before the archive is there runs without it (a missing
    `SharedArchiveFile` is no error). A fresh machine, CI's, so pays for the build with the few
    drivers it overlaps rather than with a minute before the first test."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if any(time.time() - p.stat().st_mtime < BUILD_TIMEOUT_S for p in path.parent.glob("*.partial")):
        return  # another run's build is under way
    env = {**os.environ, "SPARK_SUBMIT_OPTS": java_options,
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with path.with_suffix(".log").open("w") as log:  # the child keeps its own copy of the file
        subprocess.Popen([sys.executable, "-m", "tests.spark_archive", str(path)], cwd=ROOT, env=env,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def _build(path: Path) -> None:
    """Run a short local job under `-XX:ArchiveClassesAtExit`, then move the archive into place
    whole (a reader sees none or all of it); other versions' archives go."""
    partial = path.with_suffix(f".{os.getpid()}.partial")
    java_options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    os.environ["SPARK_SUBMIT_OPTS"] = f"{java_options} -XX:ArchiveClassesAtExit={partial}".strip()
    try:
        _train()
        if not partial.exists():
            raise SystemExit(f"the JVM wrote no archive at {partial}")
        for old in path.parent.glob("*.jsa"):
            old.unlink()
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def _train() -> None:
    """What the pipeline's drivers do, briefly: Arrow batches through Python workers, and a
    streaming query over a Python data source with a `foreachBatch` sink."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("autosizer-class-archive")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.range(200).mapInArrow(_same, "id long").collect()
    spark.dataSource.register(_counter_source())
    query = (spark.readStream.format("autosizer_archive_counter").load().writeStream
             .foreachBatch(lambda df, _: df.mapInArrow(_same, "n long").collect())
             .trigger(processingTime="0.2 seconds").start())
    deadline = time.monotonic() + 120
    while (query.lastProgress or {}).get("batchId", -1) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()
    gateway = spark.sparkContext._gateway.proc  # the JVM writes the archive when it exits
    spark.stop()
    gateway.stdin.close()  # the gateway exits on its stdin's end
    gateway.wait(BUILD_TIMEOUT_S)


def _same(batches: Iterator) -> Iterator:
    yield from batches


def _counter_source() -> type:
    """A streaming source of one row per partition per batch. Made on first use: the conftest
    imports this module, and the data source API need not load with it. (Run as `__main__`, the
    classes travel to the Python workers by value.)"""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class CounterReader(DataSourceStreamReader):
        def __init__(self) -> None:
            self.next = 0

        def initialOffset(self) -> dict:
            return {"n": 0}

        def latestOffset(self) -> dict:
            self.next += 1
            return {"n": self.next}

        def partitions(self, start: dict, end: dict) -> list[InputPartition]:
            return [InputPartition(i) for i in range(start["n"], end["n"])]

        def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
            yield (partition.value,)

        def commit(self, end: dict) -> None:
            pass

    class CounterSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "autosizer_archive_counter"

        def schema(self) -> str:
            return "n long"

        def streamReader(self, schema: object) -> DataSourceStreamReader:
            return CounterReader()

    return CounterSource


if __name__ == "__main__":
    _build(Path(sys.argv[1]))
