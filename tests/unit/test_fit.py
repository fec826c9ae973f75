"""Fitting the simulator's job model to a run's series, and replaying the trace it writes."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autosizer.elasticity import FACTORS
from autosizer.simulator.fit import (
    ARRIVALS,
    HELD_ONLY_SHARE,
    batch_commits,
    fit_job,
    fitted_run,
    legacy_lag_probe_age,
    scrape_problem,
    write_trace,
)
from autosizer.simulator.job import JobModel
from autosizer.simulator.traces import load_trace

START = 1_700_000_000.0


def run_series(shares=(0.5, 0.3, 0.2, 0.15)):
    """Two partitions, 60 s: input 300/s and 100/s, tasks at 95-105/s, a 3 s deadline with about
    0.5 s of fixed cost, three restarts that took 1.2, 0.4 and 1.2 s, factor 1 then 2."""
    t = [START + i for i in range(61)]
    hot = []
    for p in (0, 1):
        for i, f in enumerate(FACTORS):
            share = shares[i] if i < len(shares) else max(1 / f, shares[-1] / 2)
            hot.append(({"topic": "orders", "partition": str(p), "factor": str(f)}, [(t[-1], share)]))
    return {
        "input_rate": [({"topic": "orders", "partition": "0"}, [(x, 300.0) for x in t]),
                       ({"topic": "orders", "partition": "1"}, [(x, 100.0) for x in t])],
        "saturated_rate": [({}, [(x, 95.0 + (i % 3) * 5) for i, x in enumerate(t)])],
        "hot_share": hot,
        "deadline": [({}, [(x, 3.0) for x in t])],
        "overhead": [({}, [(x, 0.5 + (i % 2) * 0.1) for i, x in enumerate(t)])],
        "commit_latency": [({}, [(x, 0.15) for x in t])],
        "read_boundary": [({}, [(x, 0.1 + (i % 3) * 0.05) for i, x in enumerate(t)])],
        "batch_gap": [({}, [(x, 0.08) for x in t])],
        "restart": [({}, [(x, 1.2) for x in t[30:40]] + [(x, 0.4) for x in t[40:50]] + [(x, 1.2) for x in t[50:]])],
        "factor": [({}, [(x, 1.0 if x < START + 30 else 2.0) for x in t])],
        "lag_seconds": [({}, [(x, float(i % 5)) for i, x in enumerate(t)])],
    }


def test_the_job_model_is_what_the_run_measured():
    job = fit_job(run_series())
    assert job.partitions == 2 and job.start_factor == 1
    assert job.process_seconds == pytest.approx(1 / 100)  # the median task: 100/s
    assert list(job.weights) == pytest.approx([0.75, 0.25])
    assert job.batch_seconds == 3.0 and job.batch_overhead_s == pytest.approx(0.5)  # the median
    assert job.restart_downtime_s == pytest.approx(1.2)
    assert job.restarts_measured_s == pytest.approx((1.2, 0.4, 1.2))  # each once, in order
    assert job.hot_shares[2][0] == pytest.approx(0.5) and job.hot_shares[8][1] == pytest.approx(0.15)
    assert job.duty() == pytest.approx(3 / 3.5)
    assert job.commit_latency_s == pytest.approx(0.15) and job.latency(2) == pytest.approx(0.15)
    assert job.read_boundary_s == pytest.approx(0.15)  # the median: a Kinesis batch's records cut after its trigger
    assert job.batch_gap_s == pytest.approx(0.08)  # of the fixed cost, what follows a commit


def test_the_cpu_a_record_costs_and_the_cores_cap_the_model_as_they_capped_the_run():
    """Records of 10 ms that spend 5 ms on a core, on 2 cores: the model's job does at most
    400/s at any factor, as the policy's ceiling (cores / CPU per record) says."""
    series = run_series()
    t = [x for x, _ in series["saturated_rate"][0][1]]
    series["cpu_per_record"] = [({}, [(x, 0.005) for x in t])]
    series["cores"] = [({}, [(x, 2.0) for x in t])]
    job = fit_job(series)
    assert job.cpu_fraction == pytest.approx(0.5) and job.cores == 2
    assert job.cpu_ceiling() == pytest.approx(400)
    assert job.partitions * 4 * job.task_rate(4) == pytest.approx(400)
    assert fit_job(run_series()).cpu_ceiling() is None  # not measured: no cap


def test_series_that_are_missing_keep_the_base_model_and_no_input_is_an_error():
    series = run_series()
    for name in ("hot_share", "overhead", "restart", "commit_latency", "read_boundary", "batch_gap"):
        series[name] = []
    job = fit_job(series)
    assert not job.hot_share_table_measured and job.batch_overhead_s == 0.6 and job.restart_downtime_s == 5.0
    assert job.read_boundary_s == 0.0  # Kafka exports none: the trigger cuts the records
    assert job.batch_gap_s is None  # never back to back: every batch pays the whole cost
    assert job.commit_latency_s is None and job.latency(1) == 0.6  # no measurement: the overhead
    with pytest.raises(ValueError, match="no input rate series"):
        fit_job({"input_rate": []})


def test_each_batch_read_fill_and_commit_latency_are_taken_once_as_the_pipeline_paired_them():
    """The two gauges are set together per warm batch and held until the next: a range query
    repeats a pair at every step until then, and the fill's points pair with the latency's at the
    same step (a step where one is missing pairs nothing)."""
    t = [START + i for i in range(6)]
    fills = [0.1, 0.1, 1.0, 1.0, 1.0, 0.2]
    latencies = [0.30, 0.30, 0.45, 0.45, 0.52, 0.31]
    series = {"batch_fill": [({}, list(zip(t, fills, strict=True)))],
              "batch_latency": [({}, list(zip(t[:5], latencies[:5], strict=True)))]}
    assert batch_commits(series, START).tolist() == [[0, 0.1, 0.30], [2, 1.0, 0.45], [4, 1.0, 0.52]]
    assert batch_commits(run_series(), START).shape == (0, 3)  # a run saved before the gauges


