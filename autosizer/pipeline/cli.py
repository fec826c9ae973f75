"""`autosizer pipeline run`: run a user's per-record function as an autosized Spark pipeline."""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from autosizer.checks import argtype, finite, whole
from autosizer.pipeline.sinks import FileSink, KafkaSink, Sink
from autosizer.pipeline.worker_gc import GC_FREEZE_ENV


class AppError(ValueError):
    """The --app or --sink argument is unusable; the message says what to pass instead."""


# The pipeline's own session (the agent adds how its scratch checkpoint is written:
# `agent.SCRATCH_CHECKPOINT`). `--conf` overrides any of them.
SPARK_SETTINGS = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2"}
# Set by flags of their own, which say so.
_FLAGGED = {"spark.master": "--master", "spark.app.name": "--job"}


def spark_setting(text: str) -> tuple[str, str]:
    """One `--conf KEY=VALUE`. The value may be a secret (an S3 key), so no error repeats it."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or not value:
        raise argparse.ArgumentTypeError("--conf takes KEY=VALUE, e.g. --conf spark.executor.memory=2g "
                                         "(one was given without a key, a '=' or a value)")
    if not key.startswith("spark.") or any(c.isspace() for c in key):
        raise argparse.ArgumentTypeError(f"--conf {key[:80]!r}: Spark reads only keys that start with "
                                         "'spark.' and hold no space (Hadoop's: spark.hadoop.KEY=VALUE)")
    if key in _FLAGGED:
        raise argparse.ArgumentTypeError(f"--conf {key}: use {_FLAGGED[key]} instead")
    return key, value


def load_app(spec: str) -> Any:
    """`package.module:function`, imported from the working directory like `python -m`."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise AppError(f"--app {spec!r} is not package.module:function, e.g. examples.enrich:enrich")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AppError(f"--app: cannot import {module_name!r} ({exc}): run from the directory that holds it") from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise AppError(f"--app: {module_name!r} has no function {attr!r}")
    # Ship the app's code with the task, so executors need not have the module on their path.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    return fn


TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")  # what Kafka accepts


def make_sink(spec: str, bootstrap: str) -> Sink:
    kind, _, target = spec.partition(":")
    if kind == "file" and target:
        return FileSink(target)
    if kind == "kafka" and target:
        if not TOPIC_NAME.fullmatch(target):
            raise AppError(f"--sink kafka:{target!r}: a Kafka topic's name is 1 to 249 letters, digits, "
                           "'.', '_' or '-'")
        return KafkaSink(bootstrap, target)
    raise AppError(f"--sink {spec!r}: use file:/path/to/dir or kafka:TOPIC (both exactly once)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app", required=True, help="package.module:function called per record")
    parser.add_argument("--bootstrap", default=os.environ.get("AUTOSIZER_BOOTSTRAP"),
                        help="Kafka bootstrap servers; env AUTOSIZER_BOOTSTRAP")
    parser.add_argument("--source", choices=["kafka", "kinesis"], default="kafka",
                        help="kafka (topics on --bootstrap) or kinesis (the layout's stream; a shard "
                             "is a partition; credentials from boto3's chain)")
    parser.add_argument("--kinesis-endpoint", default=os.environ.get("AUTOSIZER_KINESIS_ENDPOINT"),
                        help="Kinesis endpoint URL (default: AWS's); env AUTOSIZER_KINESIS_ENDPOINT")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION"),
                        help="AWS region of the stream (default: boto3's); env AWS_REGION")
    parser.add_argument("--sink", required=True,
                        help="file:/dir (Parquet) or kafka:TOPIC (on --bootstrap); both exactly once")
    parser.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"),
                        help="Spark master (default local[*]; spark://host:7077 for standalone)")
    parser.add_argument("--trigger", type=argtype("--trigger", finite, 0.01), default=1.0,
                        help="seconds between the starts of micro-batches when there is little to do (default 1)")
    parser.add_argument("--batch-seconds", type=argtype("--batch-seconds", finite, 0.05), default=3.0,
                        help="each virtual task works at most this long per micro-batch; the source "
                             "admits about this much work, from measured rates (default 3)")
    parser.add_argument("--run-ahead", type=argtype("--run-ahead", finite, 1.0), default=1.5,
                        help="a batch reads this many batches of measured work past a partition's "
                             "slowest virtual task: how far a light bucket may run ahead (default 1.5)")
    parser.add_argument("--max-records", type=argtype("--max-records", whole, 1),
                        help="optional upper bound on records per micro-batch (memory); default none")
    parser.add_argument("--parallelism", type=argtype("--parallelism", whole, 1), help="slots per batch (default: Spark's)")
    parser.add_argument("--default-offsets", choices=["earliest", "latest"], default="earliest",
                        help="where partitions without a checkpoint start")
    parser.add_argument("--metrics-port", type=argtype("--metrics-port", whole, 0, 65535), default=9108,
                        help="serve Prometheus /metrics on this port (default 9108; 0: any free port)")
    parser.add_argument("--metrics-address", default="127.0.0.1", help="address for /metrics")
    parser.add_argument("--redis-outage-s", type=argtype("--redis-outage-s", finite, 0.0), default=60.0,
                        help="ride through a Redis outage this long (the commit is retried, the "
                             "query keeps its place), then exit with one line (default 60)")
    parser.add_argument("--broker-outage-s", type=argtype("--broker-outage-s", finite, 1.0, 86400.0),
                        help="ride through a Kafka broker or a Kinesis endpoint that does not answer "
                             "this long (each batch's reads wait and retry; nothing is lost or "
                             "repeated), then exit with one line (default 25)")
    parser.add_argument("--conf", type=spark_setting, action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the pipeline's session, as spark-submit's --conf "
                             "(repeat it; wins over the pipeline's own: spark.ui.enabled=false, "
                             "spark.sql.shuffle.partitions=2 and how its checkpoint is written)")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="let PySpark's collection after every task walk the Python workers' modules "
                             "too (by default they are frozen out of it: half the pipeline's CPU at a "
                             "light load); for an app that leaves cyclic garbage from its import")
    parser.add_argument("--wait-for-start", action="store_true",
                        help="do not start until the controller sends a start request")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"], default="info",
                        help="structlog level on stderr (default info: starts, drains, startpoints)")
    parser.add_argument("--json-logs", action="store_true", help="structlog JSON lines on stderr")


