"""Collect: run the configured PromQL against Prometheus, one instant query per column.

The collector only fetches. What is missing, late or unreachable is recorded as a problem on the
`Samples` it returns, never raised, so the evaluator turns it into an observation the guards hold on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from requests import RequestException
from urllib3.util.retry import Retry

from autosizer.controller.queries import render
from autosizer.redaction import redact

log = structlog.get_logger(__name__)

Labels = Mapping[str, str]


@dataclass
class Samples:
    """What one collection returned: per query, (labels, value) pairs; plus what went wrong."""

    time: float
    series: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the Prometheus round trip


class PrometheusCollector:
    def __init__(self, url: str, queries: Mapping[str, str], selector: str = "", window: str = "1m",
                 timeout_s: float = 5.0):
        self.url = url
        self.queries = {name: render(q, selector, window) for name, q in queries.items()}
        self.timeout_s = timeout_s
        # No retries: a down Prometheus must cost one timeout per tick, not several.
        self.client = PrometheusConnect(url, disable_ssl=True, retry=Retry(total=0), timeout=timeout_s)

    def collect(self) -> Samples:
        began = time.perf_counter()
        samples = Samples(time=time.time())
        for name, query in self.queries.items():
            try:
                result = self.client.custom_query(query)
            except (RequestException, PrometheusApiClientException, ValueError) as exc:
                problem = _describe(self.url, exc)
                samples.problems.append(problem)
                log.warning("collect.failed", query=name, error=problem)
                if isinstance(exc, RequestException):
                    break  # unreachable or slow: the other queries would only wait as long again
                continue
            samples.series[name] = [(r.get("metric", {}), _number(r.get("value"))) for r in result]
        samples.seconds = time.perf_counter() - began
        return samples


    def lag(self) -> float | None:
        """Total records behind right now (the lag_records query summed); None if unknown."""
        try:
            result = self.client.custom_query(self.queries["lag_records"])
        except (RequestException, PrometheusApiClientException, ValueError) as exc:
            log.warning("collect.lag_failed", error=_describe(self.url, exc))
            return None
        values = [_number(r.get("value")) for r in result]
        return sum(values) if values and all(math.isfinite(v) for v in values) else None


def _number(pair: object) -> float:
    try:
        return float(pair[1])  # type: ignore[index]
    except (TypeError, ValueError, IndexError):
        return math.nan


def _describe(url: str, exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, RequestException):
        return (f"prometheus unreachable at {redact(url)} ({type(exc).__name__}): start it or fix "
                "[prometheus] url")
    return f"prometheus query failed ({redact(text[:200])}): check [prometheus.queries]"
