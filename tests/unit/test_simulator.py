"""The simulator's parts: workloads, the job model, the queue model, scores, traces and the CLI."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from autosizer.actuators.verification import lag_got_worse, slowest, tail_times
from autosizer.controller.cli import main
from autosizer.elasticity import FACTORS
from autosizer.policies import Decision, Guards
from autosizer.simulator import engine, workloads
from autosizer.simulator.engine import Rescale, Run, simulate
from autosizer.simulator.fit_checks import steady_wait_ratio
from autosizer.simulator.job import JobModel, KeySkew
from autosizer.simulator.scores import reversals, score
from autosizer.simulator.traces import load_trace, trace_names


class Fixed:
    """A policy that always wants one factor, to drive the model by hand."""

    name = "fixed"

    def __init__(self, factor: int):
        self.factor = factor

    def decide(self, observation, state=None):
        return Decision(self.factor, "fixed"), state


class DutyWatch(Fixed):
    """`Fixed`, keeping the (time, duty) every tick showed it in `seen`."""

    def __init__(self, factor: int):
        super().__init__(factor)
        self.seen: list[tuple[float, float]] = []

    def decide(self, observation, state=None):
        self.seen.append((observation.time, observation.duty))
        return super().decide(observation, state)


def duties(workload, job: JobModel) -> list[tuple[float, float]]:
    """Each 5 s tick's (time, duty) at factor 1: what the daemon's capacity reads of the batch's
    fixed cost."""
    watch = DutyWatch(1)
    simulate(workload, job, watch, tick_s=5)
    return watch.seen


def test_lag_follows_the_queue_arithmetic_exactly():
    # 4 partitions at 10 ms per record: 100/s per task. Input 600/s over F=1 (400/s) grows the lag
    # by 200 records every second; nothing is noisy (cv 0, noise 0).
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=50),
                   batch_seconds=0)  # continuous processing
    run = simulate(workloads.constant(600, seconds=60, noise=0), job, Fixed(1), tick_s=15)
    assert np.allclose(run.lag_records, 200 * np.arange(1, 61))
    # The lag in seconds is the oldest record's age, in the busiest partition: it takes 600w/s
    # and processes 100/s, so after t seconds its oldest waiting record arrived at 100t/600w.
    busiest = 600 * job.weights.max()
    assert np.allclose(run.lag_seconds, np.arange(1, 61) * (1 - 100 / busiest))
    assert run.factor.tolist() == [1] * 60 and not run.rescales


def test_a_rescale_pauses_processing_for_the_restart_downtime():
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, restart_downtime_s=5,
                   skew=KeySkew(keys=2000), batch_seconds=0)
    guards = Guards(cooldown_s=0, scale_down_delay_s=0)
    run = simulate(workloads.constant(300, seconds=120, noise=0), job, Fixed(4), guards, tick_s=15)
    # The daemon ticks when it starts, as the real one does: the rescale is at second 0.
    assert [(r.time, r.old, r.new) for r in run.rescales] == [(0, 1, 4)]
    # After the rescale nothing is processed for 5 s: 300 records/s pile up, then drain.
    assert np.allclose(run.lag_records[:5], 300 * np.arange(1, 6))
    assert run.lag_records[-1] == 0
    assert np.all(run.factor == 4)


def test_each_rescale_stops_for_its_measured_restart_which_the_daemon_then_reads():
    """A fitted run's restarts in order, coming round again past the last (run 124's were 0.42,
    1.30 and 0.32 s; its replay with the median for each read 0.71 of its lag peak). The daemon
    assumes 10 s until the job has restarted once, then reads the pipeline's measure of the last."""
    seen: list[tuple[float, float]] = []

    class Flip:
        name = "flip"

        def decide(self, observation, state=None):
            seen.append((observation.time, observation.restart_downtime_s))
            return Decision(2 if observation.factor == 1 else 1, "flip"), state

    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, restart_downtime_s=1.0,
                   restarts_measured_s=(2.0, 6.0), skew=KeySkew(keys=2000), batch_seconds=0,
                   verify_window_s=0)
    guards = Guards(cooldown_s=0, scale_down_delay_s=0)
    run = simulate(workloads.constant(300, seconds=120, noise=0), job, Flip(), guards, tick_s=30)
    assert [(r.time, r.old, r.new) for r in run.rescales[:4]] == [(0, 1, 2), (30, 2, 1), (60, 1, 2), (90, 2, 1)]
    # nothing is processed for the restart: 300 records/s pile up for 2 s, 6 s, 2 s, 6 s
    peaks = [run.lag_records[at:at + 30].max() for at in (0, 30, 60, 90)]
    assert peaks == pytest.approx([600, 1800, 600, 1800])
    assert seen[:4] == [(0, 10.0), (30, 2.0), (60, 6.0), (90, 2.0)]
    assert JobModel().restart_s(3) == 5.0  # none measured: the one figure


def test_a_rescale_ends_at_the_new_generations_first_commit_not_a_deadline_later():
    """The daemon records a rescale (and ticks again, and starts its cooldown) at the new
    layout's first commit. A first batch with little to read commits before its deadline: the
    real ramps' 1 -> 2 ended 2.4-3.2 s after the tick where a deadline's estimate said 3.9-4.3 s."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, restart_downtime_s=0.5,
                   batch_seconds=3.0, batch_overhead_s=0.2, verify_window_s=0)
    run = simulate(workloads.constant(100, seconds=60, noise=0), job, Fixed(2), tick_s=5)
    (rescale,) = run.rescales
    assert rescale.time == 0 and 0.5 < rescale.done < job.actuation_s(2)
    committed = np.flatnonzero(np.isfinite(run.sawtooth[:, 1]))[0]
    assert rescale.done == pytest.approx(committed + float(run.sawtooth[committed, 1]))


def test_micro_batches_commit_at_the_deadline_plus_the_fixed_cost():
    """The pipeline's batch structure: 2 s deadline, 1 s fixed cost, 1 s trigger. A saturated
    job commits 2 s of work every 3 s (duty 2/3), and lag only falls at commits."""
    job = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                   batch_seconds=2.0, batch_overhead_s=1.0, trigger_s=1.0, run_ahead=10.0)
    assert job.duty() == pytest.approx(2 / 3)
    run = simulate(workloads.constant(100, seconds=90, noise=0), job, Fixed(1), tick_s=15)
    # 100/s arrive, 100/s processed while working: the backlog grows at 100/3 per second.
    assert run.lag_records[-1] == pytest.approx(100 * 90 * (1 - 2 / 3), abs=400)  # +- a batch and the first trigger
    assert np.all(np.diff(run.lag_records[30:]) >= -200 - 1e-6)  # drops only by one batch of work
    # The oldest record's age grows with the backlog: a third of the time lost, never 10^9 s.
    assert run.lag_seconds[-1] == pytest.approx(90 / 3, abs=4)
    # At zero input nothing new arrives, and the age of what is left is what is reported.
    idle = simulate(workloads.constant(0, seconds=60, noise=0), job, Fixed(1), tick_s=15)
    assert idle.lag_seconds.max() == 0 and idle.lag_records.max() == 0


def test_an_unsaturated_job_lags_by_about_one_batch_cycle():
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000))
    run = simulate(workloads.constant(100, seconds=120, noise=0), job, Fixed(1), tick_s=15)
    # 25/s per partition at 100/s: a batch works 0.25 s, pays 0.6 s and waits for the 1 s trigger.
    assert 0 < run.lag_seconds[20:].mean() < 2.0 and run.lag_seconds.max() < 2.5


def test_key_skew_and_hot_keys_shape_the_buckets():
    uniform = JobModel(partitions=8, skew=KeySkew(keys=5000)).hot_shares
    assert all(abs(uniform[f].mean() * f - 1) < 0.2 for f in (2, 4, 8))
    hot = JobModel(partitions=8, skew=KeySkew(hot_key_share=0.6, hot_partition=3)).hot_shares
    assert all(hot[f][3] >= 0.6 for f in (1, 2, 64, 1024))  # no factor splits one key
    zipf = JobModel(partitions=8, skew=KeySkew(zipf=1.2)).weights
    assert zipf.max() > 2 / 8 and np.isclose(zipf.sum(), 1)


def test_the_simulated_job_shares_its_threads_over_key_lanes_as_the_pipeline_does():
    """Few keys: the busiest thread carries an even share while the lanes spread (the pipeline's
    `busiest_workers`), not the busiest bucket; past one key per thread, its busiest lane."""
    from autosizer.elasticity import MAX_FACTOR, key_hashes
    from autosizer.elasticity.lanes import busiest_worker_shares

    job = JobModel(partitions=1, skew=KeySkew(keys=50))
    residues = (key_hashes([f"key-{i}".encode() for i in range(50)], np.zeros(50, dtype=np.int64))
                & np.uint64(MAX_FACTOR - 1)).astype(np.int64)
    expected = busiest_worker_shares(np.bincount(residues, minlength=MAX_FACTOR) / 50)
    for i, factor in enumerate((1, 2, 4, 8, 16, 32, 64)):
        assert job.hot_shares[factor][0] == pytest.approx(expected[i])
    assert job.hot_shares[4][0] == pytest.approx(0.25)  # 50 keys over 64 lanes: an even quarter
    assert job.hot_shares[64][0] >= 1 / 50  # one key is one thread's work


def test_cpu_bound_work_stops_scaling_at_the_cores():
    job = JobModel(partitions=16, process_seconds=0.02, cpu_fraction=1.0, cores=64)
    assert job.useful_factor() == 4
    capacity = {f: 16 * f * job.task_rate(f) for f in (1, 2, 4, 8, 16)}
    assert capacity[4] == capacity[16] == 64 / 0.02
    assert JobModel(cpu_fraction=0.0).useful_factor() == 1024


def test_scores_count_reversals_and_rescales_to_converge():
    workload = workloads.step(100, 200, at=100, seconds=8000, noise=0)
    factor = np.ones(8000, dtype=np.int32)
    run = Run("p", workload, JobModel(partitions=2), 15, np.zeros(8000), np.zeros(8000), factor,
              [Rescale(50, 1, 2, ""), Rescale(200, 2, 4, ""), Rescale(1000, 4, 2, ""),
               Rescale(7000, 2, 1, "")])
    run.lag_seconds[:40] = 100.0
    result = score(run, slo_s=30)
    assert result.violation_s == 40
    assert result.rescales == 4
    assert result.reversals_1h == 1  # 2 -> 4 then 4 -> 2 within an hour; 7000 s is not
    assert result.converge_rescales == 3  # after the step at 100 s



def test_a_part_of_a_run_is_scored_as_a_run_of_its_own():
    """A week of a daemon that ran the year: the part's seconds, its clock and its own rescales,
    their times from the part's start; the whole run as one part scores as the run."""
    workload = dataclasses.replace(workloads.step(100, 200, at=100, seconds=8000, noise=0), start=1_000.0)
    run = Run("p", workload, JobModel(partitions=2), 15, np.zeros(8000), np.arange(8000.0),
              np.ones(8000, dtype=np.int32), [Rescale(50, 1, 2, ""), Rescale(200, 2, 4, ""),
                                              Rescale(1000, 4, 2, "")])
    assert score(run.part(0, 8000)) == score(run)
    part = run.part(150, 1150)
    assert part.workload.start == 1_150.0 and part.workload.changes == ()
    assert [(r.time, r.old, r.new) for r in part.rescales] == [(50, 2, 4), (850, 4, 2)]
    assert score(part).violation_s == 1000  # its lag reads 150 to 1,149 s, every second over 30
    assert score(part).reversals_1h == 1 and run.part(0, 150).workload.changes == (100,)
    for begin, end in ((0, 0), (-1, 10), (10, 8001)):
        with pytest.raises(ValueError, match="a part must lie within 0 to 8000 s"):
            run.part(begin, end)

def test_reversals_within_a_pressed_hour_are_counted_by_the_suites_rule():
    """The real runs' report counts reversals within a pressed day's hour (31 s) with the rule
    the suite scores: a change opposite to the one before, sooner than the window."""
    path = [(40, +1), (60, -1), (100, +1), (110, +1), (200, -2)]
    assert reversals(path, within_s=31) == 1  # 40 -> 60 only; 110 -> 200 is 90 s
    assert reversals(path, within_s=100) == 3  # not 100 -> 110: the same way
    assert reversals([], within_s=31) == reversals([(5, 1)], within_s=31) == 0


def test_scale_up_delay_runs_from_the_start_of_a_sustained_overload():
    """2 partitions at 100/s per task (no batches): factor 1 takes 200/s, 2 takes 400/s. A step
    from 100 to 300/s at 1,000 s overloads factor 1 from then on; the scale-up comes at
    1,045 s: 45 s. A burst shorter than 30 s, or one no factor could take, is no delay."""
    job = JobModel(partitions=2, batch_seconds=0)
    rate = np.full(3000, 100.0)
    rate[1000:] = 300.0
    rate[500:520] = 1000.0  # 20 s: not sustained
    workload = workloads.Workload("w", rate)
    factor = np.ones(3000, dtype=np.int32)
    factor[1045:] = 2
    run = Run("p", workload, job, 5, np.zeros(3000), np.zeros(3000), factor, [Rescale(1045, 1, 2, "")])
    assert score(run).scale_up_delay_s == 45
    never = Run("p", workload, job, 5, np.zeros(3000), np.zeros(3000), np.ones(3000, dtype=np.int32), [])
    assert score(never).scale_up_delay_s == 3000 - 1000  # overloaded to the end, never scaled
    beyond = np.full(3000, 10.0 ** 9)
    hopeless = Run("p", workloads.Workload("w", beyond), job, 5, np.zeros(3000), np.zeros(3000),
                   np.ones(3000, dtype=np.int32), [])
    assert score(hopeless).scale_up_delay_s == 0


def test_workloads_are_seeded_and_validated(tmp_path):
    a, b = workloads.diurnal(seconds=86400), workloads.diurnal(seconds=86400)
    assert np.array_equal(a.rate, b.rate)
    assert workloads.step().changes == (1800,)
    with pytest.raises(ValueError, match="unknown workload 'sine'"):
        workloads.build("sine")
    with pytest.raises(ValueError, match="amplitude"):
        workloads.build("diurnal", amplitude=1.5)
    path = tmp_path / "rates.csv"
    path.write_text("time,rate\n0,100\n10,200\n")
    replay = workloads.build("csv", path=str(path))
    assert replay.seconds == 11 and replay.rate[5] == 150


