"""Bad input from an operator, table-driven: every case is one line on stderr naming the field and
the fix, exit 2, nothing written, no secret echoed. Run as processes against a real Redis."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autosizer.controller.config import load_config
from autosizer.controller.daemon import build_tick
from autosizer.controller.overrides import OverrideStore, parse
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from tests.integration.test_cli import one_line_error
from tests.servers import free_port

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
AUTOSIZER = str(Path(sys.executable).parent / "autosizer")
SHIPPED = str(ROOT / "deploy" / "autosizer.toml")
HUGE = "1" + "0" * 26


def run(args: list[str], env: dict[str, str] | None = None,
        drop: tuple[str, ...] = ("AUTOSIZER_",)) -> subprocess.CompletedProcess:
    """The CLI as its own process, without the environment variables that start with `drop`."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return subprocess.run([AUTOSIZER, *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **(env or {})}, cwd=ROOT)


def one_line(result: subprocess.CompletedProcess) -> str:
    line = one_line_error(result)
    assert "Traceback" not in line
    return line


# (name, args after the command, env, what the line must say); {R} is the Redis URL, {J} the job.
CLI = [
    ("negative offset", "layout init --topic orders=2 --offset orders:0=-1 {C}", {}, "offset must be >= 0"),
    ("offset of 10^26", f"layout init --topic orders=2 --offset orders:0={HUGE} {{C}}", {}, "offset must be <= 9223372036854775807"),
    ("non-ASCII partitions", "layout init --topic orders=٣ {C}", {}, "is not NAME=PARTITIONS"),
    ("non-ASCII factor", "layout init --topic orders=2 --factor ٨ {C}", {}, "--factor must be a whole number"),
    ("duplicate topic", "layout init --topic orders=2 --topic orders=4 {C}", {}, "--topic orders is given twice"),
    ("too many tasks", "layout init --topic orders=100000 --factor 1024 {C}", {}, "virtual tasks, above the 65536"),
    ("zero partitions", "layout init --topic orders=0 {C}", {}, "partitions must be >= 1"),
    ("startpoint offset 10^26 on Kafka", f"startpoint set --topic orders --partition 0 --offset {HUGE} {{C}}", {}, "past a Kafka offset's range"),
    ("sequence number of 10^60", "startpoint set --topic orders --partition 0 --offset 1" + "0" * 60 + " {C}", {}, "--offset must be <="),
    ("Kinesis layout of two streams", "layout init --source kinesis --topic a=2 --topic b=2 {C}", {}, "a Kinesis layout holds one stream"),
    ("Kinesis layout, fixed grouper", "layout init --source kinesis --topic a=2 --grouper fixed {C}", {}, "use partition or topic-partition"),
    ("startpoint negative partition", "startpoint set --topic orders --partition -1 --offset 3 {C}", {}, "--partition must be >= 0"),
    ("timestamp in year 9999", "startpoint set --topic orders --partition 0 --timestamp 9999-01-01T00:00:00Z {C}", {}, "in the future"),
    ("timestamp of 10^26 ms", f"startpoint set --topic orders --partition 0 --timestamp {HUGE} {{C}}", {}, "in the future"),
    ("TTL shorter than a second", "override set pause true --ttl 0.0001s {C}", {}, "must be between 1s and 365d"),
    ("TTL nan", "override set pause true --ttl nan {C}", {}, "is not a duration"),
    ("TTL inf", "override set pause true --ttl infs {C}", {}, "is not a duration"),
    ("TTL 1e999", "override set pause true --ttl 1e999 {C}", {}, "is not a duration"),
    ("TTL of ten years", "override set pause true --ttl 3650d {C}", {}, "must be between 1s and 365d"),
    ("non-ASCII override factor", "override set factor ٨ {C}", {}, "not a whole number"),
    ("huge override value", "override set factor " + "8" * 5000 + " {C}", {}, "a value is a few characters at most"),
    ("decisions -n 10^20", "decisions -n 99999999999999999999 {C}", {}, "-n must be <= 100000"),
    ("decisions -n 0", "decisions -n 0 {C}", {}, "-n must be >= 1"),
    ("Redis db /abc", "layout show --job {J} --redis redis://127.0.0.1:6379/abc", {}, "must be a number like /0"),
    ("password with unencoded /", "layout show --job {J} --redis redis://:se/cr#et@127.0.0.1:6379/0", {}, "percent-encoded"),
    ("Redis db 99", "layout show --job {J} --redis {R99}", {}, "has no such database"),
    ("Redis URL at an HTTP port", "layout show --job {J} --redis redis://127.0.0.1:{HTTP}/0", {}, "cannot reach Redis at redis://127.0.0.1"),
    ("config is a directory", "status --config /tmp", {}, "cannot be read (IsADirectoryError)"),
    ("pipeline metrics port 70000", "pipeline run --app tests.apps:echo --sink file:/tmp/never "
     "--bootstrap 127.0.0.1:1 --metrics-port 70000 {C}", {}, "--metrics-port must be <= 65535, not 70000"),
    # a Spark setting's value may be a secret: the line names the fix, never the value
    ("Spark setting without '='", "pipeline run --app tests.apps:echo --sink file:/tmp/never "
     "--bootstrap 127.0.0.1:1 --conf spark.hadoop.fs.s3a.secret.key:se/cr#et {C}", {}, "--conf takes KEY=VALUE"),
    ("Spark setting of no Spark key", "pipeline run --app tests.apps:echo --sink file:/tmp/never "
     "--bootstrap 127.0.0.1:1 --conf fs.s3a.secret.key=se/cr#et {C}", {}, "only keys that start with 'spark.'"),
    ("Spark master as a setting", "pipeline run --app tests.apps:echo --sink file:/tmp/never "
     "--bootstrap 127.0.0.1:1 --conf spark.master=local[4] {C}", {}, "--conf spark.master: use --master instead"),
    ("Kafka sink topic with a colon", "pipeline run --app tests.apps:echo --sink kafka:out:put "
     "--bootstrap 127.0.0.1:1 {C}", {}, "a Kafka topic's name is 1 to 249 letters, digits"),
    ("sink of no kind", "pipeline run --app tests.apps:echo --sink s3://bucket/out --bootstrap 127.0.0.1:1 {C}",
     {}, "use file:/path/to/dir or kafka:TOPIC"),
]
CONFIG = [  # `autosizer run --config deploy/autosizer.toml` with one bad environment value
    ("env typo", {"AUTOSIZER_GAURDS_MAX_FACTOR": "64"}, "unknown environment variable AUTOSIZER_GAURDS_MAX_FACTOR"),
    ("unknown guard setting", {"AUTOSIZER_GUARDS_MAX_FACTR": "64"}, "[guards] has no setting 'max_factr'"),
    ("rate window not a duration", {"AUTOSIZER_PROMETHEUS_WINDOW": "soon"}, "[prometheus] window 'soon' is not a duration"),
    ("rate window of a week", {"AUTOSIZER_PROMETHEUS_WINDOW": "7d"}, "[prometheus] window must be between 1s and 24h"),
    ("listen port 99999", {"AUTOSIZER_DAEMON_LISTEN": "127.0.0.1:99999"}, "port 0-65535"),
    ("interval inf", {"AUTOSIZER_DAEMON_INTERVAL_S": "inf"}, "interval_s = 'inf' must be a number"),
    ("interval nan", {"AUTOSIZER_DAEMON_INTERVAL_S": "nan"}, "must be a number"),
    ("cooldown 1e999", {"AUTOSIZER_GUARDS_COOLDOWN_S": "1e999"}, "must be a finite number"),
    ("non-ASCII max_factor", {"AUTOSIZER_GUARDS_MAX_FACTOR": "٦٤"}, "must be a whole number"),
    ("lease 1e-6", {"AUTOSIZER_DAEMON_LEASE_TTL_S": "1e-6"}, "lease_ttl_s 1e-06 must be at least twice"),
    ("journal of 10^20", {"AUTOSIZER_DAEMON_JOURNAL_LENGTH": "99999999999999999999"}, "journal_length must be between"),
    ("Redis db in config", {"AUTOSIZER_REDIS_URL": "redis://127.0.0.1:6379/abc"}, "must be a number like /0"),
    ("policy setting typo", {"AUTOSIZER_POLICY_TARGT_UTILIZATION": "0.5"}, "policy 'autosizer' has no setting 'targt_utilization'"),
    ("policy setting inf", {"AUTOSIZER_POLICY_HORIZON_S": "inf"}, "horizon_s must be a finite number"),
    ("policy setting text", {"AUTOSIZER_POLICY_HORIZON_S": "soon"}, "horizon_s must be a finite number > 0, not 'soon'"),
    ("actuator setting nan", {"AUTOSIZER_ACTUATOR_DRAIN_TIMEOUT_S": "nan"}, "drain_timeout_s must be a finite number"),
    ("actuator setting typo", {"AUTOSIZER_ACTUATOR_DRAIN_TIMOUT_S": "5"}, "has no setting 'drain_timout_s'"),
    ("backoff above its cap", {"AUTOSIZER_DAEMON_BACKOFF_S": "9999"}, "backoff_s must be > 0 and at most backoff_max_s"),
]


