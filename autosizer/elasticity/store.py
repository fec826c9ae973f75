"""The Redis-backed metadata store: layouts, checkpoints and startpoints of one job.

The only module of `elasticity` that does I/O. The pipeline, the actuators and the controller all
go through it, so fencing and atomicity live in one place:

- a commit is one Lua script: refused whole when its generation is not current, else every task's
  progress is written and the startpoints it passed are deleted, together;
- a migration is one MULTI/EXEC watched on the current pointer and the old checkpoints: readers see
  the old generation or the new one, never half of it.

Key names and types come from `keys.JobKeys`, the one place they are made. A key holding the
wrong type, or content that does not parse, is a `KeyProblem` naming the key and the fix, never a
raw WRONGTYPE or JSON error.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, TypeVar
from urllib.parse import urlsplit

import redis
import structlog

from autosizer.elasticity.checkpoints import (
    Checkpoints,
    TaskProgress,
    encode_task_progress,
)
from autosizer.elasticity.coupling import Coupling, couplings_from_json, couplings_to_json
from autosizer.elasticity.keys import COMMIT, JobKeys, unreadable_fix, wrong_type_fix
from autosizer.elasticity.layout import Layout, TopicPartition
from autosizer.elasticity.startpoints import (
    DEFAULT_EXPIRY_MS,
    FanOut,
    Startpoint,
    StartpointKey,
    fan_out,
)
from autosizer.elasticity.topology import Topology
from autosizer.redaction import redact

log = structlog.get_logger(__name__)
T = TypeVar("T")
KEEP_GENERATIONS = 5



class StoreError(Exception):
    """Base of the store's errors; each message names the problem and the fix."""


class StoreUnavailable(StoreError):
    """Redis cannot be reached (retryable) or refused the credentials (not retryable)."""

    def __init__(self, message: str, retryable: bool = True):
        self.retryable = retryable
        super().__init__(message)


class KeyProblem(StoreError):
    """A job key holds the wrong type or unreadable content; the message names it and the fix."""


class NoLayout(StoreError):
    pass


class LayoutExists(StoreError):
    pass


class StaleGeneration(StoreError):
    """A commit or migration for a generation that is no longer current (fencing)."""

    def __init__(self, generation: int, current: int | None, what: str = "commit"):
        self.generation, self.current = generation, current
        super().__init__(
            f"{what} for layout generation {generation} refused: the current generation is "
            f"{current}; the writer runs an old layout and must restart under the current one"
        )


