"""The `autosizer` command line: the daemon and its overrides, layouts, checkpoints, startpoints,
the pipeline and the simulator.

Every failure is one line on stderr naming the problem and the fix, with exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

import redis

from autosizer.checks import MAX_OFFSET, MAX_SEQUENCE, argtype, whole
from autosizer.controller.config import DEFAULT_REDIS
from autosizer.controller.logging import configure_logging
from autosizer.controller.table import format_table
from autosizer.elasticity import Checkpoints, Layout
from autosizer.elasticity.startpoints import Startpoint, StartpointKey
from autosizer.elasticity.store import MetadataStore, StoreError
from autosizer.elasticity.topology import requested
from autosizer.redaction import clip, redact

MAX_PARTITIONS = 100_000  # per topic, as Kafka allows
MAX_TASKS = 65_536  # virtual tasks in one layout: each is a checkpoint entry and a thread's work


class UsageError(Exception):
    """Bad input on the command line; the message says what to type instead."""


class RuntimeFailure(Exception):
    """Something failed while running (not bad input): exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(level="warning")
    if not hasattr(args, "run"):
        build_parser().print_help()
        return 2
    try:
        args.run(args)
    except RuntimeFailure as exc:
        _fail(str(exc))
        return 1
    except (StoreError, UsageError, ValueError) as exc:
        return _fail(str(exc))
    except KeyError as exc:
        return _fail(str(exc.args[0]) if exc.args else "not found")
    except redis.RedisError as exc:  # none should get here; if one does, one line, no secret
        return _fail(f"Redis: {type(exc).__name__}: {redact(str(exc))[:300]}")
    except OSError as exc:  # a file that could not be written after the checks (a full disk): one line
        return _fail(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
    except KeyboardInterrupt:  # Ctrl-C in a one-shot command (the daemon and the pipeline stop on their own handlers)
        sys.stderr.write("autosizer: interrupted\n")
        return 130  # the shell's code for a command ended by SIGINT
    return 0


def _fail(message: str) -> int:
    sys.stderr.write(f"autosizer: error: {clip(redact(message), 500)}\n")
    return 2


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--redis",
        default=os.environ.get("AUTOSIZER_REDIS_URL", DEFAULT_REDIS),
        help="Redis URL (redis:// or rediss://, password in the URL); env AUTOSIZER_REDIS_URL",
    )
    common.add_argument(
        "--job", default=os.environ.get("AUTOSIZER_JOB"), help="job name; env AUTOSIZER_JOB"
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")

    parser = _Parser(prog="autosizer", description="Autosizing controller for PySpark streaming jobs.")
    groups = parser.add_subparsers(title="commands", parser_class=_Parser)

    layout = groups.add_parser("layout", help="the job's layout").add_subparsers(parser_class=_Parser)
    init = layout.add_parser("init", parents=[common], help="publish a job's first layout")
    init.add_argument("--topic", action="append", required=True, metavar="NAME=PARTITIONS",
                      help="an input topic and its partition count; repeat for more topics")
    init.add_argument("--factor", type=_int("--factor", 1, 1024), default=1,
                      help="elasticity factor (power of two, at most 1024)")
    init.add_argument("--grouper", default="partition", help="partition, topic-partition or fixed")
    init.add_argument("--source", choices=["kafka", "kinesis"], default="kafka",
                      help="kinesis: one --topic, the stream and its shard count (shards re-shard live)")
    init.add_argument("--offset", action="append", default=[], metavar="TOPIC:PARTITION=OFFSET",
                      help="adopt a plain per-partition position of a job that ran without virtual tasks")
    init.set_defaults(run=_layout_init)
    show = layout.add_parser("show", parents=[common], help="the current layout and its virtual tasks")
    show.add_argument("--generation", type=_int("--generation", 1))
    show.set_defaults(run=_layout_show)
    expand = layout.add_parser("expand", parents=[common], help="adopt a topic's multiplied partition "
                               "count now (dry run unless --apply)")
    expand.add_argument("--topic", action="append", required=True, metavar="NAME=PARTITIONS",
                        help="the topic's new partition count, a multiple of the layout's; repeat for more")
    expand.add_argument("--apply", action="store_true",
                        help="ask the daemon to adopt it at its next tick (default: show the plan only)")
    expand.set_defaults(run=_layout_expand)

    checkpoints = groups.add_parser("checkpoints", help="virtual tasks' progress").add_subparsers(parser_class=_Parser)
    cshow = checkpoints.add_parser("show", parents=[common], help="progress per task and partition")
    cshow.add_argument("--generation", type=_int("--generation", 1))
    cshow.set_defaults(run=_checkpoints_show)

    startpoint = groups.add_parser("startpoint", help="operator start positions").add_subparsers(parser_class=_Parser)
    sset = startpoint.add_parser("set", parents=[common], help="request a start position")
    _target(sset, required=True)
    where = sset.add_mutually_exclusive_group(required=True)
    where.add_argument("--offset", type=_int("--offset", 0, MAX_SEQUENCE),
                       help="a Kafka offset, or a Kinesis sequence number")
    where.add_argument("--timestamp", help="epoch milliseconds or ISO 8601 (2026-11-22T10:00:00Z)")
    where.add_argument("--oldest", action="store_true")
    where.add_argument("--upcoming", action="store_true")
    sset.set_defaults(run=_startpoint_set)
    slist = startpoint.add_parser("list", parents=[common], help="pending startpoints")
    slist.set_defaults(run=_startpoint_list)
    sclear = startpoint.add_parser("clear", parents=[common], help="delete startpoints")
    _target(sclear, required=False)
    sclear.add_argument("--all", action="store_true", help="delete every startpoint of the job")
    sclear.set_defaults(run=_startpoint_clear)
    pipeline = groups.add_parser("pipeline", help="the Spark side").add_subparsers(parser_class=_Parser)
    prun = pipeline.add_parser("run", parents=[common], help="run a per-record function, autosized")
    from autosizer.pipeline.cli import add_arguments

    add_arguments(prun)
    prun.set_defaults(run=_pipeline_run)
    simulate = groups.add_parser("simulate", help="replay a workload against policies offline")
    from autosizer.simulator.cli import add_arguments as simulate_arguments
    from autosizer.simulator.cli import run as simulate_run

    simulate_arguments(simulate)
    simulate.set_defaults(run=simulate_run)
    fit = groups.add_parser("fit", help="fit the simulator's job model to a real run in Prometheus, and "
                                        "check it against that run")
    from autosizer.simulator.cli import add_fit_arguments, run_fit

    add_fit_arguments(fit)
    fit.set_defaults(run=run_fit)
    from autosizer.controller.commands import add_commands

    add_commands(groups, common, _Parser)
    return parser


def _pipeline_run(args: argparse.Namespace) -> None:
    from autosizer.pipeline.agent import PipelineFailed
    from autosizer.pipeline.cli import run

    try:
        run(args)
    except PipelineFailed as exc:
        raise RuntimeFailure(f"pipeline failed: {exc}") from None


def _target(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument("--topic", required=required)
    parser.add_argument("--partition", type=_int("--partition", 0, MAX_PARTITIONS - 1), required=required)
    parser.add_argument("--task", help="only this virtual task (default: every task reading the partition)")


def _int(flag: str, low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    return argtype(flag, whole, low, high)


# --- commands ----------------------------------------------------------------------------------


def _store(args: argparse.Namespace) -> MetadataStore:
    if not args.job:
        raise UsageError("no job given: pass --job NAME or set AUTOSIZER_JOB")
    return MetadataStore(args.redis, args.job)


def _topics(specs: list[str]) -> dict[str, int]:
    topics: dict[str, int] = {}
    for spec in specs:
        name, _, count = spec.partition("=")
        if not name or not (count.isascii() and count.isdigit()):
            raise UsageError(f"--topic {spec!r} is not NAME=PARTITIONS, e.g. --topic orders=4")
        if name in topics:
            raise UsageError(f"--topic {name} is given twice: give each topic once")
        topics[name] = whole(count, f"--topic {name} partitions", 1, MAX_PARTITIONS)
    return topics


def _layout_init(args: argparse.Namespace) -> None:
    topics = _topics(args.topic)
    tasks = sum(topics.values()) * args.factor
    if tasks > MAX_TASKS:
        raise UsageError(f"{sum(topics.values())} partitions x factor {args.factor} is {tasks} "
                         f"virtual tasks, above the {MAX_TASKS} autosizer handles: use a smaller "
                         "--factor")
    layout = Layout(topics=topics, factor=args.factor, grouper=args.grouper, source=args.source)
    offsets: dict[tuple[str, int], int] = {}
    for spec in args.offset:
        try:
            where, value = spec.split("=")
            topic, partition = where.rsplit(":", 1)
            key = (topic, whole(partition, f"--offset {spec!r} partition", 0))
            offsets[key] = whole(value, f"--offset {spec!r} offset", 0,
                                 MAX_SEQUENCE if args.source == "kinesis" else MAX_OFFSET)
        except ValueError as exc:
            detail = str(exc) if "--offset" in str(exc) else f"--offset {spec!r} is not TOPIC:PARTITION=OFFSET"
            raise UsageError(f"{detail}, e.g. orders:0=120") from None
    unknown = set(offsets) - set(layout.partitions())
    if unknown:
        topic, partition = sorted(unknown)[0]
        raise UsageError(f"--offset names {topic}[{partition}], which the layout does not have")
    cp = Checkpoints.from_partition_offsets(layout, offsets) if offsets else None
    store = _store(args)
    store.init_layout(layout, cp)
    _print_layout(args, store.layout())


def _layout_expand(args: argparse.Namespace) -> None:
    """SEP-5 on purpose: checked against what the running pipeline sees on the broker; the daemon
    adopts it through its journaled actuator (drain, migrate with barriers, start)."""
    asked = _topics(args.topic)
    store = _store(args)
    layout = store.layout()
    try:
        grown = requested(layout, store.topology(), asked, int(time.time() * 1000))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    new = grown.layout(layout)
    tasks = len(new.virtual_tasks())
    if tasks > MAX_TASKS:
        raise UsageError(f"{tasks} virtual tasks after the expansion, above the {MAX_TASKS} autosizer "
                         "handles: lower the factor first")
    if args.apply:
        store.request_expansion(grown.counts, layout.generation)
    if args.json:
        print(json.dumps({"applied": args.apply, "generation": layout.generation + 1,
                          "topics": dict(new.topics), "tasks": tasks,
                          "barriers": [{"topic": t, "parent": p, "offset": o}
                                       for (t, p), o in sorted(grown.barriers.items())]}))
        return
    print(f"{'asked the daemon to adopt' if args.apply else 'dry run (add --apply to adopt)'}: "
          f"{grown.describe()}, generation {layout.generation} -> {layout.generation + 1}, "
          f"{len(layout.virtual_tasks())} -> {tasks} virtual tasks (grouper {layout.grouper})")
    for line in grown.barrier_lines():
        print(f"  {line}")


def _layout_show(args: argparse.Namespace) -> None:
    _print_layout(args, _store(args).layout(args.generation))


def _print_layout(args: argparse.Namespace, layout: Layout) -> None:
    if args.json:
        print(layout.to_json())
        return
    topics = ", ".join(f"{t}={n}" for t, n in sorted(layout.topics.items()))
    print(f"job {args.job}  generation {layout.generation}  factor {layout.factor}  "
          f"grouper {layout.grouper}  topics {topics}  tasks {len(layout.virtual_tasks())}")
    rows = [
        {"task": t.name, "bucket": t.bucket,
         "partitions": " ".join(f"{tp}[{p}]" for tp, p in sorted(t.partitions))}
        for t in layout.virtual_tasks()
    ]
    print(format_table(rows, ["task", "bucket", "partitions"]))


def _checkpoints_show(args: argparse.Namespace) -> None:
    cp = _store(args).checkpoints(args.generation)
    if args.json:
        print(cp.to_json())
        return
    starts = cp.start_offsets()
    blocked, limits = cp.blocked_partitions(), cp.read_limits()

    def held(tp: tuple[str, int]) -> str:  # a coupled child read in part: up to its parent's leave
        return "yes" if tp in blocked else (f"below {limits[tp]} (behind its parent)" if tp in limits else "")

    print(f"job {args.job}  generation {cp.layout.generation}  factor {cp.layout.factor}")
    print(format_table(
        [{"partition": f"{t}[{p}]", "start": s, "blocked": held((t, p))} for (t, p), s in sorted(starts.items())],
        ["partition", "start", "blocked"],
    ))
    print()
    rows: list[dict[str, Any]] = []
    for task in cp.layout.virtual_tasks():
        for (topic, partition), progress in sorted(cp.progress(task.name).items()):
            marks = progress.to_dict().get("marks")
            rows.append({
                "task": task.name, "partition": f"{topic}[{partition}]", "next": progress.next,
                "marks": None if not marks else f"mod {progress.modulus}: {json.dumps(marks)}",
            })
    print(format_table(rows, ["task", "partition", "next", "marks"]))


def _startpoint_set(args: argparse.Namespace) -> None:
    if args.offset is not None:
        sp = Startpoint.specific(args.offset)
    elif args.timestamp is not None:
        sp = Startpoint.timestamp(parse_timestamp(args.timestamp))
    elif args.oldest:
        sp = Startpoint.oldest()
    else:
        sp = Startpoint.upcoming()
    key = StartpointKey(args.topic, args.partition, args.task)
    store = _store(args)
    if args.offset is not None and args.offset > MAX_OFFSET and store.layout().source == "kafka":
        raise UsageError(f"--offset {args.offset} is past a Kafka offset's range (2^63 - 1): "
                         "sequence numbers are for a Kinesis job")
    store.set_startpoint(key, sp)
    _print_startpoints(args, {key: sp})


def _startpoint_list(args: argparse.Namespace) -> None:
    _print_startpoints(args, _store(args).startpoints())


def _startpoint_clear(args: argparse.Namespace) -> None:
    store = _store(args)
    if args.all:
        count = store.clear_startpoints()
    elif args.topic is None or args.partition is None:
        raise UsageError("say which startpoint: --topic T --partition P [--task NAME], or --all")
    else:
        count = store.clear_startpoints([StartpointKey(args.topic, args.partition, args.task)])
    print(json.dumps({"cleared": count}) if args.json else f"cleared {count} startpoint(s)")


def _print_startpoints(args: argparse.Namespace, startpoints: dict[StartpointKey, Startpoint]) -> None:
    rows = [
        {"topic": k.topic, "partition": k.partition, "task": k.task or "(all tasks)",
         "position": sp.describe(), "resolved": sp.resolved_offset,
         "created": datetime.fromtimestamp(sp.created_ms / 1000).astimezone().isoformat(timespec="seconds")}
        for k, sp in sorted(startpoints.items())
    ]
    if args.json:
        print(json.dumps(rows))
    else:
        print(format_table(rows, ["topic", "partition", "task", "position", "resolved", "created"]))


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """Epoch milliseconds from digits or an ISO 8601 time with a zone, not in the future (a
    startpoint there would silently mean "upcoming")."""
    if text.isascii() and text.isdigit():
        value = int(text)
    else:
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"malformed timestamp {text[:40]!r}: give epoch milliseconds or ISO "
                             "8601 like 2026-11-22T10:00:00Z") from None
        if moment.tzinfo is None:
            raise UsageError(f"timestamp {text!r} has no time zone: add Z or +HH:MM")
        value = int(moment.timestamp() * 1000)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    if value > now_ms + 86_400_000:
        raise UsageError(f"timestamp {text[:40]!r} is more than a day in the future: give a past "
                         "time, or use --upcoming")
    return value


if __name__ == "__main__":
    raise SystemExit(main())
