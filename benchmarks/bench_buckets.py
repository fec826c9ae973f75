"""Bucketing throughput: vectorized `key_buckets` vs `key_bucket` per key, measured side by side.

Run: .venv/bin/python benchmarks/bench_buckets.py [--keys N]
"""

from __future__ import annotations

import argparse
import time
import uuid

import numpy as np
import pyarrow as pa

from autosizer.elasticity import key_bucket, key_buckets


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--factor", type=int, default=8)
    args = parser.parse_args()
    n, factor = args.keys, args.factor
    rng = np.random.default_rng(7)
    offsets = np.arange(n, dtype=np.int64)
    shapes = {
        "fixed 16-byte keys": pa.array([b"customer-%07d" % i for i in rng.integers(0, 10**7, n)]),
        "uuid strings (36 bytes)": pa.array([str(uuid.UUID(int=int(i))).encode() for i in rng.integers(0, 2**62, n)]),
        "customer ids, 10-16 bytes": pa.array([b"cust-%d" % i for i in rng.integers(0, 10**11, n)]),
        "mixed 1-47 bytes, 1% null": pa.array(
            [None if i % 100 == 0 else b"k" * int(1 + i % 40) + str(i).encode() for i in range(n)]
        ),
    }
    sample = 200_000
    print(f"{n:,} keys, factor {factor}, best of 3; per-key on the first {sample:,}")
    print(f"{'keys':32} {'vectorized keys/s':>18} {'per-key keys/s':>15} {'ratio':>7}")
    for label, keys in shapes.items():
        vec = best_of(lambda k=keys: key_buckets(k, offsets, factor), 3)
        py_keys = keys.slice(0, sample).to_pylist()
        scalar = best_of(
            lambda pk=py_keys: [key_bucket(k, o, factor) for k, o in zip(pk, range(sample), strict=True)], 3
        )
        vec_rate, scalar_rate = n / vec, sample / scalar
        print(f"{label:32} {vec_rate:18,.0f} {scalar_rate:15,.0f} {vec_rate / scalar_rate:6.1f}x")


if __name__ == "__main__":
    main()
