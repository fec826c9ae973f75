"""Every Redis key of a job, its type, who writes it, and every script that writes several at once:
the one place a key name is made.

All keys sit under `autosizer:{<job>}:` (the braces keep one job's keys in one Redis Cluster slot,
so its scripts and transactions may touch several). Everything that reads or writes Redis takes
its key from `JobKeys`, so a key of the wrong type, or with content nobody can read, can be named
with its fix (`wrong_type_fix`) instead of surfacing as a raw WRONGTYPE error. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeySpec:
    """One key (or family, `<g>` standing for a generation, `<name>` for an override)."""

    suffix: str
    type: str  # what Redis TYPE answers
    writer: str  # the module that writes it
    fix: str  # what an operator does when it holds something else


SPECS: tuple[KeySpec, ...] = (
    KeySpec("layout:current", "string", "elasticity.store", "restore it from a backup, or delete "
            "the job's keys and run `autosizer layout init` again"),
    KeySpec("layout:<g>", "string", "elasticity.store", "restore it from a backup"),
    KeySpec("checkpoints:<g>", "hash", "elasticity.store", "restore it from a backup"),
    KeySpec("batch:<g>", "string", "elasticity.store", "delete it (the sink then re-checks its "
            "last batch)"),
    KeySpec("startpoints", "hash", "elasticity.store", "delete it and set the startpoints again"),
    KeySpec("override:<name>", "string", "controller.overrides", "`autosizer override clear "
            "<name>` and set it again with `autosizer override set`"),
    KeySpec("leader", "string", "controller.lease", "delete it; the daemon takes the lease again"),
    KeySpec("actuation", "string", "actuators.journal", "delete it once no rescale is running"),
    KeySpec("actuations", "list", "actuators.journal", "delete it (finished actuations only)"),
    KeySpec("rescale", "hash", "actuators.journal", "delete it (the cooldown restarts)"),
    KeySpec("decisions", "stream", "controller.journal", "delete it (past decisions only)"),
    KeySpec("history", "hash", "controller.history", "delete it (the policy relearns the day)"),
    KeySpec("control:request", "hash", "pipeline.control", "delete it once no rescale is running"),
    KeySpec("control:done", "string", "pipeline.control", "delete it once no rescale is running"),
    KeySpec("agent", "hash", "pipeline.control", "delete it; the pipeline reports again"),
    KeySpec("backoff", "hash", "controller.backoff", "delete it (the next rescale is allowed at "
            "once)"),
    KeySpec("topology", "string", "pipeline.agent", "delete it; the pipeline reports again within "
            "a second"),
    KeySpec("coupling", "string", "pipeline.agent", "delete it only once every coupled expansion "
            "child is free (`autosizer checkpoints show` lists none blocked): a coupled child waits "
            "for its steps again"),
    KeySpec("expand", "string", "controller.commands", "delete it and run `autosizer layout expand` "
            "again"),
    KeySpec("sink", "hash", "pipeline.sinks", "delete it (the Kafka sink then takes its topic's end "
            "as written and committed: a batch in flight then may be written twice)"),
)

OVERRIDE_NAMES = ("factor", "pause", "min_factor", "max_factor", "rescale")


class JobKeys:
    """The key names of one job."""

    def __init__(self, job: str):
        self.job = job
        self.prefix = f"autosizer:{{{job}}}:"
        self.current = self.key("layout", "current")
        self.startpoints = self.key("startpoints")
        self.leader = self.key("leader")
        self.actuation = self.key("actuation")
        self.actuations = self.key("actuations")
        self.rescale = self.key("rescale")
        self.decisions = self.key("decisions")
        self.history = self.key("history")
        self.control_request = self.key("control", "request")
        self.control_done = self.key("control", "done")
        self.agent = self.key("agent")
        self.backoff = self.key("backoff")
        self.topology = self.key("topology")  # the broker's partition counts, while they differ
        self.coupling = self.key("coupling")  # coupled expansion children's steps behind their lineage
        self.expand = self.key("expand")  # an operator's `layout expand --apply`, until adopted
        self.sink = self.key("sink")  # the Kafka sink's topic ends after its last committed batch

    def key(self, *parts: object) -> str:
        return self.prefix + ":".join(str(p) for p in parts)

    def layout(self, generation: int) -> str:
        return self.key("layout", generation)

    def checkpoints(self, generation: int) -> str:
        return self.key("checkpoints", generation)

    def batch(self, generation: int) -> str:
        return self.key("batch", generation)

    def override(self, name: str) -> str:
        return self.key("override", name)

    def expected(self, generation: int | None) -> dict[str, KeySpec]:
        """Every key this job may have now, with its spec (generation keys of `generation` only)."""
        out: dict[str, KeySpec] = {}
        for spec in SPECS:
            if "<g>" in spec.suffix:
                if generation is not None:
                    out[self.key(spec.suffix.replace("<g>", str(generation)))] = spec
            elif "<name>" in spec.suffix:
                for name in OVERRIDE_NAMES:
                    out[self.override(name)] = spec
            else:
                out[self.key(spec.suffix)] = spec
        return out


def spec_for(key: str) -> KeySpec | None:
    """The spec of a key of any job, by its suffix."""
    suffix = key.split("}:", 1)[-1]
    head, _, tail = suffix.rpartition(":")
    for spec in SPECS:
        if spec.suffix == suffix or (
            head and spec.suffix.rpartition(":")[0] == head
            and spec.suffix.endswith(("<g>", "<name>")) and tail
        ):
            return spec
    return None


def unreadable_fix(key: str, problem: str) -> str:
    """One line for a key whose content cannot be parsed."""
    spec = spec_for(key)
    fix = spec.fix.replace("<name>", key.rsplit(":", 1)[1]) if spec else "delete it"
    return f"Redis key {key!r} holds content autosizer cannot read ({problem}): {fix}"


def wrong_type_fix(key: str, found: str, spec: KeySpec) -> str:
    """One line: which key holds what, what it should hold, and what to do."""
    name = key.rsplit(":", 1)[1]
    return (f"Redis key {key!r} holds a {found}, not a {spec.type}: "
            f"{spec.fix.replace('<name>', name)}")


# --- scripts: each runs atomically in Redis; KEYS and ARGV as listed -----------------------------

# The fenced commit. KEYS: current, checkpoints:<g>, startpoints, batch:<g>. ARGV: generation,
# batch number ('' for none), task count, task/progress pairs, then passed startpoint field/value
# pairs (deleted only if unchanged).
COMMIT = """
local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then
  return redis.error_reply('STALE ' .. tostring(current))
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[4], ARGV[2])
end
local n = tonumber(ARGV[3])
local i = 4
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  if redis.call('HGET', KEYS[3], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
  i = i + 2
end
return 'OK'
"""

# Open an actuation. KEYS: leader, actuation, current. ARGV: holder, from generation, entry JSON,
# '1' for a rollback (which replaces the open entry).
JOURNAL_BEGIN = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('NOT_LEADER') end
if ARGV[4] == '0' and redis.call('EXISTS', KEYS[2]) == 1 then return redis.error_reply('BUSY') end
if redis.call('GET', KEYS[3]) ~= ARGV[2] then return redis.error_reply('STALE') end
redis.call('SET', KEYS[2], ARGV[3])
return 'OK'
"""

# Advance (ARGV[3] the moved entry) or finish (ARGV[3] '', ARGV[4] the
# finished entry, pushed to the history of 50) an actuation. KEYS: leader, actuation, actuations.
JOURNAL_WRITE = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('NOT_LEADER') end
local current = redis.call('GET', KEYS[2])
if not current or cjson.decode(current)['id'] ~= ARGV[2] then return redis.error_reply('GONE') end
if ARGV[3] == '' then
  redis.call('DEL', KEYS[2])
  redis.call('LPUSH', KEYS[3], ARGV[4])
  redis.call('LTRIM', KEYS[3], 0, 49)
else
  redis.call('SET', KEYS[2], ARGV[3])
end
return 'OK'
"""

# Extend the lease if held. KEYS: leader. ARGV: holder, TTL ms.
LEASE_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

# Release the lease if held. KEYS: leader. ARGV: holder.
LEASE_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
