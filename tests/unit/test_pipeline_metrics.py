"""The lag gauges read one moment: the probe's watermark less the positions of that moment; and
the per-task series the exposition carries, which grow with the factor."""

from prometheus_client import CollectorRegistry, generate_latest

from autosizer.elasticity import Layout
from autosizer.pipeline.metrics import PipelineMetrics
from autosizer.pipeline.slots import PROCESS_TIME_BUCKETS, TaskProgress


def _gauges(metrics: PipelineMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.collect()
            for s in family.samples if s.name.endswith("lag_records")}


def _commit(metrics: PipelineMetrics, offsets: dict[str, int]) -> None:
    progress = [TaskProgress(task, "orders", 0, offset, records=1) for task, offset in offsets.items()]
    metrics.observe_batch(progress, {(t, "orders", 0): o for t, o in offsets.items()}, 1.0)


def test_a_commit_after_the_probe_still_reads_the_backlog_the_probe_saw():
    metrics = PipelineMetrics("j")
    layout = Layout(topics={"orders": 1}, factor=2)
    a, b = (t.name for t in layout.virtual_tasks())
    metrics.started(layout, {(a, "orders", 0): 0, (b, "orders", 0): 0})
    _commit(metrics, {a: 100, b: 300})
    positions = {(a, "orders", 0): 100, (b, "orders", 0): 300}  # the probe takes them, then reads the mark
    metrics.observe_lag({("orders", 0): 1000}, {("orders", 0): 1.0}, positions=positions)
    _commit(metrics, {a: 1000, b: 1000})  # a batch commits before the scrape
    gauges = _gauges(metrics)
    # 900 records waited when the probe read the mark; the old gauge read 1000 - 1000 = 0 here
    assert gauges[("autosizer_pipeline_lag_records", (("partition", "0"), ("topic", "orders")))] == 900
    assert gauges[("autosizer_pipeline_task_lag_records", (("partition", "0"), ("task", a), ("topic", "orders")))] == 900
    assert gauges[("autosizer_pipeline_task_lag_records", (("partition", "0"), ("task", b), ("topic", "orders")))] == 700
    # the next probe reads the commit
    metrics.observe_lag({("orders", 0): 1200}, {("orders", 0): 0.2})  # the last batch's positions
    assert metrics.partition_lag() == {("orders", 0): 200}


def test_a_new_layout_reads_its_own_tasks_against_the_last_marks_until_the_next_probe():
    metrics = PipelineMetrics("j")
    old, new = Layout(topics={"orders": 1}, factor=2), Layout(topics={"orders": 1}, factor=1, generation=2)
    tasks = [t.name for t in old.virtual_tasks()]
    metrics.started(old, {(t, "orders", 0): 0 for t in tasks})
    _commit(metrics, dict.fromkeys(tasks, 400))
    metrics.observe_lag({("orders", 0): 1000}, {("orders", 0): 1.0})
    (merged,) = (t.name for t in new.virtual_tasks())
    metrics.started(new, {(merged, "orders", 0): 400})
    assert metrics.partition_lag() == {("orders", 0): 600}  # known before the first batch
    task_series = {dict(labels)["task"] for name, labels in _gauges(metrics) if name.endswith("task_lag_records")}
    assert task_series == {merged}  # no series for a task the new layout retired


def test_a_reshard_keeps_the_last_probes_backlog_until_the_next_probe_reads_its_partitions():
    """A Kinesis split: shard 0's children 1 and 2 wait under it (500 records) while its tasks
    are 600 behind; then the pipeline adopts them as the next generation. Until the next probe
    the gauges read what the last one saw (1,100 under shard 0), not the children against marks
    the probe never took (none: the backlog read 3-27 records at every re-shard of runs v1-v4).
    The next probe reads the new layout."""
    metrics = PipelineMetrics("j")
    old = Layout(topics={"orders": 1}, factor=1)
    new = Layout(topics={"orders": 3}, factor=1, generation=2)
    (task,) = (t.name for t in old.virtual_tasks())
    metrics.started(old, {(task, "orders", 0): 0})
    _commit(metrics, {task: 900})
    metrics.observe_lag({("orders", 0): 1500}, {("orders", 0): 4.0}, waiting={("orders", 0): 500})
    assert metrics.partition_lag() == {("orders", 0): 1100}
    children = {(t.name, *tp): 0 for t in new.virtual_tasks() for tp in t.partitions if tp != ("orders", 0)}
    metrics.started(new, children)
    assert metrics.partition_lag() == {("orders", 0): 1100}
    metrics.observe_lag({("orders", 1): 260, ("orders", 2): 240}, {("orders", 1): 5.0, ("orders", 2): 5.0},
                        positions=children)
    assert metrics.partition_lag() == {("orders", 1): 260, ("orders", 2): 240}


