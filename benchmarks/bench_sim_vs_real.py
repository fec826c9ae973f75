"""Sim vs real: does the simulator, fitted to a real run, predict that run's lag?

Run: .venv/bin/python benchmarks/bench_sim_vs_real.py [--duration 240] [--source kinesis [--reshard]] [--high 255]
     [--expand-at 60]
     [--shape step|ramp|bursts] [--keys 200] [--clocks demo|shipped] [--policy NAME] [--memory S] [--cluster]
     [--cold] [--trace NAME [--day D]] [--history [same|holiday]] [--timezone ZONE] [--apart N]
     [--save run.json | --replay run.json [--ticks]]

It runs `make demo`'s job for real (the enrichment pipeline with only its required flags, the
daemon on its shipped policy with the demo's shortened clocks, 100 -> 1,200 orders/s for 120 s),
then reads the run back from Prometheus: `autosizer fit`'s model of the job. The load it saw is
counted from the records' own timestamps, read back from the topic (`autosizer/simulator/arrivals.py`; runs saved
before session 51 replay the watermark's reads, a second apart, which place a step only between two).
The simulator replays that load through the same policy and guards, at the daemon's tick, from
the same start factor. Printed side by side: the lag integral (seconds of lag, summed over the
run) and the peak lag, real and simulated, and their ratios (goal: both within 20%, and the same
factor path: run 63 met the ratios with a reversal the replay did not make). The simulated peak
is what a probe reading one moment of each second sees (`Run.probe_peak`), as the real one is;
the highest mean of a second is printed below it (the goal read that until session 46).
`--high 255` steps to about 83% of factor 1's measured capacity instead, inside the policy's
scale-up band (a step's first tick still projects past it: run 44 went 1 -> 2, BENCHMARKS.md).
With the daemon's rescale decisions saved beside the series, each rescale's timing is printed
beside the simulator's: when the tick began, when its actuation began (after the tick's queries
and policy; the query time is printed too), when it ended (the new generation's first commit),
and when the simulated backlog first fell after its own rescale (its first commit), each with its
reason. `--shape ramp` or `bursts` runs the demo's other loads (`examples/demo.py --shape`); the
lag ratios alone would miss a rescale one side made and the other did not, so the two factor
paths are printed too. `--source kinesis` runs `make demo-kinesis`'s job instead (session 57: 2 shards on the emulator,
20 -> 150 orders/s, 40 ms a lookup) without its split and merge, its load counted from the
records' arrival times on the stream (`arrivals.read_kinesis_arrivals`); it takes `--policy`,
`--duration` and `--save`, and `--replay` replays a saved Kinesis run as any other. With
`--reshard` the demo runs as it ships, a split at 45 s and a merge at 75 s, and the replay reads
the layouts the fit found (session 58: before it, the fit read the 5 shards as one layout, twice
the capacity at factor 1, and the replay went 1 -> 4 where the job went 1 -> 8).
`--expand-at S` grows the Kafka demo's topic 4 -> 8 partitions S s into the run, the producer
moving half the keys at once, adopted by the daemon 20 s later (session 59: the replay reads the
new partitions' wait and the adoption's restart, runs e1-e3).
`--keys 16` gives 4 customers a partition (the busiest key lane then
caps every factor past 4); `--clocks shipped` runs the daemon on its shipped clocks (15 s tick,
30 s window, 300 s cooldown) instead of the demo's shortened ones. `--save` keeps every tick's
decision with the policy's details, and `--replay run.json --ticks` prints the backlog each tick
read, the real daemon's beside the replay's (the real one is a moment of a batch's sawtooth); runs
saved since session 48 keep the backlog gauge every second too, printed beside the replay's, and
runs saved since session 49 the last batch's duration (the model's batch timing). Every replay
prints the input each tick read, real against the replay's (session 51).
`--policy` runs another built-in policy on both sides
(`lag-threshold` scales down while the input is high, and the actuator rolls that back: run 83),
`--memory S` sets the policy's `lull_memory_s` on both sides (a benchmark's setting: with 600
and `--duration 840` the step's end brings a scale-down within the run, run 82), and `--cold`
starts the load only once the pipeline's query runs (no start-up backlog: run 84). `--apart N`
starts the job on a topic whose partitions 0 and 1 sit N offsets past 2 and 3, as a topic that
has run a while does (session 53: the slot's threads went to the lower offsets until then).
`--cluster` runs the pipeline on a standalone Spark cluster (one worker, 2 cores, the executors
in their own JVM) instead of local[2]: the engine a deployment runs (session 80; with `--source
kinesis` too, session 81).
`--trace NAME` plays one day (`--day`, default 1) of a real trace from the suite instead of the
step: its 24 hours pressed into the run from 30 s to 60 s before its end (`--duration 840`:
750 s, 115x), its rates mapped onto 100-1,200/s. Printed besides: rescales, reversals within
the pressed hour and task-seconds, real and simulated (real traffic's decisions, not only its
lag: are the simulated rescale counts, on which the suite's goals rest, the real job's?).
`--history` first writes three past days into the job's Redis history that ran the same load at
the same time of day (`examples/demo.py`, `seed_history`): does the shipped daemon's day plan
size for the step before it comes, as the simulator's does on `workday`? `--history holiday`
writes days that ran the step's peak through the last hour, which today did not: does the
daemon fall back to reacting, and say why? `--history one` writes one such day only, a job's
second day: too few to plan from, does the daemon size the scale-up the load asks for by it? The replay starts from the same days at the run's clock time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.actuators.verification import VERIFY_WINDOW_S  # noqa: E402
from autosizer.controller.config import load_config  # noqa: E402
from autosizer.policies import Observation, load_policy  # noqa: E402
from autosizer.policies.history import InputHistory, time_zone  # noqa: E402
from autosizer.simulator.arrivals import read_arrivals, read_kinesis_arrivals  # noqa: E402
from autosizer.simulator.engine import simulate  # noqa: E402
from autosizer.simulator.fit import (  # noqa: E402
    ARRIVALS,
    FIT_QUERIES,
    _points,
    _resample,
    _restamped,
    batch_commits,
    fetch,
    fitted_run,
    legacy_lag_probe_age,
)
from autosizer.simulator.fit_checks import checks, slowest_thread_ratio, steady_wait_ratio  # noqa: E402
from autosizer.simulator.job import JobModel  # noqa: E402
from autosizer.simulator.scores import reversals  # noqa: E402
from autosizer.simulator.traces import real_trace_names  # noqa: E402
from examples import demo, kinesis_demo  # noqa: E402
from examples.loadgen import factor_path  # noqa: E402

LOAD_WINDOW = "3s"
# how a saved run's pipeline read its backlog gauge; runs saved before session 48 lack the key
ONE_MOMENT = "watermark and positions as the probe read them"
# how a saved run's daemon read the input rate; runs saved before session 51 lack the key (rate())
READ_TIMES = "the watermark's growth over the probe's read times a window apart"
# beside fit's queries: the backlog gauge, placed at its probe's read time like the watermark (the
# replay's beside it), and
QUERIES = {**FIT_QUERIES, "lag_records": "max by (topic, partition) (autosizer_pipeline_lag_records{$selector})",
           # the last batch's duration, read to commit: the model's batch timing, beside the real
           # one (runs saved since session 49)
           "batch_duration": "max(autosizer_pipeline_batch_duration_seconds{$selector})"}


def compare(finished: demo.Finished, save: Path | None = None, phase: tuple[float, float] | None = None) -> None:
    start, end = finished.started, finished.ended
    # The load is counted from the records' own times, read back from the topic (arrivals.py;
    # fit.py checks them against the watermark's rise); the 3 s window only serves the
    # partitions' shares.
    series = fetch(finished.prometheus_url, start, end, window=LOAD_WINDOW, queries=QUERIES)
    if finished.bootstrap:  # the load from the records' own times (runs saved since session 51)
        series[ARRIVALS] = read_arrivals(finished.bootstrap, [finished.topic], start, end)
    elif finished.kinesis:  # from their arrival times on the stream (session 57)
        series[ARRIVALS] = read_kinesis_arrivals(finished.topic, start, end, finished.kinesis)
    rescales = [{"at": d["time"] - start, "old": d["factor"], "new": d["target"], "tick_ms": d["tick_ms"],
                 "actuation_s": (d.get("actuation") or {}).get("seconds"),
                 "prometheus_ms": (d.get("inputs") or {}).get("prometheus_ms"), "reason": d.get("reason"),
                 "result": (d.get("actuation") or {}).get("result")}
                for d in finished.decisions
                if d["outcome"] in ("scale_up", "scale_down", "rolled_back") and d["time"] >= start]
    ticks = [d for d in finished.decisions if d["time"] >= start]  # every tick, with the policy's details
    if save is not None:
        save.write_text(json.dumps({"start": start, "end": end, "config": finished.config_path.read_text(),
                                    "series": series, "rescales": rescales, "decisions": ticks,
                                    "phase": phase, "history": finished.history,
                                    "lag_gauge": ONE_MOMENT, "input_rate": READ_TIMES, "step": finished.step}))
        print(f"series saved to {save} (replay with --replay {save})")
    replay(series, start, end, finished.config_path, rescales, phase, finished.history, decisions=ticks,
           step=finished.step)


def replay(series: dict, start: float, end: float, config_path: Path, rescales: list[dict] | None = None,
           phase: tuple[float, float] | None = None, history: dict | None = None,
           backlogs: bool = False, one_moment_gauge: bool = True,
           input_over_scrapes: bool = False, decisions: list[dict] | None = None,
           step: tuple[float, float] = (demo.STEP_AT, demo.STEP_S), cost_scale: float = 1.0) -> None:
    """`phase`: where the high phase begins and how long it lasts (a trace's pressed day; the
    demo's step by default), and with a trace the decisions' figures too. `history`: the days
    the run's daemon found in Redis (`--history`), by UTC day number; the replay starts from them
    at the run's own clock time. `backlogs`: print the backlog each tick read, the real
    daemon's beside the replay's. `one_moment_gauge`: False for a run whose
    pipeline's backlog gauge subtracted the positions at the scrape (saved before session 48).
    `input_over_scrapes`: True for a run whose daemon read the input with `rate()` (saved
    before session 51). `decisions`: the real daemon's journaled ticks, whose input (and with
    `backlogs` backlog) is printed beside the replay's. `step`: the demo's high phase (the
    Kinesis demo's is its own), where `phase` is not given. `cost_scale`: a what-if, not a fit:
    the fitted per-record cost times this, the factor held at most at the real run's highest,
    so the replay's lag answers how sensitive the model is where the path stays the real one
    (run k8: 3% more cost put 11% on a batch at 87% busy, session 66)."""
    config = load_config(config_path)
    fitted = fitted_run(series, start, end)
    # the actuator's lag check after a scale-down, as the daemon ran it
    job = dataclasses.replace(fitted.job, verify_window_s=float(
        config.actuator.settings.get("verify_window_s", VERIFY_WINDOW_S)), adopt_after_s=config.daemon.adopt_after_s,
        lag_probe_age_s=0.0 if one_moment_gauge else legacy_lag_probe_age(series),
        input_over_scrapes=input_over_scrapes)
    guards = config.guards
    if cost_scale != 1.0:
        job = dataclasses.replace(job, process_seconds=job.process_seconds * cost_scale)
        guards = dataclasses.replace(guards, max_factor=int(np.nanmax(fitted.factor)))
        print(f"\nwhat-if: the per-record cost times {cost_scale:g}, the factor at most {guards.max_factor}")
    print(f"\nfitted: {job.partitions_words()}, {job.process_seconds * 1000:.2f} ms per record, "
          f"batch {job.batch_seconds:g} s + a fixed cost of {job.cost_words()}"
          f"{f', records cut {job.read_boundary_s:.2f} s after the trigger' if job.read_boundary_s else ''}, restarts "
          f"{', '.join(f'{r:.2f}' for r in job.restarts_measured_s) or f'{job.restart_downtime_s:.2f}'} s, metrics {job.metrics_age_s:.2f} s old (scraped every "
          f"{job.scrape_interval_s:g} s), {'' if job.overhead_known_at_start else 'batch cost not known at the start, '}"
          f"start factor "
          f"{job.start_factor}, load from {fitted.load_source}, busiest bucket at F=8 {job.hot_shares[8].max():.1%}, service-time CV "
          f"{job.process_cv:.2f}")
    policy = load_policy(config.policy.name, dict(config.policy.settings))
    days = None if history is None else InputHistory(zone=config.job.timezone, days={
        int(d): np.array(row, dtype=float) for d, row in history.items()})
    origin = start if days else 0.0
    reading = _Reading(policy, origin)
    run = simulate(fitted.load, job, reading, guards, tick_s=max(1, int(config.daemon.interval_s)),
                   window_s=int(config.prometheus.window_s), origin=origin, history=days)
    if decisions:  # runs saved since session 18
        _print_tick_inputs(decisions, start, reading.input, int(config.prometheus.window_s))
    if decisions and backlogs:
        _print_tick_backlogs(decisions, start, reading.backlog)
    if series.get("lag_records"):  # runs saved since session 48
        _print_second_backlogs(series, start, fitted.factor, run, phase or step)
    if series.get("batch_duration"):  # runs saved since session 49
        _print_batch_durations(series, start, fitted.factor, run, phase or step, job)
    seconds = min(run.lag_seconds.size, fitted.lag_seconds.size)
    real, sim = fitted.lag_seconds[:seconds], run.lag_seconds[:seconds]
    print(f"\n{'':24} {'real':>10} {'simulated':>10} {'sim / real':>11}")
    at, length = phase or step
    step_at, step_end = int(at), int(at + length)
    # The real peak is the highest of the probe's readings, one moment of each second's sawtooth
    # (`Run.probe_peak`); the simulated series holds each second's mean, its middle.
    probed = run.part(0, seconds).probe_peak()
    rows = [("lag integral (s x s)", real.sum(), sim.sum()), ("peak lag (s)", real.max(), probed),
            ("  peak mean of a second", real.max(), sim.max()),
            ("seconds over 10 s", float((real > 10).sum()), float((sim > 10).sum())),
            ("  integral, before step", real[:step_at].sum(), sim[:step_at].sum()),
            ("  integral, the step", real[step_at:step_end].sum(), sim[step_at:step_end].sum()),
            ("  integral, after it", real[step_end:].sum(), sim[step_end:].sum())]
    if phase is not None:  # a pressed day: its decisions, as the suite scores them
        hour = length / 24
        factors = (fitted.factor[:seconds], run.factor[:seconds])
        rows += [("rescales", *(float(len(_changes(f))) for f in factors)),
                 (f"reversals within {hour:.0f} s", *(float(reversals(_changes(f), hour)) for f in factors)),
                 ("task-seconds", *(float((f * job.partition_counts(f.size)).sum()) for f in factors))]
    for name, r, s in rows:
        places = 1 if "peak" in name else 0
        print(f"{name:24} {r:10.{places}f} {s:10.{places}f} {s / r if r else float('nan'):11.2f}")
    # from the start factor: a rescale decided on the first tick runs from the replay's second 0
    real_path, sim_path = factor_path(fitted.factor[:seconds]), factor_path([job.start_factor, *run.factor[:seconds]])
    print(f"factor path, real:      {real_path}")
    print(f"factor path, simulated: {sim_path} "
          f"({', '.join(f'{r.time}s {r.old}->{r.new}' for r in run.rescales)})")
    for r in rescales or ():  # saved runs before session 18 have none
        # when the tick began, when its actuation (drain, migrate, start, first commit) began after
        # the tick's queries and policy, and when it ended
        acted = (f", actuation from {r['at'] + r['tick_ms'] / 1000 - r['actuation_s']:.1f} s (queries "
                 f"{r['prometheus_ms']:.0f} ms)" if r.get("actuation_s") is not None else "")
        ended = (f"rolled back to {r['old']} by the actuator, done by {r['at'] + r['tick_ms'] / 1000:.1f} s"
                 if r.get("result") == "rolled_back" else
                 f"done by {r['at'] + r['tick_ms'] / 1000:.1f} s (its first commit{_checked(r['new'] < r['old'])})")
        print(f"real rescale {r['old']} -> {r['new']}: decided {r['at']:.1f} s{acted}, {ended}"
              + (f"\n  {r['reason']}" if r.get("reason") else ""))
    for d in decisions or ():  # an adopted expansion: an actuation, not a rescale
        if d["outcome"] == "expand":
            print(f"real expansion adopted at {d['time'] - start:.1f} s, done by "
                  f"{d['time'] - start + d['tick_ms'] / 1000:.1f} s\n  {d['reason']}")
    adoptions = {id(a) for a in run.adoptions}
    for i, r in enumerate(sorted([*run.rescales, *run.adoptions], key=lambda r: r.time)):
        restart = job.restart_s(i)  # the run's own restarts, in order
        what = "expansion adopted:" if id(r) in adoptions else f"rescale {r.old} -> {r.new}:"
        print(f"simulated {what} decided {r.time} s (restart {restart:.2f} s), done by "
              f"{r.done:.1f} s (its first commit{_checked(r.new < r.old)})"
              + ("" if id(r) in adoptions else f"\n  {r.reason}"))
    goal = all(0.8 <= s / r <= 1.2 for r, s in ((real.sum(), sim.sum()), (real.max(), probed)) if r)
    same = real_path == sim_path
    print(f"goal (both ratios within 20%, the same factor path): "
          f"{'met' if goal and same else 'missed'}{'' if same else ' (the paths differ)'}")
    if real.size > 1 and int(real.argmax()) == 0:  # the query started behind (run 133): --cold
        print(f"  the real peak is the run's first second, the query's start-up; after it the real "
              f"peak is {real[1:].max():.1f} s")
    for line in checks(series, start, fitted):
        print(line)


def _changes(factor: np.ndarray) -> list[tuple[int, int]]:
    """A factor path's rescales, as (second, +1 up or -1 down)."""
    at = np.flatnonzero(np.diff(factor)) + 1
    return [(int(t), int(np.sign(factor[t] - factor[t - 1]))) for t in at]


def _checked(down: bool) -> str:
    """What ends a rescale's actuation besides its first commit (the daemon ticks again then)."""
    return " and the actuator's lag check after a scale-down" if down else ""


class _Reading:
    """The policy, keeping the backlog (records) and the input (records/s) each simulated tick
    read, by second of the run."""

    def __init__(self, policy, origin: float):
        self.policy, self.name, self.origin, self.backlog, self.input = policy, policy.name, origin, {}, {}

    def decide(self, observation: Observation, state=None):
        second = round(observation.time - self.origin)
        self.backlog[second] = (float(observation.partitions.lag_records.sum()), observation.factor)
        self.input[second] = observation.input_rate
        return self.policy.decide(observation, state)


def _print_tick_inputs(decisions: list[dict], start: float, simulated: dict[int, float], window_s: int) -> None:
    """Each tick's input, real (as the daemon journaled it) against the replay's at the same
    tick, past the first window (whose real reading holds time before the run) and where the
    replay reads over 50/s: is the model's reading the daemon's query? (Runs 154-157, whose
    daemons read `rate()`: 17-35% of ticks within 2%; 158-160, the probe's read times: 94-98%.)"""
    real = {round(d["time"] - start): d["inputs"]["input_rate"] for d in decisions
            if (d.get("inputs") or {}).get("input_rate") is not None}
    pairs = np.array([(real[t], simulated[t]) for t in sorted(real) if t >= window_s and simulated.get(t, 0) > 50])
    if pairs.size:
        off = np.abs(pairs[:, 0] / pairs[:, 1] - 1)
        print(f"input each tick read, real / replay ({len(pairs)} ticks): sd {np.std(pairs[:, 0] / pairs[:, 1]):.3f}, "
              f"worst {off.max():.3f} off, {np.mean(off < 0.02):.0%} within 2%")


def _print_tick_backlogs(ticks: list[dict], start: float, simulated: dict[int, tuple[float, int]]) -> None:
    """Each tick's backlog, real (as the daemon journaled it) and replayed, where both ran the
    same factor: the real one is one moment of a batch's sawtooth, the model's its mean."""
    real = {round(d["time"] - start): (d["inputs"]["lag_records"], d["factor"])
            for d in ticks if (d.get("inputs") or {}).get("lag_records") is not None}
    rows = [(t, real[t][0], simulated[t][0]) for t in sorted(real)
            if t in simulated and real[t][1] == simulated[t][1] and max(real[t][0], simulated[t][0]) > 100]
    print("\nbacklog each tick read (records), real / simulated, same factor, either over 100:")
    print("  " + ", ".join(f"{t}s {a:.0f}/{b:.0f}" for t, a, b in rows))
    if rows:
        a, b = sum(r[1] for r in rows), sum(r[2] for r in rows)
        print(f"  sums {a:.0f} / {b:.0f} (sim / real {b / a:.2f}); real min {min(r[1] for r in rows):.0f}, "
              f"max {max(r[1] for r in rows):.0f}; simulated min {min(r[2] for r in rows):.0f}, "
              f"max {max(r[2] for r in rows):.0f}")


def _same_factor(real_factor: np.ndarray, run, phase: tuple[float, float]) -> tuple[np.ndarray, ...]:
    """The seconds both sides ran, where they ran the same factor, and of those the high
    phase's second half (where the job keeps up)."""
    seconds = np.arange(min(real_factor.size, run.factor.size))
    same = real_factor[: seconds.size] == run.factor[: seconds.size]
    return seconds, same, same & (seconds >= phase[0] + phase[1] / 2) & (seconds < phase[0] + phase[1])


def _print_second_backlogs(series: dict, start: float, real_factor: np.ndarray, run, phase: tuple[float, float]) -> None:
    """The backlog gauge every second (each probe's reading from its read time on) beside the
    replay's mean backlog of each second (what the gauge shows on average), over the seconds
    both ran the same factor; and their means over the high phase's second half, where the job
    keeps up."""
    seconds, same, late = _same_factor(real_factor, run, phase)
    real = sum(_while_read(points, start, seconds)
               for _, points in _restamped(series["lag_records"], series.get("high_watermark_time", ())))
    sim = run.lag_records_mean[: seconds.size]
    halves = (f"real mean {real[late].mean():.0f} (sd {real[late].std():.0f}), simulated {sim[late].mean():.0f}"
              if late.any() else "none at the same factor")
    print(f"\nbacklog every second (records), same factor ({int(same.sum())} s): sums sim / real "
          f"{sim[same].sum() / max(real[same].sum(), 1e-9):.2f}; the high phase's second half "
          f"({int(late.sum())} s): {halves}")


def _while_read(points: list, start: float, seconds: np.ndarray) -> np.ndarray:
    """A partition's gauge each second from its reading on, 0 before its first and after its
    last: a shard that joined or left the layout mid-run (held, a retired shard's last backlog
    counted to the end: the shipped Kinesis demo's backlog read 0.40 of the real one)."""
    if not points:
        return np.zeros(seconds.size)
    first, last = points[0][0] - start, points[-1][0] - start
    return np.where((seconds >= first) & (seconds < last + 1), _resample(points, start, seconds, step=True), 0.0)


def _print_batch_durations(series: dict, start: float, real_factor: np.ndarray, run,
                           phase: tuple[float, float], job: JobModel) -> None:
    """The last committed batch's duration every second, real beside the replay's, over the high
    phase's second half at the same factor: the model's batch timing, on which the backlog a
    steady job holds rests. The real gauge runs from the batch function's start (Spark's planning
    before it is not in it), the replay's from the trigger. Its longest batch shows a stall the
    model has no term for (run 143: one 2.0 s batch among 0.8-1.2 s ones, 18 s to drain at 81%).
    Then how much of the ratio the model's commit wait there makes (`steady_wait_ratio`: an
    error in it comes back magnified by 1 / (1 - busy)), and the rest, the busy share's; and a
    batch's busiest thread against its share's prediction (`slowest_thread_ratio`), a part of
    that rest."""
    seconds, _, late = _same_factor(real_factor, run, phase)
    real = _resample(_points(series["batch_duration"]), start, seconds, step=True)
    sim = run.batch_duration[: seconds.size].astype(np.float64)
    late &= np.isfinite(real) & np.isfinite(sim)
    if not late.any():
        return
    print(f"batch duration (s), the high phase's second half ({int(late.sum())} s): real mean "
          f"{real[late].mean():.2f} (longest {real[late].max():.2f}), simulated {sim[late].mean():.2f} "
          f"(longest {sim[late].max():.2f}), sim / real {sim[late].mean() / real[late].mean():.2f}")
    split = steady_wait_ratio(job, real_factor, batch_commits(series, start, records=True), late)
    if split is not None:
        measured, modelled, wait = split
        print(f"  of which the commit's wait there, measured {measured:.3f} s a batch, modelled {modelled:.3f} s: "
              f"a steady batch is (wait + gap) / (1 - busy), so the wait alone makes the replay's batches "
              f"{wait:.2f} of the real ones; the rest, {sim[late].mean() / real[late].mean() / wait:.2f}, is "
              f"the busy share (the model's capacity and input there)")
    slowest = slowest_thread_ratio(job, real_factor, series, start, late)
    if slowest is not None:
        print(f"  a batch's busiest thread worked {slowest[0]:.3f} of what its busiest share predicts there "
              f"(median of {slowest[1]} scrapes; the model's mean thread: 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=240, help="seconds of the real run (default 240)")
    parser.add_argument("--save", type=Path, help="also save the run's series here (JSON)")
    parser.add_argument("--replay", type=Path, help="no real run: compare against series saved by --save")
    parser.add_argument("--ticks", action="store_true",
                        help="with --replay: print the backlog each tick read, real and simulated")
    parser.add_argument("--cost-scale", type=float, default=1.0,
                        help="with --replay, a what-if: the fitted per-record cost times this, the factor "
                             "held at most at the real run's highest (how sensitive the model's lag is)")
    parser.add_argument("--png", type=Path, help="also write the real run's timeline here, as `make demo` does")
    parser.add_argument("--high", type=float, help="the step's rate in orders/s (default the demo's 1,200); "
                        "320 was 86-88%% of factor 1's measured capacity in session 66 (run k8), inside "
                        "the scale-up band")
    parser.add_argument("--keys", type=int, default=demo.KEYS,
                        help=f"customers, the orders' keys (default the demo's {demo.KEYS}); with few, "
                             "the busiest key lane caps what a larger factor adds")
    parser.add_argument("--clocks", choices=tuple(demo.CLOCKS), default="demo",
                        help="the daemon's clocks: the demo's shortened ones (default: 5 s tick, 10 s "
                             "window, 20 s cooldown) or the shipped ones (15 s, 30 s, 300 s)")
    parser.add_argument("--shape", choices=demo.SHAPES, default="step",
                        help="the high phase's load, as `examples/demo.py --shape`: a step (default), a "
                             "ramp up to it over its first half, or 10 s bursts to it every 30 s")
    parser.add_argument("--memory", type=float, help="the policy's lull_memory_s for both the daemon and "
                        "the replay (default the shipped 10,800): 60 lets the step's end bring a "
                        "scale-down within the run, to compare that too")
    parser.add_argument("--policy", choices=("autosizer", "utilization", "lag-threshold"), default="autosizer",
                        help="the daemon's policy, replayed the same (default the shipped autosizer); "
                             "lag-threshold scales down while the input is high, and the actuator rolls "
                             "that back: a check of the simulated rollback")
    parser.add_argument("--cold", action="store_true",
                        help="start the load only once the pipeline's query runs: no start-up backlog, so "
                             "the pipeline measures the hot shares from the trickle and the replay learns "
                             "them from 200 records a partition")
    parser.add_argument("--trace", choices=real_trace_names(),
                        help="play one day of this real trace instead of the step, pressed into the run")
    parser.add_argument("--day", type=int, default=1, help="which day of --trace, from 0 (default 1)")
    parser.add_argument("--history", nargs="?", const="same", choices=demo.HISTORIES,
                        help="write three past days into the job's Redis history first, the replay "
                             "starting from the same days: `same` (the default) ran this load at this "
                             "time of day (the daemon's day plan then sizes for the step before it "
                             "comes: learn-the-day on the real job); `holiday` ran the step's peak "
                             "through the last hour, which today did not (the fallback: it reacts); "
                             "`one` wrote one such day only (a job's second day: it reacts, its scale-up "
                             "sized for what that day reached)")
    parser.add_argument("--apart", type=int, default=0,
                        help="start on a topic whose partitions 0 and 1 sit this many offsets past 2 and 3, "
                             "as a topic that has run a while (default 0: a new topic)")
    parser.add_argument("--timezone", default="UTC",
                        help="the daemon's [job] timezone, which keys the days --history writes "
                             "(default UTC); the replay's history is kept in it too")
    parser.add_argument("--source", choices=("kafka", "kinesis"), default="kafka",
                        help="kinesis: run `make demo-kinesis`'s job instead (2 shards on the emulator, 20 -> "
                             "150 orders/s from 20 s for 90 s, 40 ms a lookup, the demo's clocks), without its split and "
                             "merge; the load from the records' arrival times on the stream (takes --policy, "
                             "--duration and --save)")
    parser.add_argument("--expand-at", type=float,
                        help="grow the Kafka demo's topic 4 -> 8 partitions this many seconds into the run, the "
                             "producer moving half the keys at once; the daemon adopts it 20 s later")
    parser.add_argument("--cluster", action="store_true",
                        help="run the job's pipeline on a standalone Spark cluster (2 cores, its executors "
                             "in their own JVM) instead of local[2]")
    parser.add_argument("--reshard", action="store_true",
                        help="with --source kinesis: keep the demo's split (45 s) and merge (75 s), as it ships")
    args = parser.parse_args()
    try:
        time_zone(args.timezone, "--timezone")
    except ValueError as err:
        parser.error(str(err))
    if args.ticks and not args.replay:
        parser.error("--ticks reads a saved run's decisions: add --replay run.json")
    if not (args.cost_scale > 0 and math.isfinite(args.cost_scale)):
        parser.error(f"--cost-scale must be a factor > 0, not {args.cost_scale}")
    if args.cost_scale != 1.0 and not args.replay:
        parser.error("--cost-scale changes a replay's model: add --replay run.json")
    if args.replay:
        saved = json.loads(args.replay.read_text())
        config = args.replay.with_suffix(".toml")
        config.write_text(saved["config"])
        replay(saved["series"], saved["start"], saved["end"], config, saved.get("rescales"), saved.get("phase"),
               saved.get("history"), args.ticks, saved.get("lag_gauge") == ONE_MOMENT,
               saved.get("input_rate") != READ_TIMES, saved.get("decisions"),
               tuple(saved.get("step") or (demo.STEP_AT, demo.STEP_S)), args.cost_scale)
        return
    if args.reshard and args.source != "kinesis":
        parser.error("--reshard splits and merges the Kinesis demo's shards: add --source kinesis")
    if args.source == "kinesis":
        given = [f"--{name.replace('_', '-')}" for name in ("png", "high", "memory", "cold", "trace", "history",
                                                             "apart", "expand_at")
                 if getattr(args, name) not in (None, False, 0)]
        given += [f"--{name}" for name in ("keys", "clocks", "shape", "timezone")
                  if getattr(args, name) != parser.get_default(name)]
        if given:
            parser.error(f"--source kinesis runs the Kinesis demo as it ships: drop {', '.join(given)}")
        kinesis_demo.run(args.duration, after=lambda finished: compare(finished, args.save), reshard=args.reshard,
                         policy=args.policy, cluster=args.cluster)
        return
    if args.high is not None and not (args.high > 0 and math.isfinite(args.high)):
        parser.error(f"--high must be a rate > 0 in orders/s, not {args.high}")
    if args.keys < 1:
        parser.error(f"--keys must be at least 1, not {args.keys}")
    if args.memory is not None and not (args.memory > 0 and math.isfinite(args.memory)):
        parser.error(f"--memory must be seconds > 0, not {args.memory}")
    if args.memory is not None and args.policy != "autosizer":
        parser.error(f"--memory sets the autosizer policy's lull_memory_s; {args.policy} has none: drop it")
    if args.expand_at is not None and not 0 <= args.expand_at < args.duration:
        parser.error(f"--expand-at must be seconds from 0 to the run's --duration {args.duration:g}, "
                     f"not {args.expand_at:g}")
    profile, phase = None, None
    if args.trace:
        if args.shape != "step":
            parser.error(f"--trace replaces the step's shape: drop --shape {args.shape}")
        phase = (demo.STEP_AT, args.duration - demo.STEP_AT - 60)
        try:
            profile = demo.day_of_trace(args.trace, args.day, phase[1], args.high or demo.HIGH)
        except ValueError as err:
            parser.error(f"--trace/--day/--duration: {err}")
    demo.run(args.duration, args.png, after=lambda finished: compare(finished, args.save, phase), high=args.high,
             shape=args.shape, keys=args.keys, clocks=args.clocks, memory_s=args.memory, policy=args.policy,
             cold=args.cold, profile=profile, phase_s=phase[1] if phase else demo.STEP_S, history=args.history,
             timezone=args.timezone, apart=args.apart, expand_at=args.expand_at, cluster=args.cluster)


if __name__ == "__main__":
    main()
