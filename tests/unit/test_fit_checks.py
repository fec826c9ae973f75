"""The fitted model against its own run: the capacity while behind, the commit wait per batch."""

from __future__ import annotations

import numpy as np
import pytest

from autosizer.simulator.fit import Fitted
from autosizer.simulator.fit_checks import (
    capacity_check,
    commit_check,
    setup_line,
    slowest_thread_ratio,
)
from autosizer.simulator.job import JobModel
from autosizer.simulator.workloads import constant

JOB = JobModel(partitions=2, process_seconds=0.01, batch_seconds=3.0, batch_overhead_s=0.5,
               commit_latency_s=0.2, batch_gap_s=0.1, partition_weights=(0.5, 0.5),
               hot_share_table_measured=((1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125,
                                          0.00390625, 0.001953125, 0.0009765625),) * 2)


def test_the_capacity_check_compares_the_model_with_the_commits_of_the_longest_stretch_behind():
    """Factor 2 behind for 100 s, committing 1,000 records every 4 s (250/s): the model's 4
    tasks at 100/s, each a quarter of the input, at a duty of 3 / 3.5, say 343/s. A stretch that
    keeps up (lag under the deadline) says nothing."""
    seconds = 120
    factor = np.full(seconds, 2, dtype=np.int32)
    records = np.floor(np.arange(seconds) / 4) * 1000.0
    behind = Fitted(JOB, constant(250, seconds=seconds), np.full(seconds, 10.0), factor, np.zeros(seconds))
    lines = capacity_check(behind, records)
    assert lines[0] == "capacity while behind, model against the commits (1 stretch)"
    f, behind_s, commits, measured, model, ratio = lines[2].split()
    assert (int(f), int(behind_s), float(measured), float(model)) == (2, 105, 250.0, pytest.approx(343, abs=1))
    assert float(ratio) == pytest.approx(343 / 250, abs=0.01)
    keeping_up = Fitted(JOB, constant(250, seconds=seconds), np.full(seconds, 1.0), factor, np.zeros(seconds))
    assert capacity_check(keeping_up, records) == []


def test_the_commit_check_reads_each_batch_against_the_models_line_by_fill():
    """Light batches at the model's latency (0.2 s) and full ones at its fixed cost less its gap
    (0.4 s) read 1.00 in every bin; full ones twice as long read 0.50 there."""
    factor = np.full(60, 1, dtype=np.int32)
    light = [(t, 0.05, 0.2 + 0.2 * 0.05) for t in range(0, 30, 3)]
    full = [(t, 1.0, 0.4) for t in range(30, 60, 3)]
    lines = commit_check(JOB, factor, np.array(light + full))
    assert lines[1] == ("(the fit took the commit latency from the 10 batches under 50% full: together they read 1 "
                        "by construction, the fuller ones test the line)")
    rows = {line.split()[0]: line.split() for line in lines[3:]}
    assert rows["0.00-0.10"][1:] == ["10", "0.210", "0.210", "1.00"] and rows["0.99-1.00"][-1] == "1.00"
    slow = commit_check(JOB, factor, np.array(light + [(t, 1.0, 0.8) for t in range(30, 60, 3)]))
    assert slow[-2].split()[-1] == "0.50"  # the full bin
    assert lines[0].startswith("commit latency per batch by its read's fill (20 warm batches")
    assert commit_check(JOB, factor, np.zeros((0, 3))) == []


def test_a_slots_setup_is_shown_beside_the_commit_latency_that_holds_it():
    """The run's scrapes of the slowest slot's wall time beyond its busiest thread's work: their
    median and 90th percentile; a run whose pipeline does not export it shows no line."""
    points = [(float(t), v) for t, v in enumerate([0.007, 0.008, 0.008, 0.009, 0.02])]
    line = setup_line({"slot_setup": [({}, points)]})
    assert line is not None and "median 0.0080 s" in line and "(5 scrapes)" in line
    assert setup_line({}) is None


def test_a_batchs_busiest_thread_is_read_against_what_its_busiest_share_predicts():
    """Two partitions of equal weight, each thread a quarter of its partition at factor 4: the
    busiest thread holds 1/8 of a batch's records, so 800 records at 10 ms predict 1.0 s. Scrapes
    whose busiest thread worked 1.03 s read 1.03, counted only in the seconds asked and where
    the batch processed records; a run without the series shows none."""
    factor = np.full(20, 4, dtype=np.int32)
    busiest = [(float(t), 1.03 if t < 10 else 2.0) for t in range(20)]
    processed = [(float(t), 800.0 if t != 3 else 0.0) for t in range(20)]
    series = {"slot_busiest": [({}, busiest)], "batch_processed": [({}, processed)]}
    ratio, scrapes = slowest_thread_ratio(JOB, factor, series, 0.0, np.arange(20) < 10)
    assert (ratio, scrapes) == (pytest.approx(1.03), 9)
    assert slowest_thread_ratio(JOB, factor, {}, 0.0, np.ones(20, dtype=bool)) is None


def test_a_batchs_busiest_thread_is_read_against_the_layout_it_ran_in():
    """A merge at 10 s leaves two partitions of three, one with 3/4 of the input (the Kinesis
    demo's: run v1 read 1.47 against its first layout's busiest share). Busiest threads that
    work exactly their share read 1 on both sides of it."""
    merged = JobModel(partitions=3, process_seconds=0.01, batch_seconds=3.0, partition_weights=(0.5, 0.5, 0.0),
                      layout_changes_s=(10.0,), layout_weights=((0.25, 0.0, 0.75),),
                      hot_share_table_measured=JOB.hot_share_table_measured + JOB.hot_share_table_measured[:1])
    factor = np.full(20, 4, dtype=np.int32)
    busiest = [(float(t), 800 * (0.5 if t < 10 else 0.75) / 4 * 0.01) for t in range(20)]
    series = {"slot_busiest": [({}, busiest)], "batch_processed": [({}, [(float(t), 800.0) for t in range(20)])]}
    before, after = np.arange(20) < 10, np.arange(20) >= 10
    assert slowest_thread_ratio(merged, factor, series, 0.0, before) == (pytest.approx(1.0), 10)
    assert slowest_thread_ratio(merged, factor, series, 0.0, after) == (pytest.approx(1.0), 10)
