"""The source component's metrics: MM2's MirrorSourceMetrics counterparts, plus what MM2 lacks.

Fed on the driver from the executors' per-range stats rows and from Spark's progress.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class SourceMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        partition_labels = ("flow", "topic", "partition")
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
            "Age of the oldest record of the last committed range, at its commit",
            partition_labels,
            registry=registry,
        )
        self.replication_latency = Histogram(
            "mirror_source_replication_latency_seconds",
            "Per committed range: time from its oldest record's timestamp to its commit on the target",
            ("flow",),
            buckets=_LATENCY_BUCKETS,
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
            "Range transactions by outcome",
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
        self.errors = Counter("mirror_errors", "Errors by kind", ("flow", "kind"), registry=registry)

    def record_ranges(self, flow: str, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            labels = (flow, row["topic"], str(row["partition"]))
            self.records.labels(*labels).inc(row["records"])
            self.bytes.labels(*labels).inc(row["bytes"])
            if row["truncated_records"]:
                self.truncated.labels(*labels).inc(row["truncated_records"])
            self.fenced.labels(flow).inc(row["fenced"])
            self.transactions.labels(flow, "aborted").inc(row["aborted"])
            if not row["skipped"]:
                self.transactions.labels(flow, "committed").inc()
            if row["records"]:
                self.record_age.labels(*labels).set(row["max_record_age_seconds"])
                self.replication_latency.labels(flow).observe(row["max_record_age_seconds"])

    def record_lag(self, flow: str, lag: Mapping[tuple[str, int], int]) -> None:
        for (topic, partition), records in lag.items():
            self.lag.labels(flow, topic, str(partition)).set(records)
