"""A pipeline driver's work directory: one killed with -9 leaves it, the next driver removes it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile

import pytest

from autosizer.pipeline import agent


@pytest.fixture
def tmpdir_of_pipelines(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def made(parent, name: str, owner: str | None):
    path = parent / name
    (path / "query-1").mkdir(parents=True)
    if owner is not None:
        (path / agent.OWNER_FILE).write_text(owner)
    return path


def test_only_a_dead_drivers_directory_made_on_this_host_is_removed(tmpdir_of_pipelines):
    host, gone = socket.gethostname(), dead_pid()
    dead = made(tmpdir_of_pipelines, f"autosizer-agent-{gone}-abc", f"{host} {gone}")
    alive = made(tmpdir_of_pipelines, f"autosizer-agent-{os.getpid()}-def", agent._owner())
    # a /tmp shared with another container: its pids are not this host's to judge
    elsewhere = made(tmpdir_of_pipelines, f"autosizer-agent-{gone}-ghi", f"other-{host} {gone}")
    unowned = made(tmpdir_of_pipelines, "autosizer-agent-k3j4h5g6", None)  # before session 39
    garbled = made(tmpdir_of_pipelines, f"autosizer-agent-{gone}-jkl", "no pid here")
    agent._remove_stale_workdirs()
    assert not dead.exists()
    assert alive.exists() and elsewhere.exists() and unowned.exists() and garbled.exists()
