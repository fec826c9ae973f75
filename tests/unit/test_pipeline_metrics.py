"""The lag gauges read one moment: the probe's watermark less the positions of that moment."""

from autosizer.elasticity import Layout
from autosizer.pipeline.metrics import PipelineMetrics
from autosizer.pipeline.slots import TaskProgress


def _gauges(metrics: PipelineMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in metrics.collect()
            for s in family.samples if s.name.endswith("lag_records")}


def _commit(metrics: PipelineMetrics, offsets: dict[str, int]) -> None:
    progress = [TaskProgress(task, "orders", 0, offset, records=1) for task, offset in offsets.items()]
    metrics.observe_batch(progress, dict.fromkeys(offsets, 1), {(t, "orders", 0): o for t, o in offsets.items()}, 1.0)


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
