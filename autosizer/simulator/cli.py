"""`autosizer simulate`: replay a workload against policies and print the comparison.

Results go to stdout (the table) and to files (`--plot`, `--markdown`); progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from typing import Any

from autosizer.checks import duration, finite, output_file
from autosizer.controller.config import read_section
from autosizer.policies import Guards, policy_names
from autosizer.simulator import workloads
from autosizer.simulator.job import JobModel
from autosizer.simulator.traces import load_trace, trace_names

DEFAULT_POLICIES = ("autosizer", "utilization", "lag-threshold")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("workload")
    pick = source.add_mutually_exclusive_group()
    pick.add_argument("--trace", help=f"a suite trace ({', '.join(trace_names())}) or a .toml path")
    pick.add_argument("--workload", choices=sorted(workloads.BUILTIN), default="diurnal")
    source.add_argument("--days", type=float, help="length in days")
    source.add_argument("--hours", type=float, help="length in hours")
    source.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a workload setting, e.g. mean=20000, path=rates.csv, query=...")
    source.add_argument("--delay", type=int, default=0, metavar="S",
                        help="start the input S seconds later, so its changes land S s into a "
                             "decision tick rather than on one (default 0)")
    job = parser.add_argument_group("job (defaults: 64 partitions, 10 ms per record)")
    job.add_argument("--partitions", type=int)
    job.add_argument("--process-ms", type=float, help="mean time per record")
    job.add_argument("--cpu-fraction", type=float, help="share of that time on a CPU (0 = I/O-bound)")
    job.add_argument("--cores", type=int)
    job.add_argument("--downtime", type=float, help="restart downtime in seconds")
    job.add_argument("--metrics-age", type=float, metavar="S",
                     help="how old the metrics each decision reads are, in seconds: about half the "
                          "scrape interval plus 1 (default 0: as they happen)")
    job.add_argument("--scrape-interval", type=float, metavar="S",
                     help="Prometheus' scrape interval: a batch's cost reads half of it old; with "
                          "--input-over-scrapes a decision reads the input over the window less this "
                          "(default: the trace's, else 0)")
    job.add_argument("--input-over-scrapes", action="store_true", default=None,
                     help="the daemon reads the input with Prometheus' rate() (a query of its own, or "
                          "before session 51): over the window less a scrape interval, not the whole "
                          "window between the probe's reads")
    job.add_argument("--verify-window", type=float, metavar="S",
                     help="the actuator's lag check after a scale-down, in seconds: the daemon waits "
                          "it out and rolls back a layout that falls behind (default: the trace's, "
                          "else the shipped 30; 0 leaves it out)")
    job.add_argument("--start-factor", type=int)
    job.add_argument("--zipf", type=float, help="key popularity exponent (0 = uniform)")
    job.add_argument("--hot-key-share", type=float, help="one key's share of partition 0")
    run = parser.add_argument_group("policies and output")
    run.add_argument("--policy", action="append", metavar="NAME",
                     help=f"repeat to compare; installed: {', '.join(policy_names())}")
    run.add_argument("--set", action="append", default=[], metavar="POLICY.KEY=VALUE",
                     help="a policy setting, e.g. utilization.target_utilization=0.6")
    run.add_argument("--sweep", action="append", default=[], metavar="POLICY.KEY=V1,V2",
                     help="run the policy once per value (several --sweep multiply)")
    run.add_argument("--guard", action="append", default=[], metavar="KEY=VALUE",
                     help="a guard setting, e.g. cooldown_s=120")
    run.add_argument("--tick", type=int, default=15, help="seconds between decisions")
    run.add_argument("--window", type=int, help="seconds of input each decision reads, as the "
                     "daemon's [prometheus] window (default: two ticks)")
    run.add_argument("--slo", type=float, default=30.0, help="lag SLO in seconds")
    run.add_argument("--seed", type=int, default=7)
    run.add_argument("--workers", type=int, metavar="N",
                     help="processes to run the policies on (default: one per core for runs of a day "
                          "or more, else 1; the runs are the same either way)")
    run.add_argument("--plot", help="write the timeline PNG here")
    run.add_argument("--markdown", help="also write the table as markdown here")
    run.add_argument("--json", action="store_true", help="print the scores as JSON")


def _pairs(items: list[str], flag: str) -> dict[str, Any]:
    found = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{flag} takes KEY=VALUE, not {item!r}")
        found[key.strip()] = value
    return found


def _job_and_workload(args: argparse.Namespace) -> tuple[str, JobModel, workloads.Workload]:
    from autosizer.simulator.sweep import parse_value

    params = {k: parse_value(v) for k, v in _pairs(args.param, "--param").items()}
    if args.days is not None or args.hours is not None:  # `--days 0` is a length too: refused below
        for flag, value in (("--days", args.days), ("--hours", args.hours)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{flag} must be a finite length > 0, not {value!r}")
        params["seconds"] = (args.days or 0) * 86400 + (args.hours or 0) * 3600
    if args.trace:
        trace = load_trace(args.trace)
        name, job, workload = trace.name, trace.job, trace.workload
        if params:
            raise ValueError("--param/--days/--hours apply to --workload; edit the trace file instead")
    else:
        name, job = args.workload, JobModel()
        workload = workloads.build(args.workload, **params)
    if args.delay:
        if not 0 <= args.delay < workload.seconds:
            raise ValueError(f"--delay must be 0 to {workload.seconds - 1} seconds (less than the "
                             f"workload), not {args.delay!r}; a tick's length or less shows where a "
                             f"change lands in it")
        workload = workload.delayed(args.delay)
    if args.metrics_age is not None and not (math.isfinite(args.metrics_age) and args.metrics_age >= 0):
        raise ValueError(f"--metrics-age must be finite seconds >= 0 (about half the scrape interval "
                         f"plus 1), not {args.metrics_age!r}")
    if args.scrape_interval is not None and not (math.isfinite(args.scrape_interval) and args.scrape_interval >= 0):
        raise ValueError(f"--scrape-interval must be finite seconds >= 0 (Prometheus' scrape_interval, "
                         f"less than the rate --window), not {args.scrape_interval!r}")
    if args.verify_window is not None and not (math.isfinite(args.verify_window) and args.verify_window >= 0):
        raise ValueError(f"--verify-window must be finite seconds >= 0 (the actuator's verify_window_s, "
                         f"30 shipped; 0 leaves the check out), not {args.verify_window!r}")
    overrides = {"partitions": args.partitions, "cpu_fraction": args.cpu_fraction,
                 "metrics_age_s": args.metrics_age, "verify_window_s": args.verify_window,
                 "scrape_interval_s": args.scrape_interval, "input_over_scrapes": args.input_over_scrapes,
                 "cores": args.cores, "restart_downtime_s": args.downtime,
                 "start_factor": args.start_factor,
                 "process_seconds": args.process_ms / 1000 if args.process_ms is not None else None}
    job = replace(job, **{k: v for k, v in overrides.items() if v is not None})
    if args.zipf is not None or args.hot_key_share is not None:
        skew = replace(job.skew, **{k: v for k, v in (("zipf", args.zipf),
                                                        ("hot_key_share", args.hot_key_share)) if v is not None})
        job = replace(job, skew=skew)
    return name, job, workload


def run(args: argparse.Namespace) -> None:
    # Imported here: numba and tqdm cost every other command half a second at start-up.
    from autosizer.simulator import report
    from autosizer.simulator.scores import score
    from autosizer.simulator.sweep import compare, parse_value, variants

    name, job, workload = _job_and_workload(args)
    for flag, path in (("--markdown", args.markdown), ("--plot", args.plot)):
        if path:
            output_file(path, flag)
    settings: dict[str, dict[str, Any]] = {}
    for key, value in _pairs(args.set, "--set").items():
        policy, _, setting = key.partition(".")
        if not setting:
            raise ValueError(f"--set takes POLICY.KEY=VALUE, not {key!r}")
        settings.setdefault(policy, {})[setting] = parse_value(value)
    sweeps = {}
    for key, values in _pairs(args.sweep, "--sweep").items():
        if "." not in key:
            raise ValueError(f"--sweep takes POLICY.KEY=V1,V2, not {key!r}")
        sweeps[key] = [parse_value(v) for v in values.split(",")]
    guards = read_section("--guard", "guards", Guards, _pairs(args.guard, "--guard"))  # as the daemon's [guards]
    names = args.policy or list(DEFAULT_POLICIES)
    if args.tick < 1 or (args.window is not None and args.window < 1):
        raise ValueError("--tick and --window must be at least 1 second")
    if not (math.isfinite(args.slo) and args.slo > 0):
        raise ValueError(f"--slo must be a finite number of seconds > 0 (the lag a job may run "
                         f"behind; 30 by default), not {args.slo!r}")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be at least 1 (one process runs the policies in turn), "
                         f"not {args.workers!r}")
    runs = compare(workload, job, variants(names, settings, sweeps), guards, args.tick, args.seed,
                   window_s=args.window, workers=args.workers)
    scores = [score(r, args.slo) for r in runs]
    if args.json:
        sys.stdout.write(json.dumps([s.row() for s in scores], indent=2) + "\n")
    else:
        sys.stdout.write(f"{name}: {workload.seconds / 3600:g} h, {job.partitions_words()}, "
                         f"SLO {args.slo:g} s\n{report.table(scores)}\n")
    if args.markdown:
        with open(args.markdown, "w") as handle:
            handle.write(report.table(scores, markdown=True) + "\n")
    if args.plot:
        report.plot(runs, args.plot, args.slo, title=f"{name}, {job.partitions} partitions")
        sys.stdout.write(f"plot: {args.plot}\n")


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--prometheus", required=True, help="Prometheus URL that scraped the pipeline")
    parser.add_argument("--start", required=True, help="the run's start: epoch seconds or ISO 8601")
    parser.add_argument("--end", required=True, help="the run's end: epoch seconds or ISO 8601")
    parser.add_argument("--selector", default="", help='label matchers, e.g. job="orders"')
    parser.add_argument("--window", default="3s",
                        help="rate window for the partitions' shares of the input (default 3s); the load "
                             "itself is read from the high watermark's steps (or, with --bootstrap, from "
                             "the records' own times)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers still holding the run's records: the "
                        "load is then counted from the records' own timestamps (a step lands in the second it "
                        "came, not between two scrapes); needs --topic")
    parser.add_argument("--topic", action="append", default=[],
                        help="a topic the job read, with --bootstrap (repeat for several)")
    parser.add_argument("--kinesis-stream", help="the Kinesis stream a `--source kinesis` job read, still holding "
                        "the run's records: the load is then counted from their arrival times (instead of "
                        "--bootstrap); credentials from boto3's chain")
    parser.add_argument("--kinesis-endpoint",
                        help="with --kinesis-stream: the endpoint URL (default: AWS's); env AUTOSIZER_KINESIS_ENDPOINT")
    parser.add_argument("--region", help="with --kinesis-stream: the stream's AWS region (default: boto3's); "
                        "env AWS_REGION")
    parser.add_argument("--adopt-after-s", help="the daemon's `[daemon] adopt_after_s` during the run (default "
                        "300, its default): how long a grown topic's new partitions were read behind their "
                        "parents; Prometheus does not hold it")
    parser.add_argument("--out", required=True, help="trace file to write (.toml; the load goes beside it as .csv)")


def run_fit(args: argparse.Namespace) -> None:
    from autosizer.simulator.arrivals import read_arrivals, read_kinesis_arrivals
    from autosizer.simulator.fit import ARRIVALS, fetch, fitted_run, scrape_problem, write_trace
    from autosizer.simulator.fit_checks import checks
    from autosizer.simulator.workloads import _when

    def when(flag: str, text: str) -> float:
        try:
            return _when(text).timestamp()
        except ValueError as exc:
            raise ValueError(f"{flag}: {exc}") from None

    start, end = when("--start", args.start), when("--end", args.end)
    window = duration(args.window, "--window", "a whole number of seconds such as 3s or 1m")
    if not (1 <= window <= 86_400 and float(window).is_integer()):
        raise ValueError(f"--window must be whole seconds from 1s to 24h (a Prometheus range), not {args.window!r}")
    if not end > start:
        raise ValueError(f"--end {args.end} must be after --start {args.start}")
    adopt_after_s = None if args.adopt_after_s is None else finite(args.adopt_after_s, "--adopt-after-s", 0, 86_400)
    if not args.out.endswith(".toml"):
        raise ValueError(f"--out {args.out!r} must end in .toml (the load is written beside it as .csv)")
    output_file(args.out, "--out")
    if bool(args.bootstrap) != bool(args.topic):
        raise ValueError("--bootstrap and --topic go together: the broker and the topics whose records' "
                         "times are the load (or drop both to count the load from the watermark)")
    if args.bootstrap and args.kinesis_stream:
        raise ValueError("--bootstrap and --kinesis-stream are two sources of the records' times: pass the one "
                         "the job read")
    for flag, value in (("--kinesis-endpoint", args.kinesis_endpoint), ("--region", args.region)):
        if value and not args.kinesis_stream:
            raise ValueError(f"{flag} says where the Kinesis stream is: add --kinesis-stream NAME, or drop it")
    endpoint = args.kinesis_endpoint or os.environ.get("AUTOSIZER_KINESIS_ENDPOINT")
    region = args.region or os.environ.get("AWS_REGION")
    if args.kinesis_stream:
        from autosizer.pipeline.cli import check_kinesis_access

        check_kinesis_access(endpoint, region)
    series = fetch(args.prometheus, start, end, args.selector, f"{int(window)}s")
    if problem := scrape_problem(series, f"{int(window)}s", args.selector):
        raise ValueError(problem)
    if args.bootstrap:
        series[ARRIVALS] = read_arrivals(args.bootstrap, args.topic, start, end)
    elif args.kinesis_stream:
        series[ARRIVALS] = read_kinesis_arrivals(args.kinesis_stream, start, end, endpoint, region)
    fitted = fitted_run(series, start, end)
    if adopt_after_s is not None:
        fitted = replace(fitted, job=replace(fitted.job, adopt_after_s=adopt_after_s))
    path = write_trace(fitted, args.out, f"fitted from {args.prometheus}, {args.start} to {args.end}")
    job = fitted.job
    sys.stdout.write(f"{path}: {job.partitions_words()}, {job.process_seconds * 1000:.2f} ms per record, "
                     f"batch {job.batch_seconds:g} s + {job.cost_words()}"
                     f"{f' (records cut {job.read_boundary_s:.2f} s after the trigger)' if job.read_boundary_s else ''}, restart "
                     f"{job.restart_downtime_s:.1f} s, service-time CV {job.process_cv:.2f}, "
                     f"{fitted.load.seconds} s of load from {fitted.load_source}\n")
    # the model's capacity and commit wait against what the run itself showed, where it did
    for line in checks(series, start, fitted):
        sys.stdout.write(line + "\n")
