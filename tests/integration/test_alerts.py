"""The shipped alert rules (`deploy/autosizer-alerts.yml`) loaded by a real Prometheus, run
through its own rule engine (`promtool test rules`), and every metric they read against what
autosizer really exports."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from autosizer.controller.metrics import DaemonMetrics
from autosizer.elasticity import Layout
from autosizer.embedded import EmbeddedPrometheus
from tests.daemon_harness import Exporter
from tests.integration.test_pipeline import wait_until

pytestmark = pytest.mark.integration

RULES = Path(__file__).resolve().parents[2] / "deploy" / "autosizer-alerts.yml"
PIPELINE = 'job="orders-pipeline", instance="driver:9108"'
DAEMON = 'job="orders-autosizer"'


def pipe(metric: str, values: str, **labels: str) -> tuple[str, str]:
    """One input series of the pipeline's scrape job: the metric with its labels, and its values
    in promtool's expanding notation, one a minute."""
    extra = "".join(f', {key}="{value}"' for key, value in labels.items())
    return f"{metric}{{{PIPELINE}{extra}}}", values


def daemon(metric: str, values: str, instance: str = "a:9000", **labels: str) -> tuple[str, str]:
    """The same for one daemon of the job's daemons' scrape job."""
    extra = "".join(f', {key}="{value}"' for key, value in labels.items())
    return f'{metric}{{{DAEMON}, instance="{instance}"{extra}}}', values


LAG, BATCHES, BEHIND = "autosizer_pipeline_lag_seconds", "autosizer_pipeline_batches_total", "autosizer_pipeline_lag_records"
LEADER, COMPLETE, AGE = "autosizer_daemon_leader", "autosizer_daemon_metrics_complete", "autosizer_daemon_metrics_age_seconds"
DECISIONS = "autosizer_daemon_decisions_total"

# (alert, its input series, the minute it is judged at, whether it fires there). Labels kept by
# each rule's aggregation are what the alert carries (`_alert_labels`).
CASES = [
    ("AutosizerJobBehindSLO", dict([pipe(LAG, "40x20", topic="orders", partition="0"),
                                    pipe(LAG, "1x20", topic="orders", partition="1")]), 10, True),
    ("AutosizerJobBehindSLO", dict([pipe(LAG, "20x20", topic="orders", partition="0")]), 10, False),
    ("AutosizerJobBehindSLO", dict([pipe(LAG, "1x4 40x3 1x10", topic="orders", partition="0")]),
     7, False),  # three minutes over: pending, not firing
    ("AutosizerPipelineNotCommitting", dict([pipe(BATCHES, "50x20"), pipe(BEHIND, "100x20", topic="orders", partition="0")]),
     12, True),
    ("AutosizerPipelineNotCommitting", dict([pipe(BATCHES, "0+60x20"), pipe(BEHIND, "100x20", topic="orders", partition="0")]),
     12, False),
    ("AutosizerPipelineNotCommitting", dict([pipe(BATCHES, "50x20"), pipe(BEHIND, "0x20", topic="orders", partition="0")]),
     12, False),  # idle: nothing to commit
    ("AutosizerNoLeader", dict([daemon(LEADER, "0x10"), daemon(LEADER, "0x10", "b:9000")]), 5, True),
    ("AutosizerNoLeader", dict([daemon(LEADER, "1x10"), daemon(LEADER, "0x10", "b:9000")]), 5, False),
    ("AutosizerBlind", dict([daemon(COMPLETE, "0x15"), daemon(LEADER, "1x15")]), 12, True),
    ("AutosizerBlind", dict([daemon(COMPLETE, "0x5 1 0x8"), daemon(LEADER, "1x15")]), 12, False),
    ("AutosizerBlind", dict([daemon(COMPLETE, "0x15", "b:9000"), daemon(LEADER, "0x15", "b:9000")]), 12, False),
    ("AutosizerMetricsStale", dict([daemon(AGE, "8x10"), daemon(LEADER, "1x10")]), 8, True),
    ("AutosizerMetricsStale", dict([daemon(AGE, "8x10", "b:9000"), daemon(LEADER, "0x10", "b:9000")]), 8, False),
    ("AutosizerActuationsFailing", dict([daemon(DECISIONS, "0 0 1 1 2 2 2 2 2 2", outcome="rolled_back")]), 8, True),
    ("AutosizerActuationsFailing", dict([daemon(DECISIONS, "0+1x10", outcome="scale_up")]), 8, False),
    ("AutosizerTicksErroring", dict([daemon(DECISIONS, "0+1x20", outcome="error")]), 15, True),
    ("AutosizerTicksErroring", dict([daemon(DECISIONS, "0+12x20", outcome="hold")]), 15, False),
    ("AutosizerRescalingOften", dict([daemon(DECISIONS, "0+1x20", outcome="scale_up"),
                                      daemon(DECISIONS, "0+1x20", outcome="scale_down")]), 20, True),
    ("AutosizerRescalingOften", dict([daemon(DECISIONS, "0 1 1 1 1 1 1 2 2 2 2", outcome="scale_up")]), 10, False),
]


