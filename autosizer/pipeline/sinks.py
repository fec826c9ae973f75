"""Where the user's outputs go. Sinks are configuration only, so they pickle to executors.

Order per micro-batch: `prepare` (driver) → `write` per slot (executors) → commit to Redis →
`finalize` (driver). A crash before the commit retries the same batch number, and `prepare`
clears that attempt's files; a crash after the commit is mended by `recover` at the next start.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.parquet as pq

from autosizer.pipeline.slots import Output

COMMITTED = "_COMMITTED"
OUTPUT_SCHEMA = pa.schema([("key", pa.binary()), ("value", pa.binary())])


class Sink(Protocol):
    def prepare(self, generation: int, batch: int) -> None: ...

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output]) -> None: ...

    def finalize(self, generation: int, batch: int) -> None: ...

    def recover(self, committed: Callable[[int], int]) -> None:
        """Mend what a crash left, given the committed batch number of each generation."""
        ...


class FileSink:
    """Parquet files, exactly once: `generation=G/batch=B/slot-S.parquet`, plus a `_COMMITTED`
    marker written only after the batch's checkpoints are committed. Readers take marked
    batches only (`read_committed`)."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = str(path)

    def _batch_dir(self, generation: int, batch: int) -> Path:
        return Path(self.path) / f"generation={generation}" / f"batch={batch:010d}"

    def prepare(self, generation: int, batch: int) -> None:
        shutil.rmtree(self._batch_dir(generation, batch), ignore_errors=True)

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output]) -> None:
        if not outputs:
            return
        directory = self._batch_dir(generation, batch)
        directory.mkdir(parents=True, exist_ok=True)
        table = pa.table(
            {"key": pa.array([k for k, _ in outputs], pa.binary()),
             "value": pa.array([v for _, v in outputs], pa.binary())},
            schema=OUTPUT_SCHEMA,
        )
        final = directory / f"slot-{slot:05d}.parquet"
        temporary = directory / f".slot-{slot:05d}.{uuid.uuid4().hex}.tmp"
        pq.write_table(table, temporary)
        os.replace(temporary, final)  # a retried task replaces, never duplicates

    def finalize(self, generation: int, batch: int) -> None:
        directory = self._batch_dir(generation, batch)
        directory.mkdir(parents=True, exist_ok=True)
        (directory / COMMITTED).touch()

    def recover(self, committed: Callable[[int], int]) -> None:
        root = Path(self.path)
        if not root.exists():
            return
        for gen_dir in root.glob("generation=*"):
            generation = int(gen_dir.name.split("=")[1])
            last = committed(generation)
            for batch_dir in gen_dir.glob("batch=*"):
                batch = int(batch_dir.name.split("=")[1])
                if batch <= last:
                    (batch_dir / COMMITTED).touch()  # committed, marker lost in a crash
                elif not (batch_dir / COMMITTED).exists():
                    shutil.rmtree(batch_dir, ignore_errors=True)  # never committed


def read_committed(path: str | os.PathLike[str]) -> pa.Table:
    """Every output of committed batches, in (generation, batch, slot) order."""
    root = Path(path)
    tables = []
    for marker in sorted(root.glob(f"generation=*/batch=*/{COMMITTED}"), key=_batch_order):
        for part in sorted(marker.parent.glob("slot-*.parquet")):
            tables.append(pq.read_table(part))
    return pa.concat_tables(tables) if tables else OUTPUT_SCHEMA.empty_table()


def _batch_order(marker: Path) -> tuple[int, int]:
    match = re.search(r"generation=(\d+)/batch=(\d+)", marker.as_posix())
    assert match is not None
    return int(match.group(1)), int(match.group(2))


class KafkaSink:
    """A Kafka topic through an idempotent producer: no duplicates from producer retries; a
    batch re-run after a crash can write again (at least once across crashes)."""

    def __init__(self, bootstrap: str, topic: str):
        self.bootstrap, self.topic = bootstrap, topic

    def prepare(self, generation: int, batch: int) -> None:
        pass

    def write(self, generation: int, batch: int, slot: int, outputs: Sequence[Output]) -> None:
        if not outputs:
            return
        from confluent_kafka import Producer

        errors: list[str] = []

        def delivered(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "log_level": 0})
        for key, value in outputs:
            producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
            producer.poll(0)
        remaining = producer.flush(60)
        if remaining or errors:
            raise RuntimeError(
                f"Kafka sink {self.topic!r}: {remaining} undelivered, errors {errors[:3]}: "
                "check the broker; the batch is not committed and will be retried"
            )

    def finalize(self, generation: int, batch: int) -> None:
        pass

    def recover(self, committed: Callable[[int], int]) -> None:
        pass