def test_the_commit_latency_is_the_mean_of_the_light_batches_where_the_run_exported_them():
    """Twelve light batches (a tenth of their span) waiting 0.2 s, twice 0.5 s: the model's
    commit latency is their mean (0.25 s), not the smoothed gauge's median (0.15 s), and a full
    batch (0.9 s, its fixed cost's part before the commit) stays out; with fewer than ten light
    batches, the gauge's median as before."""
    series = run_series()
    t = [START + i for i in range(15)]
    latencies = [0.2] * 10 + [0.5] * 2 + [0.9]
    series["batch_fill"] = [({}, [(x, 0.1 + i * 1e-3) for i, x in enumerate(t[:12])] + [(t[12], 1.0)])]
    series["batch_latency"] = [({}, list(zip(t, latencies, strict=False)))]
    assert fit_job(series).commit_latency_s == pytest.approx(0.25)
    series["batch_fill"] = [({}, [(x, 0.1 + i * 1e-3) for i, x in enumerate(t[:9])])]
    assert fit_job(series).commit_latency_s == pytest.approx(0.15)


def test_a_fresh_pipelines_warm_up_is_fitted_from_its_light_batches_over_the_run():
    """A fresh pipeline's light batches wait 0.15 s + 0.1 s e^(-t / 20 s) (the demo's: 0.19-0.30 s
    in the first 10 s, 0.14-0.17 s after a minute): the fit finds the steady latency, the extra
    at the run's start and its time, where one mean left 0.02 s in every batch and none at the
    start. A pipeline that had warmed up (flat latencies) fits none, and the mean stands."""
    series = run_series()
    t = np.arange(0.0, 180.0, 1.0)
    latency = 0.15 + 0.1 * np.exp(-t / 20)
    series["batch_fill"] = [({}, [(START + x, 0.1 + i * 1e-4) for i, x in enumerate(t)])]
    series["batch_latency"] = [({}, [(START + x, v) for x, v in zip(t, latency, strict=True)])]
    job = fit_job(series)
    assert job.commit_latency_s == pytest.approx(0.15, abs=1e-6)
    assert (job.commit_warmup_s, job.commit_warmup_tau_s) == pytest.approx((0.1, 20.0), abs=1e-6)
    assert job.latency(1) + job.warmup(0.0) == pytest.approx(0.25) and job.warmup(180.0) < 1e-4
    series["batch_latency"] = [({}, [(START + x, 0.17) for x in t])]
    flat = fit_job(series)
    assert flat.commit_warmup_s == 0.0 and flat.commit_latency_s == pytest.approx(0.17)



def test_the_commit_wait_is_fitted_to_each_batchs_records_where_the_pipeline_exported_them():
    """The demo's wait grew with what a batch read: 0.02-0.08 s longer in its step's high phase
    (1,400 records a batch) than after it (100), at the same factor and fill (session 83). A
    fresh pipeline's batches wait 0.15 s + 30 us a record + 0.1 s e^(-t / 20 s): the fit finds
    all three, and the model's wait follows the records at any fill. Batches of one size tell
    no slope (the line in the fill stands), nor do a run's before the gauge (NaN records)."""
    series = run_series()
    t = np.arange(0.0, 180.0, 1.0)
    records = np.where((t >= 40) & (t < 120), 1400.0, 100.0)
    latency = 0.15 + 30e-6 * records + 0.1 * np.exp(-t / 20)
    series["batch_fill"] = [({}, [(START + x, 0.1 + i * 1e-4) for i, x in enumerate(t)])]
    series["batch_latency"] = [({}, [(START + x, v) for x, v in zip(t, latency, strict=True)])]
    series["batch_read_records"] = [({}, [(START + x, v) for x, v in zip(t, records, strict=True)])]
    assert batch_commits(series, START, records=True)[:, 3].tolist() == records.tolist()
    job = fit_job(series)
    assert (job.commit_latency_s, job.commit_per_record_s) == pytest.approx((0.15, 30e-6), rel=1e-6)
    assert (job.commit_warmup_s, job.commit_warmup_tau_s) == pytest.approx((0.1, 20.0), rel=1e-6)
    assert job.commit_wait(4, 0.2, 1400) == pytest.approx(0.15 + 0.042)
    assert job.commit_wait(4, 0.2, 100) == pytest.approx(0.15 + 0.003)
    series["batch_read_records"] = [({}, [(START + x, 500.0) for x in t])]
    assert fit_job(series).commit_per_record_s is None  # one size: no slope to tell
    del series["batch_read_records"]
    assert np.isnan(batch_commits(series, START, records=True)[:, 3]).all()
    assert fit_job(series).commit_per_record_s is None

def test_a_run_that_never_fell_a_batch_behind_takes_its_commit_latency_and_gap_for_the_fixed_cost():
    """The pipeline measures a batch's fixed cost only from batches that ran back to back; a run
    that kept up throughout shows none. Its commit latency, measured on every batch, is most of
    that cost: the model's default (0.6 s) is three to four times what this project's job measures
    (run 145's replay missed with it). The rest is the gap after a commit, measured wherever a
    batch ran past its trigger's interval, saturated or not (run k8, 87% busy at a 1 s trigger:
    0.99 s replayed batches where the real ones ran 1.07 s apart): the model's batch waits its
    latency to commit and the gap after it. The daemon still saw no cost (its duty 1): the run
    shows it as not known at the start."""
    series = run_series()
    series["overhead"] = []
    job = fit_job(series)
    assert job.batch_overhead_s == pytest.approx(0.15 + 0.08) and job.batch_gap_s == pytest.approx(0.08)
    assert job.latency(1) == pytest.approx(0.15)
    assert [job.commit_wait(1, fill) for fill in (0.0, 1.0)] == pytest.approx([0.15, 0.15])  # whatever the read
    assert job.overhead_known_at_start is False
    series["batch_gap"] = []  # no batch ran past its trigger: the commit latency alone
    assert fit_job(series).batch_overhead_s == pytest.approx(0.15)
    # the gap is measured on more batches than the cost (any after one that overran its trigger,
    # a fresh pipeline's slow ones too): it stays a part of the cost the saturated batches measured
    series = run_series()
    series["batch_gap"] = [({}, [(x, 0.7) for x, _ in series["deadline"][0][1]])]
    job = fit_job(series)
    assert (job.batch_gap_s, job.batch_overhead_s) == pytest.approx((0.5, 0.5))  # the median cost
    assert fit_job(run_series()).batch_overhead_s == pytest.approx(0.5)  # measured: the measurement


