"""The control channel between the controller's actuator and the pipeline's agent, in Redis.

The actuator asks (`drain`, `start`); the agent obeys and reports its state with a heartbeat:
`running@<g>`, `draining@<g>`, `stopped@<g>` or `failed`. Requests carry an id so one is never
obeyed twice.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from autosizer.elasticity.store import MetadataStore

ACTIONS = ("drain", "start")
# The agent reports ten times a second; one silent this long is not running (killed, or its host
# gone), whatever state it last reported.
SILENT_S = 30.0
NOT_RUNNING = "killed, or its host gone?"  # what a silent pipeline's report is taken to mean


def silence(status: dict[str, str], now: float) -> float | None:
    """Seconds since the agent's last report (`status` as `ControlChannel.status` reads it); None
    when it never reported or the heartbeat is unreadable (written by hand)."""
    try:
        return now - int(status["heartbeat_ms"]) / 1000
    except (KeyError, ValueError):
        return None


class ControlChannel:
    def __init__(self, store: MetadataStore):
        self.store = store
        self.redis = store.redis
        self._request = store.keys.control_request
        self._done = store.keys.control_done
        self._agent = store.keys.agent

    # --- the controller's side -----------------------------------------------------------------

    def request(self, action: str) -> str:
        if action not in ACTIONS:
            raise ValueError(f"unknown control action {action!r}: use one of {', '.join(ACTIONS)}")
        request_id = uuid.uuid4().hex
        self.store.call(lambda: self.redis.hset(self._request, mapping={
            "id": request_id, "action": action, "at_ms": int(time.time() * 1000)}))
        return request_id

    def status(self) -> dict[str, str]:
        raw = self.store.call(lambda: self.redis.hgetall(self._agent))
        return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in raw.items()}

    def wait_for(self, state: str, timeout_s: float, poll_s: float = 0.05,
                 request_id: str | None = None) -> bool:
        """True once the agent reports `state` (e.g. "stopped@3") within the timeout, and, given
        `request_id`, has obeyed that request: a state left by a pipeline that died before seeing
        the request must not pass for an answer to it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.status().get("state") == state and (
                    request_id is None or self.obeyed(request_id)):
                return True
            time.sleep(poll_s)
        return False

    def obeyed(self, request_id: str) -> bool:
        done = self.store.call(lambda: self.redis.get(self._done))
        return done is not None and done.decode(errors="replace") == request_id

    # --- the agent's side ----------------------------------------------------------------------

    def pending(self) -> tuple[str, str] | None:
        """The request not yet obeyed, as (id, action)."""
        raw = self.store.call(lambda: self.redis.hgetall(self._request))
        if not raw:
            return None
        request_id, action = self.store.parse(self._request, raw, _request_fields)
        if self.obeyed(request_id):
            return None
        return request_id, action

    def drain_pending(self) -> bool:
        """True while a drain request waits to be obeyed: running batches should wrap up."""
        pending = self.pending()
        return pending is not None and pending[1] == "drain"

    def done(self, request_id: str) -> None:
        self.store.call(lambda: self.redis.set(self._done, request_id))

    def report(self, state: str, **fields: Any) -> None:
        mapping = {"state": state, "heartbeat_ms": int(time.time() * 1000)}
        mapping.update({k: "" if v is None else str(v) for k, v in fields.items()})
        self.store.call(lambda: self.redis.hset(self._agent, mapping=mapping))


def _request_fields(raw: dict[bytes, bytes]) -> tuple[str, str]:
    request_id, action = raw[b"id"].decode(), raw[b"action"].decode()
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action[:40]!r}")
    return request_id, action
