"""A pipeline driver's work directory: one killed with -9 leaves it, the next driver removes it."""

from __future__ import annotations

import os
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


def test_only_a_dead_drivers_directory_is_removed(tmpdir_of_pipelines):
    dead = tmpdir_of_pipelines / f"autosizer-agent-{dead_pid()}-abc"
    alive = tmpdir_of_pipelines / f"autosizer-agent-{os.getpid()}-def"
    unnamed = tmpdir_of_pipelines / "autosizer-agent-k3j4h5g6"  # before session 39: no pid to check
    other = tmpdir_of_pipelines / "autosizer-agent-notapid-x"
    for path in (dead, alive, unnamed, other):
        (path / "query-1").mkdir(parents=True)
    agent._remove_stale_workdirs()
    assert not dead.exists()
    assert alive.exists() and unnamed.exists() and other.exists()
