"""Key lanes: the finer cut of a virtual task that a slot's threads share.

A virtual task orders its keys; it need not order two different keys against each other. So a
slot cuts each task's records into lanes, `h mod lane_modulus(F)` (a refinement of the task's
bucket `h mod F`, invariant 1), and runs the lanes on a pool of as many threads as it has virtual
tasks. A lane runs on one thread at a time, in offset order, so every key keeps its order; a
thread whose lanes ran dry takes another task's lane instead of idling while a heavier bucket
finishes. The factor still sets the parallelism (threads = virtual tasks), but with few keys the
busiest *lane*, not the busiest bucket, is what one thread must carry alone.

A lane cut by a batch's deadline resumes at its own first unprocessed record: the task's
checkpoint is the lowest lane position plus the other lanes' positions as finer marks, the same
marks a merge leaves (checkpoints.Progress), so exactly-once needs nothing new.

Pure: this module is the capacity rule the pipeline exports and the simulator and the policy
read (`busiest_worker_shares`), so all three describe the job that really runs (invariant 7).
"""

from __future__ import annotations

import numpy as np

from autosizer.elasticity.factor import FACTORS, MAX_FACTOR, validate_factor

# Records a partition's busiest-thread counts must cover to update its hot shares: a backlog's
# last batch can read 3 records, all of one key, and that reads as one lane holding all of the
# input, which halves the exported capacity for the next batches. A batch that read fewer gives
# its records per residue instead, summed over batches until they reach this (a trickle is
# measured too). Until then the shares are unknown and read as even (the simulator's too).
MIN_SHARE_READ = 200

# Lanes per virtual task: enough that a few dozen keys per partition spread over the threads,
# few enough that a deadline-cut task's checkpoint carries at most this many marks.
LANES_PER_TASK = 16


def lane_modulus(factor: int) -> int:
    """The modulus of `h` that names a lane under `factor` (at most MAX_FACTOR)."""
    return min(MAX_FACTOR, validate_factor(factor) * LANES_PER_TASK)


def busiest_workers(residues: np.ndarray) -> tuple[float, ...]:
    """Per factor in FACTORS, the records the busiest thread of a partition must process, from
    its records counted per residue of `h mod MAX_FACTOR`.

    F threads share the partition's lanes: none can do less than an even 1/F of the records, and
    one must carry the busiest lane alone (a lane never runs on two threads at once). Records of a
    residue r belong to lane r mod lane_modulus(F).
    """
    counts = np.asarray(residues, dtype=np.float64)
    if counts.shape != (MAX_FACTOR,):
        raise ValueError(f"residue counts need {MAX_FACTOR} entries, not {counts.shape}")
    total = float(counts.sum())
    out = []
    for factor in FACTORS:
        lane = float(counts.reshape(-1, lane_modulus(factor)).sum(axis=0).max())
        out.append(max(total / factor, lane))
    return tuple(out)


def busiest_worker_shares(residues: np.ndarray) -> tuple[float, ...]:
    """`busiest_workers` as shares of the partition's records (1/F each for an empty one)."""
    total = float(np.asarray(residues, dtype=np.float64).sum())
    if total <= 0:
        return tuple(1.0 / f for f in FACTORS)
    return tuple(n / total for n in busiest_workers(residues))
