"""Keep PySpark's per-task garbage collection cheap in the pipeline's Python workers.

PySpark's worker daemon runs a full `gc.collect()` after every task a reused worker finishes.
A full collection walks every tracked object in the process, and a slot's worker holds the
whole import graph (pyarrow, numpy, confluent_kafka, redis, the user's app): on a job at 50
records/s its Python workers spent most of their CPU in the collector, and the pipeline took
0.82 cores where it takes 0.52 with the modules frozen out of it (`gc.freeze`; BENCHMARKS,
`bench_pipeline_cpu.py`). What tasks create is collected as before.
"""

from __future__ import annotations

import gc
import os
import sys

GC_FREEZE_ENV = "AUTOSIZER_GC_FREEZE"  # "0": `pipeline run --no-gc-freeze`, set for the workers

_frozen: tuple[int, int] | None = None  # (pid, modules loaded) at the last freeze


def freeze_imports() -> None:
    """At a task's start, when modules were imported since the last freeze in this process
    (a worker's first task, or one whose code imported more lazily): collect what is garbage
    now, then freeze the rest. Frozen objects are still freed when nothing refers to them; only
    the cycle collector skips them, so what an app's import left in cycles stays (the reason
    for `--no-gc-freeze`)."""
    global _frozen
    now = (os.getpid(), len(sys.modules))
    if _frozen == now or os.environ.get(GC_FREEZE_ENV) == "0":
        return
    gc.collect()
    gc.freeze()
    _frozen = now
