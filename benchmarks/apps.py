"""Per-record functions the benchmarks run through `autosizer pipeline run`."""

from __future__ import annotations

import time


def sleep_10ms(record):
    """A slow lookup: 10 ms per record, the GIL released (what elasticity is for)."""
    time.sleep(0.010)
    return record.value


def trivial(record):
    """No work at all: what the pipeline's own per-record cost looks like."""
    return record.value