def test_the_written_trace_replays_the_same_job_and_load(tmp_path):
    fitted = fitted_run(run_series(), START, START + 60)
    assert fitted.load.seconds == 61 and np.allclose(fitted.load.rate, 400)
    assert fitted.factor[0] == 1 and fitted.factor[-1] == 2 and fitted.lag_seconds.max() == 4
    path = write_trace(fitted, tmp_path / "run.toml")
    trace = load_trace(str(path))  # the CSV path is relative to the trace file, not the cwd
    assert trace.job == fitted.job
    assert np.allclose(trace.workload.rate, fitted.load.rate)


def test_each_restart_counts_once_however_long_its_gauge_held():
    """Restarts of 0.6 s and 0.9 s early in the run, then one of 2.0 s held for the rest: the
    samples' median would be 2.0; the restarts' median is 0.9."""
    series = run_series()
    t = [START + i for i in range(61)]
    series["restart"] = [({}, [(x, 0.6 if i < 10 else 0.9 if i < 20 else 2.0) for i, x in enumerate(t[5:])])]
    assert fit_job(series).restart_downtime_s == pytest.approx(0.9)


def test_a_measured_table_of_the_wrong_shape_is_refused():

    with pytest.raises(ValueError, match="hot_share_table_measured needs 2 rows"):
        JobModel(partitions=2, hot_share_table_measured=((0.5,) * len(FACTORS),))
    with pytest.raises(ValueError, match="partition_weights needs 2"):
        JobModel(partitions=2, partition_weights=(1.0, float("nan")))


def test_the_fixed_cost_grows_with_the_tasks_when_the_run_shows_it():
    series = run_series()
    t = [START + i for i in range(61)]
    # 4 tasks (2 partitions at F=2), then 64 (F=32): 0.5 s + 5 ms per task. The new query's cost
    # shows from its third batch, seconds after the factor (`CYCLE_AFTER_RESTART_S`).
    series["factor"] = [({}, [(x, 2.0 if x < START + 30 else 32.0) for x in t])]
    series["overhead"] = [({}, [(x, 0.5 + 0.005 * (4 if x < START + 35 else 64)) for x in t])]
    job = fit_job(series)
    assert job.batch_overhead_s == pytest.approx(0.5) and job.batch_overhead_per_task_s == pytest.approx(0.005)
    assert job.overhead(32) == pytest.approx(0.82) and job.duty(32) == pytest.approx(3 / 3.82)
    # the pipeline exported no read: the real daemon scaled nothing, and the replay's does not
    assert not job.read_growth_shown and job.shown_duties(measured=True) is None


def test_each_fixed_cost_counts_once_at_the_factor_it_was_measured_at():
    """Run n7: factor 1's saturated batches set the gauge to 0.46, 0.38, 0.33 and 0.30 s, and
    its last one, the batch the drain ended, to 0.27 s as the factor went to 8; at 8 the job
    kept up and the gauge held 0.27 s for the rest of the run. Counted every second it was held,
    0.27 s was most of the samples, and taken for factor 8's cost the line through them fell, so
    the fit gave the median, 0.27 s (its replay drained factor 1's backlog faster than the job
    and went 1 -> 4 where the job went 1 -> 8). Each value once, at the factor it was set at:
    their median, 0.33 s."""
    series = run_series()
    t = [START + i for i in range(241)]
    series["factor"] = [({}, [(x, 1.0 if x < START + 46 else 8.0) for x in t])]
    set_at = ((START + 46, 0.27), (START + 45, 0.30), (START + 42, 0.33), (START + 39, 0.38), (START, 0.46))
    series["overhead"] = [({}, [(x, next(v for s, v in set_at if x >= s)) for x in t])]
    assert fit_job(series).batch_overhead_s == pytest.approx(0.33)


def test_at_one_factor_the_batches_read_is_the_part_of_the_cost_that_grows():
    """A run at F = 8 over 2 partitions whose batches cost 1.5 s, 1.1 s of it the read that
    grows with the factor (`batch_read_seconds`): the replay's job pays 0.4 s + 1.1 s / 16 tasks
    a task, so factor 1 pays 0.54 s. Without the read every factor pays the 1.5 s."""
    series = run_series()
    t = [START + i for i in range(61)]
    series["factor"] = [({}, [(x, 8.0) for x in t])]
    series["overhead"] = [({}, [(x, 1.5) for x in t])]
    flat = fit_job(series)
    assert flat.overhead(1) == flat.overhead(8) == pytest.approx(1.5)
    series["read"] = [({}, [(x, 1.1) for x in t])]
    job = fit_job(series)
    assert job.batch_overhead_s == pytest.approx(0.4) and job.batch_overhead_per_task_s == pytest.approx(1.1 / 16)
    assert job.overhead(8) == pytest.approx(1.5) and job.overhead(1) == pytest.approx(0.4 + 1.1 / 8)
    unsplit = dataclasses.replace(job, batch_gap_s=None)  # the run measured a gap after the commit too
    assert unsplit.cost_words() == "0.40 s + 68.8 ms a task" and flat.cost_words() == "1.50 s (0.08 s of it after the commit)"
    assert job.cost_words() == "0.40 s + 68.8 ms a task (0.08 s of it after the commit)"
    shown = job.shown_duties(measured=True)
    assert shown is not None and shown[FACTORS.index(1)] == pytest.approx(job.duty(1))
    assert job.shown_duties(measured=False) is None and flat.shown_duties(measured=True) is None
    assert job.read_growth_after == 0  # shown from the run's start


