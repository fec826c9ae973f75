"""How close a loaded node comes to Spark's 10 s limit on a query's Python start.

Every query the pipeline starts (at its start, after each rescale, after a restart) has Spark
start one Python process for its source, the streaming source runner, and Spark gives it a fixed
10 s to connect back (`PythonWorkerFactory`, no setting). The runner connects right after its
module's imports, so the time to import it is the time that window holds. This times that
import (a fresh interpreter each time, as Spark starts it) on an idle node and beside busy
processes, one to eight per core, and prints each median against the 10 s: how loaded a node
must be before a query start fails there (the pipeline then starts a new query, up to 3 times
in a row: README, "A loaded node").

    .venv/bin/python benchmarks/bench_python_start.py [--starts 5] [--per-core 0,1,2,4,8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SPARK_LIMIT_S = 10.0  # PythonWorkerFactory's accept timeout for a simple worker
RUNNER = "pyspark.sql.streaming.python_streaming_source_runner"
BUSY = "while True: pass"


def start_s() -> float:
    """One runner's start: a fresh interpreter importing the runner's module."""
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", f"import {RUNNER}"], check=True)
    return time.perf_counter() - began


def beside_busy(processes: int, starts: int) -> list[float]:
    """`starts` runner starts while `processes` busy loops compete for the cores."""
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(processes)]
    try:
        time.sleep(0.5 if busy else 0)  # the loops running before the first start
        return [start_s() for _ in range(starts)]
    finally:
        for process in busy:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=5, help="runner starts timed at each load (default 5)")
    parser.add_argument("--per-core", default="0,1,2,4,8",
                        help="busy processes per core to time beside, comma-separated (default 0,1,2,4,8)")
    args = parser.parse_args()
    if args.starts < 1:
        parser.error(f"--starts must be at least 1, not {args.starts}")
    try:
        loads = [int(n) for n in args.per_core.split(",")]
    except ValueError:
        parser.error(f"--per-core must be whole numbers separated by commas, such as 0,1,2, not {args.per_core!r}")
    if any(n < 0 for n in loads):
        parser.error(f"--per-core must be 0 or more busy processes a core, not {args.per_core!r}")
    cores = os.cpu_count() or 1
    start_s()  # the page cache warm, as on a node that has run a query before
    print(f"{cores} cores; Spark's limit {SPARK_LIMIT_S:.0f} s", flush=True)
    for per_core in loads:
        times = beside_busy(per_core * cores, args.starts)
        median = statistics.median(times)
        print(f"{per_core} busy a core ({per_core * cores:3d} processes): start median {median:5.2f} s, "
              f"most {max(times):5.2f} s; median / limit {median / SPARK_LIMIT_S:.3f}", flush=True)


if __name__ == "__main__":
    main()
