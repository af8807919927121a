"""Metrics of the independent heartbeat monitor (`mirror heartbeats --serve-metrics`).

It watches a cluster's heartbeats topics without running any flow, so an operator can alert on the
recovery point from outside the replicator: the replicator's own metrics vanish when it dies, the
heartbeats on the target do not. Ages are computed at scrape time from the newest heartbeat's
timestamp, so they keep growing while nothing arrives. The series carry the names `mirror run`
exports for the same paths, so the same dashboards and alerts read either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class PathReading(Protocol):
    @property
    def path(self) -> str: ...
    @property
    def hops(self) -> int: ...
    @property
    def age_seconds(self) -> float: ...
    @property
    def delay_seconds(self) -> float | None: ...


class Watch(Protocol):
    def paths(self) -> Sequence[PathReading]: ...
    def skipped(self) -> dict[str, int]: ...


class HeartbeatMonitorMetrics:
    def __init__(self, registry: CollectorRegistry, cluster: str, watch: Watch) -> None:
        self.polls = Counter(
            "mirror_heartbeat_monitor_polls",
            "Reads of the watched cluster's heartbeats topics by outcome (failed: no answer)",
            ("cluster", "outcome"),
            registry=registry,
        )
        for outcome in ("ok", "failed"):
            self.polls.labels(cluster, outcome)
        registry.register(_PathCollector(watch))


class _PathCollector(Collector):
    def __init__(self, watch: Watch) -> None:
        self._watch = watch

    def collect(self) -> Iterator[Metric]:
        readings = self._watch.paths()
        age = GaugeMetricFamily(
            "mirror_heartbeat_age_seconds",
            "Per replication path into the cluster: age of the newest heartbeat that arrived (an RPO bound)",
            labels=["path"],
        )
        delay = GaugeMetricFamily(
            "mirror_heartbeat_replication_delay_seconds",
            "Per replication path: from the newest heartbeat's emission to its arrival on the cluster",
            labels=["path"],
        )
        # Only replicated heartbeats measure a path (the cluster's own `heartbeats` topic is written
        # there directly), and one sample per path: the newest heartbeat of any topic on it.
        newest: dict[str, PathReading] = {}
        for reading in readings:
            if reading.hops > 0 and (
                reading.path not in newest or reading.age_seconds < newest[reading.path].age_seconds
            ):
                newest[reading.path] = reading
        for path, reading in sorted(newest.items()):
            age.add_metric([path], reading.age_seconds)
            if reading.delay_seconds is not None:
                delay.add_metric([path], reading.delay_seconds)
        skipped = CounterMetricFamily(
            "mirror_heartbeat_records_skipped",
            "Records of a heartbeats topic that do not decode and were left out",
            labels=["topic"],
        )
        for topic, count in sorted(self._watch.skipped().items()):
            skipped.add_metric([topic], count)
        yield from (age, delay, skipped)
