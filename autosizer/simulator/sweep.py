"""Run several policies, or several settings of one, over the same workload, with a progress bar."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from tqdm import tqdm

from autosizer.policies import Guards, Policy, load_policy
from autosizer.simulator.engine import Run, simulate
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import Workload


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


def compare(workload: Workload, job: JobModel, policies: Sequence[tuple[str, Policy]],
            guards: Guards | None = None, tick_s: int = 15, seed: int = 7,
            progress: bool | None = None, window_s: int | None = None) -> list[Run]:
    """One run per policy, on identical traffic and noise; `progress` None shows a bar on a TTY."""
    total = workload.seconds // tick_s * tick_s * len(policies)
    runs = []
    with tqdm(total=total, unit="s", unit_scale=True, desc="simulating", leave=False,
              disable=None if progress is None else not progress) as bar:
        for label, policy in policies:
            bar.set_postfix_str(label)
            run = simulate(workload, job, policy, guards, tick_s, seed, progress=bar.update, window_s=window_s)
            run.policy = label
            runs.append(run)
    return runs
