"""Backoff after a failed actuation: the next one waits, doubling per failure, capped.

Without it a rescale that aborts (the pipeline did not drain) or rolls back is retried at the next
tick, draining the pipeline again every interval. The state lives in Redis (the `backoff` key), so
a restarted or standby daemon honours it and `status` shows it. A completed rescale clears it; the
operator's `rescale` override skips it.
"""

from __future__ import annotations

from dataclasses import dataclass

from autosizer.elasticity.store import MetadataStore

FAILED = ("aborted", "failed", "rolled_back", "error")
BACKOFF_S, BACKOFF_MAX_S = 60.0, 1800.0  # the daemon's defaults: the first wait, and the longest


@dataclass(frozen=True)
class Backoff:
    failures: int = 0
    until: float = 0.0  # epoch seconds
    last: str = ""  # the last failure, one line

    def active(self, now: float) -> bool:
        return self.failures > 0 and now < self.until

    def after_failure(self, now: float, why: str, base_s: float, max_s: float) -> Backoff:
        failures = self.failures + 1
        wait = min(max_s, base_s * 2 ** (failures - 1))
        return Backoff(failures, now + wait, why[:300])

    def describe(self, now: float) -> str:
        return (f"backing off for {max(0.0, self.until - now):.0f}s more after {self.failures} "
                f"failed actuation(s) (last: {self.last}); `autosizer override set rescale true` "
                "acts at once")


class BackoffStore:
    def __init__(self, store: MetadataStore):
        self.store, self.key = store, store.keys.backoff

    def read(self) -> Backoff:
        raw = self.store.call(lambda: self.store.redis.hgetall(self.key))
        if not raw:
            return Backoff()
        return self.store.parse(self.key, raw, lambda r: Backoff(
            int(r[b"failures"]), float(r[b"until"]), r.get(b"last", b"").decode(errors="replace")))

    def save(self, backoff: Backoff) -> None:
        if backoff.failures == 0:
            self.store.call(lambda: self.store.redis.delete(self.key))
            return
        self.store.call(lambda: self.store.redis.hset(self.key, mapping={
            "failures": backoff.failures, "until": round(backoff.until, 3), "last": backoff.last}))