def test_a_read_the_pipeline_showed_only_after_a_rescale_shows_the_replays_daemon_after_one_too():
    """A Kinesis job's reads at factor 1 cannot tell their fixed part from their records'; after
    a rescale 1 -> 4 in its driver, reads of two sizes can (`bench_kinesis.py rise`), and the
    pipeline exports the read from then on. The replay's daemon scales the read only after a
    rescale of its own, as the real one did."""
    series = run_series()
    t = [START + i for i in range(61)]
    series["factor"] = [({}, [(x, 1.0 if x < START + 30 else 4.0) for x in t])]
    series["overhead"] = [({}, [(x, 0.55 if x < START + 30 else 0.9) for x in t])]
    series["read"] = [({}, [(x, 0.6) for x in t if x >= START + 40])]
    job = fit_job(series)
    assert job.read_growth_shown and job.read_growth_after == 1
    assert job.shown_duties(measured=True) is None
    shown = job.shown_duties(measured=True, rescales=1)
    assert shown is not None and shown[FACTORS.index(8)] == pytest.approx(job.duty(8))
    with pytest.raises(ValueError, match="read_growth_after"):
        JobModel(read_growth_after=-1)


def test_the_load_is_read_from_the_watermarks_steps_where_the_step_happened():
    """A step from 100/s to 1,000/s at second 30, one watermark sample a second: the replayed load
    steps at 30, where a rate over a window would ramp from 30 to 33 and show it late."""
    series = run_series()
    marks = np.cumsum([0] + [100 if s < 30 else 1000 for s in range(60)])
    series["high_watermark"] = [({"topic": "orders", "partition": "0"},
                                 [(START + i, float(m)) for i, m in enumerate(marks)])]
    load = fitted_run(series, START, START + 59).load.rate
    assert list(load[28:32]) == [100, 100, 1000, 1000]
    assert fitted_run(run_series(), START, START + 59).load.rate[0] == 400, "no watermark: the rate"


def test_records_counted_by_their_own_times_are_the_load_over_the_watermarks_steps():
    """Run 153's step landed at 30.0 s between watermark reads at 29.74 and 31.15 s, and the
    steps spread it over three seconds; counted from the records' own times it lands at 30."""
    series = run_series()
    label = {"topic": "orders", "partition": "0"}
    marks = [(START + 29.74, 2974.0), (START + 31.15, 4150.0)]
    series["high_watermark"] = [(label, [(START, 0.0), *marks, (START + 60, 33000.0)])]
    arrived = [(START + s, 100.0 if s < 30 else 1000.0) for s in range(60)]
    series[ARRIVALS] = [(label, arrived[:40]), ({**label, "partition": "1"}, arrived[40:])]
    load = fitted_run(series, START, START + 59).load.rate
    assert list(load[28:32]) == [100, 100, 1000, 1000]
    smeared = fitted_run({**series, ARRIVALS: []}, START, START + 59).load.rate
    assert 100 < smeared[29] < 1000 and 100 < smeared[30] < 1000, "the watermark's reads: smeared"


def test_records_stamped_with_other_times_than_their_arrival_leave_the_load_to_the_watermark():
    """A producer that stamps its events' own times (a backfill of yesterday's) puts most of the
    run's records outside it: counted by those times the load would be a trickle, so the fit
    keeps the watermark's steps and says why."""
    series = run_series()
    label = {"topic": "orders", "partition": "0"}
    marks = np.cumsum([0] + [100] * 60)
    series["high_watermark"] = [(label, [(START + i, float(m)) for i, m in enumerate(marks)])]
    series[ARRIVALS] = [(label, [(START + s, 100.0 if s < 10 else 0.0) for s in range(60)])]
    fitted = fitted_run(series, START, START + 59)
    assert list(fitted.load.rate[20:23]) == [100, 100, 100]
    assert fitted.load_source.startswith("the watermark's reads: the records' times count 1000 records")
    series[ARRIVALS] = [(label, [(START + s, 101.0 if s < 59 else 100.0) for s in range(60)])]  # 1% off: agree
    assert fitted_run(series, START, START + 59).load_source == "the records' own times"


def test_each_watermark_counts_from_when_the_probe_read_it_not_when_it_was_scraped():
    """The probe read the step's first watermark at 30.2 s; Prometheus scraped it at 31 s (and
    held each reading for a second). Replayed at the scrape, the step would start a second late."""
    series = run_series()
    marks = np.cumsum([0] + [100 if s < 30 else 1000 for s in range(60)])
    label = {"topic": "orders", "partition": "0"}
    series["high_watermark"] = [(label, [(START + i + 1, float(m)) for i, m in enumerate(marks)])]
    series["high_watermark_time"] = [(label, [(START + i + 1, START + i + 0.2) for i in range(len(marks))])]
    load = fitted_run(series, START, START + 59).load.rate
    assert list(load[28:32]) == pytest.approx([100, 100, 820, 1000])
    late = fitted_run({**series, "high_watermark_time": []}, START, START + 59).load.rate
    assert list(late[28:33]) == pytest.approx([100, 100, 100, 1000, 1000]), "scrape times: a second late"


