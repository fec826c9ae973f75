"""The pure domain model: key buckets, layouts, checkpoints and startpoints.

No module here does I/O except `store`, the Redis-backed metadata store, which is not imported by
this package so the model stays importable without a Redis client in sight.
"""

from autosizer.elasticity.buckets import key_bucket, key_buckets, key_hash, key_hashes
from autosizer.elasticity.checkpoints import Checkpoints, Progress
from autosizer.elasticity.factor import FACTORS, MAX_FACTOR, MIN_FACTOR, validate_factor
from autosizer.elasticity.groupers import GROUPERS
from autosizer.elasticity.layout import Barrier, Layout, TopicPartition, VirtualTask

__all__ = [
    "FACTORS",
    "GROUPERS",
    "MAX_FACTOR",
    "MIN_FACTOR",
    "Barrier",
    "Checkpoints",
    "Layout",
    "Progress",
    "TopicPartition",
    "VirtualTask",
    "key_bucket",
    "key_buckets",
    "key_hash",
    "key_hashes",
    "validate_factor",
]
