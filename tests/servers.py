"""Real servers for tests: the project's own embedded launchers, on free loopback ports."""

from __future__ import annotations

import glob
import signal
from pathlib import Path

from autosizer.embedded import EmbeddedBroker, EmbeddedKinesis, EmbeddedRedis, free_port

__all__ = ["RedisServer", "Broker", "Kinesis", "ClockedKinesis", "CLOCK_PROBE", "add_clock_probe", "clock_behind", "free_port"]


class RedisServer(EmbeddedRedis):
    def __init__(self, workdir: Path, password: str | None = None, tls: bool = False):
        super().__init__(workdir=workdir, password=password, tls=tls)


Broker = EmbeddedBroker
Kinesis = EmbeddedKinesis

# Debian's libfaketime (installed by `make setup`); the MT build, since node runs threads
FAKETIME_LIBRARY = "/usr/lib/*/faketime/libfaketimeMT.so.1"


class ClockedKinesis(EmbeddedKinesis):
    """The Kinesis emulator on a clock the test moves: what Kinesis does after minutes (a shard
    iterator expires 300 s after it was issued) without the minutes. libfaketime, preloaded into
    node, reads the offset from a file at every reading of the clock; the monotonic clock moves too,
    since the emulator's `now` is the page's time origin plus `performance.now()`. Killed at the
    end: with its clock moved, node's own shutdown waits out its 10 s grace."""

    stop_signal = signal.SIGKILL  # nothing of it is kept

    def __init__(self, workdir: Path):
        found = glob.glob(FAKETIME_LIBRARY)
        if not found:
            raise RuntimeError(f"libfaketime is not installed (no {FAKETIME_LIBRARY}): run `make setup`")
        super().__init__()
        self.library = found[0]
        self.offset_file = workdir / "faketime.rc"
        self.offset_s = 0
        self.offset_file.write_text("+0\n")

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        args, env = super()._command()
        return args, {**(env or {}), "LD_PRELOAD": self.library, "FAKETIME_TIMESTAMP_FILE": str(self.offset_file),
                      "FAKETIME_NO_CACHE": "1"}

    def advance(self, seconds: int) -> None:
        """Move the emulator's clock on."""
        self.offset_s += seconds
        self.offset_file.write_text(f"+{self.offset_s}\n")


CLOCK_PROBE = "clock-probe"  # a stream of the session's emulator, for `clock_behind`


def add_clock_probe(server: EmbeddedKinesis) -> None:
    """The stream `clock_behind` asks, with a record: the emulator checks a timestamp against its
    clock only on a shard that holds one."""
    server.create_stream(CLOCK_PROBE, 1)
    server.produce(CLOCK_PROBE, [(b"probe", b"")])


def clock_behind(server: EmbeddedKinesis, slack_s: float = 2.0) -> bool:
    """Does the emulator take the host's time less `slack_s` for a time in its future? Its clock
    is the page's time origin plus `performance.now()`, which a step of the wall clock does not
    move. Asked of the `CLOCK_PROBE` stream (`add_clock_probe`)."""
    from datetime import UTC, datetime, timedelta

    from botocore.exceptions import ClientError

    try:
        server.client().get_shard_iterator(
            StreamName=CLOCK_PROBE, ShardId="shardId-000000000000", ShardIteratorType="AT_TIMESTAMP",
            Timestamp=datetime.now(UTC) - timedelta(seconds=slack_s))
    except ClientError as exc:
        if "in the future" in str(exc):
            return True
        raise
    return False
