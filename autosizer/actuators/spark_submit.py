"""`spark-submit`: for drivers the daemon shares no control channel with. It stops the driver
process with SIGTERM (the pipeline drains on it: the in-flight batch commits, nothing new starts),
migrates, and launches `command` again; the new driver reads the now-current layout from Redis.

Success is judged from the store alone (the new generation's first commit), so the driver may be
any program that runs the autosizer pipeline: `autosizer pipeline run`, or `spark-submit app.py`.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import structlog

from autosizer.actuators.base import ActuatorContext, number
from autosizer.actuators.restart import RestartActuator

log = structlog.get_logger(__name__)


class SparkSubmit(RestartActuator):
    name = "spark-submit"

    def __init__(self, context: ActuatorContext, command: str | list[str] = "",
                 pid_file: str = "", log_file: str = "", stop_timeout_s: float = 120.0, **settings):
        super().__init__(context, **settings)
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        if not self.command:
            raise ValueError("actuator setting command is required: the driver's launch command, "
                             "e.g. \"spark-submit --master yarn app.py\"")
        if not pid_file:
            raise ValueError("actuator setting pid_file is required: where the driver's pid is kept")
        self.pid_file = Path(pid_file)
        self.log_file = Path(log_file) if log_file else self.pid_file.with_suffix(".log")
        self.stop_timeout = number("stop_timeout_s", stop_timeout_s, 1)
        self._children: dict[int, subprocess.Popen] = {}

    @property
    def stop_limit(self) -> float:
        return self.stop_timeout

    def stop(self, generation: int) -> bool:
        pid = self._pid()
        if pid is None or not self._alive(pid):
            return True  # nothing runs the old generation
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while self._alive(pid):
            if time.monotonic() > deadline:
                # Safe after the timeout: commits are fenced and the sink is exactly-once, so a
                # killed batch is simply redone by the next generation.
                log.warning("spark_submit.kill", pid=pid, after_s=self.stop_timeout)
                os.kill(pid, signal.SIGKILL)
                break
            time.sleep(0.2)
        self.pid_file.unlink(missing_ok=True)  # so a resumed start relaunches, whatever got the pid
        return True

    def start(self, generation: int) -> bool:
        pid = self._pid()
        if pid is not None and self._alive(pid):
            return True  # already relaunched (a resumed actuation)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            child = subprocess.Popen(self.command, stdout=out, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._children[child.pid] = child
        self.pid_file.write_text(f"{child.pid}\n")
        log.info("spark_submit.launched", pid=child.pid, generation=generation, log=str(self.log_file))
        return True  # the verify step checks that it really runs the new generation

    def _pid(self) -> int | None:
        try:
            return int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def _alive(self, pid: int) -> bool:
        child = self._children.get(pid)
        if child is not None:
            return child.poll() is None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:  # an exited driver whose parent has not reaped it yet is a zombie: gone for us
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return True