@pytest.fixture(scope="module")
def http_port():
    """A port that answers HTTP, not Redis."""
    import http.server
    import threading

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.parametrize("name, args, env, needle", CLI, ids=[c[0] for c in CLI])
def test_cli_bad_input_is_one_line(redis_server, job, http_port, name, args, env, needle):
    common = f"--redis {redis_server.url} --job {job}"
    MetadataStore(redis_server.url, job).init_layout(Layout(topics={"orders": 2}, factor=1)) \
        if args.startswith(("startpoint", "decisions")) else None
    text = args.format(C=common, J=job, R99=redis_server.url.rsplit("/", 1)[0] + "/99", HTTP=http_port)
    line = one_line(run(text.split(), env))
    assert needle in line, line
    assert "se/cr#et" not in line and "cr#et" not in line
    if args.startswith("layout init"):
        assert MetadataStore(redis_server.url, job).current_generation() is None, "nothing written"


def test_a_master_spark_cannot_start_on_ends_the_pipeline_in_one_line_of_ours(redis_server, job):
    """Spark's own words come first on stderr (its Java stack); the last line is ours, naming
    the flag, with no Python traceback after them (before: PySpark's JAVA_GATEWAY_EXITED traceback)."""
    result = run(["pipeline", "run", "--app", "tests.apps:echo", "--sink", "file:/tmp/never", "--bootstrap",
                  "127.0.0.1:1", "--redis", redis_server.url, "--job", job, "--master", "nope", "--metrics-port", "0"])
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "autosizer: error: Spark did not start with --master 'nope'"), result.stderr[-500:]


