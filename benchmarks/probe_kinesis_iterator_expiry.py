"""Does a Kinesis read go on past an iterator that expired while it waited (an endpoint outage
longer than five minutes, with `--broker-outage-s` above 300)?

Kinesis (and the emulator) expire a shard iterator 300 s after it was issued. This takes an
iterator, waits 305 s, then reads with it twice: as the lag probe reads (no shard given: the
expiry is raised) and as a batch reads (`ShardReader.records(..., shard=0)`: the iterator is
taken again past the last record read, and every record comes back). Not in the test suite:
five idle minutes for one branch. Run: .venv/bin/python benchmarks/probe_kinesis_iterator_expiry.py
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autosizer.embedded import KINESIS_CREDENTIALS, EmbeddedKinesis  # noqa: E402
from autosizer.pipeline.kinesis_source import ShardReader, kinesis_client  # noqa: E402

WAIT_S = 305


def main() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", KINESIS_CREDENTIALS["aws_access_key_id"])
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", KINESIS_CREDENTIALS["aws_secret_access_key"])
    os.environ.setdefault("AWS_DEFAULT_REGION", KINESIS_CREDENTIALS["region_name"])
    with EmbeddedKinesis() as kinesis:
        kinesis.create_stream("probe", 1)
        kinesis.produce("probe", [(b"k%d" % i, b"%d" % i) for i in range(30)])
        reader = ShardReader(kinesis_client(kinesis.endpoint), "probe", outage_s=30)
        start = reader.starting(0)
        iterator = reader.iterator(0, start)
        print(f"an iterator taken; waiting {WAIT_S} s for it to expire...", flush=True)
        time.sleep(WAIT_S)
        try:
            list(ShardReader(kinesis_client(kinesis.endpoint), "probe").records(iterator, 100))
            print("read without the shard: the iterator had not expired")
        except Exception as exc:  # noqa: BLE001 - printing what the endpoint answered is the point
            print(f"read without the shard (the lag probe's way): {type(exc).__name__}")
        records = list(reader.records(iterator, 100, start, shard=0))
        print(f"read as a batch reads (shard 0): {len(records)} of 30 records, the iterator taken again")


if __name__ == "__main__":
    main()
