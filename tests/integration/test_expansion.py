"""Partition expansion at run time (SEP-5), every part its own real process: the broker grows the
topic with CreatePartitions while the Spark pipeline runs and the daemon watches; the daemon adopts
it at once and the new partitions are read behind their parents while the producer still writes
the moved keys to their old partitions; then the factor changes. Every record exactly once,
per-key order kept across the expansion."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from autosizer.actuators.journal import last_rescale
from autosizer.controller.journal import DecisionJournal
from autosizer.controller.overrides import OverrideStore
from autosizer.elasticity import Layout
from autosizer.elasticity.store import MetadataStore
from autosizer.embedded import EmbeddedPrometheus, free_port
from autosizer.pipeline.agent import KafkaOffsets
from autosizer.pipeline.sinks import read_committed
from tests.daemon_harness import AUTOSIZER, start_daemon, start_pipeline, stop, write_config
from tests.integration.test_pipeline import check_exactly_once_in_key_order, wait_until

pytestmark = pytest.mark.integration
KEYS = 40


class KeyedProducer(threading.Thread):
    """KEYS keys, each with its own sequence number, partitioned by key % the partition count this
    producer knows; `switch` starts a fresh producer on a new count, as a metadata refresh would."""

    def __init__(self, broker, topic: str, partitions: int, per_second: float):
        super().__init__(daemon=True)
        self.broker, self.topic, self.partitions = broker, topic, partitions
        self.pause = 1.0 / per_second
        self.stopped, self.switched = threading.Event(), threading.Event()
        self._next: int | None = None
        self.total = 0

    def switch(self, partitions: int) -> None:
        self._next = partitions
        self.switched.wait(30)

    def run(self) -> None:
        producer, seqs = self.broker.producer(), [0] * KEYS
        while not self.stopped.is_set():
            if self._next is not None:
                producer.flush(30)
                producer, self.partitions, self._next = self.broker.producer(), self._next, None
                self.switched.set()
            key = self.total % KEYS
            producer.produce(self.topic, key=b"key-%d" % key, value=b"%d" % seqs[key],
                             partition=key % self.partitions)
            producer.poll(0)
            seqs[key] += 1
            self.total += 1
            time.sleep(self.pause)
        producer.flush(30)

    def finish(self) -> int:
        self.stopped.set()
        self.join(60)
        return self.total


def test_expansion_4_to_8_while_running_then_factor_4_to_2_keeps_every_key_in_order(
        redis_server, broker, job, tmp_path):
    broker.create_topic("orders", 4)
    store = MetadataStore(redis_server.url, job)
    store.init_layout(Layout(topics={"orders": 4}, factor=4))
    overrides, decisions = OverrideStore(store), DecisionJournal(store)
    overrides.set("factor", "4")  # pinned: the policy stays out of the way, expansions do not
    out, port = tmp_path / "out", free_port()
    producer = KeyedProducer(broker, "orders", 4, per_second=100)
    with EmbeddedPrometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus") as prometheus:
        pipeline = start_pipeline(redis_server.url, broker.bootstrap, job, out, tmp_path / "pipeline.log", port)
        config = write_config(tmp_path / "daemon.toml", job, redis_server.url, prometheus.url,
                              daemon={"adopt_after_s": 60.0})
        daemon = start_daemon(config, tmp_path / "daemon.log")
        try:
            producer.start()
            wait_until(lambda: store.committed_batch(1) >= 2, 180, "the pipeline's first batches")

            # 4 -> 6 is not a multiple: refused, named in the decisions, and the job reads on.
            broker.add_partitions("orders", 6)
            wait_until(lambda: any("not a multiple of the layout's 4" in d["reason"]
                                   for d in decisions.last(5)), 60, "the refusal in the decisions")
            done = read_committed(out).num_rows
            wait_until(lambda: read_committed(out).num_rows > done + 100, 60, "the job to keep running")
            assert store.layout().topics == {"orders": 4}
            assert "expansion.refused" in (tmp_path / "daemon.log").read_text()

            # 6 -> 8 is: the daemon adopts it at its next tick, the producer still writing every
            # key to partitions 0-3; it moves half of them to partitions 4-7 only after.
            broker.add_partitions("orders", 8)
            wait_until(lambda: any(d["outcome"] == "expand" for d in decisions.last(20)), 120,
                       "the expansion's decision")
            assert store.layout().topics == {"orders": 8}
            adopted = next(d for d in decisions.last(50) if d["outcome"] == "expand")
            assert adopted["reason"].startswith(
                "partition expansion orders 4 -> 8; new partitions read behind their parents until "), adopted
            producer.switch(8)
            wait_until(lambda: any(int(v.split(b":")[0]) >= 4 for v in read_committed(out).column("value").to_pylist()),
                       120, "a moved key's record read from its new partition")
            couplings = store.couplings()  # taken after the read: no child's last step yet
            assert len(couplings) == 4 and all(c.final is None for c in couplings.values()), \
                "read behind the parents by the steps, not freed after adopt_after_s"
            shown = subprocess.run([AUTOSIZER, "checkpoints", "show", "--job", job, "--redis", redis_server.url],
                                   capture_output=True, text=True, timeout=60)
            children = [line for line in shown.stdout.splitlines() if line.startswith(("orders[4]", "orders[5]",
                                                                                        "orders[6]", "orders[7]"))]
            assert len(children) == 4 and "(behind its parent)" in shown.stdout, shown.stdout
            # marked as an expansion: the daemon's ticks hold for a rate window after it (tick.py)
            assert last_rescale(store).expansion

            overrides.set("factor", "2")
            wait_until(lambda: store.layout().factor == 2, 120, "factor 2")
            wait_until(lambda: not last_rescale(store).expansion, 60, "the factor change's own mark")
            total = producer.finish()
            wait_until(lambda: read_committed(out).num_rows >= total, 240, f"all {total} records")
            time.sleep(1.5)  # a duplicate would show up as extra rows
        finally:
            producer.stopped.set()
            stop(daemon)
            stop(pipeline)
    table = read_committed(out)
    check_exactly_once_in_key_order(table, total)
    # A moved key's records in its old partition all come before those in its new one.
    seen_new: set[bytes] = set()
    children = 0
    for key, value in zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True):
        partition = int(value.split(b":")[0])
        if partition >= 4:
            seen_new.add(key)
            children += 1
        else:
            assert key not in seen_new, f"{key!r}: an old-partition record after a new-partition one"
    assert children > 0 and len(seen_new) == KEYS // 2, "half the keys moved to partitions 4-7"
    # The new partitions' lag reaches 0: every task of each child is at the broker's end.
    offsets = KafkaOffsets(broker.bootstrap)
    starts = store.checkpoints().start_offsets()
    assert all(starts[("orders", c)] == offsets.upcoming_offset("orders", c) > 0 for c in range(4, 8)), starts
    offsets.close()