@pytest.mark.parametrize("kind, settings, message", [
    ("wave", {"high": "2000"}, "workload 'wave': high must be a finite number >= 0, not '2000'"),
    ("step", {"at": "x"}, "workload 'step': at must be a finite number >= 0"),
    ("step", {"before": -5}, "before must be a finite number >= 0, not -5"),
    ("outage", {"down": float("nan")}, "down must be a finite number >= 0"),
    ("workday", {"opens": "x"}, "opens must be a finite number >= 0"),
    ("constant", {"noise": "x"}, "noise must be a finite number >= 0"),
    ("step", {"seed": True}, "seed must be a finite number >= 0, not True"),
    ("step", {"at": 99_999, "seconds": 3600}, r"at \(99999 s\) must be within the run's 3600 s"),
    ("flash-crowd", {"at": 7200, "seconds": 7200}, "must be within the run's 7200 s"),
    ("ramp", {"begin": 600, "finish": 60}, "begin .* must come before its finish"),
    ("wave", {"seconds": "3600"}, "seconds must be a finite number"),
    ("csv", {}, r"workload 'csv' needs path: --param path=\.\.\. \(or path = \.\.\. in a trace\)"),
    ("step", {"high": 9000}, "workload 'step' has no setting 'high': its settings are before, after, at, "
                             "seconds, noise, seed"),
    ("csv", {"path": "x.csv", "columns": "rate"}, "workload 'csv' has no setting 'columns': its settings are "
                                                  "path, column, time_column"),
    ("dataset", {"dataset": "fpp3/bank_calls", "counts": "Calls"}, "workload 'dataset' has no setting 'counts': "
                                                                   "its settings are dataset, package, count, time"),
    ("constant", {"seconds": 1e300}, r"seconds: 1e\+300 s at 1 s is more than a simulation runs \(366 days\)"),
    ("prometheus", {"url": "http://127.0.0.1:1"}, "workload 'prometheus' needs query"),
    ("dataset", {}, "workload 'dataset' needs dataset: --param dataset=PACKAGE/ITEM"),
    ("prometheus", {"url": "http://127.0.0.1:1", "query": "up", "start": "2026-01-01", "end": "2026-01-02",
                    "step_s": 0}, "step_s must be a whole number of seconds >= 1"),
    ("prometheus", {"url": "http://127.0.0.1:1", "query": "up", "start": "2026-01-02", "end": "2026-01-01"},
     "end 2026-01-01 must be after start 2026-01-02"),
])
def test_a_synthetic_workload_refuses_a_bad_setting_in_one_line_naming_it(kind, settings, message):
    """A trace file's or `--param`'s values: a text number or a negative rate gave a Python error
    from inside the builder (`'<' not supported between 'str' and 'int'`) or ran a negative input;
    a step after the run's end ran no step; a missing setting was Python's "missing 1 required
    positional argument" and a misspelt one its "unexpected keyword argument" (the builder's
    settings now listed); a step of 0 or an end before the start went to Prometheus as asked. No
    Prometheus is reached here: each is refused before the query."""
    with pytest.raises(ValueError, match=message) as caught:
        workloads.build(kind, **settings)
    assert "\n" not in str(caught.value)


def test_a_csv_replay_refuses_bad_files_in_one_line_naming_the_fix(tmp_path):
    with pytest.raises(ValueError, match="no such file; check the path"):
        workloads.build("csv", path=str(tmp_path / "missing.csv"))
    path = tmp_path / "rates.csv"
    path.write_text("time,rate\n0,100\n10,200\n")
    with pytest.raises(ValueError, match=r"name the rate column with column=NAME \(--param column=NAME"):
        workloads.build("csv", path=str(path), column="records")
    path.write_text("time,rate\n0,100\n10,lots\n")
    with pytest.raises(ValueError, match="row 3: 'rate' is 'lots', not a number"):
        workloads.build("csv", path=str(path))
    path.write_text("time,rate\n0,100\n20,300\n10,200\n")
    with pytest.raises(ValueError, match="row 4 \\(10\\) does not come after row 3 \\(20\\); sort the file by 'time'"):
        workloads.build("csv", path=str(path))
    path.write_text("time,rate\nnoon,100\n")
    with pytest.raises(ValueError, match="'time' is 'noon': use seconds or ISO 8601"):
        workloads.build("csv", path=str(path))


def test_a_csv_replay_reads_iso_timestamps_a_length_and_change_points(tmp_path):
    path = tmp_path / "rates.csv"
    path.write_text("time,rate\n2026-11-23T10:00:00Z,100\n2026-11-23T10:01:00Z,700\n2026-11-23T10:02:00Z,700\n")
    replay = workloads.build("csv", path=str(path), changes="30,60")
    assert replay.seconds == 121 and replay.rate[30] == 400 and replay.changes == (30, 60)
    assert replay.start == 1_795_428_000, "the replay runs on its rows' clock (the history's days)"
    assert workloads.build("csv", path=str(path), seconds=90).seconds == 90
    with pytest.raises(ValueError, match="holds 121 s of rates, not the 3600 s asked for"):
        workloads.build("csv", path=str(path), seconds=3600)
    with pytest.raises(ValueError, match="change at '500' s is outside the replay's 0..120 s"):
        workloads.build("csv", path=str(path), changes="500")


def test_simulate_replays_a_csv_for_the_hours_asked(tmp_path, capsys):
    path = tmp_path / "rates.csv"
    path.write_text("time,rate\n0,1000\n7200,3000\n")
    assert main(["simulate", "--workload", "csv", "--param", f"path={path}", "--param", "changes=600",
                 "--hours", "1", "--partitions", "4", "--policy", "utilization", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["converge_rescales"] is not None  # a replay with change points is scored on them
    assert main(["simulate", "--workload", "csv", "--param", f"path={path}", "--hours", "3"]) == 2
    assert "holds 7201 s of rates, not the 10800 s asked for" in capsys.readouterr().err


def test_every_trace_loads_and_a_bad_one_is_named(tmp_path):
    assert {"step-up", "step-down", "diurnal", "flash-crowd", "slow-ramp", "hot-key",
            "cpu-bound"} <= set(trace_names())
    for name in trace_names():
        assert load_trace(name).workload.seconds > 0
    with pytest.raises(ValueError, match="shape must be one of saw, sine, square"):
        workloads.build("wave", shape="triangle")
    with pytest.raises(ValueError, match="opens .* must be hours"):
        workloads.build("workday", opens=20, closes=8)
    bad = tmp_path / "bad.toml"
    bad.write_text("[job]\npartitions = 4\n")
    with pytest.raises(ValueError, match="needs a \\[workload\\] table"):
        load_trace(str(bad))
    with pytest.raises(ValueError, match="unknown trace 'nope'"):
        load_trace("nope")


@pytest.mark.parametrize("job, message", [
    ('[job]\npartitions = "4"', "job setting partitions needs a whole number, not '4'"),
    ("[job]\npartitions = 4.5", "job setting partitions needs a whole number, not 4.5"),
    ("[job]\ncores = true", "job setting cores needs a whole number, not True"),
    ('[job]\nmetrics_age_s = "x"', "job setting metrics_age_s needs a number, not 'x'"),
    ('[job]\npartitions = 4\n[job.skew]\nzipf = "x"', "job skew setting zipf needs a number"),
    ("[job]\nprocess_ms = 5", r"\[job\] has no setting 'process_ms': use partitions, process_seconds"),
    ("[job]\npartitions = 4\n[job.skew]\nzipfy = 1", r"\[job.skew\] has no setting 'zipfy': use keys, zipf"),
    ("[job]\nskew = 5", r"\[job.skew\] must be a table of settings, not 5"),
    ("[jobs]\npartitions = 4", r"no table or key 'jobs' in a trace: use description, \[workload\], \[job\]"),
    # a range is named with the value; a size the simulator cannot draw is refused before it hangs
    # (100 million partitions, or a billion keys, ran out of memory hashing every key)
    ("[job]\ncpu_fraction = 2", "job setting cpu_fraction must be from 0 to 1, not 2"),
    ("[job]\nrestarts_measured_s = [0.4, -1]", r"job setting restarts_measured_s needs finite seconds >= 0, not \(0.4, -1\)"),
    ('[job]\nrestarts_measured_s = ["x"]', r"job setting restarts_measured_s needs finite seconds >= 0, not \('x',\)"),
    ("[job]\nrestarts_measured_s = [nan]", "job setting restarts_measured_s needs finite seconds >= 0"),
    ("[job]\npartitions = 100000000", "job setting partitions must be from 1 to 10,000, not 100000000"),
    ("[job]\npartitions = 4\n[job.skew]\nkeys = 1000000000",
     "over 4 partitions is 4,000,000,000 keys, .* at most 2,000,000, so keys = 500,000 or fewer"),
    ("[job]\npartitions = 2000", r"skew.keys \(2,000 a partition\) over 2,000 partitions .* keys = 1,000 or fewer"),
    ("[job]\npartitions = 2\nlayout_changes_s = [30.0]\nlayout_weights = [[0.5, 0.5]]",
     "job setting layout_changes_s .* needs as many rows of layout_weights .* and partition_weights"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0, 20.0]\n"
     "layout_weights = [[0.5, 0.5], [0, 1]]", r"job setting layout_changes_s needs rising seconds > 0, not \(30.0, 20.0\)"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[0.5]]",
     r"job setting layout_weights needs rows of 2 finite shares >= 0 .*, not \(0.5,\)"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[0, 0]]",
     "job setting layout_weights needs rows of 2 finite shares >= 0 with a positive sum"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_waits_s = [5.0, 1.0]", r"job setting layout_waits_s needs one finite wait >= 0 in seconds per layout "
     r"change \(1\), not \(5.0, 1.0\)"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_waits_s = [-5.0]", "job setting layout_waits_s needs one finite wait >= 0"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_waits_s = [40.0]", "the change at 30 s cannot wait 40 s, from before the layout it follows"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[0, 1]]\n"
     "layout_waits_s = [5.0]", "the change at 30 s takes partitions away, and only a growth .* can wait: set its wait to 0"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_restarts = [1]", r"job setting layout_restarts needs one boolean \(true or false\) per layout change"),
    ("[job]\npartitions = 3\npartition_weights = [1, 0, 0]\nlayout_changes_s = [30.0]\n"
     "layout_weights = [[0, 1, 1]]\nlayout_closed_s = [inf]",
     r"job setting layout_closed_s needs one finite second >= 0 per layout change \(1; 0: none\), not \(inf,\)"),
    ("[job]\npartitions = 3\npartition_weights = [1, 0, 0]\nlayout_changes_s = [30.0]\n"
     "layout_weights = [[0, 1, 1]]\nlayout_closed_s = [40.0]",
     "the change at 30 s retires partitions closed at 40 s, which must lie from 0 s to 30 s"),
    ("[job]\npartitions = 3\npartition_weights = [1, 0, 0]\nlayout_changes_s = [30.0]\n"
     "layout_weights = [[1, 1, 1]]\nlayout_closed_s = [20.0]",
     r"the change at 30 s does not retire partitions for others \(a re-shard\): set its closing to 0"),
    ("[job]\npartitions = 3\npartition_weights = [1, 0, 0]\nlayout_changes_s = [30.0]\n"
     "layout_weights = [[0, 1, 1]]\nlayout_closed_s = [20.0]\nlayout_waiting_weights = [[0, 0.5, nan]]",
     r"job setting layout_waiting_weights needs a row of 3 finite shares >= 0 per layout change \(1\)"),
    ("[job]\npartitions = 3\npartition_weights = [1, 0, 0]\nlayout_changes_s = [30.0]\n"
     "layout_weights = [[0, 1, 1]]\nlayout_waiting_weights = [[0, 0.5, 0.5]]",
     "the change at 30 s gives a share to a partition that did not wait for it: only the new partitions of a "
     "re-shard with a layout_closed_s waited; set the others to 0"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_barrier_passed = [[false, 1]]",
     r"job setting layout_barrier_passed needs a row of 2 booleans \(true or false, one a partition\) per layout "
     r"change \(1\), not \(\(False, 1\),\)"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_barrier_passed = [[false, true]]",
     r"the change at 30 s is not an expansion adopted by a restart \(a growth with layout_restarts true\): set its "
     "row to false"),
    ("[job]\npartitions = 2\npartition_weights = [1, 0]\nlayout_changes_s = [30.0]\nlayout_weights = [[1, 1]]\n"
     "layout_restarts = [true]\nlayout_barrier_passed = [[true, false]]",
     "the change at 30 s marks a partition it does not bring: only its new partitions can pass its barrier"),
])
def test_a_bad_job_in_a_trace_file_is_one_line_naming_the_setting(tmp_path, job, message):
    """A text or fractional number was a comparison error or a TypeError from deep in the run;
    a misspelt table (`[jobs]`) was ignored and the run used the defaults."""
    trace = tmp_path / "mine.toml"
    trace.write_text(f'[workload]\nkind = "step"\nseconds = 3600\n{job}\n')
    with pytest.raises(ValueError, match=message) as caught:
        load_trace(str(trace))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text, message", [
    ("workload = 5\n", r"\[workload\] must be a table of settings, not 5"),
    ('description = "no load"\n', r"no table \[workload\]: a trace needs a \[workload\] table with a kind"),
    ("[workload]\nseconds = 3600\n", r"\[workload\] needs a kind: one of constant, step, ramp"),
    ('job = 3\n[workload]\nkind = "step"\n', r"\[job\] must be a table of settings, not 3"),
    ('[workload]\nkind = "step"\nseconds = 1e12\n',
     r"seconds: 1,000,000,000,000 s \(11,574,074.07 days\) at 1 s is more than a simulation runs \(366 days\)"),
    ('[workload]\nkind = "step"\n[job]\npartitions = 2\n[[job]]\n', "not valid TOML .*: fix the syntax"),
])
def test_a_trace_file_of_the_wrong_shape_is_one_line(tmp_path, text, message):
    """`workload = 5` was Python's "'int' object is not iterable", a missing kind "unknown
    workload ''", and a length of 10^12 s a MemoryError for 7 TiB after the file had loaded."""
    trace = tmp_path / "mine.toml"
    trace.write_text(text)
    with pytest.raises(ValueError, match=message) as caught:
        load_trace(str(trace))
    assert "\n" not in str(caught.value)


def test_a_replay_longer_than_a_year_at_1_s_is_refused_before_its_arrays_are_made(tmp_path):
    """A CSV whose times span 463 days, or `--days 367`, would make arrays of 40 million seconds
    and more for every series of the run; the most a simulation runs is `MAX_DAYS`, said with
    the length asked for."""
    path = tmp_path / "long.csv"
    path.write_text("time,rate\n0,1\n40000000,2\n")
    with pytest.raises(ValueError, match=r"long.csv: 40,000,001 s \(462.96 days\) at 1 s is more than"):
        workloads.build("csv", path=str(path))
    with pytest.raises(ValueError, match=r"ask for less \(seconds = \.\.\. in a trace, --days/--hours\)"):
        workloads.build("diurnal", seconds=(workloads.MAX_DAYS + 1) * 86_400)
    assert workloads._span(workloads.MAX_SECONDS, "seconds") == workloads.MAX_SECONDS  # a year itself runs


