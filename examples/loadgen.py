"""A load generator whose rate can be stepped: orders keyed by customer, produced at `rate`
records per second until stopped. Used by `make demo` and the daemon tests.

Each value carries the customer's sequence number, so the output can be checked for per-key order;
`json_values` makes it an order document for the enrichment example.
"""

from __future__ import annotations

import json
import threading
import time

from autosizer.embedded import EmbeddedBroker


class StepLoad(threading.Thread):
    def __init__(self, broker: EmbeddedBroker, topic: str, partitions: int, rate: float = 0.0,
                 keys: int = 200, json_values: bool = False):
        super().__init__(name="loadgen", daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.keys, self.json_values = keys, json_values
        self.rate = rate
        self.sent = 0
        self.stop = threading.Event()

    def set_rate(self, rate: float) -> None:
        self.rate = rate

    def run(self) -> None:
        producer = self.broker.producer()
        seqs = [0] * self.keys
        rate, began, count = None, 0.0, 0
        try:
            while not self.stop.is_set():
                if self.rate != rate:  # a step: pace from here
                    rate, began, count = self.rate, time.monotonic(), 0
                ahead = count / rate - (time.monotonic() - began) if rate > 0 else 0.05
                if ahead > 0:
                    self.stop.wait(min(ahead, 0.05))
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
        finally:
            producer.flush(30)

    def finish(self) -> int:
        """Stop producing; the number of records sent."""
        self.stop.set()
        self.join(60)
        return self.sent


def check_orders(table, total: int) -> None:
    """Print the exactly-once verdict on enriched orders; exit non-zero when it fails."""
    orders = [json.loads(v) for v in table.column("value").to_pylist()]
    ids = [o["order"] for o in orders]
    last: dict[int, int] = {}
    in_order = True
    for o in orders:
        in_order &= last.get(o["customer"], -1) < o["seq"]
        last[o["customer"]] = o["seq"]
    print(f"exactly once: {len(set(ids))} of {total} orders enriched, {len(ids) - len(set(ids))} "
          f"duplicates, per-customer order {'kept' if in_order else 'BROKEN'}")
    if not (len(ids) == len(set(ids)) == total and in_order):
        raise SystemExit("exactly-once or ordering check failed")
