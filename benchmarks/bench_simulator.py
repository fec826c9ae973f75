"""Simulator speed: 7 days at 1 s resolution, 64 partitions, one run per built-in policy.

Run: .venv/bin/python benchmarks/bench_simulator.py [--repeat 3] [--against OTHER/engine.py]
Goal: <= 2 s per policy run. Printed next to a baseline measured in the same run: the same
week with a policy that never changes its mind (`fixed`), i.e. the model and the observations
alone, so the policy's own share can be read off on a noisy machine.

`--against` times another revision's `autosizer/simulator/engine.py` (a worktree's) against this
one, run for run in turn in one process, and prints the ratio: on this machine two plain runs of
the same code read `fixed` 3.97 and 3.20 s one after the other (session 61), more than the
difference being measured.
"""

from __future__ import annotations

import argparse
import statistics
import time

from revision import other_revision  # benchmarks/, run as a script

from autosizer.policies import Decision, load_policy
from autosizer.simulator import engine, workloads
from autosizer.simulator.engine import simulate
from autosizer.simulator.job import JobModel


class Fixed:
    name = "fixed"

    def decide(self, observation, state=None):
        return Decision(observation.factor, "hold: fixed"), state


POLICIES = ("fixed", "autosizer", "utilization", "lag-threshold")


def against(path: str, repeat: int, workload, job) -> None:
    """Each policy's week on the other engine and on this one, alternating (the order flips each
    round), and the ratio of the totals."""
    other = other_revision(path, "autosizer/simulator/engine.py")
    for module in (other, engine):
        module.simulate(workloads.constant(seconds=900), job, Fixed())  # compile both
    for name in POLICIES:
        total, runs = {"other": 0.0, "this": 0.0}, {}
        for i in range(repeat):
            pair = (("other", other), ("this", engine))
            for label, module in pair if i % 2 == 0 else pair[::-1]:
                policy = Fixed() if name == "fixed" else load_policy(name)
                start = time.perf_counter()
                run = module.simulate(workload, job, policy)
                total[label] += time.perf_counter() - start
                runs[label] = (len(run.rescales), float(run.lag_seconds.sum()))
        same = "same run" if runs["other"] == runs["this"] else "the runs differ"
        print(f"{name:14} other {total['other'] / repeat:5.2f} s, this {total['this'] / repeat:5.2f} s per 7-day "
              f"run: this / other {total['this'] / total['other']:.3f} ({same})", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--against", metavar="ENGINE_PY",
                        help="another revision's autosizer/simulator/engine.py to time this one against")
    args = parser.parse_args()
    workload = workloads.diurnal(seconds=7 * 86400)
    job = JobModel(partitions=64, start_factor=4)
    if args.against:
        against(args.against, args.repeat, workload, job)
        return
    simulate(workloads.constant(seconds=900), job, Fixed())  # load the compiled queue model
    results = {}
    for name in POLICIES:
        samples = []
        for _ in range(args.repeat):
            policy = Fixed() if name == "fixed" else load_policy(name)
            start = time.perf_counter()
            run = simulate(workload, job, policy)
            samples.append(time.perf_counter() - start)
        results[name] = statistics.median(samples)
        print(f"{name:14} {results[name]:5.2f} s per 7-day run  ({len(run.rescales)} rescales, "
              f"{workload.seconds / results[name] / 1e3:,.0f}k simulated s per s)")
    base = results["fixed"]
    for name in ("autosizer", "utilization", "lag-threshold"):
        print(f"{name:14} {results[name] / base:4.2f}x the fixed-policy run; goal <= 2 s: "
              f"{'met' if results[name] <= 2 else 'missed'}")


if __name__ == "__main__":
    main()