def test_the_model_reads_the_input_as_old_as_the_run_read_it():
    """A tick reads the watermarks the probe read, scraped up to a second later, from the last
    scrape before the query: 0.8 s from read to scrape and scrapes 1 s apart make the input a
    tick sees 1.3 s old on the median, and the model's ticks see it that old (run 59, session 21:
    with fresh readings the replayed 30 s tick saw the step's first half-second, took the 35 s
    tick for the jump's second, and went 1 -> 4 where the real daemon, a second behind, went
    1 -> 8)."""
    series = run_series()
    label = {"topic": "orders", "partition": "0"}
    series["high_watermark_time"] = [(label, [(START + i + 1, START + i + 0.2) for i in range(60)])]
    job = fitted_run(series, START, START + 59).job
    assert job.metrics_age_s == pytest.approx(1.3)
    assert fitted_run({**series, "high_watermark_time": []}, START, START + 59).job.metrics_age_s == 0.0


def test_the_metrics_age_counts_from_each_readings_scrape_not_the_querys_step():
    """A range query stamps its points with its steps, a constant phase after the scrapes: here
    reads at .2, scrapes at .7 and steps at the whole second. Counted from the scrape stamps
    (`timestamp()`), 0.5 s from read to scrape plus half the 1 s scrape interval is 1.0 s; from
    the steps the phase counted twice (1.3 s, as run 85's fit read 1.67 s where the daemon's own
    ticks were 0.6 s behind their scrapes)."""
    series = run_series()
    label = {"topic": "orders", "partition": "0"}
    series["high_watermark_time"] = [(label, [(START + i + 1, START + i + 0.2) for i in range(60)])]
    series["high_watermark_scraped"] = [(label, [(START + i + 1, START + i + 0.7) for i in range(60)])]
    assert fitted_run(series, START, START + 59).job.metrics_age_s == pytest.approx(1.0)