def test_simulate_command_prints_the_table_and_writes_plot_and_markdown(tmp_path, capsys):
    plot, markdown = tmp_path / "out.png", tmp_path / "table.md"
    code = main(["simulate", "--trace", "step-up", "--plot", str(plot), "--markdown", str(markdown),
                 "--sweep", "utilization.target_utilization=0.6,0.8", "--policy", "autosizer",
                 "--policy", "utilization"])
    out = capsys.readouterr().out
    assert code == 0
    assert "utilization target_utilization=0.6" in out and "utilization target_utilization=0.8" in out
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert markdown.read_text().startswith("| policy | violation_s |")
    assert main(["simulate", "--workload", "constant", "--hours", "1", "--partitions", "4",
                 "--policy", "lag-threshold", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["policy"] == "lag-threshold" and "violation_s" in rows[0]


def test_runs_on_several_processes_are_the_runs_of_one_process_in_the_same_order():
    """`compare` sends runs of a day or more to one process per core; each run draws the same noise
    from its seed wherever it runs, so the runs, and their order, are those of one process."""
    from autosizer.simulator.sweep import PARALLEL_FROM_S, compare, variants, workers_for

    workload = workloads.build("step", before=500, after=2500, at=600, seconds=1800)
    job = JobModel(partitions=4)
    policies = variants(["autosizer", "lag-threshold"], {}, {"lag-threshold.lag_threshold": [500, 5000]})
    alone = compare(workload, job, policies, progress=False)  # the Python API's default: one process
    spread = compare(workload, job, policies, workers=2, progress=False)
    assert [r.policy for r in spread] == [r.policy for r in alone] == [
        "autosizer", "lag-threshold lag_threshold=500", "lag-threshold lag_threshold=5000"]
    for one, other in zip(alone, spread, strict=True):
        assert one.rescales == other.rescales
        assert np.array_equal(one.lag_seconds, other.lag_seconds) and np.array_equal(one.factor, other.factor)
    assert alone[1].rescales != alone[2].rescales  # the settings made different runs
    assert workers_for(3, PARALLEL_FROM_S - 1, None) == 1 and workers_for(1, PARALLEL_FROM_S, None) == 1
    assert workers_for(3, PARALLEL_FROM_S, None) == min(3, os.cpu_count() or 1)
    assert workers_for(3, 60, 8) == 3
    with pytest.raises(ValueError, match="workers must be a whole number >= 1, not 0"):
        workers_for(3, 60, 0)


def test_ctrl_c_ends_a_command_with_one_line_and_the_shells_code(monkeypatch, capsys):
    """Ctrl-C during a long simulation printed a page of traceback (the workers' wait, or the
    policy's line it stopped in); a one-shot command now ends with one line and code 130."""
    from autosizer.simulator import sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep, "compare", interrupted)
    assert main(["simulate", "--trace", "step-up", "--policy", "autosizer"]) == 130
    assert capsys.readouterr().err == "autosizer: interrupted\n"


def test_a_policy_no_other_process_can_take_runs_in_this_one_and_says_why():
    """A plugin's policy defined in a function (or holding a lambda) cannot be pickled to a worker: the runs stay in this
    process, the same runs, with a warning that names the policy and the fix."""
    from structlog.testing import capture_logs

    from autosizer.simulator.sweep import compare

    class Hold:
        name = "hold"

        def __init__(self):
            self.why = lambda: "hold"

        def decide(self, observation, state=None):
            return Decision(observation.factor, self.why()), state

    workload = workloads.build("constant", seconds=900)
    with capture_logs() as logs:
        runs = compare(workload, JobModel(partitions=4), [("hold", Hold()), ("again", Hold())], workers=2,
                       progress=False)
    assert [r.policy for r in runs] == ["hold", "again"] and not runs[0].rescales
    (warned,) = [e for e in logs if e["event"] == "simulate.one_process"]
    assert warned["policy"] == "hold" and "Can't pickle" in warned["why"] and "picklable" in warned["fix"]


@pytest.mark.parametrize("flags, message", [
    (["--days", "0"], "--days must be a finite length > 0, not 0.0"),
    (["--hours", "1", "--workers", "0"], "--workers must be at least 1"),
    (["--hours", "nan"], "--hours must be a finite length > 0, not nan"),
    (["--hours", "1", "--process-ms", "0"], "job setting process_seconds must be above 0, not 0.0"),
    (["--hours", "1", "--slo", "0"], "--slo must be a finite number of seconds > 0"),
    (["--hours", "1", "--slo", "nan"], "--slo must be a finite number of seconds > 0"),
    (["--hours", "1", "--guard", "cooldown_s=x"], "--guard: [guards] cooldown_s = 'x' must be a number"),
    (["--hours", "1", "--guard", "bogus=1"], "--guard: unknown setting 'bogus' in [guards]: known settings are"),
    (["--hours", "1", "--guard", "min_factor=2.5"], "min_factor = '2.5' must be a whole number"),
    (["--hours", "1", "--plot", "/nonexistent/dir/out.png"], "--plot '/nonexistent/dir/out.png': no directory "
                                                            "'/nonexistent/dir'; create it or write elsewhere"),
    (["--hours", "1", "--markdown", "/"], "--markdown '/' is a directory: name a file in it"),
])
def test_simulate_command_refuses_a_zero_length_a_zero_cost_a_meaningless_slo_or_a_bad_guard(flags, message, capsys):
    """Each ran before: `--days 0` and `--process-ms 0` as if not given (the defaults), `--slo 0`
    scoring every second late and `--slo nan` none; a `--guard` that was not a number or not a
    guard was a traceback (it is now read as the daemon's `[guards]` are); so was a `--plot` or
    `--markdown` in a missing directory, after the whole simulation had run (now refused before)."""
    assert main(["simulate", "--workload", "constant", "--policy", "lag-threshold", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_simulate_command_names_a_file_it_could_not_write_in_one_line(capsys):
    """/proc passes the directory check for root (it is a directory and root may write) and then
    refuses the file: the write's OSError was a traceback; it is one line with the path, as the
    check's refusal is for everyone else."""
    assert main(["simulate", "--workload", "constant", "--hours", "1", "--policy", "lag-threshold",
                 "--markdown", "/proc/autosizer-table.md"]) == 2
    err = capsys.readouterr().err
    assert "/proc/autosizer-table.md" in err and err.count("\n") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("flags, message", [
    (["--start", "x", "--end", "2026-01-02"], "--start: 'x' is not a time: use epoch seconds or ISO 8601"),
    (["--start", "2026-01-01", "--end", "soon"], "--end: 'soon' is not a time"),
    (["--start", "nan", "--end", "2026-01-02"], "--start: nan is not a time: use epoch seconds within years"),
    (["--start", "2026-01-01", "--end", "1e20"], "--end: 1e+20 is not a time"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--window", "0s"], "--window must be whole seconds from 1s to 24h"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--window", "1.5s"], "--window must be whole seconds"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--window", "soon"], "--window 'soon' is not a duration"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--bootstrap", "127.0.0.1:1"],
     "--bootstrap and --topic go together"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--topic", "orders"], "--bootstrap and --topic go together"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--bootstrap", "127.0.0.1:1", "--topic", "orders",
      "--kinesis-stream", "orders"], "--bootstrap and --kinesis-stream are two sources"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--kinesis-stream", "orders", "--kinesis-endpoint",
      "127.0.0.1:1"], "--kinesis-endpoint '127.0.0.1:1' must start with http:// or https://"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--region", "eu-west-1"],
     "--region says where the Kinesis stream is: add --kinesis-stream NAME, or drop it"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--out", "/nonexistent/run.toml"],
     "--out '/nonexistent/run.toml': no directory '/nonexistent'"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--adopt-after-s", "-5"], "--adopt-after-s must be >= 0"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--adopt-after-s", "nan"],
     "--adopt-after-s must be a number like 30"),
    (["--start", "2026-01-01", "--end", "2026-01-02", "--adopt-after-s", "1e9"], "--adopt-after-s must be <= 86400"),
])
def test_fit_refuses_a_bad_time_or_window_before_asking_prometheus(flags, message, capsys, tmp_path):
    """A time that did not parse was named without its flag, and `--window 0s` went to Prometheus
    as `rate(...[0s])`. Both are refused before any query (the URL is not even reachable here)."""
    out = tmp_path / "run.toml"
    assert main(["fit", "--prometheus", "http://127.0.0.1:1", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("start, end", [("1796013846", "1796013900.5"), ("2026-11-30T04:44:06Z", "20261201")])
def test_fit_takes_epoch_seconds_as_text_as_its_help_says(start, end, capsys, tmp_path):
    """`--start 1796013846.8` (what `date +%s.%N` or a script's time.time() prints) was refused as
    "not a time: use epoch seconds or ISO 8601". Now the times pass, and the first error is the
    unreachable Prometheus; an ISO basic-format date stays a date."""
    assert main(["fit", "--prometheus", "http://127.0.0.1:1", "--start", start, "--end", end,
                 "--out", str(tmp_path / "run.toml")]) == 2
    err = capsys.readouterr().err
    assert "Prometheus range query" in err and "not a time" not in err and err.count("\n") == 1, err


def test_simulate_command_delays_the_input_into_a_tick(capsys):
    """`--delay 14`: `cpu-bound`'s step lands 14 s into a 15 s tick, where its first tick reads
    one second of it; one rescale still, and a bad delay is a one-line error naming the range."""
    assert main(["simulate", "--trace", "cpu-bound", "--delay", "14", "--policy", "autosizer", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["converge_rescales"] == 1 and row["rescales"] == 1
    for bad in ("-1", "14400"):
        assert main(["simulate", "--trace", "cpu-bound", "--delay", bad]) == 2
        assert "--delay must be 0 to 14399 seconds" in capsys.readouterr().err


def test_simulate_command_reads_metrics_as_old_as_asked(capsys):
    """`--metrics-age 8` is a 15 s scrape: `lag-threshold`, which sizes on the backlog it reads,
    sees it 8 s late and scales differently; `autosizer` still meets `step-up` in one rescale."""
    rows = {}
    for age in ("0", "8"):
        assert main(["simulate", "--trace", "step-up", "--metrics-age", age, "--policy", "autosizer",
                     "--policy", "lag-threshold", "--json"]) == 0
        rows[age] = {r["policy"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["8"]["autosizer"]["converge_rescales"] == 1
    assert rows["8"]["lag-threshold"] != rows["0"]["lag-threshold"]
    for bad in ("-1", "nan", "inf"):
        assert main(["simulate", "--trace", "step-up", "--metrics-age", bad]) == 2
        assert "--metrics-age must be finite seconds >= 0" in capsys.readouterr().err


def test_simulate_command_reads_the_window_less_a_scrape_interval_with_rate(capsys):
    """`--scrape-interval 5 --input-over-scrapes` with a 10 s window (a daemon reading the input
    with rate()): the step's first tick reads the input over 5 s, so `utilization`, which sizes
    on what one tick shows, sees the step sooner and fuller and goes there in one rescale instead
    of two. Without the flag (the shipped query) the scrape interval leaves the input alone."""
    rows = {}
    for flags in (("0",), ("5",), ("5", "--input-over-scrapes")):
        assert main(["simulate", "--trace", "step-up", "--scrape-interval", *flags, "--window", "10",
                     "--tick", "5", "--policy", "utilization", "--json"]) == 0
        rows[flags] = json.loads(capsys.readouterr().out)[0]["rescales"]
    assert rows == {("0",): 2, ("5",): 2, ("5", "--input-over-scrapes"): 1}
    for bad in ("-1", "nan", "inf"):
        assert main(["simulate", "--trace", "step-up", "--scrape-interval", bad]) == 2
        assert "--scrape-interval must be finite seconds >= 0" in capsys.readouterr().err
    assert main(["simulate", "--trace", "step-up", "--scrape-interval", "30", "--window", "30"]) == 2
    assert "must be less than the 30 s rate window" in capsys.readouterr().err


def test_simulate_command_refuses_bad_input_in_one_line(capsys):
    assert main(["simulate", "--workload", "constant", "--param", "rate"]) == 2
    assert "--param takes KEY=VALUE" in capsys.readouterr().err
    assert main(["simulate", "--policy", "nope"]) == 2
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["simulate", "--set", "autosizer.target_utilization=2"]) == 2
    assert "target_utilization must be in (0, 1]" in capsys.readouterr().err


def test_each_partitions_age_in_the_observation_is_its_oldest_records():
    """What the policy sees per partition agrees with the run's worst lag at the same second,
    at factor 1 too (where a partition has one queue with input, not two)."""
    seen = []

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.append((observation.time, observation.partitions.lag_seconds.copy()))
            return super().decide(observation, state)

    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=50),
                   batch_seconds=0)
    run = simulate(workloads.constant(600, seconds=60, noise=0), job, Watch(1), tick_s=15)
    for time, ages in seen:
        # At second 0 (the daemon's first tick) the job has kept up so far: nothing is old.
        assert ages.max() == pytest.approx(run.lag_seconds[int(time) - 1] if time else 0.0)
        assert ages.max() < max(time, 1e-9)  # records keep being processed: the oldest is not the first


def test_the_simulated_daemon_ticks_at_start_and_reads_the_input_over_its_window():
    """As the real daemon: a tick when it starts, then every tick, each reading Prometheus' rate
    over its window. A step 100 -> 1,000/s at 30 s is half seen at 35 s over a 10 s window."""
    seen: list[tuple[float, float]] = []

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.append((observation.time, observation.input_rate))
            return super().decide(observation, state)

    job = JobModel(partitions=2, process_seconds=0.001, process_cv=0.0, skew=KeySkew(keys=100))
    rate = np.where(np.arange(60) < 30, 100.0, 1000.0)
    simulate(workloads.Workload("step", rate), job, Watch(1), tick_s=5, window_s=10)
    assert [t for t, _ in seen] == list(range(0, 61, 5))  # the last at the workload's end
    inputs = dict(seen)
    assert inputs[0] == pytest.approx(100) and inputs[30] == pytest.approx(100)
    assert inputs[35] == pytest.approx(550) and inputs[40] == pytest.approx(1000)
    with pytest.raises(ValueError, match="rate window must be >= 1 s"):
        simulate(workloads.Workload("step", rate), job, Fixed(1), tick_s=5, window_s=0)


def test_the_simulated_daemon_reads_the_input_as_old_as_the_metrics_are():
    """With metrics 2 s old (probe, scrape, the query's last sample; `autosizer fit` measures it)
    a tick reads the rate window and the watermarks as they were 2 s before it: the step at 30 s
    is 3 s into a 10 s window at the 35 s tick, not 5."""
    seen: dict[float, tuple[float, float, float]] = {}

    class Watch(Fixed):
        def decide(self, observation, state=None):
            marks = observation.watermarks
            seen[observation.time] = (observation.input_rate, float(marks.offsets.sum()), float(marks.times.max()))
            return super().decide(observation, state)

    job = JobModel(partitions=2, process_seconds=0.001, process_cv=0.0, skew=KeySkew(keys=100),
                   metrics_age_s=2.0)
    rate = np.where(np.arange(60) < 30, 100.0, 1000.0)
    simulate(workloads.Workload("step", rate), job, Watch(1), tick_s=5, window_s=10)
    assert seen[35][0] == pytest.approx(370) and seen[40][0] == pytest.approx(820)
    assert seen[40][1] - seen[35][1] == pytest.approx(5 * 1000)  # the watermarks of 38 s and 33 s
    assert seen[30][1] - seen[25][1] == pytest.approx(5 * 100)  # the step not in them yet
    assert (seen[35][2], seen[40][2]) == (33, 38)


def test_old_metrics_show_the_backlog_as_it_was_when_they_were_read():
    """The probe exports the lag with the watermarks, so a tick reads both as old: one 100/s
    queue taking 300/s from second 30 has 2,000 records waiting at the 40 s tick and shows the
    1,600 of 38 s (the oldest record's age as at 38 s too)."""
    seen: dict[float, tuple[float, float]] = {}

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen[observation.time] = (observation.lag_records, float(observation.partitions.lag_seconds.max()))
            return super().decide(observation, state)

    def run(age: float) -> dict[float, tuple[float, float]]:
        seen.clear()
        job = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=100),
                       batch_seconds=0.0, restart_downtime_s=0.0, metrics_age_s=age)
        rate = np.where(np.arange(60) < 30, 50.0, 300.0)
        simulate(workloads.Workload("step", rate), job, Watch(1), tick_s=5, window_s=10)
        return dict(seen)

    fresh, old = run(0.0), run(2.0)
    assert fresh[40][0] == pytest.approx(2000) and old[40][0] == pytest.approx(1600)
    assert old[40][1] < fresh[40][1]
    assert old[45][0] == pytest.approx(fresh[45][0] - 2 * 200)


def test_the_first_ticks_watermarks_are_stamped_when_they_were_read():
    """A daemon's first query gets a scrape from before it started: the watermarks of its first
    tick are stamped 8 s before second 0, so the input between its first two ticks reads as
    the 6,000/s it is (stamped at second 0, the step-up trace's first ticks read 12,857/s and a
    job sized for 6,000/s went 16 -> 32)."""
    seen: dict[float, object] = {}

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen[observation.time] = observation.watermarks
            return super().decide(observation, state)

    job = JobModel(partitions=2, process_seconds=0.001, process_cv=0.0, skew=KeySkew(keys=100),
                   metrics_age_s=8.0)
    simulate(workloads.constant(6000, seconds=60, noise=0), job, Watch(1), tick_s=15)
    assert seen[0].times.max() == -8
    assert seen[15].rate_since(seen[0]) == pytest.approx(6000)


def rescaled_at_15(batch_seconds: float, rate: float) -> Run:
    """One 100/s task, 1 s trigger and fixed cost, 5 s restart, asked for F=2 from the 15 s tick."""

    class Later(Fixed):
        def decide(self, observation, state=None):
            return Decision(2 if observation.time >= 15 else 1, "later"), state

    job = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                   batch_seconds=batch_seconds, batch_overhead_s=1.0, trigger_s=1.0, run_ahead=10.0,
                   restart_downtime_s=5)
    run = simulate(workloads.constant(rate, seconds=60, noise=0), job, Later(1),
                   Guards(cooldown_s=0, scale_down_delay_s=0), tick_s=15)
    assert [(r.time, r.old, r.new) for r in run.rescales] == [(15, 1, 2)]
    return run


