"""Simulator speed: 7 days at 1 s resolution, 64 partitions, one run per built-in policy.

Run: .venv/bin/python benchmarks/bench_simulator.py [--repeat 3]
Goal: <= 2 s per policy run. Printed next to a baseline measured in the same run: the same
week with a policy that never changes its mind (`fixed`), i.e. the model and the observations
alone, so the policy's own share can be read off on a noisy machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from autosizer.policies import Decision, load_policy
from autosizer.simulator import workloads
from autosizer.simulator.engine import simulate
from autosizer.simulator.job import JobModel


class Fixed:
    name = "fixed"

    def decide(self, observation, state=None):
        return Decision(observation.factor, "hold: fixed"), state


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workload = workloads.diurnal(seconds=7 * 86400)
    job = JobModel(partitions=64, start_factor=4)
    simulate(workloads.constant(seconds=900), job, Fixed())  # load the compiled queue model
    results = {}
    for name in ("fixed", "autosizer", "utilization", "lag-threshold"):
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
