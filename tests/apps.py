"""Per-record functions the tests run through `autosizer pipeline run`."""

from __future__ import annotations

import time


def echo(record):
    """Output the input's identity so the sink shows what was processed and in which order."""
    time.sleep(0.001)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


def slower_echo(record):
    """Like echo with a 100 ms call per record: 10 records/s a task, so a job needs more workers
    than partitions at a rate a small emulator serves with room to spare."""
    time.sleep(0.1)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


def slow_echo(record):
    """Like echo with a 5 ms call per record: a job that needs more workers than partitions."""
    time.sleep(0.005)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)