@pytest.fixture(scope="module")
def rules(tmp_path_factory) -> dict[str, dict]:
    """The rules as a real Prometheus loaded them (`/api/v1/rules`), once each has been evaluated
    without an error: by name, with its query, labels and annotations."""
    with EmbeddedPrometheus([], tmp_path_factory.mktemp("prom"), rule_files=[RULES]) as prometheus:
        def loaded() -> list[dict]:
            with urllib.request.urlopen(f"{prometheus.url}/api/v1/rules", timeout=5) as response:
                return [r for g in json.load(response)["data"]["groups"] for r in g["rules"]]

        wait_until(lambda: loaded() and all(r.get("lastEvaluation", "").startswith("2") and r["health"] != "unknown"
                                            for r in loaded()), 30, "every rule evaluated")
        found = loaded()
    assert all(r["health"] == "ok" for r in found), [(r["name"], r.get("lastError")) for r in found]
    return {r["name"]: r for r in found}


def _alert_labels(rule: dict, series: dict[str, str]) -> dict[str, str]:
    """What a firing alert carries: the rule's labels and the series' labels its aggregation
    keeps: `job` always, `instance` unless a `without (instance, ...)` sums the daemons."""
    labels = dict(re.findall(r'(\w+)="([^"]*)"', next(iter(series))))
    kept = {"job": labels["job"]}
    if "without (instance" not in rule["query"]:
        kept["instance"] = labels["instance"]
    return {**kept, **rule["labels"]}


def test_the_shipped_alert_rules_are_valid_rules(rules):
    """`promtool check rules` passes them, and a real Prometheus loads and evaluates every one
    (the fixture) as an alert."""
    checked = subprocess.run(["promtool", "check", "rules", str(RULES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert len(rules) == 8 and {r["type"] for r in rules.values()} == {"alerting"}


def test_each_shipped_alert_fires_where_it_should_and_not_where_it_should_not(rules, tmp_path):
    """Every alert has a case that fires (with the labels an operator routes on and the rule's
    own words) and one that must not: the other outcomes, a standby, an idle job, a spike
    shorter than the rule's `for`."""
    assert {alert for alert, *_ in CASES if _[2]} == set(rules), "every alert needs a case that fires"
    tests = [{
        "interval": "1m",
        "input_series": [{"series": name, "values": values} for name, values in series.items()],
        "alert_rule_test": [{
            "eval_time": f"{minute}m", "alertname": alert,
            "exp_alerts": [{"exp_labels": _alert_labels(rules[alert], series),
                            "exp_annotations": rules[alert]["annotations"]}] if fires else [],
        }],
    } for alert, series, minute, fires in CASES]
    spec = tmp_path / "alerts_test.yml"  # JSON is YAML
    spec.write_text(json.dumps({"rule_files": [str(RULES)], "evaluation_interval": "1m", "tests": tests}))
    run = subprocess.run(["promtool", "test", "rules", str(spec)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_metric_the_alerts_read_is_one_autosizer_exports(rules):
    """A renamed metric would leave an alert that never fires: each name the rules read is in
    the pipeline's own exporter (fed batches, read over HTTP) or the daemon's registry."""
    read = set(re.findall(r"\bautosizer_\w+", "\n".join(r["query"] for r in rules.values())))
    with Exporter(Layout(topics={"orders": 2}, factor=2), rate=150, capacity=100) as exporter:
        time.sleep(1.0)  # a few fed batches
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=5) as response:
            text = response.read().decode()
    daemon = DaemonMetrics(5.0)
    daemon.decisions.labels("hold").inc()  # as the daemon counts each tick's decision
    text += generate_latest(daemon.registry).decode()
    exported = set(re.findall(r"^(autosizer_\w+)", text, re.M))
    assert read and read <= exported, f"read by the alerts but not exported: {sorted(read - exported)}"
