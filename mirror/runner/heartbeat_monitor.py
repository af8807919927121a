"""`mirror heartbeats --serve-metrics`: watch one cluster's heartbeats topics and export, per
replication path, the newest heartbeat's age and delay, until stopped. No flow runs here, so it keeps
answering (with growing ages) while `mirror run` is stopped or dead, and while the watched cluster
does not answer: those reads count as failed polls and the ages grow from the last heartbeat seen."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from prometheus_client import CollectorRegistry

from mirror.client.mirror_client import HeartbeatWatch, MirrorClient
from mirror.errors import ConfigError, KafkaClientError
from mirror.metrics import serve
from mirror.metrics.heartbeat_monitor import HeartbeatMonitorMetrics

POLL_SECONDS = 1.0
READ_TIMEOUT_SECONDS = 10.0


def parse_address(address: str) -> tuple[str, int]:
    """`[HOST:]PORT` -> (host, port); HOST defaults to 127.0.0.1."""
    host, _, port = address.rpartition(":")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError([f"--serve-metrics {address!r}: expected [HOST:]PORT, e.g. 9465 or 0.0.0.0:9465"])
    return host or "127.0.0.1", int(port)


def monitor_heartbeats(
    client: MirrorClient,
    address: str,
    *,
    stop: threading.Event | None = None,
    out: Callable[[str], None] = print,
) -> int:
    host, port = parse_address(address)
    stop = stop if stop is not None else threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    watch = HeartbeatWatch(client)
    registry = CollectorRegistry()
    metrics = HeartbeatMonitorMetrics(registry, client.alias, watch)
    serve(registry, host, port, setting="--serve-metrics")
    out(f"watching the heartbeats topics of {client.alias}; metrics at http://{host}:{port}/metrics")
    failing, reported = False, set[str]()
    try:
        while not stop.is_set():
            try:
                watch.poll(timeout_seconds=READ_TIMEOUT_SECONDS)
            except KafkaClientError as exc:
                metrics.polls.labels(client.alias, "failed").inc()
                if not failing:
                    out(f"warning: cluster {client.alias}: {exc}; the ages grow until it answers again")
                failing = True
            else:
                metrics.polls.labels(client.alias, "ok").inc()
                if failing:
                    out(f"cluster {client.alias} answers again")
                failing = False
            for topic in watch.errors.keys() - reported:
                out(f"warning: {topic} on {client.alias} cannot be read: {watch.errors[topic]}")
            reported = set(watch.errors)
            stop.wait(POLL_SECONDS)
    finally:
        watch.close()
    return 0