def test_a_rescale_drains_the_batch_in_flight_before_the_restart():
    """The pipeline's drain lets the batch in flight commit (its work is kept), then nothing runs
    for the restart downtime: at 100/s the lag falls by that batch's 200 records, then grows."""
    run = rescaled_at_15(batch_seconds=2.0, rate=100)
    assert run.lag_records[15] == pytest.approx(run.lag_records[14] - 200 + 100)  # drained, +1 s of input
    assert np.allclose(np.diff(run.lag_records[15:21]), 100)  # the restart: nothing processed


def test_a_drain_mid_batch_commits_only_what_the_tasks_did_by_then():
    """The pipeline's drain stops a saturated batch at each task's current record. 200/s into a
    100/s task with an 8 s deadline: the batch in flight at the 15 s tick had worked 4 s, so 400
    records commit, not its whole 800 (the model kept the whole batch until session 12, and the
    simulated peak lag after a rescale read low against real runs)."""
    run = rescaled_at_15(batch_seconds=8.0, rate=200)
    assert run.lag_records[15] == pytest.approx(run.lag_records[14] + 200 - 400)
    assert np.allclose(np.diff(run.lag_records[15:20]), 200)  # the restart: nothing processed


def test_the_lag_in_seconds_is_the_oldest_records_mean_age_over_the_batch_cycle():
    """A probe reads the age at a random moment of the batch cycle, so the simulated second
    reports its mean, not its end. 50/s at 100/s per task, 0.25 s fixed cost, 1 s trigger: each
    batch starts on the trigger, works 0.5 s and commits 0.75 s in; the oldest waiting record
    arrived just after the last batch started, so its age runs from 0.75 s after a commit to
    1.75 s before the next. The end of each second (in phase with the trigger) reads 1.0."""
    job = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                   batch_seconds=3.0, batch_overhead_s=0.25, trigger_s=1.0, run_ahead=1.5)
    run = simulate(workloads.constant(50, seconds=60, noise=0), job, Fixed(1), tick_s=15)
    assert np.allclose(run.lag_seconds[1:], 1.25)



def test_a_probe_reads_one_moment_of_the_sawtooth_whose_mean_the_lag_in_seconds_is():
    """The same job: from 1.0 s at each second's start the age grows to 1.75 s at the commit
    (0.75 s in), drops to 0.75 s and grows to 1.0 s again. A probe reads one moment of it; the
    real gauge's peak is the highest such reading, so the simulated peak to set beside it is the
    highest reading of a probe, not the highest mean of a second (1.25 s here)."""
    job = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                   batch_seconds=3.0, batch_overhead_s=0.25, trigger_s=1.0, run_ahead=1.5)
    run = simulate(workloads.constant(50, seconds=60, noise=0), job, Fixed(1), tick_s=15)
    every_moment = ((np.arange(2000) + 0.5) / 2000)[:, None]
    assert np.allclose(run.probe_readings(every_moment).mean(axis=0)[1:], run.lag_seconds[1:], atol=1e-3)
    assert np.allclose(run.probe_readings(np.full(60, 0.7))[1:], 1.7)  # before the commit
    assert np.allclose(run.probe_readings(np.full(60, 0.8))[1:], 0.8)  # after it
    assert 1.7 < run.probe_peak() < 1.75
    assert np.allclose(run.part(10, 20).probe_readings(np.full(10, 0.7)), 1.7)

def test_a_batch_commits_its_latency_after_its_work_and_the_next_starts_after_its_overhead():
    """The pipeline measures both: a batch's wait from its read boundary to its commit beyond its
    work (`commit_latency_s`), and a saturated batch's whole fixed cost (`batch_overhead_s`, which
    also holds Spark's own offset commit and the gap to the next batch). At 50/s into a 100/s
    task a batch works 0.5 s from its trigger; with a 0.1 s latency it commits 0.6 s in, so the
    oldest record's age runs from 0.6 to 1.6 s (mean 1.1); without one the commit waits the
    whole 0.4 s overhead (mean 1.4). Capacity, set by the saturated cycle, is the same."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                  batch_seconds=3.0, batch_overhead_s=0.4, trigger_s=1.0, run_ahead=1.5)
    measured, assumed = JobModel(**common, commit_latency_s=0.1), JobModel(**common)
    low = workloads.constant(50, seconds=60, noise=0)
    assert np.allclose(simulate(low, measured, Fixed(1), tick_s=15).lag_seconds[1:], 1.1)
    assert np.allclose(simulate(low, assumed, Fixed(1), tick_s=15).lag_seconds[1:], 1.4)
    assert measured.duty() == assumed.duty()
    with pytest.raises(ValueError, match="commit_latency_s"):
        JobModel(commit_latency_s=-0.1)


def test_a_kinesis_batch_takes_the_records_its_shards_hold_when_its_slots_read():
    """Kafka's trigger plans a batch's end offsets; a Kinesis slot takes what its shards hold
    when it reads, later (`read_boundary_s`, the pipeline's `read_boundary_seconds`). At 50/s
    into a 100/s task a batch works 0.5 s and commits 0.3 s later: cut at the trigger, the oldest
    record left is 0.8 s old at the commit and 1.8 s at the next (mean 1.3); cut 0.2 s later,
    0.2 s younger (mean 1.1). A cut never comes after the commit: 2 s reads as the latency.
    Run r4's job showed about 1.0 s at both factors where its replay, cutting at the trigger,
    showed 1.2-1.3 s."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                  batch_seconds=3.0, batch_overhead_s=0.4, commit_latency_s=0.3, trigger_s=1.0, run_ahead=1.5)
    low = workloads.constant(50, seconds=60, noise=0)
    for boundary, mean in ((0.0, 1.3), (0.2, 1.1), (2.0, 1.0)):
        run = simulate(low, JobModel(**common, read_boundary_s=boundary), Fixed(1), tick_s=15)
        assert np.allclose(run.lag_seconds[2:], mean), boundary
    with pytest.raises(ValueError, match="read_boundary_s"):
        JobModel(read_boundary_s=-0.1)


def test_a_batch_far_from_full_pays_the_part_of_its_fixed_cost_that_grows_with_its_read():
    """The pipeline measures a saturated batch's whole fixed cost (0.7 s) and, with batches back
    to back, the part of it after the commit (`batch_gap_s`, 0.1 s); the rest, before the commit,
    grows with what the batch read (a Kinesis slot's read, the records' writes), from the commit
    latency (0.2 s) for an empty read to 0.6 s for a full one (`run_ahead` spans: 450 records).
    At 60/s into a 100/s task a batch reads 60 records: it commits 0.25 s after its 0.6 s of
    work and the next starts on its trigger, where charged the saturated 0.7 s the batches ran
    back to back, 1.25 s each, the oldest record 2.1 s old on the mean against 1.35 s (run u5's
    job at 56% busy started each batch on its 1 s trigger, 0.8 s long; its replay's ran 1.15 s,
    back to back). Saturated, a batch pays the same 0.7 s either way: the same capacity."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000), batch_seconds=3.0,
                  batch_overhead_s=0.7, commit_latency_s=0.2, trigger_s=1.0, run_ahead=1.5)
    whole, split = JobModel(**common), JobModel(**common, batch_gap_s=0.1)
    low = workloads.constant(60, seconds=120, noise=0)
    runs = {job.batch_gap_s: simulate(low, job, Fixed(1), tick_s=15) for job in (whole, split)}
    assert runs[None].batch_duration[20:] == pytest.approx(1.25, abs=0.005)
    assert runs[0.1].batch_duration[20:] == pytest.approx(0.6 + 0.2 + 0.4 * 60 / 450, abs=0.005)
    # the line the benchmark checks against real batches (`JobModel.commit_wait`) is the engine's
    assert runs[0.1].batch_duration[20:] == pytest.approx(0.6 + split.commit_wait(1, 60 / 450), abs=0.005)
    assert (split.commit_wait(1, 0.0), split.commit_wait(1, 1.0), whole.commit_wait(1, 1.0)) == pytest.approx(
        (0.2, 0.6, 0.2))
    assert runs[None].lag_seconds[20:].mean() == pytest.approx(2.13, abs=0.01)
    assert runs[0.1].lag_seconds[20:].mean() == pytest.approx(1.353, abs=0.01)
    high = workloads.constant(150, seconds=600, noise=0)
    behind = [simulate(high, job, Fixed(1), tick_s=15).lag_records[599] for job in (whole, split)]
    assert behind[1] == pytest.approx(behind[0], rel=0.001)
    # a full batch's part before the commit (0.7 - 0.6 = 0.1 s) below the latency: records cut
    # later read as cut then, the soonest a batch commits after its work (never past a commit)
    late = simulate(low, JobModel(**{**common, "batch_gap_s": 0.6, "read_boundary_s": 0.5}), Fixed(1), tick_s=15)
    cut = simulate(low, JobModel(**{**common, "batch_gap_s": 0.6, "read_boundary_s": 0.1}), Fixed(1), tick_s=15)
    assert late.lag_seconds[2:].min() >= 0 and np.allclose(late.lag_seconds, cut.lag_seconds)
    with pytest.raises(ValueError, match="batch_gap_s"):
        JobModel(batch_gap_s=-0.1)
    with pytest.raises(ValueError, match=r"batch_gap_s must be from 0 to batch_overhead_s \(0.6\)"):
        JobModel(batch_gap_s=0.7)  # more than the whole fixed cost


def test_a_fresh_pipelines_batches_wait_longer_for_their_commit_and_the_daemon_reads_it():
    """A fresh pipeline's batches wait longer for their commit while its JVM and Python workers
    warm up (the demo's light batches: 0.19-0.30 s in their first 10 s, 0.14-0.17 s after a
    minute; `commit_warmup_s`, fading by e every `commit_warmup_tau_s`). At 30/s into a 100/s
    task a batch works 0.3 s and commits its 0.1 s latency later, the oldest record 0.9 s old on
    the mean; 0.2 s more at the start puts second s, whose batch began at its start, at
    0.9 + 0.2 e^(-s/20), down to 0.9. Until a batch's cost is measured the daemon
    reads the commit latency as the batches then wait: run k15's daemon read 0.33 s four seconds
    into the run, and factor 1's capacity 7% short of its warm one."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000),
                  batch_seconds=3.0, batch_overhead_s=0.4, commit_latency_s=0.1, trigger_s=1.0, run_ahead=1.5,
                  overhead_known_at_start=False)
    warm, fresh = JobModel(**common), JobModel(**common, commit_warmup_s=0.2, commit_warmup_tau_s=20.0)
    low = workloads.constant(30, seconds=300, noise=0)
    settled = simulate(low, warm, Fixed(1), tick_s=15).lag_seconds
    warming = simulate(low, fresh, Fixed(1), tick_s=15).lag_seconds
    assert np.allclose(settled[2:], 0.9)
    seconds = np.arange(2, 12)
    assert warming[2:12] == pytest.approx(0.9 + 0.2 * np.exp(-seconds / 20))
    assert np.allclose(warming[200:], 0.9, atol=1e-3)
    seen = dict(duties(low, fresh))
    assert seen[0] == pytest.approx(3 / 3.3) and seen[295] == pytest.approx(3 / 3.1, abs=1e-4)
    assert dict(duties(low, warm))[0] == pytest.approx(3 / 3.1)
    for name, value in (("commit_warmup_s", -0.1), ("commit_warmup_tau_s", 0.0)):
        with pytest.raises(ValueError, match=name):
            JobModel(**{name: value})


def test_a_delayed_workload_moves_its_change_and_keeps_its_length():
    """Where a step lands in a policy tick is part of what a trace tests (the phase test)."""
    step = workloads.step(100, 200, at=30, seconds=60, noise=0)
    later = step.delayed(7)
    assert later.seconds == 60 and later.changes == (37,)
    assert later.rate[36] == 100 and later.rate[37] == 200 and later.rate[-1] == 200
    assert step.delayed(0).changes == step.changes
    with pytest.raises(ValueError, match="delay must be 0 to 59 s"):
        step.delayed(60)


def test_hot_shares_read_even_until_the_pipeline_has_read_enough_records_to_measure_them():
    """As the pipeline (`MIN_SHARE_READ`, summed over small batches): a partition's busiest-thread
    counts are believed once its batches have read 200 records. A job that ran before the run
    shows them from the first tick; one that had not measured them when the run began (a fitted
    run says which: run 66's pipeline, 16 keys at 25/s a partition with no backlog at its start)
    reads even shares until 200 of its records arrived (by the 10 s tick), and shows them from
    the tick after; before session 25 the pipeline wanted one batch of 200, which a trickle never read,
    and run 66 waited a tick on the step."""
    seen: list[tuple[float, float]] = []

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.append((observation.time, float(observation.hot_share(8).max())))
            return super().decide(observation, state)

    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0,
                   skew=KeySkew(hot_key_share=0.5, hot_partition=0))
    measured = float(job.hot_share_table()[0, FACTORS.index(8)])
    assert measured > 0.4
    step = workloads.step(before=100, after=1200, at=30, seconds=60, noise=0)
    simulate(step, job, Watch(1), tick_s=5)
    assert [share for _, share in seen] == pytest.approx([measured] * len(seen))
    for known, shares in ((True, [measured] * 4), (False, [1 / 8] * 3 + [measured])):
        seen.clear()
        told = dataclasses.replace(job, hot_shares_known_at_start=(known,) * 4)
        simulate(step, told, Watch(1), tick_s=5)
        assert [share for time, share in seen if time <= 15] == pytest.approx(shares)  # 0, 5, 10, 15 s


