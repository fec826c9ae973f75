"""Run several policies, or several settings of one, over the same workload, with a progress bar.

The runs are independent (each draws the same noise from its seed), so they may go to one
process each: a tuning sweep over a week is CPU-bound Python. The `simulate` command does that for
runs of a day or more (`workers_for`); from Python it is asked for (`compare(workers=...)`).
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import pickle
import queue
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog
from tqdm import tqdm

from autosizer.policies import Guards, Policy, load_policy
from autosizer.simulator.engine import Run, simulate
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import Workload

log = structlog.get_logger(__name__)


def parse_value(text: str) -> Any:
    """A setting's value from the command line: int, float, true/false, or the text itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def variants(names: Sequence[str], settings: Mapping[str, Mapping[str, Any]],
             sweeps: Mapping[str, Sequence[Any]]) -> list[tuple[str, Policy]]:
    """Every policy in `names` with its settings; swept keys ("policy.key") multiply the runs."""
    found = []
    for name in names:
        swept = {k.split(".", 1)[1]: v for k, v in sweeps.items() if k.split(".", 1)[0] == name}
        for combo in itertools.product(*swept.values()) if swept else [()]:
            chosen = dict(zip(swept, combo, strict=True))
            label = name + "".join(f" {k}={v}" for k, v in chosen.items())
            found.append((label, load_policy(name, {**settings.get(name, {}), **chosen})))
    unknown = {k.split(".", 1)[0] for k in [*sweeps, *settings]} - set(names)
    if unknown:
        raise ValueError(f"settings for {', '.join(sorted(unknown))}, which is not among the "
                         f"--policy choices ({', '.join(names)})")
    return found


# Runs shorter than this stay in this process: a worker's start (its imports, the compiled queue
# model loaded from numba's cache) costs about two seconds, a simulated day about one.
PARALLEL_FROM_S = 86_400
REPORT_EVERY_S = 0.5  # how often a worker sends its progress


def workers_for(runs: int, seconds: int, workers: int | None) -> int:
    """How many processes `compare` runs on: `workers` if given (at most one a run); None, one
    per core for runs of at least `PARALLEL_FROM_S` and one otherwise."""
    if workers is not None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be a whole number >= 1, not {workers!r}")
        return max(1, min(workers, runs))
    if runs < 2 or seconds < PARALLEL_FROM_S:
        return 1
    return max(1, min(runs, os.cpu_count() or 1))


def compare(workload: Workload, job: JobModel, policies: Sequence[tuple[str, Policy]],
            guards: Guards | None = None, tick_s: int = 15, seed: int = 7,
            progress: bool | None = None, window_s: int | None = None,
            workers: int | None = 1) -> list[Run]:
    """One run per policy, on identical traffic and noise, in the order given; `progress` None
    shows a bar on a TTY. `workers` processes (`workers_for`; None: one per core for long runs,
    as the `simulate` command does): one by default here, since a spawned worker imports the
    caller's main module again (a script without a `__main__` guard would start over) and takes
    its policies by import (a class defined in a notebook is not there)."""
    total = workload.seconds // tick_s * tick_s * len(policies)
    count = workers_for(len(policies), workload.seconds, workers)
    if count > 1 and (unsent := _unpicklable(policies)):
        log.warning("simulate.one_process", policy=unsent[0], why=unsent[1],
                    fix="a policy another process can run is built from picklable settings "
                        "(no lambdas or open handles); it runs here, in turn, meanwhile")
        count = 1
    with tqdm(total=total, unit="s", unit_scale=True, desc="simulating", leave=False,
              disable=None if progress is None else not progress) as bar:
        if count == 1:
            runs = []
            for label, policy in policies:
                bar.set_postfix_str(label)
                runs.append(_one(label, policy, workload, job, guards, tick_s, seed, window_s, bar.update))
            return runs
        bar.set_postfix_str(f"{len(policies)} runs on {count} processes")
        runs = _in_processes(count, bar.update, [
            (label, policy, workload, job, guards, tick_s, seed, window_s) for label, policy in policies])
        bar.update(bar.total - bar.n)  # a worker's last report may still be on its way
        return runs


def _unpicklable(policies: Sequence[tuple[str, Policy]]) -> tuple[str, str] | None:
    """The first policy another process cannot be handed (a plugin's lambda), and why."""
    for label, policy in policies:
        try:
            pickle.dumps(policy)
        except Exception as exc:  # pickle raises several kinds: any means "not here"
            return label, f"{type(exc).__name__}: {exc}"
    return None


def _one(label: str, policy: Policy, workload: Workload, job: JobModel, guards: Guards | None, tick_s: int,
         seed: int, window_s: int | None, progress: Callable[[int], Any]) -> Run:
    run = simulate(workload, job, policy, guards, tick_s, seed, progress=progress, window_s=window_s)
    run.policy = label
    return run


def _in_processes(count: int, update: Callable[[int], Any], tasks: list[tuple]) -> list[Run]:
    """`_one` of every task on `count` spawned processes, the runs in the tasks' order; each
    worker's progress comes back over a queue. Spawned, not forked: the parent may hold threads
    (the bar's monitor, numba's), which a fork copies mid-step. The workers ignore Ctrl-C; the
    parent, leaving the pool on it (or on a run's error), ends them at once: an executor's
    workers caught it as a run's error and went on with the next run, so Ctrl-C waited for it."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    with context.Pool(count, initializer=_worker_init, initargs=(reports,)) as pool:  # leaving: terminate
        pending = [pool.apply_async(_worker_run, task) for task in tasks]
        for result in pending:
            while not result.ready():
                result.wait(REPORT_EVERY_S)
                _drain(reports, update)
        _drain(reports, update)
        return [result.get() for result in pending]  # a worker's error is raised here, once


def _drain(reports: Any, update: Callable[[int], Any]) -> None:
    while True:
        try:
            update(reports.get_nowait())
        except queue.Empty:
            return


_reports: Any = None  # a worker's queue to the parent (set by `_worker_init`)


def _worker_init(reports: Any) -> None:
    global _reports
    _reports = reports
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle (`_in_processes`)


def _worker_run(*task: Any) -> Run:
    done, sent = 0, time.monotonic()

    def report(seconds: int) -> None:
        nonlocal done, sent
        done += seconds
        if time.monotonic() - sent >= REPORT_EVERY_S:
            _reports.put(done)
            done, sent = 0, time.monotonic()

    run = _one(*task, report)
    _reports.put(done)
    return run
