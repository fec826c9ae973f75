"""Pure parts of fault handling: redaction, number checks, backoff, the tick time limit."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autosizer.actuators.base import ActuatorContext
from autosizer.actuators.restart_in_driver import RestartInDriver
from autosizer.checks import MAX_OFFSET, finite, whole
from autosizer.controller.backoff import Backoff
from autosizer.controller.daemon import max_tick_seconds
from autosizer.elasticity.keys import SPECS, JobKeys, spec_for
from autosizer.elasticity.store import MetadataStore, StoreUnavailable, check_redis_url
from autosizer.redaction import clip, redact, scrub


@pytest.mark.parametrize("url", [
    "redis://:s3cret@host:6379/0", "redis://user:s3cret@host/0", "http://admin:s3cret@prom:9090",
    "redis://:se/cr#et?x@host:6379/0", "rediss://:a@b@s3cret@host:1/0",
])
def test_redact_hides_the_whole_user_info_whatever_it_holds(url):
    text = f"cannot reach {url} (refused)"
    assert "s3cret" not in redact(text) and "cr#et" not in redact(text)
    assert redact(text).endswith("(refused)") and "***@" in redact(text)


@given(st.text(max_size=200))
def test_redact_leaves_text_without_user_info_alone(text):
    if "@" not in text:
        assert redact(text) == text


@pytest.mark.parametrize("url", ["notaurl", "redis://127.0.0.1:99999/0", "redis://:se/cr#et@host:6379/0"])
def test_a_bad_redis_urls_hint_reads_the_same_after_redaction(url):
    """The hint said `redis://[:password@]host:port/db`, which the redaction every error line
    passes through took for a password and printed as `redis://***@]host:port/db`."""
    with pytest.raises(StoreUnavailable) as caught:
        check_redis_url(url)
    message = str(caught.value)
    assert redact(message) == message and "use redis://host:port/db" in message and "cr#et" not in message


def test_scrub_reaches_nested_values_and_clips():
    out = scrub({"a": ["redis://:pw@h/0", ("x" * 5000,)], "n": 3})
    assert out["a"][0] == "redis://***@h/0" and out["n"] == 3
    assert len(out["a"][1][0]) < 2100 and out["a"][1][0].endswith("more chars)")
    assert clip("abc", 5) == "abc"


@pytest.mark.parametrize("text", ["٣", "1_000", "+", "", "0x10", "1e3", " ", "9" * 30])
def test_whole_refuses_what_int_would_take_or_what_is_out_of_range(text):
    with pytest.raises(ValueError, match="--offset"):
        whole(text, "--offset", 0, MAX_OFFSET)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999", math.nan, math.inf, True, "٣", "1_0"])
def test_finite_refuses_nan_infinity_and_odd_digits(value):
    with pytest.raises(ValueError, match="interval_s"):
        finite(value, "interval_s", 0)


@given(st.integers(min_value=0, max_value=MAX_OFFSET))
def test_whole_reads_every_offset_back(n):
    assert whole(str(n), "o", 0, MAX_OFFSET) == n


@given(st.integers(min_value=1, max_value=40), st.floats(min_value=1, max_value=600),
       st.floats(min_value=600, max_value=7200))
def test_backoff_doubles_per_failure_and_never_passes_its_cap(failures, base, cap):
    backoff = Backoff()
    for _ in range(failures):
        backoff = backoff.after_failure(1000.0, "aborted: x", base, cap)
    wait = backoff.until - 1000.0
    assert wait == pytest.approx(min(cap, base * 2 ** (failures - 1)))
    assert backoff.active(1000.0 + wait - 0.001) and not backoff.active(1000.0 + wait)


def test_the_tick_limit_covers_a_forward_actuation_and_its_rollback():
    context = ActuatorContext(MetadataStore("redis://127.0.0.1:1/0", "j"), None)
    actuator = RestartInDriver(context)  # 120 + 180 + 180 + 30 each way
    assert max_tick_seconds(actuator, 15) == 2 * (120 + 180 + 180 + 30) + 60
    assert max_tick_seconds(object(), 15) == 900


def test_every_spec_is_found_from_a_real_key_name():
    keys = JobKeys("orders")
    for key, spec in keys.expected(7).items():
        assert spec_for(key) == spec, key
    assert len({s.suffix for s in SPECS}) == len(SPECS)
