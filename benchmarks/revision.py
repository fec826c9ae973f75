"""Another revision's module (a worktree's file) loaded beside this one, for a benchmark that
times the two side by side in one process (`--against`): on this machine two plain runs one
after the other differ by more than most changes being measured."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def other_revision(path: str, part: str) -> ModuleType:
    """The module at `path` (`part` says which file is wanted, e.g. autosizer/simulator/engine.py);
    the rest of the project it imports is this revision's."""
    if not Path(path).is_file():
        raise SystemExit(f"--against {path}: no such file; give a worktree's {part}")
    name = "other_" + Path(part).stem
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
