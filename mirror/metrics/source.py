"""The source component's metrics: MM2's MirrorSourceMetrics counterparts, plus what MM2 lacks.

Fed on the driver from the copy tasks' stats messages (mirror.source.stats) and lag readings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


# How long past its deadline an epoch's tasks may still be closing.
EPOCH_OVER_SECONDS = 120.0


class SourceMetrics:
    """With `per_partition` False the per-partition series keep one series per topic instead (no
    `partition` label): counters summed, lag summed, record age the oldest of the topic's
    partitions. At 10,000 partitions that is the difference between a page of tens of thousands of
    series and one of a few thousand."""

    def __init__(self, registry: CollectorRegistry, *, per_partition: bool = True) -> None:
        self._per_partition = per_partition
        partition_labels = ("flow", "topic", "partition") if per_partition else ("flow", "topic")
        self._lag_series: dict[str, set[tuple[str, ...]]] = {}
        self._ages: dict[tuple[str, str], dict[str, float]] = {}  # per topic: age per partition
        # Each series' child, kept: `labels()` validates and looks its labels up on every call,
        # and at 10,000 partitions a lag reading took the driver ~1 s of CPU in it.
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self.records = Counter(
            "mirror_source_records", "Records copied to the target", partition_labels, registry=registry
        )
        self.bytes = Counter(
            "mirror_source_bytes",
            "Key and value bytes copied to the target",
            partition_labels,
            registry=registry,
        )
        self.record_age = Gauge(
            "mirror_source_record_age_seconds",
            "Per partition: age of the oldest record of the last transaction that copied it, at commit",
            partition_labels,
            registry=registry,
        )
        self.replication_latency = Histogram(
            "mirror_source_replication_latency_seconds",
            "Per committed transaction: time from its oldest record's timestamp to its commit on the target",
            ("flow",),
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.epoch_gap = Histogram(
            "mirror_source_epoch_gap_seconds",
            "Between two Spark epochs of copy tasks: last task of one ending to first of the next copying",
            ("flow",),
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=registry,
        )
        self.lag = Gauge(
            "mirror_source_lag_records",
            "Source end offset minus the committed position",
            partition_labels,
            registry=registry,
        )
        self.transactions = Counter(
            "mirror_source_transactions",
            "Copy task transactions by outcome",
            ("flow", "outcome"),
            registry=registry,
        )
        self.fenced = Counter(
            "mirror_source_producers_fenced",
            "Producers found fenced and re-created",
            ("flow",),
            registry=registry,
        )
        self.truncated = Counter(
            "mirror_source_truncated_records",
            "Records deleted on the source before they could be copied",
            partition_labels,
            registry=registry,
        )
        self.copied_then_lost = Counter(
            "mirror_source_copied_then_lost_records",
            "Source offsets already copied that the source log then lost (an unclean leader election "
            "truncated it); the target keeps those records",
            partition_labels,
            registry=registry,
        )
        self.errors = Counter("mirror_errors", "Errors by kind", ("flow", "kind"), registry=registry)
        self.throttle = Gauge(
            "mirror_source_throttle_bytes_per_second",
            "The flow's throttle_bytes_per_second, shared by its copy tasks (no series: not throttled)",
            ("flow",),
            registry=registry,
        )
        self.idle_paused = Gauge(
            "mirror_source_idle_paused_partitions",
            "Partitions the flow's copy tasks do not fetch while they are idle, until the source "
            "holds more of them (tasks of over 1,000 partitions; asked every second)",
            ("flow",),
            registry=registry,
        )
        # (flow, task, its epoch's deadline) -> the task's paused partitions. Each task's stats come
        # on a connection of its own, each served by a thread of its own.
        self._paused: dict[tuple[str, int, float], int] = {}
        self._paused_lock = threading.Lock()
        self.throttle_wait = Counter(
            "mirror_source_throttle_wait_seconds",
            "Time the flow's copy tasks spent waiting on its throttle, summed over the tasks",
            ("flow",),
            registry=registry,
        )

    def record_task_stats(self, message: dict[str, Any]) -> None:
        """One copy task's stats message (mirror.source.stats.TaskStats.message)."""
        flow = message["flow"]
        for key, (records, size) in message["records"].items():
            labels = self._labels(flow, key)
            self._child(self.records, labels).inc(records)
            self._child(self.bytes, labels).inc(size)
        for key, age in message["ages"].items():
            if self._per_partition:
                self._child(self.record_age, self._labels(flow, key)).set(age)
            else:
                topic, _, partition = key.rpartition(":")
                ages = self._ages.setdefault((flow, topic), {})
                ages[partition] = age
                self._child(self.record_age, (flow, topic)).set(max(ages.values()))
        for key, records in message["truncated"].items():
            self._child(self.truncated, self._labels(flow, key)).inc(records)
        for key, records in message["copied_then_lost"].items():
            self._child(self.copied_then_lost, self._labels(flow, key)).inc(records)
        self.fenced.labels(flow).inc(message["fenced"])
        if message["paused"] is not None:
            self._record_paused(flow, message["task"], message["epoch"], message["paused"])
        if message["throttled"]:
            self.throttle_wait.labels(flow).inc(message["throttled"])
        self.transactions.labels(flow, "aborted").inc(message["aborted"])
        self.transactions.labels(flow, "committed").inc(message["transactions"])
        for latency in message["latencies"]:
            self.replication_latency.labels(flow).observe(latency)

    def _record_paused(self, flow: str, task: int, epoch: float, paused: int) -> None:
        """A task's count, by epoch: a task of the epoch before may close (saying 0) after its
        successor said how many it paused. An epoch long over holds none: its task was killed
        before it could say so."""
        with self._paused_lock:
            key = (flow, task, epoch)
            if paused:
                self._paused[key] = paused
            else:
                self._paused.pop(key, None)
            over = time.time() - EPOCH_OVER_SECONDS
            for old in [k for k in self._paused if k[2] < over]:
                del self._paused[old]
            self.idle_paused.labels(flow).set(sum(n for (f, _, _), n in self._paused.items() if f == flow))

    def record_throttle(self, flow: str, bytes_per_second: float | None) -> None:
        if bytes_per_second is not None:
            self.throttle.labels(flow).set(bytes_per_second)
            self.throttle_wait.labels(flow)  # 0 from the start, not from the first wait

    def record_lag(self, flow: str, lag: Mapping[tuple[str, int], int] | None) -> None:
        """The flow's lag per partition (or per topic); None (unknown) removes its series rather
        than leave the last numbers standing, and a partition no longer selected loses its own."""
        now: dict[tuple[str, ...], int] = {}
        for (topic, partition), records in (lag or {}).items():
            key = (topic, str(partition)) if self._per_partition else (topic,)
            now[key] = now.get(key, 0) + records
        for labels in self._lag_series.get(flow, set()) - now.keys():
            self.lag.remove(flow, *labels)
            self._children.pop((id(self.lag), (flow, *labels)), None)
        for labels, records in now.items():
            self._child(self.lag, (flow, *labels)).set(records)
        self._lag_series[flow] = set(now)

    def _child(self, metric: Any, labels: tuple[str, ...]) -> Any:
        """`metric.labels(*labels)`, looked up once per series."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def _labels(self, flow: str, key: str) -> tuple[str, ...]:
        """A stats message's "topic:partition" key as this registry's labels."""
        topic, _, partition = key.rpartition(":")
        return (flow, topic, partition) if self._per_partition else (flow, topic)
