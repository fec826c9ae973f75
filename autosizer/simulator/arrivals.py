"""Arrivals: a topic's records counted by the second of their own timestamps, read back from the
broker (or a Kinesis stream's, by their ApproximateArrivalTimestamp) after a run, as the load
`fit` replays (its `ARRIVALS` series).

The pipeline's probe reads the high watermark about once a second and Prometheus keeps one reading
a scrape, so the watermark's steps place a step in the input only between two reads: run 153's
landed at 30.0 s between reads at 29.74 and 31.15 s, its fit spread it over three seconds, and the
replay's batches after it came a second late. A record's timestamp says when it arrived to the
millisecond, where the producer stamped it at send (the client's default) or the topic stamps it
on append (`message.timestamp.type=LogAppendTime`). A producer that stamps its events' own times
gives something else, which `fit` notices against the watermark and then does not use.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import structlog

from autosizer.simulator.fit import Series

log = structlog.get_logger(__name__)

PROGRESS_EVERY_S = 10.0
# how long after the window a record stamped inside it may still be appended (producers' clocks
# and batching): the read stops at the first record stamped this long past the window's end
LATE_S = 10.0


def read_arrivals(bootstrap: str, topics: Sequence[str], start: float, end: float,
                  timeout_s: float = 10.0, late_s: float = LATE_S) -> Series:
    """Each partition's records counted per second [start + s, start + s + 1) of their
    timestamps, from the first offset stamped at `start` or later to the first stamped `late_s`
    past the window (or the end of the log): a fit run days later does not read the days since."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "autosizer-fit-arrivals",
                         "enable.auto.commit": False, "log_level": 0})
    counts: dict[tuple[str, int], np.ndarray] = {}
    try:
        wanted = []
        for topic in topics:
            found = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                raise ValueError(f"topic {topic!r} is not on {bootstrap}: check --topic and --bootstrap")
            wanted += [TopicPartition(topic, p, int(start * 1000)) for p in sorted(found.partitions)]
        firsts = consumer.offsets_for_times(wanted, timeout_s)
        after = [TopicPartition(tp.topic, tp.partition, int((end + 1 + late_s) * 1000)) for tp in wanted]
        ends = {(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else
                consumer.get_watermark_offsets(tp, timeout_s)[1]
                for tp in consumer.offsets_for_times(after, timeout_s)}
        counts = {key: np.zeros(int(end - start) + 1) for key in ends}
        unread = {(tp.topic, tp.partition): tp for tp in firsts if 0 <= tp.offset < ends[(tp.topic, tp.partition)]}
        consumer.assign(list(unread.values()))
        _count(consumer, counts, ends, set(unread), start, timeout_s,
               log.bind(bootstrap=bootstrap, topics=list(topics),
                        records=sum(ends[k] - tp.offset for k, tp in unread.items())))
    except KafkaException as exc:
        raise ValueError(f"reading the record times from {bootstrap} failed ({exc}); check --bootstrap") from None
    finally:
        consumer.close()
    return [({"topic": topic, "partition": str(p)}, [(start + s, float(c)) for s, c in enumerate(row)])
            for (topic, p), row in sorted(counts.items())]


def _count(consumer, counts: dict, ends: dict, left: set, start: float, timeout_s: float, bound) -> None:
    """Consume until every partition in `left` reaches its end, counting each record once in
    the second its timestamp falls in. A consume call waits until its batch is full or its
    timeout passes, so the calls are short and the stall is timed across them."""
    from confluent_kafka import TopicPartition

    read, shown, heard = 0, time.monotonic(), time.monotonic()
    while left:
        batch = consumer.consume(10_000, 0.2)
        if batch:
            heard = time.monotonic()
        else:  # a log's last offsets can hold no record (compacted, or a transaction's marker)
            left -= {(tp.topic, tp.partition) for tp in consumer.position(
                [TopicPartition(t, p) for t, p in left]) if tp.offset >= ends[(tp.topic, tp.partition)]}
        if left and not batch and time.monotonic() - heard > timeout_s:
            raise ValueError(f"no record came in {timeout_s:g} s with {len(left)} partitions unread; "
                             f"check the broker at --bootstrap")
        for message in batch:
            if message.error() is not None:
                raise ValueError(f"reading the record times: {message.error()}")
            key = (message.topic(), message.partition())
            if key not in left or message.offset() >= ends[key]:
                continue  # past the window: fetched with the batch, not its load
            read += 1
            s = int(message.timestamp()[1] / 1000 - start)
            if 0 <= s < counts[key].size:
                counts[key][s] += 1
            if message.offset() + 1 >= ends[key]:
                left.discard(key)
        if time.monotonic() - shown >= PROGRESS_EVERY_S:
            bound.info("arrivals.progress", read=read)
            shown = time.monotonic()
    bound.info("arrivals.read", read=read)


def read_kinesis_arrivals(stream: str, start: float, end: float, endpoint: str | None = None,
                          region: str | None = None, late_s: float = LATE_S, outage_s: float = 25.0) -> Series:
    """Each shard's records (closed shards' too: a re-shard mid-run splits the load among
    them) counted per second of their ApproximateArrivalTimestamp, the time Kinesis took each
    in. Each shard is read from the first record that arrived at `start` or later (an
    AT_TIMESTAMP iterator: the days before are not read) to the first that arrived `late_s` past
    the window, or its end. A throttled call (a shard serves five reads a second, shared with the
    stream's consumers) or an endpoint away is asked again for up to `outage_s`. Labels are the
    pipeline's: the stream, and the shard's number."""
    from botocore.exceptions import BotoCoreError, ClientError

    from autosizer.pipeline.kinesis_source import (
        KinesisUnavailable,
        ShardReader,
        kinesis_client,
        shard_id,
    )
    from autosizer.redaction import redact

    reader = ShardReader(kinesis_client(endpoint, region, attempts=2), stream, outage_s)
    bound = log.bind(stream=stream)
    counts: dict[int, np.ndarray] = {}
    read, shown = 0, time.monotonic()
    try:
        for shard in sorted(s.index for s in reader.shards()):
            row = counts[shard] = np.zeros(int(end - start) + 1)
            for record in reader.records(reader.at_timestamp(shard, start), 10**15, shard=shard):
                at = record["ApproximateArrivalTimestamp"].timestamp()
                if at >= end + 1 + late_s:
                    break
                if start <= at < end + 1:
                    row[int(at - start)] += 1
                read += 1
                if time.monotonic() - shown >= PROGRESS_EVERY_S:
                    bound.info("arrivals.progress", read=read, shard=shard_id(shard))
                    shown = time.monotonic()
    except (BotoCoreError, ClientError, KinesisUnavailable) as exc:
        # the reader's own line names the pipeline's flags: say what the endpoint answered
        detail = (f"{exc.__cause__}, for {outage_s:g}s" if isinstance(exc, KinesisUnavailable) and exc.__cause__
                  else str(exc))
        raise ValueError(f"reading the record times of Kinesis stream {stream!r} at {redact(endpoint or 'AWS')} "
                         f"failed ({redact(detail)}); check --kinesis-stream and --kinesis-endpoint") from None
    bound.info("arrivals.read", read=read, shards=len(counts))
    return [({"topic": stream, "partition": str(shard)}, [(start + s, float(c)) for s, c in enumerate(row)])
            for shard, row in sorted(counts.items())]
