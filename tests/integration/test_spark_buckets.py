"""The pipeline's Spark expression buckets every key exactly like `elasticity.key_bucket`."""

from __future__ import annotations

import random

import pytest
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from autosizer.elasticity import key_bucket, key_hash
from autosizer.pipeline.bucketing import key_bucket_column, key_hash_column

pytestmark = pytest.mark.integration


def test_spark_pmod_xxhash64_equals_key_bucket(spark):
    rng = random.Random(42)
    rows = []
    for offset in range(12_000):
        roll = rng.random()
        if roll < 0.05:
            key = None
        elif roll < 0.08:
            key = b""
        else:
            key = rng.randbytes(rng.randrange(1, 70))
        rows.append((key, rng.randrange(0, 2**40) if roll < 0.5 else offset))
    schema = StructType([StructField("key", BinaryType()), StructField("offset", LongType())])
    df = spark.createDataFrame(rows, schema)
    factors = [1, 2, 8, 64, 1024]
    out = df.select(
        "key", "offset", key_hash_column().alias("h"),
        *[key_bucket_column(f).alias(f"b{f}") for f in factors],
    ).collect()
    assert len(out) == len(rows)
    assert sum(1 for r in out if r["key"] is None) > 100
    assert sum(1 for r in out if r["key"] == b"") > 100
    for r in out:
        key = None if r["key"] is None else bytes(r["key"])
        assert r["h"] % 2**64 == key_hash(key, r["offset"])
        for f in factors:
            assert r[f"b{f}"] == key_bucket(key, r["offset"], f)
