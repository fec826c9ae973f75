"""Real servers for tests: the project's own embedded launchers, on free loopback ports."""

from __future__ import annotations

import glob
import signal
from pathlib import Path

from autosizer.embedded import EmbeddedBroker, EmbeddedKinesis, EmbeddedRedis, free_port

__all__ = ["RedisServer", "Broker", "Kinesis", "ClockedKinesis", "free_port"]


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
    node, reads the offset from a file at every reading of the clock, the monotonic clock's too
    unless `wall_only` (a step of the wall clock alone, as NTP makes one). Killed at the end: with
    its clock moved, node's own shutdown waits out its 10 s grace."""

    stop_signal = signal.SIGKILL  # nothing of it is kept

    def __init__(self, workdir: Path, wall_only: bool = False):
        found = glob.glob(FAKETIME_LIBRARY)
        if not found:
            raise RuntimeError(f"libfaketime is not installed (no {FAKETIME_LIBRARY}): run `make setup`")
        super().__init__()
        self.library = found[0]
        self.offset_file = workdir / "faketime.rc"
        self.offset_s = 0
        self.offset_file.write_text("+0\n")
        self.wall_only = wall_only

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        args, env = super()._command()
        return args, {**(env or {}), "LD_PRELOAD": self.library, "FAKETIME_TIMESTAMP_FILE": str(self.offset_file),
                      "FAKETIME_NO_CACHE": "1", **({"FAKETIME_DONT_FAKE_MONOTONIC": "1"} if self.wall_only else {})}

    def advance(self, seconds: int) -> None:
        """Move the emulator's clock on."""
        self.offset_s += seconds
        self.offset_file.write_text(f"+{self.offset_s}\n")
