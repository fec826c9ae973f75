"""Per-record functions the tests run through `autosizer pipeline run`."""

from __future__ import annotations

import time


def echo(record):
    """Output the input's identity so the sink shows what was processed and in which order."""
    time.sleep(0.001)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


APP_SETTING = "AUTOSIZER_TEST_APP_SETTING"  # `echo_with_setting`'s environment variable


def echo_with_setting(record):
    """Like echo, for an app configured through its environment: it fails its batch unless the
    process running it has `$AUTOSIZER_TEST_APP_SETTING` set to "from-executor-env" (what
    `--conf spark.executorEnv.AUTOSIZER_TEST_APP_SETTING=...` gives a cluster's workers)."""
    import os

    if os.environ.get(APP_SETTING) != "from-executor-env":
        raise ValueError(f"{APP_SETTING} is {os.environ.get(APP_SETTING)!r} in the worker")
    return echo(record)


def slower_echo(record):
    """Like echo with a 100 ms call per record: 10 records/s a task, so a job needs more workers
    than partitions at a rate a small emulator serves with room to spare."""
    time.sleep(0.1)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


def slow_echo(record):
    """Like echo with a 5 ms call per record: a job that needs more workers than partitions."""
    time.sleep(0.005)
    return record.key, b"%d:%d:%s" % (record.partition, record.offset, record.value)


def echo_dying_once(record):
    """Like echo, but at the record `$AUTOSIZER_TEST_DIE_AT` ("partition:offset"), the first time
    (until the flag file `$AUTOSIZER_TEST_DIE_FLAG` exists): wait 3 s, in which the batch's other
    slots write their outputs, then SIGKILL every process of the pipeline's session (driver, JVM,
    workers: PySpark's worker daemon has its own process group). A crash between a batch's
    outputs and its commit, as a lost host makes one."""
    import os
    import signal

    if b"%d:%d" % (record.partition, record.offset) == os.environ["AUTOSIZER_TEST_DIE_AT"].encode():
        flag = os.environ["AUTOSIZER_TEST_DIE_FLAG"]
        if not os.path.exists(flag):
            open(flag, "w").close()
            time.sleep(3)
            session = os.getsid(0)
            for pid in [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
                try:
                    if os.getsid(pid) == session:
                        os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.kill(os.getpid(), signal.SIGKILL)
    return echo(record)