def test_which_partitions_shares_were_known_at_the_start_is_one_boolean_a_partition():
    with pytest.raises(ValueError, match="hot_shares_known_at_start needs 4 booleans"):
        JobModel(partitions=4, hot_shares_known_at_start=(True, False))
    with pytest.raises(ValueError, match="hot_shares_known_at_start needs 2 booleans"):
        JobModel(partitions=2, hot_shares_known_at_start=(1, 0))


def test_a_tick_reads_the_input_over_the_whole_window_or_with_rate_over_its_scrapes_span():
    """Since session 51 the daemon reads the watermark's growth between the probe's reads a
    window apart: the whole window, however often Prometheus scrapes. Before, Prometheus' rate()
    over a 10 s window of 1 s scrapes averaged the 9 s its samples span and scaled that to the
    window: a step 5 s before the tick read 5/9 of the way up, not 5/10 (runs 83-88: the real
    ticks' input read closest to the load this way, and run 86's `utilization` replay took the
    real 1 -> 4 on the step's first tick where it had gone 1 -> 2); replays of those runs
    read so (`input_over_scrapes`)."""
    seen: dict[tuple[float, bool], list[float]] = {}

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.setdefault((scrape, over), []).append(observation.input_rate)
            return super().decide(observation, state)

    step = workloads.step(before=100, after=1000, at=30, seconds=60, noise=0)
    for scrape in (0.0, 1.0, 3.0):
        for over in (False, True):
            job = JobModel(partitions=4, scrape_interval_s=scrape, input_over_scrapes=over)
            simulate(step, job, Watch(1), tick_s=5, window_s=10)
    at_35 = {key: rates[7] for key, rates in seen.items()}  # ticks at -5 (lead-in), 0, 5, ...
    assert at_35 == pytest.approx({**{(scrape, False): 550.0 for scrape in (0.0, 1.0, 3.0)}, (0.0, True): 550.0,
                                   (1.0, True): (4 * 100 + 5 * 1000) / 9, (3.0, True): (2 * 100 + 5 * 1000) / 7})
    with pytest.raises(ValueError, match="scrape_interval_s"):
        JobModel(scrape_interval_s=-1.0)


def test_the_backlog_reads_less_the_commits_since_the_probe_read_the_watermark():
    """A pipeline before session 48: its `lag_records` was the watermark the probe read less the
    positions the last commit left, so what was committed since the probe came off it. At 300/s
    kept up and a probe half a second before the scrape, about 150 records less, never below 0."""
    seen: dict[float, list[float]] = {}

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.setdefault(age, []).append(observation.lag_records)
            return super().decide(observation, state)

    steady = workloads.constant(300, seconds=120, noise=0)
    for age in (0.0, 0.5, 30.0):
        simulate(steady, JobModel(partitions=4, process_cv=0.0, lag_probe_age_s=age), Watch(1), tick_s=5)
    fresh, probed, late = (np.mean(seen[a][3:]) for a in (0.0, 0.5, 30.0))
    assert fresh - probed == pytest.approx(150, rel=0.1)
    assert late == 0.0
    with pytest.raises(ValueError, match="lag_probe_age_s"):
        JobModel(lag_probe_age_s=-0.5)


def test_old_metrics_show_each_seconds_mean_backlog_as_a_probe_at_a_random_moment_does():
    """The gauge is one moment of a second, at a random phase: on average the second's mean.
    100/s on one partition, a batch on each 1 s trigger taking 0.2 s of work and committing
    0.1 s later: records wait 1.3 s from the trigger to the commit, then 0.7 s to the next,
    so the mean backlog is 100 x (0.5 + 0.3) = 80, where the second's end (the next trigger)
    holds 100. Ticks reading metrics 2 s old see the mean (run 140, factor 4 at 81%: the
    gauge averaged 1,947 a second, the mean 1,709, the end 1,264)."""
    seen: list[float] = []

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.append(observation.lag_records)
            return super().decide(observation, state)

    job = JobModel(partitions=1, process_seconds=0.002, process_cv=0.0, commit_latency_s=0.1,
                   batch_overhead_s=0.05, metrics_age_s=2.0)
    run = simulate(workloads.constant(100, seconds=120, noise=0), job, Watch(1), tick_s=5)
    assert run.lag_records_mean[10:] == pytest.approx(80.0, rel=0.02)
    assert run.lag_records[10:] == pytest.approx(100.0, rel=0.02)
    assert np.mean(seen[3:]) == pytest.approx(80.0, rel=0.02)



def test_a_batchs_commit_waits_for_each_record_it_read_where_the_fit_measured_that():
    """Where the fit found the wait per record read (`commit_per_record_s`, session 83), a
    batch commits its latency plus that for each record after its work, at any fill and factor:
    at 60/s into a 100/s task, 60 records a batch at 2 ms each, so 0.6 s of work and
    0.2 + 0.12 s of wait, 0.92 s, where the line in the fill read 0.86 s; at 30/s, 0.3 + 0.26 s.
    The next batch starts on its trigger (0.05 s after the commit is before it). Without the
    figure, the line in the fill stands."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000), batch_seconds=3.0,
                  batch_overhead_s=0.7, commit_latency_s=0.2, batch_gap_s=0.05, trigger_s=1.0, run_ahead=1.5)
    per_record = JobModel(**common, commit_per_record_s=0.002)
    for rate, duration in ((60, 0.92), (30, 0.56)):
        run = simulate(workloads.constant(rate, seconds=120, noise=0), per_record, Fixed(1), tick_s=15)
        assert run.batch_duration[20:] == pytest.approx(duration, abs=0.005), rate
        assert run.batch_duration[20:] == pytest.approx(rate / 100 + per_record.commit_wait(1, rate / 450, rate),
                                                        abs=0.005)
    line = simulate(workloads.constant(60, seconds=120, noise=0), JobModel(**common), Fixed(1), tick_s=15)
    assert line.batch_duration[20:] == pytest.approx(0.6 + 0.2 + 0.45 * 60 / 450, abs=0.005)
    assert JobModel(**common).commit_wait(1, 60 / 450, 60) == pytest.approx(0.2 + 0.45 * 60 / 450)
    with pytest.raises(ValueError, match="commit_per_record_s"):
        JobModel(commit_per_record_s=-1e-3)

def test_a_commit_waits_error_comes_back_magnified_in_a_steady_batch_and_the_split_says_how_much():
    """A job that keeps up at 78% busy with batches past its 1 s trigger runs cycles of
    (wait + gap) / (1 - 0.78): each cycle works the input of the one before. Its commit waiting
    13 ms longer (0.213 s against 0.2 s, q2's error in session 82) makes each batch about 60 ms
    longer, not 13. The benchmark's split (`fit_checks.steady_wait_ratio`) reads the real
    batches' wait against the model's over the seconds asked, and gives the replay's batches
    over the real ones that error alone makes: the engine's own ratio."""
    common = dict(partitions=1, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=1000), batch_seconds=3.0,
                  batch_gap_s=0.03, trigger_s=1.0, run_ahead=3.0)
    model, real = (JobModel(**common, commit_latency_s=wait, batch_overhead_s=wait + 0.03) for wait in (0.2, 0.213))
    load = workloads.constant(78, seconds=300, noise=0)
    steady = {job.commit_latency_s: simulate(load, job, Fixed(1), tick_s=15).batch_duration[100:].mean()
              for job in (model, real)}
    assert steady[0.2] + 0.03 == pytest.approx(0.23 / 0.22, rel=0.001)
    assert steady[0.213] - steady[0.2] == pytest.approx(0.013 / 0.22, rel=0.01)
    factor = np.ones(300, dtype=np.int32)
    commits = np.array([(t, 0.1, 0.213 if t >= 100 else 0.5) for t in range(0, 300, 2)], dtype=np.float64)
    measured, modelled, ratio = steady_wait_ratio(model, factor, commits, np.arange(300) >= 100)
    assert (measured, modelled) == (pytest.approx(0.213), pytest.approx(0.2))
    assert ratio == pytest.approx((steady[0.2] + 0.03) / (steady[0.213] + 0.03), rel=0.01)
    assert steady_wait_ratio(model, factor, np.zeros((0, 3)), np.ones(300, dtype=bool)) is None

def test_each_second_shows_the_last_committed_batchs_duration_as_the_pipelines_gauge_does():
    """The batch duration gauge (`autosizer_pipeline_batch_duration_seconds`) holds the last
    committed batch's, which the benchmark compares with the real job's. 100/s on one partition
    at 2 ms a record: each 1 s trigger's batch works 0.2 s and commits 0.1 s later, so 0.3 s;
    at 450/s it works 0.9 s and commits at 1.0 s. A job without batches shows none."""
    job = JobModel(partitions=1, process_seconds=0.002, process_cv=0.0, commit_latency_s=0.1,
                   batch_overhead_s=0.05)
    for rate, duration in ((100, 0.3), (450, 1.0)):
        run = simulate(workloads.constant(rate, seconds=120, noise=0), job, Fixed(1), tick_s=5)
        assert np.isnan(run.batch_duration[0])  # before the first commit
        assert run.batch_duration[10:] == pytest.approx(duration, rel=0.02)
    continuous = simulate(workloads.constant(100, seconds=60, noise=0), dataclasses.replace(job, batch_seconds=0.0),
                          Fixed(1), tick_s=5)
    assert np.isnan(continuous.batch_duration).all()


def test_a_batch_in_flight_where_a_block_ends_carries_on_as_it_began():
    """The simulator runs a steady factor in blocks of ticks; the job does not notice where one
    ends. 430/s on one partition at 2 ms a record, batches back to back (a 1.07 s cycle against
    the 1 s trigger), so one is in flight where the block ends at 400 s. Started anew on the next
    block's first second, it read a longer batch (1.77 s against 1.02 s) and the backlog jumped
    from about 660 to 1,285, settling over some 20 s (run 149's replay at 83% busy: 1.48 s at
    120 s, a block's end after its rescale). It now resumes where it began."""
    job = JobModel(partitions=1, process_seconds=0.002, process_cv=0.0, commit_latency_s=0.1,
                   batch_overhead_s=0.15)
    run = simulate(workloads.constant(430, seconds=900, noise=0), job, Fixed(1), tick_s=5)
    steady = run.batch_duration[30:]
    assert np.nanmax(steady) == pytest.approx(np.nanmin(steady), rel=0.01)
    cycle = 0.15 / (1 - 0.86)  # each cycle reads its own length of input: 0.86 s of work a second, plus 0.15 s
    assert np.nanmin(steady) == pytest.approx(0.86 * cycle + 0.1, rel=0.01)  # work, then the commit
    assert run.lag_records_mean[380:420].max() < 1.1 * run.lag_records_mean[300:380].max()


class ScaleAt(Fixed):
    """Factor 1, then `factor` from `at` s on, keeping whether each tick showed each factor's duty."""

    def __init__(self, factor: int, at: float):
        super().__init__(1)
        self.to, self.at = factor, at
        self.seen: list[tuple[float, int, bool]] = []

    def decide(self, observation, state=None):
        self.seen.append((observation.time, observation.factor, observation.duties is not None))
        return Decision(self.to if observation.time >= self.at else 1, "step"), state


def test_a_read_the_real_pipeline_showed_after_a_rescale_shows_the_replays_daemon_after_its_own():
    """A fitted Kinesis run whose pipeline exported the read that grows only after its rescale
    1 -> 4 (`JobModel.read_growth_after`): the replay's daemon reads each factor's duty only
    after a rescale of its own, and one shown it from the start reads it from the start."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_overhead_s=0.4,
                   batch_overhead_per_task_s=0.02, read_growth_shown=True, read_growth_after=1)
    load = workloads.constant(600, seconds=90, noise=0)  # factor 1 takes about 390/s: behind, the cost measured
    after = ScaleAt(4, at=30)
    simulate(load, job, after, tick_s=5)
    assert {shown for _, factor, shown in after.seen if factor == 1} == {False}
    assert {shown for _, factor, shown in after.seen if factor == 4} == {True}
    start = ScaleAt(4, at=30)
    simulate(load, dataclasses.replace(job, read_growth_after=0), start, tick_s=5)
    assert True in {shown for _, factor, shown in start.seen if factor == 1}
    assert {shown for _, factor, shown in start.seen if factor == 4} == {True}


def test_the_batch_cost_reads_as_none_until_a_saturated_batch_measures_it():
    """The pipeline measures a batch's fixed cost only from a batch that left records it read
    and began at the last one's end, and the daemon's duty is 1 until then (run 87, nyc-flights pressed into 12 minutes, never
    fell a batch behind: its daemon held factor 2 on 782/s where the replay, shown the cost,
    read 652/s and went to 4). A job that has measured it shows it from the first tick."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_overhead_s=0.5)
    step = workloads.step(before=100, after=1200, at=30, seconds=90, noise=0)  # factor 1 takes ~390/s
    seen = duties(step, job)
    assert [duty for _, duty in seen] == pytest.approx([job.duty(1)] * len(seen))
    seen = duties(step, dataclasses.replace(job, overhead_known_at_start=False))
    unknown = [time for time, duty in seen if duty == 1.0]
    assert unknown == [time for time, _ in seen[:len(unknown)]]  # from the start, then never again
    # until the step's second saturated batch: the first waited for its trigger (31 s), and its
    # cycle (it commits at 34.5 s) held that wait; the second, back to back, commits at 38 s
    assert max(unknown) == 35
    assert all(duty == pytest.approx(job.duty(1)) for _, duty in seen[len(unknown):])
    seen = duties(workloads.constant(100, seconds=90, noise=0), dataclasses.replace(job, overhead_known_at_start=False))
    assert {duty for _, duty in seen} == {1.0}  # a job that keeps up never measures it
    seen = duties(workloads.constant(100, seconds=90, noise=0),
                  dataclasses.replace(job, overhead_known_at_start=False, commit_latency_s=0.1))
    assert [duty for _, duty in seen] == pytest.approx([3 / 3.1] * len(seen))  # its commit latency for the cost
    # and the gap after a commit where the run measured one, as the daemon reads both (run k13's
    # replay, shown the latency alone, read 1% more at factor 1, held it and went on behind the
    # real daemon's 1 -> 2)
    seen = duties(workloads.constant(100, seconds=90, noise=0),
                  dataclasses.replace(job, overhead_known_at_start=False, commit_latency_s=0.1, batch_gap_s=0.05))
    assert [duty for _, duty in seen] == pytest.approx([3 / 3.15] * len(seen))
    with pytest.raises(ValueError, match="overhead_known_at_start needs true or false"):
        JobModel(overhead_known_at_start=1)


