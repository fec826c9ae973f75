"""An enrichment job: each order event is joined with its customer's profile from a slow lookup.

The lookup stands for a remote call (a database, a model, an HTTP service): it costs a couple of
milliseconds per record no matter how many cores there are, which is exactly the job that falls
behind when it gets one worker per partition. Set ENRICH_LOOKUP_MS to change its cost, and
ENRICH_CPU_MS to burn that much CPU per record as well (work that more threads cannot speed up
past the cores: the case a scale-up must be judged on what it measured).

Run it: autosizer pipeline run --app examples.enrich:enrich --job orders --bootstrap HOST:PORT
"""

from __future__ import annotations

import json
import os
import time
import zlib

from autosizer.pipeline.slots import Record

TIERS = ("bronze", "silver", "gold", "platinum")


def lookup_profile(customer: bytes) -> dict:
    """The slow part: a simulated remote profile service."""
    time.sleep(float(os.environ.get("ENRICH_LOOKUP_MS", "2")) / 1000)
    h = zlib.crc32(customer)
    return {"tier": TIERS[h % len(TIERS)], "region": f"r{h % 7}"}


def burn_cpu(milliseconds: float) -> None:
    """Hold a core (and the GIL) for about that long."""
    until = time.thread_time() + milliseconds / 1000
    x = 0
    while time.thread_time() < until:
        x += 1


def enrich(record: Record) -> tuple[bytes | None, bytes]:
    """One order in, one enriched order out, keyed by customer (per-customer order is kept)."""
    cpu_ms = float(os.environ.get("ENRICH_CPU_MS", "0"))
    if cpu_ms > 0:
        burn_cpu(cpu_ms)
    profile = lookup_profile(record.key or b"")
    order = json.loads(record.value or b"{}")
    order.update(profile, source_offset=record.offset, source_partition=record.partition)
    return record.key, json.dumps(order, sort_keys=True).encode()