def _spark(session: Any, master: str, job: str, gc_freeze: bool = True,
           conf: Sequence[tuple[str, str]] = ()) -> Any:
    """The driver's session; a master Spark cannot start on (`--master nope`, no Java) is one line
    naming the flag, after Spark's own words on stderr, not PySpark's traceback. The Python
    workers learn `--no-gc-freeze` from `executorEnv`, which PySpark hands every Python function
    it runs, locally and on a cluster alike (checked in local mode: the driver's own environment
    is not needed). The builder's settings win over spark-submit's `--conf`, so the user's
    go through the pipeline's own `--conf`, applied last."""
    from pyspark.errors import PySparkException

    settings = {**SPARK_SETTINGS, f"spark.executorEnv.{GC_FREEZE_ENV}": "1" if gc_freeze else "0", **dict(conf)}
    builder = session.builder.master(master).appName(f"autosizer-{job}")
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except PySparkException as exc:
        raise AppError(f"Spark did not start with --master {master!r} ({str(exc).splitlines()[0]}): "
                       "use local[N] or spark://HOST:7077 (Spark's reason is above)") from None


def check_kinesis_access(endpoint: str | None, region: str | None) -> str:
    """What boto3 would refuse only once Spark runs, with a traceback from inside the query: boto3
    not installed, an endpoint that is no URL, or no region or credentials anywhere in its chain
    (flag, environment, profile, role). Returns the region the driver's chain found, which the
    pipeline hands to every reader: a cluster's executors have their own environment, and one
    that came from the driver's (`AWS_DEFAULT_REGION`) failed every read there with botocore's
    `NoRegionError` (session 80, a standalone cluster)."""
    try:
        import boto3
        from botocore.exceptions import NoRegionError
    except ImportError:
        raise AppError("--source kinesis needs boto3: pip install 'autosizer[kinesis]'") from None

    from autosizer.pipeline.kinesis_source import kinesis_client

    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise AppError(f"--kinesis-endpoint {endpoint[:80]!r} must start with http:// or https://")
    try:
        client = kinesis_client(endpoint, region)
    except NoRegionError:
        raise AppError("no AWS region for the Kinesis stream: pass --region NAME or set AWS_REGION "
                       "(or AWS_DEFAULT_REGION, or a region in the AWS profile)") from None
    except ValueError as exc:  # botocore's own check of the endpoint URL
        raise AppError(f"--kinesis-endpoint {endpoint!r}: {exc}") from None
    if boto3.Session(region_name=region).get_credentials() is None:  # the client's chain finds none
        raise AppError("no AWS credentials for the Kinesis stream: set AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an instance or task role "
                       "(an emulator takes any pair)")
    return str(client.meta.region_name)


def run(args: argparse.Namespace) -> None:
    if not args.bootstrap and (args.source == "kafka" or args.sink.startswith("kafka:")):
        raise AppError("no broker given: pass --bootstrap HOST:PORT or set AUTOSIZER_BOOTSTRAP")
    if not args.job:
        raise AppError("no job given: pass --job NAME or set AUTOSIZER_JOB")
    region = args.region
    if args.source == "kinesis":
        region = check_kinesis_access(args.kinesis_endpoint, args.region)
    from autosizer.controller.logging import configure_logging

    # A long-running process: its starts, drains and startpoints are what an operator reads.
    configure_logging(level=args.log_level, json=args.json_logs)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    process = load_app(args.app)
    sink = make_sink(args.sink, args.bootstrap or "")

    from pyspark.sql import SparkSession

    from autosizer.pipeline.agent import (
        BROKER_OUTAGE_S,
        PipelineAgent,
        PipelineConfig,
        broker_attempts,
    )

    spark = _spark(SparkSession, args.master, args.job, gc_freeze=not args.no_gc_freeze, conf=args.conf)
    spark.sparkContext.setLogLevel("ERROR")
    outage_s = BROKER_OUTAGE_S if args.broker_outage_s is None else args.broker_outage_s
    config = PipelineConfig(
        job=args.job, redis_url=args.redis, bootstrap=args.bootstrap or "", trigger_seconds=args.trigger,
        batch_seconds=args.batch_seconds, run_ahead=args.run_ahead,
        max_records_per_batch=args.max_records, parallelism=args.parallelism,
        default_offsets=args.default_offsets, metrics_port=args.metrics_port,
        metrics_address=args.metrics_address, redis_outage_s=args.redis_outage_s,
        kafka_retries=broker_attempts(outage_s), kinesis_outage_s=outage_s,
        source=args.source, kinesis_endpoint=args.kinesis_endpoint, kinesis_region=region,
    )
    agent = PipelineAgent(spark, config, process, sink)
    stop = threading.Event()
    # SIGTERM drains: the in-flight batch commits, then the query stops.
    # SIGUSR1 prints every thread's stack to stderr: how an operator sees where a stuck driver is.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        agent.run(stop, start=not args.wait_for_start)
    finally:
        agent.close()
        spark.stop()
