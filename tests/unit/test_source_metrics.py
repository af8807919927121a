"""The source metrics per partition (the default) and per topic (`metrics: {per_partition: false}`,
for flows of thousands of partitions): the same totals, with or without the partition label."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mirror.metrics import SourceMetrics


def _stats(
    records: dict[str, tuple[int, int]],
    ages: dict[str, float],
    throttled: float = 0.0,
    *,
    task: int = 0,
    paused: int | None = None,
    epoch: float | None = None,
) -> dict[str, Any]:
    return {
        "flow": "A->B",
        "task": task,
        "paused": paused,
        "epoch": time.time() + 600 if epoch is None else epoch,
        "records": records,
        "truncated": {},
        "copied_then_lost": {},
        "ages": ages,
        "latencies": [],
        "transactions": 1,
        "aborted": 0,
        "fenced": 0,
        "throttled": throttled,
    }


def _samples(metrics: SourceMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in getattr(metrics, name).collect()
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


@pytest.mark.parametrize("per_partition", [True, False], ids=["per-partition", "per-topic"])
def test_records_age_and_lag_add_up_the_same_with_or_without_the_partition_label(per_partition: bool) -> None:
    metrics = SourceMetrics(CollectorRegistry(), per_partition=per_partition)
    metrics.record_task_stats(_stats({"orders:0": (10, 100), "orders:1": (5, 50)}, {"orders:0": 2.0}))
    metrics.record_task_stats(_stats({"orders:1": (1, 10)}, {"orders:1": 7.0}))
    metrics.record_lag("A->B", {("orders", 0): 3, ("orders", 1): 4})

    records, ages, lag = (_samples(metrics, name) for name in ("records", "record_age", "lag"))
    flow, topic = ("flow", "A->B"), ("topic", "orders")
    if per_partition:
        assert records == {(flow, ("partition", "0"), topic): 10, (flow, ("partition", "1"), topic): 6}
        assert ages == {(flow, ("partition", "0"), topic): 2.0, (flow, ("partition", "1"), topic): 7.0}
        assert lag == {(flow, ("partition", "0"), topic): 3, (flow, ("partition", "1"), topic): 4}
    else:
        assert records == {(flow, topic): 16}
        assert ages == {(flow, topic): 7.0}, "a topic's age is its oldest partition's"
        assert lag == {(flow, topic): 7}

    metrics.record_lag("A->B", None)
    assert _samples(metrics, "lag") == {}


def test_a_lag_series_dropped_and_read_again_shows_the_new_reading() -> None:
    metrics = SourceMetrics(CollectorRegistry())
    series = (("flow", "A->B"), ("partition", "0"), ("topic", "orders"))
    metrics.record_lag("A->B", {("orders", 0): 3, ("orders", 1): 4})
    metrics.record_lag("A->B", {("orders", 1): 4})  # orders-0 no longer selected: its series goes
    assert series not in _samples(metrics, "lag")

    metrics.record_lag("A->B", {("orders", 0): 9})

    assert _samples(metrics, "lag") == {series: 9}


def test_a_throttled_flow_shows_its_rate_and_the_seconds_its_tasks_waited_from_the_start() -> None:
    metrics = SourceMetrics(CollectorRegistry())
    metrics.record_throttle("A->B", 1_048_576.0)
    metrics.record_throttle("B->A", None)

    assert _samples(metrics, "throttle") == {(("flow", "A->B"),): 1_048_576.0}
    assert _samples(metrics, "throttle_wait") == {(("flow", "A->B"),): 0.0}, "0 before the first wait"

    metrics.record_task_stats(_stats({"orders:0": (10, 100)}, {}, throttled=0.75))
    metrics.record_task_stats(_stats({"orders:0": (10, 100)}, {}, throttled=0.5))

    assert _samples(metrics, "throttle_wait") == {(("flow", "A->B"),): 1.25}


def test_the_idle_partitions_paused_add_up_over_the_flows_tasks_each_as_it_last_said() -> None:
    metrics = SourceMetrics(CollectorRegistry())
    epoch = time.time() + 600
    metrics.record_task_stats(_stats({}, {}, task=0, paused=2500, epoch=epoch))
    metrics.record_task_stats(_stats({}, {}, task=1, paused=2400, epoch=epoch))
    metrics.record_task_stats(_stats({"orders:0": (10, 100)}, {}, task=1, epoch=epoch))  # no change said
    assert _samples(metrics, "idle_paused") == {(("flow", "A->B"),): 4900}
    metrics.record_task_stats(_stats({}, {}, task=0, paused=0, epoch=epoch))  # woke them all, or ended
    assert _samples(metrics, "idle_paused") == {(("flow", "A->B"),): 2400}


def test_a_task_of_the_epoch_before_closing_late_leaves_its_successors_count() -> None:
    metrics = SourceMetrics(CollectorRegistry())
    before, now = time.time() - 5, time.time() + 595
    metrics.record_task_stats(_stats({}, {}, task=0, paused=2500, epoch=before))
    metrics.record_task_stats(_stats({}, {}, task=0, paused=2000, epoch=now))
    metrics.record_task_stats(_stats({}, {}, task=0, paused=0, epoch=before))
    assert _samples(metrics, "idle_paused") == {(("flow", "A->B"),): 2000}


def test_a_count_of_an_epoch_long_over_is_not_counted_as_of_a_task_killed_before_it_said_0() -> None:
    metrics = SourceMetrics(CollectorRegistry())
    metrics.record_task_stats(_stats({}, {}, task=0, paused=2500, epoch=time.time() - 3600))
    metrics.record_task_stats(_stats({}, {}, task=1, paused=100))
    assert _samples(metrics, "idle_paused") == {(("flow", "A->B"),): 100}
