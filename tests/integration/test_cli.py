"""The `autosizer` console script, run as a process against a real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autosizer.controller.cli import main
from autosizer.pipeline.agent import broker_attempts
from tests.servers import free_port

pytestmark = pytest.mark.integration
AUTOSIZER = str(Path(sys.executable).parent / "autosizer")


@pytest.fixture
def cli(redis_server, job):
    def run(*args: str, redis: str | None = None) -> subprocess.CompletedProcess:
        cmd = [AUTOSIZER, *args, "--redis", redis or redis_server.url, "--job", job]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    return run


def one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_layout_init_and_show(cli):
    result = cli("layout", "init", "--topic", "orders=2", "--topic", "clicks=2", "--factor", "2",
                 "--offset", "orders:0=120")
    assert result.returncode == 0, result.stderr
    assert "generation 1  factor 2" in result.stdout
    assert "Partition_1-1-2" in result.stdout
    shown = json.loads(cli("layout", "show", "--json").stdout)
    assert shown["factor"] == 2 and shown["topics"] == {"orders": 2, "clicks": 2}
    table = cli("checkpoints", "show").stdout
    assert "orders[0]  120" in table
    data = json.loads(cli("checkpoints", "show", "--json").stdout)
    assert {e["next"] for e in data["tasks"]["Partition_0-1-2"]} == {120, None}


def test_startpoint_set_list_clear(cli):
    cli("layout", "init", "--topic", "orders=2", "--factor", "2")
    assert cli("startpoint", "set", "--topic", "orders", "--partition", "0", "--offset", "5").returncode == 0
    assert cli("startpoint", "set", "--topic", "orders", "--partition", "1", "--task", "Partition_1-0-2",
               "--timestamp", "2026-11-22T10:00:00Z").returncode == 0
    listed = json.loads(cli("startpoint", "list", "--json").stdout)
    assert [(r["partition"], r["task"], r["position"]) for r in listed] == [
        (0, "(all tasks)", "offset 5"),
        (1, "Partition_1-0-2", "timestamp 1795341600000 ms"),
    ]
    assert "timestamp 1795341600000 ms" in cli("startpoint", "list").stdout
    assert cli("startpoint", "clear", "--topic", "orders", "--partition", "0").stdout.strip() == "cleared 1 startpoint(s)"
    assert cli("startpoint", "clear", "--all").stdout.strip() == "cleared 1 startpoint(s)"
    assert json.loads(cli("startpoint", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    "args, needle",
    [
        (("layout", "init", "--topic", "orders=2", "--factor", "3"), "power of two from 1 to 1024"),
        (("layout", "init", "--topic", "orders"), "is not NAME=PARTITIONS"),
        (("layout", "init", "--topic", "orders=2", "--factor", "x"), "--factor must be a whole number"),
        (("layout", "show"), "autosizer layout init"),
    ],
)
def test_bad_input_is_one_line_with_exit_2(cli, args, needle):
    assert needle in one_line_error(cli(*args))


def test_bad_startpoints_are_one_line_with_exit_2(cli):
    cli("layout", "init", "--topic", "orders=2", "--factor", "2")
    err = one_line_error(cli("startpoint", "set", "--topic", "orders", "--partition", "0",
                             "--task", "Partition_9-0-2", "--oldest"))
    assert "unknown virtual task 'Partition_9-0-2'" in err
    err = one_line_error(cli("startpoint", "set", "--topic", "orders", "--partition", "0",
                             "--timestamp", "yesterday"))
    assert "malformed timestamp 'yesterday'" in err
    err = one_line_error(cli("startpoint", "set", "--topic", "orders", "--partition", "5", "--oldest"))
    assert "unknown partition orders[5]" in err


def test_redis_unreachable_is_one_line_with_exit_2(cli):
    err = one_line_error(cli("layout", "show", redis=f"redis://127.0.0.1:{free_port()}/0"))
    assert "cannot reach Redis" in err and "start redis-server" in err


@pytest.mark.parametrize("flag,value,expected", [
    ("--batch-seconds", "nan", "--batch-seconds must be a number like 30, not 'nan'"),
    ("--batch-seconds", "0", "--batch-seconds must be >= 0.05, not 0.0"),
    ("--run-ahead", "0.5", "--run-ahead must be >= 1, not 0.5"),
    ("--max-records", "1e999", "--max-records must be a whole number like 8, not '1e999'"),
    ("--max-records", "2.5", "--max-records must be a whole number like 8, not '2.5'"),
    ("--max-records", "0", "--max-records must be >= 1, not 0"),
    # int() took these: ten records, and a thousand (checks.whole takes ASCII digits only)
    ("--max-records", "\u0661\u0660", "--max-records must be a whole number like 8"),
    ("--parallelism", "1_000", "--parallelism must be a whole number like 8, not '1_000'"),
    ("--trigger", "inf", "--trigger must be a number like 30, not 'inf'"),
    ("--redis-outage-s", "-1", "--redis-outage-s must be >= 0, not -1.0"),
    ("--broker-outage-s", "0", "--broker-outage-s must be >= 1, not 0.0"),
    ("--broker-outage-s", "inf", "--broker-outage-s must be a number like 30, not 'inf'"),
])
def test_pipeline_batch_flags_are_checked(flag, value, expected, capsys):
    """Parsed in this process (the flags are refused before anything starts); the launch below
    shows the same line comes out of the command."""
    with pytest.raises(SystemExit) as exit_:
        main(["pipeline", "run", "--app", "tests.apps:echo", "--sink", "file:/tmp/x",
              "--bootstrap", "127.0.0.1:1", flag, value])
    assert exit_.value.code == 2
    assert f"argument {flag}: {expected}" in capsys.readouterr().err


def test_the_broker_outage_bound_is_whole_attempts_of_the_brokers_timeout():
    """`--broker-outage-s` sets how many 5 s broker attempts a batch makes before the query
    fails: the default 25 s is the 5 attempts the pipeline always made."""
    assert [broker_attempts(s) for s in (1.0, 5.0, 25.0, 25.5, 60.0)] == [1, 1, 5, 6, 12]
    assert broker_attempts(2.0, timeout_ms=500) == 4


def test_a_bad_pipeline_flag_is_one_line_from_the_command(cli):
    result = cli("pipeline", "run", "--app", "tests.apps:echo", "--sink", "file:/tmp/x",
                 "--bootstrap", "127.0.0.1:1", "--batch-seconds", "nan")
    assert result.returncode == 2
    assert one_line_error(result).rstrip().endswith(
        "argument --batch-seconds: --batch-seconds must be a number like 30, not 'nan' (see `autosizer pipeline run --help`)")
