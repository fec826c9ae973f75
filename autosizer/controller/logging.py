"""structlog setup shared by the CLI and the daemon: key=value to stderr, or JSON lines."""

from __future__ import annotations

import logging
import sys

import structlog

from autosizer.redaction import scrub_event


def configure_logging(level: str = "info", json: bool = False) -> None:
    renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,  # as text, so scrub_event sees tracebacks too
            scrub_event,  # last before rendering: no secret and no huge value reaches a line
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=_stderr,
        cache_logger_on_first_use=False,
    )


def _stderr(*_: object) -> structlog.PrintLogger:
    """A logger on the stderr of the moment, not the one at configure time: a process that swaps
    its stderr (pytest's capture does, per test) would otherwise log to a closed file."""
    return structlog.PrintLogger(sys.stderr)
