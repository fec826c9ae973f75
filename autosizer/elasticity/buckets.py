"""Key buckets: which virtual task of a partition a message belongs to.

`h` is XXH64 with seed 42 over the key bytes, read as unsigned; a null key hashes its offset as 8
little-endian bytes. That is exactly Spark's `xxhash64(key)` (and `xxhash64(offset)` for a long),
so the pipeline can bucket inside Spark and this module stays the reference. The hash does not
depend on Kafka's murmur2 partitioner, so buckets stay uniform inside one partition (SAMZA-2728).

The vectorized path is a numpy port of XXH64: keys are grouped by length and each group is hashed
column by column, so one batch of keys costs a few dozen array operations, not one call per key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from autosizer.elasticity.factor import validate_factor

SEED = 42

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_MASK64 = (1 << 64) - 1
_CHUNK = 1 << 16  # keys per pass: small enough that one pass's arrays stay in cache


def key_hash(key: bytes | None, offset: int) -> int:
    """Unsigned 64-bit XXH64 (seed 42) of the key, or of the offset when the key is null."""
    if key is None:
        return xxhash.xxh64_intdigest((offset & _MASK64).to_bytes(8, "little"), SEED)
    return xxhash.xxh64_intdigest(key, SEED)


def key_bucket(key: bytes | None, offset: int, factor: int) -> int:
    """The key bucket `key_hash(key, offset) mod factor`."""
    return key_hash(key, offset) % validate_factor(factor)


def key_buckets(keys: Any, offsets: Any, factor: int) -> np.ndarray:
    """Vectorized `key_bucket` over a pyarrow binary/string array or a sequence of bytes/None."""
    mask = np.uint64(validate_factor(factor) - 1)
    return (key_hashes(keys, offsets) & mask).astype(np.int64)


def key_hashes(keys: Any, offsets: Any) -> np.ndarray:
    """Vectorized `key_hash`: a uint64 array, one hash per key."""
    array = _as_binary_array(keys)
    offs = np.asarray(offsets, dtype=np.int64)
    if len(offs) != len(array):
        raise ValueError(f"got {len(array)} keys but {len(offs)} offsets: pass one offset per key")
    out = np.empty(len(array), dtype=np.uint64)
    for start in range(0, len(array), _CHUNK):
        stop = min(start + _CHUNK, len(array))
        out[start:stop] = _hash_chunk(array.slice(start, stop - start), offs[start:stop])
    return out


def _as_binary_array(keys: Any) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not isinstance(keys, pa.Array):
        keys = pa.array(list(keys) if not isinstance(keys, Sequence) else keys, type=pa.binary())
    if pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.large_binary() if pa.types.is_large_string(keys.type) else pa.binary())
    if pa.types.is_large_binary(keys.type):
        return keys
    if pa.types.is_binary(keys.type):
        return keys
    raise TypeError(f"keys must be binary or string, not {keys.type}: cast the key column first")


def _hash_chunk(array: pa.Array, offsets: np.ndarray) -> np.ndarray:
    n = len(array)
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    _, offsets_buf, data_buf = array.buffers()
    value_offsets = np.frombuffer(offsets_buf, dtype=offset_type)[array.offset : array.offset + n + 1]
    starts = value_offsets[:-1].astype(np.int64)
    lengths = (value_offsets[1:] - value_offsets[:-1]).astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    out = np.empty(n, dtype=np.uint64)

    valid = np.ones(n, dtype=bool) if array.null_count == 0 else ~array.is_null().to_numpy(False)
    if not valid.all():
        nulls = ~valid
        out[nulls] = _xxh64_long(offsets[nulls].astype(np.uint64))

    rows = np.flatnonzero(valid)
    if len(rows) == 0:
        return out
    row_lengths = lengths[rows]
    first, last = int(row_lengths.min()), int(row_lengths.max())
    if first == last and len(rows) == n and _contiguous(starts, first):
        base = int(starts[0])
        out[:] = _xxh64_rows(data[base : base + n * first].reshape(n, first))
        return out
    order = np.argsort(row_lengths, kind="stable")
    sorted_lengths = row_lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for group in np.split(order, bounds):
        length = int(row_lengths[group[0]])
        members = rows[group]
        gather = starts[members][:, None] + np.arange(length, dtype=np.int64)
        out[members] = _xxh64_rows(data[gather] if length else np.zeros((len(members), 0), np.uint8))
    return out


def _contiguous(starts: np.ndarray, length: int) -> bool:
    return bool(np.all(np.diff(starts) == length)) if len(starts) > 1 else True


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc: np.ndarray, lane: np.ndarray) -> np.ndarray:
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


def _merge_round(acc: np.ndarray, value: np.ndarray) -> np.ndarray:
    acc = acc ^ _round(np.zeros_like(value), value)
    return acc * _P1 + _P4


def _avalanche(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


def _xxh64_long(values: np.ndarray) -> np.ndarray:
    """XXH64 of each value's 8 little-endian bytes (Spark's hashLong)."""
    with np.errstate(over="ignore"):
        h = np.full(values.shape, np.uint64(SEED), dtype=np.uint64) + _P5 + np.uint64(8)
        h = h ^ _round(np.zeros_like(values), values)
        h = _rotl(h, 27) * _P1 + _P4
        return _avalanche(h)


def _xxh64_rows(rows: np.ndarray) -> np.ndarray:
    """XXH64 of every row of an (n, L) uint8 matrix: all keys of one length at once."""
    n, length = rows.shape
    seed = np.uint64(SEED)
    n_lanes = length // 8
    lanes = np.ascontiguousarray(rows[:, : n_lanes * 8]).view("<u8") if n_lanes else None
    lane = 0
    with np.errstate(over="ignore"):
        if length >= 32:
            v1 = np.full(n, seed + _P1 + _P2, dtype=np.uint64)
            v2 = np.full(n, seed + _P2, dtype=np.uint64)
            v3 = np.full(n, seed, dtype=np.uint64)
            v4 = np.full(n, seed - _P1, dtype=np.uint64)
            while lane + 4 <= (length // 32) * 4:
                v1 = _round(v1, lanes[:, lane])
                v2 = _round(v2, lanes[:, lane + 1])
                v3 = _round(v3, lanes[:, lane + 2])
                v4 = _round(v4, lanes[:, lane + 3])
                lane += 4
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = _merge_round(h, v)
        else:
            h = np.full(n, seed + _P5, dtype=np.uint64)
        h = h + np.uint64(length)
        while lane < n_lanes:
            h = h ^ _round(np.zeros(n, dtype=np.uint64), lanes[:, lane])
            h = _rotl(h, 27) * _P1 + _P4
            lane += 1
        pos = n_lanes * 8
        if length - pos >= 4:
            word = np.ascontiguousarray(rows[:, pos : pos + 4]).view("<u4")[:, 0].astype(np.uint64)
            h = h ^ (word * _P1)
            h = _rotl(h, 23) * _P2 + _P3
            pos += 4
        while pos < length:
            h = h ^ (rows[:, pos].astype(np.uint64) * _P5)
            h = _rotl(h, 11) * _P1
            pos += 1
        return _avalanche(h)
