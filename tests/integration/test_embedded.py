"""The embedded servers start even when the loopback port they picked was taken first."""

from __future__ import annotations

import socket

import pytest

from autosizer.embedded import EmbeddedPrometheus, EmbeddedRedis
from tests.servers import Broker, Kinesis

SERVERS = [Broker, Kinesis, EmbeddedRedis, EmbeddedPrometheus]
IDS = ["broker", "kinesis", "redis", "prometheus"]


@pytest.mark.parametrize("server_class", SERVERS, ids=IDS)
def test_a_server_starts_on_another_port_when_the_one_it_picked_is_taken(server_class):
    """free_port releases the port it found, so another process (here: this socket) can bind it
    before the server does; the server then exits at once and is launched on a fresh port."""
    server = server_class()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", server.port))
        picked = server.port
        server.start()
        try:
            assert server.port != picked and server.process.poll() is None
            assert server._answers()
        finally:
            server.stop()


@pytest.mark.parametrize("server_class", SERVERS, ids=IDS)
def test_a_taken_port_the_user_named_fails_once_with_the_servers_own_words(server_class):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        server = server_class(port=taken.getsockname()[1])
        with pytest.raises(RuntimeError, match=r"(?i)exited at start \(1x\): .*in use.*its log: "):
            server.start()
    assert server.process is None and server.log.exists()  # the log the error names stays
    server.stop()
