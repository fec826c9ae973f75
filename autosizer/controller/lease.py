"""The leader lease: one daemon per job actuates; the others stand by.

`SET key id NX PX ttl` takes the lease; the holder extends it with a compare-and-pexpire script
(from a thread, every third of the TTL, so a long actuation does not lose it). A standby retries on
the same beat and so takes over within ttl + ttl/3 of the leader's death, inside the two lease
periods promised. The lease alone is not the fence: every actuation step is journaled by a script
that checks the holder (`ActuationJournal`), and a migration is refused unless the generation it
starts from is still current (`MetadataStore.migrate`).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

import structlog

from autosizer.elasticity.keys import LEASE_RELEASE, LEASE_RENEW
from autosizer.elasticity.store import MetadataStore, StoreError

log = structlog.get_logger(__name__)



class LeaderLease:
    def __init__(self, store: MetadataStore, ttl_s: float, holder: str | None = None):
        self.store, self.redis = store, store.redis
        self.key = store.keys.leader
        self.ttl_ms = int(ttl_s * 1000)
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._renew = self.redis.register_script(LEASE_RENEW)
        self._release = self.redis.register_script(LEASE_RELEASE)
        self.held = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_answer = time.monotonic()  # when Redis last answered a lease call
        self.last_error = ""

    def try_acquire(self) -> bool:
        """Take or extend the lease; False while another daemon holds it or Redis is down."""
        was = self.held
        try:
            if self.store.call(lambda: self._renew(keys=[self.key], args=[self.holder, self.ttl_ms])):
                self.held = True
            else:
                self.held = bool(self.store.call(
                    lambda: self.redis.set(self.key, self.holder, nx=True, px=self.ttl_ms)))
            self.last_answer, self.last_error = time.monotonic(), ""
        except StoreError as exc:
            self.held = False  # cannot prove we hold it: act as a standby until Redis answers
            if str(exc) != self.last_error:
                log.error("lease.unknown", job=self.store.job, error=str(exc))
            self.last_error = str(exc)
        if self.held != was:
            log.info("lease.acquired" if self.held else "lease.lost", job=self.store.job,
                     holder=self.holder)
        return self.held

    def current_holder(self) -> tuple[str | None, int]:
        """(holder, ms left) as Redis sees it now."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(self.key)
        pipe.pttl(self.key)
        value, ttl = self.store.call(pipe.execute)
        return (None if value is None else value.decode()), max(0, ttl)

    def start(self) -> None:
        """Keep trying to take or extend the lease every third of its TTL, in a daemon thread."""
        self._stop.clear()
        self.last_answer = time.monotonic()  # silence counts from the first try, not construction
        self._thread = threading.Thread(target=self._beat, name="autosizer-lease", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                self.try_acquire()
            except Exception:  # the beat must outlive any surprise; /healthz reports it
                log.exception("lease.beat_failed", job=self.store.job)

    def problem(self) -> str | None:
        """For /healthz: why this daemon cannot hold or even seek the lease, or None."""
        if self._thread is not None and not self._stop.is_set() and not self._thread.is_alive():
            return "the lease thread died: restart the daemon"
        silent = time.monotonic() - self.last_answer
        if self.last_error and silent > self.ttl_ms / 1000:
            return f"the leader lease could not be taken or kept for {silent:.0f}s: {self.last_error}"
        return None

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self.held:
            try:
                self.store.call(lambda: self._release(keys=[self.key], args=[self.holder]))
            except StoreError as exc:
                log.warning("lease.release_failed", job=self.store.job, error=str(exc))
            self.held = False
