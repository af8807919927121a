"""Prometheus metrics: one container per component on an injected registry, and the exporter."""

from mirror.metrics.checkpoints import CheckpointMetrics, HeartbeatMetrics
from mirror.metrics.exporter import serve
from mirror.metrics.source import SourceMetrics

__all__ = ["CheckpointMetrics", "HeartbeatMetrics", "SourceMetrics", "serve"]
