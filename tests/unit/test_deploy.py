"""The shipped systemd units start what the CLI accepts: a flag renamed in the CLI and left in a
unit would only show on a host, as a unit that exits 2 at every start."""

from __future__ import annotations

import shlex
from pathlib import Path

from autosizer.controller.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _unit(name: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in (DEPLOY / name).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.startswith(("#", "[")):
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def _env(name: str) -> dict[str, str]:
    return {k: v for k, _, v in (line.partition("=") for line in (DEPLOY / name).read_text().splitlines()
                                 if line and not line.startswith("#"))}


def test_the_pipeline_unit_runs_a_command_the_cli_parses_with_the_example_env(monkeypatch):
    unit, env = _unit("autosizer-pipeline.service"), _env("pipeline.env")
    assert unit["Environment"] == ["AUTOSIZER_JOB=%i"] and unit["KillSignal"] == ["SIGTERM"]
    assert unit["RestartPreventExitStatus"] == ["2"]  # a bad flag is fixed, not retried
    assert float(unit["TimeoutStopSec"][0]) > 300  # the drain's wait for the batch in flight
    (start,) = unit["ExecStart"]
    argv = shlex.split(start.replace("$PIPELINE_ARGS", env["PIPELINE_ARGS"]))
    assert argv[0].endswith("/autosizer")
    monkeypatch.setenv("AUTOSIZER_JOB", "orders")
    monkeypatch.setenv("AUTOSIZER_REDIS_URL", env["AUTOSIZER_REDIS_URL"])
    args = build_parser().parse_args(argv[1:])
    assert (args.job, args.json_logs, args.broker_outage_s) == ("orders", True, 120.0)
    assert args.redis == env["AUTOSIZER_REDIS_URL"]  # from the env file: out of `ps`


def test_the_daemon_unit_runs_a_command_the_cli_parses():
    unit = _unit("autosizer.service")
    argv = shlex.split(unit["ExecStart"][0])
    args = build_parser().parse_args(argv[1:])
    assert args.json_logs and unit["RestartPreventExitStatus"] == ["2"]