@pytest.mark.parametrize("name, env, needle", CONFIG, ids=[c[0] for c in CONFIG])
def test_config_bad_value_is_one_line_before_anything_runs(name, env, needle):
    line = one_line(run(["run", "--config", SHIPPED], {"AUTOSIZER_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0", **env}))
    assert needle in line, line


def test_max_factor_below_an_existing_min_factor_is_refused(redis_server, job):
    overrides = OverrideStore(MetadataStore(redis_server.url, job))
    overrides.set("min_factor", "64")
    with pytest.raises(ValueError, match="min is above max"):
        overrides.set("max_factor", "8")
    assert overrides.read().max_factor is None


def test_a_five_megabyte_override_written_behind_the_cli_is_reported_in_a_short_line():
    found = parse({"factor": ("8" * 5_000_000, None)})
    assert found.factor is None and len(found.errors[0]) < 300


@pytest.mark.parametrize("actuator", ["restart-in-driver", "dry-run", "spark-submit"])
def test_the_shipped_config_builds_with_every_built_in_actuator(tmp_path, actuator):
    env = {"AUTOSIZER_ACTUATOR_NAME": actuator}
    if actuator == "spark-submit":
        env |= {"AUTOSIZER_ACTUATOR_COMMAND": "autosizer pipeline run", "AUTOSIZER_ACTUATOR_PID_FILE": str(tmp_path / "p")}
    tick = build_tick(load_config(SHIPPED, env))
    assert tick.actuator.name == actuator


