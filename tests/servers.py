"""Real servers for tests: the project's own embedded launchers, on free loopback ports."""

from __future__ import annotations

from pathlib import Path

from autosizer.embedded import EmbeddedBroker, EmbeddedKinesis, EmbeddedRedis, free_port

__all__ = ["RedisServer", "Broker", "Kinesis", "free_port"]


class RedisServer(EmbeddedRedis):
    def __init__(self, workdir: Path, password: str | None = None, tls: bool = False):
        super().__init__(workdir=workdir, password=password, tls=tls)


Broker = EmbeddedBroker
Kinesis = EmbeddedKinesis