class MetadataStore:
    """Layouts, checkpoints and startpoints of one job, in Redis.

    `outage_s` > 0 makes every call ride through a Redis outage that long: a call that cannot
    reach Redis is retried with capped exponential backoff, then fails naming the limit. Every
    write the pipeline repeats this way is idempotent (a commit rewrites the same progress under
    the same generation and batch number). The daemon keeps it at 0: a tick that cannot reach
    Redis holds, and the next tick tries again.
    """

    def __init__(self, url: str, job: str, *, keep_generations: int = KEEP_GENERATIONS,
                 outage_s: float = 0.0, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic):
        if not job or any(c in job for c in "{}: \t\n"):
            raise ValueError(f"invalid job name {job!r}: use letters, digits, '-', '_' or '.'")
        self.url, self.job = url, job
        self.keep_generations = keep_generations
        self.outage_s = outage_s
        self._sleep, self._monotonic = sleep, monotonic
        self._outage_began: float | None = None
        self.keys = JobKeys(job)
        check_redis_url(url)
        try:
            self.redis = redis.Redis.from_url(
                url, socket_connect_timeout=3, socket_timeout=10, health_check_interval=30
            )
        except ValueError:  # its message may quote part of the password
            raise StoreUnavailable(_BAD_URL.format(redact(url)), retryable=False) from None
        self._commit = self.redis.register_script(COMMIT)

    # --- keys ----------------------------------------------------------------------------------

    def parse(self, key: str, raw: Any, parse: Callable[[Any], T]) -> T:
        """`parse(raw)`, or a KeyProblem naming `key` when its content does not parse."""
        try:
            return parse(raw)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            problem = f"{type(exc).__name__}: {str(exc)[:120]}"
            raise KeyProblem(unreadable_fix(key, problem)) from None

    def wrong_types(self) -> list[str]:
        """One line per job key whose Redis type is not the one it should have."""
        expected = self.keys.expected(None)
        found = self._types(expected)
        generation = None
        if found.get(self.keys.current) == "string":
            with suppress(ValueError):  # unreadable: its own KeyProblem says so
                generation = _generation(self.redis.get(self.keys.current) or b"")
        if generation is not None:
            more = {k: s for k, s in self.keys.expected(generation).items() if k not in expected}
            found.update(self._types(more))
            expected = {**expected, **more}
        return [wrong_type_fix(key, kind, expected[key]) for key, kind in found.items()
                if kind not in ("none", expected[key].type)]

    def _types(self, keys: Iterable[str]) -> dict[str, str]:
        keys = list(keys)
        pipe = self.redis.pipeline(transaction=False)
        for key in keys:
            pipe.type(key)
        return {k: t.decode() if isinstance(t, bytes) else t
                for k, t in zip(keys, pipe.execute(), strict=True)}

    # --- layouts -------------------------------------------------------------------------------

    def ping(self) -> None:
        self.call(self.redis.ping)

    def current_generation(self) -> int | None:
        raw = self.call(lambda: self.redis.get(self.keys.current))
        return None if raw is None else self.parse(self.keys.current, raw, _generation)

    def layout(self, generation: int | None = None) -> Layout:
        """The layout of `generation`, or the current one."""
        gen = self.current_generation() if generation is None else generation
        raw = None if gen is None else self.call(lambda: self.redis.get(self.keys.layout(gen)))
        if raw is None:
            which = "current layout" if generation is None else f"layout generation {generation}"
            raise NoLayout(
                f"job {self.job!r} has no {which} in Redis at {redact(self.url)}: "
                "create one with `autosizer layout init`"
            )
        return self.parse(self.keys.layout(gen), raw, Layout.from_json)

    def init_layout(self, layout: Layout, checkpoints: Checkpoints | None = None) -> None:
        """Publish the first layout (and optionally adopted checkpoints); refuses to overwrite."""
        cp = checkpoints or Checkpoints.initial(layout)
        if cp.layout.generation != layout.generation:
            raise ValueError("checkpoints must belong to the layout being initialised")

        def txn(pipe: redis.client.Pipeline) -> None:
            current = pipe.get(self.keys.current)
            if current is not None:
                raise LayoutExists(
                    f"job {self.job!r} already has layout generation {int(current)}: change it "
                    "through a migration, or delete the job's keys to start over"
                )
            pipe.multi()
            self._write_generation(pipe, cp)
            pipe.set(self.keys.current, layout.generation)

        self.call(lambda: self.redis.transaction(txn, self.keys.current))
        log.info("layout.initialised", job=self.job, generation=layout.generation,
                 factor=layout.factor, tasks=len(layout.virtual_tasks()))

    # --- checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, generation: int | None = None) -> Checkpoints:
        """All tasks' progress for `generation` (default: current), with its layout (and the
        coupled expansion children's steps, which say how far each may be read)."""
        layout = self.layout(generation)
        key = self.keys.checkpoints(layout.generation)
        raw = self.call(lambda: self.redis.hgetall(key))
        cp = self.parse(key, raw, lambda r: Checkpoints.from_task_json(
            layout, {name.decode(): value for name, value in r.items()}))
        if any(b.coupled for b in layout.barriers):
            cp.couple(self.couplings())
        return cp

    def commit(
        self, generation: int, progress: Mapping[str, TaskProgress], batch: int | None = None
    ) -> None:
        """Write tasks' progress atomically, fenced by generation; drop startpoints it passed.

        `batch` numbers the pipeline's committed micro-batches per generation, so an exactly-once
        sink can tell a committed batch from a retried one. Raises StaleGeneration, with nothing
        written, when `generation` is not current.
        """
        args: list[Any] = [generation, "" if batch is None else batch, len(progress)]
        for task, entries in progress.items():
            args += [task, encode_task_progress(entries)]
        args += self._passed_startpoints(progress)
        keys = [self.keys.current, self.keys.checkpoints(generation), self.keys.startpoints,
                self.keys.batch(generation)]
        try:
            self.call(lambda: self._commit(keys=keys, args=args))
        except redis.ResponseError as exc:
            if not str(exc).startswith("STALE"):
                raise
            current = str(exc).split(" ", 1)[1]
            stale = StaleGeneration(generation, int(current) if current.isdigit() else None)
            log.error("commit.refused", job=self.job, generation=generation, current=stale.current)
            raise stale from None

    def committed_batch(self, generation: int) -> int:
        """The number of the last micro-batch committed under `generation` (0: none yet)."""
        key = self.keys.batch(generation)
        raw = self.call(lambda: self.redis.get(key))
        return 0 if raw is None else self.parse(key, raw, _generation)

    def migrate(self, old_generation: int, new_layout: Layout) -> Checkpoints:
        """Move every checkpoint to `new_layout` and make it current, in one transaction.

        Pinned startpoints of the old tasks are folded into the old checkpoints first, so their
        effect survives the task names changing.
        """
        old_cp_key = self.keys.checkpoints(old_generation)
        result: list[Checkpoints] = []

        def txn(pipe: redis.client.Pipeline) -> None:
            current = pipe.get(self.keys.current)
            if current is None or int(current) != old_generation:
                raise StaleGeneration(
                    old_generation, None if current is None else int(current), "migration"
                )
            old_layout = Layout.from_json(pipe.get(self.keys.layout(old_generation)))
            raw = pipe.hgetall(old_cp_key)
            old = Checkpoints.from_task_json(old_layout, {k.decode(): v for k, v in raw.items()})
            folded = self._fold_startpoints(pipe, old)
            new = old.migrate(new_layout)
            pipe.multi()
            for field in folded:
                pipe.hdel(self.keys.startpoints, field)
            self._write_generation(pipe, new)
            pipe.set(self.keys.current, new_layout.generation)
            # Generations move up one at a time, so dropping one per migration keeps the last few.
            stale = new_layout.generation - self.keep_generations
            pipe.delete(
                self.keys.layout(stale), self.keys.checkpoints(stale), self.keys.batch(stale)
            )
            result[:] = [new]

        self.call(
            lambda: self.redis.transaction(
                txn, self.keys.current, old_cp_key, self.keys.startpoints
            )
        )
        log.info("layout.migrated", job=self.job, old=old_generation,
                 new=new_layout.generation, factor=new_layout.factor)
        return result[0]

    # --- startpoints ---------------------------------------------------------------------------

    def set_startpoint(self, key: StartpointKey, startpoint: Startpoint) -> None:
        layout = self.layout()
        if (key.topic, key.partition) not in set(layout.partitions()):
            raise ValueError(
                f"unknown partition {key.topic}[{key.partition}]: the layout has "
                f"{', '.join(f'{t}[0..{n - 1}]' for t, n in sorted(layout.topics.items()))}"
            )
        if key.task is not None:
            task = layout.task(key.task)
            if (key.topic, key.partition) not in task.partitions:
                raise ValueError(
                    f"virtual task {key.task!r} does not read {key.topic}[{key.partition}]: "
                    "pick a task from `autosizer layout show`"
                )
        self.call(lambda: self.redis.hset(self.keys.startpoints, key.encode(), startpoint.to_json()))

    def startpoints(self) -> dict[StartpointKey, Startpoint]:
        raw = self.call(lambda: self.redis.hgetall(self.keys.startpoints))
        return self.parse(self.keys.startpoints, raw, lambda r: {
            StartpointKey.decode(k): Startpoint.from_json(v) for k, v in r.items()})

    # --- topology (SEP-5) ------------------------------------------------------------------------

    def report_topology(self, topology: Topology | None) -> None:
        """The pipeline's view of the broker while a count differs from the layout; None clears it."""
        if topology is None:
            self.call(lambda: self.redis.delete(self.keys.topology))
        else:
            self.call(lambda: self.redis.set(self.keys.topology, topology.to_json()))

    def topology(self) -> Topology | None:
        raw = self.call(lambda: self.redis.get(self.keys.topology))
        return None if raw is None else self.parse(self.keys.topology, raw, Topology.from_json)

    def write_couplings(self, couplings: Mapping[TopicPartition, Coupling]) -> None:
        """The coupled expansion children's steps (`coupling`), as the pipeline's probe took them."""
        self.call(lambda: self.redis.set(self.keys.coupling, couplings_to_json(couplings)))

    def couplings(self) -> dict[TopicPartition, Coupling]:
        raw = self.call(lambda: self.redis.get(self.keys.coupling))
        return {} if raw is None else self.parse(self.keys.coupling, raw, couplings_from_json)

    # --- the sink's marks -------------------------------------------------------------------------

    def sink_marks(self, topic: str) -> dict[int, int] | None:
        """Each partition's end of the sink's `topic` after the last batch it finalized, a
        partition not listed ending at 0 (None: never finalized into that topic)."""
        raw = self.call(lambda: self.redis.hgetall(self.keys.sink))

        def read(fields: dict) -> dict[int, int] | None:
            mine = {f.decode().rpartition(":")[2]: int(v) for f, v in fields.items()
                    if f.decode().rpartition(":")[0] == topic}
            return None if "known" not in mine else {int(p): o for p, o in mine.items() if p != "known"}

        return self.parse(self.keys.sink, raw, read)

    def set_sink_marks(self, topic: str, marks: Mapping[int, int]) -> None:
        """Replace the marks (of any topic: a job has one sink) with `topic`'s."""
        def write() -> None:
            pipe = self.redis.pipeline(transaction=True)
            pipe.delete(self.keys.sink)
            pipe.hset(self.keys.sink, mapping={f"{topic}:known": 1, **{f"{topic}:{p}": o for p, o in marks.items()}})
            pipe.execute()

        self.call(write)

    def request_expansion(self, counts: Mapping[str, int], generation: int) -> None:
        """An operator's `layout expand --apply`: the daemon adopts it at its next tick, if the
        layout is still `generation` then."""
        self.call(lambda: self.redis.set(self.keys.expand, json.dumps(
            {"counts": dict(counts), "generation": generation}, sort_keys=True)))

    def expansion_request(self) -> tuple[dict[str, int], int] | None:
        raw = self.call(lambda: self.redis.get(self.keys.expand))
        if raw is None:
            return None

        def read(text: bytes) -> tuple[dict[str, int], int]:
            data = json.loads(text)
            return {str(t): int(n) for t, n in data["counts"].items()}, int(data["generation"])

        return self.parse(self.keys.expand, raw, read)

    def clear_expansion_request(self) -> None:
        self.call(lambda: self.redis.delete(self.keys.expand))

    def clear_startpoints(self, keys: list[StartpointKey] | None = None) -> int:
        """Delete the given startpoints (all when `keys` is None); returns how many went."""
        if keys is None:
            return int(self.call(lambda: self.redis.delete(self.keys.startpoints)))
        if not keys:
            return 0
        return int(self.call(lambda: self.redis.hdel(self.keys.startpoints, *[k.encode() for k in keys])))

    def fan_out_startpoints(
        self, layout: Layout, now_ms: int | None = None, expiry_ms: int = DEFAULT_EXPIRY_MS
    ) -> FanOut:
        """Re-key startpoints by task for a starting generation, atomically (seed 004 step 3)."""
        key = self.keys.startpoints
        result: list[FanOut] = []

        def txn(pipe: redis.client.Pipeline) -> None:
            raw = pipe.hgetall(key)
            current = {StartpointKey.decode(k): Startpoint.from_json(v) for k, v in raw.items()}
            out = fan_out(current, layout, now_ms, expiry_ms)
            pipe.multi()
            pipe.delete(key)
            if out.startpoints:
                pipe.hset(key, mapping={k.encode(): sp.to_json() for k, sp in out.startpoints.items()})
            result[:] = [out]

        self.call(lambda: self.redis.transaction(txn, key))
        out = result[0]
        for k in out.expired:
            log.warning("startpoint.expired", job=self.job, topic=k.topic, partition=k.partition,
                        task=k.task, fix="set it again if it is still wanted")
        for k in out.unknown:
            log.warning("startpoint.unknown_target", job=self.job, topic=k.topic,
                        partition=k.partition, task=k.task,
                        fix="the layout no longer has this task or partition; set it again")
        return out

    def pin_startpoint(self, key: StartpointKey, original: Startpoint, resolved: Startpoint) -> bool:
        """Record the offset a startpoint resolved to, unless it changed meanwhile."""
        field = key.encode()

        def txn(pipe: redis.client.Pipeline) -> bool:
            if pipe.hget(self.keys.startpoints, field) != original.to_json().encode():
                return False
            pipe.multi()
            pipe.hset(self.keys.startpoints, field, resolved.to_json())
            return True

        return bool(
            self.call(
                lambda: self.redis.transaction(txn, self.keys.startpoints, value_from_callable=True)
            )
        )

    # --- internals -----------------------------------------------------------------------------

    def _write_generation(self, pipe: redis.client.Pipeline, cp: Checkpoints) -> None:
        gen = cp.layout.generation
        pipe.set(self.keys.layout(gen), cp.layout.to_json())
        pipe.delete(self.keys.checkpoints(gen))
        pipe.hset(
            self.keys.checkpoints(gen),
            mapping={t.name: cp.task_to_json(t.name) for t in cp.layout.virtual_tasks()},
        )

    def _passed_startpoints(self, progress: Mapping[str, TaskProgress]) -> list[str]:
        raw = self.call(lambda: self.redis.hgetall(self.keys.startpoints))
        out: list[str] = []
        for field, value in raw.items():
            key = StartpointKey.decode(field)
            entries = progress.get(key.task) if key.task is not None else None
            entry = entries.get((key.topic, key.partition)) if entries else None
            if entry is not None and Startpoint.from_json(value).passed_by(entry.next):
                out += [field.decode(), value.decode()]
        return out

    def _fold_startpoints(self, pipe: redis.client.Pipeline, cp: Checkpoints) -> list[bytes]:
        folded: list[bytes] = []
        for field, value in pipe.hgetall(self.keys.startpoints).items():
            key, sp = StartpointKey.decode(field), Startpoint.from_json(value)
            if key.task is None or not cp.layout.has_task(key.task):
                continue
            offset = sp.resolved_offset if sp.resolved_offset is not None else (
                sp.position if sp.kind == "specific" else None
            )
            if offset is not None:
                cp.apply_startpoint(key.task, key.topic, key.partition, offset)
                folded.append(field)
        return folded

    def call(self, fn: Callable[[], T]) -> T:
        """Run a Redis call of this job, turning connection failures into StoreUnavailable;
        retried through an outage of up to `outage_s`."""
        delay = 0.1
        while True:
            try:
                with self._errors():
                    result = fn()
            except StoreUnavailable as exc:
                if not exc.retryable or self.outage_s <= 0:
                    raise
                delay = self._wait_out(exc, delay)
                continue
            if self._outage_began is not None:
                log.info("store.reachable_again", job=self.job, url=redact(self.url),
                         outage_s=round(self._monotonic() - self._outage_began, 2))
                self._outage_began = None
            return result

    def _wait_out(self, exc: StoreUnavailable, delay: float) -> float:
        """Sleep before the next attempt, or raise once the outage passed `outage_s`."""
        now = self._monotonic()
        if self._outage_began is None:
            self._outage_began = now
            log.warning("store.unreachable_retrying", job=self.job, error=str(exc),
                        limit_s=self.outage_s)
        waited = now - self._outage_began
        if waited >= self.outage_s:
            self._outage_began = None
            raise StoreUnavailable(
                f"Redis unreachable for {waited:.0f}s, past the {self.outage_s:g}s outage limit: "
                f"{exc}", retryable=False) from None
        self._sleep(min(delay, self.outage_s - waited))
        return min(delay * 2, 2.0)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except redis.AuthenticationError as exc:
            raise StoreUnavailable(
                f"Redis at {redact(self.url)} refused the credentials ({exc}): put the right "
                "password in the URL, before the host as :PASSWORD@", retryable=False
            ) from None
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise StoreUnavailable(
                f"cannot reach Redis at {redact(self.url)} ({exc}): start redis-server or fix "
                "--redis / AUTOSIZER_REDIS_URL"
            ) from None
        except redis.InvalidResponse:
            raise StoreUnavailable(
                f"{redact(self.url)} does not answer like a Redis server: fix the host and port "
                "in --redis / AUTOSIZER_REDIS_URL", retryable=False) from None
        except redis.ResponseError as exc:
            if "DB index is out of range" in str(exc):
                raise StoreUnavailable(
                    f"Redis at {redact(self.url)} has no such database: use a db number below "
                    "its `databases` setting (default 16), e.g. /0", retryable=False) from None
            if "WRONGTYPE" not in str(exc):
                raise
            try:
                found = self.wrong_types()
            except redis.RedisError:
                found = []
            raise KeyProblem("; ".join(found) or (
                f"a Redis key of job {self.job!r} holds the wrong type ({exc}): compare "
                "`redis-cli --scan --pattern 'autosizer:{JOB}:*'` with the README's key table"
            )) from None


