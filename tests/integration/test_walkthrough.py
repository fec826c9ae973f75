"""`make demo` (for now, the README's worked example) runs against a real Redis and stays exact."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elasticity_walkthrough.py"


def test_walkthrough_processes_every_message_once(redis_server):
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), "--redis", redis_server.url],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "processed 200 of 200 messages; duplicates: 0, missing: 0" in result.stdout
    assert "Partition_0-1-2  125   h mod 4: {'3': 160}" in result.stdout