def test_a_batch_cost_is_as_old_as_the_last_scrape_not_as_the_watermarks():
    """The pipeline sets the cost's gauge at the commit, so a tick sees it once a scrape has
    come since: half a scrape interval on the median. The watermarks' age (`metrics_age_s`)
    also holds the probe's read before that scrape. Run 153's pipeline showed the cost at
    39.3 s and its daemon read it at the 40 s tick."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_overhead_s=0.5,
                   overhead_known_at_start=False, metrics_age_s=3.0, scrape_interval_s=1.0)
    step = workloads.step(before=100, after=1200, at=30, seconds=90, noise=0)
    last_unknown = {}
    for scrape in (1.0, 5.0):
        seen = duties(step, dataclasses.replace(job, scrape_interval_s=scrape))
        last_unknown[scrape] = max(time for time, duty in seen if duty == 1.0)
    # the second saturated batch commits at 38 s (the test above): seen at 38.5 s with 1 s
    # scrapes (the 40 s tick; 41 s with the watermarks' 3 s, the 45 s tick), at 40.5 s with 5 s
    assert last_unknown == {1.0: 35, 5.0: 40}


def test_a_batch_cost_shown_at_the_start_is_read_until_the_run_measures_its_own():
    """A query measures its first saturated batches while the JVM warms up (0.75 and 0.56 s
    where later batches measured 0.24-0.35 s), and a load that saturates no batch keeps that
    figure: run 124 showed 0.59 s until its first rescale, where its batches paid 0.30 s, and
    its daemon scaled up 5 s before a replay shown 0.30 s did. The replay now shows it too."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_overhead_s=0.3,
                   overhead_shown_at_start_s=0.6)
    seen = duties(workloads.step(before=100, after=1200, at=30, seconds=90, noise=0), job)
    shown = [time for time, duty in seen if duty == pytest.approx(3.0 / 3.6)]
    assert shown == [time for time, _ in seen[:len(shown)]] and 30 <= max(shown) < 45
    assert all(duty == pytest.approx(job.duty(1)) for _, duty in seen[len(shown):])
    with pytest.raises(ValueError, match="overhead_shown_at_start_s must be 0 or more"):
        JobModel(overhead_shown_at_start_s=-1.0)


class Scripted:
    """Wants `first` until `at`, then `then`; remembers when it was asked (the daemon's ticks)."""

    name = "scripted"

    def __init__(self, first: int, then: int, at: float):
        self.first, self.then, self.at, self.asked = first, then, at, []

    def decide(self, observation, state=None):
        self.asked.append(observation.time)
        return Decision(self.then if observation.time >= self.at else self.first, "scripted"), state


def test_a_drain_that_cuts_a_batch_after_a_saturated_one_shows_the_batch_cost():
    """A drained batch that left records is a saturated one to the pipeline. After a saturated
    batch its cycle from that commit is the job's own, and the pipeline takes the fixed cost from
    it: a step to 150% at 22 s saturates the batch before the drain at 30 s. After a batch that
    kept up its cycle held the wait for its trigger, so since session 49 the pipeline takes none
    (runs 88 and 89 had exported one a second after their first rescale, with the job busy): at
    95% of factor 1's capacity a batch is at work at almost any moment, at 10% it is done long
    before the next whole second, and neither shows the cost."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_overhead_s=0.3,
                   restart_downtime_s=0.5, overhead_known_at_start=False)
    capacity = 4 * 100 * job.duty(1)
    duties: list[tuple[float, float]] = []

    class Watch(Scripted):
        def decide(self, observation, state=None):
            duties.append((observation.time, observation.duty))
            return super().decide(observation, state)

    for load, shown in ((workloads.step(0.95 * capacity, 1.5 * capacity, at=22, seconds=90, noise=0), job.duty(2)),
                        (workloads.constant(0.95 * capacity, seconds=90, noise=0), 1.0),
                        (workloads.constant(0.1 * capacity, seconds=90, noise=0), 1.0)):
        duties.clear()
        run = simulate(load, job, Watch(1, 2, at=30), Guards(cooldown_s=0), tick_s=5)
        assert [(r.time, r.new) for r in run.rescales] == [(30, 2)]
        assert {duty for time, duty in duties if time <= 30} == {1.0}  # no batch saturated before
        assert [duty for time, duty in duties if time > 30] == pytest.approx([shown] * sum(t > 30 for t, _ in duties))


def checked_job(**settings) -> JobModel:
    return JobModel(**{"partitions": 4, "process_seconds": 0.01, "process_cv": 0.0, "restart_downtime_s": 1.0,
                       "skew": KeySkew(keys=2000), "batch_seconds": 0, "start_factor": 4, **settings})


def test_the_daemon_does_not_tick_while_the_actuator_checks_a_scale_downs_lag():
    # Run 82's 8 -> 1 kept the real daemon 30.8 s: the actuator watches the lag for
    # verify_window_s after the first commit before it calls the scale-down done.
    guards = Guards(cooldown_s=0, scale_down_delay_s=0)
    policy = Scripted(4, 2, at=30)  # 300/s fits 2 (800/s): the check passes
    run = simulate(workloads.constant(300, seconds=200, noise=0), checked_job(), policy, guards, tick_s=5)
    assert [(r.time, r.old, r.new) for r in run.rescales] == [(30, 4, 2)]
    done = 30 + checked_job().actuation_s(2) + 30
    assert not [t for t in policy.asked if 30 < t < done]
    assert min(t for t in policy.asked if t > 30) < done + 5  # and on the tick grid again after it

    unchecked = Scripted(4, 2, at=30)
    simulate(workloads.constant(300, seconds=200, noise=0), checked_job(verify_window_s=0), unchecked, guards,
             tick_s=5)
    assert 35 in unchecked.asked  # without the check the next tick comes as usual


def test_a_scale_down_that_falls_behind_is_rolled_back_and_the_next_actuation_backs_off():
    # 600/s on 1 (400/s) grows the lag 200/s, more than a quarter of the input (150/s) over the
    # nothing it grew at 4: the actuator's rule rolls it back, and the daemon waits 60 s before
    # the next actuation, as it does after any failed one.
    guards = Guards(cooldown_s=0, scale_down_delay_s=0)
    run = simulate(workloads.constant(600, seconds=400, noise=0), checked_job(), Scripted(4, 1, at=30), guards,
                   tick_s=5)
    (down, back, again, *_) = run.rescales
    assert (down.time, down.old, down.new) == (30, 4, 1)
    assert (back.old, back.new) == (1, 4) and back.reason.startswith("rolled back 1 -> 4: lag grew 200/s")
    assert 30 + checked_job().actuation_s(1) + 30 <= back.time < 30 + checked_job().actuation_s(1) + 35
    # backed off 60 s from the failed scale-down's tick (the daemon stamps it then), then tried again
    assert 30 + 60 <= again.time < 30 + 65 and again.time > back.time
    assert score(run).rescales == len(run.rescales)  # a rollback is a restart the job pays for


def test_the_lag_check_is_the_actuators_own_rule():
    # One rule for the restart actuator and the simulator (autosizer/actuators/verification.py).
    assert lag_got_worse(1000, 1000 + 30 * 140, 30, input_rate=600, processed_rate=600) is None
    assert lag_got_worse(1000, 1000 + 30 * 200, 30, input_rate=600, processed_rate=600) == (
        "lag grew 200/s over 30s (1000 -> 7000 records), more than the 150/s allowed (it grew 0/s before)")
    # A job already falling behind before the rescale may go on at that pace.
    assert lag_got_worse(0, 30 * 300, 30, input_rate=600, processed_rate=400) is None
    # Small rates read as themselves, not rounded to look equal ("grew 1/s, more than the 1/s allowed")
    assert lag_got_worse(0, 7, 6, input_rate=2.02, processed_rate=2.0) == (
        "lag grew 1.17/s over 6s (0 -> 7 records), more than the 0.525/s allowed (it grew 0.02/s before)")
    assert lag_got_worse(62096, 129246, 25, input_rate=7200, processed_rate=7170) == (  # large rates whole
        "lag grew 2686/s over 25s (62096 -> 129246 records), more than the 1830/s allowed (it grew 30/s before)")


def test_the_lag_check_reads_the_slowest_growth_over_the_windows_last_third():
    """Session 76's Kinesis run: 2/s, a 6 s window, a healthy 4 -> 1 rolled back on 4-8 records,
    one batch's input read at the window's end. The lag is read over the last third too and the
    slowest growth from the first reading counts: a trough's where the backlog holds, the same
    wherever it grows steadily, the end's where it grows and then levels off."""
    assert tail_times(30) == [20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]
    assert tail_times(6) == [4, 5, 6] and tail_times(0.5) == [pytest.approx(1 / 3), 0.5]

    def check(lag) -> str | None:
        seconds, last = slowest(lag(0), [(t, lag(t)) for t in tail_times(6)])
        return lag_got_worse(lag(0), last, seconds, input_rate=2, processed_rate=2)

    def sawtooth(t: float) -> float:  # 2/s in 3 s batches: 0, 2, 4, then committed
        return 2 * (t % 3)

    assert lag_got_worse(0, sawtooth(5), 5, input_rate=2, processed_rate=2) is not None  # one reading: 4 records
    assert check(sawtooth) is None  # a trough at 6 s: no growth
    assert check(lambda t: 2 * t) == "lag grew 2/s over 6s (0 -> 12 records), more than the 0.5/s allowed (it grew 0/s before)"
    assert check(lambda t: t + sawtooth(t)) is not None  # growing under the sawtooth: trough to trough
    assert check(lambda t: min(t, 3)) is None  # grew, then levelled off: 3 records over 6 s
    assert slowest(0, [(4, 3.0), (5, 1.0), (6, 1.2)]) == (6, 1.2)  # the latest of equal growths


def test_the_simulated_lag_check_lasts_as_the_shipped_actuators(tmp_path):
    import inspect

    from autosizer.actuators.restart import RestartActuator

    shipped = inspect.signature(RestartActuator.__init__).parameters["verify_window_s"].default
    assert JobModel().verify_window_s == shipped
    with pytest.raises(ValueError, match="verify_window_s"):
        JobModel(verify_window_s=-1.0)
    with pytest.raises(ValueError, match="verify_window_s"):
        JobModel(verify_window_s=float("nan"))


def test_a_replay_starts_from_the_days_on_record_at_the_runs_clock_time():
    """A replay of a real run whose daemon found days in Redis: the policy reads the run's clock
    time (`origin`) and those days, so its day plan sizes for a step the days had at 08:00
    before it comes; without them it reacts after. The days given are not changed."""
    from autosizer.policies import load_policy
    from autosizer.policies.history import DAY_S, InputHistory

    day, at = 20_000, 300  # the step comes at 08:00 UTC of day 20,000, 300 s into the run
    origin = day * DAY_S + 8 * 3600 - at
    history = InputHistory()
    for back in (1, 2, 3):
        for second in range(0, DAY_S, 60):
            busy = 8 * 3600 <= second < 8 * 3600 + 600
            history.record((day - back) * DAY_S + second, 1000.0 if busy else 100.0)
    kept = {d: row.copy() for d, row in history.days.items()}
    job = JobModel(partitions=2, process_seconds=0.01, process_cv=0.0, skew=KeySkew(keys=2000),
                   restart_downtime_s=5)
    load = workloads.Workload("step", np.where(np.arange(900) < at, 100.0, 1000.0))

    def run(**clock):
        return simulate(load, job, load_policy("autosizer", {}), Guards(cooldown_s=20), tick_s=5, **clock)

    ahead, reacting = run(origin=origin, history=history), run(origin=origin)
    first = ahead.rescales[0]
    assert first.time < at and first.new > 1 and "the day plan runs" in first.reason, ahead.rescales
    assert reacting.rescales[0].time >= at, reacting.rescales
    assert ahead.lag_seconds[at:].max() < reacting.lag_seconds[at:].max()
    assert all(np.array_equal(history.days[d], kept[d]) for d in kept) and set(history.days) == set(kept)


def test_a_simulated_jobs_time_zone_is_an_iana_name():
    with pytest.raises(ValueError, match="job setting timezone must be an IANA time zone name") as caught:
        JobModel(timezone="New York")
    assert "\n" not in str(caught.value)


def test_a_job_whose_shares_were_measured_is_not_held_to_the_key_cap():
    """`autosizer fit` gives a real job's partition weights and hot-share table: no key is drawn
    then, so 2,000 partitions at the default 2,000 keys each run (drawn, they are refused)."""
    table = tuple(tuple(1.0 / f for f in FACTORS) for _ in range(2000))
    job = JobModel(partitions=2000, partition_weights=(1.0,) * 2000, hot_share_table_measured=table)
    assert job.weights.sum() == pytest.approx(1.0) and job.hot_shares[8].max() == pytest.approx(1 / 8)
    with pytest.raises(ValueError, match="keys = 1,000 or fewer"):
        JobModel(partitions=2000, partition_weights=(1.0,) * 2000)


def test_a_split_doubles_what_the_job_reads_from_the_change_on():
    """A fitted re-shard: one partition for an hour, then its two children. 150/s is half again
    what one partition's task does (100/s): the backlog grows 50/s until the split and drains
    50/s after it. The same three partitions as one layout (what `autosizer fit` made of the
    Kinesis demo's split and merge until session 58) read three queues from the start and never
    fell behind."""
    job = JobModel(partitions=3, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(1.0, 0.0, 0.0), layout_changes_s=(3600.0,),
                   layout_weights=((0.0, 0.5, 0.5),))
    load = workloads.constant(150, seconds=7200, noise=0)
    run = simulate(load, job, Fixed(1), tick_s=15)
    assert run.lag_records[3599] == pytest.approx(50 * 3600)
    assert run.lag_records[5399] == pytest.approx(50 * 1800)
    assert run.lag_records[-1] == pytest.approx(0, abs=1)
    assert not run.rescales
    # task-hours count the tasks each layout ran: one for the first hour, two for the second
    assert score(run).task_hours == 3.0
    at_once = dataclasses.replace(job, partition_weights=(0.34, 0.33, 0.33), layout_changes_s=(), layout_weights=())
    assert simulate(load, at_once, Fixed(1), tick_s=15).lag_records.max() == 0


def test_after_a_change_the_daemon_sees_the_new_layouts_partitions_each_from_the_slowest_position():
    """The observation names the layout's partitions by the run's own indexes, and a child starts
    where its parent's oldest record was: the backlog carries over whole."""
    seen: list[tuple[float, tuple]] = []

    class Watch(Fixed):
        def decide(self, observation, state=None):
            seen.append((observation.time, tuple(observation.partitions.names)))
            return super().decide(observation, state)

    job = JobModel(partitions=3, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(0.0, 1.0, 0.0), layout_changes_s=(100.0,),
                   layout_weights=((0.5, 0.0, 0.5),))
    run = simulate(workloads.constant(200, seconds=200, noise=0), job, Watch(1), tick_s=10)
    assert dict(seen)[90] == (("topic", 1),) and dict(seen)[110] == (("topic", 0), ("topic", 2))
    # 100/s behind until 100 s (10,000 records, the oldest 50 s old), then 200/s taken: the
    # backlog and its oldest record's age hold (children from zero would have caught up)
    assert run.lag_records[99] == pytest.approx(10_000) and run.lag_records[-1] == pytest.approx(10_000)
    assert run.lag_seconds[99] == pytest.approx(50, abs=1) and run.lag_seconds[-1] == pytest.approx(50, abs=1)


