"""Collect: run the configured PromQL against Prometheus, one instant query per column
(`range_series`, `range_points`: one query over a stretch of the past, for a backfill, a replay
or a fit).

The collector only fetches. What is missing, late or unreachable is recorded as a problem on the
`Samples` it returns, never raised, so the evaluator turns it into an observation the guards hold on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog
from prometheus_api_client import PrometheusApiClientException, PrometheusConnect
from requests import RequestException
from urllib3.util.retry import Retry

from autosizer.controller.queries import render
from autosizer.redaction import redact

log = structlog.get_logger(__name__)

MAX_POINTS = 10_000  # a range query's points per series; Prometheus refuses more than 11,000

Labels = Mapping[str, str]


@dataclass
class Samples:
    """What one collection returned: per query, (labels, value) pairs; plus what went wrong."""

    time: float
    series: dict[str, list[tuple[Labels, float]]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the Prometheus round trip
    window: str = ""  # the rate window the queries ran over, and
    selector: str = ""  # the label matchers they ran with, for a reason that names them


class PrometheusCollector:
    def __init__(self, url: str, queries: Mapping[str, str], selector: str = "", window: str = "1m",
                 timeout_s: float = 5.0):
        self.url = url
        self.queries = {name: render(q, selector, window) for name, q in queries.items()}
        self.window, self.selector = window, selector
        self.timeout_s = timeout_s
        # No retries: a down Prometheus must cost one timeout per tick, not several.
        self.client = PrometheusConnect(url, disable_ssl=True, retry=Retry(total=0), timeout=timeout_s)

    def collect(self) -> Samples:
        began = time.perf_counter()
        samples = Samples(time=time.time(), window=self.window, selector=self.selector)
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

    def input_since(self, start: float, end: float, step_s: float) -> list[tuple[float, float]]:
        """The job's input rate (the input_rate query summed) over [start, end] every `step_s`:
        what a daemon new to the job did not see itself. ValueError when Prometheus cannot say."""
        return range_points(self.url, f"sum({self.queries['input_rate']})", start, end, step_s, self.timeout_s)

    def lag(self) -> float | None:
        """Total records behind right now (the lag_records query summed); None if unknown."""
        try:
            result = self.client.custom_query(self.queries["lag_records"])
        except (RequestException, PrometheusApiClientException, ValueError) as exc:
            log.warning("collect.lag_failed", error=_describe(self.url, exc))
            return None
        values = [_number(r.get("value")) for r in result]
        return sum(values) if values and all(math.isfinite(v) for v in values) else None


def range_pieces(start: float, end: float, step_s: float) -> int:
    """How many range queries `range_series` sends for [start, end] every `step_s`."""
    return max(0, math.ceil((end - start) / (step_s * MAX_POINTS)))


def range_series(url: str, query: str, start: float, end: float, step_s: float,
                 timeout_s: float = 30.0, progress: Callable[[], Any] | None = None,
                 ) -> list[tuple[Labels, list[tuple[float, float]]]]:
    """Every series of `query` over [start, end] every `step_s`, with its labels and its points
    in time order, in as many range queries as Prometheus' per-query limit needs (`MAX_POINTS`:
    one query over more than 11,000 steps is refused, so `autosizer fit` over a run of more than
    three hours at 1 s failed). A value Prometheus sends that is not a number is NaN. An
    unreachable Prometheus or a refused query is one ValueError; no retries (a down Prometheus
    costs one timeout, not several). `progress()` after each query (`range_pieces` in all)."""
    client = PrometheusConnect(url, disable_ssl=True, retry=Retry(total=0), timeout=timeout_s)
    found: dict[tuple[tuple[str, str], ...], tuple[Labels, dict[float, float]]] = {}
    begin = start
    while begin < end:
        until = min(end, begin + step_s * MAX_POINTS)
        try:
            result = client.custom_query_range(query, start_time=datetime.fromtimestamp(begin, UTC),
                                               end_time=datetime.fromtimestamp(until, UTC), step=f"{step_s:g}")
        except (RequestException, PrometheusApiClientException, ValueError) as exc:
            raise ValueError(f"the range query at {redact(url)} failed ({redact(str(exc))[:200]}): check the "
                             f"URL, the query and that Prometheus is up") from None
        for series in result:  # a query's first point repeats the last one's: kept once
            labels = series.get("metric", {})
            _, points = found.setdefault(tuple(sorted(labels.items())), (labels, {}))
            points.update((float(pair[0]), _number(pair)) for pair in series.get("values", ()))
        begin = until
        if progress is not None:
            progress()
    return [(labels, sorted(points.items())) for labels, points in found.values()]


def range_points(url: str, query: str, start: float, end: float, step_s: float,
                 timeout_s: float = 30.0) -> list[tuple[float, float]]:
    """(time, value) of `query` over [start, end] every `step_s`, its series summed
    (`range_series`). Values that are not finite are dropped."""
    summed: dict[float, float] = {}
    for _, points in range_series(url, query, start, end, step_s, timeout_s):
        for stamp, value in points:
            if math.isfinite(value):
                summed[stamp] = summed.get(stamp, 0.0) + value
    return sorted(summed.items())


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
