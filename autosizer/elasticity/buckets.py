"""Key buckets: which virtual task of a partition a message belongs to.

`h` is XXH64 with seed 42 over the key bytes, read as unsigned; a null key hashes its offset as 8
little-endian bytes. That is exactly Spark's `xxhash64(key)` (and `xxhash64(offset)` for a long),
so the pipeline can bucket inside Spark and this module stays the reference. The hash does not
depend on Kafka's murmur2 partitioner, so buckets stay uniform inside one partition (SAMZA-2728).

The vectorized path is a numpy port of XXH64: keys are grouped by length and each group is hashed
column by column, so one batch of keys costs a few dozen array operations, not one call per key.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    return _hash_array(array, offs)


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


def _hash_array(array: pa.Array, offsets: np.ndarray) -> np.ndarray:
    n = len(array)
    offset_type = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    _, offsets_buf, data_buf = array.buffers()
    value_offsets = np.frombuffer(offsets_buf, dtype=offset_type)[array.offset : array.offset + n + 1]
    starts = value_offsets[:-1].astype(np.int64)
    lengths = (value_offsets[1:] - value_offsets[:-1]).astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    out = np.empty(n, dtype=np.uint64)

    # words[i] is the 8 bytes starting at byte i (an unaligned, overlapping view): one read
    # fetches a whole XXH64 lane, so hashing costs one gather per 8 bytes of key, not per byte.
    # The zero padding lets reads run past the last key; masks discard what they pick up.
    padded = np.zeros(len(data) + 40, dtype=np.uint8)
    padded[: len(data)] = data
    words = np.ndarray((len(data) + 33,), dtype="<u8", buffer=padded, strides=(1,))

    if n and array.null_count == 0 and lengths.min() == lengths.max() and _contiguous(starts, int(lengths[0])):
        # Every key has one length and they sit back to back: strided views, no gather at all.
        length, base = int(lengths[0]), int(starts[0])
        for lo in range(0, n, _CHUNK):
            count = min(_CHUNK, n - lo)
            first = base + lo * length
            out[lo : lo + count] = _xxh64(
                count, length, lambda pos, f=first, c=count, k=length: words[f + pos :: k or 1][:c]
            )
        return out
    # Otherwise hash in input order (memory order), masking each step by key length. Null keys
    # have length 0 here and are overwritten with the hash of their offset.
    for lo in range(0, n, _CHUNK):
        out[lo : lo + _CHUNK] = _xxh64_varying(starts[lo : lo + _CHUNK], lengths[lo : lo + _CHUNK], words)
    if array.null_count:
        nulls = array.is_null().to_numpy(zero_copy_only=False)
        out[nulls] = _xxh64_long(offsets[nulls].astype(np.uint64))
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


def _xxh64_varying(starts: np.ndarray, lengths: np.ndarray, words: np.ndarray) -> np.ndarray:
    """XXH64 of keys of any lengths, in input order: every step runs on all keys, masked."""
    n = len(starts)
    ulen = lengths.astype(np.uint64)
    with np.errstate(over="ignore"):
        h = np.full(n, np.uint64(SEED) + _P5, dtype=np.uint64)
        longs = np.flatnonzero(lengths >= 32)
        if len(longs):
            h[longs] = _stripes(starts[longs], lengths[longs], words)
        h = h + ulen
        consumed = (lengths // 32) * 32
        for j in range(3):  # at most three 8-byte lanes remain after the 32-byte stripes
            pos = consumed + 8 * j
            active = pos + 8 <= lengths
            if not active.any():
                break
            mixed = _rotl(h ^ _round(np.zeros(n, dtype=np.uint64), words[starts + pos]), 27) * _P1 + _P4
            h = np.where(active, mixed, h)
        pos = (lengths // 8) * 8
        rest = lengths - pos
        tail = words[starts + pos]
        active = rest >= 4
        if active.any():
            mixed = _rotl(h ^ ((tail & np.uint64(0xFFFFFFFF)) * _P1), 23) * _P2 + _P3
            h = np.where(active, mixed, h)
            tail = np.where(active, tail >> np.uint64(32), tail)
            rest = rest - 4 * active
        for b in range(3):
            active = rest > b
            if not active.any():
                break
            mixed = _rotl(h ^ ((tail & np.uint64(0xFF)) * _P5), 11) * _P1
            h = np.where(active, mixed, h)
            tail = tail >> np.uint64(8)
        return _avalanche(h)


def _stripes(starts: np.ndarray, lengths: np.ndarray, words: np.ndarray) -> np.ndarray:
    """The 32-byte-stripe phase of XXH64 for keys of 32 bytes or more (before `+ length`)."""
    n = len(starts)
    seed = np.uint64(SEED)
    v1 = np.full(n, seed + _P1 + _P2, dtype=np.uint64)
    v2 = np.full(n, seed + _P2, dtype=np.uint64)
    v3 = np.full(n, seed, dtype=np.uint64)
    v4 = np.full(n, seed - _P1, dtype=np.uint64)
    stripes = lengths // 32
    for k in range(int(stripes.max())):
        active = stripes > k
        base = starts + 32 * k
        v1 = np.where(active, _round(v1, words[base]), v1)
        v2 = np.where(active, _round(v2, words[base + 8]), v2)
        v3 = np.where(active, _round(v3, words[base + 16]), v3)
        v4 = np.where(active, _round(v4, words[base + 24]), v4)
    h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
    for v in (v1, v2, v3, v4):
        h = _merge_round(h, v)
    return h


def _xxh64(n: int, length: int, word_at: Callable[[int], np.ndarray]) -> np.ndarray:
    """XXH64 of n keys of one length; `word_at(i)` gives each key's 8 bytes from byte i."""
    seed = np.uint64(SEED)
    n_lanes = length // 8
    lane = 0
    with np.errstate(over="ignore"):
        if length >= 32:
            v1 = np.full(n, seed + _P1 + _P2, dtype=np.uint64)
            v2 = np.full(n, seed + _P2, dtype=np.uint64)
            v3 = np.full(n, seed, dtype=np.uint64)
            v4 = np.full(n, seed - _P1, dtype=np.uint64)
            while lane + 4 <= (length // 32) * 4:
                v1 = _round(v1, word_at(8 * lane))
                v2 = _round(v2, word_at(8 * lane + 8))
                v3 = _round(v3, word_at(8 * lane + 16))
                v4 = _round(v4, word_at(8 * lane + 24))
                lane += 4
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            for v in (v1, v2, v3, v4):
                h = _merge_round(h, v)
        else:
            h = np.full(n, seed + _P5, dtype=np.uint64)
        h = h + np.uint64(length)
        while lane < n_lanes:
            h = h ^ _round(np.zeros(n, dtype=np.uint64), word_at(8 * lane))
            h = _rotl(h, 27) * _P1 + _P4
            lane += 1
        pos = n_lanes * 8
        if pos < length:
            tail = word_at(pos)  # the last 1..7 bytes, read once
            if length - pos >= 4:
                h = h ^ ((tail & np.uint64(0xFFFFFFFF)) * _P1)
                h = _rotl(h, 23) * _P2 + _P3
                tail = tail >> np.uint64(32)
                pos += 4
            while pos < length:
                h = h ^ ((tail & np.uint64(0xFF)) * _P5)
                h = _rotl(h, 11) * _P1
                tail = tail >> np.uint64(8)
                pos += 1
        return _avalanche(h)
