"""Key buckets: the scalar reference, the vectorized path, and uniformity inside Kafka partitions."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import chisquare

from autosizer.elasticity import key_bucket, key_buckets, key_hash, key_hashes


def test_key_hash_is_unsigned_xxh64_seed_42_and_null_keys_hash_their_offset():
    assert key_hash(b"orders-1", 0) == xxhash.xxh64_intdigest(b"orders-1", 42)
    assert key_hash(None, 7) == xxhash.xxh64_intdigest((7).to_bytes(8, "little"), 42)
    assert key_hash(b"", 7) == xxhash.xxh64_intdigest(b"", 42) != key_hash(None, 7)
    assert 0 <= key_hash(b"x", 0) < 2**64


def test_key_bucket_refuses_a_factor_that_is_not_a_power_of_two():
    with pytest.raises(ValueError, match="power of two from 1 to 1024"):
        key_bucket(b"k", 0, 3)
    with pytest.raises(ValueError, match="power of two"):
        key_buckets([b"k"], [0], 2048)


@given(
    st.lists(st.one_of(st.none(), st.binary(max_size=80)), max_size=300),
    st.sampled_from([1, 2, 8, 64, 1024]),
)
def test_vectorized_buckets_equal_the_scalar_reference(keys, factor):
    offsets = list(range(1000, 1000 + len(keys)))
    expected = [key_bucket(k, o, factor) for k, o in zip(keys, offsets, strict=True)]
    assert key_buckets(keys, offsets, factor).tolist() == expected
    assert key_hashes(keys, offsets).tolist() == [key_hash(k, o) for k, o in zip(keys, offsets, strict=True)]


def test_vectorized_accepts_arrow_strings_slices_and_chunked_arrays():
    keys = [f"user-{i}".encode() for i in range(100)]
    offsets = np.arange(100)
    expected = [key_hash(k, 0) for k in keys]
    as_string = pa.array([k.decode() for k in keys], type=pa.large_string())
    assert key_hashes(as_string, offsets).tolist() == expected
    sliced = pa.array(keys).slice(10, 50)
    assert key_hashes(sliced, offsets[10:60]).tolist() == expected[10:60]
    chunked = pa.chunked_array([pa.array(keys[:40]), pa.array(keys[40:])])
    assert key_hashes(chunked, offsets).tolist() == expected


def test_keys_and_offsets_must_pair_up():
    with pytest.raises(ValueError, match="one offset per key"):
        key_buckets([b"a", b"b"], [0], 2)


def murmur2(data: bytes) -> int:
    """Kafka's default partitioner hash (org.apache.kafka.common.utils.Utils.murmur2)."""
    m, r = 0x5BD1E995, 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    tail = length % 4
    base = length - tail
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def test_murmur2_matches_kafka_reference_values():
    # Values from Kafka's UtilsTest.testMurmur2 (as signed ints).
    assert murmur2(b"21") == -973932308 & 0xFFFFFFFF
    assert murmur2(b"foobar") == -790332482 & 0xFFFFFFFF


@pytest.mark.parametrize("factor", [2, 8, 16])
def test_buckets_are_uniform_inside_one_kafka_partition(factor):
    """SAMZA-2728: with h independent of murmur2, keys of one partition spread over all buckets."""
    rng = random.Random(2728)
    partitions = 8
    keys = [f"customer-{rng.getrandbits(48)}".encode() for _ in range(80_000)]
    in_partition_3 = [k for k in keys if (murmur2(k) & 0x7FFFFFFF) % partitions == 3]
    counts = np.bincount(key_buckets(in_partition_3, [0] * len(in_partition_3), factor), minlength=factor)
    assert counts.min() > 0
    assert chisquare(counts).pvalue > 0.001
