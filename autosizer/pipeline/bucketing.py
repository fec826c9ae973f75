"""The Spark expression for key buckets; equal to `elasticity.key_bucket` row for row.

Spark's `xxhash64` is XXH64 with seed 42. A null key must hash its offset instead, and Spark's
`xxhash64(NULL)` is 42 rather than NULL, so the choice is an explicit `when`, not `coalesce`.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from autosizer.elasticity.factor import validate_factor


def key_hash_column(key: str | Column = "key", offset: str | Column = "offset") -> Column:
    """Signed 64-bit `xxhash64` of the key, or of the offset (a long) when the key is null."""
    key_col = F.col(key) if isinstance(key, str) else key
    offset_col = (F.col(offset) if isinstance(offset, str) else offset).cast("long")
    return F.when(key_col.isNull(), F.xxhash64(offset_col)).otherwise(F.xxhash64(key_col))


def key_bucket_column(
    factor: int, key: str | Column = "key", offset: str | Column = "offset"
) -> Column:
    """`pmod(h, factor)`: the same bucket as `key_bucket` (the signed and unsigned hash agree
    modulo any power of two)."""
    return F.pmod(key_hash_column(key, offset), F.lit(validate_factor(factor)))
