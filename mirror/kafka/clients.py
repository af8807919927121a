"""Kafka client factories and the translation of librdkafka errors into MirrorErrors."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from mirror.errors import ClusterUnreachableError, KafkaClientError

# Right after a topic is created its leader may not be known everywhere yet.
_TRANSIENT_CODES = {
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
}

# librdkafka logs to stderr on its own (connection refusals, "fenced" when a partition's producer
# moves between workers). mirror reports what matters itself, so its log goes to a Python logger
# that only --debug shows.
LIBRDKAFKA_LOG = logging.getLogger("mirror.librdkafka")
LIBRDKAFKA_LOG.setLevel(logging.CRITICAL + 1)  # silent in every process, executors included
_QUIET = {"logger": LIBRDKAFKA_LOG}


def admin_client(properties: Mapping[str, str]) -> AdminClient:
    return AdminClient({**_QUIET, **properties})


def consumer(properties: Mapping[str, str]) -> Consumer:
    return Consumer({**_QUIET, **properties})


def producer(properties: Mapping[str, str]) -> Producer:
    return Producer({**_QUIET, **properties})


def wait_until_reachable(properties: Mapping[str, str], *, timeout_seconds: float, what: str) -> None:
    """Return once a broker answers a metadata request; ClusterUnreachableError after the timeout."""
    bootstrap = properties.get("bootstrap.servers", "?")
    admin = admin_client(properties)
    deadline = time.monotonic() + timeout_seconds
    last: Exception | None = None
    while True:
        remaining = deadline - time.monotonic()
        try:
            admin.list_topics(timeout=max(0.5, min(remaining, 2.0)))
            return
        except KafkaException as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise ClusterUnreachableError(
                f"{what}: no Kafka broker answered at {bootstrap} within {timeout_seconds:g}s "
                f"({_reason(last)}); "
                "check bootstrap_servers and that the cluster is up"
            )


def _reason(exc: Exception | None) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].str())
    return str(exc) if exc else "no answer"


T = TypeVar("T")


def retrying(action: Callable[[], T], *, doing: str, timeout_seconds: float = 30.0) -> T:
    """Run `action`, retrying librdkafka's retriable errors (leader moves, a topic just created)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        try:
            return action()
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            retriable = error is not None and (error.retriable() or error.code() in _TRANSIENT_CODES)
            if not retriable or time.monotonic() >= deadline:
                raise translate(exc, doing) from exc
        time.sleep(0.2)


def translate(exc: KafkaException, doing: str) -> KafkaClientError:
    """A KafkaClientError that says what we were doing and what the broker said."""
    error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    detail = error.str() if error is not None else str(exc)
    return KafkaClientError(f"{doing}: {detail}")