# The hint names no URL with a password in it: the redaction every error line passes through
# would take `redis://[:password@]` for one and print `redis://***@]host`.
_BAD_URL = ("invalid Redis URL {}: use redis://host:port/db (or rediss:// for TLS), a password "
            "before the host as :PASSWORD@, with /, #, ?, @ and : in it percent-encoded (%2F %23 %3F %40 %3A)")


def check_redis_url(url: str) -> None:
    """Refuse a URL redis-py would misread: a db that is not a number (it silently means 0), a
    port that is not one (an unencoded `/` or `#` in the password), an unknown scheme."""
    if not isinstance(url, str) or not url.startswith(("redis://", "rediss://", "unix://")):
        raise StoreUnavailable(_BAD_URL.format(redact(str(url))), retryable=False)
    if url.startswith("unix://"):
        return
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError:
        raise StoreUnavailable(_BAD_URL.format(redact(url)), retryable=False) from None
    db = parts.path.strip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise StoreUnavailable(
            f"invalid Redis URL {redact(url)}: the database {db[:20]!r} after the last / must be a "
            "number like /0", retryable=False)
    if not parts.hostname:
        raise StoreUnavailable(_BAD_URL.format(redact(url)), retryable=False)


def _generation(raw: bytes | str) -> int:
    """A generation or batch number: ASCII digits only (int() also takes '٣' and '+3')."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    if not (text.isascii() and text.isdigit()):
        raise ValueError(f"{text[:40]!r} is not a whole number")
    return int(text)