def test_the_scrape_interval_is_the_median_gap_between_scrapes():
    """Scrapes 2 s apart (one late by half a second), each holding a watermark read 0.3 s before
    it: the interval is 2 s, which the model takes off the rate window (Prometheus' rate()
    averages its samples' span). Each scrape holds a watermark 0.3 s old: the backlog gauge of a
    pipeline before session 48 subtracted the positions at the scrape from it, and a replay of
    such a run takes 0.3 s of commits off; today's gauge reads both at once, so the fit takes
    nothing off."""
    series = run_series()
    label = {"topic": "orders", "partition": "0"}
    stamps = [START + 2 * i + (0.5 if i == 7 else 0.0) for i in range(30)]
    series["high_watermark_time"] = [(label, [(START + i, stamps[i // 2] - 0.3) for i in range(60)])]
    series["high_watermark_scraped"] = [(label, [(START + i, stamps[i // 2]) for i in range(60)])]
    job = fitted_run(series, START, START + 59).job
    assert job.scrape_interval_s == pytest.approx(2.0)
    assert job.lag_probe_age_s == 0.0
    assert legacy_lag_probe_age(series) == pytest.approx(0.3)
    assert fit_job(run_series()).scrape_interval_s == 0.0  # no read times: the window itself
    series.pop("high_watermark_scraped")
    assert legacy_lag_probe_age(series) == 0.0  # steps, not scrapes: no reading


def test_the_service_times_noise_is_the_pipelines_own_measure_on_the_median():
    """`autosizer_pipeline_service_cv` (Admission.service_cv) over the run: its median, so the
    batches right after a rescale, whose tasks have one batch of history, do not move it; a run
    that never exported it keeps the base model's CV."""
    series = run_series()
    t = [x for x, _ in series["deadline"][0][1]]
    series["service_cv"] = [({}, [(x, 0.5 if i % 10 == 0 else 0.1) for i, x in enumerate(t)])]
    assert fit_job(series).process_cv == pytest.approx(0.1)
    assert fit_job(run_series()).process_cv == 1.0


def test_the_run_says_which_partitions_hot_shares_were_measured_when_it_began():
    """The gauge appears once a batch read enough of a partition: partition 0's is in the run's
    first sample, partition 1's only from its tenth second (read in the model as even until then)."""
    series = run_series()
    series["hot_share"] = [(labels, [(START + (0 if labels["partition"] == "0" else 10), v)
                                     for _, v in points]) for labels, points in series["hot_share"]]
    job = fit_job(series)
    assert job.hot_shares_known_at_start == (True, False)
    assert fit_job(run_series()).hot_shares_known_at_start == (False, False)  # both read at the end


def test_the_run_says_whether_a_batchs_cost_was_measured_when_it_began():
    """The pipeline exports a batch's fixed cost once a batch saturated: in the run's first
    sample after a start-up backlog, at the step in the demo's runs, never in one that kept up."""
    assert fit_job(run_series()).overhead_known_at_start is True
    first = next(v for _, points in run_series()["overhead"] for _, v in points[:1])
    assert fit_job(run_series()).overhead_shown_at_start_s == first  # what the daemon read until measured
    series = run_series()
    series["overhead"] = [(labels, points[20:]) for labels, points in series["overhead"]]
    assert fit_job(series).overhead_known_at_start is False
    assert fit_job(series).overhead_shown_at_start_s is None
    series["overhead"] = []
    job = fit_job(series)
    assert job.overhead_known_at_start is False  # the cost itself: the commit latency (test above)


def resharded_series(children_read_at: float = 31.2, counted_under_parent: bool = False) -> dict:
    """90 s of a Kinesis job: shards 0 and 1 at 100 records/s; 0 splits at 30 s into 2 and 3
    (50/s each), which the pipeline reads from 31.2 s once 0 is read to its end (30.2 s); 1 and
    3 merge at 60 s into 4 (150/s), read from 62 s. Each shard's tail counts its records from
    its start, so a child's first reading holds those before it; a pipeline since session 58
    also counts 2 and 3 under 0 until they are read (`counted_under_parent`)."""
    rates = {0: (0, 30, 100.0), 1: (0, 60, 100.0), 2: (30, 90, 50.0), 3: (30, 60, 50.0), 4: (60, 90, 150.0)}
    read = {0: (0, children_read_at - 1), 1: (0, 60.1), 2: (children_read_at, 90), 3: (children_read_at, 60.2),
            4: (62, 90)}
    if counted_under_parent:  # the parent leaves at the probe that adopts its children
        read[0] = (0, children_read_at - 0.2)
    under = {0: lambda t: 100.0 * max(0, t - 30)} if counted_under_parent else {}  # its children's, from 30 s
    return shards_series(rates, read, under)


def shards_series(rates: dict, read: dict, under: dict) -> dict:
    """A Kinesis job's series: each shard's (born, gone, records/s), when the pipeline's probe
    read it (first, last), and the records counted under it that are not its own (a child not
    read yet), as a function of the second. A shard's tail counts its records from its start."""
    series = run_series()
    series["input_rate"], series["high_watermark"], series[ARRIVALS] = [], [], []
    for p, (born, gone, rate) in rates.items():
        label = {"topic": "orders", "partition": str(p)}
        begin, end = read[p]
        times = [begin + i for i in range(int(end - begin) + 1)]
        times += [end] if times[-1] < end else []
        counted = under.get(p, lambda t: 0.0)
        series["high_watermark"].append((label, [(START + t, rate * (min(t, gone) - born) + counted(t)) for t in times]))
        series["input_rate"].append((label, [(START + t, rate if t < gone else 0.0) for t in times]))
        series[ARRIVALS].append((label, [(START + s, rate) for s in range(born, gone)]))
    return series


def test_a_run_whose_shards_split_and_merged_is_fitted_as_the_layouts_it_read():
    """The shipped Kinesis demo (split at 45 s, merge at 75 s) was fitted as 5 partitions read at
    once, twice the capacity it had at factor 1: its replay went 1 -> 4 where the job went to 8.
    A parent that leaves and its children that join a second later are one change."""
    fitted = fitted_run(resharded_series(), START, START + 90)
    job = fitted.job
    assert job.partitions == 5 and job.layout_changes_s == pytest.approx((31.2, 62.0))
    shares = [job.partition_weights, *job.layout_weights]
    assert [[w > 0 for w in row] for row in shares] == [[True, True, False, False, False],
                                                          [False, True, True, True, False],
                                                          [False, False, True, False, True]]
    assert shares[0][:2] == pytest.approx((0.48, 0.52), abs=0.01)  # 3,000 and 3,200 records to 31.2 s
    assert shares[2][2] == pytest.approx(0.25) and shares[2][4] == pytest.approx(0.75)
    assert job.partition_counts(90)[[0, 30, 31, 61, 62]].tolist() == [2, 2, 3, 3, 2]
    # the children's first readings held their records since the split: still the same count
    assert fitted.load_source == "the records' own times"
    assert fitted.load.rate[10] == 200 and fitted.load.rate[45] == 200 and fitted.load.rate[70] == 200


@pytest.mark.parametrize("counted_under_parent", [False, True])
def test_the_records_times_agree_with_a_pipeline_that_counted_a_waiting_child_under_its_parent_or_nowhere(
        counted_under_parent):
    """The split's children are read 20 s after it, 2,000 records later: a pipeline before
    session 58 counted those nowhere until the children's first readings (which the watermark's
    rise leaves out); today's counts them under their parent."""
    series = resharded_series(children_read_at=50.0, counted_under_parent=counted_under_parent)
    assert fitted_run(series, START, START + 90).load_source == "the records' own times"


def test_the_records_times_agree_with_a_rise_that_counted_some_waiting_records_under_their_parent():
    """Run u2: the parent's last reading came a second before its children's first, so the
    records between counted nowhere, and the rise (14,391) fell between the records that came
    after their partition's first reading (13,680) and all of them (14,683); the fit took the
    watermark's reads for the load. Here the parent is last read at 46 s, its children first at
    50 s: 400 records nowhere, more than the 2% either bound allowed."""
    series = resharded_series(children_read_at=50.0, counted_under_parent=True)
    series["high_watermark"][0] = (series["high_watermark"][0][0],
                                   [(t, v) for t, v in series["high_watermark"][0][1] if t <= START + 46])
    assert fitted_run(series, START, START + 90).load_source == "the records' own times"
    del series["high_watermark"][1]  # a whole partition's rise missing: not the records' count
    assert fitted_run(series, START, START + 90).load_source.startswith("the watermark's reads")


def test_a_run_that_kept_its_partitions_has_one_layout_though_a_series_began_a_probe_late():
    series = run_series()
    label, points = series["input_rate"][1]
    series["input_rate"][1] = (label, points[2:])  # its first reading 2 s in
    assert fitted_run(series, START, START + 60).job.layout_changes_s == ()
    assert fitted_run(resharded_series(), START, START + 25).job.layout_changes_s == ()


def test_a_fitted_run_with_layout_changes_writes_a_trace_that_replays_them(tmp_path):
    fitted = fitted_run(resharded_series(), START, START + 90)
    trace = load_trace(str(write_trace(fitted, tmp_path / "resharded.toml")))
    assert trace.job == fitted.job and len(trace.job.layouts()) == 3


def test_a_layouts_shares_hold_the_records_that_waited_under_a_partition():
    """A split's children, read 20 s after it, waited for their parent's tasks: a pipeline since
    session 58 counts them under it, and the layout's shares are what each partition's tasks had
    before them. From the children's own arrivals the parent's share fell to 3/8 at the split, and
    a merge's parents (closed, still draining) had none at all: run l2's replay read one shard
    where the job had two, and went to 8."""
    fitted = fitted_run(resharded_series(children_read_at=50.0, counted_under_parent=True), START, START + 90)
    assert fitted.job.layout_changes_s[0] == pytest.approx(50.0)
    assert fitted.job.partition_weights[:2] == pytest.approx((0.5, 0.5), abs=0.01)  # 4,980 and 5,000 records


def expanded_series(arrivals: bool = True) -> dict:
    """60 s of a Kafka job: partitions 0 and 1 at 100 records/s; at 20 s producers move half the
    keys to 2 and 3 (children of 0 and 1, 50/s each), which the daemon adopts at 40 s, the query
    restarting (its gauge set at 42 s). Until then the pipeline counts each child's end offset
    in its parent's watermark (`topology.waiting_under`), and after it keeps what they had then."""
    series = run_series()
    series["input_rate"], series["high_watermark"], series[ARRIVALS] = [], [], []
    series["restart"] = [({}, [(START + t, 1.2) for t in range(10, 42)] + [(START + t, 2.0) for t in range(42, 61)])]
    for p in range(4):
        label = {"topic": "orders", "partition": str(p)}
        child = p >= 2
        times = range(40 if child else 0, 61)

        def own(t: float, child: bool = child) -> float:
            return 50.0 * max(0, t - 20) if child else 100.0 * min(t, 20) + 50.0 * max(0, t - 20)

        def mark(t: float, p: int = p) -> float:
            return own(t) if p >= 2 else own(t) + 50.0 * max(0, min(t, 40) - 20)  # its child's, folded at 40 s

        series["high_watermark"].append((label, [(START + t, mark(t)) for t in times]))
        series["input_rate"].append((label, [(START + t, 50.0 if t >= 20 else 100.0 * (not child)) for t in times]))
        if arrivals:
            series[ARRIVALS].append((label, [(START + s, 50.0 if s >= 20 else 100.0 * (not child)) for s in range(60)]))
    if not arrivals:
        del series[ARRIVALS]
    return series


@pytest.mark.parametrize("arrivals", [True, False])
def test_an_expansion_is_fitted_as_a_growth_whose_new_partitions_waited_and_restarted_the_query(arrivals):
    """Run e1 (the Kafka demo grown 4 -> 8 at 60 s, adopted at 85 s): replayed with the children
    read from their adoption and no restart, its lag peaked at 10 s where the job's reached 28 s,
    and its scale-down came 25 s before the real one (the daemon's cooldown counts from the
    expansion). The wait comes from the children's first records, or without their times from
    what they held at their first reading, walked back along their share of the input."""
    job = fitted_run(expanded_series(arrivals), START, START + 60).job
    assert job.layout_changes_s == pytest.approx((40.0,))
    assert job.layout_weights[0] == pytest.approx((0.25, 0.25, 0.25, 0.25))
    assert job.partition_weights[:2] == pytest.approx((0.5, 0.5)) and job.partition_weights[2:] == (0.0, 0.0)
    assert job.layout_waits_s == pytest.approx((20.0,), abs=1) and job.layout_restarts == (True,)
    assert job.partitions_words() == (f"4 partitions, read 2, then 4 from 40 s (unread {job.layout_waits_s[0]:.0f} s "
                                      f"before it, then a restart)")


@pytest.mark.parametrize(("children_counted_at", "passed", "words"), [
    ((44, 44), ((False, False, True, True),), "then a restart, 2 of 2 past the barrier"),
    ((44, 47), ((False, False, True, False),), "then a restart, 1 of 2 past the barrier"),
    ((47, 47), (), "then a restart)"),
])
def test_which_new_partitions_an_expansions_first_batch_after_the_restart_read_is_fitted(
        children_counted_at, passed, words):
    """Runs e8 and e9 restarted with the parents already past the barrier: the first batch read
    the children too, their records counted at the same scrape as the parents' first after the
    restart. Runs e6 and e7 restarted with the children held: the parents' first batch alone,
    the children's records a batch later. Run e11 held one child of four: the race is per parent."""
    series = expanded_series()
    series["records_read"] = [
        ({"topic": "orders", "partition": str(p)},
         [(START + t, 1_000.0 * p + (100.0 * t if t < 38 or t >= 44 else 3_800.0)) for t in range(61)]) for p in (0, 1)
    ] + [({"topic": "orders", "partition": str(p)},
          [(START + t, 500.0 if t >= children_counted_at[p - 2] else 0.0) for t in range(40, 61)]) for p in (2, 3)]
    job = fitted_run(series, START, START + 60).job
    assert job.layout_barrier_passed == passed
    assert words in job.partitions_words()
    assert fitted_run(expanded_series(), START, START + 60).job.layout_barrier_passed == ()  # no series: unknown


@pytest.mark.parametrize("arrivals", [True, False])
def test_a_reshards_parents_closing_is_fitted_from_its_childrens_first_records(arrivals):
    """The split at 30 s is read at 31.2 s, the merge at 60 s from 62 s: the children are not
    processed before their parents are done (`JobModel.layout_closed_s`). From the children's
    first records' own times, else walked back from what they held at their first reading (a
    pipeline since session 58 counts them under their parent until then). So are the children's
    shares of the input while they waited, the records they hold when first read
    (`JobModel.layout_waiting_weights`: 50/s each of 200/s, then 150/s of 200/s), where the
    records' times are counted; without them the layout's shares stand in."""
    series = resharded_series(children_read_at=40.0, counted_under_parent=True)
    if not arrivals:
        del series[ARRIVALS]
    job = fitted_run(series, START, START + 90).job
    assert job.layout_changes_s == pytest.approx((40.0, 62.0))
    assert job.layout_closed_s == pytest.approx((30.0, 60.0), abs=1)
    assert job.layout_waiting_weights == ((pytest.approx((0, 0, 0.25, 0.25, 0), abs=0.01),
                                           pytest.approx((0, 0, 0, 0, 0.75), abs=0.01)) if arrivals else ())
    assert job.layout_waits_s == () and job.layout_restarts == ()
    assert f"then 3 from 40 s (its parents closed at {job.layout_closed_s[0]:.0f} s)" in job.partitions_words()


def merged_before_read_series() -> dict:
    """90 s of a Kinesis job behind through its re-shards (run v7's case): shards 0 and 1 at
    100/s; 0 splits at 30 s into 2 and 3 (50/s each); 1 and 3 merge at 45 s into 4 (150/s). The
    pipeline reads 0 to its end by 60 s, then 2 and 3: 3 holds its 750 records and takes no
    more, read to its end by 70 s; 4 is read from 80 s, once 1 is done. A child not read yet
    counts under its parent (2 and 3 under 0, 4 under 1)."""
    rates = {0: (0, 30, 100.0), 1: (0, 45, 100.0), 2: (30, 90, 50.0), 3: (30, 45, 50.0), 4: (45, 90, 150.0)}
    read = {0: (0, 59.8), 1: (0, 79.8), 2: (60, 90), 3: (60, 70), 4: (80, 90)}
    under = {0: lambda t: 50.0 * max(0, t - 30) + 50.0 * min(15, max(0, t - 30)), 1: lambda t: 150.0 * max(0, t - 45)}
    return shards_series(rates, read, under)


def test_a_child_closed_before_it_was_read_keeps_a_queue_for_the_records_it_held():
    """Run v7's shard 3 took its 1,083 records before the merge closed it and none after its
    first reading: with no input in the layout that read it, the fit left it out, and the
    replay lost its records (the backlog at the ticks 0.92 of the real). It now keeps a queue of
    next to no share (HELD_ONLY_SHARE) holding what it took while it waited: 750 of the 6,000
    records that arrived from the split to its first reading."""
    job = fitted_run(merged_before_read_series(), START, START + 90).job
    layouts = [job.partition_weights, *job.layout_weights]
    assert [[w > 0 for w in row] for row in layouts] == [[True, True, False, False, False],
                                                          [False, True, True, True, False],
                                                          [False, True, True, False, False],
                                                          [False, False, True, False, True]]
    assert layouts[1][3] == pytest.approx(HELD_ONLY_SHARE, rel=0.01)
    assert job.layout_waiting_weights[0][2:4] == pytest.approx((0.25, 0.125), abs=0.01)


def test_a_merge_whose_parent_closed_before_the_layout_it_ends_began_keeps_its_closing():
    """The merge closed shard 1 at 45 s, before the split's children were read (60 s), and the
    pipeline held the merge child's records from then until it read the child (80 s). Until
    session 85 a closing was placed no earlier than the layout it ends began (here 70 s, where
    the held-only child left), and the replay read those records under their parent: run v5's
    replay scaled 4 -> 2 at 115 s where the job held on to 4 -> 1 at 145 s."""
    job = fitted_run(merged_before_read_series(), START, START + 90).job
    assert job.layout_changes_s == pytest.approx((60.0, 70.0, 80.0))
    assert job.layout_closed_s == pytest.approx((30.0, 0.0, 45.0), abs=1)
    assert "then 2 from 80 s (its parents closed at 45 s)" in job.partitions_words()


def test_a_reshard_neither_waits_nor_restarts_and_a_fitted_expansion_writes_a_trace_that_keeps_both(tmp_path):
    assert fitted_run(resharded_series(), START, START + 90).job.layout_waits_s == ()
    fitted = fitted_run(expanded_series(), START, START + 60)
    trace = load_trace(str(write_trace(fitted, tmp_path / "expanded.toml")))
    assert trace.job == fitted.job and trace.job.layout_restarts == (True,)


def test_a_layout_changes_when_the_probe_first_read_its_new_partitions_not_when_a_query_step_showed_them():
    """Run l2: its children were first read at 123.97 s and showed in the range query's steps at
    125.39 s, after the real daemon's 125 s tick had read them (and held: read once so far). The
    fit takes the probe's read times where the run has them."""
    series = resharded_series(children_read_at=50.0, counted_under_parent=True)
    series["high_watermark_time"] = [(labels, [(t, t - 0.8) for t, _ in points])
                                     for labels, points in series["high_watermark"]]
    assert fitted_run(series, START, START + 90).job.layout_changes_s[0] == pytest.approx(49.2)
    del series["high_watermark_time"]
    assert fitted_run(series, START, START + 90).job.layout_changes_s[0] == pytest.approx(50.0)


@pytest.mark.parametrize("scrapes, others, selector, said", [
    ([1, 1, 1], [1, 1, 1], "", "the rate window (3s) holds 1 scrape of the pipeline's metrics and a rate needs two: "
                               "make --window four scrape intervals or more"),
    ([1, 2, 3], [1, 1, 1], "", None),  # the pipeline's start: one scrape in its first window, then more
    ([0, 0, 0], [2, 2, 2], 'job="order"', "--selector 'job=\"order\"' matches no pipeline series, and "
                                          "Prometheus scrapes 2 pipeline(s) under other labels"),
    ([0, 0, 0], [0, 0, 0], 'job="order"', None),  # nothing scraped at all: the fit's own error says so
    (None, None, "", None),  # a caller's own queries, without these two
])
def test_a_window_under_two_scrapes_or_a_selector_that_misses_is_named_before_the_fit(scrapes, others, selector, said):
    """`autosizer fit --window 3s` on a pipeline scraped every 5 s, or with a misspelt
    `--selector`, said "no input rate series: is Prometheus scraping the pipeline's /metrics?"."""
    series = {} if scrapes is None else {
        "scrapes_in_window": [({}, [(float(t), float(v)) for t, v in enumerate(scrapes)])],
        "pipelines_any": [({}, [(float(t), float(v)) for t, v in enumerate(others)])]}
    problem = scrape_problem(series, "3s", selector)
    assert (problem is None) if said is None else problem.startswith(said), problem
