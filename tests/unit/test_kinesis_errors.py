"""A Kinesis pipeline's client errors: which count as the source being down, and what is checked
before Spark starts (`autosizer.pipeline.cli.check_kinesis_access`)."""

from __future__ import annotations

import sys

import pytest


def test_a_kinesis_endpoint_that_does_not_answer_raises_what_the_agent_counts_as_the_source_down(monkeypatch):
    """The agent turns these into one line naming the flags (`PipelineAgent._source_down`); a
    refused connection is botocore's EndpointConnectionError, which must be among them."""
    from autosizer.embedded import free_port
    from autosizer.pipeline import kinesis_source

    for name, value in (("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")):
        monkeypatch.setenv(name, value)
    positions = kinesis_source.KinesisPositions(f"http://127.0.0.1:{free_port()}", "us-east-1")
    with pytest.raises(kinesis_source.unavailable_errors(), match="Could not connect to the endpoint URL"):
        positions.oldest_offset("orders", 0)


def test_a_kinesis_pipeline_without_boto3_names_the_extra_to_install(monkeypatch):
    """boto3 is an optional extra (`autosizer[kinesis]`): without it `--source kinesis` was an
    ImportError traceback from inside the first query."""
    from autosizer.pipeline.cli import AppError, check_kinesis_access

    monkeypatch.setitem(sys.modules, "boto3", None)  # what Python does for a package that is not there
    with pytest.raises(AppError, match=r"--source kinesis needs boto3: pip install 'autosizer\[kinesis\]'"):
        check_kinesis_access("http://127.0.0.1:1", "us-east-1")


def test_the_region_the_drivers_chain_finds_is_the_one_every_reader_is_given(monkeypatch):
    """On a standalone cluster a region in the driver's environment alone (`AWS_DEFAULT_REGION`)
    passed the driver's check, and every read on the executors failed with botocore's
    `NoRegionError` (session 80): the check returns what the driver's chain found, and the
    pipeline hands that to its readers (`PipelineConfig.kinesis_region`)."""
    from autosizer.pipeline.cli import check_kinesis_access

    for name, value in (("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b"),
                        ("AWS_DEFAULT_REGION", "eu-west-3")):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_REGION", raising=False)
    assert check_kinesis_access("http://127.0.0.1:1", None) == "eu-west-3"
    assert check_kinesis_access("http://127.0.0.1:1", "us-east-1") == "us-east-1"  # --region wins


def test_an_endpoint_away_past_the_outage_bound_fails_the_read_with_one_line_naming_the_fix(monkeypatch):
    """A batch's reader asks again for `outage_s` (the pipeline's --broker-outage-s), then the
    batch fails with one line: the endpoint, how long, the botocore error and what to do."""
    from autosizer.embedded import free_port
    from autosizer.pipeline.kinesis_source import KinesisUnavailable, ShardReader, kinesis_client

    for name, value in (("AWS_ACCESS_KEY_ID", "a"), ("AWS_SECRET_ACCESS_KEY", "b")):
        monkeypatch.setenv(name, value)
    endpoint = f"http://127.0.0.1:{free_port()}"
    reader = ShardReader(kinesis_client(endpoint, "us-east-1", attempts=1), "orders", outage_s=1.0)
    with pytest.raises(KinesisUnavailable) as failed:
        list(reader.records("an-iterator", 10, shard=3))
    message = str(failed.value)
    assert "\n" not in message
    assert message.startswith(f"Kinesis at {endpoint} did not answer orders/shardId-000000000003's records "
                              "for 1s (Could not connect to the endpoint URL")
    assert message.endswith("start the endpoint or fix --kinesis-endpoint, or raise --broker-outage-s; "
                            "nothing was committed")


def test_what_counts_as_an_endpoint_away_or_busy_and_what_does_not():
    """Refused, lost or timed-out connections, throttles and 5xx are asked again; an answer that
    would come back the same (no such stream, no access) fails at once."""
    from botocore.exceptions import (
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    from autosizer.pipeline.kinesis_source import passing

    def answer(code: str, status: int) -> ClientError:
        return ClientError({"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetRecords")

    assert passing(EndpointConnectionError(endpoint_url="http://x"))
    assert passing(ReadTimeoutError(endpoint_url="http://x"))
    assert passing(answer("ProvisionedThroughputExceededException", 400))
    assert passing(answer("InternalFailure", 500)) and passing(answer("Whatever", 503))
    assert not passing(answer("ResourceNotFoundException", 400))
    assert not passing(answer("AccessDeniedException", 400))
    assert not passing(NoCredentialsError()) and not passing(ValueError("x"))


def test_the_stream_reader_takes_its_outage_bound_from_its_option():
    from autosizer.pipeline.kinesis_source import OUTAGE_MS, KinesisStreamReader

    options = {"stream": "s", "planFile": "/nowhere/plan.json"}
    assert KinesisStreamReader(options).outage_s == OUTAGE_MS / 1000 == 25.0
    assert KinesisStreamReader({**options, "kinesis.outageMs": "120000"}).outage_s == 120.0
    with pytest.raises(ValueError, match="kinesis.outageMs must be >= 0, not -5"):
        KinesisStreamReader({**options, "kinesis.outageMs": "-5"})


def test_a_records_arrival_time_is_parsed_to_the_same_instant_botocore_gives_in_utc():
    """`utc_time` replaces botocore's timestamp parser on the pipeline's clients (half the CPU a
    record costs to read): the same instant for epoch seconds, UTC, and botocore's own parser for
    anything that is not a number."""
    from datetime import UTC

    from botocore.utils import parse_timestamp

    from autosizer.pipeline.kinesis_source import utc_time

    for value in (1_795_920_000.419, 1_795_920_000, 0, 1.5):
        parsed = utc_time(value)
        assert parsed == parse_timestamp(value) and parsed.tzinfo is UTC
    assert utc_time("2026-11-29T03:54:58.419Z") == parse_timestamp("2026-11-29T03:54:58.419Z")

