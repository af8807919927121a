"""Prometheus metrics: one container per component on an injected registry, and the exporter."""

from mirror.metrics.exporter import serve
from mirror.metrics.source import SourceMetrics

__all__ = ["SourceMetrics", "serve"]
