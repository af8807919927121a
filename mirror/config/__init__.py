"""Configuration: the only reader of mm2.yaml and MIRROR_* environment variables.

Lazy: `mirror.config.flow_settings` is imported on Spark executors, which need no pydantic
(about 0.3 s a worker), so the loader and the models load only when one of their names is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirror.config.cluster import ClusterConfig
    from mirror.config.loader import load_config, render_effective_config
    from mirror.config.models import FlowConfig, MetricsConfig, MirrorConfig, SparkConfig

__all__ = [
    "ClusterConfig",
    "FlowConfig",
    "MetricsConfig",
    "MirrorConfig",
    "SparkConfig",
    "load_config",
    "render_effective_config",
]

_MODULES = {
    "load_config": "mirror.config.loader",
    "render_effective_config": "mirror.config.loader",
    "ClusterConfig": "mirror.config.cluster",
    "FlowConfig": "mirror.config.models",
    "MetricsConfig": "mirror.config.models",
    "MirrorConfig": "mirror.config.models",
    "SparkConfig": "mirror.config.models",
}


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once; later uses find it in the module
    return value
