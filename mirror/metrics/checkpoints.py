"""The checkpoint and heartbeat components' metrics, including the ones MM2 users build themselves.

MM2's checkpoint-latency-ms only times the produce call (MM2.md 5). These say how far behind the
translation is, how much a moved consumer would re-read, which groups are held back because they
are active on the target, and, from heartbeats, how old the data arriving on each path can be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector


class _AgeCollector(Collector):
    """A gauge whose value is "seconds since <timestamp>", computed when Prometheus scrapes."""

    def __init__(self, name: str, documentation: str, labels: tuple[str, ...]) -> None:
        self._name, self._documentation, self._labels = name, documentation, labels
        self._since: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()

    def set_since(self, labels: tuple[str, ...], timestamp: float) -> None:
        with self._lock:
            self._since[labels] = max(timestamp, self._since.get(labels, timestamp))

    def age(self, labels: tuple[str, ...]) -> float | None:
        with self._lock:
            since = self._since.get(labels)
        return None if since is None else max(0.0, time.time() - since)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self._name, self._documentation, labels=self._labels)
        now = time.time()
        with self._lock:
            for labels, since in sorted(self._since.items()):
                family.add_metric(list(labels), max(0.0, now - since))
        yield family


class CheckpointMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.delay = _AgeCollector(
            "mirror_checkpoint_delay_seconds",
            "Per group: age of the source offsets its current checkpoints on the target translate",
            ("flow", "group"),
        )
        registry.register(self.delay)
        self.translated_lag = Gauge(
            "mirror_checkpoint_translated_lag_records",
            "Remote partition end minus the group's translated offset (what a moved consumer reads next)",
            ("flow", "group", "topic", "partition"),
            registry=registry,
        )
        self.emitted = Counter(
            "mirror_checkpoints_emitted", "Checkpoint records committed", ("flow",), registry=registry
        )
        self.group_syncs = Counter(
            "mirror_group_offset_syncs",
            "Target group offset syncs by outcome (synced, active, unchanged, failed)",
            ("flow", "outcome"),
            registry=registry,
        )
        self.skipped = Counter(
            "mirror_checkpoint_records_skipped",
            "Records of the checkpoints or offset-syncs topic that do not decode and were left out "
            "(as MM2 leaves them out); counted again if the state is re-read",
            ("flow", "topic"),
            registry=registry,
        )
        self.active = Gauge(
            "mirror_group_sync_skipped_active",
            "1 while the group has members on the target, so its offsets are left alone",
            ("flow", "group"),
            registry=registry,
        )

    def record_round(self, flow: str, rows: list[dict[str, Any]]) -> None:
        listed: dict[str, float] = {}
        for row in rows:
            group = row["group"]
            if row["kind"] == "checkpoint":
                listed[group] = row["listed_at"]
                if row["emitted"]:
                    self.emitted.labels(flow).inc()
                if row["remote_end"] >= 0:
                    lag = max(0, row["remote_end"] - row["downstream"])
                    self.translated_lag.labels(flow, group, row["topic"], str(row["partition"])).set(lag)
            elif row["kind"] == "group":
                self.group_syncs.labels(flow, row["outcome"]).inc()
                self.active.labels(flow, group).set(1 if row["outcome"] == "active" else 0)
            elif row["kind"] == "skipped":
                self.skipped.labels(flow, row["topic"]).inc(row["partitions"])
        for group, listed_at in listed.items():
            self.delay.set_since((flow, group), listed_at)


class HeartbeatMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.emitted = Counter(
            "mirror_heartbeats_emitted",
            "Heartbeats committed, by the pair they name",
            ("source", "target"),
            registry=registry,
        )
        self.age = _AgeCollector(
            "mirror_heartbeat_age_seconds",
            "Per replication path into the target: age of the newest heartbeat that arrived (an RPO bound)",
            ("path",),
        )
        registry.register(self.age)
        self.failed = Counter(
            "mirror_heartbeats_failed",
            "Heartbeats that could not be written (the cluster they go to not answering)",
            ("source", "target"),
            registry=registry,
        )
        self.skipped = Counter(
            "mirror_heartbeat_records_skipped",
            "Records of a remote heartbeats topic that do not decode and were left out",
            ("topic",),
            registry=registry,
        )
        self.delay = Gauge(
            "mirror_heartbeat_replication_delay_seconds",
            "Per replication path: from the newest heartbeat's emission to its arrival on the target",
            ("path",),
            registry=registry,
        )

    def record_round(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if row["kind"] == "emitted":
                self.emitted.labels(row["source"], row["target"]).inc()
            elif row["kind"] == "failed":
                self.failed.labels(row["source"], row["target"]).inc()
            elif row["kind"] == "skipped":
                self.skipped.labels(row["topic"]).inc(row["count"])
            elif row["kind"] == "seen":
                self.age.set_since((row["path"],), row["timestamp_ms"] / 1000)
                self.delay.labels(row["path"]).set(max(0.0, (row["seen_ms"] - row["timestamp_ms"]) / 1000))
