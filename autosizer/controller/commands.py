"""The daemon's commands: `run`, `status`, `decisions`, `override set|clear|list` and
`history show|backfill`.

`status`, `decisions`, `override` and `history` take the job and Redis from --job/--redis, from the
environment, or from the daemon's --config file, so an operator can point them at the same file
the daemon runs with.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from autosizer.actuators.journal import ActuationJournal, last_rescale
from autosizer.checks import argtype, duration, whole
from autosizer.controller.backoff import Backoff, BackoffStore
from autosizer.controller.config import DEFAULT_REDIS, ConfigError, PrometheusSection, load_config
from autosizer.controller.history import HistoryStore
from autosizer.controller.journal import DecisionJournal
from autosizer.controller.lease import LeaderLease
from autosizer.controller.overrides import NAMES, Overrides, OverrideStore
from autosizer.controller.table import format_table
from autosizer.elasticity.layout import Layout
from autosizer.elasticity.store import KeyProblem, MetadataStore, NoLayout
from autosizer.elasticity.topology import Topology
from autosizer.elasticity.topology import problems as topology_problems
from autosizer.pipeline.control import NOT_RUNNING, SILENT_S, ControlChannel, silence
from autosizer.policies.history import DAY_S, InputHistory

BACKFILL_DAYS = 14  # the history keeps 15 days, today's included


def add_commands(groups: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    run = groups.add_parser("run", help="run the controller daemon")
    run.add_argument("--config", default=os.environ.get("AUTOSIZER_CONFIG"),
                     help="TOML config file (see the README); env AUTOSIZER_CONFIG")
    run.add_argument("--json-logs", action="store_true", help="structlog JSON lines on stderr")
    run.set_defaults(run=run_daemon)

    config = argparse.ArgumentParser(add_help=False)
    config.add_argument("--config", default=os.environ.get("AUTOSIZER_CONFIG"),
                        help="read the job and Redis URL from the daemon's config file")
    status = groups.add_parser("status", parents=[common, config], help="layout, lag, overrides, leader")
    status.set_defaults(run=show_status)
    decisions = groups.add_parser("decisions", parents=[common, config], help="the last decisions")
    decisions.add_argument("-n", "--count", type=argtype("-n", whole, 1, 100_000), default=20,
                           help="how many (default 20, at most 100000)")
    decisions.set_defaults(run=show_decisions)

    override = groups.add_parser("override", help="steer or freeze the daemon").add_subparsers(
        parser_class=parser_class)
    oset = override.add_parser("set", parents=[common, config], help="set an override key")
    oset.add_argument("name", choices=NAMES)
    oset.add_argument("value", help="a power of two for factor/min_factor/max_factor; true/false")
    oset.add_argument("--ttl", help="expire after this long: 90s, 30m, 2h, 1d (default: never)")
    oset.set_defaults(run=override_set)
    oclear = override.add_parser("clear", parents=[common, config], help="delete override keys")
    oclear.add_argument("name", nargs="?", choices=NAMES, help="one override (default: all)")
    oclear.set_defaults(run=override_clear)
    olist = override.add_parser("list", parents=[common, config], help="the overrides in force")
    olist.set_defaults(run=override_list)

    history = groups.add_parser("history", help="the input's recent days, which the day plan reads").add_subparsers(
        parser_class=parser_class)
    hshow = history.add_parser("show", parents=[common, config], help="the days on record and what they expect")
    hshow.set_defaults(run=history_show)
    hfill = history.add_parser("backfill", parents=[common, config],
                               help="fill the past days from the input Prometheus recorded")
    hfill.add_argument("--days", type=argtype("--days", whole, 1, BACKFILL_DAYS), default=BACKFILL_DAYS,
                       help=f"how many days back (default and most {BACKFILL_DAYS}: the days the history keeps)")
    hfill.add_argument("--prometheus", help="Prometheus URL (default: [prometheus] url of --config)")
    hfill.set_defaults(run=history_backfill)


def parse_duration(text: str) -> float:
    """Seconds from 90s, 30m, 2h or 1d: at least a second (a shorter TTL is gone before the
    daemon's next tick reads it) and at most a year."""
    seconds = duration(text, "--ttl")
    if not 1 <= seconds <= 365 * 86400:
        raise ValueError(f"--ttl {text[:40]!r} must be between 1s and 365d")
    return seconds


# --- run -----------------------------------------------------------------------------------------


def run_daemon(args: argparse.Namespace) -> None:
    from autosizer.controller.daemon import Daemon
    from autosizer.controller.logging import configure_logging

    config = load_config(args.config)
    configure_logging(level=config.daemon.log_level, json=args.json_logs)
    Daemon(config).run()


# --- job from flags or config ------------------------------------------------------------------


def _store(args: argparse.Namespace) -> MetadataStore:
    job, url = args.job, args.redis
    if args.config:
        config = load_config(args.config)
        job = job or config.job.name
        if "AUTOSIZER_REDIS_URL" not in os.environ and args.redis == DEFAULT_REDIS:
            url = config.job.redis_url
    if not job:
        raise ConfigError("no job given: pass --job NAME, set AUTOSIZER_JOB or pass --config")
    return MetadataStore(url, job)


# --- override ----------------------------------------------------------------------------------


def override_set(args: argparse.Namespace) -> None:
    ttl = None if args.ttl is None else parse_duration(args.ttl)
    OverrideStore(_store(args)).set(args.name, args.value, ttl)
    override_list(args)


def override_clear(args: argparse.Namespace) -> None:
    count = OverrideStore(_store(args)).clear(args.name)
    print(json.dumps({"cleared": count}) if args.json else f"cleared {count} override(s)")


def override_list(args: argparse.Namespace) -> None:
    found = OverrideStore(_store(args)).read()
    rows = [{"override": name, "value": value, "expires in": _ttl(ttl)}
            for name, (value, ttl) in sorted(found.raw.items())]
    if args.json:
        print(json.dumps({"overrides": rows, "errors": list(found.errors)}))
        return
    print(format_table(rows, ["override", "value", "expires in"]) if rows else "no overrides")
    for error in found.errors:
        print(f"error: {error}")


def _ttl(ms: int | None) -> str:
    if ms is None:
        return "never"
    seconds = ms / 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


# --- history -----------------------------------------------------------------------------------


def history_show(args: argparse.Namespace) -> None:
    """Each day on record, and what the days expect of the next hour (what the day plan reads)."""
    history, now = HistoryStore(_store(args)).load(strict=True), time.time()
    rows = [_day_row(day, row, history.slot_s) for day, row in sorted(history.days.items())]
    expected, doubt = history.expected_peak(now, 3600.0), history.doubt(now, 3600.0)
    if args.json:
        print(json.dumps({"zone": history.zone, "days": rows, "next_hour_peak": expected, "doubt": doubt}))
        return
    print(f"days and times in {history.zone} (the daemon's [job] timezone)")
    print(format_table(rows, ["day", "slots seen", "peak/s", "peak at", "lowest/s"]) if rows
          else "no days on record: the daemon records them as it ticks (or `autosizer history backfill`)")
    print(f"next hour: recent days expect up to {expected:.0f}/s" if expected is not None else
          f"next hour: the history cannot say ({doubt}): the policy reacts")


def _day_row(day: int, row: np.ndarray, slot_s: int) -> dict[str, Any]:
    """A day's line: its slots seen, its peak and when, its lowest (blank for a day with none)."""
    shown: dict[str, Any] = {"day": datetime.fromtimestamp(day * DAY_S, UTC).date().isoformat(),
                             "slots seen": f"{int((~np.isnan(row)).sum())}/{row.size}"}
    if np.isnan(row).all():
        return shown
    top = int(np.nanargmax(row)) * slot_s
    return {**shown, "peak/s": round(float(np.nanmax(row)), 1), "peak at": f"{top // 3600:02d}:{top % 3600 // 60:02d}",
            "lowest/s": round(float(np.nanmin(row)), 1)}


def history_backfill(args: argparse.Namespace) -> None:
    """The past days from the input rate Prometheus recorded, read with the daemon's own query,
    selector and window, every tick's interval."""
    prometheus, interval_s, zone = PrometheusSection(), 15.0, None
    if args.config:
        config = load_config(args.config)
        prometheus, interval_s, zone = config.prometheus, config.daemon.interval_s, config.job.timezone
    url = args.prometheus or (prometheus.url if args.config else None)
    if not url:
        raise ConfigError("no Prometheus given: pass --prometheus URL or the daemon's --config")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--prometheus {url[:80]!r} must start with http:// or https://")
    # the daemon's own reader of its input, with a backfill's patience for days of points
    # (imported here: its HTTP client is a fifth of every other command's start-up)
    from autosizer.controller.collector import PrometheusCollector

    collector = PrometheusCollector(url, prometheus.queries, prometheus.selector, prometheus.window, timeout_s=30.0)
    store, now = _store(args), time.time()
    history = HistoryStore(store, zone=zone)  # the daemon's zone (its days dropped if kept in another)
    wall = history.load(strict=True).wall(now)
    start = now - wall % DAY_S - args.days * DAY_S  # that many of the job's midnights back
    raised = history.backfill(collector.input_since(start, now, interval_s), now)
    days = {datetime.fromtimestamp(d * DAY_S, UTC).date().isoformat(): n for d, n in sorted(raised.items())}
    if args.json:
        print(json.dumps({"days": days}))
        return
    if not days:
        print(f"nothing to add: Prometheus had no input for job {store.job!r} over the last {args.days} "
              f"day(s) that the history lacks (query sum({collector.queries['input_rate']}))")
        return
    print("\n".join(f"{day}  {n} slot(s) raised" for day, n in days.items()))
    print("a running daemon reads them within 5 minutes (at its next history slot)")


# --- status and decisions ----------------------------------------------------------------------


def show_status(args: argparse.Namespace) -> None:
    """Each part read on its own: a key nobody can read spoils its line (named, with the fix),
    not the whole status. Redis unreachable fails the command."""
    store = _store(args)
    status: dict[str, Any] = {"job": store.job}
    problems: list[str] = []

    def part(name: str, read: Callable[[], Any], fallback: Any = None) -> None:
        try:
            status[name] = read()
        except KeyProblem as exc:
            status[name] = fallback
            problems.append(str(exc))

    layout = None
    try:
        layout = store.layout()
        status["layout"] = _layout_status(layout)
    except NoLayout as exc:
        status["layout"] = {"error": str(exc)}
    except KeyProblem as exc:
        status["layout"] = {"error": "unreadable (see problem)"}
        problems.append(str(exc))
    part("pipeline", lambda: ControlChannel(store).status() or {"state": "never reported"},
         {"state": "unreadable"})
    overrides = Overrides()
    try:
        overrides = OverrideStore(store).read()
    except KeyProblem as exc:
        problems.append(str(exc))
    status["overrides"] = {n: {"value": v, "expires_in": _ttl(t)} for n, (v, t) in overrides.raw.items()}
    status["override_errors"] = list(overrides.errors)
    part("leader", lambda: dict(zip(("holder", "expires_in_ms"), LeaderLease(store, 1).current_holder(),
                                    strict=True)), {"holder": None, "expires_in_ms": 0})
    journal = ActuationJournal(store, "")
    part("actuation", lambda: _entry_json(journal.open()))
    part("last_actuation", lambda: _entry_json(next(iter(journal.history(1)), None)))
    part("last_rescale", lambda: _rescale_status(last_rescale(store)))
    part("backoff", lambda: _backoff_status(BackoffStore(store).read()))
    part("last_decision", lambda: next(iter(DecisionJournal(store).last(1)), None))
    part("topology", lambda: _topology_status(store.topology(), layout, problems))
    part("history", lambda: _history_status(HistoryStore(store).load()))
    status["problems"] = problems
    if args.json:
        print(json.dumps(status, default=str))
        return
    print(_render_status(status))


def _layout_status(layout: Any) -> dict[str, Any]:
    return {"generation": layout.generation, "factor": layout.factor, "topics": layout.topics,
            "tasks": len(layout.virtual_tasks())}


def _topology_status(topology: Topology | None, layout: Layout | None, problems: list[str]) -> Any:
    """The broker's counts while they differ from the layout; a count it cannot adopt is a problem."""
    if topology is None:
        return None
    if layout is not None:
        problems += topology_problems(layout, topology)
    return {"broker": dict(topology.counts), "reported": _when(topology.at_ms / 1000)}


def _history_status(history: InputHistory) -> dict[str, Any]:
    """How many days the day plan has, and what they expect of the next hour (None: it reacts,
    for the reason `doubt` gives)."""
    now = time.time()
    return {"days": len(history.days), "next_hour_peak": history.expected_peak(now, 3600.0),
            "doubt": history.doubt(now, 3600.0)}


def _entry_json(entry: Any) -> Any:
    return None if entry is None else json.loads(entry.to_json())


def _rescale_status(rescaled: Any) -> Any:
    return None if rescaled is None else {"at": _when(rescaled.at_ms / 1000),
                                          "downtime_s": rescaled.downtime_s}


def _backoff_status(backoff: Backoff) -> Any:
    if not backoff.active(time.time()):
        return None
    return {"failures": backoff.failures, "until": _when(backoff.until), "last": backoff.last}


def _render_status(s: dict[str, Any]) -> str:
    lines = [f"job        {s['job']}"]
    lines += [f"problem    {p}" for p in s["problems"]]
    lay = s["layout"]
    lines.append("layout     " + (lay["error"] if "error" in lay else
                                  f"generation {lay['generation']}  factor {lay['factor']}  "
                                  f"tasks {lay['tasks']}  topics "
                                  + ", ".join(f"{t}={n}" for t, n in sorted(lay["topics"].items()))))
    if s.get("topology"):
        lines.append("broker     " + ", ".join(f"{t}={n}" for t, n in sorted(s["topology"]["broker"].items()))
                     + f"  (differs from the layout; reported {s['topology']['reported']})")
    p = s["pipeline"]
    silent = silence(p, time.time())
    age = "" if silent is None else f"  (heartbeat {silent:.0f}s ago)" + (
        f": not running ({NOT_RUNNING})" if silent > SILENT_S and p.get("state") != "failed" else "")
    lines.append(f"pipeline   {p.get('state')}{age}" + (f"  error: {p['error']}" if p.get("error") else ""))
    d = s["last_decision"]
    if d:
        i = d.get("inputs", {})
        if "lag_records" in i:
            lines.append(f"lag        {i['lag_records']:.0f} records, {i['lag_seconds']:.1f}s oldest")
            lines.append(f"rates      input {i['input_rate']:.1f}/s  processed {i['processed_rate']:.1f}/s"
                         f"  per task {i.get('task_capacity') or '-'}/s")
        elif i.get("problems"):
            lines.append(f"metrics    {'; '.join(i['problems'])}")
    leader = s["leader"]
    lines.append("leader     " + (f"{leader['holder']} (lease {leader['expires_in_ms'] / 1000:.0f}s left)"
                                  if leader["holder"] else "none (no daemon running)"))
    o = s["overrides"]
    lines.append("overrides  " + (", ".join(f"{n}={v['value']} ({v['expires_in']})" for n, v in sorted(o.items()))
                                  if o else "none"))
    for error in s["override_errors"]:
        lines.append(f"  error: {error}")
    h = s.get("history")
    if h is not None:
        lines.append("history    " + ("none on record: the policy reacts (`autosizer history backfill` fills "
                                      "past days from Prometheus)" if not h["days"] else
                                      f"{h['days']} day(s) on record; "
                                      + (f"the next hour: up to {h['next_hour_peak']:.0f}/s"
                                         if h["next_hour_peak"] is not None else
                                         f"they cannot say of the next hour ({h['doubt']}): the policy reacts")))
    if s["actuation"]:
        lines.append(f"actuation  {_actuation(s['actuation'])}")
    if s["backoff"]:
        b = s["backoff"]
        lines.append(f"backoff    until {b['until']} after {b['failures']} failed actuation(s): "
                     f"{b['last']}")
    if s["last_rescale"]:
        # the journal's drain to first commit; the policy reads the pipeline's own restart gauge
        # where there is one, and the last decision says which it read
        read = ((d or {}).get("inputs") or {}).get("restart_s")
        lines.append(f"rescaled   {s['last_rescale']['at']} (drain to first commit "
                     f"{s['last_rescale']['downtime_s']:.1f}s"
                     + (f"; the policy reads a restart of {read:.2f}s" if read is not None else "") + ")")
    if d:
        lines.append(f"decision   {_when(d['time'])}  {d['outcome']}  {d['factor']} -> {d['target']}: {d['reason']}")
    else:
        lines.append("decision   none yet")
    return "\n".join(lines)


def _actuation(a: dict[str, Any]) -> str:
    """An open actuation in one line, with its decision's reason: the decision is journaled once
    the actuation ends (with its outcome), and until then a long restart would read as the hold
    of the tick before it."""
    return (f"{a['from_factor']} -> {a['to_factor']} at step {a['step']}"
            + ("  (rollback)" if a["rollback"] else "")
            + f", begun {max(0.0, time.time() - a['started_ms'] / 1000):.0f}s ago: {a['reason']}")


def show_decisions(args: argparse.Namespace) -> None:
    store = _store(args)
    records = DecisionJournal(store).last(args.count)
    if args.json:
        print(json.dumps(records))
        return
    rows = [{"time": _when(r["time"]), "outcome": r["outcome"], "factor": r["factor"],
             "target": r["target"], "lag": r.get("inputs", {}).get("lag_records", "-"),
             "input/s": r.get("inputs", {}).get("input_rate", "-"), "reason": r["reason"]}
            for r in records]
    print(format_table(rows, ["time", "outcome", "factor", "target", "lag", "input/s", "reason"])
          if rows else "no decisions yet")
    try:
        running = ActuationJournal(store, "").open()
    except KeyProblem as exc:  # the journal above is read: name the key, no traceback
        print(f"problem: {exc}")
        return
    if running is not None:
        print(f"rescaling now: {_actuation(_entry_json(running))} (journaled when it ends)")


def _when(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s).astimezone().isoformat(timespec="seconds")
