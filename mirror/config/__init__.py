"""Configuration: the only reader of mm2.yaml and MIRROR_* environment variables."""

from mirror.config.loader import load_config, render_effective_config
from mirror.config.models import ClusterConfig, FlowConfig, MetricsConfig, MirrorConfig, SparkConfig

__all__ = [
    "ClusterConfig",
    "FlowConfig",
    "MetricsConfig",
    "MirrorConfig",
    "SparkConfig",
    "load_config",
    "render_effective_config",
]
