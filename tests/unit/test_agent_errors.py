"""What a failed query is summed up as: the line of Spark's wrapped traceback an operator needs."""

from __future__ import annotations

import pytest

from autosizer.pipeline.agent import summarize_error

SPARK_TRACE = """org.apache.spark.SparkException: Job aborted due to stage failure
  File "/work/main/autosizer/pipeline/slots.py", line 357, in _turn
    produced = normalize_outputs(self.process(record))
ValueError: cannot parse order 13

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/autosizer/pipeline/slots.py", line 359, in _turn
    raise AppFailed(
autosizer.pipeline.slots.AppFailed: the app raised on orders[1] at offset 6: ValueError: cannot parse order 13
\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:572)
"""


def test_our_own_exceptions_are_named_without_their_module_and_others_keep_theirs():
    assert summarize_error(SPARK_TRACE) == (
        "AppFailed: the app raised on orders[1] at offset 6: ValueError: cannot parse order 13")
    assert summarize_error("x\nrequests.exceptions.ConnectionError: refused\n") == (
        "requests.exceptions.ConnectionError: refused")  # the app's own: where it came from helps
    assert summarize_error("") == "unknown error"
    assert summarize_error("no exception line here\nat all") == "no exception line here"


def test_executors_without_aws_credentials_are_one_line_naming_the_fix():
    """A Kinesis pipeline on a standalone cluster whose credentials were in the driver's
    environment alone: the driver's check passed, and every read on the executors failed with
    botocore's bare `NoCredentialsError` (session 80). The line now says where and what to do."""
    trace = ("org.apache.spark.SparkException: Job aborted due to stage failure\n"
             "botocore.exceptions.NoCredentialsError: Unable to locate credentials\n"
             "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:572)\n")
    line = summarize_error(trace)
    assert "\n" not in line
    assert line.startswith("botocore.exceptions.NoCredentialsError: Unable to locate credentials (the Kinesis "
                           "reads on Spark's executors found no AWS credentials")
    assert line.endswith("(--conf spark.executorEnv.AWS_PROFILE=NAME picks one); nothing was committed)")


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_kinesis_outage_bound_that_is_not_seconds_is_refused_naming_the_setting(bad):
    from autosizer.pipeline.agent import PipelineConfig

    with pytest.raises(ValueError, match="kinesis_outage_s must be seconds >= 0"):
        PipelineConfig(job="j", redis_url="redis://127.0.0.1:1/0", bootstrap="", source="kinesis",
                       kinesis_outage_s=bad)