def _split(closed: float, children: int = 2, read: float = 300.0) -> JobModel:
    """One partition, then `children` (a split) read from `read` s, its last record taken at
    `closed`."""
    after = (0.0, *[1.0 / children] * children)
    return JobModel(partitions=children + 1, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                    partition_weights=(1.0, *[0.0] * children), layout_changes_s=(read,),
                    layout_weights=(after,), layout_closed_s=(closed,) if closed else ())


def test_a_closed_parents_children_wait_unread_until_the_layout_reads_them():
    """80/s where a task does 100/s: the job keeps up. The parent closes at 300 s and its children
    are read from 330 s (the pipeline reads a child once its parent is done): their 30 s of
    records (2,400) wait, counted as the parent's backlog, the oldest 30 s old, then drain at
    200 - 80 = 120/s. Without the closing the parent read them as they came."""
    load = workloads.constant(80, seconds=600, noise=0)
    run = simulate(load, _split(300.0, read=330.0), Fixed(1), tick_s=15)
    assert run.lag_records[299] == pytest.approx(0, abs=1)
    assert run.lag_records[329] == pytest.approx(2_400) and run.lag_seconds[329] == pytest.approx(30)
    assert run.lag_records[339] == pytest.approx(2_400 - 10 * 120)
    assert run.lag_records[360:].max() == pytest.approx(0, abs=1)
    assert simulate(load, _split(0.0, read=330.0), Fixed(1), tick_s=15).lag_records.max() == pytest.approx(0, abs=1)


@pytest.mark.parametrize("waiting", [(0.25, 0.25), (0.5, 0.0)])
def test_a_reshards_children_hold_the_records_they_took_while_they_waited(waiting):
    """80/s over two partitions, a task 100/s: the job keeps up. Partition 0 splits at 300 s and
    its children are read from 330 s, holding the 1,200 records they took meanwhile (half the
    input). After it the first child takes a quarter of the input and the second 5% (run v5: a
    child closed by a merge before it was read took 15% of the input while it waited and 2.2%
    after). Counted at their shares after, the children held 720 at the change (v5's replay
    dropped about 1,000 records there); counted at their shares while they waited
    (`JobModel.layout_waiting_weights`) they hold the 1,200, which then drain. A child that took
    none while it waited holds none."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(0.5, 0.5, 0.0, 0.0), layout_changes_s=(330.0,),
                   layout_weights=((0.0, 0.7, 0.25, 0.05),), layout_closed_s=(300.0,))
    load = workloads.constant(80, seconds=600, noise=0)
    run = simulate(load, dataclasses.replace(job, layout_waiting_weights=((0.0, 0.0, *waiting),)), Fixed(1),
                   tick_s=15)
    shares_after = simulate(load, job, Fixed(1), tick_s=15)
    assert run.lag_records[329] == pytest.approx(1_200) and shares_after.lag_records[329] == pytest.approx(1_200)
    assert run.lag_records[330] > 0.85 * 1_200 > 1.5 * shares_after.lag_records[330]
    assert np.isfinite(run.lag_records).all() and np.isfinite(run.lag_seconds).all()
    assert run.lag_records[350:].max() == pytest.approx(0, abs=1)


def test_a_batch_reads_a_waiting_childs_records_up_to_its_run_ahead_in_records_not_positions():
    """The same split in batches, a record adding 1 ms to a batch's commit: the second child
    took 45% of the input while it waited and 5% after. A batch reads up to its run-ahead of
    each partition's records; counted in positions at the child's share after, that span held
    nine times the records there, and the first batch after the change took 2.74 s where a
    child that kept its 45% (the same records) takes 1.92 s; now 1.94 s."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_seconds=1.0, commit_per_record_s=0.001,
                   partition_weights=(0.5, 0.5, 0.0, 0.0), layout_changes_s=(330.0,),
                   layout_weights=((0.0, 0.5, 0.45, 0.05),), layout_closed_s=(300.0,),
                   layout_waiting_weights=((0.0, 0.0, 0.05, 0.45),))
    load = workloads.constant(80, seconds=600, noise=0)
    run = simulate(load, job, Fixed(1), tick_s=15)
    kept = simulate(load, dataclasses.replace(job, layout_weights=((0.0, 0.5, 0.05, 0.45),)), Fixed(1), tick_s=15)
    first = np.flatnonzero(run.batch_duration[330:] > run.batch_duration[329] + 0.1)[0] + 330
    assert first == np.flatnonzero(kept.batch_duration[330:] > kept.batch_duration[329] + 0.1)[0] + 330
    assert run.batch_duration[first] == pytest.approx(kept.batch_duration[first], rel=0.05)


def test_a_merge_parent_closed_before_the_layout_it_ends_holds_its_childs_records_from_its_closing():
    """100/s over two partitions, a task 100/s: the job keeps up. Partition 0 splits at 30 s and
    its child is read from 60 s (1,500 records, draining at 50/s); partition 1 closes at 45 s
    for a merge whose child is read from 80 s. From 45 s the merge child's records wait (50/s),
    as the pipeline holds them until it reads the child (run v5: 75 s to 113 s). Until session
    85 the closing could come no earlier than 60 s, and the parent read them until then."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(0.5, 0.5, 0.0, 0.0), layout_changes_s=(60.0, 80.0),
                   layout_weights=((0.0, 0.5, 0.5, 0.0), (0.0, 0.0, 0.5, 0.5)), layout_closed_s=(30.0, 45.0))
    load = workloads.constant(100, seconds=300, noise=0)
    run = simulate(load, job, Fixed(1), tick_s=5)
    clamped = simulate(load, dataclasses.replace(job, layout_closed_s=(30.0, 60.0)), Fixed(1), tick_s=5)
    assert run.lag_records[59] == pytest.approx(1_500 + 50 * 15, rel=0.02)
    assert run.lag_records[79] == pytest.approx(50 * 35 + (1_500 - 50 * 20), rel=0.02)
    assert clamped.lag_records[79] == pytest.approx(50 * 20 + (1_500 - 50 * 20), rel=0.02)
    assert run.lag_records[150:].max() == pytest.approx(0, abs=1)


def _merge_parent_read_late(second: float) -> JobModel:
    """Run v9's re-shards, 80/s: partition 0 splits into 2 and 3 (closed at 300 s, read from
    330 s); 1 and 3 merge into 4, closed at 315 s, before 3 was read: 3 took 600 records from
    300 to 315 s and none after (the fit's waiting share, over 300-330 s: 25%), so the fit gives
    it HELD_ONLY_SHARE in the layout that reads it. Partition 1 is read to its end at `second`,
    and after it the merge child's records count under 3, 70% of the input, as the pipeline
    counts a child's under its parent; the child is read from 360 s."""
    held = 1e-6
    return JobModel(partitions=5, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                    partition_weights=(0.5, 0.5, 0.0, 0.0, 0.0), layout_changes_s=(330.0, second, 360.0),
                    layout_weights=((0.0, 0.7, 0.3, held, 0.0), (0.0, 0.0, 0.3, 0.7, 0.0), (0.0, 0.0, 0.3, 0.0, 0.7)),
                    layout_closed_s=(300.0, 0.0, 315.0),
                    layout_waiting_weights=((0.0, 0.0, 0.25, 0.25, 0.0), (0.0,) * 5, (0.0, 0.0, 0.0, 0.0, 0.7)))


def test_a_partition_whose_share_changes_keeps_the_records_it_held():
    """Partition 3 still holds its records at 333 s, when the layout gives it 70% of the input
    where it had 1e-6: kept as a multiple of its old share they were 700,000 times as many
    (run v9's replay held 132 million records)."""
    run = simulate(workloads.constant(80, seconds=600, noise=0), _merge_parent_read_late(333.0), Fixed(1), tick_s=3)
    assert run.lag_records[333] < run.lag_records[332] < 2_000
    assert run.lag_records.max() < 80 * 60


def test_a_partition_closed_before_it_was_read_reads_nothing_past_its_closing():
    """The merge child's records wait from the closing (315 s) until it is read (360 s): 70% of
    45 s of input, the oldest 45 s old, then they drain. Until session 86 partition 3 was held
    to its closing only until its lift as a split's child, and read them from 345 s (the
    backlog 0); and its own 600 records counted over 300-330 s, where they all came before
    315 s, so that the merge child's from 315 s counted at 25% (1,980 at 359 s)."""
    run = simulate(workloads.constant(80, seconds=600, noise=0), _merge_parent_read_late(345.0), Fixed(1), tick_s=15)
    assert run.lag_records[314] == pytest.approx(600)
    assert run.lag_records[359] == pytest.approx(0.7 * 80 * 45) and run.lag_seconds[359] == pytest.approx(45)
    assert run.lag_records[450:].max() == pytest.approx(0, abs=1)


def test_a_splits_children_go_through_their_parents_backlog_at_its_pace_before_their_own():
    """150/s where a partition's task does 100/s: 15,000 records behind at the split (300 s).
    The real parent takes them at its pace (150 s) while its children take input unread (seed
    003: children after parents), then the children, twice its pace, catch up on 22,500
    records whose oldest is 150 s old. Read at their own pace from the parent's position, the
    backlog drained from the split at 50/s and the age never rose past 100 s (run u2's replay,
    its peak 0.72 of the real lag's)."""
    load = workloads.constant(150, seconds=1200, noise=0)
    run = simulate(load, _split(300.0), Fixed(1), tick_s=15)
    at_once = simulate(load, _split(0.0), Fixed(1), tick_s=15)
    assert run.lag_records[299] == pytest.approx(15_000)
    assert run.lag_records[449] == pytest.approx(22_500) and run.lag_seconds[449] == pytest.approx(150)
    assert run.lag_records[-1] == pytest.approx(0, abs=1)
    assert at_once.lag_records[449] == pytest.approx(7_500) and at_once.lag_seconds.max() < 101


def test_in_batches_a_splits_children_keep_their_parents_pace_until_its_last_record():
    """The same in the pipeline's micro-batches (a batch's fixed cost and commit included): up to
    the input at the split, the children's backlog is what the parent's would have been had it
    kept all the input, as it takes them at its own pace; past it their own pace shows."""
    load = workloads.constant(150, seconds=1200, noise=0)
    batched = {"batch_seconds": 1.0}
    run = simulate(load, dataclasses.replace(_split(300.0), **batched), Fixed(1), tick_s=15)
    kept = JobModel(partitions=1, process_seconds=0.01, process_cv=0.0, **batched)
    one = simulate(load, kept, Fixed(1), tick_s=15)
    at_once = simulate(load, dataclasses.replace(_split(0.0), **batched), Fixed(1), tick_s=15)
    assert run.lag_records[300:600] == pytest.approx(one.lag_records[300:600], rel=0.01)
    assert run.lag_seconds[300:600] == pytest.approx(one.lag_seconds[300:600], abs=1)
    assert at_once.lag_records[599] < 0.7 * run.lag_records[599]
    # twice the pace once past it (the input outruns both: it grows, and slower)
    assert run.lag_records[-1] - run.lag_records[-201] < 0.5 * (run.lag_records[599] - run.lag_records[399])


def test_in_batches_a_splits_children_are_read_once_the_pipeline_finds_their_parent_done():
    """40/s where a task does 100/s, in batches: the job keeps up (1.5 s behind) when the parent
    closes at 300 s. The run's first reading of the children came at 310 s (its probe reads once
    a second, after the pipeline has read them), but the pipeline reads them once its probe finds
    the parent done, RESHARD_FOUND_S after the commit that passed its last record (runs v1 and
    v2: their children's first batch 0.7-1.5 s before the probe's reading). Their first record
    is then read within a few seconds, not 10 (the replays of v1 and v2 read 1.18 and 1.34 of
    the real lag integral, 1.00 and 1.11 now). A parent still behind holds them until it is
    through (`test_in_batches_a_splits_children_keep_their_parents_pace_until_its_last_record`)."""
    load = workloads.constant(40, seconds=400, noise=0)
    run = simulate(load, dataclasses.replace(_split(300.0, read=310.0), batch_seconds=1.0), Fixed(1), tick_s=15)
    assert run.lag_seconds[290:300].max() == pytest.approx(1.5, abs=0.1)
    assert run.lag_seconds[300:330].max() < 3.0
    assert run.lag_seconds[310:330].max() < 1.5  # the children at twice the parent's pace


def test_in_batches_a_merges_child_reads_its_parents_backlog_as_both_would_have():
    """A merge's child goes through both parents' backlog at their pace in the pipeline's
    batches too: each batch reads as far ahead as the two would have (their run-ahead), so up to
    the input at the merge its backlog is the one a job that kept both parents would show."""
    batched = {"process_seconds": 0.002, "process_cv": 0.0, "batch_seconds": 1.0}
    job = JobModel(partitions=3, partition_weights=(0.5, 0.5, 0.0), layout_changes_s=(300.0,),
                   layout_weights=((0.0, 0.0, 1.0),), layout_closed_s=(300.0,), **batched)
    load = workloads.step(before=1_250, after=250, at=300, seconds=600, noise=0)
    run = simulate(load, job, Fixed(1), tick_s=15)
    kept = simulate(load, JobModel(partitions=2, **batched), Fixed(1), tick_s=15)
    assert run.lag_records[299] > 100_000 and run.lag_records[399] > 100_000  # far behind at the merge, and at 400 s
    assert run.lag_records[300:400] == pytest.approx(kept.lag_records[300:400], rel=0.01)  # a batch: 0.6%


@pytest.mark.parametrize("batch_seconds", [1.0, 0.0])
def test_the_kernels_compiled_without_unset_limits_run_the_same(monkeypatch, batch_seconds):
    """The kernels are compiled without a layout change's limits where no partition is held to
    any (`_Model.limits` is None: most of a week's blocks, which paid 12-23% for them in session
    60); read where none binds, they give the same run to the last bit, rescales included."""
    from autosizer.policies import load_policy

    job = JobModel(partitions=8, batch_seconds=batch_seconds)
    load = workloads.step(before=200, after=1_500, at=300, seconds=1_200)

    def run():
        return simulate(load, job, load_policy("autosizer", {}), tick_s=15)

    fast = run()
    monkeypatch.setattr(engine, "_binding", lambda limits: True)
    read = run()
    assert fast.rescales and fast.rescales == read.rescales
    assert np.array_equal(fast.lag_records, read.lag_records)
    assert np.array_equal(fast.lag_seconds, read.lag_seconds)


def test_a_merges_child_goes_through_both_parents_backlogs_at_their_pace():
    """250/s over two partitions whose tasks do 100/s each: 15,000 behind at the merge (300 s),
    when the input falls to 50/s. The parents take their backlog at 200/s, both at once (75 s),
    while their child (one task, 100/s) takes input unread; then it catches up. At one task's
    pace the child would take 150 s to get through them."""
    job = JobModel(partitions=3, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(0.5, 0.5, 0.0), layout_changes_s=(300.0,),
                   layout_weights=((0.0, 0.0, 1.0),), layout_closed_s=(300.0,))
    load = workloads.step(before=250, after=50, at=300, seconds=900, noise=0)
    run = simulate(load, job, Fixed(1), tick_s=15)
    # 15,000 behind at the merge, taken at both parents' 200/s (75 s) while 50/s comes in
    assert run.lag_records[299] == pytest.approx(15_000, rel=0.01)
    assert run.lag_records[374] == pytest.approx(75 * 50, rel=0.05)
    assert run.lag_seconds[374] == pytest.approx(75, abs=2)
    alone = simulate(load, dataclasses.replace(job, layout_closed_s=()), Fixed(1), tick_s=15)
    assert alone.lag_records[374] > 2 * run.lag_records[374]  # at one task's pace: 150 s to get through


def test_a_trace_with_layout_changes_loads_them_and_the_simulate_command_names_them(tmp_path, capsys):
    trace = tmp_path / "resharded.toml"
    trace.write_text('[workload]\nkind = "constant"\nrate = 100\nseconds = 600\n[job]\npartitions = 3\n'
                     'partition_weights = [0.5, 0.5, 0]\nlayout_changes_s = [60.0]\nlayout_weights = [[0, 0.5, 0.5]]\n')
    job = load_trace(str(trace)).job
    assert job.layouts() == [(0.0, (0.5, 0.5, 0)), (60.0, (0, 0.5, 0.5))]
    assert job.partition_counts(100)[[0, 59, 60, 99]].tolist() == [2, 2, 2, 2]
    assert job.in_layout((0, 0.5, 0.5))[0].partitions == 2
    assert main(["simulate", "--trace", str(trace), "--policy", "utilization"]) == 0
    assert "3 partitions, read 2, then 2 from 60 s" in capsys.readouterr().out


class Seen(Fixed):
    """`Fixed`, keeping every tick's observation by its time."""

    def __init__(self, factor: int):
        super().__init__(factor)
        self.seen: dict[float, object] = {}

    def decide(self, observation, state=None):
        self.seen[observation.time] = observation
        return super().decide(observation, state)


def _grown(wait: float, restarts: bool = True, adopt_after_s: float | None = None) -> JobModel:
    """Two partitions grown to four at 600 s (a Kafka expansion's adoption), the producers
    having moved half the keys `wait` seconds before; by default a daemon that adopted once
    `adopt_after_s` was over (before session 87), the new partitions then behind a barrier."""
    return JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                    restarts_measured_s=(5.0,), partition_weights=(0.5, 0.5, 0.0, 0.0),
                    layout_changes_s=(600.0,), layout_weights=((0.25, 0.25, 0.25, 0.25),),
                    layout_waits_s=(wait,), layout_restarts=(restarts,),
                    adopt_after_s=wait if adopt_after_s is None else adopt_after_s)


