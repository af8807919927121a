"""Serve a registry at http://host:port/metrics from the driver."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

from mirror.errors import ConfigError


def serve(registry: CollectorRegistry, host: str, port: int, *, setting: str = "metrics.port") -> None:
    """`setting` names what the user changes when the port is taken."""
    try:
        start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(
            [f"metrics: cannot listen on {host}:{port} ({exc.strerror}); set {setting} to a free port"]
        ) from exc