def test_a_tasks_record_times_are_its_sum_and_count_and_their_distribution_one_histogram_for_the_job():
    """Per task the daemon reads `_sum` and `_count` (busy time, time per record); the buckets,
    13 series a task that no query read, were 61% of the exposition (4,096 tasks: 86,330 lines,
    0.53 s of the driver's CPU a scrape). They are summed into one histogram for the job."""
    layout = Layout(topics={"orders": 2}, factor=4)
    tasks = layout.virtual_tasks()
    metrics = PipelineMetrics("j")
    metrics.started(layout, {(t.name, *tp): 0 for t in tasks for tp in t.partitions})
    histogram = (0, 3, 1) + (0,) * (len(PROCESS_TIME_BUCKETS) - 2)  # 4 records a task
    progress = [TaskProgress(t.name, *sorted(t.partitions)[0], 4, records=4, process_ns=20_000_000,
                             histogram=histogram) for t in tasks]
    metrics.observe_batch(progress,
                          {(p.task, p.topic, p.partition): p.next_offset for p in progress}, 1.0)
    registry = CollectorRegistry()
    registry.register(metrics)
    text = generate_latest(registry).decode()
    assert 'autosizer_pipeline_process_seconds_bucket' not in text
    for task in tasks:
        assert f'autosizer_pipeline_process_seconds_count{{task="{task.name}"}} 4.0' in text
        assert f'autosizer_pipeline_process_seconds_sum{{task="{task.name}"}} 0.02' in text
    assert f'autosizer_pipeline_record_seconds_bucket{{le="+Inf"}} {4.0 * len(tasks)}' in text
    assert f'autosizer_pipeline_record_seconds_sum {0.02 * len(tasks)}' in text
    assert text.count("_bucket{") == len(PROCESS_TIME_BUCKETS) + 1


def test_what_no_query_reads_per_task_is_one_series_of_the_job_or_the_partition():
    """The outputs, the CPU, the threads busy and the records left at the deadline were five of
    a task's ten series (4,096 tasks: 41,427 lines a scrape, 21,012 without them) and no query
    read them per task; the job's and the partitions' sums keep what they told."""
    layout = Layout(topics={"orders": 2}, factor=4)
    tasks = layout.virtual_tasks()
    metrics = PipelineMetrics("j")
    metrics.started(layout, {(t.name, *tp): 0 for t in tasks for tp in t.partitions})
    progress = [TaskProgress(t.name, *sorted(t.partitions)[0], 4, records=4, outputs=3, process_ns=250_000_000,
                             pending=t.bucket, cpu_ns=100_000_000, histogram=(4,) + (0,) * len(PROCESS_TIME_BUCKETS))
                for t in tasks]
    metrics.observe_batch(progress, {(p.task, p.topic, p.partition): 4 for p in progress}, 0.5)
    metrics.observe_lag({tp: 10 for tp in layout.partitions()}, {tp: 1.0 for tp in layout.partitions()})
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.collect()
               for s in family.samples}
    assert samples[("autosizer_pipeline_records_out_total", ())] == 3 * 8
    assert samples[("autosizer_pipeline_cpu_seconds_total", ())] == 0.1 * 8
    assert samples[("autosizer_pipeline_busy_threads", ())] == 0.25 * 8 / 0.5  # four threads' worth
    for partition in ("0", "1"):  # buckets 0-3 left 0 + 1 + 2 + 3 records
        assert samples[("autosizer_pipeline_pending_records", (("partition", partition), ("topic", "orders")))] == 6
    per_task = {name for name, labels in samples if any(k == "task" for k, _ in labels)}
    assert per_task == {"autosizer_pipeline_task_lag_records", "autosizer_pipeline_records_in_total",
                        "autosizer_pipeline_process_seconds_sum", "autosizer_pipeline_process_seconds_count"}


def test_each_slots_setup_shows_as_its_wall_time_beyond_its_busiest_threads_work():
    """What a slot spends outside its records (the commit latency holds it) is readable per
    slot: its wall time and, of it, its busiest thread's time on records."""
    from autosizer.pipeline.metrics import SlotStats

    metrics = PipelineMetrics("j")
    layout = Layout(topics={"orders": 1}, factor=1)
    task = layout.virtual_tasks()[0].name
    metrics.started(layout, {(task, "orders", 0): 0})
    progress = [TaskProgress(task, "orders", 0, 80, records=80)]
    metrics.observe_batch(progress, {(task, "orders", 0): 80}, 1.0,
                          slots={0: SlotStats(80, 0.85, 0.01, 80, 0.84)})
    samples = {s.name: s for family in metrics.collect() for s in family.samples if s.name.startswith("autosizer_pipeline_slot")}
    assert samples["autosizer_pipeline_slot_seconds"].value == 0.85
    assert samples["autosizer_pipeline_slot_busiest_seconds"].value == 0.84
    assert samples["autosizer_pipeline_slot_busiest_seconds"].labels == {"slot": "0"}
