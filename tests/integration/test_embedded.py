"""The embedded servers start even when the loopback port they picked was taken first."""

from __future__ import annotations

import base64
import gc
import socket
from pathlib import Path

import pytest
import redis

from autosizer.embedded import EmbeddedPrometheus, EmbeddedRedis, free_port
from tests.integration.test_pipeline import wait_until
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


def test_free_port_picks_below_the_kernels_ephemeral_range():
    """The kernel hands ports inside its ephemeral range to any bind(0) or outgoing connection,
    so a port picked there can be taken before its server binds it (a CI run lost a pipeline's
    metrics port to one); picks below the range never are."""
    floor = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    if floor - 10000 >= 1000:
        assert all(10000 <= port < floor for port in ports), ports
    else:  # a machine whose range starts low leaves no room: the kernel's own pick
        assert all(port >= floor for port in ports), ports
    assert len(ports) > 1, "random picks, not one fixed port"
    port = ports.pop()
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))  # free when picked


def test_a_work_directory_the_server_made_outlives_a_restart_and_goes_with_the_server():
    """Redis and Prometheus given no work directory make one in /tmp; every test's server left
    one behind. It stays through stop and start (Redis' AOF holds what was written) and is
    removed once the server object is gone."""
    server = EmbeddedRedis().start()
    workdir = server.workdir
    try:
        redis.Redis.from_url(server.url).set("kept", "1")
        server.restart()
        assert redis.Redis.from_url(server.url).get("kept") == b"1"
    finally:
        server.stop()
    assert workdir.exists()
    del server
    gc.collect()
    assert not workdir.exists()


def test_a_kinesis_halt_that_cuts_the_emulators_data_file_keeps_its_streams(tmp_path, monkeypatch):
    """The emulator rewrites its data file in place every second; a halt in the middle of a
    write left it cut short and the next start exited (session 78, on a loaded machine). The
    cut is made here by the stop itself, after the emulator has ended: the last whole file is
    put back, and the restarted emulator has the stream and its records."""
    from autosizer import embedded

    kinesis = Kinesis(data_dir=tmp_path / "kinesis").start()
    try:
        kinesis.create_stream("orders", 1)
        kinesis.produce("orders", [(b"k%d" % i, b"%d" % i) for i in range(5)])
        data, last = tmp_path / "kinesis" / embedded.DATA_FILE, b'"Data":"%s"' % base64.b64encode(b"4")
        wait_until(lambda: last in (kinesis._whole_data() or b""), 30, "the emulator to save the records")
        stop = embedded._Process.stop

        def stop_in_a_write(self) -> None:
            stop(self)
            data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])

        monkeypatch.setattr(embedded._Process, "stop", stop_in_a_write)
        kinesis.halt()
        monkeypatch.undo()
        kinesis.start()
        client = kinesis.client()
        shard = client.list_shards(StreamName="orders")["Shards"][0]["ShardId"]
        iterator = client.get_shard_iterator(StreamName="orders", ShardId=shard,
                                             ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        assert [r["Data"] for r in client.get_records(ShardIterator=iterator)["Records"]] == \
            [b"%d" % i for i in range(5)]
    finally:
        kinesis.stop()