def test_an_expansions_new_partitions_wait_unread_until_adopted_and_their_input_counts_under_their_parents():
    """100/s over two partitions, each task 100/s: the job keeps up. From 300 s half the keys go
    to the two new partitions, which nobody reads until the adoption at 600 s: the daemon reads
    the whole input under the two parents (as the pipeline counts it) and no backlog; at the
    adoption their 300 s of records (7,500 each) show whole, the oldest 300 s old, and drain at
    75/s. Read from their first record (no wait), they never fall behind (run e1's replay
    peaked at 10 s where the job's lag reached 28 s)."""
    watch = Seen(1)
    run = simulate(workloads.constant(100, seconds=1200, noise=0), _grown(300.0), watch, tick_s=15)
    during = watch.seen[450.0]
    assert [n for n in during.partitions.names] == [("topic", 0), ("topic", 1)]
    assert during.partitions.input_rate.tolist() == pytest.approx([50.0, 50.0])
    assert during.partitions.lag_records.sum() == pytest.approx(0, abs=1)
    assert run.lag_records[300:600].max() == pytest.approx(0, abs=1)
    # the adoption restarts the query for 5 s: nothing read, the oldest record 305 s old
    assert run.lag_records[604] == pytest.approx(15_000 + 5 * 100)
    assert run.lag_seconds[604] == pytest.approx(305, abs=1)
    assert run.lag_records[-1] == pytest.approx(0, abs=1)
    assert run.lag_seconds[700:].max() < 306 and score(run).task_hours == pytest.approx(2 * 600 / 3600 + 4 * 600 / 3600)
    read_at_once = simulate(workloads.constant(100, seconds=1200, noise=0), _grown(0.0), Fixed(1), tick_s=15)
    assert read_at_once.lag_seconds.max() < 10
    # keys moved at 307 s, inside a tick: the new partitions' records from then, not from the
    # tick's start (their oldest was a tick older, run e8's peak 30.5 s against 26.6 s), and
    # the parents' records between count whole, read as they came
    mid_tick = simulate(workloads.constant(100, seconds=1200, noise=0), _grown(293.0), Fixed(1), tick_s=15)
    assert mid_tick.lag_records[604] == pytest.approx(293 * 50 + 5 * 100)
    assert mid_tick.lag_seconds[604] == pytest.approx(298, abs=1) and mid_tick.lag_records[300:600].max() < 1


def test_an_expansions_new_partitions_are_not_read_before_their_parents_pass_the_barrier():
    """300/s over two partitions whose tasks do 100/s each: 50,000 behind when producers move half
    the keys (500 s). The parents keep those records (the replay had halved them with their
    share: run e8's step drained 4 s early) and take 50/s net of them; at the adoption (600 s,
    the barrier) they hold 45,000, which they take at 200/s from the restart's end (605 s): they
    pass it at 830 s. The pipeline plans a new partition into a batch only then, so the new
    partitions' 150/s piles up unread until it. Run e6's first batch after its adoption read the
    parents alone and committed 0.6 s after the restart; the replay that read the children in it
    committed 3.1 s after, and its scale-down came a tick late."""
    run = simulate(workloads.constant(300, seconds=1200, noise=0), _grown(100.0), Fixed(1), tick_s=15)
    assert run.lag_records[499] == pytest.approx(50_000)
    assert run.lag_records[599] == pytest.approx(45_000)  # the children's records count as input only
    parents, children = 45_750 - 50 * (803 - 604), 15_750 + 150 * (803 - 604)
    assert run.lag_records[803] == pytest.approx(parents + children, rel=0.01)
    assert run.lag_records[900] < run.lag_records[829]  # four tasks for 300/s from 830 s


def test_a_coupled_expansions_new_partitions_are_read_behind_their_parents_until_adopt_after_s():
    """The same 300/s, 50,000 behind, adopted at 600 s 100 s after the producers moved, by a
    daemon of session 87 (`adopt_after_s` 300: coupled until 800 s). A new partition is read as
    far as its parent has got, less a probe's second (`COUPLING_TRAIL_S`): its records (from
    500 s) wait while the parents work through what came before them, then drain behind them,
    where behind the barrier at the adoption they wait for the parents to pass the input at
    600 s (830 s); the oldest record is then a parent's, not a child's."""
    load = workloads.constant(300, seconds=1200, noise=0)
    coupled = simulate(load, _grown(100.0, adopt_after_s=300.0), Fixed(1), tick_s=15)
    barrier = simulate(load, _grown(100.0), Fixed(1), tick_s=15)
    # the same until the parents reach the children's first records
    assert coupled.lag_records[:750].tolist() == barrier.lag_records[:750].tolist()
    assert coupled.lag_records[800] < barrier.lag_records[800] - 5_000  # the children read behind them
    assert coupled.lag_records[829] < barrier.lag_records[829] - 10_000
    assert barrier.lag_seconds[829] == pytest.approx(329, abs=2)  # a child's, waiting since 500 s
    assert coupled.lag_seconds[829] < 240
    assert coupled.lag_records[-1] < barrier.lag_records[-1]
    # a coupling over before the adoption (the wait outlasted adopt_after_s) is the barrier
    over = simulate(load, _grown(100.0, adopt_after_s=50.0), Fixed(1), tick_s=15)
    assert over.lag_records.tolist() == barrier.lag_records.tolist()


def test_an_expansions_new_partitions_whose_parents_passed_the_barrier_before_the_restart_are_read_at_once():
    """The same expansion where the last batch before the drain had passed the barrier (runs e8
    and e9, `JobModel.layout_barrier_passed`): the first batch after the restart reads the new
    partitions, which take their 150/s and their 15,750 records at 200/s from the restart's end.
    Where one's parent had not (run e11: one of four), that one waits as before."""
    one, both = (False, False, False, True), (False, False, True, True)
    runs = {row: simulate(workloads.constant(300, seconds=1200, noise=0),
                          dataclasses.replace(_grown(100.0), layout_barrier_passed=(row,)), Fixed(1), tick_s=15)
            for row in (one, both)}
    parents, child, waiting = 45_750 - 50 * (803 - 604), (15_750 - 50 * (803 - 604)) / 2, (15_750 + 150 * 199) / 2
    assert runs[both].lag_records[803] == pytest.approx(parents + 2 * child, rel=0.01)
    assert runs[one].lag_records[803] == pytest.approx(parents + child + waiting, rel=0.01)


def test_an_expansions_new_partition_waits_for_its_own_parent_not_the_slowest_kept_one():
    """150/s over two partitions, a fifth on the first: each task does 100/s, so the second
    falls 20/s behind (10,000 at 500 s) and the first keeps up. Producers move half of each
    one's keys to a new partition (partition 2 continues 0, 3 continues 1: p % 2, as the pipeline
    reads `Barrier.parent`) 100 s before the adoption at 600 s. Partition 0 passes the barrier
    as soon as the restart ends (605 s), so its child's 1,500 records drain at once; partition 1
    holds 6,300 at 605 s, 6,000 of them below the barrier, and passes it at 665 s: only its
    child waits that long. Until session 62 both waited for the slowest kept partition."""
    job = JobModel(partitions=4, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   restarts_measured_s=(5.0,), partition_weights=(0.2, 0.8, 0.0, 0.0),
                   layout_changes_s=(600.0,), layout_weights=((0.1, 0.4, 0.1, 0.4),),
                   layout_waits_s=(100.0,), layout_restarts=(True,), adopt_after_s=100.0)
    run = simulate(workloads.constant(150, seconds=1200, noise=0), job, Fixed(1), tick_s=15)
    assert run.lag_records[499] == pytest.approx(10_000, rel=0.01)
    parent = 6_300 - 40 * (650 - 605)  # partition 1 at 650 s; partition 0 and its child drained
    waiting = 60 * 100 + 60 * 50  # partition 3, unread since 500 s
    assert run.lag_records[650] == pytest.approx(parent + waiting, rel=0.01)
    assert run.lag_records[700] < run.lag_records[664]  # partition 3 read from 665 s


def test_an_adopted_expansion_restarts_the_query_as_an_actuation_not_a_rescale():
    """The adoption's tick restarts the query (5 s measured) instead of asking the policy, and
    the daemon's cooldown counts from its end (run e1: its scale-down waited the cooldown from
    the expansion, at 135 s where a replay without it decided at 110 s). The ticks whose rate
    window (30 s) still spans it hold without the policy too, as the real daemon's do."""
    watch = Seen(1)
    run = simulate(workloads.constant(100, seconds=1200, noise=0), _grown(300.0), watch, tick_s=15)
    assert not run.rescales and [(a.time, a.old, a.new) for a in run.adoptions] == [(600, 1, 1)]
    assert not {600.0, 615.0, 630.0} & set(watch.seen)  # the adoption's tick, and 10 and 25 s after its end
    assert watch.seen[645.0].since_rescale_s == pytest.approx(40, abs=1)
    assert run.lag_records[601:605].min() > run.lag_records[599]  # nothing read while it restarts
    quiet = Seen(1)  # read 2 s before the tick: a tick that sees two readings of the new partitions
    simulate(workloads.constant(100, seconds=1200, noise=0),
             dataclasses.replace(_grown(300.0, restarts=False), layout_changes_s=(598.0,)), quiet, tick_s=15)
    assert 600.0 in quiet.seen and quiet.seen[615.0].since_rescale_s > 600


def test_a_tick_that_sees_a_joined_partitions_first_reading_alone_holds():
    """The daemon's input query needs two readings of a partition; the probe reads about once a
    second, the second shows half a scrape later. Run l2's ticks 0.6 and 1.0 s after its
    children's first reading held ("read once so far"), u2's 1.6 s after did not; the replay's
    daemon holds the same ticks. So did run u4's 0.8 s before it: the pipeline had written the
    layout to Redis, and the tick found no reading of the children ("no lag_records"); the
    replay had scaled 4 -> 8 there, on the two shards before the split, where the real daemon
    waited and held on three."""
    def ticks_after(at: float) -> set[float]:
        job = JobModel(partitions=3, process_seconds=0.01, process_cv=0.0, batch_seconds=0, scrape_interval_s=1.0,
                       partition_weights=(1.0, 0.0, 0.0), layout_changes_s=(at,), layout_weights=((0.0, 0.5, 0.5),))
        watch = Seen(1)
        simulate(workloads.constant(50, seconds=300, noise=0), job, watch, tick_s=15)
        return set(watch.seen)
    assert 150.0 not in ticks_after(149.0) and {135.0, 165.0} <= ticks_after(149.0)
    assert 150.0 not in ticks_after(150.8) and 150.0 in ticks_after(151.2)
    assert 150.0 in ticks_after(148.4)


def test_a_scale_up_after_a_merge_halved_the_capacity_is_counted_from_the_merge():
    """Two partitions merge into one at 600 s: 150/s, which factor 1 on two partitions takes
    (200/s), overloads factor 1 on one (100/s). A policy that never scales up waited from the
    merge to the run's end; counted on the first layout's capacity it never waited at all."""
    job = JobModel(partitions=3, process_seconds=0.01, process_cv=0.0, batch_seconds=0,
                   partition_weights=(0.5, 0.5, 0.0), layout_changes_s=(600.0,),
                   layout_weights=((0.0, 0.0, 1.0),))
    run = simulate(workloads.constant(150, seconds=1200, noise=0), job, Fixed(1), tick_s=15)
    assert score(run).scale_up_delay_s == 600


def test_the_engines_unchecked_observations_hold_what_the_checked_constructors_accept():
    """The engine builds its stats without the constructors' checks (three a tick, 40,000 ticks a
    week: a fifth of a `fixed` week's time). Every column it hands over is one the checked
    constructor takes as it is: float64 (the task's partition int64), one value per name."""
    seen = []

    class Checking:
        name = "checking"

        def decide(self, obs, state=None):
            for stats in (obs.partitions, obs.tasks, obs.watermarks):
                fields = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)}
                checked = type(stats)(**fields)  # raises where a column has the wrong length
                for name, value in fields.items():
                    if isinstance(value, np.ndarray):
                        assert getattr(checked, name) is value, (type(stats).__name__, name, value.dtype)
            seen.append(obs.factor)
            factor = 8 if len(seen) == 20 else obs.factor  # a rescale: the new layout's columns too
            return Decision(factor, "checking"), state

    simulate(workloads.step(before=100, after=2000, at=300, seconds=900), JobModel(partitions=4, start_factor=2),
             Checking())
    assert seen.count(2) == 20 and seen.count(8) > 20
