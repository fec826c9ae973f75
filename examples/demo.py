"""The daemon demo: a real job autosized live, from one command (`make demo`).

It starts Redis, the broker (noida-db) and Prometheus on free loopback ports, the enrichment pipeline
(`examples.enrich:enrich`, 10 ms lookup per order) on Spark local as its own process, a load that
steps from 100 to 1,200 orders/s and back, and the autosizer daemon on its default policy. The
terminal shows the factor, lag, rates and the last decision as they change; at the end (after
--duration, or on Ctrl-C) everything stops, the exactly-once output is checked and a PNG timeline
of load, lag and factor is written.

Run: make demo   (or: .venv/bin/python examples/demo.py [--duration 240] [--png demo.png] [--expand-at 60])
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.actuators.journal import ActuationJournal  # noqa: E402
from autosizer.controller.collector import PrometheusCollector  # noqa: E402
from autosizer.controller.config import load_config  # noqa: E402
from autosizer.controller.daemon import Daemon  # noqa: E402
from autosizer.controller.history import HistoryStore  # noqa: E402
from autosizer.controller.journal import DecisionJournal  # noqa: E402
from autosizer.controller.logging import configure_logging  # noqa: E402
from autosizer.controller.queries import DEFAULT_QUERIES  # noqa: E402
from autosizer.elasticity import Checkpoints, Layout  # noqa: E402
from autosizer.elasticity.store import MetadataStore  # noqa: E402
from autosizer.embedded import (  # noqa: E402
    EmbeddedBroker,
    EmbeddedPrometheus,
    EmbeddedRedis,
    EmbeddedSparkCluster,
    free_port,
)
from autosizer.pipeline.sinks import read_committed  # noqa: E402
from autosizer.policies.history import DAY_S, InputHistory  # noqa: E402
from examples.loadgen import StepLoad, check_orders, keep_up_verdict  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS, LOW, HIGH, CORES = 4, 100.0, 1200.0, 2
SHOWN = ("input_rate", "processed_rate", "lag_records")
MAX_START_AGE_S = 3.0  # the oldest unprocessed record when the watched run starts (one batch)
CONFIG = """
[job]
name = "{job}"
redis_url = "{redis}"

[daemon]
interval_s = 5
lease_ttl_s = 15
listen = "127.0.0.1:{listen}"
log_level = "warning"
adopt_after_s = 20

[prometheus]
url = "{prometheus}"
window = "10s"

[guards]
max_factor = 32
cooldown_s = 20
scale_down_delay_s = 20
max_age_s = 20

[policy]
name = "autosizer"

