"""A Kinesis pipeline's client errors: which count as the source being down, and what is checked
before Spark starts (`autosizer.pipeline.cli._check_kinesis`)."""

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
    from autosizer.pipeline.cli import AppError, _check_kinesis

    monkeypatch.setitem(sys.modules, "boto3", None)  # what Python does for a package that is not there
    with pytest.raises(AppError, match=r"--source kinesis needs boto3: pip install 'autosizer\[kinesis\]'"):
        _check_kinesis("http://127.0.0.1:1", "us-east-1")