@pytest.mark.parametrize("suffix", ["override:pause", "leader", "agent", "decisions", "layout:current", "actuation"])
def test_status_and_override_list_name_a_poisoned_key_instead_of_a_traceback(redis_server, job, suffix):
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1))
    key = store.keys.key(*suffix.split(":"))
    store.redis.delete(key)
    store.redis.rpush(key, "x")  # a list where nothing is a list
    common = ["--redis", redis_server.url, "--job", job]
    status = run(["status", *common])
    assert status.returncode == 0 and "Traceback" not in status.stderr, status
    assert f"problem    Redis key {key!r} holds a list" in status.stdout, status.stdout
    listed = run(["override", "list", *common])
    if suffix.startswith("override"):
        assert key in one_line(listed)
    else:
        assert listed.returncode == 0, listed
    if suffix == "actuation":  # the decisions are still shown, the key named after them
        shown = run(["decisions", *common])
        assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown
        assert shown.stdout.startswith("no decisions yet\nproblem: Redis key "), shown.stdout
        assert f"{key!r} holds a list" in shown.stdout, shown.stdout


NO_AWS = {"AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
          "AWS_EC2_METADATA_DISABLED": "true"}  # no profile, no instance role: only what a case sets


@pytest.mark.parametrize("endpoint, env, needle", [
    ("nope", {"AWS_REGION": "us-east-1"}, "--kinesis-endpoint 'nope' must start with http:// or https://"),
    ("http://127.0.0.1:1", {}, "no AWS region for the Kinesis stream: pass --region NAME or set AWS_REGION"),
    ("http://127.0.0.1:1", {"AWS_REGION": "us-east-1"}, "no AWS credentials for the Kinesis stream: set "
                                                       "AWS_ACCESS_KEY_ID"),
])
def test_a_kinesis_pipeline_without_a_region_or_credentials_says_so_before_spark_starts(
        redis_server, job, endpoint, env, needle):
    """Each was botocore's traceback from inside the first query (NoRegionError,
    NoCredentialsError) after Spark's start; now one line before it."""
    result = run(["pipeline", "run", "--source", "kinesis", "--kinesis-endpoint", endpoint, "--app",
                  "tests.apps:echo", "--sink", "file:/tmp/never", "--redis", redis_server.url, "--job", job],
                 {**NO_AWS, **env}, drop=("AUTOSIZER_", "AWS_"))
    assert needle in one_line(result), result.stderr


@pytest.mark.parametrize("source", ["kafka", "kinesis"])
def test_a_broker_that_does_not_answer_at_the_start_fails_the_pipeline_in_one_line(redis_server, job, source):
    """The start positions are read from the broker before the query starts: with none there it
    was confluent-kafka's traceback. Now one line of ours, exit 1, nothing committed, and the
    status an operator reads says failed and why; on Kinesis the line names the calls the
    credentials must be allowed (an AWS account's denial reads the same way)."""
    from autosizer.pipeline.control import ControlChannel

    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 2}, factor=1, source=source))
    # a short outage bound: what is checked is how the pipeline fails, not how long it waited
    where = (["--bootstrap", f"127.0.0.1:{free_port()}"] if source == "kafka" else
             ["--source", "kinesis", "--kinesis-endpoint", f"http://127.0.0.1:{free_port()}", "--region", "us-east-1"])
    where += ["--broker-outage-s", "3"]
    result = run(["pipeline", "run", "--app", "tests.apps:echo", "--sink", "file:/tmp/never", *where,
                  "--redis", redis_server.url, "--job", job, "--master", "local[1]", "--metrics-port", "0"],
                 {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    fix = ("start the broker or fix --bootstrap" if source == "kafka" else
           "fix --kinesis-endpoint, --region or the credentials (they need kinesis:ListShards, "
           "kinesis:GetShardIterator and kinesis:GetRecords on the stream)")
    assert last.startswith(f"autosizer: error: pipeline failed: {source.capitalize()} at ") and (
        "did not answer the start positions" in last and fix in last), last
    status = ControlChannel(store).status()
    assert status["state"] == "failed" and "did not answer the start positions" in status["error"], status
    assert store.committed_batch(1) == 0
