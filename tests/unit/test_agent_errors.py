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


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_kinesis_outage_bound_that_is_not_seconds_is_refused_naming_the_setting(bad):
    from autosizer.pipeline.agent import PipelineConfig

    with pytest.raises(ValueError, match="kinesis_outage_s must be seconds >= 0"):
        PipelineConfig(job="j", redis_url="redis://127.0.0.1:1/0", bootstrap="", source="kinesis",
                       kinesis_outage_s=bad)
