"""Prometheus metrics: one container per component on an injected registry, and the exporter."""

from mirror.metrics.checkpoints import CheckpointMetrics, HeartbeatMetrics
from mirror.metrics.exporter import serve
from mirror.metrics.process import RunMetrics
from mirror.metrics.source import SourceMetrics

__all__ = ["CheckpointMetrics", "HeartbeatMetrics", "RunMetrics", "SourceMetrics", "serve"]
