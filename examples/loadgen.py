"""A load generator that steps the input rate: orders keyed by customer, produced at a rate that
follows a list of (seconds, records per second) phases. Used by `make demo` and the daemon tests.

Each value carries the customer's sequence number, so the output can be checked for per-key order;
`json_values` makes it an order document for the enrichment example.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence

from autosizer.embedded import EmbeddedBroker


class StepLoad(threading.Thread):
    def __init__(self, broker: EmbeddedBroker, topic: str, partitions: int,
                 phases: Sequence[tuple[float, float]], keys: int = 200, json_values: bool = False):
        super().__init__(name="loadgen", daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.phases, self.keys, self.json_values = list(phases), keys, json_values
        self.sent = 0
        self.rate = 0.0  # the rate being produced now, for plots
        self.finished = threading.Event()
        self.stop = threading.Event()

    def run(self) -> None:
        producer = self.broker.producer()
        seqs = [0] * self.keys
        try:
            for seconds, rate in self.phases:
                self.rate = rate
                began, count = time.monotonic(), 0
                while not self.stop.is_set() and time.monotonic() - began < seconds:
                    ahead = count / rate - (time.monotonic() - began) if rate > 0 else 0.05
                    if rate <= 0 or ahead > 0:
                        self.stop.wait(min(ahead, 0.05) if rate > 0 else 0.05)
                        continue
                    key = self.sent % self.keys
                    seq, seqs[key] = seqs[key], seqs[key] + 1
                    value = (json.dumps({"order": self.sent, "customer": key, "seq": seq}).encode()
                             if self.json_values else b"%d" % seq)
                    producer.produce(self.topic, key=b"customer-%d" % key, value=value,
                                     partition=key % self.partitions)
                    producer.poll(0)
                    self.sent += 1
                    count += 1
                if self.stop.is_set():
                    break
        finally:
            self.rate = 0.0
            producer.flush(30)
            self.finished.set()