[actuator]
name = "restart-in-driver"
"""
# Only the daemon's clocks are shortened (tick, window, cooldowns, metric age) so that a demo fits
# in minutes; the policy and the actuator run on their shipped defaults, as a deployed job would.
# `clocks="shipped"` keeps the shipped clocks too (a 15 s tick over a 30 s window, a 300 s
# cooldown): the loop at the settings a user runs.
SHORTENED = ("interval_s", "lease_ttl_s", "adopt_after_s", "window", "max_factor", "cooldown_s",
             "scale_down_delay_s", "max_age_s")
CLOCKS = {"demo": CONFIG,
          "shipped": "\n".join(line for line in CONFIG.splitlines() if not line.startswith(SHORTENED))}
STEP_AT, STEP_S = 30.0, 120.0  # the load is HIGH from STEP_AT for STEP_S seconds
KEYS = 200  # customers: the orders' keys, each one's orders kept in order
APART_PARTITIONS = (0, 1)  # `run(apart=N)`: the partitions a job before this one left N records into
HISTORIES = ("same", "holiday", "one")  # what `--history` writes: days like this one, days it breaks, one day
SHAPES = ("step", "ramp", "bursts")  # how the high phase gets there (`load_at`)
CLUSTER_CORES = 2  # `--cluster`: the standalone worker's cores, local[2]'s two


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=240,
                        help=f"seconds to run (default 240; the step is {STEP_AT:g}-{STEP_AT + STEP_S:g} s)")
    parser.add_argument("--png", default="autosizer-demo.png", help="where to write the timeline")
    parser.add_argument("--shape", choices=SHAPES, default="step",
                        help="the high phase's load: a step (default), a ramp up to it over its first "
                             "half, or 10 s bursts to it every 30 s")
    parser.add_argument("--cpu-ms", type=float, default=0.0,
                        help="make the work CPU-bound: this much CPU per record instead of the 10 ms "
                             "lookup (shows the cores' ceiling the policy measures)")
    parser.add_argument("--history", nargs="?", const="same", choices=HISTORIES,
                        help="first write three past days into the job's Redis history: `same` (the "
                             "default) ran this load at this time of day, so the daemon's day plan scales "
                             "up before the step comes; `holiday` ran the step's peak through the last "
                             "hour, which today did not, so the daemon does not believe them and reacts; "
                             "`one` wrote one such day only: too few to plan from, the daemon reacts and "
                             "sizes its scale-up for what that day reached")
    parser.add_argument("--expand-at", type=float,
                        help=f"grow the topic {PARTITIONS} -> {2 * PARTITIONS} partitions this many seconds into "
                             "the watched run, the producer moving half the keys at once; the daemon adopts "
                             "the new count at its next tick and reads the new partitions behind their "
                             "parents for 20 s (the demo's `adopt_after_s`)")
    parser.add_argument("--cluster", action="store_true",
                        help=f"run the pipeline on a standalone Spark cluster ({CLUSTER_CORES} cores, started "
                             "from the pyspark package) instead of local[2]")
    args = parser.parse_args()
    if not (0 <= args.cpu_ms < 1000):
        parser.error(f"--cpu-ms must be in [0, 1000), not {args.cpu_ms}")
    if args.expand_at is not None and not 0 <= args.expand_at < args.duration:
        parser.error(f"--expand-at must be seconds from 0 to the run's --duration {args.duration:g}, "
                     f"not {args.expand_at:g}")
    run(args.duration, Path(args.png), cpu_ms=args.cpu_ms, shape=args.shape, history=args.history,
        expand_at=args.expand_at, cluster=args.cluster)


def load_at(elapsed: float, high: float, shape: str = "step") -> float:
    """Orders/s to produce `elapsed` seconds into the watched run: LOW, and in the high phase a
    step to `high`, a ramp to it over the phase's first half, or 10 s bursts to it every 30 s
    (real traffic is seldom one clean step; these show what the policy does with the others)."""
    into = elapsed - STEP_AT
    if not 0 <= into < STEP_S:
        return LOW
    if shape == "ramp":
        return LOW + (high - LOW) * min(1.0, into / (STEP_S / 2))
    if shape == "bursts":
        return high if into % 30 < 10 else LOW
    return high


def day_of_trace(name: str, day: int, span_s: float, high: float) -> Callable[[float], float]:
    """One day of a suite trace (`autosizer simulate --trace NAME`) as the watched run's load:
    its 24 hours pressed into `span_s` seconds from STEP_AT, its rates mapped linearly from
    [0, the day's busiest second] onto [LOW, high], LOW outside. Real traffic's shape (nyc-flights'
    morning rise and hourly banks) through the real job, at the demo's scale."""
    from autosizer.simulator.traces import load_trace
    from autosizer.simulator.workloads import DAY

    rate = load_trace(name).workload.rate
    days = rate.size // DAY
    if not 0 <= day < days:
        raise ValueError(f"day must be 0 to {days - 1} for trace {name!r}, not {day!r}")
    if not span_s >= 60:
        raise ValueError(f"the day needs at least 60 s of the run, not {span_s:g}: run longer")
    today = rate[day * DAY:(day + 1) * DAY]
    if today.max() <= 0:
        raise ValueError(f"day {day} of trace {name!r} has no input: pick another day")
    scaled = LOW + (high - LOW) * today / today.max()

    def load(elapsed: float) -> float:
        into = elapsed - STEP_AT
        if not 0 <= into < span_s:
            return LOW
        return float(scaled[min(DAY - 1, int(into / span_s * DAY))])

    return load


def cpu_step(cpu_ms: float) -> float:
    """CPU-bound work's step: 1.5x what the 2 cores can do at best, so the job falls behind at
    every factor and the policy must judge its scale-ups by the throughput it measures while
    behind (a step it could meet would never leave a backlog to measure)."""
    return round(1.5 * CORES * 1000.0 / cpu_ms)


def spark_master(stack: contextlib.ExitStack, workdir: Path, cluster: bool) -> str:
    """`local[2]`, or with `cluster` the master of a standalone cluster (one worker with
    `CLUSTER_CORES`) that `stack` stops: the engine a deployment runs."""
    if not cluster:
        return "local[2]"
    print(f"starting a standalone Spark cluster ({CLUSTER_CORES} cores)...")
    return stack.enter_context(EmbeddedSparkCluster(cores=CLUSTER_CORES, workdir=workdir / "spark")).master_url


def executor_env(settings: dict[str, str]) -> list[str]:
    """The pipeline's flags that hand the app's settings to a cluster's executors, which do not
    inherit the driver's environment, as a user must (session 80's first cluster run read the
    app's 2 ms default there)."""
    return [flag for name, value in settings.items() for flag in ("--conf", f"spark.executorEnv.{name}={value}")]


def run(duration: float, png: Path | None, after: Callable[[Finished], None] | None = None,
        cpu_ms: float = 0.0, high: float | None = None, shape: str = "step", keys: int = KEYS,
        clocks: str = "demo", memory_s: float | None = None, policy: str = "autosizer",
        cold: bool = False, profile: Callable[[float], float] | None = None, phase_s: float = STEP_S,
        history: str | None = None, timezone: str = "UTC", apart: int = 0,
        expand_at: float | None = None, cluster: bool = False) -> bool:
    """The whole demo; `after(finished)` runs while Prometheus is still up (the benchmark's
    hook); `high` replaces the step's rate, `keys` the number of customers, `clocks` the
    daemon's (`CLOCKS`), `memory_s` the policy's `lull_memory_s` (a benchmark's: shortened, a
    scale-down after the step comes within minutes, not the shipped 3 hours), `policy` the
    daemon's policy; `cold` starts the load only once the pipeline's query runs, and the watched
    run with it (no start-up backlog: the pipeline measures the hot shares from the trickle).
    `profile` replaces the shape's load (orders/s at each second of the watched run, as
    `day_of_trace` makes), its high phase `phase_s` long from STEP_AT. `history` writes three
    past days into the job's Redis history (`seed_history`), as a daemon that has seen the job
    for days finds them: `same` ran this very load at this time of day, `holiday` a day today
    broke; kept in the daemon's `[job] timezone`, `timezone`. `apart` starts the job on a topic
    that has run a while: partitions 0 and 1 hold that many records already read (a job before
    it left them there, `Checkpoints.from_partition_offsets`, as `autosizer init --offset` adopts
    them), so their offsets sit that far past 2 and 3. `expand_at` grows the topic to twice its
    partitions that many seconds into the watched run, the producer moving half the keys at once
    (`grow`); the daemon adopts the count at its next tick, the new partitions read behind
    their parents until `adopt_after_s`. `cluster` runs the pipeline
    on a standalone Spark cluster (one worker with `CLUSTER_CORES`, the executors in their own
    JVM) instead of `local[2]`: the engine a deployment runs.
    True when the job kept up with the step."""
    configure_logging(level="warning")
    workdir = Path(tempfile.mkdtemp(prefix="autosizer-demo-"))
    job = "demo-orders"
    metrics_port = free_port()
    print(f"autosizer demo: workdir {workdir}; Ctrl-C stops everything")
    with EmbeddedRedis(workdir / "redis") as redis_server, EmbeddedBroker() as broker, \
            EmbeddedPrometheus([f"127.0.0.1:{metrics_port}"], workdir / "prometheus") as prometheus, \
            contextlib.ExitStack() as spark:
        master = spark_master(spark, workdir, cluster)
        broker.create_topic("orders", PARTITIONS)
        store = MetadataStore(redis_server.url, job)
        layout = Layout(topics={"orders": PARTITIONS}, factor=1)
        start = None
        if apart:
            broker.produce("orders", ((p, b"history-%d" % i, b"{}") for p in APART_PARTITIONS for i in range(apart)))
            start = Checkpoints.from_partition_offsets(
                layout, {("orders", p): apart if p in APART_PARTITIONS else 0 for p in range(PARTITIONS)})
        store.init_layout(layout, start)
        config_path = workdir / "autosizer.toml"
        config = CLOCKS[clocks].format(job=job, redis=redis_server.url, prometheus=prometheus.url,
                                       listen=free_port())
        config = config.replace('name = "autosizer"', f'name = "{policy}"')
        config = config.replace(f'redis_url = "{redis_server.url}"',
                                f'redis_url = "{redis_server.url}"\ntimezone = "{timezone}"', 1)
        if memory_s is not None:
            config = config.replace("[actuator]", f"[policy.settings]\nlull_memory_s = {memory_s:g}\n\n[actuator]")
        config_path.write_text(config)
        app_env = {"ENRICH_LOOKUP_MS": "0" if cpu_ms else "10", "ENRICH_CPU_MS": str(cpu_ms)}
        pipeline = subprocess.Popen(
            [str(Path(sys.executable).parent / "autosizer"), "pipeline", "run",
             "--app", "examples.enrich:enrich", "--job", job, "--redis", redis_server.url,
             "--bootstrap", broker.bootstrap, "--sink", f"file:{workdir / 'enriched'}",
             "--master", master, "--metrics-port", str(metrics_port),  # only the required flags
             *(executor_env(app_env) if cluster else [])],
            cwd=ROOT, env={**os.environ, "PYSPARK_PYTHON": sys.executable, **app_env},
            stdout=(workdir / "pipeline.log").open("w"), stderr=subprocess.STDOUT,
        )
        load = StepLoad(broker, "orders", PARTITIONS, rate=LOW, keys=keys, json_values=True)
        daemon = Daemon(load_config(config_path))
        runner = threading.Thread(target=daemon.run, name="daemon", daemon=True)
        probe = PrometheusCollector(prometheus.url, {k: DEFAULT_QUERIES[k] for k in SHOWN}, window="5s")
        ages = PrometheusCollector(prometheus.url, {"lag_seconds": DEFAULT_QUERIES["lag_seconds"]})
        timeline: list[dict] = []
        began, seeded = time.time(), None
        try:
            print("starting Spark (about 20 s)...")
            if cold:
                _await_query(pipeline, metrics_port, workdir)
            load.start()
            while not cold and store.committed_batch(1) < 1:
                if pipeline.poll() is not None:
                    raise SystemExit(f"the pipeline exited: see {workdir / 'pipeline.log'}")
                time.sleep(0.5)
            # The load ran while Spark started: let the job clear that backlog first, so the
            # watched run (and the step's clock) starts from a job that keeps up.
            settle = time.monotonic() + (0 if cold else 60)
            while time.monotonic() < settle and not _keeps_up(probe, ages):
                time.sleep(0.5)
            step = high if high is not None else cpu_step(cpu_ms) if cpu_ms else HIGH
            load_of = profile or (lambda elapsed: load_at(elapsed, step, shape))
            if history:
                seeded = seed_history(store, time.time(), duration, load_of, days=1 if history == "one" else 3,
                                      holiday=history == "holiday", zone=timezone)
            runner.start()
            began = time.time()
            events = {} if expand_at is None else {expand_at: lambda: grow(broker, load, 2 * PARTITIONS)}
            watch(store, load, probe, duration, timeline, load_of, events)
        except KeyboardInterrupt:
            print("\ninterrupted: stopping")
        finally:
            ended = time.time()
            total = load.finish() if load.is_alive() else load.sent
            daemon.stopping.set()
            if runner.is_alive():
                print("\nstopping the daemon (it finishes a rescale in progress first)...")
                runner.join(300)
            kept_up, verdict = keep_up_verdict(timeline, STEP_AT, phase_s)
            print(f"\n{verdict}")
            decisions = DecisionJournal(store).last(500)
            for judged in _judgements(decisions):
                print(f"judged: {judged}")
            print(f"produced {total} orders; waiting for the pipeline to finish them...")
            _wait_for(workdir / "enriched", total)
            pipeline.terminate()
            pipeline.wait(60)
        check_orders(read_committed(workdir / "enriched"), total)
        if png is not None:
            plot(timeline, png)
        if after is not None:
            after(Finished(prometheus.url, began, ended, config_path, timeline, decisions, seeded,
                               broker.bootstrap))
        print(f"decisions: autosizer decisions --job {job} --redis {redis_server.url} (while running)")
    return kept_up


def _await_query(pipeline: subprocess.Popen, metrics_port: int, workdir: Path, timeout_s: float = 180) -> None:
    """Until the pipeline's query runs: its /metrics shows the cores it was started on."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pipeline.poll() is not None:
            raise SystemExit(f"the pipeline exited: see {workdir / 'pipeline.log'}")
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=1) as response:
            if b"autosizer_pipeline_cores " in response.read():
                return
        time.sleep(0.2)
    raise SystemExit(f"the pipeline's query did not start in {timeout_s:.0f} s: see {workdir / 'pipeline.log'}")


def _keeps_up(probe: PrometheusCollector, ages: PrometheusCollector) -> bool:
    """Few records behind AND no old record left: the record count alone clears first (the last
    of a backlog can be a few records, 10 s old), and a watched run started there begins with a lag
    the simulator's replay of it (which starts from an empty queue) never sees."""
    behind = probe.lag()  # None until Prometheus has the series
    oldest = [v for _, v in ages.collect().series.get("lag_seconds", ())]
    return behind is not None and behind <= 2 * LOW and bool(oldest) and max(oldest) <= MAX_START_AGE_S


@dataclass(frozen=True)
class Finished:
    """A finished demo run, for a caller that reads its series back."""

    prometheus_url: str
    started: float  # epoch seconds when the watched run (and the step's clock) began
    ended: float
    config_path: Path
    timeline: list[dict]
    decisions: list[dict]  # the daemon's journal, oldest first (`DecisionRecord` fields)
    history: dict[int, list[float]] | None = None  # the days `seed_history` wrote, by UTC day number
    bootstrap: str | None = None  # the broker, still up: its topic holds each record's own time
    topic: str = "orders"  # the topic, or the Kinesis stream
    kinesis: str | None = None  # the Kinesis endpoint, still up: its stream holds each record's arrival
    step: tuple[float, float] = (STEP_AT, STEP_S)  # when the high phase began in the watched run, how long


def seed_history(store: MetadataStore, began: float, duration: float, load: Callable[[float], float],
                 days: int = 3, holiday: bool = False, zone: str = "UTC") -> dict[int, list[float]]:
    """Write `days` past days into the job's history in Redis, each LOW all day but for the
    watched run's time of day, which ran `load` (orders/s at each second from `began`): the days
    a daemon that has run the job since finds, so its day plan can size for the load before it
    comes. `holiday`: the days ran the load's peak from an hour before `began` to the run's end,
    and today's hour before `began` went LOW, as the daemon watching it recorded: a day that
    broke the pattern, which the daemon must not believe. Days are `zone`'s (the daemon's `[job]
    timezone`). Returns the rows written, by day number."""
    saved = HistoryStore(store, zone=zone)
    history = InputHistory(keep_days=saved.keep_days, zone=zone)
    today = history.day_of(began)
    peak = max(load(second) for second in range(int(duration)))
    for back in range(1, days + 1):
        midnight = began - history.wall(began) % DAY_S - back * DAY_S  # that day's midnight, near enough
        for slot in range(history.slots):
            history.record(midnight + slot * history.slot_s, LOW)
        for second in range(-3600 if holiday else 0, int(duration)):
            if history.day_of(at := began - back * DAY_S + second) < today:  # a run past midnight: not today's
                history.record(at, peak if holiday else load(second))
    if holiday:
        for second in range(-3600, 0, 15):
            history.record(began + second, LOW)
    for day in history.days:
        saved.save(history, day)
    return {day: row.tolist() for day, row in history.days.items()}


def _judgements(decisions: list[dict]) -> list[str]:
    """The policy's verdicts on its scale-ups, in order, each once (a guard may have held the
    step back for a while: the policy's own reason is kept in the decision's inputs), and the
    first decision the cores' ceiling made. In the policy's own words: a guard's reason holds
    them with its own around (`hold: cooldown ...; wants 1: <verdict>`, `<verdict>; steps back at
    once ...`), the same verdict again (run c6 printed it twice)."""
    found: list[str] = []
    for decision in decisions:
        for reason in (decision.get("inputs", {}).get("policy", {}).get("policy", ""), decision["reason"]):
            if "scale-up" in reason and "before" in reason and not any(f in reason for f in found):
                found.append(reason)
        if "the cores cap" in decision["reason"] and not any("the cores cap" in f for f in found):
            found.append(decision["reason"])  # the first time the cores' ceiling decided
    return found


def _wait_for(sink: Path, total: int, stall_s: float = 30.0) -> None:
    """Until the sink holds every order, as long as it keeps growing (a backlog left by a
    CPU-bound run can take minutes; a stuck pipeline should not)."""
    done, progressed = 0, time.monotonic()
    while done < total and time.monotonic() - progressed < stall_s:
        time.sleep(1)
        now = read_committed(sink).num_rows
        if now > done:
            done, progressed = now, time.monotonic()


def last_decision(journal: DecisionJournal) -> str:
    """The daemon's last decision as one line: its outcome, and the reason unless it says it. A
    rescale under way comes first: the journal gets its decision only when it ends."""
    running = ActuationJournal(journal.store, "").open()
    if running is not None:
        return f"rescaling {running.from_factor} -> {running.to_factor} ({running.step}): {running.reason}"
    last = journal.last(1)
    if not last:
        return "waiting for the first tick"
    outcome, reason = last[0]["outcome"], last[0]["reason"]
    return reason if reason.startswith(outcome) else f"{outcome}: {reason}"


def grow(broker: EmbeddedBroker, load: StepLoad, partitions: int) -> str:
    """Grow the topic and move the producer's keys to the new count at once, as producers that
    refreshed their metadata do (the new partitions are read behind their parents for
    `adopt_after_s`, for the slow ones)."""
    before = load.partitions
    broker.add_partitions(load.topic, partitions)
    load.move_keys(partitions)
    return f"topic {load.topic} grown {before} -> {partitions} partitions; the producer moved its keys"


def run_due(events: dict[float, Callable[[], str]], elapsed: float) -> None:
    """Run (and drop) each event whose second has come, showing what it did."""
    for at in [t for t in events if elapsed >= t]:
        print(f"{elapsed:5.0f}s  {events.pop(at)()}", flush=True)


def watch(store: MetadataStore, load: StepLoad, probe: PrometheusCollector, duration: float,
          timeline: list[dict], profile: Callable[[float], float],
          events: dict[float, Callable[[], str]] | None = None) -> None:
    """Set the load to `profile`'s rate each second, run each of `events` once its second comes;
    read the job from Prometheus and show it with the last decision."""
    journal, began, events = DecisionJournal(store), time.monotonic(), dict(events or {})
    while (elapsed := time.monotonic() - began) < duration:
        load.set_rate(profile(elapsed))
        run_due(events, elapsed)
        sums = {name: sum(v for _, v in probe.collect().series.get(name, ())) for name in SHOWN}
        factor = store.layout().factor
        timeline.append({"t": elapsed, "load": load.rate, "factor": factor,
                         "input": sums["input_rate"], "processed": sums["processed_rate"],
                         "lag": sums["lag_records"]})
        said = last_decision(journal)
        print(f"{elapsed:5.0f}s  load {load.rate:5.0f}/s  in {sums['input_rate']:5.0f}/s  "
              f"out {sums['processed_rate']:5.0f}/s  lag {sums['lag_records']:6.0f}  factor {factor:2d}"
              f"  | {said[:80]}", flush=True)
        time.sleep(max(0.0, 1 - (time.monotonic() - began - elapsed)))


def plot(timeline: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [p["t"] for p in timeline]
    fig, (rates, lag, factor) = plt.subplots(3, 1, sharex=True, figsize=(10, 7))
    rates.plot(t, [p["load"] for p in timeline], label="load (produced/s)", color="gray", ls="--")
    rates.plot(t, [p["input"] for p in timeline], label="input rate (Prometheus, 5 s)")
    rates.plot(t, [p["processed"] for p in timeline], label="processed rate")
    rates.set_ylabel("records/s")
    rates.legend(loc="upper right")
    lag.plot(t, [p["lag"] for p in timeline], color="tab:red")
    lag.set_ylabel("lag (records)")
    factor.step(t, [p["factor"] for p in timeline], where="post", color="tab:green")
    factor.set_ylabel("elasticity factor")
    factor.set_xlabel("seconds")
    fig.suptitle("autosizer demo: the factor follows the load")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"timeline written to {path.resolve()}")


if __name__ == "__main__":
    main()
